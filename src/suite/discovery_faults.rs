//! Faults that break Dynamo's file discovery without any component being
//! at fault, each verified before the case runs: a worker stopped until the
//! router drops it, and the machine's wall clock stepped forward past the
//! entries' 10 s lifetime (what failed CI on a fresh machine: F16 in
//! docs/results.md). The suite must name each dropout and replace the
//! worker before the next case.

use std::time::{Duration, Instant};

use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, clock_settime, ClockId};

use crate::proc::clock_watch::{self, ClockEventKind};
use crate::stack::Dropout;
use crate::wait::{self, Poll};

use super::{CaseCtx, CaseError, CaseResult};

/// How often the router's `/health` is read while waiting for a dropout.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// Worker `slot` stopped (SIGSTOP, state `T` verified) until the router no
/// longer lists it, then continued: alive, serving nothing through the
/// router. Waits up to the request timeout.
pub fn drop_out_of_discovery(ctx: &CaseCtx, slot: &str) -> CaseResult {
    let worker = ctx.worker(slot)?;
    let stopped = ctx.pressure().stop_worker_process(&worker)?;
    let seen = await_dropouts(ctx, |d| d.iter().any(|d| d.worker == slot));
    drop(stopped);
    seen.map(drop)
}

/// The machine's wall clock stepped forward by `by`, held until a worker
/// dropped out of the router's discovery; stepped back on drop. Each step
/// is held until the suite's clock watcher has seen it: a dropout can come
/// within one of its samples, and a step forward and back inside one
/// sample would leave no clock event for the case to be judged by.
pub struct WallClockStep {
    by: Duration,
    settle: Duration,
}

impl WallClockStep {
    /// Steps the wall clock forward by `by` (`clock_settime`: root, or
    /// CAP_SYS_TIME) and waits until the clock watcher saw it and the
    /// router dropped a worker.
    pub fn until_a_dropout(ctx: &CaseCtx, by: Duration) -> Result<Self, CaseError> {
        clock_watch::start();
        let stepped_at = Instant::now();
        step(by, true).map_err(|e| CaseError::fault_not_applied(e.to_string()))?;
        let stepped = WallClockStep {
            by,
            settle: ctx.settings.request_timeout,
        };
        await_step_seen(stepped_at, true, stepped.settle)
            .map_err(|e| CaseError::fault_not_applied(e.to_string()))?;
        await_dropouts(ctx, |d| !d.is_empty())?;
        Ok(stepped)
    }
}

impl Drop for WallClockStep {
    fn drop(&mut self) {
        let stepped_at = Instant::now();
        if let Err(e) = step(self.by, false) {
            tracing::warn!("could not step the wall clock back by {:?}: {e}", self.by);
        } else if let Err(e) = await_step_seen(stepped_at, false, self.settle) {
            tracing::warn!("{e}");
        }
    }
}

/// Waits until the clock watcher recorded a wall-clock step in `forward`'s
/// direction since `since`.
fn await_step_seen(since: Instant, forward: bool, within: Duration) -> Result<(), String> {
    let direction = if forward { "forward" } else { "back" };
    wait::until(
        format!("the clock watcher to see the wall clock step {direction}"),
        within,
        clock_watch::SAMPLE_EVERY,
        || {
            let seen = clock_watch::events_since(since).iter().any(|e| {
                matches!(e.kind, ClockEventKind::WallClockStep { seconds } if (seconds > 0.0) == forward)
            });
            if seen {
                Poll::Ready(())
            } else {
                Poll::Pending("not yet".to_string())
            }
        },
    )
    .map_err(|e| e.to_string())
}

/// Whether this process may step the wall clock (`None`), or why not.
pub fn cannot_step_the_clock() -> Option<String> {
    const CAP_SYS_TIME: u64 = 1 << 25;
    match crate::proc::procfs::effective_capabilities() {
        Ok(caps) if caps & CAP_SYS_TIME != 0 => None,
        Ok(caps) => Some(format!(
            "stepping the machine's wall clock needs CAP_SYS_TIME (root); this process has CapEff {caps:#x}"
        )),
        Err(e) => Some(e),
    }
}

fn step(by: Duration, forward: bool) -> Result<(), String> {
    let now = clock_gettime(ClockId::CLOCK_REALTIME).map_err(|e| e.to_string())?;
    let by = TimeSpec::from_duration(by);
    let then = if forward { now + by } else { now - by };
    clock_settime(ClockId::CLOCK_REALTIME, then)
        .map_err(|e| format!("clock_settime(CLOCK_REALTIME): {e}"))
}

/// Polls the router until `wanted` holds of the stack's dropouts.
fn await_dropouts(
    ctx: &CaseCtx,
    wanted: impl Fn(&[Dropout]) -> bool,
) -> Result<Vec<Dropout>, CaseError> {
    wait::until(
        "the router to stop listing a live worker (its discovery entry deleted)",
        ctx.settings.request_timeout,
        POLL_EVERY,
        || match ctx.stack.dropped_out_workers() {
            Ok(dropouts) if wanted(&dropouts) => Poll::Ready(dropouts),
            Ok(dropouts) => Poll::Pending(format!("{} dropped out", dropouts.len())),
            Err(e) => Poll::Pending(e),
        },
    )
    .map_err(|e| CaseError::fault_not_applied(e.to_string()))
}
