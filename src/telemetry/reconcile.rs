//! Reconciliation of a hinted peer transfer (kvcr quick-start §5, TC-03):
//! the source's and the target's deltas over the same window must agree.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::names::{Counter, Scope, Tier};
use super::snapshot::{Delta, Unreadable};

/// The figures of a peer transfer and what did not reconcile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerTransferCheck {
    /// Source: `source_write` success operations.
    pub source_successes: u64,
    /// Source: `source_write` operations with any other result, by result.
    #[serde(default)]
    pub source_unsuccessful: BTreeMap<String, u64>,
    /// Source: `source_write` blocks.
    pub source_write_blocks: u64,
    /// Source: `source_write` bytes.
    pub source_write_bytes: u64,
    /// Target: `remote_deliver` success operations.
    pub target_successes: u64,
    /// Target: `remote_deliver` blocks.
    pub remote_deliver_blocks: u64,
    /// Target: bytes read into the device cache from the KVCR tier.
    pub target_read_bytes: u64,
    /// Target: `remote_deliver` operations with any result other than
    /// `success` (`partial`, `failed`, `timeout`, ...), by result.
    #[serde(default)]
    pub target_unsuccessful: BTreeMap<String, u64>,
    /// Each criterion that failed, in words (empty: reconciled).
    pub findings: Vec<String>,
}

impl PeerTransferCheck {
    /// Checks the source's and target's deltas. `expected_blocks` (the full
    /// blocks of the shared prefix) and `bytes_per_block` (all pages of a
    /// block) are checked when given.
    pub fn check(
        source: &Delta,
        target: &Delta,
        expected_blocks: Option<u64>,
        bytes_per_block: Option<u64>,
    ) -> Result<Self, Unreadable> {
        let s = |c: Counter| source.required_count(&c);
        let t = |c: Counter| target.required_count(&c);
        let source_ops = source.ops_by_result(&Scope::SourceWrite)?;
        let target_ops = target.ops_by_result(&Scope::RemoteDeliver)?;
        let mut c = PeerTransferCheck {
            source_successes: source_ops.success,
            source_unsuccessful: source_ops.unsuccessful.clone(),
            source_write_blocks: s(Counter::TransferBlocks(Scope::SourceWrite))?,
            source_write_bytes: s(Counter::TransferBytes(Scope::SourceWrite))?,
            target_successes: target_ops.success,
            remote_deliver_blocks: t(Counter::TransferBlocks(Scope::RemoteDeliver))?,
            target_read_bytes: t(Counter::TieringReadBytes(Tier::Kvcr))?,
            target_unsuccessful: target_ops.unsuccessful.clone(),
            findings: Vec::new(),
        };
        let mut f = Vec::new();
        if c.source_successes == 0 {
            f.push("the source shows no source_write success".to_string());
        }
        if c.target_successes == 0 {
            f.push("the target shows no remote_deliver success".to_string());
        }
        if c.remote_deliver_blocks == 0 || c.source_write_blocks != c.remote_deliver_blocks {
            f.push(format!(
                "blocks differ or are zero: source source_write {} vs target remote_deliver {}",
                c.source_write_blocks, c.remote_deliver_blocks
            ));
        }
        if c.target_read_bytes != c.source_write_bytes {
            f.push(format!(
                "bytes differ: target KVCR-tier read {} vs source source_write {}",
                c.target_read_bytes, c.source_write_bytes
            ));
        }
        if target_ops.unsuccessful_total() > 0 {
            f.push(format!(
                "remote_deliver {} on the target (every result other than success must be 0)",
                target_ops.unsuccessful_text()
            ));
        }
        if source_ops.unsuccessful_total() > 0 {
            f.push(format!(
                "source_write {} on the source (every result other than success must be 0)",
                source_ops.unsuccessful_text()
            ));
        }
        if let Some(want) = expected_blocks {
            if c.remote_deliver_blocks != want {
                f.push(format!(
                    "expected {want} blocks (full blocks of the shared prefix), target delivered {}",
                    c.remote_deliver_blocks
                ));
            }
        }
        if let Some(per) = bytes_per_block {
            let want = c.source_write_blocks.saturating_mul(per);
            if c.source_write_bytes != want {
                f.push(format!(
                    "expected {} blocks x {per} bytes = {want} bytes, source wrote {}",
                    c.source_write_blocks, c.source_write_bytes
                ));
            }
        }
        c.findings = f;
        Ok(c)
    }

