//! TC-22 peer transfers that go wrong, on the `phase3_api` stack (engines
//! keep computed blocks in their own memory, so a peer's read of them waits
//! for the source engine's framework pins; a third worker, C).
//!
//! Two reads meet a pending pin: worker A answers a prompt (the prefix's
//! blocks in A's engine memory only); A's engine is told to hold KVCR's pin
//! requests back (the `withhold_pins` switch), and B and C are asked at
//! once for the prefix with a new suffix, both hinted to A. Once A's KVCR
//! has taken both reads, the switch goes off and A's engine answers, well
//! within the operation timeout. Expect: reference tokens on B and C; A's
//! engine was asked to pin the prefix once, KVCR waited on that one request
//! and wrote the prefix to each reader, then released every pin; B and C
//! each fetched the prefix whole into their pools and delivered it from
//! there.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::engine::Need;
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult, EngineFault, Sending};
use crate::telemetry::{scrape, Counter, Delta, OpResult, Scope, Snapshot};
use crate::verdict::engine_memory::expect_fetched_read;
use crate::verdict::shared_pin::{expect_one_pin_for_two_reads, SharedPin};
use crate::wait::{self, Poll};

pub const CASE: Case = Case {
    id: "TC-22",
    name: "peer_transfer_faults",
    destructive: false,
    needs: &[
        Need::RouterHints,
        Need::EngineMemoryReports,
        Need::FaultSwitches,
    ],
    optional: &[],
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let knobs = &ctx.settings().cpu_engine;
    if !(knobs.framework_regions && knobs.kvcr_fetch) {
        return Err(CaseError::new(
            "TC-22 needs engines that keep their blocks in their own memory and fetch a peer's \
             (cpu_engine.framework_regions and cpu_engine.kvcr_fetch: the phase3-api profile, \
             `cargo test --test phase3_api`)",
        ));
    }
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let c = ctx.worker("C").map_err(|e| {
        CaseError::new(format!(
            "TC-22 needs a third aggregated worker, C (cpu_engine.agg_workers = 3, as the \
             phase3-api profile sets): {}",
            e.message
        ))
    })?;
    two_reads_meet_a_pending_pin(ctx, &a, &b, &c)
}

