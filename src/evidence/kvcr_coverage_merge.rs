//! The KVCR coverage of several runs (one per lane) as one table:
//! `kvcr-e2e coverage merge RUN_DIR...`.
//!
//! Each run's combined data (`kvcr-coverage/.coverage`) is combined again
//! by coverage.py, so a line or branch counts once whichever lanes ran it.
//! The runs must have measured the same kvcr build (the same files digest);
//! each may have imported it from its own place.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::kvcr_coverage::{self, KvcrCoverage};
use crate::pyenv::coverage::{self as tool, COMBINED};
use crate::pyenv::coverage_table::CoverageTable;

/// The merged record, in the output directory.
pub const MERGED_JSON: &str = "kvcr-coverage-merged.json";
/// The merged tables as markdown, in the output directory.
pub const MERGED_MD: &str = "kvcr-coverage-merged.md";

/// Several runs' coverage merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedCoverage {
    pub kvcr_files_sha256: String,
    /// Each run, with its own totals.
    pub runs: Vec<MergedRun>,
    pub table: CoverageTable,
}

/// One run of a merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedRun {
    pub run_dir: PathBuf,
    /// The run's label in its results.json (`phase2 cpu/aggregated/attention`).
    pub label: String,
    pub percent_statements: f64,
    pub percent_branches: f64,
}

/// Reads each run directory's [`kvcr_coverage::FILE`], checks they measured
/// one build, combines their data with `python`'s coverage.py into
/// `out_dir`, and writes [`MERGED_JSON`] and [`MERGED_MD`] there.
pub fn merge(
    python: &Path,
    run_dirs: &[PathBuf],
    out_dir: &Path,
) -> Result<MergedCoverage, String> {
    if run_dirs.is_empty() {
        return Err("no run directory to merge".into());
    }
    let mut runs = Vec::new();
    let mut inputs = Vec::new();
    let mut package_dirs: Vec<PathBuf> = Vec::new();
    let mut build: Option<(String, PathBuf)> = None;
    for dir in run_dirs {
        let coverage = KvcrCoverage::read(dir)?;
        let table = coverage.table.as_ref().ok_or_else(|| {
            format!(
                "{} measured no coverage: {}",
                dir.display(),
                coverage.error.as_deref().unwrap_or("no data")
            )
        })?;
        match &build {
            Some((digest, first)) if *digest != coverage.kvcr_files_sha256 => {
                return Err(format!(
                    "the runs measured different kvcr builds: {} (files {}) and {} (files {}); merge runs of one build",
                    first.display(),
                    short(digest),
                    dir.display(),
                    short(&coverage.kvcr_files_sha256)
                ))
            }
            Some(_) => {}
            None => build = Some((coverage.kvcr_files_sha256.clone(), dir.clone())),
        }
        if !package_dirs.contains(&coverage.package_dir) {
            package_dirs.push(coverage.package_dir.clone());
        }
        inputs.push(dir.join(&coverage.data_dir).join(COMBINED));
        runs.push(MergedRun {
            run_dir: dir.clone(),
            label: label_of(dir),
            percent_statements: table.totals.percent_statements,
            percent_branches: table.totals.percent_branches,
        });
    }
    let table =
        tool::combine(python, &inputs, &package_dirs, out_dir).map_err(|e| e.to_string())?;
    let merged = MergedCoverage {
        kvcr_files_sha256: build.map(|(d, _)| d).unwrap_or_default(),
        runs,
        table,
    };
    let json = serde_json::to_string_pretty(&merged).map_err(|e| e.to_string())?;
    for (name, text) in [(MERGED_JSON, json), (MERGED_MD, markdown(&merged))] {
        let path = out_dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(merged)
}

/// The run's label from its results.json, else its directory's name.
fn label_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["run"]["label"].as_str().map(str::to_string))
        .unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| dir.display().to_string())
        })
}