    /// Whether every criterion held.
    pub fn is_reconciled(&self) -> bool {
        self.findings.is_empty()
    }
}

/// `partial 1, timeout 2`, or `none`.
fn not_ok(by_result: &BTreeMap<String, u64>) -> String {
    if by_result.is_empty() {
        return "none".into();
    }
    by_result
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for PeerTransferCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "peer transfer: source {} blocks / {} bytes ({} ok, not ok: {}); target {} blocks / {} bytes read ({} ok, not ok: {})",
            self.source_write_blocks,
            self.source_write_bytes,
            self.source_successes,
            not_ok(&self.source_unsuccessful),
            self.remote_deliver_blocks,
            self.target_read_bytes,
            self.target_successes,
            not_ok(&self.target_unsuccessful)
        )?;
        if self.findings.is_empty() {
            writeln!(f, "  reconciled")?;
        }
        for x in &self.findings {
            writeln!(f, "  NOT reconciled: {x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::interval_log::IntervalAccumulator;
    use crate::telemetry::snapshot::{Snapshot, SnapshotSource};

    fn delta(line: &str) -> Delta {
        let mut acc = IntervalAccumulator::default();
        acc.add_line("t", line);
        let before = Snapshot::new(None, SnapshotSource::Empty);
        Delta::between(&before, &acc.snapshot(None, SnapshotSource::Empty)).unwrap()
    }

    #[test]
    fn quick_start_figures_reconcile() {
        let src = delta("KV Transfer metrics: vllm:kvcr_duration_seconds:('transfer', 'success')_count=1, vllm:kvcr_duration_seconds:('source_write', 'success')_count=1, vllm:kvcr_transfer_blocks:('source_write',)=41, vllm:kvcr_transfer_bytes:('source_write',)=300941312");
        let dst = delta("KV Transfer metrics: vllm:kvcr_duration_seconds:('remote_deliver', 'success')_count=1, vllm:kvcr_transfer_blocks:('remote_deliver',)=41, vllm:kv_offload_tiering_read_bytes:('1:kvcr',)=300941312");
        let ok = PeerTransferCheck::check(&src, &dst, Some(41), Some(7340032)).unwrap();
        assert!(ok.is_reconciled(), "{ok}");
        let bad_dst = delta("KV Transfer metrics: vllm:kvcr_duration_seconds:('remote_deliver', 'partial')_count=1, vllm:kvcr_transfer_blocks:('remote_deliver',)=40, vllm:kv_offload_tiering_read_bytes:('1:kvcr',)=300941311");
        let bad = PeerTransferCheck::check(&src, &bad_dst, Some(41), None).unwrap();
        insta::assert_snapshot!(bad.to_string());
        // A source write with a result the quick start does not name fails too.
        let late_src = delta("KV Transfer metrics: vllm:kvcr_duration_seconds:('source_write', 'success')_count=1, vllm:kvcr_duration_seconds:('source_write', 'timeout')_count=1, vllm:kvcr_transfer_blocks:('source_write',)=41, vllm:kvcr_transfer_bytes:('source_write',)=300941312");
        let late = PeerTransferCheck::check(&late_src, &dst, Some(41), None).unwrap();
        assert_eq!(
            late.findings,
            ["source_write timeout 1 on the source (every result other than success must be 0)"]
        );
        // A target that reports no tiering reads at all cannot reconcile.
        let silent_dst = delta("KV Transfer metrics: vllm:kvcr_duration_seconds:('remote_deliver', 'success')_count=1, vllm:kvcr_transfer_blocks:('remote_deliver',)=41");
        let err = PeerTransferCheck::check(&src, &silent_dst, Some(41), None).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("tiering_read_bytes{tier=kvcr} not reported by <unnamed worker>"),
            "{err}"
        );
    }
}
