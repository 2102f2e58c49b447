//! `--kvcr-coverage`: the run's KVCR coverage as evidence, and its
//! renderings (the summary lines, a markdown table, the report's section).
//!
//! At the end of a run whose KVCR processes ran under coverage.py
//! ([`crate::pyenv::coverage`]), [`KvcrCoverage::collect`] combines their
//! data files (`kvcr-coverage/data/`) into `kvcr-coverage/.coverage`, reads
//! the per-module table, and says which KVCR process saved data: every
//! process that reported its kvcr import is listed, and one without a data
//! file ended without saving (SIGKILL, `os._exit`). It is written as
//! `kvcr-coverage.json` and under `kvcr_coverage` in `results.json`.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::report::esc;
use super::{ComponentImport, EvidenceError, KvcrBuild, RunDir};
use crate::pyenv::coverage::{self, DataFile};
use crate::pyenv::coverage_table::{Counts, CoverageTable};

/// The run's coverage record, at the run directory's root.
pub const FILE: &str = "kvcr-coverage.json";
/// The directory of the data, under the run directory.
pub const DIR: &str = "kvcr-coverage";

/// The KVCR coverage of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvcrCoverage {
    /// The files digest of the kvcr build measured (runs merge only with
    /// runs of the same build).
    pub kvcr_files_sha256: String,
    /// The kvcr package directory the processes imported.
    pub package_dir: PathBuf,
    /// The data, relative to the run directory: per-process files in
    /// `data/`, the combined `.coverage`, coverage.py's `coverage.json`.
    pub data_dir: PathBuf,
    /// The per-module table; absent when nothing could be combined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<CoverageTable>,
    /// Why there is no table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every KVCR process the run saw (its import report) and its data file.
    pub processes: Vec<ProcessCoverage>,
    /// Data files of processes that reported no import (a subprocess of a
    /// component, a process of the harness's own checks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_data_files: Vec<PathBuf>,
    /// What a process's hook said it could not do (`worker-A: start: ...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook_errors: Vec<String>,
}

/// One KVCR process and the data file it saved, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessCoverage {
    pub component: String,
    pub pid: u32,
    /// Relative to the run directory; `None`: the process ended without
    /// saving (SIGKILL, `os._exit`), or still runs (a kept stack).
    pub data_file: Option<PathBuf>,
}

impl KvcrCoverage {
    /// Combines the data under `<run>/kvcr-coverage/` with `python`'s
    /// coverage.py and matches the data files with `imports` (every
    /// process's import report) and the hook's error lines in `logs_dir`.
    pub fn collect(
        python: &Path,
        run_root: &Path,
        build: &KvcrBuild,
        imports: &[ComponentImport],
        logs_dir: &Path,
    ) -> Self {
        let dir = run_root.join(DIR);
        let data = coverage::data_dir(&dir);
        let files = coverage::data_files(&data);
        let relative = |p: &Path| p.strip_prefix(run_root).unwrap_or(p).to_path_buf();
        let (processes, others) = match_processes(imports, &files);
        let combined = if files.is_empty() {
            Err(coverage::CoverageError::NoData(data.clone()).to_string())
        } else {
            coverage::combine(python, &[data], std::slice::from_ref(&build.location), &dir)
                .map_err(|e| e.to_string())
        };
        let (table, error) = match combined {
            Ok(table) => (Some(table), None),
            Err(e) => (None, Some(e)),
        };
        Self {
            kvcr_files_sha256: build.files_sha256.clone(),
            package_dir: build.location.clone(),
            data_dir: PathBuf::from(DIR),
            table,
            error,
            processes: processes
                .into_iter()
                .map(|p| ProcessCoverage {
                    data_file: p.data_file.as_deref().map(relative),
                    ..p
                })
                .collect(),
            other_data_files: others.iter().map(|f| relative(&f.path)).collect(),
            hook_errors: hook_errors(logs_dir),
        }
    }

