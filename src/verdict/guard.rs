//! Guard verdicts: promotion after a kill (TC-04), and the per-attempt
//! verdicts of the recovery timeline (TC-06).

use serde::Serialize;

use super::{Checks, Violation};

pub use crate::telemetry::guard_log::Promotion;

/// The clause: the Guard promotes a killed worker's group.
pub const PROMOTION: &str = "Guard promotion after SIGKILL";

/// The fault took effect: the pid is gone, the Guard promoted the dead
/// worker's group, and its control port still listens (the Guard owns it
/// now).
///
/// `recovered_blocks` is judged apart, as a lower bound
/// ([`expect_recovered_covers`]).
pub fn expect_promoted(
    promotion: Option<&Promotion>,
    guard_index: u32,
    pid_gone: bool,
    control_port_listening: bool,
) -> Result<(), Violation> {
    let mut checks = Checks::new(PROMOTION);
    checks.check(pid_gone, || "the killed worker's pid is still alive".into());
    match promotion {
        None => {
            checks.check(false, || {
                format!("no `guard_promoted` event for guard {guard_index} in the Guard log")
            });
        }
        Some(p) => {
            checks.check(p.guard == guard_index, || {
                format!(
                    "guard_promoted names guard {}, expected {guard_index}",
                    p.guard
                )
            });
            checks.check(stages_add_up(p), || {
                format!(
                    "guard_promoted's stages do not add up to its total: recovery_ms {} + setup_ms {} + start_ms {} ≠ promotion_ms {} (each stage ≥ 0, sum within {STAGE_SUM_TOLERANCE_MS} ms)",
                    p.recovery_ms, p.setup_ms, p.start_ms, p.promotion_ms
                )
            });
        }
    }
    checks.check(control_port_listening, || {
        "the dead worker's control port is not listening (the Guard should own it)".into()
    });
    checks.verdict()
}

/// How far the Guard's three promotion stages may sum from its total: each
/// is logged to 0.001 ms, so rounding alone moves the sum by at most
/// 0.002 ms.
const STAGE_SUM_TOLERANCE_MS: f64 = 0.01;

/// The Guard times its promotion as three consecutive stages (recovery,
/// setup, core start) on one monotonic clock, so each is non-negative and
/// they sum to the total it logs.
fn stages_add_up(p: &Promotion) -> bool {
    let stages = [p.recovery_ms, p.setup_ms, p.start_ms];
    stages.iter().all(|ms| *ms >= 0.0)
        && (stages.iter().sum::<f64>() - p.promotion_ms).abs() <= STAGE_SUM_TOLERANCE_MS
}

/// The promoted Guard recovered at least the blocks the case itself
/// committed on the dead worker. `recovered_blocks` is the Guard's whole
/// pool (earlier cases' blocks too: 185 against 16 committed in one run), so
/// it is only a lower bound, but one that fails: a Guard that lost part of
/// the dead worker's records reports fewer than were committed.
pub fn expect_recovered_covers(
    promotion: &Promotion,
    committed_blocks: u64,
    worker: &str,
) -> Result<(), Violation> {
    Checks::new("the promoted Guard recovered the committed blocks")
        .check(promotion.recovered_blocks >= committed_blocks, || {
            format!(
                "guard_promoted reports recovered_blocks {} < {committed_blocks} blocks this case committed on {worker} (a lower bound: the pool may hold more)",
                promotion.recovered_blocks
            )
        })
        .verdict()
}

/// Where a remote delivery on the target was served from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum GuardSource {
    /// The Guard logged a successful source transfer of the expected blocks
    /// and the target delivered them remotely.
    Confirmed,
    /// The target delivered nothing remotely.
    NoRemoteDeliver,
    /// The target delivered remotely, but the Guard served no transfer.
    NotFromGuard,
    /// Both sides moved blocks, but not the same number.
    BlockMismatch { target: u64, guard: u64 },
}

/// Whether one attempt's remote delivery came from the Guard at the dead
/// worker's endpoint: the target's `remote_deliver` success blocks in the
/// attempt's window, and the blocks of the Guard's successful
/// `source_transfer_completed` events in the same window.
pub fn guard_source(target_remote_blocks: u64, guard_transfer_blocks: &[u64]) -> GuardSource {
    let guard_total: u64 = guard_transfer_blocks.iter().sum();
    match (target_remote_blocks, guard_total) {
        (0, _) => GuardSource::NoRemoteDeliver,
        (_, 0) => GuardSource::NotFromGuard,
        (t, g) if t == g => GuardSource::Confirmed,
        (t, g) => GuardSource::BlockMismatch {
            target: t,
            guard: g,
        },
    }
}

/// What one recovery attempt showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum AttemptOutcome {
    /// Reference tokens, served from the Guard: this is t1.
    GuardServed,
    /// Reference tokens, but not through the Guard (recomputed, or no
    /// transfer yet): keep trying with the next prompt.
    CorrectNotGuard(GuardSource),
    /// The request failed (in-flight operations fail during promotion): keep trying.
    RequestFailed(String),
    /// Tokens differ from the reference: the case fails at once.
    WrongTokens(String),
}

