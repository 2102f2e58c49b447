//! docs/fault-matrix.md lists every row of the fault matrix.

#[test]
fn every_fault_matrix_row_is_documented() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // Both matrices: the aggregated one and the 2P+1D one.
    let rows = ["e2e/fault_matrix/rows.rs", "e2e/fault_matrix_2p1d/rows.rs"]
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .concat();
    let doc = std::fs::read_to_string(root.join("docs/fault-matrix.md")).unwrap();
    // rustfmt may spread a `row(...)` call over lines: read it without whitespace.
    let compact: String = rows.chars().filter(|c| !c.is_whitespace()).collect();
    let names: Vec<String> = compact
        .split("row(\"")
        .skip(1)
        .filter_map(|l| {
            let (id, rest) = l.split_once("\",\"")?;
            Some(format!("{id}::{}", rest.split('"').next()?))
        })
        .collect();
    assert!(
        names.len() >= 12,
        "expected at least 12 rows, found {names:?}"
    );
    for name in &names {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/fault-matrix.md does not list {name}"
        );
    }
}
