//! docs/ci.md's lane table says what CI runs: every test target of
//! Cargo.toml has a row, a lane behind `--ignored` says so (and only such a
//! lane), and a row count it quotes is the lane's own.

use kvcr_e2e::lanes::LANES;
use kvcr_e2e::suite::Trial;

fn read(path: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the lane table that name `target`'s command.
fn rows_naming<'d>(doc: &'d str, target: &str) -> Vec<&'d str> {
    let command = format!("cargo test --test {target}");
    doc.lines()
        .filter(|line| line.starts_with('|'))
        .filter(|line| {
            line.match_indices(&command).any(|(at, _)| {
                // `--test phase1` must not match `--test phase1_vllm`.
                let next = line[at + command.len()..].chars().next();
                !matches!(next, Some(c) if c.is_alphanumeric() || c == '_')
            })
        })
        .collect()
}

/// `(N rows)` or `(1 row)` in a line, if it quotes a count.
fn quoted_row_count(line: &str) -> Option<usize> {
    let (before, _) = line.split_once(" row")?;
    let number = before.rsplit('(').next()?;
    number.trim().parse().ok()
}

#[test]
fn every_test_target_has_a_row_in_the_lane_table() {
    let doc = read("docs/ci.md");
    let manifest: toml::Value = read("Cargo.toml").parse().unwrap();
    let mut targets: Vec<String> = manifest["test"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    // The targets cargo finds by itself: tests/<name>.rs, tests/<name>/main.rs.
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    for entry in std::fs::read_dir(tests).unwrap() {
        let path = entry.unwrap().path();
        let name = if path.extension().is_some_and(|e| e == "rs") {
            path.file_stem()
        } else if path.join("main.rs").is_file() {
            path.file_name()
        } else {
            None
        };
        if let Some(name) = name {
            let name = name.to_string_lossy().to_string();
            if !targets.contains(&name) {
                targets.push(name);
            }
        }
    }
    assert!(targets.len() > 20, "read the test targets: {targets:?}");
    let missing: Vec<&String> = targets
        .iter()
        .filter(|t| rows_naming(&doc, t).is_empty())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ci.md's lane table has no row naming `cargo test --test <target>` for {missing:?}"
    );
}

#[test]
fn the_lane_table_says_which_lanes_are_ignored_and_how_many_rows_they_run() {
    let doc = read("docs/ci.md");
    for lane in LANES {
        let rows = rows_naming(&doc, lane.target);
        assert!(!rows.is_empty(), "no row for {}", lane.target);
        let row = rows[0];
        let says_ignored = row.contains("ignored in a plain `cargo test`");
        assert_eq!(
            says_ignored, lane.ignored,
            "docs/ci.md's row of {} says ignored: {says_ignored}, the lane table: {}",
            lane.target, lane.ignored
        );
        let fault_rows = lane
            .trials
            .trials()
            .iter()
            .filter(|t| matches!(t, Trial::Row(_)))
            .count();
        if let Some(quoted) = quoted_row_count(row) {
            assert_eq!(
                quoted, fault_rows,
                "docs/ci.md quotes {quoted} rows for {}; the lane runs {fault_rows}",
                lane.target
            );
        }
    }
}

#[test]
fn a_quoted_count_is_read_and_a_longer_target_name_is_not_a_match() {
    assert_eq!(quoted_row_count("| x | caught (3 rows) |"), Some(3));
    assert_eq!(quoted_row_count("| x | caught (1 row) |"), Some(1));
    assert_eq!(quoted_row_count("| x | no count |"), None);
    let doc = "| a | `cargo test --test phase1_vllm` |\n| b | `cargo test --test phase1` |";
    assert_eq!(
        rows_naming(doc, "phase1"),
        ["| b | `cargo test --test phase1` |"]
    );
}
