//! Readings: telemetry deltas and Guard events turned into the plain
//! numbers that verdicts judge. Every counter read here is required: one the
//! worker does not report is a [`NotReported`] error, never a 0.

use crate::telemetry::guard_log::{GuardEvent, GuardLogEntry};
use crate::telemetry::{Counter, Delta, NotReported, OpResult, Scope, Tier};
use crate::verdict::disagg::NixlPull;
use crate::verdict::local::HostTierHit;
use crate::verdict::transfer::{ComputedReading, PeerTransfer};

fn ops(delta: &Delta, scope: Scope, result: OpResult) -> Result<u64, NotReported> {
    delta.required_count(&Counter::OpCount(scope, result))
}

/// A peer transfer seen from the source's and the target's telemetry.
pub fn peer_transfer(source: &Delta, target: &Delta) -> Result<PeerTransfer, NotReported> {
    Ok(PeerTransfer {
        source_write_success_ops: ops(source, Scope::SourceWrite, OpResult::Success)?,
        source_write_failed_ops: ops(source, Scope::SourceWrite, OpResult::Failed)?,
        source_write_blocks: source.required_count(&Counter::TransferBlocks(Scope::SourceWrite))?,
        source_write_bytes: source.required_count(&Counter::TransferBytes(Scope::SourceWrite))?,
        ..target_side(target)?
    })
}

/// A transfer served by the Guard: the source side comes from the Guard's
/// `source_transfer_completed` events (the Guard has no metrics).
pub fn guard_transfer(
    guard_events: &[GuardLogEntry],
    target: &Delta,
) -> Result<PeerTransfer, NotReported> {
    let (served, failed): (Vec<_>, Vec<_>) = guard_events
        .iter()
        .filter_map(|e| match &e.event {
            GuardEvent::SourceTransferCompleted(t) => Some(t),
            _ => None,
        })
        .partition(|t| t.result.as_deref() == Some("success"));
    Ok(PeerTransfer {
        source_write_success_ops: served.len() as u64,
        source_write_failed_ops: failed.len() as u64,
        source_write_blocks: served.iter().map(|t| t.blocks).sum(),
        source_write_bytes: served.iter().map(|t| t.bytes).sum(),
        ..target_side(target)?
    })
}

fn target_side(target: &Delta) -> Result<PeerTransfer, NotReported> {
    Ok(PeerTransfer {
        remote_deliver_success_ops: ops(target, Scope::RemoteDeliver, OpResult::Success)?,
        remote_deliver_partial_ops: ops(target, Scope::RemoteDeliver, OpResult::Partial)?,
        remote_deliver_failed_ops: ops(target, Scope::RemoteDeliver, OpResult::Failed)?,
        remote_deliver_blocks: target
            .required_count(&Counter::TransferBlocks(Scope::RemoteDeliver))?,
        target_read_bytes: target.required_count(&Counter::TieringReadBytes(Tier::Kvcr))?,
        ..PeerTransfer::default()
    })
}

/// A NixlConnector pull seen from the decode's telemetry, with the prompt
/// tokens the prefill scheduled when its telemetry can be read.
pub fn nixl_pull(prefill: Option<&Delta>, decode: &Delta) -> Result<NixlPull, NotReported> {
    Ok(NixlPull {
        prefill_prompt_tokens: prefill
            .map(|p| p.required_count(&Counter::PrefixCacheQueries))
            .transpose()?,
        decode_transfers: decode.required_count(&Counter::NixlTransfers)?,
        decode_bytes: decode.required_count(&Counter::NixlTransferBytes)?,
        decode_failed: decode.required_count(&Counter::NixlFailedTransfers)?,
    })
}

/// How an engine tells how many prompt blocks it computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefillAccounting {
    /// The engine counts them (`cpu_engine_computed_blocks`).
    Counted,
    /// vLLM counts none: the prompt tokens it looked up in the device cache,
    /// minus those found there or loaded from outside it (host tier, KVCR),
    /// were computed; whole blocks of them are computed blocks.
    FromPrefixCache { block_size: u64 },
}