/// The runs' totals, the merged total, then the merged per-module table.
pub fn markdown(merged: &MergedCoverage) -> String {
    let mut o = format!(
        "KVCR coverage of {} runs (kvcr files {}, coverage.py {}):\n\n\
         | run | statements run | branches taken |\n|---|---:|---:|\n",
        merged.runs.len(),
        short(&merged.kvcr_files_sha256),
        merged.table.tool_version
    );
    for r in &merged.runs {
        let _ = writeln!(
            o,
            "| {} | {:.1} % | {:.1} % |",
            r.label, r.percent_statements, r.percent_branches
        );
    }
    let t = &merged.table.totals;
    let _ = writeln!(
        o,
        "| **merged** | **{:.1} %** | **{:.1} %** |\n",
        t.percent_statements, t.percent_branches
    );
    o.push_str(&kvcr_coverage::markdown(&merged.table));
    o
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::kvcr_coverage::tests::{sample, sample_table};

    fn run_dir(root: &Path, name: &str, coverage: &KvcrCoverage, label: Option<&str>) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join(kvcr_coverage::FILE),
            serde_json::to_string(coverage).expect("json"),
        )
        .expect("write");
        if let Some(label) = label {
            std::fs::write(
                dir.join("results.json"),
                serde_json::json!({"run": {"label": label}}).to_string(),
            )
            .expect("write");
        }
        dir
    }

    #[test]
    fn runs_of_different_builds_or_without_data_are_refused_before_combining() {
        let root = tempfile::tempdir().expect("tempdir");
        let a = run_dir(root.path(), "a", &sample(), None);
        let other = KvcrCoverage {
            kvcr_files_sha256: "b".repeat(64),
            ..sample()
        };
        let b = run_dir(root.path(), "b", &other, None);
        // No interpreter is needed to refuse.
        let python = Path::new("/nonexistent/python");
        let err = merge(python, &[a.clone(), b], root.path()).expect_err("two builds");
        assert!(
            err.starts_with("the runs measured different kvcr builds:"),
            "{err}"
        );
        assert!(
            err.contains("(files aaaaaaaaaaaa)") && err.contains("(files bbbbbbbbbbbb)"),
            "{err}"
        );
        let empty = KvcrCoverage {
            table: None,
            error: Some("no KVCR process saved coverage data".into()),
            ..sample()
        };
        let c = run_dir(root.path(), "c", &empty, None);
        let err = merge(python, &[a, c], root.path()).expect_err("no data");
        assert!(
            err.ends_with("measured no coverage: no KVCR process saved coverage data"),
            "{err}"
        );
        let err = merge(python, &[root.path().join("none")], root.path()).expect_err("no file");
        assert!(err.contains("was it run with --kvcr-coverage?"), "{err}");
    }

    #[test]
    fn the_markdown_lists_each_run_the_merged_total_and_the_modules() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = run_dir(
            root.path(),
            "20261205-1",
            &sample(),
            Some("phase2 cpu/aggregated/attention"),
        );
        assert_eq!(label_of(&dir), "phase2 cpu/aggregated/attention");
        assert_eq!(label_of(&root.path().join("x")), "x");
        let merged = MergedCoverage {
            kvcr_files_sha256: "a".repeat(64),
            runs: vec![MergedRun {
                run_dir: dir,
                label: "phase2 cpu/aggregated/attention".into(),
                percent_statements: 40.0,
                percent_branches: 30.04,
            }],
            table: sample_table(),
        };
        let md = markdown(&merged);
        assert!(
            md.starts_with(
                "KVCR coverage of 1 runs (kvcr files aaaaaaaaaaaa, coverage.py 7.18.0):\n\n"
            ),
            "{md}"
        );
        assert!(md.contains("| phase2 cpu/aggregated/attention | 40.0 % | 30.0 % |\n| **merged** | **47.3 %** | **50.0 %** |\n\n| module |"), "{md}");
        assert!(md.ends_with("| **total** | **729** | **384** | **47.3 %** | **200** | **9** | **100** | **50.0 %** |\n"), "{md}");
    }
}
