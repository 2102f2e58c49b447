//! TC-11 the source-stall latch.
//!
//! KVCR refuses every source write, for the life of the process, once a
//! progress loop was late by `operation_timeout_ms` (the
//! `operation_timeout_ms` knob; kvcr 0.1.1 `dangling_ops.check_source_progress`).
//! Provoked for real: SIGSTOP worker A (the source) for 0.4 × the timeout,
//! then SIGCONT: no latch, and the peer B still reads A's blocks. Then
//! SIGSTOP A for the timeout plus 0.5 s (KVCR measures a gap of at least
//! the stop; 1 s or more below the Guard's heartbeat timeout):
//! A reports the latch as a fact (the engine's `KVCR resilience event
//! kind=source_stalled` line with its time, `/state` `kvcr_source_stalled`),
//! and a prefix A committed after it is not served to B: B's remote delivery
//! fails, B recomputes every block and answers the reference tokens. A's own
//! commits go on. The latch is expected in this case's logs and nowhere
//! else; A is restarted cleanly at the end (the latch lasts for the process).
//!
//! On vLLM the stops are of the worker's whole process group (KVCR runs in
//! its EngineCore child), the latch is KVCR's own `KVCR source progress
//! stalled` line in the worker's log (no `/state`: recorded as not
//! checked), and B's computed blocks are derived from vLLM's prefix-cache
//! counters.

use std::time::Duration;

use crate::engine::Need;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::verdict::log_scan::BadLine;
use crate::verdict::stall::{
    expect_fallback, expect_latch, expect_no_latch, expect_not_latched_yet,
};
use serde_json::json;

pub const CASE: Case = Case {
    id: "TC-11",
    name: "source_stall_latch",
    destructive: true,
    needs: &[Need::ProductionConditions, Need::Guard],
    optional: &[Need::RelayedKvcrEvents],
    run,
};

/// How much longer than `operation_timeout_ms` the long stop lasts. KVCR
/// measures a gap of at least the stop (4025 ms for a 4000 ms stop on
/// vLLM), so any margin latches.
const PAST_TIMEOUT: Duration = Duration::from_millis(500);
/// How far the Guard's heartbeat timeout must exceed the long stop: the
/// stopped worker's heartbeat must resume within it after SIGCONT (68 ms
/// on vLLM at load 10), or its Guard promotes instead.
const HEARTBEAT_MARGIN: Duration = Duration::from_secs(1);

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let marks = ctx.pressure().log_marks();
    let timeout_ms = ctx.engine().kvcr_operation_timeout_ms().unwrap_or(5000);
    let timeout = Duration::from_millis(timeout_ms);
    let long_stop = timeout + PAST_TIMEOUT;
    if let Some(heartbeat) = ctx.engine().guard_heartbeat_timeout_ms() {
        if Duration::from_millis(heartbeat) < long_stop + HEARTBEAT_MARGIN {
            return Err(CaseError::new(format!(
                "TC-11 stops a source for operation_timeout_ms ({timeout_ms} ms) + {} ms: the Guard's heartbeat timeout ({heartbeat} ms) must exceed that by {} ms, or the Guard promotes instead",
                PAST_TIMEOUT.as_millis(),
                HEARTBEAT_MARGIN.as_millis()
            )));
        }
    }
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let families = ctx.families(3)?;
    let mark = ctx.pressure().log_mark(&a);
    // On vLLM a source can latch in its own startup (a 2.8 s gap while its
    // EngineCore initialized, at load 18): named now, not as a mystery
    // failure of the short stop. (On the CPU engine a latch before the case
    // fails the short stop's verdict, as its curated mutant,
    // p2-stall-latch-early, expects.)
    if !ctx.supports(Need::RelayedKvcrEvents).is_yes() {
        let before = ctx.pressure().latch_since(&a, crate::suite::LogMark(0))?;
        ctx.check(
            "latched-before.json",
            &json!({"latch": before}),
            expect_not_latched_yet(before.as_ref()),
        )?;
    }

    // A short stop: no latch; B still reads A's blocks.
    ctx.commit(&a, families[0].variant(0))?;
    {
        let _stopped = ctx.pressure().stop_worker_process(&a)?;
        std::thread::sleep(timeout.mul_f64(0.4));
    }
    let (a_before, b_before) = (ctx.snapshot(&a)?, ctx.snapshot(&b)?);
    let answer = ctx.complete_on(&b, families[0].variant(1))?;
    ctx.expect_reference(families[0].variant(1), &answer.tokens)?;
    let after_short = ctx.observe().peer_transfer(&a, &a_before, &b, &b_before)?;
    let latch = ctx.pressure().latch_since(&a, mark)?;
    ctx.check(
        "short-stop.json",
        &json!({"stop_ms": timeout_ms as f64 * 0.4, "latch": latch, "transfer": after_short}),
        expect_no_latch(
            latch.as_ref(),
            after_short.transfer.remote_deliver_blocks,
            families[0].shared_blocks(),
        ),
    )?;

    // A long stop: the latch, reported as a fact.
    ctx.commit(&a, families[1].variant(0))?;
    {
        let _stopped = ctx.pressure().stop_worker_process(&a)?;
        std::thread::sleep(long_stop);
    }
    // KVCR checks at its next progress turn, and hands the event to the
    // engine at its next poll: a moment after SIGCONT.
    let latch = ctx
        .pressure()
        .await_latch(&a, mark, Duration::from_secs(10))
        .ok();
    ctx.measure("latch", &latch);
    if latch.as_ref().is_some_and(|l| l.state_stalled.is_none()) {
        ctx.not_checked(
            "the engine's /state says kvcr_source_stalled",
            "this engine answers no /state; the latch is KVCR's own log line",
        );
    }
    ctx.check(
        "latch.json",
        &json!({"stop_ms": long_stop.as_millis(), "latch": latch}),
        expect_latch(latch.as_ref(), "worker-A"),
    )?;

    // The peer falls back: no Guard-served or source-served block, recompute, reference tokens.
    ctx.commit(&a, families[2].variant(0))?;
    let before = ctx.snapshot(&b)?;
    let answer = ctx.complete_on(&b, families[2].variant(1))?;
    ctx.expect_reference(families[2].variant(1), &answer.tokens)?;
    let delta = ctx.delta_since(&b, &before)?;
    let fallback =
        super::unreachable_source::refused_fallback(ctx, &delta, families[2].shared_blocks())?;
    ctx.measure("fallback_computed_blocks", fallback.computed_blocks);
    ctx.check(
        "fallback.json",
        &json!({"fallback": fallback, "delta": delta}),
        expect_fallback(&fallback),
    )?;

    // The latch lasts for the process: restart A cleanly.
    let report = a.process.stop(super::production_common::stop_grace(ctx));
    ctx.record("restart.json", &report);
    ctx.faults().replace("A")?;
    ctx.pressure()
        .expect_no_bad_lines_since(&marks, &[BadLine::SourceStalled])
}
