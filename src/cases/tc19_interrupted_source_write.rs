//! TC-19 interrupted source write, on the `phase3_api` stack (engines keep
//! computed blocks in their own memory, so a peer's read of them waits for
//! the source engine's framework pins). Worker A answers a prompt; A's
//! engine is told to leave KVCR's pin requests unanswered (the
//! `withhold_pins` switch), and B is asked for the prompt's prefix, hinted
//! to A.
//!
//! Late pins: B's fetch waits out its deadline, A's KVCR gives up the pin
//! request (cancels it), then the switch goes off and A's engine grants the
//! pins all the same, late. Expect: B's fetch failed for every block of the
//! prefix, none reached B's pool or device cache from KVCR, B computed the
//! prefix within KVCR's abandon timeout and answered the reference tokens;
//! A's KVCR cancelled the request, timed out its pin wait, wrote nothing,
//! and gave back every pin the engine granted late.
//!
//! Source closes: with a new prompt and the switch on again, A is stopped
//! gracefully once its engine holds the pin request of B's pull (A's KVCR
//! accepted the write and waits for its pins). Expect the same of B's pull;
//! A restarts, and B's next answer for the prefix is the reference's.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::engine::Need;
use crate::proc::StopReport;
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult, EngineFault};
use crate::telemetry::{scrape, Counter, Delta, Snapshot};
use crate::verdict::source_close::{
    expect_late_pins_released, expect_pull_failed_whole, FailedPull, LatePins,
};
use crate::wait::{self, Poll};

pub const CASE: Case = Case {
    id: "TC-19",
    name: "interrupted_source_write",
    destructive: true,
    needs: &[
        Need::RouterHints,
        Need::EngineMemoryReports,
        Need::FaultSwitches,
    ],
    optional: &[],
    run,
};

/// How long A's engine may take to be asked for the pins of B's pull.
const ASKED_WITHIN: Duration = Duration::from_secs(10);
/// Beyond KVCR's abandon timeout, what B's answer may take to compute the
/// prefix and answer.
const ANSWER_SLACK: Duration = Duration::from_secs(2);

pub fn run(ctx: &CaseCtx) -> CaseResult {
    super::tc18_engine_memory_peer_read::require_engine_memory(ctx, "TC-19")?;
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let op_timeout = super::unreachable_source::operation_timeout(ctx);
    // The CPU engine gives KVCR an abandon timeout of twice the operation timeout.
    let answer_bound = op_timeout * 2 + ANSWER_SLACK;
    ctx.measure("operation_timeout_ms", op_timeout.as_millis() as u64);

    // Late pins: B's fetch waits out its deadline, then A's engine pins late.
    let family = ctx.family()?;
    let shared = family.shared_blocks();
    let prefix = held_by_a_only(ctx, &a, &family)?;
    let withheld = ctx.faults().engine_added("A", EngineFault::WithholdPins)?;
    let (a_before, b_before) = (ctx.snapshot(&a)?, ctx.snapshot(&b)?);
    let sent = Instant::now();
    let answer = ctx.complete_on(&b, family.variant(1))?;
    let answer_ms = sent.elapsed().as_millis() as u64;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let pull = failed_pull(ctx, &b, &b_before, &prefix, answer_ms, answer_bound)?;
    let asked = ctx.delta_since(&a, &a_before)?;
    let withheld_blocks = asked.required_count(&withheld_counter())?;
    if withheld_blocks == 0 {
        return Err(CaseError::fault_not_applied(
            "A's engine was never asked to pin blocks for B's pull (withhold_pins)",
        ));
    }
    // A's KVCR gives up at its own deadline (it cancels the request); only
    // then does the engine answer, late (or now, if KVCR never gave up).
    let gave_up = ctx
        .observe()
        .await_count(
            &a,
            &a_before,
            &engine_pin_counter("cancelled"),
            withheld_blocks,
            "A's KVCR to cancel the pin request it waited for",
        )
        .ok();
    drop(withheld); // the engine answers the requests it kept, late
    let a_delta = match ctx.observe().await_count(
        &a,
        &a_before,
        &Counter::KvcrFrameworkPinBlocks("device".into(), "released".into()),
        shared,
        &format!("KVCR on worker A to give back the {shared} blocks pinned late"),
    ) {
        Ok(delta) => delta,
        Err(_) => ctx.delta_since(&a, &a_before)?,
    };
    let late = LatePins {
        withheld_blocks,
        cancelled_blocks: a_delta.required_count(&engine_pin_counter("cancelled"))?,
        source: ctx.observe().engine_memory_source(&a_delta, 0)?,
    };
    ctx.measure("late_pins_answer_ms", answer_ms);
    let evidence = json!({
        "target_B": pull, "source_A": late, "delta_A": a_delta,
        "delta_A_when_kvcr_gave_up": gave_up, "prefix": prefix,
    });
    ctx.check(
        "late-pins.json",
        &evidence,
        expect_pull_failed_whole(&pull, shared),
    )?;
    ctx.check(
        "late-pins.json",
        &evidence,
        expect_late_pins_released(&late, shared),
    )?;

    // Source closes: A stops while its KVCR waits for the pins of B's pull.
    let family = ctx.family()?;
    let prefix = held_by_a_only(ctx, &a, &family)?;
    let withheld = ctx.faults().engine_added("A", EngineFault::WithholdPins)?;
    let (a_before, b_before) = (ctx.snapshot(&a)?, ctx.snapshot(&b)?);
    let grace = super::production_common::stop_grace(ctx);
    let sent = Instant::now();
    let (answer, answer_ms, stopped) = std::thread::scope(|scope| {
        let stopper = scope.spawn(|| stop_once_asked_to_pin(&a, &a_before, grace));
        let answer = ctx.complete_on(&b, family.variant(1));
        let answer_ms = sent.elapsed().as_millis() as u64;
        let stopped = stopper
            .join()
            .unwrap_or_else(|_| Err("the thread stopping A panicked".into()));
        (answer, answer_ms, stopped)
    });
    drop(withheld);
    let (asked, stop) = stopped.map_err(|e| {
        CaseError::fault_not_applied(format!(
            "A was not stopped mid-transfer: its engine was never asked to pin blocks for \
             B's pull: {e}"
        ))
    })?;
    ctx.record(
        "stop.json",
        &json!({"stop_A": stop, "delta_A_until_stop": asked}),
    );
    if stop.needed_sigkill {
        return Err(CaseError::fault_not_applied(format!(
            "A did not stop within {} ms of SIGTERM, so its KVCR never closed",
            grace.as_millis()
        )));
    }
    let answer = answer?;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let pull = failed_pull(ctx, &b, &b_before, &prefix, answer_ms, answer_bound)?;
    // Told by the closing source (its write_done), or left to B's own deadline.
    ctx.measure("closed_source_answer_ms", answer_ms);
    ctx.measure(
        "told_by_closing_source",
        answer_ms < op_timeout.as_millis() as u64,
    );
    ctx.check(
        "closed-source.json",
        &json!({"target_B": pull, "stop_A": stop, "prefix": prefix, "answer": answer}),
        expect_pull_failed_whole(&pull, shared),
    )?;

    // A restarts; B's next answer for the prefix is the reference's.
    ctx.faults().replace("A")?;
    let again = ctx.complete_on(&b, family.variant(2))?;
    ctx.expect_reference(family.variant(2), &again.tokens)
}

