//! KVCR's line and branch coverage per module, read from coverage.py's JSON
//! report (`python -m coverage json`, format 3).
//!
//! Only the summary counts of each file are read. A module is named by its
//! path from the directory above the `kvcr` package (`kvcr/core.py`), so
//! tables of runs that imported kvcr from different places line up.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Statement and branch counts of one module, or of all of them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Executable statements (coverage's `num_statements`).
    pub statements: u64,
    /// Statements that never ran.
    pub missed: u64,
    /// Branch destinations (coverage's `num_branches`: each way out of a
    /// line that can go two ways counts once).
    pub branches: u64,
    /// Lines that ran and took some, not all, of their branches.
    pub partial: u64,
    /// Branch destinations never taken.
    pub missed_branches: u64,
    /// Statements that ran, percent of `statements` (100 when none).
    pub percent_statements: f64,
    /// Branches taken, percent of `branches` (100 when none).
    pub percent_branches: f64,
    /// coverage.py's own figure: statements and branches together.
    pub percent: f64,
}

impl Counts {
    pub fn new(
        statements: u64,
        missed: u64,
        branches: u64,
        partial: u64,
        missed_branches: u64,
    ) -> Self {
        let ran = statements.saturating_sub(missed);
        let taken = branches.saturating_sub(missed_branches);
        Self {
            statements,
            missed,
            branches,
            partial,
            missed_branches,
            percent_statements: percent(ran, statements),
            percent_branches: percent(taken, branches),
            percent: percent(ran + taken, statements + branches),
        }
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        100.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// One module's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleCoverage {
    /// `kvcr/core.py`, or the file's path when it is not under the package.
    pub module: String,
    #[serde(flatten)]
    pub counts: Counts,
}

/// The table: every module of the package (those no process imported
/// included, at 0 %), sorted by name, and the totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageTable {
    /// The coverage.py version that wrote the report.
    pub tool_version: String,
    pub modules: Vec<ModuleCoverage>,
    pub totals: Counts,
}

/// Why a report could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("it is not coverage.py's JSON report: {0}")]
    Format(String),
    #[error("it has no branch measurements (the data was collected without branch=True)")]
    NoBranches,
    #[error("it lists no file of the kvcr package")]
    NoModules,
}

#[derive(Deserialize)]
struct Report {
    meta: Meta,
    files: BTreeMap<String, FileEntry>,
    totals: Summary,
}

#[derive(Deserialize)]
struct Meta {
    version: String,
    #[serde(default)]
    branch_coverage: bool,
}

#[derive(Deserialize)]
struct FileEntry {
    summary: Summary,
}

#[derive(Deserialize)]
struct Summary {
    num_statements: u64,
    missing_lines: u64,
    #[serde(default)]
    num_branches: u64,
    #[serde(default)]
    num_partial_branches: u64,
    #[serde(default)]
    missing_branches: u64,
}

impl Summary {
    fn counts(&self) -> Counts {
        Counts::new(
            self.num_statements,
            self.missing_lines,
            self.num_branches,
            self.num_partial_branches,
            self.missing_branches,
        )
    }
}

impl CoverageTable {
    /// The table of coverage.py's JSON report `json`, whose files are those
    /// of the kvcr package in `package_dir`.
    pub fn from_report(json: &str, package_dir: &Path) -> Result<Self, ReportError> {
        let report: Report =
            serde_json::from_str(json).map_err(|e| ReportError::Format(e.to_string()))?;
        if !report.meta.branch_coverage {
            return Err(ReportError::NoBranches);
        }
        if report.files.is_empty() {
            return Err(ReportError::NoModules);
        }
        let mut modules: Vec<ModuleCoverage> = report
            .files
            .iter()
            .map(|(path, file)| ModuleCoverage {
                module: module_name(Path::new(path), package_dir),
                counts: file.summary.counts(),
            })
            .collect();
        modules.sort_by(|a, b| a.module.cmp(&b.module));
        Ok(Self {
            tool_version: report.meta.version,
            modules,
            totals: report.totals.counts(),
        })
    }

    /// The row of `module` (`kvcr/core.py`).
    pub fn module(&self, module: &str) -> Option<&ModuleCoverage> {
        self.modules.iter().find(|m| m.module == module)
    }
}

