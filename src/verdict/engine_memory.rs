//! A peer read of blocks the source holds only in its engine's own memory,
//! staged by the target with `KVCR.fetch` (TC-18).
//!
//! The source's KVCR pool holds none of the blocks, so its KVCR must ask the
//! engine to pin them (the framework-pin source write), write them from the
//! engine's memory, and give every pin back. The target fetches them into
//! its own KVCR pool (`remote_fetch`), delivers them from there
//! (`local_deliver`) and gives the fetch's claims back.

use serde::Serialize;

use super::transfer::Unsuccessful;
use super::{Checks, Violation};

/// Claim: the source served the read from engine memory through framework pins.
pub const ENGINE_MEMORY_SOURCE: &str =
    "a peer read from engine memory is pinned, written and released";
/// Claim: the target's fetch staged the blocks into its pool and delivered them.
pub const FETCHED_READ: &str = "a fetch stages the peer's blocks into the pool and delivers them";

/// The source side, counted over the read's window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EngineMemorySource {
    /// Blocks of the prefix the source's KVCR pool held before the read
    /// (`/kvcr/holding`): 0, or the read did not need engine memory.
    pub pool_blocks_before: u64,
    /// KVCR's waits for the engine's pins (`framework_pin_wait`).
    pub pin_wait_success_ops: u64,
    pub pin_wait_unsuccessful: Unsuccessful,
    /// Blocks the engine pinned, from its device cache and its host tier,
    /// and blocks KVCR released (`cpu_engine_kvcr_framework_pin_blocks`).
    pub pinned_device_blocks: u64,
    pub pinned_host_blocks: u64,
    pub released_blocks: u64,
    /// KVCR's source write (`source_write`).
    pub source_write_success_ops: u64,
    pub source_write_unsuccessful: Unsuccessful,
    pub source_write_blocks: u64,
    pub source_write_bytes: u64,
}

impl EngineMemorySource {
    pub fn pinned_blocks(&self) -> u64 {
        self.pinned_device_blocks + self.pinned_host_blocks
    }
}

/// The source pinned exactly the prefix's blocks in its device cache (the
/// engine's framework memory of first choice), wrote them, and released
/// every pin.
pub fn expect_engine_memory_source(
    s: &EngineMemorySource,
    expected_blocks: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let expected_bytes = expected_blocks * bytes_per_block;
    Checks::new(ENGINE_MEMORY_SOURCE)
        .check(s.pool_blocks_before == 0, || {
            format!(
                "the source's KVCR pool held {} of the {expected_blocks} blocks before the read: the read did not need its engine's memory",
                s.pool_blocks_before
            )
        })
        .check(s.pin_wait_success_ops > 0, || {
            "the source's KVCR never waited on a framework pin (framework_pin_wait success 0)".into()
        })
        .check(s.pin_wait_unsuccessful.is_none(), || {
            s.pin_wait_unsuccessful.failure("framework_pin_wait")
        })
        .check(s.pinned_device_blocks == expected_blocks, || {
            format!(
                "the engine pinned {} device-cache blocks (and {} host-tier blocks) for the read, expected the {expected_blocks} blocks of the prefix",
                s.pinned_device_blocks, s.pinned_host_blocks
            )
        })
        .check(s.released_blocks == s.pinned_blocks(), || {
            format!(
                "KVCR released {} of the {} pinned blocks",
                s.released_blocks,
                s.pinned_blocks()
            )
        })
        .check(s.source_write_success_ops > 0, || {
            "the source shows no source_write success".into()
        })
        .check(s.source_write_unsuccessful.is_none(), || {
            s.source_write_unsuccessful.failure("source_write")
        })
        .check(s.source_write_blocks == expected_blocks, || {
            format!(
                "source_write blocks {} ≠ the {expected_blocks} blocks of the prefix",
                s.source_write_blocks
            )
        })
        .check(s.source_write_bytes == expected_bytes, || {
            format!(
                "source_write bytes {} ≠ {expected_blocks} blocks × {bytes_per_block} bytes = {expected_bytes}",
                s.source_write_bytes
            )
        })
        .verdict()
}

