//! Components that broke during a case: a process of the stack that
//! exited on its own, not by this case's fault, or a worker that dropped
//! out of the router's discovery while it runs ([`Dropout`]). Either fails
//! the case with its cause (the case's own failure most likely follows
//! from it), with the machine's clock events of the case's time, and must
//! never pass unseen. The suite judges every case and every fault row's
//! case through it ([`Crashes::judge`]).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::proc::clock_watch::{self, ClockEvent};
use crate::stack::{Crash, Dropout, Stack};
use crate::wait::{self, Poll};

use super::case_evidence::CaseEvidence;
use super::claim::Claim;
use super::{CaseError, CaseResult};

/// What one case has seen break, and which exits its own fault makes.
pub(super) struct Crashes {
    /// When the case began: the machine's clock events since then are its.
    since: Instant,
    /// Processes the case's own fault makes exit (`exit_after_prefill`):
    /// their exit is not a crash.
    expected_exits: RefCell<Vec<String>>,
    /// Components seen crashed during the case (each reported once).
    seen: RefCell<Vec<Crash>>,
    /// Workers seen dropped out of discovery (each reported once).
    dropouts: RefCell<Vec<Dropout>>,
}

impl Default for Crashes {
    fn default() -> Self {
        Crashes {
            since: Instant::now(),
            expected_exits: RefCell::default(),
            seen: RefCell::default(),
            dropouts: RefCell::default(),
        }
    }
}

impl Crashes {
    /// The process `name` may exit during this case: the case's fault makes it.
    pub fn expect_exit(&self, name: &str) {
        self.expected_exits.borrow_mut().push(name.to_string());
    }

    /// `result`, failed first by every component of `stack` that crashed
    /// since the last look and every worker that dropped out of the router
    /// (recorded as `crashes.json`).
    pub fn judge(&self, stack: &Stack, evidence: &CaseEvidence, result: CaseResult) -> CaseResult {
        let mut new = self.unseen_crashes(stack);
        if new.is_empty() && failed_on_a_request(&result) {
            new = self.exits_on_the_way(stack);
        }
        // A /health that does not answer is the case's own failure to tell.
        let dropouts = new_dropouts(
            stack.dropped_out_workers().unwrap_or_default(),
            &self.dropouts.borrow(),
        );
        if new.is_empty() && dropouts.is_empty() {
            return result;
        }
        self.seen.borrow_mut().extend(new.iter().cloned());
        self.dropouts.borrow_mut().extend(dropouts.iter().cloned());
        let clock = clock_watch::events_since(self.since);
        let path = evidence.record(
            "crashes.json",
            &serde_json::json!({
                "crashed": &*self.seen.borrow(),
                "dropped_out": &*self.dropouts.borrow(),
                "clock_events": &clock,
            }),
        );
        Err(breakage_failure(&new, &dropouts, &clock, result).with_evidence(path))
    }

    /// The crashes of `stack` neither expected nor already reported.
    fn unseen_crashes(&self, stack: &Stack) -> Vec<Crash> {
        unseen(
            stack.crashed_components(),
            &self.expected_exits.borrow(),
            &self.seen.borrow(),
        )
    }

    /// The crashes seen within [`EXIT_GRACE`]. A worker on its way out
    /// leaves the router before its process exits (a 503 for a request
    /// meant for it), so a request can fail before the crash can be seen;
    /// without the wait the crash would follow the case's failure instead
    /// of leading it.
    fn exits_on_the_way(&self, stack: &Stack) -> Vec<Crash> {
        wait::until(
            "a component's exit after the case's request failed",
            EXIT_GRACE,
            Duration::from_millis(50),
            || match self.unseen_crashes(stack) {
                crashes if crashes.is_empty() => Poll::Pending("every component running".into()),
                crashes => Poll::Ready(crashes),
            },
        )
        .unwrap_or_default()
    }

    /// How many components were seen broken (crashed or dropped out)
    /// during the case.
    pub fn count(&self) -> usize {
        self.seen.borrow().len() + self.dropouts.borrow().len()
    }
}

/// How long a case whose request failed gives a component to be seen
/// exiting: a worker's exit with its tier takes well under a second.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// Whether `result` is a failure of one of the case's requests (an error
/// status, no response, a broken stream): the failure a crash under way
/// gives.
fn failed_on_a_request(result: &CaseResult) -> bool {
    matches!(result, Err(e) if matches!(e.claim, Claim::Request(_)))
}

/// The crashes of `now` that are neither an expected exit nor already seen.
fn unseen(now: Vec<Crash>, expected: &[String], seen: &[Crash]) -> Vec<Crash> {
    now.into_iter()
        .filter(|c| !expected.contains(&c.name))
        .filter(|c| !seen.iter().any(|s| s.name == c.name))
        .collect()
}

/// The dropouts of `now` not already reported (the same worker process).
fn new_dropouts(now: Vec<Dropout>, seen: &[Dropout]) -> Vec<Dropout> {
    now.into_iter()
        .filter(|d| !seen.iter().any(|s| s.worker == d.worker && s.pid == d.pid))
        .collect()
}

