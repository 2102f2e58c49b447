//! Production-size pools (the `scale` lanes): every step whose cost grows
//! with the Guard pool finishes within KVCR's own deadlines, and the Guard
//! service's shutdown leaves no pool file.
//!
//! KVCR 0.1.1's deadlines, from its source:
//! - `progress._STARTUP_TIMEOUT_SECONDS` (30 s): a core's progress thread,
//!   the pool's memory registration included, must be ready within it;
//! - the workers' operation timeout (`--operation-timeout-ms`, 5 s unless
//!   set): a peer's pull from a dead worker's endpoint fails after it, so
//!   the Guard must be serving by then;
//! - `progress._JOIN_TIMEOUT_SECONDS` (10 s): closing a core, the first half
//!   of a handback, joins its progress thread within it;
//! - `kvcr_service._REGISTRY_TRANSITION_TIMEOUT_SECONDS` (30 s): the
//!   service's close waits this long for its Guards, then reports them leaked.

use serde::Serialize;

use super::{Checks, Violation};
use crate::telemetry::guard_costs::Shutdown;

/// The clause of the steps' deadlines.
pub const STEPS_WITHIN_DEADLINES: &str =
    "registration, promotion and handback finish within KVCR's own deadlines";
/// The clause of the service's shutdown.
pub const CLEAN_SHUTDOWN: &str =
    "the Guard service shuts down within KVCR's deadline and leaves no pool file";

/// KVCR's deadlines for the steps a pool's size makes slower, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KvcrDeadlines {
    pub startup_ms: f64,
    pub operation_ms: f64,
    pub join_ms: f64,
    pub transition_ms: f64,
}

impl KvcrDeadlines {
    /// kvcr 0.1.1's, with the workers' operation timeout.
    pub fn kvcr_0_1_1(operation_timeout_ms: u64) -> Self {
        KvcrDeadlines {
            startup_ms: 30_000.0,
            operation_ms: operation_timeout_ms as f64,
            join_ms: 10_000.0,
            transition_ms: 30_000.0,
        }
    }
}

/// The timed steps of one Guard at one pool size, in ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepCosts {
    /// Pool registrations at the service's start (one per Guard core).
    pub registration_ms: Vec<f64>,
    pub promotion_ms: Vec<f64>,
    pub handback_ms: Vec<f64>,
}

/// Each step was seen at least once and each finished within its deadline;
/// a pool registration must be seen where the engine logs KVCR's startup
/// stages (`registration_logged`).
pub fn expect_steps_within_deadlines(
    steps: &StepCosts,
    deadlines: &KvcrDeadlines,
    registration_logged: bool,
) -> Result<(), Violation> {
    judge_steps(steps, deadlines, [registration_logged, true, true])
}

/// Each step a whole run saw finished within its deadline (a run of some of
/// the cases may see no promotion or no handback).
pub fn expect_seen_steps_within_deadlines(
    steps: &StepCosts,
    deadlines: &KvcrDeadlines,
) -> Result<(), Violation> {
    judge_steps(steps, deadlines, [false; 3])
}

/// `must_see`: registration, promotion, handback.
fn judge_steps(
    steps: &StepCosts,
    deadlines: &KvcrDeadlines,
    must_see: [bool; 3],
) -> Result<(), Violation> {
    let mut c = Checks::new(STEPS_WITHIN_DEADLINES);
    for ((step, values, deadline, which), must) in [
        (
            "pool registration",
            &steps.registration_ms,
            deadlines.startup_ms,
            "the progress thread's startup timeout",
        ),
        (
            "promotion",
            &steps.promotion_ms,
            deadlines.operation_ms,
            "the workers' operation timeout",
        ),
        (
            "handback",
            &steps.handback_ms,
            deadlines.join_ms,
            "the progress thread's join timeout",
        ),
    ]
    .into_iter()
    .zip(must_see)
    {
        c.check(!must || !values.is_empty(), || {
            format!("the Guard log shows no {step}: its cost is unknown, not small")
        });
        for ms in values {
            c.check(*ms <= deadline, || {
                format!("a {step} took {ms:.0} ms, past {which} ({deadline:.0} ms)")
            });
        }
    }
    c.verdict()
}

