//! TC-23's verdicts: the recovery journal between a worker and its Guard
//! under faults. A worker whose Guard stopped reading keeps serving and
//! gives the journal up when its ring is full; a Guard that finds the
//! journal given up, or a frame it cannot parse, drops its recovery state;
//! and a takeover after that is cold: nothing recovered, nothing stale
//! served, every answer the reference.

use serde::Serialize;

use super::guard::{AttemptOutcome, GuardSource};
use super::{Checks, Violation};
use crate::telemetry::guard_log::Promotion;

/// KVCR 0.1.1's words (`recovery_journal.py`, `guard.py`).
/// The producer's warning when a frame does not fit the ring.
pub const RING_FULL: &str = "KVCR recovery journal invalidated: ring is full";
/// The Guard's warning when it gives a pool's recovery up.
pub const RECOVERY_DISABLED: &str = crate::telemetry::names::kvcr_bad_lines::POOL_RECOVERY_DISABLED;
/// The cause the Guard names for a journal its producer invalidated.
pub const JOURNAL_INVALID: &str = "recovery journal is invalid";
/// The cause the Guard names for a frame it cannot parse
/// (`journal frame has an invalid key size`, `... an unknown type`,
/// `... exceeds the published bytes`, `... padding is not zero`).
pub const BAD_FRAME: &str = "journal frame ";
/// The Guard's warning at a promotion with no mirror.
pub const NO_RECOVERED_STATE: &str = "KVCR pool has no recovered state to promote";
/// The warning of a claim that found an unfinished handback region and
/// threw it away (`read_handback`).
pub const HANDBACK_DISCARDED: &str = crate::telemetry::names::kvcr_bad_lines::HANDBACK_DISCARDED;

/// What the next claim made of a handback region cut short.
#[derive(Debug, Clone, Serialize)]
pub struct TornHandbackClaim {
    /// The Guard's lines of [`HANDBACK_DISCARDED`] since the cut.
    pub discarded_lines: Vec<String>,
    /// Where the region started, and the pool file's size once the
    /// replacement serves.
    pub region_offset: u64,
    pub file_bytes_after_claim: u64,
    /// A prefix the released worker had committed, asked of the
    /// replacement: blocks KVCR delivered from its pool, and blocks the
    /// engine computed.
    pub delivered_blocks: u64,
    pub computed_blocks: u64,
    /// Its tokens against the reference: `None` when they match.
    pub wrong_tokens: Option<String>,
}

/// A claim after a handback region lost its tail threw the region away
/// with KVCR's warning and started cold: the region gone from the pool
/// file, nothing of the released worker's blocks delivered (they are
/// computed again), the reference tokens.
pub fn expect_handback_discarded(claim: &TornHandbackClaim) -> Result<(), Violation> {
    let mut c = Checks::new("a claim threw a handback region cut short away and started cold");
    c.check(!claim.discarded_lines.is_empty(), || {
        format!("the Guard never logged `{HANDBACK_DISCARDED}` after the region lost its tail")
    });
    c.check(claim.file_bytes_after_claim == claim.region_offset, || {
        format!(
            "the pool file is {} bytes once the replacement serves: the region at {} was not given back",
            claim.file_bytes_after_claim, claim.region_offset
        )
    });
    c.check(claim.delivered_blocks == 0, || {
        format!(
            "KVCR delivered {} block(s) of the released worker's prefix from its pool after discarding the region",
            claim.delivered_blocks
        )
    });
    c.check(claim.computed_blocks > 0, || {
        "the replacement computed no block of the released worker's prefix: the request proves nothing about a cold start".into()
    });
    c.check(claim.wrong_tokens.is_none(), || {
        claim.wrong_tokens.clone().unwrap_or_default()
    });
    c.verdict()
}

/// One request to the worker while its Guard was stopped.
#[derive(Debug, Clone, Serialize)]
pub struct StalledRequest {
    pub prompt: String,
    /// `None`: not answered within the budget.
    pub latency_ms: Option<f64>,
    /// The tokens against the reference: `None` when they match.
    pub wrong_tokens: Option<String>,
    /// Sent after the worker had logged its full ring.
    pub after_ring_full: bool,
}

