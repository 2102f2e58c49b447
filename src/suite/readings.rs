//! Readings: telemetry deltas and Guard events turned into the plain
//! numbers that verdicts judge. Every counter read here is required: one the
//! worker does not report is a [`NotReported`] error, never a 0.

use crate::telemetry::guard_log::{GuardEvent, GuardLogEntry};
use crate::telemetry::{Counter, Delta, NotReported, OpResult, Scope, Tier};
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
