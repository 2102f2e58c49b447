//! docs/fault-matrix.md lists every row of every fault matrix (the rows of
//! the lane table's matrices, `kvcr_e2e::lanes::LANES`), and each row's
//! claim appears verbatim in the message the table documents; so does every
//! further string an arranged row's function checks the failure for.

use std::collections::BTreeMap;

use kvcr_e2e::lanes::LANES;
use kvcr_e2e::suite::{Fault, FaultRow, Trial};

fn root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every row of every lane, once, by trial name.
fn rows() -> BTreeMap<String, &'static FaultRow> {
    let mut rows = BTreeMap::new();
    for lane in LANES {
        for trial in lane.trials.trials() {
            if let Trial::Row(row) = trial {
                rows.insert(trial.trial_name(), row);
            }
        }
    }
    rows
}

/// The message column of `name`'s line in the doc.
fn documented<'d>(doc: &'d str, name: &str) -> Option<&'d str> {
    let line = doc
        .lines()
        .find(|l| l.starts_with(&format!("| `{name}` |")))?;
    line.trim_end_matches('|').rsplit('|').next()
}

/// The source of the function an arranged row names (`Fault::Arranged(f)`
/// in the entry whose `name` is `row`), from the matrices' source files.
fn arranged_body<'s>(sources: &'s str, row: &str) -> Option<&'s str> {
    let entry = sources.split("FaultRow {").find(|entry| {
        entry
            .split('}')
            .next()
            .is_some_and(|e| e.contains(&format!("name: \"{row}\",")))
    })?;
    let function = entry.split("Fault::Arranged(").nth(1)?.split(')').next()?;
    let body = sources.split(&format!("\nfn {function}(")).nth(1)?;
    body.split("\n}\n").next()
}

/// The strings a function checks a failure message for: `.contains("…")`.
fn contained(body: &str) -> Vec<String> {
    // Join lines so a call spread by rustfmt reads as one.
    let compact: String = body.lines().map(str::trim).collect::<Vec<_>>().join("");
    compact
        .split(".contains(\"")
        .skip(1)
        .filter_map(|call| call.split_once('"').map(|(s, _)| s.to_string()))
        .collect()
}

#[test]
fn every_fault_matrix_row_is_documented_with_its_exact_message() {
    let doc = std::fs::read_to_string(root().join("docs/fault-matrix.md")).unwrap();
    // Markdown escapes a backtick inside a code span; the message has none.
    let doc = doc.replace("\\`", "`");
    let sources: String = [
        "agg.rs",
        "p2d.rs",
        "p2d_vllm.rs",
        "two_node.rs",
        "phase2.rs",
    ]
    .map(|f| std::fs::read_to_string(root().join("src/fault_matrix").join(f)).unwrap())
    .concat();
    let rows = rows();
    assert!(
        rows.len() >= 30,
        "expected at least 30 rows, found {rows:?}",
        rows = rows.keys()
    );
    for (name, row) in &rows {
        let message = documented(&doc, name)
            .unwrap_or_else(|| panic!("docs/fault-matrix.md does not list {name}"));
        assert!(
            message.contains(row.claim.trim()),
            "row {name} expects `{}`, but docs/fault-matrix.md documents {message}",
            row.claim
        );
        if let Fault::Arranged(_) = row.fault {
            let body = arranged_body(&sources, row.name)
                .unwrap_or_else(|| panic!("no arranged function found for row {name}"));
            for part in contained(body) {
                assert!(
                    message.contains(part.trim()),
                    "row {name} checks for `{part}`, but docs/fault-matrix.md documents {message}"
                );
            }
        }
    }
    // And the doc lists no row that is gone.
    for line in doc.lines().filter(|l| l.starts_with("| `TC-")) {
        let name = line.split('`').nth(1).unwrap_or_default();
        assert!(
            rows.contains_key(name),
            "docs/fault-matrix.md lists {name}, which no matrix has"
        );
    }
}

#[test]
fn an_arranged_rows_checks_are_read_from_its_function() {
    let sources = "FaultRow {\n    case: tc02::CASE,\n    name: \"never_evicts\",\n    fault: Fault::Arranged(never_evicts),\n    claim: \"eviction not proven\",\n},\n\nfn never_evicts(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {\n    if !failure\n        .message\n        .contains(\"(counted) after 32\")\n    {}\n}\n";
    let body = arranged_body(sources, "never_evicts").unwrap();
    assert_eq!(contained(body), ["(counted) after 32"]);
    assert!(arranged_body(sources, "other_row").is_none());
}
