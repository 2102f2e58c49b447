//! A hinted peer transfer reconciles (TC-03, TC-05 remote arm, TC-04 takeover).
//!
//! KVCR's quick start §5: source `source_write` success, destination
//! `remote_deliver` success, block counts equal, destination read bytes equal
//! the source's `source_write` bytes, no `remote_deliver` partial or failed.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Checks, Violation};

/// The clause: source and target of a peer transfer agree.
pub const PEER_TRANSFER: &str = "peer transfer reconciles";

/// Counter deltas of one transfer window, source and target side.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PeerTransfer {
    pub source_write_success_ops: u64,
    /// `source_write` operations with any result other than `success`.
    pub source_write_unsuccessful: Unsuccessful,
    pub source_write_blocks: u64,
    pub source_write_bytes: u64,
    pub remote_deliver_success_ops: u64,
    /// `remote_deliver` operations with any result other than `success`.
    pub remote_deliver_unsuccessful: Unsuccessful,
    pub remote_deliver_blocks: u64,
    /// Target's tiering read bytes from the KVCR tier.
    pub target_read_bytes: u64,
}

/// Operations of one scope whose result is not `success`, by result label
/// (`partial`, `failed`, `timeout`, or any label KVCR adds): "nothing
/// failed" means this is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Unsuccessful(pub BTreeMap<String, u64>);

impl Unsuccessful {
    /// `count` operations with `result`.
    pub fn of(pairs: &[(&str, u64)]) -> Self {
        Unsuccessful(
            pairs
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r.to_string(), *n))
                .collect(),
        )
    }

    /// Whether no operation ended other than in `success`.
    pub fn is_none(&self) -> bool {
        self.0.values().all(|n| *n == 0)
    }

    /// `partial 1, timeout 2`.
    fn text(&self) -> String {
        self.0
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| format!("{r} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The clause's failure text: `remote_deliver partial 1 (every result
    /// other than success must be 0)`.
    pub fn failure(&self, side: &str) -> String {
        format!(
            "{side} {} (every result other than success must be 0)",
            self.text()
        )
    }
}

/// The transfer moved exactly `expected_blocks` blocks of `bytes_per_block`
/// bytes each, and both sides agree.
pub fn expect_peer_transfer(
    t: &PeerTransfer,
    expected_blocks: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let expected_bytes = expected_blocks * bytes_per_block;
    Checks::new(PEER_TRANSFER)
        .check(t.remote_deliver_success_ops > 0, || "target shows no remote_deliver success".into())
        .check(t.source_write_success_ops > 0, || "source shows no source_write success".into())
        .check(t.remote_deliver_blocks == t.source_write_blocks, || {
            format!(
                "remote_deliver blocks {} ≠ source_write blocks {}",
                t.remote_deliver_blocks, t.source_write_blocks
            )
        })
        .check(t.source_write_blocks == expected_blocks, || {
            format!(
                "source_write blocks {} ≠ {expected_blocks} full blocks of the shared prefix",
                t.source_write_blocks
            )
        })
        .check(t.target_read_bytes == t.source_write_bytes, || {
            format!(
                "target read bytes {} ≠ source_write bytes {}",
                t.target_read_bytes, t.source_write_bytes
            )
        })
        .check(t.source_write_bytes == expected_bytes, || {
            format!(
                "source_write bytes {} ≠ {expected_blocks} blocks × {bytes_per_block} bytes = {expected_bytes}",
                t.source_write_bytes
            )
        })
        .check(t.remote_deliver_unsuccessful.is_none(), || {
            t.remote_deliver_unsuccessful.failure("remote_deliver")
        })
        .check(t.source_write_unsuccessful.is_none(), || {
            t.source_write_unsuccessful.failure("source_write")
        })
        .verdict()
}

/// The prompt blocks the target computed, as its engine tells them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputedReading {
    /// Counted by the engine, or derived from its prefix-cache counters.
    Read(u64),
    /// The engine reports nothing to derive it from: the sub-check is not
    /// checked (and says so), rather than read as 0.
    NotChecked(String),
}