/// The worker kept serving while its Guard was stopped: every request
/// answered within `budget_ms` with the reference tokens, and at least
/// one of them after the worker had given its full ring up (a publish that
/// blocked on a full ring would hang that one).
pub fn expect_worker_kept_serving(
    requests: &[StalledRequest],
    budget_ms: f64,
) -> Result<(), Violation> {
    let mut c = Checks::new("the worker kept serving while its Guard was stopped");
    c.check(!requests.is_empty(), || "no request was sent".into());
    for r in requests {
        check_answered(&mut c, r, budget_ms);
    }
    c.check(requests.iter().any(|r| r.after_ring_full), || {
        "no request was answered after the worker reported its ring full".into()
    });
    c.verdict()
}

/// One request to the worker while its Guard was stopped answered within
/// `budget_ms` with the reference tokens.
pub fn expect_answered(request: &StalledRequest, budget_ms: f64) -> Result<(), Violation> {
    let mut c = Checks::new("the worker answered while its Guard was stopped");
    check_answered(&mut c, request, budget_ms);
    c.verdict()
}

fn check_answered(c: &mut Checks, r: &StalledRequest, budget_ms: f64) {
    match r.latency_ms {
        None => c.check(false, || {
            format!("{} was not answered within {budget_ms:.0} ms", r.prompt)
        }),
        Some(ms) => c.check(ms <= budget_ms, || {
            format!("{} took {ms:.0} ms (budget {budget_ms:.0} ms)", r.prompt)
        }),
    };
    c.check(r.wrong_tokens.is_none(), || {
        format!(
            "{}: {}",
            r.prompt,
            r.wrong_tokens.as_deref().unwrap_or_default()
        )
    });
}

/// The worker gave its journal up with KVCR's own warning once the ring
/// was full: `lines` are its log's lines since the Guard was stopped.
/// `published_bound` says how many bytes of frames the requests published
/// at least, against the ring's `capacity`.
pub fn expect_ring_full(
    lines: &[String],
    published_bound: u64,
    capacity: u64,
) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR invalidated the full journal with its own warning");
    c.check(lines.iter().any(|l| l.contains(RING_FULL)), || {
        format!(
            "the worker never logged `{RING_FULL}` after publishing at least {published_bound} bytes of frames into a ring of {capacity} bytes its Guard did not read"
        )
    });
    c.verdict()
}

/// The Guard gave the pool's recovery up for `cause`: `lines` are its
/// log's lines since the fault.
pub fn expect_recovery_dropped(lines: &[String], cause: &str) -> Result<(), Violation> {
    let mut c = Checks::new("the Guard dropped its recovery state");
    c.check(
        lines
            .iter()
            .any(|l| l.contains(RECOVERY_DISABLED) && l.contains(cause)),
        || {
            format!(
                "the Guard never logged `{RECOVERY_DISABLED}; ...: {cause}...` (it logged {} line(s) of `{RECOVERY_DISABLED}`)",
                lines.iter().filter(|l| l.contains(RECOVERY_DISABLED)).count()
            )
        },
    );
    c.verdict()
}

/// What a takeover after the journal was dropped showed.
#[derive(Debug, Clone, Serialize)]
pub struct ColdTakeover {
    pub promotion: Option<Promotion>,
    /// The Guard logged [`NO_RECOVERED_STATE`] at the promotion.
    pub no_state_logged: bool,
    /// The peer's requests for the dead worker's prefixes.
    pub attempts: Vec<AttemptOutcome>,
}

