//! A fault under load stays within its budget (Dynamo's fault-tolerance
//! tests: a fault while a load generator runs, with an error budget): no
//! request ever returns wrong tokens, at most `max_failed` fail, and the
//! faulted worker carried part of the load (a fault on an idle worker
//! proves nothing about a fault under load).

use serde::Serialize;

use super::{Checks, Violation};

/// The clause: a load through a fault stays within its budget.
pub const CLAIM: &str = "load within its budget";

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

/// What the faulted worker carried of the load, as the responses said.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FaultedWorkerLoad {
    /// The faulted worker's slot (`A`).
    pub worker: String,
    /// Requests it served that were sent and done before the fault.
    pub served_before: usize,
    /// Requests it was serving when the fault came (sent before, done after).
    pub in_flight_at_fault: usize,
}

impl FaultedWorkerLoad {
    /// Counts the requests `on_worker` says the faulted worker served, among
    /// `(sent_ms, done_ms, on_worker)` of each request.
    pub fn of(
        worker: &str,
        fault_at_ms: f64,
        requests: impl IntoIterator<Item = (f64, f64, bool)>,
    ) -> Self {
        let mut carried = FaultedWorkerLoad {
            worker: worker.to_string(),
            ..Default::default()
        };
        for (sent, done, on_worker) in requests {
            if !on_worker || sent >= fault_at_ms {
                continue;
            }
            if done <= fault_at_ms {
                carried.served_before += 1;
            } else {
                carried.in_flight_at_fault += 1;
            }
        }
        carried
    }
}

/// No wrong tokens ever, at most `max_failed` failed requests, at least one
/// correct answer after the fault (the stack kept serving), and the faulted
/// worker served requests before the fault or was serving one at it.
pub fn expect_within_budget(
    tally: &LoadTally,
    ok_after_fault: usize,
    max_failed: usize,
    faulted: &FaultedWorkerLoad,
) -> Result<(), Violation> {
    Checks::new(CLAIM)
        .check(faulted.served_before + faulted.in_flight_at_fault > 0, || {
            format!(
                "worker {} served no request before the fault and none was in flight on it: the router sent it nothing, so the fault hit an idle worker",
                faulted.worker
            )
        })
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

    fn carried() -> FaultedWorkerLoad {
        FaultedWorkerLoad::of("A", 100.0, [(0.0, 90.0, true)])
    }

    #[test]
    fn the_faulted_worker_must_have_carried_load() {
        // (sent, done, on A): one served before, one in flight, one after,
        // one on B.
        let c = FaultedWorkerLoad::of(
            "A",
            100.0,
            [
                (0.0, 90.0, true),
                (50.0, 150.0, true),
                (120.0, 200.0, true),
                (0.0, 80.0, false),
            ],
        );
        assert_eq!((c.served_before, c.in_flight_at_fault), (1, 1));
        let ok = LoadTally::of([LoadOutcome::Ok; 4]);
        let in_flight_only = FaultedWorkerLoad::of("A", 100.0, [(50.0, 150.0, true)]);
        assert_eq!(expect_within_budget(&ok, 1, 0, &in_flight_only), Ok(()));
        // Every request on B (or A served only after the fault): red, named.
        let idle = FaultedWorkerLoad::of("A", 100.0, [(0.0, 80.0, false), (120.0, 200.0, true)]);
        let v = expect_within_budget(&ok, 1, 0, &idle)
            .unwrap_err()
            .to_string();
        assert!(
            v.contains("worker A served no request before the fault and none was in flight on it"),
            "{v}"
        );
    }

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
        assert_eq!(expect_within_budget(&t, 1, 1, &carried()), Ok(()));
    }

    #[test]
    fn one_wrong_answer_fails_whatever_the_budget() {
        let t = LoadTally::of([LoadOutcome::Ok, LoadOutcome::WrongTokens]);
        let v = expect_within_budget(&t, 1, 100, &carried())
            .unwrap_err()
            .to_string();
        assert!(v.contains("1 requests returned wrong tokens"), "{v}");
    }

    #[test]
    fn too_many_failures_or_no_service_after_the_fault_fail() {
        let t = LoadTally::of([LoadOutcome::Failed, LoadOutcome::Failed, LoadOutcome::Ok]);
        let v = expect_within_budget(&t, 1, 1, &carried())
            .unwrap_err()
            .to_string();
        assert!(
            v.contains("2 requests failed, more than the budget of 1"),
            "{v}"
        );
        let v = expect_within_budget(&t, 0, 5, &carried())
            .unwrap_err()
            .to_string();
        assert!(
            v.contains("no request answered correctly after the fault"),
            "{v}"
        );
    }
}