/// The service exited 0 on its SIGTERM, within KVCR's transition deadline,
/// and no pool file of it was left.
pub fn expect_clean_shutdown(
    shutdown: &Shutdown,
    deadlines: &KvcrDeadlines,
) -> Result<(), Violation> {
    let mut c = Checks::new(CLEAN_SHUTDOWN);
    c.check(
        shutdown.exit.as_deref().is_some_and(|e| e.ends_with(" 0")),
        || {
            format!(
                "the Guard service {} exited with {:?}, not 0",
                shutdown.service, shutdown.exit
            )
        },
    )
    .check(!shutdown.needed_sigkill, || {
        format!(
            "the Guard service {} needed SIGKILL after SIGTERM ({:.0} ms)",
            shutdown.service, shutdown.stop_ms
        )
    })
    .check(shutdown.stop_ms <= deadlines.transition_ms, || {
        format!(
            "the Guard service {} took {:.0} ms to shut down, past KVCR's transition deadline ({:.0} ms)",
            shutdown.service, shutdown.stop_ms, deadlines.transition_ms
        )
    });
    let own: Vec<&str> = shutdown
        .pool_files_left
        .iter()
        .filter(|f| !shutdown.killed_service_pools.contains(f))
        .map(String::as_str)
        .collect();
    c.check(own.is_empty(), || {
        format!(
            "the Guard service {} left {} pool file(s) behind: {}",
            shutdown.service,
            own.len(),
            own.join(", ")
        )
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadlines() -> KvcrDeadlines {
        KvcrDeadlines::kvcr_0_1_1(2000)
    }

    fn steps() -> StepCosts {
        StepCosts {
            registration_ms: vec![250.0, 300.0],
            promotion_ms: vec![420.0],
            handback_ms: vec![180.0],
        }
    }

    fn shutdown() -> Shutdown {
        Shutdown {
            service: "guard".into(),
            stop_ms: 850.0,
            needed_sigkill: false,
            exit: Some("exit status: 0".into()),
            pool_files_left: vec![],
            killed_service_pools: vec![],
        }
    }

    #[test]
    fn steps_within_their_deadlines_pass() {
        assert_eq!(
            expect_steps_within_deadlines(&steps(), &deadlines(), true),
            Ok(())
        );
    }

    #[test]
    fn a_slow_step_fails_naming_its_deadline() {
        let mut s = steps();
        s.promotion_ms = vec![2500.0];
        s.registration_ms.push(31_000.0);
        let v = expect_steps_within_deadlines(&s, &deadlines(), true).unwrap_err();
        assert_eq!(v.claim, STEPS_WITHIN_DEADLINES);
        assert!(v
            .detail
            .contains("a promotion took 2500 ms, past the workers' operation timeout (2000 ms)"));
        assert!(v.detail.contains("a pool registration took 31000 ms"));
        let mut s = steps();
        s.handback_ms = vec![10_001.0];
        let v = expect_steps_within_deadlines(&s, &deadlines(), true).unwrap_err();
        assert!(v.detail.contains("join timeout (10000 ms)"));
    }

    #[test]
    fn a_step_not_seen_fails() {
        let mut s = steps();
        s.handback_ms.clear();
        let v = expect_steps_within_deadlines(&s, &deadlines(), true).unwrap_err();
        assert!(v.detail.contains("no handback"), "{v}");
        let v =
            expect_steps_within_deadlines(&StepCosts::default(), &deadlines(), true).unwrap_err();
        assert!(v.detail.contains("no pool registration") && v.detail.contains("no promotion"));
        // An engine that does not log KVCR's startup stages: no registration
        // to see, the promotion and the handback still must be.
        let mut s = steps();
        s.registration_ms.clear();
        assert_eq!(
            expect_steps_within_deadlines(&s, &deadlines(), false),
            Ok(())
        );
        s.promotion_ms.clear();
        let v = expect_steps_within_deadlines(&s, &deadlines(), false).unwrap_err();
        assert!(
            v.detail.contains("no promotion") && !v.detail.contains("registration"),
            "{v}"
        );
    }

    #[test]
    fn a_run_judges_only_the_steps_it_saw() {
        let seen = StepCosts {
            registration_ms: vec![300.0],
            ..StepCosts::default()
        };
        assert_eq!(
            expect_seen_steps_within_deadlines(&seen, &deadlines()),
            Ok(())
        );
        let slow = StepCosts {
            handback_ms: vec![12_000.0],
            ..StepCosts::default()
        };
        let v = expect_seen_steps_within_deadlines(&slow, &deadlines()).unwrap_err();
        assert!(v.detail.contains("a handback took 12000 ms"), "{v}");
        assert!(!v.detail.contains("no pool registration"), "{v}");
    }

    #[test]
    fn a_clean_shutdown_passes() {
        assert_eq!(expect_clean_shutdown(&shutdown(), &deadlines()), Ok(()));
    }

    #[test]
    fn a_pool_file_left_or_a_forced_exit_fails() {
        let mut s = shutdown();
        s.pool_files_left = vec!["/dev/shm/kvcr-e2e-x/pool/kvcr-abc".into()];
        let v = expect_clean_shutdown(&s, &deadlines()).unwrap_err();
        assert_eq!(v.claim, CLEAN_SHUTDOWN);
        assert!(v
            .detail
            .contains("left 1 pool file(s) behind: /dev/shm/kvcr-e2e-x/pool/kvcr-abc"));
        // A killed service's pool, left by the restarted one at its start,
        // is not this shutdown's; one of its own beside it still fails.
        let mut s = shutdown();
        s.pool_files_left = vec!["/p/kvcr-pool_0-old".into()];
        s.killed_service_pools = vec!["/p/kvcr-pool_0-old".into()];
        assert_eq!(expect_clean_shutdown(&s, &deadlines()), Ok(()));
        s.pool_files_left.push("/p/kvcr-pool_0-new".into());
        let v = expect_clean_shutdown(&s, &deadlines()).unwrap_err();
        assert!(
            v.detail
                .contains("left 1 pool file(s) behind: /p/kvcr-pool_0-new"),
            "{v}"
        );
        let mut s = shutdown();
        s.needed_sigkill = true;
        s.exit = Some("signal: 9 (SIGKILL)".into());
        s.stop_ms = 35_000.0;
        let v = expect_clean_shutdown(&s, &deadlines()).unwrap_err();
        assert!(v.detail.contains("needed SIGKILL"));
        assert!(v.detail.contains("not 0"));
        assert!(v
            .detail
            .contains("past KVCR's transition deadline (30000 ms)"));
    }
}