    /// Writes [`FILE`] into the run directory.
    /// The record a run wrote into `dir` (its run directory).
    pub fn read(dir: &Path) -> Result<KvcrCoverage, String> {
        let path = dir.join(FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{} has no readable {FILE} ({e}): was it run with --kvcr-coverage?",
                dir.display()
            )
        })?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn write(&self, dir: &RunDir) -> Result<PathBuf, EvidenceError> {
        dir.write_root_json(FILE, self)
    }

    /// The processes that saved no data.
    pub fn without_data(&self) -> Vec<&ProcessCoverage> {
        self.processes
            .iter()
            .filter(|p| p.data_file.is_none())
            .collect()
    }

    /// The summary's lines.
    pub fn summary(&self) -> String {
        let mut o = String::new();
        match &self.table {
            Some(t) => {
                let _ = writeln!(
                    o,
                    "kvcr coverage: {} of {} statements, {} of {} branches ({} modules; {FILE})",
                    pct(t.totals.percent_statements),
                    t.totals.statements,
                    pct(t.totals.percent_branches),
                    t.totals.branches,
                    t.modules.len(),
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "kvcr coverage: NONE ({})",
                    self.error.as_deref().unwrap_or("no data")
                );
            }
        }
        let missing = self.without_data();
        let _ = write!(
            o,
            "      data from {} of {} KVCR processes",
            self.processes.len() - missing.len(),
            self.processes.len()
        );
        if !missing.is_empty() {
            let names: Vec<String> = missing
                .iter()
                .map(|p| format!("{} (pid {})", p.component, p.pid))
                .collect();
            let _ = write!(
                o,
                "; none from {} (killed, or still running)",
                names.join(", ")
            );
        }
        o.push('\n');
        for e in &self.hook_errors {
            let _ = writeln!(o, "      hook error: {e}");
        }
        o
    }
}

/// Each import report with its data file (by pid), and the data files of
/// no reported process.
fn match_processes(
    imports: &[ComponentImport],
    files: &[DataFile],
) -> (Vec<ProcessCoverage>, Vec<DataFile>) {
    let processes: Vec<ProcessCoverage> = imports
        .iter()
        .map(|i| ProcessCoverage {
            component: i.component.clone(),
            pid: i.pid,
            data_file: files
                .iter()
                .find(|f| f.pid == Some(i.pid))
                .map(|f| f.path.clone()),
        })
        .collect();
    let others = files
        .iter()
        .filter(|f| !imports.iter().any(|i| f.pid == Some(i.pid)))
        .cloned()
        .collect();
    (processes, others)
}

/// `component: error` for every hook error line of the logs in `logs_dir`.
fn hook_errors(logs_dir: &Path) -> Vec<String> {
    crate::pyenv::import_report::component_logs(logs_dir)
        .into_iter()
        .flat_map(|(component, text)| {
            coverage::hook_errors(&text)
                .into_iter()
                .map(move |e| format!("{component}: {e}"))
        })
        .collect()
}

fn pct(x: f64) -> String {
    format!("{x:.1} %")
}

/// The columns of every rendering, after the module.
const COLUMNS: [&str; 7] = [
    "statements",
    "missed",
    "statements run",
    "branches",
    "partial",
    "branches missed",
    "branches taken",
];

fn cells(c: &Counts) -> [String; 7] {
    [
        c.statements.to_string(),
        c.missed.to_string(),
        pct(c.percent_statements),
        c.branches.to_string(),
        c.partial.to_string(),
        c.missed_branches.to_string(),
        pct(c.percent_branches),
    ]
}

