//! A prompt's prefix came from the host tiers, not the device cache and not
//! a peer (TC-02, TC-05 DRAM arm, TC-04 replacement).

use serde::Serialize;

use super::{Checks, Violation};

/// The clause: a DRAM hit loaded the shared blocks from KVCR's host tier.
pub const HOST_TIER_HIT: &str = "host-tier (DRAM) hit";
/// The clause: a fresh prompt computes every full block.
pub const COLD_PREFILL: &str = "cold prefill";
/// The clause: a local hit comes from the device cache.
pub const DEVICE_HIT: &str = "device-cache (local) hit";
/// The clause: a repeat reports the prompt's cached blocks.
pub const CACHED_PASS: &str = "cached pass reused the cache";

/// Counter deltas of one request on one worker, plus what the response said.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostTierHit {
    pub local_deliver_success_ops: u64,
    pub local_deliver_blocks: u64,
    /// KVCR's own byte count of its local deliveries
    /// (`kvcr_transfer_bytes{scope=local_deliver}`).
    pub local_deliver_bytes: u64,
    /// Tiering read bytes from the engine-owned host tier (`0:cpu`).
    pub host_tier_read_bytes: u64,
    /// Tiering read bytes from the KVCR tier (`1:kvcr`).
    pub kvcr_read_bytes: u64,
    pub remote_deliver_ops: u64,
    /// Prompt tokens found in the device cache.
    pub device_cache_hit_tokens: u64,
    /// Prompt blocks computed by the engine.
    pub computed_blocks: u64,
    /// `usage.prompt_tokens_details.cached_tokens`, when the server sent it.
    pub cached_tokens: Option<u64>,
}

/// Which host-memory tier served a hit's blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServedBy {
    /// Blocks KVCR delivered from its local pool (LOCAL_G2, `local_deliver`).
    pub kvcr_local_blocks: u64,
    /// Blocks loaded from the engine's own host tier (FW_G2, no KVCR).
    pub engine_host_tier_blocks: u64,
}

impl HostTierHit {
    /// The blocks each host tier served (recorded with every hit).
    pub fn served_by(&self, bytes_per_block: u64) -> ServedBy {
        ServedBy {
            kvcr_local_blocks: self.local_deliver_blocks,
            engine_host_tier_blocks: self.host_tier_read_bytes / bytes_per_block.max(1),
        }
    }
}

