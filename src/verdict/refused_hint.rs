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
//!
//! Beside them, a hint KVCR must accept: the router's own with one more
//! hash that uses all 64 bits. The schema takes unsigned 64-bit hashes, as
//! Dynamo's are, but the CPU engine's are 63-bit, so without this row no
//! hint on its lanes names one, and a KVCR that refused them would pass.
//! The extra hash is one the source does not hold; KVCR only queries the
//! request's own blocks, so it reads the prefix from the peer as ever.

use serde::Serialize;

use super::{Checks, Violation};

/// Claim: KVCR refused the hint and read nothing from the peer it names.
pub const HINT_REFUSED: &str =
    "KVCR refuses a router hint it cannot use, says why, and reads nothing from the peer it names";

/// Claim: KVCR kept a valid hint with a 64-bit hash and read the peer.
pub const HINT_ACCEPTED: &str =
    "KVCR accepts a valid router hint whose hashes use all 64 bits, and reads the peer it names";

/// What KVCR must do with a row's hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Must {
    /// Raise: the engine serves the request without a hint.
    Refuse,
    /// Keep it: the target reads the prefix from the peer it names.
    Accept,
}

/// One row: how the router's hint is rewritten, what KVCR must do with
/// it, and KVCR's words for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HintRow {
    /// The engine's `rewrite_kv_hint` kind (`no_retain`).
    pub rewrite: &'static str,
    pub must: Must,
    /// Words in the request's own log lines (KVCR's exception, quoted by the
    /// engine's `ignoring malformed kv_hint` line); none for a hint KVCR
    /// must accept.
    pub words: &'static [&'static str],
    /// Words in the worker's log, logged once per process by KVCR.
    pub once_per_process: &'static [&'static str],
}

/// The engine's line for a hint KVCR refused.
const IGNORED: &str = "ignoring malformed kv_hint";
const INVALID: &str = "invalid router hint";

/// Every row, in the order sent: the schema-version row first, since KVCR
/// warns of each version mismatch once per process; the hint KVCR must
/// accept last. The case stops at the first row that fails, so a KVCR that
/// reads a hint it must refuse still fails on `HINT_REFUSED` (the claim its
/// curated mutant `p3-hint-no-retain-accepted` expects).
pub const ROWS: &[HintRow] = &[
    HintRow {
        rewrite: "versions_and_no_retain",
        must: Must::Refuse,
        words: &[IGNORED, "no_retain is not currently supported"],
        once_per_process: &[
            "KV hint protocol_version mismatch; supported='0.1' received='9.9'",
            "kv.fetch action_version mismatch; supported='1.0' received='9.9'",
        ],
    },
    HintRow {
        rewrite: "no_retain",
        must: Must::Refuse,
        words: &[IGNORED, "no_retain is not currently supported"],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "move_mode",
        must: Must::Refuse,
        words: &[IGNORED, "only copy mode is currently supported"],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "no_source",
        must: Must::Refuse,
        words: &[IGNORED, "source-less hints are not currently supported"],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "empty_source",
        must: Must::Refuse,
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "hashes_not_list",
        must: Must::Refuse,
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "no_hashes",
        must: Must::Refuse,
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "hash_out_of_range",
        must: Must::Refuse,
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "bool_hash",
        must: Must::Refuse,
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "no_fetch_action",
        must: Must::Refuse,
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "actions_not_list",
        must: Must::Refuse,
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "not_a_map",
        must: Must::Refuse,
        words: &[IGNORED, INVALID],
        once_per_process: &[],
    },
    HintRow {
        rewrite: "hash_beyond_63_bits",
        must: Must::Accept,
        words: &[],
        once_per_process: &[],
    },
];

/// What one row's request did, on the target and on the peer its hint
/// names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RewrittenHint {
    pub rewrite: String,
    pub must: Must,
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
    /// The engine's `ignoring malformed kv_hint` line for the request, if
    /// it logged one.
    pub ignored_line: Option<String>,
}

