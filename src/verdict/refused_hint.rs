//! Router hints KVCR must refuse (TC-22): a hint with a field KVCR 0.1.1
//! does not support (`no_retain`, a mode other than `copy`, no source) or
//! a malformed one (no source text, block hashes that are no list of
//! 64-bit integers, no `kv.fetch` action, no map at all). KVCR raises on
//! each when the engine submits it; the engine then serves the request
//! without a hint.
//!
//! The claim: the request still gets reference tokens (checked by the case),
//! the target computes the prefix instead of reading the peer the hint
//! names, the peer is asked for nothing, and the refusal is logged in
//! KVCR's words (and KVCR's once-per-process warnings for schema versions
//! it does not know).

use serde::Serialize;

use super::{Checks, Violation};

/// Claim: KVCR refused the hint and read nothing from the peer it names.
pub const HINT_REFUSED: &str =
    "KVCR refuses a router hint it cannot use, says why, and reads nothing from the peer it names";

/// One row: how the router's hint is rewritten, and KVCR's words for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HintRow {
    /// The engine's `rewrite_kv_hint` kind (`no_retain`).
    pub rewrite: &'static str,
    /// Words in the request's own log lines (KVCR's exception, quoted by the
    /// engine's `ignoring malformed kv_hint` line).
    pub words: &'static [&'static str],
    /// Words in the worker's log, logged once per process by KVCR.
    pub once_per_process: &'static [&'static str],
}

/// The engine's line for a hint KVCR refused.
const IGNORED: &str = "ignoring malformed kv_hint";
const INVALID: &str = "invalid router hint";

/// Every row, in the order sent: the schema-version row first, since KVCR
/// warns of each version mismatch once per process.
pub const ROWS: &[HintRow] = &[
    HintRow {
        rewrite: "versions_and_no_retain",
        words: &[IGNORED, "no_retain is not currently supported"],
        once_per_process: &[
            "KV hint protocol_version mismatch; supported='0.1' received='9.9'",
            "kv.fetch action_version mismatch; supported='1.0' received='9.9'",
        ],
    },
    HintRow {
        rewrite: "no_retain",
        words: &[IGNORED, "no_retain is not currently supported"],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "move_mode",
        words: &[IGNORED, "only copy mode is currently supported"],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "no_source",
        words: &[IGNORED, "source-less hints are not currently supported"],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "empty_source",
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "hashes_not_list",
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "no_hashes",
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "hash_out_of_range",
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "bool_hash",
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "no_fetch_action",
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "actions_not_list",
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "not_a_map",
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
];

/// What one row's request did, on the target and on the peer its hint
/// names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedHint {
    pub rewrite: String,
    pub x_request_id: String,
    /// Blocks of the prefix the peer holds (the hint names them).
    pub prefix_blocks: u64,
    /// The target's peer operations (`remote_fetch`, `remote_deliver`, any
    /// result) in the window.
    pub target_peer_ops: u64,
    /// The target's computed prompt blocks in the window.
    pub target_computed_blocks: u64,
    /// Reads (`start_write` control messages) the peer's KVCR handled, and
    /// its source writes, any result.
    pub peer_reads_taken: u64,
    pub peer_source_writes: u64,
    /// KVCR's words the row expects that its logs lack.
    pub missing_words: Vec<String>,
}

/// The request was served without its hint: computed on the target, no
/// peer operation on either side, KVCR's words logged.
pub fn expect_hint_refused(r: &RefusedHint) -> Result<(), Violation> {
    let row = &r.rewrite;
    Checks::new(HINT_REFUSED)
        .check(r.target_peer_ops == 0, || {
            format!(
                "{row}: the target ran {} peer operations for a hint KVCR must refuse",
                r.target_peer_ops
            )
        })
        .check(r.peer_reads_taken == 0 && r.peer_source_writes == 0, || {
            format!(
                "{row}: the peer the hint names took {} reads and made {} source writes",
                r.peer_reads_taken, r.peer_source_writes
            )
        })
        .check(r.target_computed_blocks >= r.prefix_blocks, || {
            format!(
                "{row}: the target computed {} blocks of a {}-block prefix no one else could \
                 serve",
                r.target_computed_blocks, r.prefix_blocks
            )
        })
        .check(r.missing_words.is_empty(), || {
            format!(
                "{row}: KVCR's words not logged: {:?} (x-request-id {})",
                r.missing_words, r.x_request_id
            )
        })
        .verdict()
}

