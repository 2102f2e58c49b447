//! The P→D transfer of a disaggregated stack reconciles (TC-01 on 2p1d).
//!
//! A prompt the decode worker has never seen is prefilled on a prefill
//! worker; the decode pulls the prompt's KV from it. Two paths, one claim
//! (`P→D transfer reconciles`), each read from the telemetry of the path
//! that moved the blocks:
//! - KVCR's REMOTE path (the CPU engine): the prefill's `source_write`
//!   blocks = the decode's `remote_deliver` blocks = the prompt's full
//!   blocks; the decode's read bytes = the prefill's `source_write` bytes =
//!   blocks × the page sizes of the geometry; nothing partial or failed
//!   ([`expect_prefill_to_decode`]).
//! - vLLM's NixlConnector (vLLM, CPU and GPU platforms): KVCR's counters do
//!   not see it; the decode's `vllm:nixl_*` counters do. The prefill
//!   scheduled the prompt, the decode read it over NIXL, exactly the blocks
//!   that hold the prompt's tokens (the partial last one too: NixlConnector
//!   pulls every prompt block), nothing failed ([`expect_nixl_prefill_to_decode`]).

use serde::Serialize;

use super::transfer::PeerTransfer;
use super::{Checks, Violation};

/// The clause: the decode pulled exactly the prompt's blocks from its prefill.
pub const CLAIM: &str = "P→D transfer reconciles";

/// The decode received exactly the prompt's `full_blocks` blocks of
/// `bytes_per_block` bytes from the prefill, and both sides agree.
pub fn expect_prefill_to_decode(
    t: &PeerTransfer,
    full_blocks: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let expected_bytes = full_blocks * bytes_per_block;
    Checks::new(CLAIM)
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
        .check(t.remote_deliver_unsuccessful.is_none(), || {
            t.remote_deliver_unsuccessful.failure("decode remote_deliver")
        })
        .check(t.source_write_unsuccessful.is_none(), || {
            t.source_write_unsuccessful.failure("prefill source_write")
        })
        .verdict()
}

/// A NixlConnector pull as vLLM's counters show it: the decode's NIXL
/// reads in the window of one request, and the prompt tokens its prefill
/// scheduled (`None` when the prefill's telemetry cannot be read, e.g. it
/// died).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NixlPull {
    /// Prompt tokens the prefill looked up in its prefix cache: a request
    /// it scheduled.
    pub prefill_prompt_tokens: Option<u64>,
    /// Successful NIXL reads of the decode (`vllm:nixl_bytes_transferred_count`).
    pub decode_transfers: u64,
    /// Bytes they moved (`vllm:nixl_bytes_transferred_sum`).
    pub decode_bytes: u64,
    /// Failed NIXL transfers, handshakes and notifications of the decode.
    pub decode_failed: u64,
}

/// The decode read exactly the `prompt_blocks` blocks of `bytes_per_block`
/// bytes that hold a `prompt_tokens`-token prompt over NIXL, nothing failed,
/// and the prefill (when readable) scheduled the prompt.
pub fn expect_nixl_prefill_to_decode(
    p: &NixlPull,
    prompt_tokens: u64,
    prompt_blocks: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let expected_bytes = prompt_blocks * bytes_per_block;
    Checks::new(CLAIM)
        .check(p.decode_transfers > 0, || {
            "the decode shows no NIXL read (vllm:nixl_bytes_transferred_count): it did not pull the prefill's pages".into()
        })
        .check(p.decode_transfers == 0 || p.decode_bytes == expected_bytes, || {
            format!(
                "decode NIXL read bytes {} ≠ {prompt_blocks} blocks holding the prompt × {bytes_per_block} bytes = {expected_bytes}",
                p.decode_bytes
            )
        })
        .check(p.decode_failed == 0, || {
            format!(
                "decode NIXL failed transfers {} (vllm:nixl_num_failed_transfers; must be 0)",
                p.decode_failed
            )
        })
        .check(
            !matches!(p.prefill_prompt_tokens, Some(t) if t < prompt_tokens),
            || {
                format!(
                    "the prefill looked up {} prompt tokens, fewer than the prompt's {prompt_tokens}: it did not prefill it",
                    p.prefill_prompt_tokens.unwrap_or(0)
                )
            },
        )
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::transfer::Unsuccessful;

    /// The vLLM CPU lane: 144-token prompts in blocks of 64 tokens of
    /// 131072 bytes: 3 blocks hold one.
    fn nixl_pulled(blocks: u64) -> NixlPull {
        NixlPull {
            prefill_prompt_tokens: Some(144),
            decode_transfers: 1,
            decode_bytes: blocks * 131072,
            decode_failed: 0,
        }
    }

    #[test]
    fn a_nixl_pull_of_every_prompt_block_passes() {
        assert_eq!(
            expect_nixl_prefill_to_decode(&nixl_pulled(3), 144, 3, 131072),
            Ok(())
        );
        let prefill_dead = NixlPull {
            prefill_prompt_tokens: None,
            ..nixl_pulled(3)
        };
        assert_eq!(
            expect_nixl_prefill_to_decode(&prefill_dead, 144, 3, 131072),
            Ok(())
        );
    }

    #[test]
    fn a_decode_without_a_nixl_read_did_not_pull() {
        let recomputed = NixlPull {
            prefill_prompt_tokens: None,
            ..NixlPull::default()
        };
        let v = expect_nixl_prefill_to_decode(&recomputed, 144, 3, 131072).unwrap_err();
        let text = v.to_string();
        assert!(text.starts_with("P→D transfer reconciles"), "{text}");
        assert!(text.contains("did not pull the prefill's pages"), "{text}");
        assert!(
            !text.contains("read bytes"),
            "no bytes claim without a read: {text}"
        );
    }

    #[test]
    fn a_nixl_pull_of_the_full_blocks_only_fails_on_bytes() {
        let v = expect_nixl_prefill_to_decode(&nixl_pulled(2), 144, 3, 131072).unwrap_err();
        assert!(
            v.to_string().contains(
                "decode NIXL read bytes 262144 ≠ 3 blocks holding the prompt × 131072 bytes = 393216"
            ),
            "{v}"
        );
    }

    #[test]
    fn a_failed_nixl_transfer_fails_even_after_a_retry() {
        let retried = NixlPull {
            decode_failed: 1,
            ..nixl_pulled(3)
        };
        let v = expect_nixl_prefill_to_decode(&retried, 144, 3, 131072).unwrap_err();
        assert!(
            v.to_string().contains("decode NIXL failed transfers 1"),
            "{v}"
        );
    }

    #[test]
    fn a_prefill_that_never_saw_the_prompt_fails() {
        let elsewhere = NixlPull {
            prefill_prompt_tokens: Some(0),
            ..nixl_pulled(3)
        };
        let v = expect_nixl_prefill_to_decode(&elsewhere, 144, 3, 131072).unwrap_err();
        assert!(
            v.to_string()
                .contains("the prefill looked up 0 prompt tokens, fewer than the prompt's 144"),
            "{v}"
        );
    }

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
            remote_deliver_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
            ..pulled(4, 8192)
        };
        assert!(expect_prefill_to_decode(&t, 4, 8192).is_err());
        let t = PeerTransfer {
            source_write_unsuccessful: Unsuccessful::of(&[("timeout", 1)]),
            ..pulled(4, 8192)
        };
        let v = expect_prefill_to_decode(&t, 4, 8192)
            .unwrap_err()
            .to_string();
        assert!(v.contains("prefill source_write timeout 1"), "{v}");
    }
}
