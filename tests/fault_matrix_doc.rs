//! docs/fault-matrix.md's tables of rows are generated from the rows
//! (`kvcr_e2e::fault_matrix::doc`): the page must be what the generator
//! makes of it, every row of the lane table's matrices
//! (`kvcr_e2e::lanes::LANES`) is in one of its tables, and the rows its
//! hand-written prose names exist. Run with `UPDATE_DOCS=1` to rewrite the
//! page.

use std::collections::BTreeSet;

mod generated_page;

use kvcr_e2e::fault_matrix::doc::{self, PAGE, REGENERATE};
use kvcr_e2e::lanes::LANES;
use kvcr_e2e::suite::Trial;

fn page_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE)
}

/// The trial names of every row the lanes run.
fn lane_rows() -> BTreeSet<String> {
    LANES
        .iter()
        .flat_map(|lane| lane.trials.trials())
        .filter(|trial| matches!(trial, Trial::Row(_)))
        .map(|trial| trial.trial_name())
        .collect()
}

/// The trial names of every row the generator knows.
fn generated_rows() -> BTreeSet<String> {
    doc::matrices()
        .into_iter()
        .flat_map(|(_, rows)| rows.iter())
        .map(|row| format!("{}::{}", row.case.id, row.name))
        .collect()
}

#[test]
fn the_page_is_what_the_rows_generate() {
    let page = std::fs::read_to_string(page_path()).unwrap();
    let rendered = doc::render(&page).unwrap_or_else(|e| panic!("{e}"));
    generated_page::check(&page_path(), &page, &rendered, "fault rows", REGENERATE);
}

#[test]
fn every_lane_row_is_in_a_generated_table_of_the_page() {
    let page = std::fs::read_to_string(page_path()).unwrap();
    let tables = doc::tables_in(&page);
    for (matrix, _) in doc::matrices() {
        assert!(
            tables.iter().any(|t| t == matrix),
            "{PAGE} has no generated table of {matrix}"
        );
    }
    let generated = generated_rows();
    let lanes = lane_rows();
    assert!(
        lanes.len() >= 50,
        "expected at least 50 rows, found {lanes:?}"
    );
    let missing: Vec<&String> = lanes.difference(&generated).collect();
    assert!(
        missing.is_empty(),
        "rows no table of {PAGE} lists: {missing:?}"
    );
    let unrun: Vec<&String> = generated.difference(&lanes).collect();
    assert!(unrun.is_empty(), "rows of a table no lane runs: {unrun:?}");
}

#[test]
fn the_rows_the_prose_names_exist() {
    let page = std::fs::read_to_string(page_path()).unwrap();
    let rows = lane_rows();
    for line in page.lines().filter(|l| l.starts_with("| `TC-")) {
        let name = line.split('`').nth(1).unwrap_or_default();
        assert!(
            rows.contains(name),
            "{PAGE} names {name}, which no matrix has"
        );
    }
}
