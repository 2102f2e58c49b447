//! A peer's read whose source cannot finish it (TC-19): the source's KVCR
//! accepted the read and waits for the engine's framework pins, which come
//! only after the write's deadline, or never, as the source closes first.
//!
//! The target's fetch must fail whole: none of the blocks reach its pool
//! or its device cache from KVCR, it computes the prefix itself, and the
//! pull ends within KVCR's abandon timeout. Pins the engine grants after the
//! deadline must all be given back: a pin KVCR forgets keeps the engine's
//! pages from ever being evicted.

use serde::Serialize;

use super::engine_memory::{EngineMemorySource, FetchedRead};
use super::{Checks, Violation};

/// Claim: the target's pull that its source could not finish failed whole.
pub const PULL_FAILED_WHOLE: &str =
    "a pull its source cannot finish fails whole, and the target recomputes";
/// Claim: the source gave back the pins the engine granted after the deadline.
pub const LATE_PINS_RELEASED: &str =
    "a source write past its deadline fails and gives back the pins that came late";

/// The target's side of a pull whose source never wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedPull {
    /// The target's fetch, counted over the request's window.
    pub read: FetchedRead,
    /// Prompt blocks the target computed in that window.
    pub computed_blocks: u64,
    /// The target's answer: from the request to its last token.
    pub answer_ms: u64,
    /// KVCR's abandon timeout on the target (no pull outlives it) and the
    /// time to compute the prompt instead.
    pub answer_bound_ms: u64,
}

/// The fetch failed for every block of the prefix, nothing of it reached the
/// pool or the device cache from KVCR, the target computed the prefix, and
/// the pull ended within the abandon timeout. (Whether KVCR counted the pull
/// `failed` is not asked: a pull that ended at the target's own deadline,
/// its source gone, has no `remote_fetch` result.)
pub fn expect_pull_failed_whole(c: &FailedPull, blocks: u64) -> Result<(), Violation> {
    let r = &c.read;
    Checks::new(PULL_FAILED_WHOLE)
        .check(r.remote_fetch_success_ops == 0, || {
            format!(
                "the target counted {} remote_fetch successes for blocks the source never wrote",
                r.remote_fetch_success_ops
            )
        })
        .check(r.fetched_blocks == 0 && r.fetch_failed_blocks == blocks, || {
            format!(
                "the engine's fetch staged {} blocks and failed {} of the {blocks}",
                r.fetched_blocks, r.fetch_failed_blocks
            )
        })
        .check(r.local_deliver_blocks == 0 && r.read_bytes == 0, || {
            format!(
                "{} blocks ({} bytes) were delivered from the KVCR tier that the source never wrote",
                r.local_deliver_blocks, r.read_bytes
            )
        })
        .check(r.pool_blocks_after == 0, || {
            format!(
                "the target's KVCR pool holds {} of the {blocks} blocks the source never wrote",
                r.pool_blocks_after
            )
        })
        .check(c.computed_blocks == blocks, || {
            format!(
                "the target computed {} of the prefix's {blocks} blocks",
                c.computed_blocks
            )
        })
        .check(c.answer_ms <= c.answer_bound_ms, || {
            format!(
                "the target answered after {} ms, past KVCR's abandon timeout and a recompute ({} ms)",
                c.answer_ms, c.answer_bound_ms
            )
        })
        .verdict()
}

/// The source's side of a write whose pins came after its deadline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatePins {
    /// Blocks of the pin requests the engine kept unanswered, and of those
    /// KVCR cancelled, giving up (`cpu_engine_kvcr_framework_pin_blocks`,
    /// tier `engine`).
    pub withheld_blocks: u64,
    pub cancelled_blocks: u64,
    /// The source's counts from the request to after the late grant.
    pub source: EngineMemorySource,
}

