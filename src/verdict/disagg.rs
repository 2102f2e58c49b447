//! The P→D transfer of a disaggregated stack reconciles (TC-01 on 2p1d).
//!
//! A prompt the decode worker has never seen is prefilled on a prefill
//! worker; the decode pulls the prompt's full blocks from it. On the CPU
//! stack that pull is KVCR's REMOTE path (on GPU stacks it is vLLM's
//! NixlConnector, which KVCR's telemetry does not see). Pass: the prefill's
//! `source_write` blocks = the decode's `remote_deliver` blocks = the
//! prompt's full blocks; the decode's read bytes = the prefill's
//! `source_write` bytes = blocks × the page sizes of the geometry; nothing
//! partial or failed.

use super::transfer::PeerTransfer;
use super::{Checks, Violation};

/// The decode received exactly the prompt's `full_blocks` blocks of
/// `bytes_per_block` bytes from the prefill, and both sides agree.
pub fn expect_prefill_to_decode(
    t: &PeerTransfer,
    full_blocks: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let expected_bytes = full_blocks * bytes_per_block;
    Checks::new("P→D transfer reconciles")
        .check(t.remote_deliver_success_ops > 0, || {
            "the decode shows no remote_deliver success: it did not pull the prefill's pages".into()
        })
        .check(t.source_write_success_ops > 0, || {
            "the prefill shows no source_write success: nobody read its pages".into()
        })
        .check(t.remote_deliver_blocks == full_blocks, || {
            format!(
                "decode remote_deliver blocks {} ≠ {full_blocks} full blocks of the prompt",
                t.remote_deliver_blocks
            )
        })
        .check(t.source_write_blocks == t.remote_deliver_blocks, || {
            format!(
                "prefill source_write blocks {} ≠ decode remote_deliver blocks {}",
                t.source_write_blocks, t.remote_deliver_blocks
            )
        })
        .check(t.source_write_bytes == expected_bytes, || {
            format!(
                "prefill source_write bytes {} ≠ {full_blocks} blocks × {bytes_per_block} bytes = {expected_bytes}",
                t.source_write_bytes
            )
        })
        .check(t.target_read_bytes == t.source_write_bytes, || {
            format!(
                "decode read bytes {} ≠ prefill source_write bytes {}",
                t.target_read_bytes, t.source_write_bytes
            )
        })
        .check(
            t.remote_deliver_partial_ops == 0
                && t.remote_deliver_failed_ops == 0
                && t.source_write_failed_ops == 0,
            || {
                format!(
                    "decode remote_deliver partial {} / failed {}, prefill source_write failed {} (all must be 0)",
                    t.remote_deliver_partial_ops, t.remote_deliver_failed_ops, t.source_write_failed_ops
                )
            },
        )
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hybrid geometry: 5 pages = 2 × 8 KiB attention + 3 × 4 KiB SSM parts.
    const HYBRID_BLOCK: u64 = 28672;

    fn pulled(blocks: u64, bytes_per_block: u64) -> PeerTransfer {
        PeerTransfer {
            source_write_success_ops: 1,
            source_write_blocks: blocks,
            source_write_bytes: blocks * bytes_per_block,
            remote_deliver_success_ops: 1,
            remote_deliver_blocks: blocks,
            target_read_bytes: blocks * bytes_per_block,
            ..Default::default()
        }
    }

    #[test]
    fn exact_pages_of_both_geometries_pass() {
        assert_eq!(expect_prefill_to_decode(&pulled(4, 8192), 4, 8192), Ok(()));
        assert_eq!(
            expect_prefill_to_decode(&pulled(4, HYBRID_BLOCK), 4, HYBRID_BLOCK),
            Ok(())
        );
    }

    #[test]
    fn a_decode_that_recomputed_fails() {
        let v = expect_prefill_to_decode(&PeerTransfer::default(), 4, 8192).unwrap_err();
        assert!(v.to_string().contains("did not pull"), "{v}");
        assert!(v.to_string().starts_with("P→D transfer reconciles"), "{v}");
    }

    #[test]
    fn fewer_blocks_than_the_prompt_fail() {
        let v = expect_prefill_to_decode(&pulled(3, 8192), 4, 8192).unwrap_err();
        assert!(
            v.to_string()
                .contains("decode remote_deliver blocks 3 ≠ 4 full blocks"),
            "{v}"
        );
    }

    #[test]
    fn missing_ssm_parts_fail_on_bytes() {
        // Only the attention pages moved: 4 × 16 KiB instead of 4 × 28 KiB.
        let t = PeerTransfer {
            source_write_bytes: 4 * 16384,
            target_read_bytes: 4 * 16384,
            ..pulled(4, HYBRID_BLOCK)
        };
        let v = expect_prefill_to_decode(&t, 4, HYBRID_BLOCK).unwrap_err();
        assert!(v.to_string().contains("4 blocks × 28672 bytes"), "{v}");
    }

    #[test]
    fn sides_that_disagree_fail() {
        let t = PeerTransfer {
            target_read_bytes: 4 * 8192 + 1,
            source_write_blocks: 5,
            ..pulled(4, 8192)
        };
        let v = expect_prefill_to_decode(&t, 4, 8192).unwrap_err();
        let text = v.to_string();
        assert!(text.contains("source_write blocks 5 ≠ decode remote_deliver blocks 4"));
        assert!(text.contains("decode read bytes 32769"), "{text}");
    }

    #[test]
    fn a_failed_pull_fails() {
        let t = PeerTransfer {
            remote_deliver_failed_ops: 1,
            ..pulled(4, 8192)
        };
        assert!(expect_prefill_to_decode(&t, 4, 8192).is_err());
    }
}
