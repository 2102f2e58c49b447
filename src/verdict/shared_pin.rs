//! Two peers reading the same blocks from one source while the source's
//! engine has not yet answered KVCR's pin request for them (TC-22).
//!
//! The source's KVCR must not ask its engine twice for blocks it already
//! waits on: the second read joins the pending request, and once the engine
//! answers, both reads are written from the one pin, which KVCR then gives
//! back whole. A second request would pin the engine's pages twice (each
//! pin keeps them from eviction) and wait twice as long on a slow engine.

use serde::Serialize;

use super::engine_memory::EngineMemorySource;
use super::{Checks, Violation};

/// Claim: one pin request served both reads, and both were written from it.
pub const ONE_PIN_FOR_TWO_READS: &str =
    "two reads of blocks whose pin is pending share that pin request, and both are written";

/// The source's side of two concurrent reads of one prefix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SharedPin {
    /// Reads (`start_write`s) the source's KVCR took while its engine held
    /// the pin request back (`control_start_write` handled).
    pub reads_taken: u64,
    /// Blocks of the pin requests the engine was asked for while it held
    /// them back (`cpu_engine_kvcr_framework_pin_blocks`, tier `engine`,
    /// event `withheld`).
    pub asked_blocks: u64,
    /// The source's counts from before the reads until both writes ended.
    pub source: EngineMemorySource,
}

/// Both reads reached the source while its pin was pending; the engine
/// was asked for the prefix's `blocks` once, pinned them once, KVCR waited
/// on that one request, wrote the prefix to each reader
/// (`bytes_per_block` each block) and released every pin.
pub fn expect_one_pin_for_two_reads(
    s: &SharedPin,
    blocks: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let src = &s.source;
    let (written, written_bytes) = (2 * blocks, 2 * blocks * bytes_per_block);
    Checks::new(ONE_PIN_FOR_TWO_READS)
        .check(s.reads_taken >= 2, || {
            format!(
                "the source's KVCR took {} reads while its engine held the pin request: the reads did not meet",
                s.reads_taken
            )
        })
        .check(s.asked_blocks == blocks, || {
            format!(
                "the engine was asked to pin {} blocks for two reads of the same {blocks}: KVCR asked again for blocks whose pin was pending",
                s.asked_blocks
            )
        })
        .check(src.pin_wait_success_ops == 1, || {
            format!(
                "KVCR waited on {} pin requests (framework_pin_wait success), expected the one both reads share",
                src.pin_wait_success_ops
            )
        })
        .check(src.pin_wait_unsuccessful.is_none(), || {
            src.pin_wait_unsuccessful.failure("framework_pin_wait")
        })
        .check(src.pinned_blocks() == blocks, || {
            format!(
                "the engine pinned {} blocks ({} device-cache, {} host-tier) for two reads of the same {blocks}",
                src.pinned_blocks(),
                src.pinned_device_blocks,
                src.pinned_host_blocks
            )
        })
        .check(src.released_blocks == src.pinned_blocks(), || {
            format!(
                "KVCR released {} of the {} pinned blocks",
                src.released_blocks,
                src.pinned_blocks()
            )
        })
        .check(src.source_write_success_ops == 2, || {
            format!(
                "source_write success {}, expected one per reader (2)",
                src.source_write_success_ops
            )
        })
        .check(src.source_write_unsuccessful.is_none(), || {
            src.source_write_unsuccessful.failure("source_write")
        })
        .check(src.source_write_blocks == written, || {
            format!(
                "source_write blocks {} ≠ 2 readers × {blocks} blocks = {written}",
                src.source_write_blocks
            )
        })
        .check(src.source_write_bytes == written_bytes, || {
            format!(
                "source_write bytes {} ≠ {written} blocks × {bytes_per_block} bytes = {written_bytes}",
                src.source_write_bytes
            )
        })
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::transfer::Unsuccessful;

    const BLOCKS: u64 = 4;
    const BPB: u64 = 8192;

    fn shared() -> SharedPin {
        SharedPin {
            reads_taken: 2,
            asked_blocks: BLOCKS,
            source: EngineMemorySource {
                pool_blocks_before: 0,
                pin_wait_success_ops: 1,
                pin_wait_unsuccessful: Unsuccessful::default(),
                pinned_device_blocks: BLOCKS,
                pinned_host_blocks: 0,
                released_blocks: BLOCKS,
                source_write_success_ops: 2,
                source_write_unsuccessful: Unsuccessful::default(),
                source_write_blocks: 2 * BLOCKS,
                source_write_bytes: 2 * BLOCKS * BPB,
            },
        }
    }

    #[test]
    fn two_reads_written_from_one_pin_pass() {
        assert_eq!(expect_one_pin_for_two_reads(&shared(), BLOCKS, BPB), Ok(()));
    }

    /// What KVCR does when it does not find the pending request: the engine
    /// is asked, pins and is waited on twice (both writes still succeed).
    #[test]
    fn a_second_pin_request_for_pending_blocks_fails() {
        let mut s = shared();
        s.asked_blocks = 2 * BLOCKS;
        s.source.pin_wait_success_ops = 2;
        s.source.pinned_device_blocks = 2 * BLOCKS;
        s.source.released_blocks = 2 * BLOCKS;
        let v = expect_one_pin_for_two_reads(&s, BLOCKS, BPB).unwrap_err();
        assert_eq!(v.claim, ONE_PIN_FOR_TWO_READS);
        assert!(
            v.detail
                .contains("asked to pin 8 blocks for two reads of the same 4"),
            "{v}"
        );
        assert!(v.detail.contains("waited on 2 pin requests"), "{v}");
        assert!(v.detail.contains("pinned 8 blocks"), "{v}");
    }

    #[test]
    fn reads_that_never_met_at_the_source_fail() {
        let s = SharedPin {
            reads_taken: 1,
            ..shared()
        };
        let v = expect_one_pin_for_two_reads(&s, BLOCKS, BPB).unwrap_err();
        assert!(v.detail.contains("took 1 reads"), "{v}");
    }

    #[test]
    fn one_reader_left_unwritten_fails() {
        let mut s = shared();
        s.source.source_write_success_ops = 1;
        s.source.source_write_unsuccessful = Unsuccessful::of(&[("failed", 1)]);
        s.source.source_write_blocks = BLOCKS;
        s.source.source_write_bytes = BLOCKS * BPB;
        let v = expect_one_pin_for_two_reads(&s, BLOCKS, BPB).unwrap_err();
        assert!(v.detail.contains("source_write success 1"), "{v}");
        assert!(
            v.detail.contains("source_write blocks 4 ≠ 2 readers"),
            "{v}"
        );
    }

    #[test]
    fn a_pin_kept_after_both_writes_fails() {
        let mut s = shared();
        s.source.released_blocks = 0;
        let v = expect_one_pin_for_two_reads(&s, BLOCKS, BPB).unwrap_err();
        assert!(v.detail.contains("released 0 of the 4 pinned"), "{v}");
    }

    #[test]
    fn a_pin_wait_that_timed_out_fails() {
        let mut s = shared();
        s.source.pin_wait_unsuccessful = Unsuccessful::of(&[("timeout", 1)]);
        let v = expect_one_pin_for_two_reads(&s, BLOCKS, BPB).unwrap_err();
        assert!(v.detail.contains("framework_pin_wait"), "{v}");
    }
}
