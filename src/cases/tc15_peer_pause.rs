//! TC-15 peer pause (agg): worker A holds a prefix and is stopped
//! (SIGSTOP of its engine process, verified in state `T`) while worker B is
//! asked for it, hinted to A. B's pull cannot be answered: it must give up
//! within KVCR's abandon timeout and B recompute, answering the reference
//! tokens. A stays stopped past the operation timeout, then gets SIGCONT.
//! KVCR's contract for a source whose progress loop was late by the
//! operation timeout is the source-stall latch (it refuses every source
//! write for the life of the process), so after the pause: A reports the
//! latch, answers its own requests with the reference tokens, and a new
//! hinted pull from A is refused and recomputed by B; transfers from A do
//! not resume until A restarts. A is restarted cleanly at the end.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::engine::Need;
use crate::suite::{Case, CaseCtx, CaseResult};
use crate::verdict::partition::{expect_fallback_of, PAUSED_SOURCE_FALLBACK};
use crate::verdict::stall::{expect_fallback, expect_latch};

pub const CASE: Case = Case {
    id: "TC-15",
    name: "peer_pause",
    destructive: true,
    needs: &[Need::RouterHints, Need::RelayedKvcrEvents],
    optional: &[],
    run,
};

/// How much longer than the operation timeout the pause lasts at least.
const PAST_TIMEOUT: Duration = Duration::from_millis(500);

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let op_timeout = super::unreachable_source::operation_timeout(ctx);
    ctx.measure("operation_timeout_ms", op_timeout.as_millis() as u64);
    let mark = ctx.pressure().log_mark(&a);

    // The pause: B asks for a prefix only the stopped A holds.
    let family = ctx.family()?;
    ctx.commit(&a, family.variant(0))?;
    let stopped = ctx.pressure().stop_worker_process(&a)?;
    let stopped_at = Instant::now();
    let (answer, fallback, delta) =
        super::unreachable_source::ask_without_source(ctx, &b, family.variant(1))?;
    ctx.check(
        "during-pause.json",
        &json!({"fallback": fallback, "delta": delta, "answer": answer}),
        expect_fallback_of(PAUSED_SOURCE_FALLBACK, &fallback),
    )?;
    // Held past the operation timeout (a fault's length, not a wait for
    // state): the source's progress loop is late by more than it.
    let hold = op_timeout + PAST_TIMEOUT;
    if let Some(left) = hold.checked_sub(stopped_at.elapsed()) {
        ctx.doing(format!("holding the pause {} ms more", left.as_millis()))?;
        std::thread::sleep(left);
    }
    ctx.measure("paused_ms", stopped_at.elapsed().as_millis() as u64);
    drop(stopped);

    // After SIGCONT: the latch, A's own service, and B's pull refused.
    let latch = ctx
        .pressure()
        .await_latch(&a, mark, Duration::from_secs(10))
        .ok();
    ctx.check(
        "latch.json",
        &json!({"latch": latch}),
        expect_latch(latch.as_ref(), "worker-A"),
    )?;
    let family = ctx.family()?;
    let own = ctx.commit(&a, family.variant(0))?;
    ctx.measure("own_request_after_pause_ms", own.latency_ms);
    let b_before = ctx.snapshot(&b)?;
    let answer = ctx.complete_on(&b, family.variant(1))?;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let delta = ctx.delta_since(&b, &b_before)?;
    let refused = super::unreachable_source::refused_fallback(ctx, &delta, family.shared_blocks())?;
    ctx.check(
        "after-pause.json",
        &json!({"fallback": refused, "delta": delta}),
        expect_fallback(&refused),
    )?;

    // The latch lasts for the process: restart A cleanly.
    let report = a.process.stop(super::production_common::stop_grace(ctx));
    ctx.record("restart.json", &report);
    ctx.faults().replace("A")?;
    Ok(())
}