/// The Guard of group `guard` took the group over but cold: promoted, 0
/// blocks recovered, [`NO_RECOVERED_STATE`] logged, and the peer's
/// requests for the dead worker's prefixes answered with the reference
/// tokens, recomputed (no block delivered from the dead worker's endpoint,
/// where only stale records could have come from); at least one answered.
pub fn expect_cold_takeover(t: &ColdTakeover, guard: u32) -> Result<(), Violation> {
    let mut c = Checks::new("the Guard took over cold, serving no stale block");
    match &t.promotion {
        None => c.check(false, || {
            format!("the Guard of group {guard} did not promote")
        }),
        Some(p) => c
            .check(p.guard == guard, || {
                format!("group {} promoted, not {guard}", p.guard)
            })
            .check(p.recovered_blocks == 0, || {
                format!(
                    "the Guard recovered {} block(s) from a journal it had dropped",
                    p.recovered_blocks
                )
            }),
    };
    c.check(t.no_state_logged, || {
        format!("the Guard did not log `{NO_RECOVERED_STATE}`")
    });
    let recomputed = |o: &AttemptOutcome| {
        matches!(
            o,
            AttemptOutcome::CorrectNotGuard(GuardSource::NoRemoteDeliver)
        )
    };
    for o in &t.attempts {
        c.check(
            recomputed(o) || matches!(o, AttemptOutcome::RequestFailed(_)),
            || format!("a request for the dead worker's prefix: {o:?}"),
        );
    }
    c.check(t.attempts.iter().any(recomputed), || {
        format!(
            "none of {} request(s) was answered with recomputed reference tokens",
            t.attempts.len()
        )
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(latency: Option<f64>, after: bool) -> StalledRequest {
        StalledRequest {
            prompt: "p".into(),
            latency_ms: latency,
            wrong_tokens: None,
            after_ring_full: after,
        }
    }

    #[test]
    fn a_worker_that_answered_through_the_full_ring_passes() {
        let rs = [request(Some(300.0), false), request(Some(280.0), true)];
        assert!(expect_worker_kept_serving(&rs, 10_000.0).is_ok());
    }

    #[test]
    fn a_blocked_or_late_or_wrong_answer_fails() {
        let blocked = [request(Some(300.0), false), request(None, true)];
        let v = expect_worker_kept_serving(&blocked, 10_000.0).unwrap_err();
        assert!(v.detail.contains("not answered"), "{v}");
        let late = [request(Some(12_000.0), true)];
        assert!(expect_worker_kept_serving(&late, 10_000.0).is_err());
        let mut wrong = request(Some(1.0), true);
        wrong.wrong_tokens = Some("token 3 differs".into());
        assert!(expect_worker_kept_serving(&[wrong], 10_000.0).is_err());
        let never_full = [request(Some(1.0), false)];
        let v = expect_worker_kept_serving(&never_full, 10_000.0).unwrap_err();
        assert!(v.detail.contains("after the worker reported"), "{v}");
        assert!(expect_worker_kept_serving(&[], 10_000.0).is_err());
    }

    #[test]
    fn one_request_must_be_answered_in_time_with_the_reference() {
        assert!(expect_answered(&request(Some(200.0), false), 10_000.0).is_ok());
        let v = expect_answered(&request(None, false), 10_000.0).unwrap_err();
        assert!(v.detail.contains("not answered within 10000 ms"), "{v}");
        let mut wrong = request(Some(1.0), false);
        wrong.wrong_tokens = Some("token 0 differs".into());
        assert!(expect_answered(&wrong, 10_000.0).is_err());
    }

    #[test]
    fn the_ring_full_warning_is_required() {
        let full = ["WARNING:kvcr.recovery_journal:KVCR recovery journal invalidated: ring is full: 32 bytes needed, 8 available".to_string()];
        assert!(expect_ring_full(&full, 4200, 4096).is_ok());
        let other = ["WARNING:kvcr.recovery_journal:KVCR recovery journal invalidated: invalidated by its owner".to_string()];
        let v = expect_ring_full(&other, 4200, 4096).unwrap_err();
        assert!(v.detail.contains("4200 bytes"), "{v}");
    }

    #[test]
    fn the_dropped_recovery_must_name_its_cause() {
        let line = "WARNING:kvcr.guard:KVCR pool recovery disabled; claimable but cold if this primary dies: journal frame has an invalid key size".to_string();
        assert!(expect_recovery_dropped(std::slice::from_ref(&line), BAD_FRAME).is_ok());
        assert!(expect_recovery_dropped(std::slice::from_ref(&line), JOURNAL_INVALID).is_err());
        assert!(expect_recovery_dropped(&[], BAD_FRAME).is_err());
    }

    fn promotion(recovered: u64) -> Promotion {
        Promotion {
            guard: 0,
            pool: "pool_0".into(),
            recovered_blocks: recovered,
            agent: None,
            control: "127.0.0.1:1".into(),
            recovery_ms: 0.0,
            setup_ms: 0.0,
            start_ms: 0.0,
            promotion_ms: 1.0,
        }
    }

    fn cold(recovered: u64, attempts: Vec<AttemptOutcome>) -> ColdTakeover {
        ColdTakeover {
            promotion: Some(promotion(recovered)),
            no_state_logged: true,
            attempts,
        }
    }

    #[test]
    fn a_cold_takeover_with_recomputed_answers_passes() {
        let t = cold(
            0,
            vec![
                AttemptOutcome::RequestFailed("in flight".into()),
                AttemptOutcome::CorrectNotGuard(GuardSource::NoRemoteDeliver),
            ],
        );
        assert!(expect_cold_takeover(&t, 0).is_ok());
    }

    #[test]
    fn stale_recovery_or_a_served_block_fails() {
        let served = cold(0, vec![AttemptOutcome::GuardServed]);
        let v = expect_cold_takeover(&served, 0).unwrap_err();
        assert!(v.detail.contains("GuardServed"), "{v}");
        let recovered = cold(
            4,
            vec![AttemptOutcome::CorrectNotGuard(
                GuardSource::NoRemoteDeliver,
            )],
        );
        let v = expect_cold_takeover(&recovered, 0).unwrap_err();
        assert!(v.detail.contains("recovered 4 block(s)"), "{v}");
        let mut silent = cold(
            0,
            vec![AttemptOutcome::CorrectNotGuard(
                GuardSource::NoRemoteDeliver,
            )],
        );
        silent.no_state_logged = false;
        assert!(expect_cold_takeover(&silent, 0).is_err());
        let none = ColdTakeover {
            promotion: None,
            ..cold(0, vec![])
        };
        let v = expect_cold_takeover(&none, 0).unwrap_err();
        assert!(v.detail.contains("did not promote"), "{v}");
        assert!(v.detail.contains("none of 0"), "{v}");
        let wrong = cold(0, vec![AttemptOutcome::WrongTokens("x".into())]);
        assert!(expect_cold_takeover(&wrong, 0).is_err());
    }

    fn discarded() -> TornHandbackClaim {
        TornHandbackClaim {
            discarded_lines: vec![format!(
                "WARNING:kvcr.recovery_journal:{HANDBACK_DISCARDED}"
            )],
            region_offset: 159_383_552,
            file_bytes_after_claim: 159_383_552,
            delivered_blocks: 0,
            computed_blocks: 4,
            wrong_tokens: None,
        }
    }

    #[test]
    fn a_discarded_region_and_a_cold_answer_pass() {
        assert!(expect_handback_discarded(&discarded()).is_ok());
    }

    #[test]
    fn a_region_replayed_kept_or_silently_dropped_fails() {
        let silent = TornHandbackClaim {
            discarded_lines: vec![],
            ..discarded()
        };
        let v = expect_handback_discarded(&silent).unwrap_err();
        assert!(v.detail.contains("never logged"), "{v}");
        let kept = TornHandbackClaim {
            file_bytes_after_claim: 159_383_552 + 207,
            ..discarded()
        };
        let v = expect_handback_discarded(&kept).unwrap_err();
        assert!(v.detail.contains("was not given back"), "{v}");
        let served = TornHandbackClaim {
            delivered_blocks: 4,
            computed_blocks: 0,
            ..discarded()
        };
        let v = expect_handback_discarded(&served).unwrap_err();
        assert!(v.detail.contains("delivered 4 block(s)"), "{v}");
        assert!(v.detail.contains("computed no block"), "{v}");
        let wrong = TornHandbackClaim {
            wrong_tokens: Some("token 3 differs".into()),
            ..discarded()
        };
        assert!(expect_handback_discarded(&wrong).is_err());
    }
}