/// The shared full blocks were loaded from host memory by KVCR, the tier the
/// test plan is about (its local pool, LOCAL_G2): none from the engine's own
/// host tier (which would pass with KVCR off, given a big enough host tier),
/// none from the device cache, none from a peer, none recomputed, and
/// `cached_tokens` covers them, block-aligned. KVCR's own byte counter of
/// the delivery agrees with its block counter (blocks × bytes per block).
pub fn expect_host_tier_hit(
    h: &HostTierHit,
    shared_blocks: u64,
    block_size: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let served = h.served_by(bytes_per_block);
    let loaded_blocks = served.kvcr_local_blocks + served.engine_host_tier_blocks;
    let shared_tokens = shared_blocks * block_size;
    Checks::new(HOST_TIER_HIT)
        .check(loaded_blocks >= shared_blocks, || {
            format!(
                "{loaded_blocks} blocks loaded from host memory (local_deliver blocks {} + host-tier read bytes {} / {bytes_per_block}) < {shared_blocks} shared full blocks",
                h.local_deliver_blocks, h.host_tier_read_bytes
            )
        })
        .check(served.engine_host_tier_blocks == 0, || {
            format!(
                "{} blocks came from the engine's own host tier, not KVCR's pool (a hit KVCR did not serve)",
                served.engine_host_tier_blocks
            )
        })
        .check(h.local_deliver_blocks == 0 || h.kvcr_read_bytes == h.local_deliver_blocks * bytes_per_block, || {
            format!(
                "KVCR read bytes {} ≠ local_deliver blocks {} × {bytes_per_block}",
                h.kvcr_read_bytes, h.local_deliver_blocks
            )
        })
        .check(h.local_deliver_bytes == h.local_deliver_blocks * bytes_per_block, || {
            format!(
                "KVCR local_deliver bytes {} ≠ local_deliver blocks {} × {bytes_per_block} = {}",
                h.local_deliver_bytes,
                h.local_deliver_blocks,
                h.local_deliver_blocks * bytes_per_block
            )
        })
        .check(h.device_cache_hit_tokens == 0, || {
            format!(
                "{} prompt tokens came from the device cache: the eviction did not take",
                h.device_cache_hit_tokens
            )
        })
        .check(h.remote_deliver_ops == 0, || {
            format!("{} remote_deliver operations (a local hit needs none)", h.remote_deliver_ops)
        })
        .check(h.computed_blocks == 0, || {
            format!("{} prompt blocks were recomputed", h.computed_blocks)
        })
        .check(
            match h.cached_tokens {
                Some(c) => c >= shared_tokens && c % block_size == 0,
                None => false,
            },
            || {
                format!(
                    "cached_tokens {:?} is not a block-aligned count ≥ {shared_tokens} ({shared_blocks} blocks × {block_size})",
                    h.cached_tokens
                )
            },
        )
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> HostTierHit {
        HostTierHit {
            local_deliver_success_ops: 1,
            local_deliver_blocks: 4,
            local_deliver_bytes: 4 * 8192,
            kvcr_read_bytes: 4 * 8192,
            cached_tokens: Some(64),
            ..Default::default()
        }
    }

    /// KVCR's byte counter overstating a delivery (blocks, tokens and the
    /// engine's read bytes right) fails on its own.
    #[test]
    fn overstated_local_deliver_bytes_fail() {
        let h = HostTierHit {
            local_deliver_bytes: 8 * 8192,
            ..good()
        };
        let v = expect_host_tier_hit(&h, 4, 16, 8192)
            .unwrap_err()
            .to_string();
        assert_eq!(
            v,
            "host-tier (DRAM) hit: KVCR local_deliver bytes 65536 ≠ local_deliver blocks 4 × 8192 = 32768"
        );
    }

    #[test]
    fn a_kvcr_local_hit_passes() {
        assert_eq!(expect_host_tier_hit(&good(), 4, 16, 8192), Ok(()));
    }

    #[test]
    fn a_hit_from_the_engine_host_tier_is_not_kvcr() {
        let h = HostTierHit {
            local_deliver_success_ops: 0,
            local_deliver_blocks: 0,
            local_deliver_bytes: 0,
            kvcr_read_bytes: 0,
            host_tier_read_bytes: 4 * 8192,
            ..good()
        };
        assert_eq!(
            h.served_by(8192),
            ServedBy {
                kvcr_local_blocks: 0,
                engine_host_tier_blocks: 4
            }
        );
        let v = expect_host_tier_hit(&h, 4, 16, 8192)
            .unwrap_err()
            .to_string();
        assert!(
            v.contains("4 blocks came from the engine's own host tier, not KVCR's pool"),
            "{v}"
        );
    }

    #[test]
    fn a_device_hit_means_no_eviction() {
        let h = HostTierHit {
            device_cache_hit_tokens: 64,
            ..good()
        };
        let v = expect_host_tier_hit(&h, 4, 16, 8192).unwrap_err();
        assert!(v.to_string().contains("eviction did not take"), "{v}");
    }

    #[test]
    fn a_recompute_fails() {
        let h = HostTierHit {
            local_deliver_blocks: 0,
            local_deliver_bytes: 0,
            kvcr_read_bytes: 0,
            computed_blocks: 4,
            cached_tokens: Some(0),
            ..good()
        };
        let v = expect_host_tier_hit(&h, 4, 16, 8192).unwrap_err();
        let text = v.to_string();
        assert!(
            text.contains("0 blocks loaded") && text.contains("4 prompt blocks were recomputed"),
            "{text}"
        );
    }

    #[test]
    fn unaligned_or_missing_cached_tokens_fail() {
        for cached in [None, Some(60), Some(32)] {
            let h = HostTierHit {
                cached_tokens: cached,
                ..good()
            };
            assert!(expect_host_tier_hit(&h, 4, 16, 8192).is_err(), "{cached:?}");
        }
    }

    #[test]
    fn a_remote_transfer_is_not_local() {
        let h = HostTierHit {
            remote_deliver_ops: 1,
            ..good()
        };
        assert!(expect_host_tier_hit(&h, 4, 16, 8192).is_err());
    }
}

/// A deposit's bytes agree with its blocks: KVCR's own
/// `kvcr_transfer_bytes{scope=local_fill}` equals its `local_fill` blocks ×
/// the bytes of a block, over one commit's window.
pub fn expect_fill_bytes(
    fill_blocks: u64,
    fill_bytes: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let expected = fill_blocks * bytes_per_block;
    Checks::new("KVCR deposit bytes")
        .check(fill_bytes == expected, || {
            format!(
                "local_fill bytes {fill_bytes} ≠ local_fill blocks {fill_blocks} × {bytes_per_block} = {expected}"
            )
        })
        .verdict()
}

#[cfg(test)]
mod fill_tests {
    use super::*;

    #[test]
    fn fill_bytes_must_match_fill_blocks() {
        assert_eq!(expect_fill_bytes(4, 4 * 8192, 8192), Ok(()));
        let v = expect_fill_bytes(4, 8 * 8192, 8192)
            .unwrap_err()
            .to_string();
        assert_eq!(
            v,
            "KVCR deposit bytes: local_fill bytes 65536 ≠ local_fill blocks 4 × 8192 = 32768"
        );
        assert!(expect_fill_bytes(4, 0, 8192).is_err());
    }
}

