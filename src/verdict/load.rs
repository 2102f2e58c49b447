//! A fault under load stays within its budget (Dynamo's fault-tolerance
//! tests: a fault while a load generator runs, with an error budget): no
//! request ever returns wrong tokens, and at most `max_failed` fail.

use serde::Serialize;

use super::{Checks, Violation};

/// How one request of the load ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadOutcome {
    /// Reference tokens, checked.
    Ok,
    /// No complete answer (an error status, a cut stream, a timeout).
    Failed,
    /// An answer whose tokens differ from the reference.
    WrongTokens,
}

/// The counts the budget is judged on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LoadTally {
    pub ok: usize,
    pub failed: usize,
    pub wrong_tokens: usize,
}

impl LoadTally {
    pub fn of(outcomes: impl IntoIterator<Item = LoadOutcome>) -> Self {
        let mut t = LoadTally::default();
        for o in outcomes {
            match o {
                LoadOutcome::Ok => t.ok += 1,
                LoadOutcome::Failed => t.failed += 1,
                LoadOutcome::WrongTokens => t.wrong_tokens += 1,
            }
        }
        t
    }
}

/// No wrong tokens ever, at most `max_failed` failed requests, and at least
/// one correct answer after the fault (the stack kept serving).
pub fn expect_within_budget(
    tally: &LoadTally,
    ok_after_fault: usize,
    max_failed: usize,
) -> Result<(), Violation> {
    Checks::new("load within its budget")
        .check(tally.wrong_tokens == 0, || {
            format!(
                "{} requests returned wrong tokens (never allowed)",
                tally.wrong_tokens
            )
        })
        .check(tally.failed <= max_failed, || {
            format!(
                "{} requests failed, more than the budget of {max_failed} (load_max_failed_requests)",
                tally.failed
            )
        })
        .check(ok_after_fault > 0, || {
            "no request answered correctly after the fault: the stack stopped serving".into()
        })
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_budget_passes() {
        let t = LoadTally::of([LoadOutcome::Ok, LoadOutcome::Failed, LoadOutcome::Ok]);
        assert_eq!(
            t,
            LoadTally {
                ok: 2,
                failed: 1,
                wrong_tokens: 0
            }
        );
        assert_eq!(expect_within_budget(&t, 1, 1), Ok(()));
    }

    #[test]
    fn one_wrong_answer_fails_whatever_the_budget() {
        let t = LoadTally::of([LoadOutcome::Ok, LoadOutcome::WrongTokens]);
        let v = expect_within_budget(&t, 1, 100).unwrap_err().to_string();
        assert!(v.contains("1 requests returned wrong tokens"), "{v}");
    }

    #[test]
    fn too_many_failures_or_no_service_after_the_fault_fail() {
        let t = LoadTally::of([LoadOutcome::Failed, LoadOutcome::Failed, LoadOutcome::Ok]);
        let v = expect_within_budget(&t, 1, 1).unwrap_err().to_string();
        assert!(
            v.contains("2 requests failed, more than the budget of 1"),
            "{v}"
        );
        let v = expect_within_budget(&t, 0, 5).unwrap_err().to_string();
        assert!(
            v.contains("no request answered correctly after the fault"),
            "{v}"
        );
    }
}