/// The failure that names the crashes `new` and the `dropouts` (with the
/// machine's clock events of the case), then the case's own result.
fn breakage_failure(
    new: &[Crash],
    dropouts: &[Dropout],
    clock: &[ClockEvent],
    result: CaseResult,
) -> CaseError {
    // The first breakage is the claim; the case's own failure follows it.
    let mut parts: Vec<(Claim, String, &str)> = Vec::new();
    if !new.is_empty() {
        let list: Vec<String> = new.iter().map(ToString::to_string).collect();
        parts.push((Claim::Crashed, list.join("; "), "crashed during the case"));
    }
    if !dropouts.is_empty() {
        let list: Vec<String> = dropouts.iter().map(ToString::to_string).collect();
        let during = match clock {
            [] => "no clock event of the machine was seen (the worker's own runtime stopped refreshing it)".to_string(),
            events => events
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        };
        parts.push((
            Claim::DroppedOut,
            format!("{}; during the case {during}", list.join("; ")),
            "dropped out of the router's discovery during the case",
        ));
    }
    let then = match result {
        Ok(()) => String::new(),
        Err(case_failure) => format!("; the case then failed: {case_failure}"),
    };
    let message = parts
        .iter()
        .map(|(_, detail, what)| format!("{what}: {detail}"))
        .collect::<Vec<_>>()
        .join("; ");
    let (claim, detail) = parts
        .into_iter()
        .next()
        .map(|(claim, detail, _)| (claim, detail))
        .unwrap_or((Claim::Unnamed, String::new()));
    CaseError::claimed(claim, detail, format!("{message}{then}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crash(name: &str) -> Crash {
        Crash {
            name: name.into(),
            status: "exit status: 5".into(),
            cause: Some("RuntimeError: boom".into()),
            log: format!("logs/{name}.log").into(),
        }
    }

    #[test]
    fn an_expected_exit_or_a_crash_already_reported_is_not_new() {
        let new = unseen(
            vec![crash("worker-A"), crash("worker-B"), crash("guard-A")],
            &["worker-A".into()],
            &[crash("guard-A")],
        );
        let names: Vec<&str> = new.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["worker-B"]);
    }

    #[test]
    fn a_crash_is_the_claim_whatever_the_case_said() {
        let failed = breakage_failure(
            &[crash("worker-B")],
            &[dropout("A", 3)],
            &[],
            Err(CaseError::from(crate::verdict::Violation {
                claim: "reference tokens",
                detail: "token 2 of 16 differs".into(),
            })),
        );
        assert_eq!(failed.claim, Claim::Crashed);
        assert!(
            failed
                .detail
                .starts_with("worker-B exited on its own (exit status: 5): RuntimeError: boom"),
            "{}",
            failed.detail
        );
        let dropped = breakage_failure(&[], &[dropout("A", 3)], &[], Ok(()));
        assert_eq!(dropped.claim, Claim::DroppedOut);
        assert!(
            dropped.detail.starts_with("worker A (pid 3)"),
            "{}",
            dropped.detail
        );
    }

    #[test]
    fn a_crash_fails_a_passing_case_and_leads_a_failing_one() {
        let passed = breakage_failure(&[crash("worker-B")], &[], &[], Ok(())).to_string();
        assert!(
            passed.starts_with(
                "crashed during the case: worker-B exited on its own (exit status: 5): RuntimeError: boom"
            ),
            "{passed}"
        );
        let failed = breakage_failure(
            &[crash("worker-B")],
            &[],
            &[],
            Err(CaseError::new("tokens differ")),
        )
        .to_string();
        assert!(
            failed.contains("; the case then failed: tokens differ"),
            "{failed}"
        );
    }

    #[test]
    fn only_a_failed_request_waits_for_an_exit_under_way() {
        let status = crate::client::ClientError::Status {
            request: "completion of f1".into(),
            url: "http://h/v1".into(),
            status: 503,
            body: "{}".into(),
        };
        assert!(failed_on_a_request(&Err(CaseError::request(
            &status,
            "request f1 failed"
        ))));
        let tokens = Err(CaseError::from(crate::verdict::Violation {
            claim: "reference tokens",
            detail: "token 2 of 16 differs".into(),
        }));
        assert!(!failed_on_a_request(&tokens));
        assert!(!failed_on_a_request(&Ok(())));
    }

    fn dropout(worker: &str, pid: u32) -> Dropout {
        Dropout {
            worker: worker.into(),
            pid,
            instance_id: 7,
            deleted_by: None,
        }
    }

    #[test]
    fn a_dropout_names_the_clock_events_of_the_case_and_is_reported_once() {
        let step = ClockEvent {
            kind: clock_watch::ClockEventKind::WallClockStep { seconds: 40.0 },
            seen_at: "2026-12-03T05:53:30Z".into(),
            seen: Instant::now(),
        };
        let message = breakage_failure(
            &[],
            &[dropout("B", 9)],
            &[step],
            Err(CaseError::new("HTTP 400")),
        )
        .to_string();
        assert_eq!(
            message,
            "dropped out of the router's discovery during the case: worker B (pid 9) is running, but the router no longer lists its instance 7: its discovery entry is gone, and no log of the stack says who deleted it; during the case the machine's wall clock stepped +40.0 s (seen at 2026-12-03T05:53:30Z); the case then failed: HTTP 400"
        );
        let quiet = breakage_failure(&[], &[dropout("B", 9)], &[], Ok(())).to_string();
        assert!(
            quiet.ends_with("during the case no clock event of the machine was seen (the worker's own runtime stopped refreshing it)"),
            "{quiet}"
        );
        // The same process is reported once; its replacement again.
        let new = new_dropouts(vec![dropout("B", 9), dropout("B", 10)], &[dropout("B", 9)]);
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].pid, 10);
    }
}
