//! Observations: telemetry deltas and Guard events turned into the plain
//! numbers that verdicts judge.

use crate::telemetry::guard_log::{GuardEvent, GuardLogEntry};
use crate::telemetry::{Counter, Delta, OpResult, Scope, Tier};
use crate::verdict::local::HostTierHit;
use crate::verdict::transfer::PeerTransfer;

fn ops(delta: &Delta, scope: Scope, result: OpResult) -> u64 {
    delta.count(&Counter::OpCount(scope, result))
}

/// A peer transfer seen from the source's and the target's telemetry.
pub fn peer_transfer(source: &Delta, target: &Delta) -> PeerTransfer {
    PeerTransfer {
        source_write_success_ops: ops(source, Scope::SourceWrite, OpResult::Success),
        source_write_failed_ops: ops(source, Scope::SourceWrite, OpResult::Failed),
        source_write_blocks: source.count(&Counter::TransferBlocks(Scope::SourceWrite)),
        source_write_bytes: source.count(&Counter::TransferBytes(Scope::SourceWrite)),
        ..target_side(target)
    }
}

/// A transfer served by the Guard: the source side comes from the Guard's
/// `source_transfer_completed` events (the Guard has no metrics).
pub fn guard_transfer(guard_events: &[GuardLogEntry], target: &Delta) -> PeerTransfer {
    let (served, failed): (Vec<_>, Vec<_>) = guard_events
        .iter()
        .filter_map(|e| match &e.event {
            GuardEvent::SourceTransferCompleted(t) => Some(t),
            _ => None,
        })
        .partition(|t| t.result.as_deref() == Some("success"));
    PeerTransfer {
        source_write_success_ops: served.len() as u64,
        source_write_failed_ops: failed.len() as u64,
        source_write_blocks: served.iter().map(|t| t.blocks).sum(),
        source_write_bytes: served.iter().map(|t| t.bytes).sum(),
        ..target_side(target)
    }
}

fn target_side(target: &Delta) -> PeerTransfer {
    PeerTransfer {
        remote_deliver_success_ops: ops(target, Scope::RemoteDeliver, OpResult::Success),
        remote_deliver_partial_ops: ops(target, Scope::RemoteDeliver, OpResult::Partial),
        remote_deliver_failed_ops: ops(target, Scope::RemoteDeliver, OpResult::Failed),
        remote_deliver_blocks: target.count(&Counter::TransferBlocks(Scope::RemoteDeliver)),
        target_read_bytes: target.count(&Counter::TieringReadBytes(Tier::Kvcr)),
        ..PeerTransfer::default()
    }
}

/// One request's host-tier loads on one worker.
pub fn host_tier_hit(delta: &Delta, cached_tokens: Option<u64>) -> HostTierHit {
    HostTierHit {
        local_deliver_success_ops: ops(delta, Scope::LocalDeliver, OpResult::Success),
        local_deliver_blocks: delta.count(&Counter::TransferBlocks(Scope::LocalDeliver)),
        host_tier_read_bytes: delta.count(&Counter::TieringReadBytes(Tier::Host)),
        kvcr_read_bytes: delta.count(&Counter::TieringReadBytes(Tier::Kvcr)),
        remote_deliver_ops: [OpResult::Success, OpResult::Partial, OpResult::Failed]
            .into_iter()
            .map(|r| ops(delta, Scope::RemoteDeliver, r))
            .sum(),
        device_cache_hit_tokens: delta.count(&Counter::PrefixCacheHits),
        computed_blocks: delta.count(&Counter::ComputedBlocks),
        cached_tokens,
    }
}
