//! WL-01's verdicts: every request of the trace answered with the
//! reference tokens, and the hit rate per tier reconciled between what
//! the answers said and what the engines' and KVCR's counters counted.

use super::{Checks, Violation};

/// The claim of a replay whose requests failed or got other tokens.
pub const REPLAY_ANSWERED: &str = "every request of the trace answered with the reference tokens";
/// The claim of the tier split.
pub const TIERS_RECONCILE: &str = "hit rate per tier reconciles";

/// Requests of the replay and how they ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    pub requests: u32,
    pub failed: u32,
    pub wrong_tokens: u32,
}

/// No request failed and none got tokens other than the reference's;
/// `first_bad` names the first one that did.
pub fn replay_answered(a: Answered, first_bad: Option<&str>) -> Result<(), Violation> {
    let mut c = Checks::new(REPLAY_ANSWERED);
    c.check(a.failed == 0, || {
        format!("{} of {} requests failed", a.failed, a.requests)
    });
    c.check(a.wrong_tokens == 0, || {
        format!(
            "{} of {} requests answered other tokens than the KVCR-off reference",
            a.wrong_tokens, a.requests
        )
    });
    c.verdict().map_err(|mut v| {
        if let Some(first) = first_bad {
            v.detail.push_str(&format!(" (first: {first})"));
        }
        v
    })
}

/// What the counters of every worker counted over the replay, summed, and
/// what the answers said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TierReadings {
    /// Tokens of the device prefix cache (`prefix_cache_hits`).
    pub device_hit_tokens: u64,
    /// Tokens found outside it (`external_prefix_cache_hits`).
    pub external_hit_tokens: u64,
    /// KVCR blocks delivered from its host pool, a peer and its disk tier.
    pub local_deliver_blocks: u64,
    pub remote_deliver_blocks: u64,
    pub g3_deliver_blocks: u64,
    /// KVCR deliveries whose result was not `success`, all scopes.
    pub unsuccessful_delivers: u64,
    /// Tokens per KV block.
    pub block_size: u64,
    /// The sum of every answer's `cached_tokens`.
    pub answered_cached_tokens: u64,
}

impl TierReadings {
    /// Tokens KVCR delivered, every tier.
    pub fn kvcr_tokens(&self) -> u64 {
        (self.local_deliver_blocks + self.remote_deliver_blocks + self.g3_deliver_blocks)
            * self.block_size
    }
}

/// The tier split holds together: the answers' cached tokens are the
/// engines' device and external hits, and every external hit is a block
/// KVCR delivered (the engine has no host tier of its own here). KVCR may
/// deliver more than the engines use (a partial peer delivery's blocks
/// after its first missing one): those are reported, not counted as hits.
/// Deliveries that ended other than `success` are reported too: a policy
/// or timing that makes more of them is a lower hit rate, which `compare`
/// judges.
pub fn tiers_reconcile(r: &TierReadings) -> Result<(), Violation> {
    let mut c = Checks::new(TIERS_RECONCILE);
    let counted = r.device_hit_tokens + r.external_hit_tokens;
    c.check(counted == r.answered_cached_tokens, || {
        format!(
            "the answers' cached_tokens sum to {}, the engines counted {} (device {} + external {})",
            r.answered_cached_tokens, counted, r.device_hit_tokens, r.external_hit_tokens
        )
    });
    c.check(r.external_hit_tokens <= r.kvcr_tokens(), || {
        format!(
            "the engines found {} tokens outside the device cache, KVCR delivered only {} ((local {} + peer {} + disk {} blocks) × {})",
            r.external_hit_tokens,
            r.kvcr_tokens(),
            r.local_deliver_blocks,
            r.remote_deliver_blocks,
            r.g3_deliver_blocks,
            r.block_size
        )
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reconciled() -> TierReadings {
        TierReadings {
            device_hit_tokens: 160,
            external_hit_tokens: 96,
            local_deliver_blocks: 4,
            remote_deliver_blocks: 2,
            g3_deliver_blocks: 0,
            unsuccessful_delivers: 0,
            block_size: 16,
            answered_cached_tokens: 256,
        }
    }

    #[test]
    fn readings_that_agree_reconcile() {
        assert_eq!(tiers_reconcile(&reconciled()), Ok(()));
    }

    #[test]
    fn answers_claiming_more_cached_tokens_than_counted_fail() {
        let r = TierReadings {
            answered_cached_tokens: 272,
            ..reconciled()
        };
        let v = tiers_reconcile(&r).unwrap_err();
        assert_eq!(v.claim, TIERS_RECONCILE);
        assert!(
            v.detail.contains("sum to 272, the engines counted 256"),
            "{v}"
        );
    }

    #[test]
    fn external_hits_kvcr_did_not_deliver_fail() {
        let r = TierReadings {
            remote_deliver_blocks: 1,
            ..reconciled()
        };
        let v = tiers_reconcile(&r).unwrap_err();
        assert!(v.detail.contains("KVCR delivered only 80"), "{v}");
    }

    #[test]
    fn blocks_delivered_but_unused_and_unsuccessful_deliveries_are_reported_not_failed() {
        let r = TierReadings {
            remote_deliver_blocks: 7,
            unsuccessful_delivers: 2,
            ..reconciled()
        };
        assert_eq!(tiers_reconcile(&r), Ok(()));
        assert_eq!(r.kvcr_tokens() - r.external_hit_tokens, 80);
    }

    #[test]
    fn a_replay_with_a_failed_or_wrong_request_fails_naming_the_first() {
        let ok = Answered {
            requests: 10,
            failed: 0,
            wrong_tokens: 0,
        };
        assert_eq!(replay_answered(ok, None), Ok(()));
        let bad = Answered {
            failed: 1,
            wrong_tokens: 2,
            ..ok
        };
        let v = replay_answered(bad, Some("request 3 (x-request-id r3)")).unwrap_err();
        assert!(v.detail.contains("1 of 10 requests failed"), "{v}");
        assert!(
            v.detail.contains("2 of 10 requests answered other tokens"),
            "{v}"
        );
        assert!(
            v.detail.ends_with("(first: request 3 (x-request-id r3))"),
            "{v}"
        );
    }
}
