//! One prefix hinted from a source to two targets at once (TC-17's fan-out).
//!
//! KVCR 0.1.1 serves a pull of blocks its host pool holds READY by claiming
//! them for that write (`LocalDramManager.acquire_sources` counts claims per
//! block), and keys each source write by its target and operation handle:
//! two targets pulling the same blocks at once get two writes, and neither
//! waits for nor refuses the other. So both targets must get every block of
//! the prefix once, the source must write each block once per target, and
//! nothing may fail. The pulls must really have been in flight together,
//! or the case proved nothing about concurrent pulls.

use std::collections::BTreeMap;

use serde::Serialize;

use super::transfer::Unsuccessful;
use super::{Checks, Violation};

/// Claim: the targets' pulls of the prefix were in flight at the same time
/// (the premise, proven).
pub const PULLS_OVERLAPPED: &str = "the two targets' pulls of one prefix were in flight at once";
/// Claim: both pulls delivered every block once, and the source wrote each
/// block once per target.
pub const FAN_OUT_RECONCILED: &str = "a prefix pulled by two targets at once reconciles";

/// When one target's delivery of the prefix was in flight: its engine's
/// `deliver` call, on the host's monotonic clock (both targets run on one
/// host, so their clocks are one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PullWindow {
    pub started_ns: u64,
    pub ended_ns: u64,
}

/// One target's pull: its name, its request and the window its engine
/// logged (`None` when it logged none: no delivery was attempted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetWindow {
    pub target: String,
    pub request_id: String,
    pub window: Option<PullWindow>,
}

/// How long two windows were both open, ns (negative: the gap between them).
fn overlap_ns(a: &PullWindow, b: &PullWindow) -> i128 {
    i128::from(a.ended_ns.min(b.ended_ns)) - i128::from(a.started_ns.max(b.started_ns))
}

fn ms(ns: i128) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// How long both pulls were in flight, ms (negative: how far apart they
/// ran); `None` when a target logged no pull.
pub fn overlap_ms(first: &TargetWindow, second: &TargetWindow) -> Option<f64> {
    match (&first.window, &second.window) {
        (Some(a), Some(b)) => Some(overlap_ns(a, b) as f64 / 1e6),
        _ => None,
    }
}

/// The two pulls were both in flight for some time: the later one started
/// before the earlier one ended. Windows that only touch, or a target that
/// logged no pull at all, fail.
pub fn expect_pulls_overlapped(
    first: &TargetWindow,
    second: &TargetWindow,
) -> Result<(), Violation> {
    let fail = |detail: String| {
        Err(Violation {
            claim: PULLS_OVERLAPPED,
            detail: format!("not in flight at once: {detail}"),
        })
    };
    let (a, b) = match (&first.window, &second.window) {
        (Some(a), Some(b)) => (a, b),
        (a, b) => {
            let missing: Vec<&str> = [(first, a), (second, b)]
                .iter()
                .filter(|(_, w)| w.is_none())
                .map(|(t, _)| t.target.as_str())
                .collect();
            return fail(format!(
                "{} logged no delivery of the prefix (requests {} and {})",
                missing.join(" and "),
                first.request_id,
                second.request_id
            ));
        }
    };
    let overlap = overlap_ns(a, b);
    if overlap > 0 {
        return Ok(());
    }
    let origin = i128::from(a.started_ns.min(b.started_ns));
    let span = |w: &PullWindow| {
        format!(
            "{}–{} ms",
            ms(i128::from(w.started_ns) - origin),
            ms(i128::from(w.ended_ns) - origin)
        )
    };
    fail(format!(
        "{}'s pull ran {} and {}'s {} (from the first start): one after the other, {} ms apart",
        first.target,
        span(a),
        second.target,
        span(b),
        ms(-overlap)
    ))
}

/// The source's writes of the fan-out window (its `source_write` counters).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SourceWrites {
    pub success_ops: u64,
    pub unsuccessful: Unsuccessful,
    pub blocks: u64,
    pub bytes: u64,
}

/// One target's side: its `remote_deliver` counters, the bytes it read from
/// the KVCR tier, and the blocks its engine logged as delivered into its
/// request (in order, repeats kept).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TargetPull {
    pub target: String,
    pub success_ops: u64,
    pub unsuccessful: Unsuccessful,
    pub blocks: u64,
    pub read_bytes: u64,
    pub delivered_hashes: Vec<u64>,
}

