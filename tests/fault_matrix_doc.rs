//! docs/fault-matrix.md lists every row of the fault matrix, and each row's
//! expected claim appears verbatim in the message the table documents.

use std::collections::BTreeMap;

/// The row functions' source, by function name.
fn row_bodies(rows: &str) -> BTreeMap<String, String> {
    let mut bodies = BTreeMap::new();
    for chunk in rows.split("\nfn ").skip(1) {
        let Some((name, _)) = chunk.split_once('(') else {
            continue;
        };
        let body = chunk.split("\n}\n").next().unwrap_or(chunk);
        bodies.insert(name.trim().to_string(), body.to_string());
    }
    bodies
}

/// The messages a row requires: the claim given to `expect_red`, and the
/// strings a row that judges provisioning checks with `contains`.
fn claims(body: &str) -> Vec<String> {
    let compact: String = {
        // Join lines so a call spread by rustfmt reads as one.
        body.lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("")
            .replace(", \"", ",\"")
    };
    let mut out = Vec::new();
    // `expect_red(ctx, case, "claim")` and `caught(ctx, case, "claim")`.
    for call in compact
        .split("expect_red(")
        .skip(1)
        .chain(compact.split("caught(").skip(1))
    {
        // expect_red(ctx, <case>, "<claim>")
        if let Some(claim) = call
            .split_once(",\"")
            .and_then(|(_, rest)| rest.split_once('"'))
        {
            out.push(claim.0.to_string());
        }
    }
    for call in compact.split(".contains(\"").skip(1) {
        if let Some((claim, _)) = call.split_once('"') {
            out.push(claim.to_string());
        }
    }
    out
}

#[test]
fn every_fault_matrix_row_is_documented_with_its_exact_message() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // Every matrix: the aggregated one, the 2P+1D one, the two-node one and
    // the production cases' one.
    let rows = [
        "e2e/fault_matrix/rows.rs",
        "e2e/fault_matrix_2p1d/rows.rs",
        "e2e/fault_matrix_two_node/rows.rs",
        "e2e/fault_matrix_phase2/rows.rs",
    ]
    .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
    .concat();
    let doc = std::fs::read_to_string(root.join("docs/fault-matrix.md")).unwrap();
    // Markdown escapes a backtick inside a code span; the message has none.
    let doc = doc.replace("\\`", "`");
    // rustfmt may spread a `row(...)` call over lines: read it without whitespace.
    let compact: String = rows.chars().filter(|c| !c.is_whitespace()).collect();
    let registered: Vec<(String, String)> = compact
        .split("row(\"")
        .skip(1)
        .filter_map(|l| {
            let (id, rest) = l.split_once("\",\"")?;
            let (name, rest) = rest.split_once("\",")?;
            let function = rest.split(')').next()?;
            Some((
                format!("{id}::{name}"),
                function.trim_end_matches(',').to_string(),
            ))
        })
        .collect();
    assert!(
        registered.len() >= 20,
        "expected at least 20 rows, found {registered:?}"
    );
    let bodies = row_bodies(&rows);
    for (name, function) in &registered {
        let line = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("docs/fault-matrix.md does not list {name}"));
        let message = line.trim_end_matches('|').rsplit('|').next().unwrap_or("");
        let body = bodies
            .get(function)
            .unwrap_or_else(|| panic!("no function {function} for row {name}"));
        let claims = claims(body);
        if name.ends_with("bad_requests_get_clear_errors_and_workers_stay_up") {
            continue; // judges HTTP statuses, not a message
        }
        assert!(!claims.is_empty(), "row {name} matches no message");
        for claim in claims {
            assert!(
                message.contains(claim.trim()),
                "row {name} expects `{claim}`, but docs/fault-matrix.md documents {message}"
            );
        }
    }
}

#[test]
fn claims_are_read_from_the_row_source() {
    let body = "row(ctx: &CaseCtx) -> CaseResult {\n    expect_red(\n        ctx,\n        tc02::run,\n        \"host-tier (DRAM) hit: 3 blocks\",\n    )\n";
    assert_eq!(claims(body), ["host-tier (DRAM) hit: 3 blocks"]);
    let body = "x() { Err(e) if e.to_string().contains(\"to register\") => {} }";
    assert_eq!(claims(body), ["to register"]);
    let body = "x() {\n    let failure = caught(ctx, tc02::run, \"eviction not proven\")?;\n";
    assert_eq!(claims(body), ["eviction not proven"]);
}