/// B and C read the prefix from A while A's engine holds the pin back.
fn two_reads_meet_a_pending_pin(ctx: &CaseCtx, a: &Worker, b: &Worker, c: &Worker) -> CaseResult {
    let family = ctx.family()?;
    let shared = family.shared_blocks();
    let bytes_per_block = ctx.geometry().bytes_per_block();
    let prefix = super::tc19_interrupted_source_write::held_by_a_only(ctx, a, &family)?;
    let in_a_pool = ctx.pressure().held_in(a, &prefix, "local")?.len() as u64;
    let withheld = ctx.faults().engine_added("A", EngineFault::WithholdPins)?;
    let (a_before, b_before, c_before) = (ctx.snapshot(a)?, ctx.snapshot(b)?, ctx.snapshot(c)?);
    let sent = Instant::now();
    let a_since = &a_before;
    let (answers, met) = std::thread::scope(|scope| {
        // Both reads taken by A's KVCR while its engine holds the request;
        // then the engine answers the request it kept.
        let releaser = scope.spawn(move || {
            let met = reads_taken(a, a_since, 2);
            drop(withheld);
            met
        });
        let prompt = family.variant(1);
        let answers = ctx
            .shared_prefix()
            .fan_out(prompt, &[b, c], Sending::AtOnce);
        let met = releaser
            .join()
            .unwrap_or_else(|_| Err("the thread releasing A's pins panicked".into()));
        (answers, met)
    });
    let answer_ms = sent.elapsed().as_millis() as u64;
    let met = met.map_err(|e| {
        CaseError::fault_not_applied(format!(
            "B's and C's reads did not both reach A while its pin was pending: {e}"
        ))
    })?;
    let answers = answers?;
    for answer in &answers {
        ctx.expect_reference(family.variant(1), &answer.tokens)?;
    }
    ctx.measure("shared_pin_answer_ms", answer_ms);

    // A reports both writes, and KVCR gives the pin back once both are
    // done, possibly after the answers left: wait for both.
    let _ = ctx.observe().await_count(
        a,
        &a_before,
        &Counter::OpCount(Scope::SourceWrite, OpResult::Success),
        2,
        "worker A to report the source_write of both reads",
    );
    let a_delta = match ctx.observe().await_count(
        a,
        &a_before,
        &Counter::KvcrFrameworkPinBlocks("device".into(), "released".into()),
        shared,
        &format!("KVCR on worker A to release the {shared} pinned device-cache blocks"),
    ) {
        Ok(delta) => delta,
        Err(_) => ctx.delta_since(a, &a_before)?,
    };
    let source = SharedPin {
        reads_taken: met.required_count(&start_writes_handled())?,
        asked_blocks: a_delta.required_count(&Counter::KvcrFrameworkPinBlocks(
            "engine".into(),
            "withheld".into(),
        ))?,
        source: ctx.observe().engine_memory_source(&a_delta, in_a_pool)?,
    };
    let target_b = fetched(ctx, b, &b_before, &prefix)?;
    let target_c = fetched(ctx, c, &c_before, &prefix)?;
    let evidence = json!({
        "prefix": prefix, "source_A": source, "target_B": target_b, "target_C": target_c,
        "delta_A": a_delta, "answers": answers,
    });
    ctx.check(
        "shared-pin.json",
        &evidence,
        expect_one_pin_for_two_reads(&source, shared, bytes_per_block),
    )?;
    let written = shared * bytes_per_block;
    ctx.check(
        "shared-pin.json",
        &evidence,
        expect_fetched_read(&target_b, shared, written, shared),
    )?;
    ctx.check(
        "shared-pin.json",
        &evidence,
        expect_fetched_read(&target_c, shared, written, shared),
    )
}

/// The read `target` staged since `before`, with what its pool holds of
/// `prefix` after.
fn fetched(
    ctx: &CaseCtx,
    target: &Worker,
    before: &Snapshot,
    prefix: &[u64],
) -> Result<crate::verdict::engine_memory::FetchedRead, CaseError> {
    let delta = ctx.delta_since(target, before)?;
    let in_pool = ctx.pressure().held_in(target, prefix, "local")?.len() as u64;
    Ok(ctx.observe().fetched_read(&delta, in_pool)?)
}

/// How long B's and C's reads may take to reach A: within the operation
/// timeout (5 s), so both still succeed once the engine answers.
const READS_WITHIN: Duration = Duration::from_secs(4);

/// Waits until `source`'s KVCR has taken `reads` reads since `before`: the
/// counters then.
fn reads_taken(source: &Worker, before: &Snapshot, reads: u64) -> Result<Delta, String> {
    let handled = start_writes_handled();
    wait::until(
        format!("worker {}'s KVCR to take {reads} reads", source.name()),
        READS_WITHIN,
        Duration::from_millis(20),
        || match crate::rt::block_on(scrape(&source.metrics_url())) {
            Ok(now) => match now.since(before) {
                Ok(delta) => match delta.required_count(&handled) {
                    Ok(n) if n >= reads => Poll::Ready(delta),
                    Ok(n) => Poll::Pending(format!("{handled} rose by {n}")),
                    Err(absent) => Poll::Pending(absent.to_string()),
                },
                Err(e) => Poll::Abort(e.to_string()),
            },
            Err(e) => Poll::Pending(e.to_string()),
        },
    )
    .map_err(|e| e.to_string())
}

/// Reads (`start_write` control messages) a source's KVCR handled.
fn start_writes_handled() -> Counter {
    Counter::OpCount(
        Scope::Other("control_start_write".into()),
        OpResult::Handled,
    )
}