/// Both targets got every block of the prefix (`prefix_hashes`) once, with
/// nothing partial or failed, and the source wrote each block once per
/// target: its `source_write` blocks, bytes and operations are the sums of
/// the targets'.
pub fn expect_fan_out_reconciled(
    source: &SourceWrites,
    targets: &[TargetPull],
    prefix_hashes: &[u64],
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let blocks = prefix_hashes.len() as u64;
    let n = targets.len() as u64;
    let mut checks = Checks::new(FAN_OUT_RECONCILED);
    for t in targets {
        let name = &t.target;
        checks
            .check(t.success_ops > 0, || {
                format!("target {name} shows no remote_deliver success: its pull did not deliver")
            })
            .check(t.unsuccessful.is_none(), || {
                format!(
                    "target {name}: {}",
                    t.unsuccessful.failure("remote_deliver")
                )
            })
            .check(t.blocks == blocks, || {
                format!(
                    "target {name}: remote_deliver blocks {} ≠ the prefix's {blocks}",
                    t.blocks
                )
            })
            .check(t.read_bytes == blocks * bytes_per_block, || {
                format!(
                    "target {name} read {} bytes ≠ {blocks} blocks × {bytes_per_block} bytes",
                    t.read_bytes
                )
            });
        if let Some(wrong) = not_each_once(&t.delivered_hashes, prefix_hashes) {
            checks.check(false, || format!("target {name} was delivered {wrong}"));
        }
    }
    let target_ops: u64 = targets.iter().map(|t| t.success_ops).sum();
    checks
        .check(source.unsuccessful.is_none(), || {
            source.unsuccessful.failure("source_write")
        })
        .check(source.blocks == n * blocks, || {
            format!(
                "the source wrote {} blocks ≠ {n} targets × {blocks} blocks of the prefix",
                source.blocks
            )
        })
        .check(source.bytes == n * blocks * bytes_per_block, || {
            format!(
                "source_write bytes {} ≠ {n} targets × {blocks} blocks × {bytes_per_block} bytes",
                source.bytes
            )
        })
        .check(source.success_ops == target_ops, || {
            format!(
                "source_write operations {} ≠ the targets' {target_ops} remote_deliver successes",
                source.success_ops
            )
        })
        .verdict()
}

