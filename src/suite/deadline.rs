//! The per-case timeout.
//!
//! A case runs on its own thread while the suite watches the clock. Past
//! `case_timeout_s` the suite cancels it (its [`Activity`] flag) and the
//! case fails with "timed out after N s while <what it was doing>".
//!
//! The choice: a timed-out case is stopped, never abandoned. A case thread
//! left running would send requests and move telemetry under the next
//! case, whose verdicts read telemetry deltas that must be theirs alone.
//! Every context helper checks the cancel flag, drops its in-flight request
//! and ends its waits at it, so a cancelled case returns at its next helper
//! call (within tens of milliseconds); work outside the helpers (a process
//! kill, a Guard-log wait) is bounded by its own deadline. The suite waits
//! for the thread to return, saying so once a minute, then restores the
//! stack (dead workers replaced, the frontend restarted) for the next case.

use std::fmt;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::activity::Activity;

/// How often the suite repeats that it is still waiting for a cancelled case.
const STILL_WAITING_EVERY: Duration = Duration::from_secs(60);

/// A case that ran past its timeout.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TimedOut {
    pub after_s: u64,
    /// What the case was doing when its time ran out.
    pub doing: String,
    /// How long the case took to stop after its cancel.
    pub stopped_after: Duration,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "timed out after {} s while {}", self.after_s, self.doing)
    }
}

/// Runs `body` on its own thread; its value, and `Some` when it ran past
/// `timeout` and was cancelled (the value is then what it returned after
/// its cancel, e.g. its evidence).
pub fn run_bounded<T: Send>(
    label: &str,
    timeout: Duration,
    activity: &Activity,
    body: impl FnOnce() -> T + Send,
) -> (T, Option<TimedOut>) {
    std::thread::scope(|scope| {
        let (done_tx, done_rx) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .name(format!("case {label}"))
            .spawn_scoped(scope, move || {
                let value = body();
                let _ = done_tx.send(());
                value
            })
            .expect("a thread for the case");
        let timed_out = match done_rx.recv_timeout(timeout) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let doing = activity.current();
                activity.cancel();
                let cancelled_at = Instant::now();
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    done_rx.recv_timeout(STILL_WAITING_EVERY)
                {
                    crate::events::emit(crate::events::RunEvent::StillStopping {
                        trial: label.to_string(),
                        doing: doing.clone(),
                        waited_s: cancelled_at.elapsed().as_secs(),
                        now: activity.current(),
                    });
                }
                Some(TimedOut {
                    after_s: timeout.as_secs(),
                    doing,
                    stopped_after: cancelled_at.elapsed(),
                })
            }
        };
        let value = match worker.join() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (value, timed_out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny case that hangs in a wait: it fails with the timeout and what
    /// it was doing, it stops at its cancel, and the next case, run the
    /// same way right after it, passes.
    #[test]
    fn a_hung_case_times_out_naming_its_activity_and_the_next_case_passes() {
        let activity = Activity::new();
        let hung = || -> Result<(), String> {
            activity
                .doing("waiting for worker A to deposit the 4 blocks of f7")
                .map_err(String::from)?;
            loop {
                activity.check().map_err(String::from)?;
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let started = Instant::now();
        let (result, timed_out) =
            run_bounded("TC-00::hung", Duration::from_secs(1), &activity, hung);
        let timed_out = timed_out.expect("the hung case timed out");
        assert_eq!(
            timed_out.to_string(),
            "timed out after 1 s while waiting for worker A to deposit the 4 blocks of f7"
        );
        assert_eq!(result, Err(super::super::activity::CANCELLED.to_string()));
        assert!(timed_out.stopped_after < Duration::from_secs(1));
        assert!(started.elapsed() < Duration::from_secs(3));

        let next = Activity::new();
        let (result, timed_out) = run_bounded("TC-00::next", Duration::from_secs(1), &next, || {
            next.doing("streaming f8").map(|_| 8)
        });
        assert_eq!((result, timed_out), (Ok(8), None));
    }

    /// Without a timeout in the way, the case's own failure is its result.
    #[test]
    fn a_case_that_ends_in_time_keeps_its_own_result() {
        let activity = Activity::new();
        let (result, timed_out) =
            run_bounded("TC-00::quick", Duration::from_secs(5), &activity, || {
                Err::<(), _>("token 2 of 16 differs")
            });
        assert_eq!(result, Err("token 2 of 16 differs"));
        assert!(timed_out.is_none());
        assert!(!activity.is_cancelled());
    }
}