/// Prompt blocks the engine computed in `delta`'s window.
pub fn computed_blocks(delta: &Delta, how: PrefillAccounting) -> Result<u64, NotReported> {
    match how {
        PrefillAccounting::Counted => delta.required_count(&Counter::ComputedBlocks),
        PrefillAccounting::FromPrefixCache { block_size } => {
            let looked_up = delta.required_count(&Counter::PrefixCacheQueries)?;
            let found = delta.required_count(&Counter::PrefixCacheHits)?
                + delta.required_count(&Counter::ExternalPrefixCacheHits)?;
            Ok(looked_up.saturating_sub(found) / block_size.max(1))
        }
    }
}

/// The prompt blocks computed in `delta`'s window, for a sub-check that may
/// be skipped: an engine that counts them must report the count (absent
/// fails); one whose count is derived from prefix-cache counters (vLLM) and
/// does not report them gives [`ComputedReading::NotChecked`], never a 0.
pub fn computed_reading(
    delta: &Delta,
    how: PrefillAccounting,
) -> Result<ComputedReading, NotReported> {
    match how {
        PrefillAccounting::Counted => computed_blocks(delta, how).map(ComputedReading::Read),
        PrefillAccounting::FromPrefixCache { .. } => Ok(match computed_blocks(delta, how) {
            Ok(n) => ComputedReading::Read(n),
            Err(absent) => ComputedReading::NotChecked(format!(
                "computed blocks not checked: derived from the prefix-cache counters, and {absent}"
            )),
        }),
    }
}

/// Device-cache evictions in `delta`'s window, for an engine that counts
/// none (vLLM): the prompt tokens looked up and not found in the device
/// cache were admitted into it (computed, or loaded from a lower tier: both
/// take a device block); the first `capacity` admitted blocks may have
/// filled free slots, every one after them pushed an older block out.
pub fn evicted_past_capacity(
    delta: &Delta,
    block_size: u64,
    capacity: u64,
) -> Result<u64, NotReported> {
    let admitted_tokens = delta
        .required_count(&Counter::PrefixCacheQueries)?
        .saturating_sub(delta.required_count(&Counter::PrefixCacheHits)?);
    Ok((admitted_tokens / block_size.max(1)).saturating_sub(capacity))
}