/// A cold request: every full block of the prompt was computed, none loaded.
pub fn expect_computed(h: &HostTierHit, prompt_blocks: u64) -> Result<(), Violation> {
    Checks::new(COLD_PREFILL)
        .check(h.computed_blocks == prompt_blocks, || {
            format!("{} blocks computed, expected all {prompt_blocks} full blocks of the prompt", h.computed_blocks)
        })
        .check(h.device_cache_hit_tokens == 0 && h.local_deliver_blocks == 0 && h.remote_deliver_ops == 0 && h.host_tier_read_bytes == 0, || {
            format!(
                "a fresh prompt reused cached blocks: device hit tokens {}, local_deliver blocks {}, host-tier bytes {}, remote_deliver ops {}",
                h.device_cache_hit_tokens, h.local_deliver_blocks, h.host_tier_read_bytes, h.remote_deliver_ops
            )
        })
        .verdict()
}

/// A device-cache hit: the shared prefix came from the device cache alone.
pub fn expect_device_hit(
    h: &HostTierHit,
    shared_blocks: u64,
    block_size: u64,
) -> Result<(), Violation> {
    let shared_tokens = shared_blocks * block_size;
    Checks::new(DEVICE_HIT)
        .check(h.device_cache_hit_tokens >= shared_tokens, || {
            format!(
                "{} prompt tokens from the device cache < {shared_tokens} shared",
                h.device_cache_hit_tokens
            )
        })
        .check(
            h.computed_blocks == 0 && h.local_deliver_blocks == 0 && h.remote_deliver_ops == 0,
            || {
                format!(
                    "computed {} / local_deliver {} / remote_deliver ops {} (all must be 0)",
                    h.computed_blocks, h.local_deliver_blocks, h.remote_deliver_ops
                )
            },
        )
        .verdict()
}

#[cfg(test)]
mod arm_tests {
    use super::*;

    #[test]
    fn cold_and_device_hits() {
        let cold = HostTierHit {
            computed_blocks: 4,
            ..Default::default()
        };
        assert_eq!(expect_computed(&cold, 4), Ok(()));
        assert!(expect_computed(
            &HostTierHit {
                computed_blocks: 3,
                device_cache_hit_tokens: 16,
                ..Default::default()
            },
            4
        )
        .is_err());
        let hit = HostTierHit {
            device_cache_hit_tokens: 64,
            ..Default::default()
        };
        assert_eq!(expect_device_hit(&hit, 4, 16), Ok(()));
        let v = expect_device_hit(&cold, 4, 16).unwrap_err().to_string();
        assert!(
            v.contains("0 prompt tokens from the device cache < 64"),
            "{v}"
        );
    }
}

/// A repeat pass reused the cache: the response says so, and for the whole
/// prompt (`cached_tokens` = `expected`, what the engine caches of the
/// prompt: its full blocks, on vLLM short of the last token). `> 0` alone
/// would pass a repeat that hit only a short prefix, and without it a
/// "cached" pass that recomputed everything would pass as long as the
/// tokens matched.
pub fn expect_cached_repeat(
    prompt: &str,
    cached_tokens: Option<u64>,
    expected: u64,
    block_size: u64,
) -> Result<(), Violation> {
    let block = block_size.max(1);
    Checks::new(CACHED_PASS)
        .check(expected > 0, || {
            format!("{prompt} has no full block to cache (block size {block_size}): the repeat proves nothing")
        })
        .check(cached_tokens == Some(expected), || {
            format!(
                "{prompt} repeated: cached_tokens {cached_tokens:?}, expected {expected} ({} full blocks × {block_size}, what the engine caches of the prompt)",
                expected / block
            )
        })
        .verdict()
}

#[cfg(test)]
mod cached_tests {
    use super::*;

    #[test]
    fn a_repeat_must_report_the_prompts_full_blocks() {
        assert_eq!(expect_cached_repeat("f1", Some(64), 64, 16), Ok(()));
        // Absent, nothing, unaligned, and a hit on one block only (which
        // `> 0` passed) all fail.
        for bad in [None, Some(0), Some(20), Some(16), Some(48), Some(80)] {
            let v = expect_cached_repeat("f1", bad, 64, 16)
                .unwrap_err()
                .to_string();
            assert!(
                v.starts_with("cached pass reused the cache: f1 repeated: cached_tokens")
                    && v.contains("expected 64 (4 full blocks × 16"),
                "{v}"
            );
        }
        let v = expect_cached_repeat("f1", Some(0), 0, 16)
            .unwrap_err()
            .to_string();
        assert!(v.contains("f1 has no full block to cache"), "{v}");
    }
}