/// `kvcr/core.py` for `<package_dir>/core.py`; the path itself otherwise.
pub fn module_name(file: &Path, package_dir: &Path) -> String {
    let package = package_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kvcr".into());
    match file.strip_prefix(package_dir) {
        Ok(rest) => format!("{package}/{}", rest.display()),
        Err(_) => file.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two files of a package and a total, as coverage 7.18 writes them
    /// (fields the table does not read left in).
    fn report(package: &str) -> String {
        serde_json::json!({
            "meta": {"format": 3, "version": "7.18.0", "timestamp": "2026-12-05T20:45:27",
                     "branch_coverage": true, "show_contexts": false},
            "files": {
                format!("{package}/remote_fw_dram.py"): {
                    "executed_lines": [1, 2],
                    "summary": {"covered_lines": 45, "num_statements": 329, "percent_covered": 11.2,
                                "missing_lines": 284, "excluded_lines": 0, "num_branches": 120,
                                "num_partial_branches": 7, "covered_branches": 30, "missing_branches": 90}
                },
                format!("{package}/__init__.py"): {
                    "summary": {"covered_lines": 5, "num_statements": 5, "percent_covered": 100.0,
                                "missing_lines": 0, "excluded_lines": 0, "num_branches": 0,
                                "num_partial_branches": 0, "covered_branches": 0, "missing_branches": 0}
                }
            },
            "totals": {"covered_lines": 50, "num_statements": 334, "percent_covered": 17.3,
                       "missing_lines": 284, "excluded_lines": 0, "num_branches": 120,
                       "num_partial_branches": 7, "covered_branches": 30, "missing_branches": 90}
        })
        .to_string()
    }

    #[test]
    fn a_report_becomes_rows_named_from_the_package_sorted() {
        let dir = "/venv/lib/python3.11/site-packages/kvcr";
        let table = CoverageTable::from_report(&report(dir), Path::new(dir)).expect("parses");
        assert_eq!(table.tool_version, "7.18.0");
        let names: Vec<&str> = table.modules.iter().map(|m| m.module.as_str()).collect();
        assert_eq!(names, ["kvcr/__init__.py", "kvcr/remote_fw_dram.py"]);
        let fw = table.module("kvcr/remote_fw_dram.py").expect("row").counts;
        assert_eq!(
            (
                fw.statements,
                fw.missed,
                fw.branches,
                fw.partial,
                fw.missed_branches
            ),
            (329, 284, 120, 7, 90)
        );
        assert!((fw.percent_statements - 100.0 * 45.0 / 329.0).abs() < 1e-9);
        assert!((fw.percent_branches - 25.0).abs() < 1e-9);
        assert!((fw.percent - 100.0 * 75.0 / 449.0).abs() < 1e-9);
        assert_eq!(table.totals.statements, 334);
        assert_eq!(table.totals.missed_branches, 90);
    }

    #[test]
    fn a_module_without_statements_or_branches_is_fully_covered() {
        let c = Counts::new(0, 0, 0, 0, 0);
        assert_eq!(
            (c.percent_statements, c.percent_branches, c.percent),
            (100.0, 100.0, 100.0)
        );
        let none_ran = Counts::new(10, 10, 4, 0, 4);
        assert_eq!(
            (
                none_ran.percent_statements,
                none_ran.percent_branches,
                none_ran.percent
            ),
            (0.0, 0.0, 0.0)
        );
    }

    #[test]
    fn reports_without_branches_or_files_or_of_another_shape_are_refused() {
        let dir = Path::new("/p/kvcr");
        let no_branch =
            report("/p/kvcr").replace("\"branch_coverage\":true", "\"branch_coverage\":false");
        assert_eq!(
            CoverageTable::from_report(&no_branch, dir),
            Err(ReportError::NoBranches)
        );
        let empty = serde_json::json!({
            "meta": {"version": "7.18.0", "branch_coverage": true},
            "files": {},
            "totals": {"num_statements": 0, "missing_lines": 0}
        })
        .to_string();
        assert_eq!(
            CoverageTable::from_report(&empty, dir),
            Err(ReportError::NoModules)
        );
        let err = CoverageTable::from_report("{\"files\": []}", dir).expect_err("shape");
        assert!(
            err.to_string()
                .starts_with("it is not coverage.py's JSON report"),
            "{err}"
        );
    }

    #[test]
    fn a_file_outside_the_package_keeps_its_path() {
        let dir = Path::new("/env/site/kvcr");
        assert_eq!(
            module_name(Path::new("/env/site/kvcr/sub/x.py"), dir),
            "kvcr/sub/x.py"
        );
        assert_eq!(
            module_name(Path::new("/other/kvcr/x.py"), dir),
            "/other/kvcr/x.py"
        );
    }
}