/// A answers the family's first prompt: the prefix's blocks, in A's engine
/// memory only (its KVCR pool holds none of them).
pub(super) fn held_by_a_only(
    ctx: &CaseCtx,
    a: &Worker,
    family: &crate::prompts::Family,
) -> Result<Vec<u64>, CaseError> {
    let answer = ctx.complete_on(a, family.variant(0))?;
    ctx.expect_reference(family.variant(0), &answer.tokens)?;
    Ok(ctx
        .pressure()
        .block_hashes(a, family.variant(1))?
        .into_iter()
        .take(family.shared_blocks() as usize)
        .collect())
}

/// B's side of a pull its source never wrote, since `before`.
fn failed_pull(
    ctx: &CaseCtx,
    b: &Worker,
    before: &Snapshot,
    prefix: &[u64],
    answer_ms: u64,
    bound: Duration,
) -> Result<FailedPull, CaseError> {
    let delta = ctx.delta_since(b, before)?;
    let in_b_pool = ctx.pressure().held_in(b, prefix, "local")?.len() as u64;
    Ok(FailedPull {
        read: ctx.observe().fetched_read(&delta, in_b_pool)?,
        computed_blocks: ctx.observe().computed_blocks(&delta)?,
        answer_ms,
        answer_bound_ms: bound.as_millis() as u64,
    })
}

/// The engine's count of blocks of pin requests it withheld (`withheld`),
/// or of those KVCR cancelled (`cancelled`).
fn engine_pin_counter(event: &str) -> Counter {
    Counter::KvcrFrameworkPinBlocks("engine".into(), event.into())
}

fn withheld_counter() -> Counter {
    engine_pin_counter("withheld")
}

/// Waits until `source`'s engine holds a withheld pin request (counted since
/// `before`), then stops `source` gracefully: the counters at that moment
/// and the stop. A source never asked is stopped too (B's request must end),
/// and the wait's failure is returned.
fn stop_once_asked_to_pin(
    source: &Worker,
    before: &Snapshot,
    grace: Duration,
) -> Result<(Delta, StopReport), String> {
    let withheld = withheld_counter();
    let asked = wait::until(
        format!("worker {}'s engine to hold a pin request", source.name()),
        ASKED_WITHIN,
        Duration::from_millis(20),
        || match crate::rt::block_on(scrape(&source.metrics_url())) {
            Ok(now) => match now.since(before) {
                Ok(delta) => match delta.required_count(&withheld) {
                    Ok(n) if n > 0 => Poll::Ready(delta),
                    Ok(_) => Poll::Pending(format!("{withheld} did not rise")),
                    Err(absent) => Poll::Pending(absent.to_string()),
                },
                Err(e) => Poll::Abort(e.to_string()),
            },
            Err(e) => Poll::Pending(e.to_string()),
        },
    );
    let stop = source.process.stop(grace);
    asked.map(|delta| (delta, stop)).map_err(|e| e.to_string())
}