/// The source gave up waiting for its pins at the deadline (it cancelled
/// the request; a `framework_pin_wait` timeout, no success), wrote nothing,
/// and released every pin the engine granted late; `blocks` were asked for,
/// and granted, late.
pub fn expect_late_pins_released(l: &LatePins, blocks: u64) -> Result<(), Violation> {
    let s = &l.source;
    let timeouts = s
        .pin_wait_unsuccessful
        .0
        .get("timeout")
        .copied()
        .unwrap_or(0);
    Checks::new(LATE_PINS_RELEASED)
        .check(l.cancelled_blocks == l.withheld_blocks, || {
            format!(
                "KVCR cancelled pin requests for {} of the {} blocks it waited for: it did not give up at its deadline",
                l.cancelled_blocks, l.withheld_blocks
            )
        })
        .check(s.pin_wait_success_ops == 0 && timeouts > 0, || {
            format!(
                "framework_pin_wait: {} successes, {timeouts} timeouts ({:?}): the wait did not end at its deadline",
                s.pin_wait_success_ops, s.pin_wait_unsuccessful.0
            )
        })
        .check(s.source_write_success_ops == 0 && s.source_write_blocks == 0, || {
            format!(
                "the source counted {} source_write successes ({} blocks) past the deadline",
                s.source_write_success_ops, s.source_write_blocks
            )
        })
        .check(s.pinned_blocks() == blocks, || {
            format!(
                "the engine pinned {} of the {blocks} blocks when it answered late",
                s.pinned_blocks()
            )
        })
        .check(s.released_blocks == s.pinned_blocks(), || {
            format!(
                "KVCR released {} of the {} blocks the engine pinned late: the rest stay pinned",
                s.released_blocks,
                s.pinned_blocks()
            )
        })
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::transfer::Unsuccessful;

    const BLOCKS: u64 = 4;

    fn failed_pull() -> FailedPull {
        FailedPull {
            read: FetchedRead {
                remote_fetch_success_ops: 0,
                remote_fetch_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
                remote_fetch_blocks: 0,
                remote_deliver_ops: 0,
                fetched_blocks: 0,
                fetch_failed_blocks: BLOCKS,
                claims_released: 0,
                local_deliver_blocks: 0,
                read_bytes: 0,
                pool_blocks_after: 0,
            },
            computed_blocks: BLOCKS,
            answer_ms: 2100,
            answer_bound_ms: 4000,
        }
    }

    fn late_pins() -> LatePins {
        LatePins {
            withheld_blocks: BLOCKS,
            cancelled_blocks: BLOCKS,
            source: EngineMemorySource {
                pin_wait_unsuccessful: Unsuccessful::of(&[("timeout", 1)]),
                pinned_device_blocks: BLOCKS,
                released_blocks: BLOCKS,
                source_write_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
                ..EngineMemorySource::default()
            },
        }
    }

    #[test]
    fn a_failed_pull_and_a_recompute_pass() {
        assert!(expect_pull_failed_whole(&failed_pull(), BLOCKS).is_ok());
    }

    #[test]
    fn blocks_taken_as_written_fail() {
        let mut c = failed_pull();
        c.read.remote_fetch_success_ops = 1;
        c.read.remote_fetch_unsuccessful = Unsuccessful::default();
        c.read.fetched_blocks = BLOCKS;
        c.read.fetch_failed_blocks = 0;
        c.read.local_deliver_blocks = BLOCKS;
        c.read.read_bytes = BLOCKS * 8192;
        c.read.pool_blocks_after = BLOCKS;
        c.computed_blocks = 0;
        let v = expect_pull_failed_whole(&c, BLOCKS).unwrap_err();
        assert_eq!(v.claim, PULL_FAILED_WHOLE);
        for part in [
            "1 remote_fetch successes",
            "staged 4 blocks",
            "4 blocks (32768 bytes) were delivered",
            "pool holds 4",
            "computed 0",
        ] {
            assert!(v.detail.contains(part), "{part}: {}", v.detail);
        }
    }

    #[test]
    fn a_pull_past_the_abandon_timeout_fails() {
        let mut c = failed_pull();
        c.answer_ms = 60_000;
        let v = expect_pull_failed_whole(&c, BLOCKS).unwrap_err();
        assert!(
            v.detail.contains("past KVCR's abandon timeout"),
            "{}",
            v.detail
        );
    }

    #[test]
    fn a_partly_staged_fetch_fails() {
        let mut c = failed_pull();
        c.read.fetched_blocks = 1;
        c.read.fetch_failed_blocks = BLOCKS - 1;
        c.computed_blocks = BLOCKS - 1;
        let v = expect_pull_failed_whole(&c, BLOCKS).unwrap_err();
        assert!(
            v.detail.contains("staged 1 blocks and failed 3"),
            "{}",
            v.detail
        );
    }

    #[test]
    fn late_pins_given_back_pass() {
        assert!(expect_late_pins_released(&late_pins(), BLOCKS).is_ok());
    }

    #[test]
    fn late_pins_kept_fail() {
        let mut s = late_pins();
        s.source.released_blocks = 0;
        let v = expect_late_pins_released(&s, BLOCKS).unwrap_err();
        assert_eq!(v.claim, LATE_PINS_RELEASED);
        assert!(v.detail.contains("released 0 of the 4"), "{}", v.detail);
    }

    #[test]
    fn a_write_that_succeeded_or_never_waited_fails() {
        let mut s = late_pins();
        s.cancelled_blocks = 0;
        s.source.pin_wait_success_ops = 1;
        s.source.pin_wait_unsuccessful = Unsuccessful::default();
        s.source.source_write_success_ops = 1;
        s.source.source_write_blocks = BLOCKS;
        let v = expect_late_pins_released(&s, BLOCKS).unwrap_err();
        assert!(
            v.detail.contains("cancelled pin requests for 0 of the 4"),
            "{}",
            v.detail
        );
        assert!(v.detail.contains("1 successes, 0 timeouts"), "{}", v.detail);
        assert!(
            v.detail.contains("1 source_write successes"),
            "{}",
            v.detail
        );
        // Never answered: the late grant did not happen.
        let mut s = late_pins();
        s.source.pinned_device_blocks = 0;
        s.source.released_blocks = 0;
        let v = expect_late_pins_released(&s, BLOCKS).unwrap_err();
        assert!(v.detail.contains("pinned 0 of the 4"), "{}", v.detail);
    }
}