/// KVCR did with the row's hint what the row says it must.
pub fn expect_as_row_says(r: &RewrittenHint) -> Result<(), Violation> {
    match r.must {
        Must::Refuse => expect_hint_refused(r),
        Must::Accept => expect_hint_accepted(r),
    }
}

/// The request was served without its hint: computed on the target, no
/// peer operation on either side, KVCR's words logged.
pub fn expect_hint_refused(r: &RewrittenHint) -> Result<(), Violation> {
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

/// The request was served through its hint: the engine kept it, the
/// target ran a peer operation, the peer was read and wrote, and the
/// target pulled the prefix instead of computing it.
pub fn expect_hint_accepted(r: &RewrittenHint) -> Result<(), Violation> {
    let row = &r.rewrite;
    Checks::new(HINT_ACCEPTED)
        .check(r.ignored_line.is_none(), || {
            format!(
                "{row}: the engine ignored a hint KVCR must accept (x-request-id {}): {}",
                r.x_request_id,
                r.ignored_line.as_deref().unwrap_or_default()
            )
        })
        .check(r.target_peer_ops > 0, || {
            format!("{row}: the target ran no peer operation for a hint naming the peer")
        })
        .check(r.peer_reads_taken > 0 && r.peer_source_writes > 0, || {
            format!(
                "{row}: the peer the hint names took {} reads and made {} source writes",
                r.peer_reads_taken, r.peer_source_writes
            )
        })
        .check(r.target_computed_blocks < r.prefix_blocks, || {
            format!(
                "{row}: the target computed {} blocks of a {}-block prefix the peer holds",
                r.target_computed_blocks, r.prefix_blocks
            )
        })
        .verdict()
}

/// The engine's line for a hint KVCR refused, among `lines`.
pub fn ignored_line<'a>(mut lines: impl Iterator<Item = &'a str>) -> Option<String> {
    lines.find(|l| l.contains(IGNORED)).map(str::to_string)
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

    fn refused() -> RewrittenHint {
        RewrittenHint {
            rewrite: "no_retain".into(),
            must: Must::Refuse,
            x_request_id: "x1".into(),
            prefix_blocks: 3,
            target_peer_ops: 0,
            target_computed_blocks: 4,
            peer_reads_taken: 0,
            peer_source_writes: 0,
            missing_words: vec![],
            ignored_line: Some(format!("{IGNORED} for request r: no_retain")),
        }
    }

    /// The accepted row's request, pulled from the peer.
    fn pulled() -> RewrittenHint {
        RewrittenHint {
            rewrite: "hash_beyond_63_bits".into(),
            must: Must::Accept,
            target_peer_ops: 1,
            target_computed_blocks: 0,
            peer_reads_taken: 1,
            peer_source_writes: 1,
            ignored_line: None,
            ..refused()
        }
    }

    #[test]
    fn a_refused_hint_computed_locally_passes() {
        assert_eq!(expect_hint_refused(&refused()), Ok(()));
        assert_eq!(expect_as_row_says(&refused()), Ok(()));
    }

    #[test]
    fn a_hint_read_from_the_peer_fails() {
        let pulled = RewrittenHint {
            target_peer_ops: 1,
            target_computed_blocks: 1,
            peer_reads_taken: 1,
            peer_source_writes: 1,
            ..refused()
        };
        let e = expect_as_row_says(&pulled).unwrap_err();
        assert_eq!(e.claim, HINT_REFUSED);
        assert!(e.detail.contains("1 peer operations"), "{e}");
        assert!(e.detail.contains("took 1 reads"), "{e}");
        assert!(
            e.detail.contains("computed 1 blocks of a 3-block prefix"),
            "{e}"
        );
    }

    #[test]
    fn unlogged_words_fail() {
        let quiet = RewrittenHint {
            missing_words: vec![IGNORED.into()],
            ..refused()
        };
        assert!(expect_hint_refused(&quiet)
            .unwrap_err()
            .detail
            .contains("not logged"));
    }

    #[test]
    fn an_accepted_hint_read_from_the_peer_passes() {
        assert_eq!(expect_hint_accepted(&pulled()), Ok(()));
        assert_eq!(expect_as_row_says(&pulled()), Ok(()));
    }

    #[test]
    fn an_accepted_hint_computed_locally_fails_naming_the_row() {
        let computed = RewrittenHint {
            target_computed_blocks: 3,
            ..pulled()
        };
        let e = expect_as_row_says(&computed).unwrap_err();
        assert_eq!(e.claim, HINT_ACCEPTED);
        assert!(
            e.detail
                .contains("hash_beyond_63_bits: the target computed 3 blocks of a 3-block prefix"),
            "{e}"
        );
    }

    #[test]
    fn an_accepted_hint_without_peer_operations_fails_naming_the_row() {
        let unread = RewrittenHint {
            target_peer_ops: 0,
            peer_reads_taken: 0,
            peer_source_writes: 0,
            ..pulled()
        };
        let e = expect_hint_accepted(&unread).unwrap_err();
        assert!(
            e.detail
                .contains("hash_beyond_63_bits: the target ran no peer operation"),
            "{e}"
        );
        assert!(
            e.detail
                .contains("hash_beyond_63_bits: the peer the hint names took 0 reads and made 0"),
            "{e}"
        );
    }

    #[test]
    fn an_accepted_hint_the_engine_ignored_fails_naming_the_row() {
        // As KVCR refusing hashes of 2^63 and up would have it: refused,
        // computed, the peer never asked.
        let ignored = RewrittenHint {
            ignored_line: Some(format!("{IGNORED} for request r: {INVALID}")),
            ..refused()
        };
        let ignored = RewrittenHint {
            rewrite: "hash_beyond_63_bits".into(),
            must: Must::Accept,
            ..ignored
        };
        let e = expect_as_row_says(&ignored).unwrap_err();
        assert_eq!(e.claim, HINT_ACCEPTED);
        assert!(
            e.detail.contains(
                "hash_beyond_63_bits: the engine ignored a hint KVCR must accept (x-request-id \
                 x1): ignoring malformed kv_hint for request r: invalid router hint"
            ),
            "{e}"
        );
        assert_eq!(e.detail.matches("hash_beyond_63_bits:").count(), 4, "{e}");
    }

    #[test]
    fn ignored_line_finds_the_engines_line() {
        let lines = [
            "a query_decision",
            "b ignoring malformed kv_hint for request r: x",
        ];
        assert_eq!(
            ignored_line(lines.iter().copied()).as_deref(),
            Some(lines[1])
        );
        assert_eq!(ignored_line(lines[..1].iter().copied()), None);
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
        for row in ROWS {
            match row.must {
                Must::Refuse => assert!(row.words.contains(&IGNORED), "{}", row.rewrite),
                Must::Accept => assert!(row.words.is_empty(), "{}", row.rewrite),
            }
        }
    }

    /// The hint KVCR must accept is sent after every refused one.
    #[test]
    fn the_accepted_row_comes_last() {
        let accepted: Vec<_> = ROWS.iter().filter(|r| r.must == Must::Accept).collect();
        assert_eq!(accepted.len(), 1);
        assert_eq!(ROWS.last(), Some(accepted[0]));
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
        // The engine's ACCEPTED set names the rows KVCR must accept.
        let accepted = &source[source.find("ACCEPTED = frozenset({").unwrap()..];
        let accepted = &accepted[..accepted.find('}').unwrap()];
        for row in ROWS {
            let quoted = format!("\"{}\"", row.rewrite);
            assert_eq!(
                accepted.contains(&quoted),
                row.must == Must::Accept,
                "{}",
                row.rewrite
            );
        }
    }
}
