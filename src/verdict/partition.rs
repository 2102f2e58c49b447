//! A link between two nodes cut and healed (TC-13): a hinted pull across
//! the cut falls back to recompute within KVCR's abandon timeout, and
//! hinted pulls across the link resume once it is up again.
//!
//! Why the abandon timeout: at the operation timeout KVCR marks the pull's
//! remote write uncertain and keeps the destination until the source is
//! known quiet or the abandon timeout passes (`_TargetPullOp` in
//! `remote_fw_dram.py`, state `WAITING_TERMINAL`); only then does the
//! delivery fail and the engine recompute.

use serde::Serialize;

use super::transfer::PeerTransfer;
use super::Violation;

/// Claim: the pull across the cut gives up within the abandon timeout.
pub const FALLBACK_WITHIN_TIMEOUT: &str =
    "a hinted pull across a cut link falls back to recompute within KVCR's abandon timeout";
/// Claim: the pull from a stopped source gives up within the abandon
/// timeout (TC-15).
pub const PAUSED_SOURCE_FALLBACK: &str =
    "a hinted pull from a paused source falls back to recompute within KVCR's abandon timeout";
/// Claim: hinted transfers across the link resume after it heals.
pub const RESUMED_AFTER_HEAL: &str = "hinted transfers across the link resume after it heals";
/// Claim: the first transfer after the heal reconciles, and a write the
/// target gave up on during the cut is not delivered after it.
pub const HEALED_TRANSFER: &str =
    "the transfer after the heal reconciles, and no write abandoned in the cut lands";

/// The request a target answered while its source was behind the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CutFallback {
    /// How long the request took, ms.
    pub waited_ms: u64,
    /// KVCR's operation timeout in the workers, ms (the write turns
    /// uncertain then).
    pub operation_timeout_ms: u64,
    /// KVCR's abandon timeout, ms (the delivery fails by then).
    pub abandon_timeout_ms: u64,
    /// What the answer may take beyond the abandon timeout: its own
    /// prefill and decode, ms.
    pub margin_ms: u64,
    /// The target's remote deliveries that ended other than `success`.
    pub remote_deliver_unsuccessful: u64,
    /// Blocks the target delivered from the peer.
    pub remote_deliver_blocks: u64,
    /// Full blocks of the prompt the target computed.
    pub computed_blocks: u64,
    /// Full blocks of the prompt.
    pub prompt_blocks: u64,
}

/// The pull was tried and failed (else the cut proved nothing), nothing
/// came across it, every block was computed, and the answer came within
/// the abandon timeout and the margin.
pub fn expect_fallback(f: &CutFallback) -> Result<(), Violation> {
    expect_fallback_of(FALLBACK_WITHIN_TIMEOUT, f)
}

/// [`expect_fallback`], for a source that cannot answer for another
/// reason than a cut link (`claim` says which).
pub fn expect_fallback_of(claim: &'static str, f: &CutFallback) -> Result<(), Violation> {
    let mut wrong = Vec::new();
    if f.remote_deliver_unsuccessful == 0 {
        wrong.push(
            "the target reported no failed remote delivery: no pull from the source was tried"
                .to_string(),
        );
    }
    if f.remote_deliver_blocks > 0 {
        wrong.push(format!(
            "{} blocks came from the unreachable source",
            f.remote_deliver_blocks
        ));
    }
    if f.computed_blocks < f.prompt_blocks {
        wrong.push(format!(
            "the target computed {} of the prompt's {} blocks",
            f.computed_blocks, f.prompt_blocks
        ));
    }
    let budget = f.abandon_timeout_ms + f.margin_ms;
    if f.waited_ms > budget {
        wrong.push(format!(
            "the answer took {} ms, past the abandon timeout {} ms + {} ms (operation timeout {} ms)",
            f.waited_ms, f.abandon_timeout_ms, f.margin_ms, f.operation_timeout_ms
        ));
    }
    if wrong.is_empty() {
        return Ok(());
    }
    Err(Violation {
        claim,
        detail: wrong.join("; "),
    })
}

/// One hinted request across the healed link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealAttempt {
    /// Ms after the link came up again that it was sent.
    pub sent_ms: u64,
    pub prompt: String,
    /// Blocks the target delivered from the peer, of the shared ones.
    pub remote_deliver_blocks: u64,
    pub shared_blocks: u64,
    /// Remote deliveries that ended other than `success`.
    pub remote_deliver_unsuccessful: u64,
}

impl HealAttempt {
    pub fn resumed(&self) -> bool {
        self.shared_blocks > 0 && self.remote_deliver_blocks == self.shared_blocks
    }
}

/// A hinted transfer moved every shared block within `window_ms` of the
/// heal.
pub fn expect_resumed(attempts: &[HealAttempt], window_ms: u64) -> Result<(), Violation> {
    if attempts.iter().any(HealAttempt::resumed) {
        return Ok(());
    }
    let last = attempts.last();
    Err(Violation {
        claim: RESUMED_AFTER_HEAL,
        detail: format!(
            "none of {} hinted requests in the {window_ms} ms after the heal was served across the link{}",
            attempts.len(),
            last.map(|a| format!(
                " (the last, {} ms after: {} of {} blocks delivered, {} remote deliveries failed)",
                a.sent_ms, a.remote_deliver_blocks, a.shared_blocks, a.remote_deliver_unsuccessful
            ))
            .unwrap_or_default()
        ),
    })
}

