//! Components that crashed during a case: a process of the stack that
//! exited on its own, not by this case's fault, fails the case with the
//! cause its log gives (the case's own failure most likely follows from
//! it), and a crash must never pass unseen. The suite judges every case
//! and every fault row's case through it ([`Crashes::judge`]).

use std::cell::RefCell;

use crate::stack::{Crash, Stack};

use super::case_evidence::CaseEvidence;
use super::{CaseError, CaseResult};

/// What one case has seen crash, and which exits its own fault makes.
#[derive(Default)]
pub(super) struct Crashes {
    /// Processes the case's own fault makes exit (`exit_after_prefill`):
    /// their exit is not a crash.
    expected_exits: RefCell<Vec<String>>,
    /// Components seen crashed during the case (each reported once).
    seen: RefCell<Vec<Crash>>,
}

impl Crashes {
    /// The process `name` may exit during this case: the case's fault makes it.
    pub fn expect_exit(&self, name: &str) {
        self.expected_exits.borrow_mut().push(name.to_string());
    }

    /// `result`, failed first by every component of `stack` that crashed
    /// since the last look (recorded as `crashes.json`).
    pub fn judge(&self, stack: &Stack, evidence: &CaseEvidence, result: CaseResult) -> CaseResult {
        let new = unseen(
            stack.crashed_components(),
            &self.expected_exits.borrow(),
            &self.seen.borrow(),
        );
        if new.is_empty() {
            return result;
        }
        self.seen.borrow_mut().extend(new.iter().cloned());
        let path = evidence.record("crashes.json", &*self.seen.borrow());
        Err(crash_failure(&new, result).with_evidence(path))
    }

    /// How many components were seen crashed during the case.
    pub fn count(&self) -> usize {
        self.seen.borrow().len()
    }
}

/// The crashes of `now` that are neither an expected exit nor already seen.
fn unseen(now: Vec<Crash>, expected: &[String], seen: &[Crash]) -> Vec<Crash> {
    now.into_iter()
        .filter(|c| !expected.contains(&c.name))
        .filter(|c| !seen.iter().any(|s| s.name == c.name))
        .collect()
}

/// The failure that names the crashes `new`, then the case's own result.
fn crash_failure(new: &[Crash], result: CaseResult) -> CaseError {
    let list = new
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let then = match result {
        Ok(()) => String::new(),
        Err(case_failure) => format!("; the case then failed: {case_failure}"),
    };
    CaseError::new(format!("crashed during the case: {list}{then}"))
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
    fn a_crash_fails_a_passing_case_and_leads_a_failing_one() {
        let passed = crash_failure(&[crash("worker-B")], Ok(())).to_string();
        assert!(
            passed.starts_with(
                "crashed during the case: worker-B exited on its own (exit status: 5): RuntimeError: boom"
            ),
            "{passed}"
        );
        let failed =
            crash_failure(&[crash("worker-B")], Err(CaseError::new("tokens differ"))).to_string();
        assert!(
            failed.contains("; the case then failed: tokens differ"),
            "{failed}"
        );
    }
}