/// The words of `expected` that no line of `lines` contains.
pub fn missing_words<'a>(
    expected: &[&str],
    lines: impl Iterator<Item = &'a str> + Clone,
) -> Vec<String> {
    expected
        .iter()
        .filter(|w| !lines.clone().any(|l| l.contains(*w)))
        .map(|w| w.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> RefusedHint {
        RefusedHint {
            rewrite: "no_retain".into(),
            x_request_id: "x1".into(),
            prefix_blocks: 3,
            target_peer_ops: 0,
            target_computed_blocks: 4,
            peer_reads_taken: 0,
            peer_source_writes: 0,
            missing_words: vec![],
        }
    }

    #[test]
    fn a_refused_hint_computed_locally_passes() {
        assert_eq!(expect_hint_refused(&refused()), Ok(()));
    }

    #[test]
    fn a_hint_read_from_the_peer_fails() {
        let pulled = RefusedHint {
            target_peer_ops: 1,
            target_computed_blocks: 1,
            peer_reads_taken: 1,
            peer_source_writes: 1,
            ..refused()
        };
        let e = expect_hint_refused(&pulled).unwrap_err();
        assert!(e.detail.contains("1 peer operations"), "{e}");
        assert!(e.detail.contains("took 1 reads"), "{e}");
        assert!(
            e.detail.contains("computed 1 blocks of a 3-block prefix"),
            "{e}"
        );
    }

    #[test]
    fn unlogged_words_fail() {
        let quiet = RefusedHint {
            missing_words: vec![IGNORED.into()],
            ..refused()
        };
        assert!(expect_hint_refused(&quiet)
            .unwrap_err()
            .detail
            .contains("not logged"));
    }

    #[test]
    fn missing_words_finds_what_no_line_says() {
        let lines = ["a ignoring malformed kv_hint for request r: invalid router hint"];
        assert!(missing_words(&[IGNORED, INVALID], lines.iter().copied()).is_empty());
        assert_eq!(
            missing_words(&[IGNORED, "only copy mode"], lines.iter().copied()),
            vec!["only copy mode".to_string()]
        );
    }

    #[test]
    fn rows_cover_each_kind_once_with_the_versions_row_first() {
        let mut kinds: Vec<_> = ROWS.iter().map(|r| r.rewrite).collect();
        assert_eq!(kinds[0], "versions_and_no_retain");
        assert!(ROWS[1..].iter().all(|r| r.once_per_process.is_empty()));
        let n = kinds.len();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), n);
        assert!(ROWS.iter().all(|r| r.words.contains(&IGNORED)));
    }

    /// The rows name exactly the engine's rewrites (hint_rewrites.py).
    #[test]
    fn rows_are_the_engines_rewrites() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/cpu-engine/cpu_engine/hint_rewrites.py"
        );
        let source = std::fs::read_to_string(path).unwrap();
        let table = &source[source.find("REWRITES = {").unwrap()..];
        let table = &table[..table.find('}').unwrap()];
        let mut engine: Vec<&str> = table
            .lines()
            .filter_map(|l| l.trim().strip_prefix('"'))
            .filter_map(|l| l.split('"').next())
            .collect();
        let mut rows: Vec<&str> = ROWS.iter().map(|r| r.rewrite).collect();
        engine.sort_unstable();
        rows.sort_unstable();
        assert_eq!(rows, engine);
    }
}