/// The first transfer after the heal: both sides agree on its blocks and
/// bytes, and the source's successful writes are exactly the target's
/// successful deliveries. A write the target asked for during the cut
/// reaches the source only when the link is back (the request waited in
/// the control channel); it may fail there (counted as a failed
/// `source_write`), but a success would be a write into a destination the
/// target had already given up.
pub fn expect_healed_transfer(
    t: &PeerTransfer,
    shared_blocks: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let mut wrong = Vec::new();
    if t.remote_deliver_blocks != shared_blocks {
        wrong.push(format!(
            "remote_deliver blocks {} ≠ {shared_blocks} shared blocks",
            t.remote_deliver_blocks
        ));
    }
    if t.source_write_blocks != t.remote_deliver_blocks {
        wrong.push(format!(
            "source_write blocks {} ≠ remote_deliver blocks {}",
            t.source_write_blocks, t.remote_deliver_blocks
        ));
    }
    if t.source_write_success_ops != t.remote_deliver_success_ops {
        wrong.push(format!(
            "the source reports {} successful writes, the target {} successful deliveries: a write abandoned in the cut landed",
            t.source_write_success_ops, t.remote_deliver_success_ops
        ));
    }
    if t.source_write_bytes != t.target_read_bytes
        || t.source_write_bytes != t.remote_deliver_blocks * bytes_per_block
    {
        wrong.push(format!(
            "source_write bytes {}, target read bytes {}, {} blocks × {bytes_per_block}",
            t.source_write_bytes, t.target_read_bytes, t.remote_deliver_blocks
        ));
    }
    if wrong.is_empty() {
        return Ok(());
    }
    Err(Violation {
        claim: HEALED_TRANSFER,
        detail: wrong.join("; "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fell_back() -> CutFallback {
        CutFallback {
            waited_ms: 4100,
            operation_timeout_ms: 2000,
            abandon_timeout_ms: 5000,
            margin_ms: 1000,
            remote_deliver_unsuccessful: 1,
            remote_deliver_blocks: 0,
            computed_blocks: 5,
            prompt_blocks: 5,
        }
    }

    #[test]
    fn a_pull_that_failed_in_time_and_recomputed_passes() {
        assert!(expect_fallback(&fell_back()).is_ok());
    }

    #[test]
    fn a_late_an_untried_or_a_partial_fallback_fails() {
        let late = CutFallback {
            waited_ms: 20_000,
            ..fell_back()
        };
        assert!(expect_fallback(&late)
            .unwrap_err()
            .detail
            .contains("took 20000 ms, past the abandon timeout 5000 ms + 1000 ms"));
        let untried = CutFallback {
            remote_deliver_unsuccessful: 0,
            ..fell_back()
        };
        assert!(expect_fallback(&untried)
            .unwrap_err()
            .detail
            .contains("no pull from the source was tried"));
        let paused = expect_fallback_of(PAUSED_SOURCE_FALLBACK, &late).unwrap_err();
        assert_eq!(paused.claim, PAUSED_SOURCE_FALLBACK);
        let partial = CutFallback {
            computed_blocks: 3,
            ..fell_back()
        };
        assert!(expect_fallback(&partial).is_err());
    }

    fn attempt(sent_ms: u64, delivered: u64) -> HealAttempt {
        HealAttempt {
            sent_ms,
            prompt: "f001v1".into(),
            remote_deliver_blocks: delivered,
            shared_blocks: 4,
            remote_deliver_unsuccessful: u64::from(delivered == 0),
        }
    }

    #[test]
    fn a_transfer_after_the_heal_resumes() {
        assert!(expect_resumed(&[attempt(100, 0), attempt(1200, 4)], 30_000).is_ok());
        let never = expect_resumed(&[attempt(100, 0), attempt(29_000, 0)], 30_000).unwrap_err();
        assert_eq!(
            never.to_string(),
            "hinted transfers across the link resume after it heals: none of 2 hinted requests in the 30000 ms after the heal was served across the link (the last, 29000 ms after: 0 of 4 blocks delivered, 1 remote deliveries failed)"
        );
        assert!(expect_resumed(&[], 30_000).is_err());
        assert!(expect_resumed(&[attempt(100, 3)], 30_000).is_err());
    }

    fn healed() -> PeerTransfer {
        PeerTransfer {
            source_write_success_ops: 1,
            source_write_unsuccessful: super::super::transfer::Unsuccessful::of(&[("failed", 1)]),
            source_write_blocks: 4,
            source_write_bytes: 32768,
            remote_deliver_success_ops: 1,
            remote_deliver_unsuccessful: Default::default(),
            remote_deliver_blocks: 4,
            target_read_bytes: 32768,
        }
    }

    #[test]
    fn a_healed_transfer_reconciles_beside_a_refused_stale_write() {
        assert!(expect_healed_transfer(&healed(), 4, 8192).is_ok());
    }

    #[test]
    fn a_stale_write_that_lands_or_a_short_transfer_fails() {
        let landed = PeerTransfer {
            source_write_success_ops: 2,
            ..healed()
        };
        assert!(expect_healed_transfer(&landed, 4, 8192)
            .unwrap_err()
            .detail
            .contains("a write abandoned in the cut landed"));
        let short = PeerTransfer {
            remote_deliver_blocks: 3,
            ..healed()
        };
        assert!(expect_healed_transfer(&short, 4, 8192).is_err());
        let bytes = PeerTransfer {
            target_read_bytes: 0,
            ..healed()
        };
        assert!(expect_healed_transfer(&bytes, 4, 8192).is_err());
    }
}
