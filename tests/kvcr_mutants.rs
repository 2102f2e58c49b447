//! The curated KVCR mutants are well-formed: every `fixtures/kvcr-mutants/*.diff`
//! has a complete header, applies cleanly (no fuzz, no offset) with
//! `patch --dry-run -p1` onto the kvcr installed in the project's pinned
//! Python env, and is listed in the README's table. Needs no stack.

use std::path::PathBuf;
use std::process::Command;

use kvcr_e2e::mutants::{self, Expect, MutantClass};
use kvcr_e2e::pyenv::kvcr_diff;

/// The kvcr version every curated mutant is written against.
const KVCR_VERSION: &str = "0.1.1";

mod diff_files;

use diff_files::{read, root, stem};

fn mutant_files() -> Vec<PathBuf> {
    diff_files::diff_files(mutants::MUTANTS_DIR)
}

/// site-packages of the pinned env (kvcr 0.1.1).
fn site_packages() -> PathBuf {
    diff_files::pinned_kvcr(KVCR_VERSION, "the curated mutants").1
}

#[test]
fn every_mutant_has_a_complete_header() {
    let files = mutant_files();
    assert!(files.len() >= 24, "only {} curated mutants", files.len());
    let mut problems = Vec::new();
    let mut headers = Vec::new();
    for file in &files {
        match mutants::parse(&stem(file), &read(file)) {
            Ok(h) => headers.push(h),
            Err(e) => problems.push(e.to_string()),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Each runs on a lane of its stack on every engine it names.
    for h in &headers {
        for engine in &h.engines {
            if let Err(e) = mutants::plan::lane(h, *engine) {
                problems.push(e);
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every class the suite claims to check has a mutant, and so do the
    // behaviours it does not check yet.
    for class in MutantClass::ALL {
        assert!(
            headers.iter().any(|h| h.class == class),
            "no curated mutant of class {class}"
        );
    }
    // Survivors are expected only where no case looks yet, or read as a gap.
    for h in &headers {
        if h.expect == Expect::Survives {
            assert!(h.reading.is_some(), "{} survives without a reading", h.name);
        }
    }
}

#[test]
fn every_mutant_applies_cleanly_to_the_installed_kvcr() {
    let site = site_packages();
    let mut problems = Vec::new();
    for file in mutant_files() {
        // A hunk that only applies with an offset or fuzz was written against
        // another kvcr: the mutant would land somewhere else than reviewed.
        if let Err(e) = kvcr_diff::applies_exactly(&site, &file) {
            problems.push(e.to_string());
        }
        let modules = mutants::header::patched_modules(&read(&file));
        for module in modules {
            if !site.join(&module).is_file() {
                problems.push(format!(
                    "{}: {module} is not in the installed kvcr",
                    file.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_lists_every_mutant() {
    let readme_path = root().join(mutants::MUTANTS_DIR).join("README.md");
    let readme = read(&readme_path);
    let missing: Vec<String> = mutant_files()
        .iter()
        .map(|f| stem(f))
        .filter(|name| !readme.contains(&format!("| `{name}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} does not list {} in its table (a row `| `NAME` | ...`)",
        readme_path.display(),
        missing.join(", ")
    );
}

/// `kvcr-e2e mutants --only <unknown>` is a usage error: exit status 2, the
/// known names listed, and no stack started.
#[test]
fn an_unknown_only_name_exits_2_with_the_known_names() {
    let out = Command::new(env!("CARGO_BIN_EXE_kvcr-e2e"))
        .args(["mutants", "--only", "no-such-mutant"])
        .current_dir(root())
        .output()
        .expect("kvcr-e2e runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no curated mutant `no-such-mutant`; known: ")
            && stderr.contains("lru-evicts-newest"),
        "{stderr}"
    );
}