/// One request's host-tier loads on one worker.
pub fn host_tier_hit(
    delta: &Delta,
    cached_tokens: Option<u64>,
    prefill: PrefillAccounting,
) -> Result<HostTierHit, NotReported> {
    let mut remote_deliver_ops = 0;
    for result in [OpResult::Success, OpResult::Partial, OpResult::Failed] {
        remote_deliver_ops += ops(delta, Scope::RemoteDeliver, result)?;
    }
    Ok(HostTierHit {
        local_deliver_success_ops: ops(delta, Scope::LocalDeliver, OpResult::Success)?,
        local_deliver_blocks: delta
            .required_count(&Counter::TransferBlocks(Scope::LocalDeliver))?,
        local_deliver_bytes: delta.required_count(&Counter::TransferBytes(Scope::LocalDeliver))?,
        host_tier_read_bytes: delta.required_count(&Counter::TieringReadBytes(Tier::Host))?,
        kvcr_read_bytes: delta.required_count(&Counter::TieringReadBytes(Tier::Kvcr))?,
        remote_deliver_ops,
        device_cache_hit_tokens: delta.required_count(&Counter::PrefixCacheHits)?,
        computed_blocks: computed_blocks(delta, prefill)?,
        cached_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{Snapshot, SnapshotSource};

    fn delta(before: &str, after: &str) -> Delta {
        let snap = |text: &str, label: &str| {
            Snapshot::from_prometheus_text(
                text,
                Some("B".into()),
                SnapshotSource::Text {
                    label: label.into(),
                },
            )
        };
        snap(after, "after").since(&snap(before, "before")).unwrap()
    }

    /// vLLM: a hinted request of 5 full blocks and an 8-token suffix, 4
    /// blocks loaded through KVCR: 88 tokens looked up, 0 found in the
    /// device cache, 64 outside it: 24 computed tokens, one full block.
    #[test]
    fn vllm_computed_blocks_are_derived_from_the_prefix_cache() {
        let before = "vllm:prefix_cache_queries_total 100\nvllm:prefix_cache_hits_total 10\nvllm:external_prefix_cache_hits_total 0\n";
        let after = "vllm:prefix_cache_queries_total 188\nvllm:prefix_cache_hits_total 10\nvllm:external_prefix_cache_hits_total 64\n";
        let how = PrefillAccounting::FromPrefixCache { block_size: 16 };
        assert_eq!(
            computed_reading(&delta(before, after), how).unwrap(),
            ComputedReading::Read(1)
        );
    }

    #[test]
    fn vllm_without_prefix_cache_counters_is_not_checked_and_the_cpu_engine_fails() {
        let text = "vllm:kvcr_transfer_blocks_total{operation=\"remote_deliver\"} 4\n";
        let d = delta(text, text);
        let how = PrefillAccounting::FromPrefixCache { block_size: 16 };
        let ComputedReading::NotChecked(why) = computed_reading(&d, how).unwrap() else {
            panic!("an absent prefix-cache counter read as a number");
        };
        assert!(why.starts_with("computed blocks not checked"), "{why}");
        assert!(computed_reading(&d, PrefillAccounting::Counted).is_err());
    }
}

#[cfg(test)]
mod vllm_derivation_tests {
    //! vLLM's derived readings: it counts neither the blocks it computed
    //! nor its device-cache evictions, so both come from its prefix-cache
    //! counters.
    use super::*;
    use crate::telemetry::{Snapshot, SnapshotSource};

    /// A delta of vLLM's prefix-cache counters (totals since an empty start).
    fn delta(queries: u64, hits: u64, external_hits: Option<u64>) -> Delta {
        let mut text = format!(
            "# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total {queries}\n\
             # TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {hits}\n"
        );
        if let Some(x) = external_hits {
            text.push_str(&format!(
                "# TYPE vllm:external_prefix_cache_hits counter\nvllm:external_prefix_cache_hits_total {x}\n"
            ));
        }
        let source = || SnapshotSource::Text {
            label: "vllm".into(),
        };
        let after = Snapshot::from_prometheus_text(&text, None, source());
        let before = Snapshot::new(None, SnapshotSource::Empty);
        Delta::between(&before, &after).unwrap()
    }

    const BLOCK: u64 = 32;
    const VLLM: PrefillAccounting = PrefillAccounting::FromPrefixCache { block_size: BLOCK };

    #[test]
    fn computed_blocks_are_the_whole_blocks_looked_up_and_not_found() {
        // Cold 72-token prompt: nothing found, 2 whole blocks computed (the
        // 8-token tail is no block).
        assert_eq!(computed_blocks(&delta(72, 0, Some(0)), VLLM), Ok(2));
        // Device hit on 2 blocks: the tail only, no block computed.
        assert_eq!(computed_blocks(&delta(72, 64, Some(0)), VLLM), Ok(0));
        // 1 block from the device cache, 1 loaded by KVCR: none computed.
        assert_eq!(computed_blocks(&delta(72, 32, Some(32)), VLLM), Ok(0));
        // A 64-token prompt seen before: vLLM recomputes the last block.
        assert_eq!(computed_blocks(&delta(64, 32, Some(0)), VLLM), Ok(1));
        // More found than looked up (inconsistent counters) reads as 0,
        // never as a huge count.
        assert_eq!(computed_blocks(&delta(32, 64, Some(0)), VLLM), Ok(0));
    }

    #[test]
    fn computed_blocks_need_every_counter() {
        let err = computed_blocks(&delta(72, 0, None), VLLM).unwrap_err();
        assert!(
            err.to_string().contains("external_prefix_cache_hits"),
            "{err}"
        );
    }

    #[test]
    fn evictions_are_the_blocks_admitted_past_the_device_capacity() {
        // 32 fillers of 5 blocks each (160 tokens), nothing found, into a
        // device cache of 64 blocks: 160 admitted, 96 pushed an older one out.
        assert_eq!(
            evicted_past_capacity(&delta(32 * 160, 0, None), BLOCK, 64),
            Ok(96)
        );
        // Fewer admitted than the cache holds: nothing proven evicted.
        assert_eq!(
            evicted_past_capacity(&delta(40 * 32, 0, None), BLOCK, 64),
            Ok(0)
        );
        // Hits were not admitted (they were already there).
        assert_eq!(
            evicted_past_capacity(&delta(100 * 32, 50 * 32, None), BLOCK, 64),
            Ok(0)
        );
        assert_eq!(
            evicted_past_capacity(&delta(200 * 32, 50 * 32, None), BLOCK, 64),
            Ok(86)
        );
    }
}