/// The target side, counted over the read's window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FetchedRead {
    /// KVCR's pulls into the pool (`remote_fetch`).
    pub remote_fetch_success_ops: u64,
    pub remote_fetch_unsuccessful: Unsuccessful,
    pub remote_fetch_blocks: u64,
    /// Direct peer deliveries (`remote_deliver`, any result): none, the
    /// target fetched.
    pub remote_deliver_ops: u64,
    /// The engine's count of the fetch (`cpu_engine_kvcr_fetch_blocks`).
    pub fetched_blocks: u64,
    pub fetch_failed_blocks: u64,
    pub claims_released: u64,
    /// KVCR's delivery from its pool into the device cache (`local_deliver`).
    pub local_deliver_blocks: u64,
    /// The engine's read bytes from the KVCR tier.
    pub read_bytes: u64,
    /// Blocks of the prefix the target's KVCR pool holds after the read.
    pub pool_blocks_after: u64,
}

/// The target fetched exactly the blocks the source wrote, delivered them
/// from its pool, read their bytes, gave every claim back, and keeps them.
pub fn expect_fetched_read(
    t: &FetchedRead,
    source_write_blocks: u64,
    source_write_bytes: u64,
    expected_blocks: u64,
) -> Result<(), Violation> {
    Checks::new(FETCHED_READ)
        .check(t.remote_fetch_success_ops > 0, || {
            "the target shows no remote_fetch success".into()
        })
        .check(t.remote_fetch_unsuccessful.is_none(), || {
            t.remote_fetch_unsuccessful.failure("remote_fetch")
        })
        .check(t.remote_fetch_blocks == source_write_blocks, || {
            format!(
                "remote_fetch blocks {} ≠ source_write blocks {source_write_blocks}",
                t.remote_fetch_blocks
            )
        })
        .check(t.remote_deliver_ops == 0, || {
            format!(
                "{} remote_deliver operations: the target pulled past its pool",
                t.remote_deliver_ops
            )
        })
        .check(
            t.fetched_blocks == expected_blocks && t.fetch_failed_blocks == 0,
            || {
                format!(
                    "the engine's fetch staged {} of the {expected_blocks} blocks ({} failed)",
                    t.fetched_blocks, t.fetch_failed_blocks
                )
            },
        )
        .check(t.claims_released == t.fetched_blocks, || {
            format!(
                "{} of the fetch's {} claims were given back",
                t.claims_released, t.fetched_blocks
            )
        })
        .check(t.local_deliver_blocks == expected_blocks, || {
            format!(
                "local_deliver blocks {} ≠ the {expected_blocks} fetched blocks",
                t.local_deliver_blocks
            )
        })
        .check(t.read_bytes == source_write_bytes, || {
            format!(
                "the target read {} bytes from the KVCR tier ≠ source_write bytes {source_write_bytes}",
                t.read_bytes
            )
        })
        .check(t.pool_blocks_after == expected_blocks, || {
            format!(
                "the target's KVCR pool holds {} of the {expected_blocks} fetched blocks after the read",
                t.pool_blocks_after
            )
        })
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCKS: u64 = 4;
    const BPB: u64 = 8192;

    fn source() -> EngineMemorySource {
        EngineMemorySource {
            pool_blocks_before: 0,
            pin_wait_success_ops: 1,
            pin_wait_unsuccessful: Unsuccessful::default(),
            pinned_device_blocks: BLOCKS,
            pinned_host_blocks: 0,
            released_blocks: BLOCKS,
            source_write_success_ops: 1,
            source_write_unsuccessful: Unsuccessful::default(),
            source_write_blocks: BLOCKS,
            source_write_bytes: BLOCKS * BPB,
        }
    }

    fn target() -> FetchedRead {
        FetchedRead {
            remote_fetch_success_ops: 1,
            remote_fetch_unsuccessful: Unsuccessful::default(),
            remote_fetch_blocks: BLOCKS,
            remote_deliver_ops: 0,
            fetched_blocks: BLOCKS,
            fetch_failed_blocks: 0,
            claims_released: BLOCKS,
            local_deliver_blocks: BLOCKS,
            read_bytes: BLOCKS * BPB,
            pool_blocks_after: BLOCKS,
        }
    }

    fn judge_target(t: &FetchedRead) -> Result<(), Violation> {
        expect_fetched_read(t, BLOCKS, BLOCKS * BPB, BLOCKS)
    }

    #[test]
    fn a_read_pinned_written_and_released_passes() {
        assert_eq!(expect_engine_memory_source(&source(), BLOCKS, BPB), Ok(()));
        assert_eq!(judge_target(&target()), Ok(()));
    }

    #[test]
    fn pins_never_released_fail() {
        let s = EngineMemorySource {
            released_blocks: 0,
            ..source()
        };
        let v = expect_engine_memory_source(&s, BLOCKS, BPB).unwrap_err();
        assert_eq!(v.claim, ENGINE_MEMORY_SOURCE);
        assert!(
            v.detail.contains("KVCR released 0 of the 4 pinned blocks"),
            "{v}"
        );
    }

    #[test]
    fn a_read_served_from_the_pool_or_the_host_tier_fails() {
        let from_pool = EngineMemorySource {
            pool_blocks_before: BLOCKS,
            pin_wait_success_ops: 0,
            pinned_device_blocks: 0,
            released_blocks: 0,
            ..source()
        };
        let v = expect_engine_memory_source(&from_pool, BLOCKS, BPB).unwrap_err();
        assert!(v.detail.contains("held 4 of the 4 blocks"), "{v}");
        assert!(v.detail.contains("never waited on a framework pin"), "{v}");
        let from_host = EngineMemorySource {
            pinned_device_blocks: 0,
            pinned_host_blocks: BLOCKS,
            ..source()
        };
        let v = expect_engine_memory_source(&from_host, BLOCKS, BPB).unwrap_err();
        assert!(
            v.detail
                .contains("pinned 0 device-cache blocks (and 4 host-tier"),
            "{v}"
        );
    }

    #[test]
    fn a_failed_source_write_fails() {
        let s = EngineMemorySource {
            source_write_success_ops: 0,
            source_write_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
            source_write_blocks: 0,
            source_write_bytes: 0,
            pin_wait_unsuccessful: Unsuccessful::of(&[("timeout", 1)]),
            ..source()
        };
        let v = expect_engine_memory_source(&s, BLOCKS, BPB).unwrap_err();
        assert!(v.detail.contains("source_write failed 1"), "{v}");
        assert!(v.detail.contains("framework_pin_wait timeout 1"), "{v}");
        assert!(
            v.detail.contains("source_write blocks 0 ≠ the 4 blocks"),
            "{v}"
        );
    }

    #[test]
    fn a_failed_fetch_fails() {
        let t = FetchedRead {
            remote_fetch_success_ops: 0,
            remote_fetch_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
            remote_fetch_blocks: 0,
            fetched_blocks: 0,
            fetch_failed_blocks: BLOCKS,
            claims_released: 0,
            local_deliver_blocks: 0,
            read_bytes: 0,
            pool_blocks_after: 0,
            ..target()
        };
        let v = judge_target(&t).unwrap_err();
        assert_eq!(v.claim, FETCHED_READ);
        assert!(v.detail.contains("remote_fetch failed 1"), "{v}");
        assert!(
            v.detail.contains("staged 0 of the 4 blocks (4 failed)"),
            "{v}"
        );
        assert!(v.detail.contains("pool holds 0 of the 4"), "{v}");
    }

    #[test]
    fn a_direct_delivery_or_unreleased_claims_fail() {
        let t = FetchedRead {
            remote_deliver_ops: 1,
            claims_released: 0,
            ..target()
        };
        let v = judge_target(&t).unwrap_err();
        assert!(v.detail.contains("1 remote_deliver operations"), "{v}");
        assert!(v.detail.contains("0 of the fetch's 4 claims"), "{v}");
        let miscounted = FetchedRead {
            remote_fetch_blocks: BLOCKS - 1,
            read_bytes: 1,
            ..target()
        };
        let v = judge_target(&miscounted).unwrap_err();
        assert!(
            v.detail
                .contains("remote_fetch blocks 3 ≠ source_write blocks 4"),
            "{v}"
        );
        assert!(v.detail.contains("read 1 bytes"), "{v}");
    }
}