/// Hint membership (TC-03): a hinted request whose prompt has full blocks
/// past the hinted prefix pulls exactly the hinted blocks from the source,
/// with nothing partial or failed (a target that also asks the source for
/// a block the hint does not name gets a partial or failed delivery), and
/// computes the blocks past the prefix itself.
pub fn expect_hint_membership(
    t: &PeerTransfer,
    computed: &ComputedReading,
    hinted_blocks: u64,
    prompt_blocks: u64,
    bytes_per_block: u64,
) -> Result<(), Violation> {
    let past = prompt_blocks.saturating_sub(hinted_blocks);
    let mut checks = Checks::new("hint membership");
    checks
        .check(t.remote_deliver_success_ops > 0, || {
            "target shows no remote_deliver success for the hinted prefix".into()
        })
        .check(t.remote_deliver_unsuccessful.is_none(), || {
            format!(
                "{}: the target asked the source for a block the hint does not name",
                t.remote_deliver_unsuccessful.failure("remote_deliver")
            )
        })
        .check(t.remote_deliver_blocks == hinted_blocks, || {
            format!(
                "remote_deliver blocks {} ≠ the {hinted_blocks} hinted blocks",
                t.remote_deliver_blocks
            )
        })
        .check(t.source_write_blocks == hinted_blocks, || {
            format!(
                "source_write blocks {} ≠ the {hinted_blocks} hinted blocks",
                t.source_write_blocks
            )
        })
        .check(
            t.source_write_bytes == hinted_blocks * bytes_per_block,
            || {
                format!(
                    "source_write bytes {} ≠ {hinted_blocks} blocks × {bytes_per_block} bytes",
                    t.source_write_bytes
                )
            },
        )
        .check(t.source_write_unsuccessful.is_none(), || {
            t.source_write_unsuccessful.failure("source_write")
        });
    if let ComputedReading::Read(n) = computed {
        checks.check(*n == past, || {
            format!(
                "{n} prompt blocks computed, expected the {past} full block(s) past the hinted prefix ({prompt_blocks} full blocks, {hinted_blocks} hinted)"
            )
        });
    }
    checks.verdict()
}