/// How `delivered` differs from each of `prefix` exactly once: blocks
/// missing, repeated, or not of the prefix; `None` when it does not.
fn not_each_once(delivered: &[u64], prefix: &[u64]) -> Option<String> {
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for h in delivered {
        *seen.entry(*h).or_default() += 1;
    }
    let missing: Vec<String> = prefix
        .iter()
        .filter(|h| !seen.contains_key(h))
        .map(u64::to_string)
        .collect();
    let repeated: Vec<String> = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(h, n)| format!("{h} ×{n}"))
        .collect();
    let foreign: Vec<String> = seen
        .keys()
        .filter(|h| !prefix.contains(h))
        .map(u64::to_string)
        .collect();
    let mut parts = Vec::new();
    for (what, list) in [
        ("missing", missing),
        ("repeated", repeated),
        ("not of the prefix", foreign),
    ] {
        if !list.is_empty() {
            parts.push(format!("{what}: {}", list.join(", ")));
        }
    }
    (!parts.is_empty()).then(|| {
        format!(
            "{} blocks, not each of the prefix's {} once ({})",
            delivered.len(),
            prefix.len(),
            parts.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: u64 = 1024;
    const PREFIX: [u64; 4] = [11, 12, 13, 14];

    fn window(target: &str, started_ns: u64, ended_ns: u64) -> TargetWindow {
        TargetWindow {
            target: target.into(),
            request_id: format!("r-{target}"),
            window: Some(PullWindow {
                started_ns,
                ended_ns,
            }),
        }
    }

    #[test]
    fn pulls_in_flight_together_pass_in_either_order() {
        let (b, c) = (
            window("B", 1_000_000, 9_000_000),
            window("C", 2_000_000, 12_000_000),
        );
        assert_eq!(expect_pulls_overlapped(&b, &c), Ok(()));
        assert_eq!(expect_pulls_overlapped(&c, &b), Ok(()));
        assert_eq!(overlap_ms(&b, &c), Some(7.0));
        // One inside the other.
        let inner = window("C", 3_000_000, 4_000_000);
        assert_eq!(expect_pulls_overlapped(&b, &inner), Ok(()));
        assert_eq!(overlap_ms(&inner, &b), Some(1.0));
    }

    #[test]
    fn pulls_one_after_the_other_fail_with_the_gap() {
        let (b, c) = (
            window("B", 5_000_000, 9_200_000),
            window("C", 66_300_000, 68_000_000),
        );
        assert_eq!(
            expect_pulls_overlapped(&b, &c).unwrap_err().to_string(),
            "the two targets' pulls of one prefix were in flight at once: not in flight at once: B's pull ran 0.0–4.2 ms and C's 61.3–63.0 ms (from the first start): one after the other, 57.1 ms apart"
        );
        assert_eq!(overlap_ms(&b, &c), Some(-57.1));
        // Windows that only touch were never both in flight.
        let touching = window("C", 9_200_000, 10_000_000);
        assert!(expect_pulls_overlapped(&b, &touching)
            .unwrap_err()
            .detail
            .contains("one after the other, 0.0 ms apart"));
    }

    #[test]
    fn a_target_that_logged_no_pull_fails() {
        let b = window("B", 1, 2);
        let c = TargetWindow {
            window: None,
            ..window("C", 0, 0)
        };
        let v = expect_pulls_overlapped(&b, &c).unwrap_err();
        assert_eq!(v.claim, PULLS_OVERLAPPED);
        assert_eq!(
            v.detail,
            "not in flight at once: C logged no delivery of the prefix (requests r-B and r-C)"
        );
    }

    fn target(name: &str) -> TargetPull {
        TargetPull {
            target: name.into(),
            success_ops: 1,
            unsuccessful: Unsuccessful::default(),
            blocks: 4,
            read_bytes: 4 * BYTES,
            delivered_hashes: PREFIX.to_vec(),
        }
    }

    fn source() -> SourceWrites {
        SourceWrites {
            success_ops: 2,
            unsuccessful: Unsuccessful::default(),
            blocks: 8,
            bytes: 8 * BYTES,
        }
    }

    #[test]
    fn two_full_deliveries_and_a_write_per_target_reconcile() {
        let targets = [target("B"), target("C")];
        assert_eq!(
            expect_fan_out_reconciled(&source(), &targets, &PREFIX, BYTES),
            Ok(())
        );
    }

    /// One target fell back (its pull failed, it recomputed): the verdict
    /// names the target, and the source's writes no longer add up.
    #[test]
    fn a_pull_that_failed_is_named_with_its_target() {
        let failed = TargetPull {
            success_ops: 0,
            unsuccessful: Unsuccessful::of(&[("failed", 1)]),
            blocks: 0,
            read_bytes: 0,
            delivered_hashes: Vec::new(),
            ..target("C")
        };
        let source = SourceWrites {
            success_ops: 1,
            blocks: 4,
            bytes: 4 * BYTES,
            ..source()
        };
        let v =
            expect_fan_out_reconciled(&source, &[target("B"), failed], &PREFIX, BYTES).unwrap_err();
        assert_eq!(v.claim, FAN_OUT_RECONCILED);
        for part in [
            "target C shows no remote_deliver success",
            "target C: remote_deliver failed 1",
            "target C was delivered 0 blocks, not each of the prefix's 4 once (missing: 11, 12, 13, 14)",
            "the source wrote 4 blocks ≠ 2 targets × 4 blocks of the prefix",
        ] {
            assert!(v.detail.contains(part), "{part} in {v}");
        }
        assert!(!v.detail.contains("target B"), "{v}");
    }

    /// The source wrote a block once for both targets (or one target took
    /// it from elsewhere): the counters do not add up.
    #[test]
    fn a_source_that_wrote_once_for_both_fails() {
        let once = SourceWrites {
            success_ops: 1,
            blocks: 4,
            bytes: 4 * BYTES,
            ..source()
        };
        let v = expect_fan_out_reconciled(&once, &[target("B"), target("C")], &PREFIX, BYTES)
            .unwrap_err();
        assert_eq!(
            v.detail,
            "the source wrote 4 blocks ≠ 2 targets × 4 blocks of the prefix; source_write bytes 4096 ≠ 2 targets × 4 blocks × 1024 bytes; source_write operations 1 ≠ the targets' 2 remote_deliver successes"
        );
    }

    #[test]
    fn a_block_delivered_twice_or_a_wrong_count_fails() {
        let twice = TargetPull {
            delivered_hashes: vec![11, 12, 12, 13, 14],
            ..target("B")
        };
        let v = expect_fan_out_reconciled(&source(), &[twice, target("C")], &PREFIX, BYTES)
            .unwrap_err();
        assert_eq!(
            v.detail,
            "target B was delivered 5 blocks, not each of the prefix's 4 once (repeated: 12 ×2)"
        );
        let misread = TargetPull {
            read_bytes: 4 * BYTES + 1,
            ..target("C")
        };
        let v = expect_fan_out_reconciled(&source(), &[target("B"), misread], &PREFIX, BYTES)
            .unwrap_err();
        assert_eq!(v.detail, "target C read 4097 bytes ≠ 4 blocks × 1024 bytes");
        let failed_write = SourceWrites {
            unsuccessful: Unsuccessful::of(&[("failed", 1)]),
            ..source()
        };
        assert!(expect_fan_out_reconciled(
            &failed_write,
            &[target("B"), target("C")],
            &PREFIX,
            BYTES
        )
        .unwrap_err()
        .detail
        .starts_with("source_write failed 1"));
    }
}