/// The table as markdown: one row per module, then the total.
pub fn markdown(table: &CoverageTable) -> String {
    let mut o = format!("| module | {} |\n|---|", COLUMNS.join(" | "));
    o.push_str(&"---:|".repeat(COLUMNS.len()));
    o.push('\n');
    for m in &table.modules {
        let _ = writeln!(o, "| `{}` | {} |", m.module, cells(&m.counts).join(" | "));
    }
    let _ = writeln!(
        o,
        "| **total** | {} |",
        cells(&table.totals)
            .iter()
            .map(|c| format!("**{c}**"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    o
}

/// The report's section; empty when the run did not measure coverage.
pub fn section(coverage: Option<&KvcrCoverage>) -> String {
    let Some(c) = coverage else {
        return String::new();
    };
    let mut o = String::from("<section><h2>KVCR coverage</h2>");
    match &c.table {
        Some(t) => {
            let _ = write!(
                o,
                "<p>{} of kvcr's {} statements and {} of its {} branches ran in the KVCR \
                 processes of this run (coverage.py {}, <a href=\"{FILE}\">{FILE}</a>).</p>",
                pct(t.totals.percent_statements),
                t.totals.statements,
                pct(t.totals.percent_branches),
                t.totals.branches,
                esc(&t.tool_version),
            );
            o.push_str("<table><thead><tr><th>module</th>");
            for col in COLUMNS {
                let _ = write!(o, "<th class=\"num\">{col}</th>");
            }
            o.push_str("</tr></thead><tbody>");
            let mut row = |name: &str, counts: &Counts| {
                let _ = write!(o, "<tr><td>{}</td>", esc(name));
                for cell in cells(counts) {
                    let _ = write!(o, "<td class=\"num\">{cell}</td>");
                }
                o.push_str("</tr>");
            };
            for m in &t.modules {
                row(&m.module, &m.counts);
            }
            row("total", &t.totals);
            o.push_str("</tbody></table>");
        }
        None => {
            let _ = write!(
                o,
                "<p class=\"notrun\">no table — {}</p>",
                esc(c.error.as_deref().unwrap_or("no data"))
            );
        }
    }
    o.push_str(
        "<table><thead><tr><th>KVCR process</th><th class=\"num\">pid</th><th>data file</th></tr></thead><tbody>",
    );
    for p in &c.processes {
        let data = p
            .data_file
            .as_ref()
            .map(|f| f.display().to_string())
            .unwrap_or_else(|| "none: ended without saving (killed) or still running".into());
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            esc(&p.component),
            p.pid,
            esc(&data)
        );
    }
    for f in &c.other_data_files {
        let _ = write!(
            o,
            "<tr><td>another process</td><td class=\"num\"></td><td>{}</td></tr>",
            esc(&f.display().to_string())
        );
    }
    o.push_str("</tbody></table>");
    for e in &c.hook_errors {
        let _ = write!(o, "<p class=\"notrun\">hook error: {}</p>", esc(e));
    }
    o.push_str("</section>\n");
    o
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pyenv::coverage_table::ModuleCoverage;

    pub(crate) fn sample_table() -> CoverageTable {
        CoverageTable {
            tool_version: "7.18.0".into(),
            modules: vec![
                ModuleCoverage {
                    module: "kvcr/core.py".into(),
                    counts: Counts::new(400, 100, 120, 7, 30),
                },
                ModuleCoverage {
                    module: "kvcr/remote_fw_dram.py".into(),
                    counts: Counts::new(329, 284, 80, 2, 70),
                },
            ],
            totals: Counts::new(729, 384, 200, 9, 100),
        }
    }

    fn import(component: &str, pid: u32) -> ComponentImport {
        ComponentImport {
            component: component.into(),
            pid,
            version: "0.1.1".into(),
            location: "/env/kvcr".into(),
            files_sha256: "a".repeat(64),
        }
    }

    pub(crate) fn sample() -> KvcrCoverage {
        KvcrCoverage {
            kvcr_files_sha256: "a".repeat(64),
            package_dir: "/env/kvcr".into(),
            data_dir: DIR.into(),
            table: Some(sample_table()),
            error: None,
            processes: vec![
                ProcessCoverage {
                    component: "guard".into(),
                    pid: 10,
                    data_file: Some("kvcr-coverage/data/.coverage.vm.pid10.Xa".into()),
                },
                ProcessCoverage {
                    component: "worker-A".into(),
                    pid: 11,
                    data_file: None,
                },
            ],
            other_data_files: Vec::new(),
            hook_errors: Vec::new(),
        }
    }

    #[test]
    fn data_files_are_matched_to_processes_by_pid() {
        let files = [
            DataFile {
                path: "/r/d/.coverage.vm.pid10.Xa".into(),
                pid: Some(10),
            },
            DataFile {
                path: "/r/d/.coverage.vm.pid99.Xb".into(),
                pid: Some(99),
            },
        ];
        let (processes, others) =
            match_processes(&[import("guard", 10), import("worker-A", 11)], &files);
        assert_eq!(
            processes[0].data_file.as_deref(),
            Some(Path::new("/r/d/.coverage.vm.pid10.Xa"))
        );
        assert_eq!(processes[1].data_file, None);
        assert_eq!(others, [files[1].clone()]);
    }

    #[test]
    fn the_markdown_table_has_a_row_per_module_and_the_total() {
        let md = markdown(&sample_table());
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[0],
            "| module | statements | missed | statements run | branches | partial | branches missed | branches taken |"
        );
        assert_eq!(lines[1], "|---|---:|---:|---:|---:|---:|---:|---:|");
        assert_eq!(
            lines[2],
            "| `kvcr/core.py` | 400 | 100 | 75.0 % | 120 | 7 | 30 | 75.0 % |"
        );
        assert_eq!(
            lines[4],
            "| **total** | **729** | **384** | **47.3 %** | **200** | **9** | **100** | **50.0 %** |"
        );
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn the_summary_names_the_processes_that_saved_nothing() {
        let s = sample().summary();
        assert_eq!(
            s,
            "kvcr coverage: 47.3 % of 729 statements, 50.0 % of 200 branches (2 modules; kvcr-coverage.json)\n      \
             data from 1 of 2 KVCR processes; none from worker-A (pid 11) (killed, or still running)\n"
        );
        let none = KvcrCoverage {
            table: None,
            error: Some("no KVCR process saved coverage data in /r/kvcr-coverage/data".into()),
            hook_errors: vec!["worker-A: start: ModuleNotFoundError: x pid=11".into()],
            ..sample()
        };
        let s = none.summary();
        assert!(s.starts_with("kvcr coverage: NONE (no KVCR process saved coverage data in /r/kvcr-coverage/data)\n"), "{s}");
        assert!(
            s.ends_with("      hook error: worker-A: start: ModuleNotFoundError: x pid=11\n"),
            "{s}"
        );
    }

    #[test]
    fn the_report_section_shows_the_table_and_each_process() {
        assert_eq!(section(None), "");
        let html = section(Some(&sample()));
        assert!(html.contains("<h2>KVCR coverage</h2>"), "{html}");
        assert!(
            html.contains("47.3 % of kvcr's 729 statements and 50.0 % of its 200 branches"),
            "{html}"
        );
        assert!(html.contains("<td>kvcr/remote_fw_dram.py</td><td class=\"num\">329</td><td class=\"num\">284</td><td class=\"num\">13.7 %</td>"), "{html}");
        assert!(
            html.contains(
                "<td>worker-A</td><td class=\"num\">11</td><td>none: ended without saving"
            ),
            "{html}"
        );
        let failed = section(Some(&KvcrCoverage {
            table: None,
            error: Some("`python -m coverage` failed: <boom>".into()),
            ..sample()
        }));
        assert!(
            failed.contains("no table — `python -m coverage` failed: &lt;boom&gt;"),
            "{failed}"
        );
    }

    #[test]
    fn the_record_round_trips_through_json() {
        let text = serde_json::to_string(&sample()).expect("json");
        let back: KvcrCoverage = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, sample());
        let value: serde_json::Value = serde_json::from_str(&text).expect("value");
        assert_eq!(value["table"]["modules"][0]["module"], "kvcr/core.py");
        assert_eq!(value["table"]["totals"]["statements"], 729);
        assert!(value.get("error").is_none(), "{value}");
    }
}