/// Exact pages per kind: the target read `blocks` × the pages of each kind
/// in a block (hybrid: attention pages and SSM parts), not only the same
/// total bytes. `read_pages` is `(kind, pages read)` per kind of the geometry.
pub fn expect_exact_pages(
    read_pages: &[(String, u64)],
    blocks: u64,
    geometry: &crate::engine::Geometry,
) -> Result<(), Violation> {
    let mut checks = Checks::new("exact pages");
    for kind in geometry.pool_kinds() {
        let per_block = geometry.pages_of_kind(&kind);
        let expected = blocks * per_block;
        let read = read_pages
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n);
        checks.check(read == expected, || {
            format!("{kind} pages read {read} ≠ {blocks} blocks × {per_block} = {expected}")
        });
    }
    checks.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hybrid() -> crate::engine::Geometry {
        crate::engine::Geometry {
            name: "hybrid".into(),
            block_size_tokens: 16,
            pages: vec![
                ("attn".into(), 8192),
                ("attn".into(), 8192),
                ("ssm:conv".into(), 4096),
                ("ssm:temporal".into(), 4096),
                ("ssm:x".into(), 4096),
            ],
        }
    }

    #[test]
    fn exact_pages_per_kind_pass() {
        let read = [("attn".to_string(), 8), ("ssm".to_string(), 12)];
        assert_eq!(expect_exact_pages(&read, 4, &hybrid()), Ok(()));
    }

    /// The same total bytes with one SSM part missing and an attention page
    /// too many (8192 = 2 × 4096) pass a bytes-only check; per kind they fail.
    #[test]
    fn a_missing_ssm_part_fails_even_when_bytes_match() {
        let read = [("attn".to_string(), 9), ("ssm".to_string(), 10)];
        let bytes = 9 * 8192 + 10 * 4096;
        assert_eq!(bytes, 4 * hybrid().bytes_per_block());
        let v = expect_exact_pages(&read, 4, &hybrid()).unwrap_err();
        assert_eq!(
            v.to_string(),
            "exact pages: attn pages read 9 ≠ 4 blocks × 2 = 8; ssm pages read 10 ≠ 4 blocks × 3 = 12"
        );
        let v = expect_exact_pages(&read[..1], 4, &hybrid()).unwrap_err();
        assert!(
            v.to_string()
                .contains("ssm pages read 0 ≠ 4 blocks × 3 = 12"),
            "{v}"
        );
    }

    fn good() -> PeerTransfer {
        PeerTransfer {
            source_write_success_ops: 1,
            source_write_blocks: 4,
            source_write_bytes: 4 * 28672,
            remote_deliver_success_ops: 1,
            remote_deliver_blocks: 4,
            target_read_bytes: 4 * 28672,
            ..Default::default()
        }
    }

    #[test]
    fn a_reconciled_transfer_passes() {
        assert_eq!(expect_peer_transfer(&good(), 4, 28672), Ok(()));
    }

    #[test]
    fn under_reported_blocks_fail_with_numbers() {
        let t = PeerTransfer {
            remote_deliver_blocks: 3,
            ..good()
        };
        let v = expect_peer_transfer(&t, 4, 28672).unwrap_err();
        assert!(
            v.to_string()
                .contains("remote_deliver blocks 3 ≠ source_write blocks 4"),
            "{v}"
        );
    }

    #[test]
    fn wrong_bytes_fail() {
        let t = PeerTransfer {
            target_read_bytes: 4 * 28672 + 8192,
            ..good()
        };
        let v = expect_peer_transfer(&t, 4, 28672).unwrap_err();
        assert!(
            v.to_string()
                .contains("target read bytes 122880 ≠ source_write bytes 114688"),
            "{v}"
        );
    }

    #[test]
    fn hybrid_pages_are_exact() {
        // 5 pages = 2 × 8 KiB attention + 3 × 4 KiB SSM parts = 28672 bytes.
        let t = PeerTransfer {
            source_write_bytes: 4 * 24576,
            target_read_bytes: 4 * 24576,
            ..good()
        };
        let v = expect_peer_transfer(&t, 4, 28672).unwrap_err();
        assert!(v.to_string().contains("4 blocks × 28672 bytes"), "{v}");
    }

    #[test]
    fn no_transfer_at_all_fails() {
        let v = expect_peer_transfer(&PeerTransfer::default(), 4, 28672).unwrap_err();
        assert!(v.to_string().contains("no remote_deliver success"), "{v}");
    }

    fn membership() -> PeerTransfer {
        PeerTransfer {
            source_write_success_ops: 1,
            source_write_blocks: 4,
            source_write_bytes: 4 * 8192,
            remote_deliver_success_ops: 1,
            remote_deliver_blocks: 4,
            target_read_bytes: 4 * 8192,
            ..Default::default()
        }
    }

    #[test]
    fn a_hint_that_names_only_the_prefix_passes() {
        assert_eq!(
            expect_hint_membership(&membership(), &ComputedReading::Read(1), 4, 5, 8192),
            Ok(())
        );
    }

    /// A target that treats every block as hinted asks the source for the
    /// fifth block too: partial, and it computed nothing itself.
    #[test]
    fn a_pull_past_the_hint_fails() {
        let t = PeerTransfer {
            remote_deliver_success_ops: 0,
            remote_deliver_unsuccessful: Unsuccessful::of(&[("partial", 1)]),
            ..membership()
        };
        let v = expect_hint_membership(&t, &ComputedReading::Read(1), 4, 5, 8192)
            .unwrap_err()
            .to_string();
        assert!(
            v.starts_with("hint membership: target shows no remote_deliver success"),
            "{v}"
        );
        assert!(
            v.contains("remote_deliver partial 1 (every result other than success must be 0)"),
            "{v}"
        );
        let v = expect_hint_membership(&membership(), &ComputedReading::Read(0), 4, 5, 8192)
            .unwrap_err()
            .to_string();
        assert!(
            v.contains(
                "0 prompt blocks computed, expected the 1 full block(s) past the hinted prefix"
            ),
            "{v}"
        );
        let t = PeerTransfer {
            remote_deliver_blocks: 5,
            source_write_blocks: 5,
            source_write_bytes: 5 * 8192,
            ..membership()
        };
        let v = expect_hint_membership(&t, &ComputedReading::Read(0), 4, 5, 8192)
            .unwrap_err()
            .to_string();
        assert!(
            v.contains("remote_deliver blocks 5 ≠ the 4 hinted blocks"),
            "{v}"
        );
    }

    /// Where the engine reports nothing to derive computed blocks from,
    /// that sub-check is skipped (the case records "not checked"); the
    /// transfer's own checks still fail.
    #[test]
    fn not_checked_computed_blocks_skip_only_that_check() {
        let not_checked = ComputedReading::NotChecked("no prefix-cache counters".into());
        assert_eq!(
            expect_hint_membership(&membership(), &not_checked, 4, 5, 8192),
            Ok(())
        );
        let t = PeerTransfer {
            remote_deliver_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
            ..membership()
        };
        assert!(expect_hint_membership(&t, &not_checked, 4, 5, 8192).is_err());
    }

    #[test]
    fn partial_delivery_fails() {
        let t = PeerTransfer {
            remote_deliver_unsuccessful: Unsuccessful::of(&[("partial", 1)]),
            ..good()
        };
        assert!(expect_peer_transfer(&t, 4, 28672).is_err());
    }

    /// "Nothing failed" is every result other than success, on both sides:
    /// a result the quick start does not name (`timeout`, or one KVCR adds)
    /// fails as `failed` does, and so does any on the source.
    #[test]
    fn any_result_other_than_success_fails_on_either_side() {
        let t = PeerTransfer {
            remote_deliver_unsuccessful: Unsuccessful::of(&[("timeout", 1)]),
            ..good()
        };
        let v = expect_peer_transfer(&t, 4, 28672).unwrap_err().to_string();
        assert_eq!(
            v,
            "peer transfer reconciles: remote_deliver timeout 1 (every result other than success must be 0)"
        );
        let t = PeerTransfer {
            source_write_unsuccessful: Unsuccessful::of(&[("partial", 2), ("error", 1)]),
            ..membership()
        };
        let v = expect_hint_membership(&t, &ComputedReading::Read(1), 4, 5, 8192)
            .unwrap_err()
            .to_string();
        assert_eq!(
            v,
            "hint membership: source_write error 1, partial 2 (every result other than success must be 0)"
        );
    }
}