impl AttemptOutcome {
    /// Stop the attempts: t1 found, or a wrong answer.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            AttemptOutcome::GuardServed | AttemptOutcome::WrongTokens(_)
        )
    }
}

/// Combines the answer and the source of one attempt.
pub fn attempt_outcome(
    answer: Result<Result<(), Violation>, String>,
    source: GuardSource,
) -> AttemptOutcome {
    match answer {
        Err(request_error) => AttemptOutcome::RequestFailed(request_error),
        Ok(Err(mismatch)) => AttemptOutcome::WrongTokens(mismatch.to_string()),
        Ok(Ok(())) if source == GuardSource::Confirmed => AttemptOutcome::GuardServed,
        Ok(Ok(())) => AttemptOutcome::CorrectNotGuard(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn promotion() -> Promotion {
        Promotion {
            guard: 0,
            pool: "pool_0".into(),
            recovered_blocks: 8,
            agent: None,
            control: "127.0.0.1:27771".into(),
            recovery_ms: 0.1,
            setup_ms: 0.519,
            start_ms: 6.081,
            promotion_ms: 6.7,
        }
    }

    #[test]
    fn a_verified_promotion_passes() {
        assert_eq!(expect_promoted(Some(&promotion()), 0, true, true), Ok(()));
    }

    #[test]
    fn every_missing_fact_is_named() {
        let v = expect_promoted(None, 0, false, false)
            .unwrap_err()
            .to_string();
        assert!(v.contains("pid is still alive"), "{v}");
        assert!(v.contains("no `guard_promoted` event for guard 0"), "{v}");
        assert!(v.contains("control port is not listening"), "{v}");
    }

    #[test]
    fn fewer_recovered_than_committed_fails() {
        // The pool may hold more than this case committed: a lower bound.
        assert_eq!(expect_recovered_covers(&promotion(), 8, "A"), Ok(()));
        assert_eq!(expect_recovered_covers(&promotion(), 5, "A"), Ok(()));
        let p = Promotion {
            recovered_blocks: 20,
            ..promotion()
        };
        let v = expect_recovered_covers(&p, 28, "A")
            .unwrap_err()
            .to_string();
        assert!(
            v.starts_with("the promoted Guard recovered the committed blocks: guard_promoted reports recovered_blocks 20 < 28 blocks this case committed on A"),
            "{v}"
        );
    }

    #[test]
    fn stages_that_do_not_add_up_fail() {
        // Logged to 0.001 ms: rounding passes.
        let rounded = Promotion {
            recovery_ms: 0.149,
            setup_ms: 0.519,
            start_ms: 6.061,
            promotion_ms: 6.731,
            ..promotion()
        };
        assert_eq!(expect_promoted(Some(&rounded), 0, true, true), Ok(()));
        // A recovery stage logged as a ratio of clock readings, not a span.
        let ratio = Promotion {
            recovery_ms: 1000.0,
            ..promotion()
        };
        let v = expect_promoted(Some(&ratio), 0, true, true)
            .unwrap_err()
            .to_string();
        assert!(v.contains("stages do not add up to its total: recovery_ms 1000 + setup_ms 0.519 + start_ms 6.081 ≠ promotion_ms 6.7"), "{v}");
        // A negative stage that the others make up for.
        let negative = Promotion {
            recovery_ms: -0.4,
            setup_ms: 1.019,
            ..promotion()
        };
        assert!(expect_promoted(Some(&negative), 0, true, true).is_err());
    }

    #[test]
    fn the_wrong_guard_fails() {
        let p = Promotion {
            guard: 1,
            ..promotion()
        };
        assert!(expect_promoted(Some(&p), 0, true, true).is_err());
    }

    #[test]
    fn guard_source_covers_every_case() {
        assert_eq!(guard_source(4, &[4]), GuardSource::Confirmed);
        assert_eq!(guard_source(4, &[1, 3]), GuardSource::Confirmed);
        assert_eq!(guard_source(0, &[4]), GuardSource::NoRemoteDeliver);
        assert_eq!(guard_source(4, &[]), GuardSource::NotFromGuard);
        assert_eq!(
            guard_source(4, &[3]),
            GuardSource::BlockMismatch {
                target: 4,
                guard: 3
            }
        );
    }

    #[test]
    fn attempt_outcomes_cover_every_case() {
        let ok = || Ok(Ok(()));
        assert_eq!(
            attempt_outcome(ok(), GuardSource::Confirmed),
            AttemptOutcome::GuardServed
        );
        assert_eq!(
            attempt_outcome(ok(), GuardSource::NotFromGuard),
            AttemptOutcome::CorrectNotGuard(GuardSource::NotFromGuard)
        );
        let wrong = Err(Violation {
            claim: "reference tokens",
            detail: "token 2 differs".into(),
        });
        let o = attempt_outcome(Ok(wrong), GuardSource::Confirmed);
        assert!(matches!(o, AttemptOutcome::WrongTokens(ref m) if m.contains("token 2 differs")));
        assert!(o.is_final());
        let failed = attempt_outcome(Err("HTTP 500".into()), GuardSource::NoRemoteDeliver);
        assert_eq!(failed, AttemptOutcome::RequestFailed("HTTP 500".into()));
        assert!(!failed.is_final());
        assert!(AttemptOutcome::GuardServed.is_final());
    }
}
