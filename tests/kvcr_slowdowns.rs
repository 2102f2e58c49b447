//! The planted KVCR slowdowns are well-formed: every
//! `fixtures/kvcr-slowdowns/*.diff` has a complete header, is listed in the
//! README's table with its size, and applies exactly (no offset, no fuzz)
//! to the kvcr installed in the project's pinned Python env, which holds
//! the same sources as kvcr 0.1.1's sdist. Needs no stack.

use std::path::PathBuf;

use kvcr_e2e::pyenv::kvcr_diff;

mod diff_files;

use diff_files::{read, root, stem};

/// The kvcr version every slowdown is written against.
const KVCR_VERSION: &str = "0.1.1";
const DIR: &str = "fixtures/kvcr-slowdowns";
/// Every header field, in the order the files write them.
const FIELDS: [&str; 6] = ["slowdown", "path", "where", "size", "reason", "shows-in"];
/// The paths the issue names, one slowdown each.
const PATHS: [&str; 4] = [
    "a host-tier deliver",
    "a peer pull",
    "a Guard promotion",
    "a disk-tier read-back",
];

fn slowdown_files() -> Vec<PathBuf> {
    diff_files::diff_files(DIR)
}

/// The `# field: value` lines before the diff; `#` and two or more spaces
/// continue the field above.
fn fields(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        let body = line.trim_start_matches('#');
        if body.starts_with("  ") {
            if let Some(last) = out.last_mut() {
                last.1.push(' ');
                last.1.push_str(body.trim());
            }
            continue;
        }
        if let Some((k, v)) = body.trim().split_once(':') {
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// What is wrong with one file's header (empty when nothing).
fn header_problems(name: &str, text: &str) -> Vec<String> {
    let found = fields(text);
    let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
    let mut problems = Vec::new();
    if keys != FIELDS {
        problems.push(format!(
            "{name}: header fields {keys:?}, expected {FIELDS:?} in that order"
        ));
        return problems;
    }
    let value = |k: &str| found.iter().find(|(f, _)| f == k).map(|(_, v)| v.as_str());
    if value("slowdown") != Some(name) {
        problems.push(format!("{name}: `slowdown:` must be the file's name"));
    }
    if !value("size").is_some_and(|s| s.contains(" ms per ")) {
        problems.push(format!("{name}: `size:` must say `N ms per <operation>`"));
    }
    if found.iter().any(|(_, v)| v.is_empty()) {
        problems.push(format!("{name}: an empty field"));
    }
    problems
}

#[test]
fn every_slowdown_has_a_complete_header_and_the_four_paths_are_covered() {
    let files = slowdown_files();
    let problems: Vec<String> = files
        .iter()
        .flat_map(|f| header_problems(&stem(f), &read(f)))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for path in PATHS {
        let covered = files.iter().any(|f| {
            fields(&read(f))
                .iter()
                .any(|(k, v)| k == "path" && v.starts_with(path))
        });
        assert!(covered, "no slowdown's `path:` is {path:?}");
    }
}

#[test]
fn every_slowdown_applies_exactly_to_the_installed_kvcr() {
    let (_, site) = diff_files::pinned_kvcr(KVCR_VERSION, "the slowdowns");
    let problems: Vec<String> = slowdown_files()
        .iter()
        .filter_map(|f| kvcr_diff::applies_exactly(&site, f).err())
        .map(|e| e.to_string())
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_lists_every_slowdown_with_its_size() {
    let readme = read(&root().join(DIR).join("README.md"));
    let mut missing = Vec::new();
    for file in slowdown_files() {
        let name = stem(&file);
        let size = fields(&read(&file))
            .into_iter()
            .find(|(k, _)| k == "size")
            .map(|(_, v)| v)
            .unwrap_or_default();
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}.diff` |")));
        match row {
            Some(row) if row.contains(&size) => {}
            Some(_) => missing.push(format!("{name}: its README row does not say {size:?}")),
            None => missing.push(format!("{name}: no README row")),
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn a_header_out_of_order_misnamed_or_without_a_size_is_reported() {
    let good = "# slowdown: x\n# path: a peer pull\n# where: there\n# size: 1 ms per write\n\
                # reason: because\n#   continued\n# shows-in: remote_hit\n--- a/kvcr/x.py\n";
    assert!(header_problems("x", good).is_empty());
    assert_eq!(fields(good)[4].1, "because continued");
    assert!(header_problems("y", good)[0].contains("file's name"));
    let no_size = good.replace("1 ms per write", "a little");
    assert!(header_problems("x", &no_size)[0].contains("N ms per"));
    let short = good.replace("# where: there\n", "");
    assert!(header_problems("x", &short)[0].contains("expected"));
}
