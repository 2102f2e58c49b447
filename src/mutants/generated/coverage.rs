//! `--coverage RUN_DIR,...`: coverage-guided lane selection. A mutant at a
//! line a lane's run never executes runs there exactly as the base build
//! does, and the control shows the base build passes that lane: the lane
//! cannot kill it. So, given a `--kvcr-coverage` run of the base build on
//! lanes of the sequence, a draw skips each lane whose run saw its line not
//! run, and a draw that skips every lane is a survivor without a stack.
//!
//! The rule only ever skips on a line coverage.py lists as a statement it
//! saw not run (`missing_lines`); a line it does not know (a continuation
//! line, whose statement it reports under the statement's first line, is
//! looked up there first) runs, and so does every lane without a coverage
//! run. A skipped lane can only turn a would-be kill into a survivor
//! (where the coverage run missed what a process SIGKILLed by a case ran),
//! never the other way: the score can only be lower than a full run's.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::lane::GeneratedMutant;
use super::sequence::SequenceLane;
use crate::drive::ReadRun;
use crate::evidence::kvcr_coverage::KvcrCoverage;
use crate::lanes::Lane;
use crate::mutants::classify::{classify_run, MutantResult};
use crate::pyenv::coverage::TOOL_REPORT;
use crate::pyenv::coverage_table::module_name;

/// `statement_lines.py`: run by the base env's interpreter over the
/// pristine package.
const STATEMENT_LINES: &str = include_str!("statement_lines.py");

/// The plan of a `--coverage` batch, in its output directory.
pub const PLAN_FILE: &str = "coverage-plan.json";

/// What a batch records of each coverage run it used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageRunRecord {
    /// The lane (test target) the run was.
    pub lane: String,
    pub run_dir: PathBuf,
    /// The files digest of the kvcr build it measured: the base build's.
    pub kvcr_files_sha256: String,
    /// When the run started (its results.json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// KVCR processes of the run that saved no data (SIGKILLed by a case):
    /// a line only they ran reads as not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes_without_data: Vec<String>,
}

/// A lane of the sequence a generated mutant did not run: its coverage run
/// never executed the mutated line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedLane {
    pub lane: String,
    /// `kvcr/core.py`.
    pub module: String,
    /// The mutation site's line.
    pub line: u32,
    /// The first line of the site's statement, where the site is on a
    /// later line of it: the line coverage.py reported not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statement_line: Option<u32>,
    /// The lane's coverage run.
    pub run_dir: PathBuf,
}

impl SkippedLane {
    /// `kvcr/core.py line 181`, `kvcr/core.py line 183 (its statement's line 181)`.
    pub fn site_words(&self) -> String {
        match self.statement_line {
            Some(first) => format!(
                "{} line {} (its statement's line {first})",
                self.module, self.line
            ),
            None => format!("{} line {}", self.module, self.line),
        }
    }
}

/// `phase2, phase3 (kvcr/core.py line 181 not run in their coverage runs)`.
pub fn skipped_words(skipped: &[SkippedLane]) -> String {
    let Some(first) = skipped.first() else {
        return String::new();
    };
    let lanes: Vec<&str> = skipped.iter().map(|s| s.lane.as_str()).collect();
    let whose = if skipped.len() == 1 { "its" } else { "their" };
    format!(
        "{} ({} not run in {whose} coverage run{})",
        lanes.join(", "),
        first.site_words(),
        if skipped.len() == 1 { "" } else { "s" }
    )
}

/// Why a draw ran no lane: `kvcr/core.py line 181 ran in none of the 5
/// lanes' coverage runs (phase1 <run id>, ...)`.
pub fn none_ran_words(skipped: &[SkippedLane]) -> String {
    let Some(first) = skipped.first() else {
        return String::new();
    };
    let runs: Vec<String> = skipped
        .iter()
        .map(|s| {
            let id = s
                .run_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| s.run_dir.display().to_string());
            format!("{} {id}", s.lane)
        })
        .collect();
    let lanes = match skipped.len() {
        1 => "the lane's coverage run".to_string(),
        n => format!("the {n} lanes' coverage runs"),
    };
    format!(
        "{} ran in none of {lanes} ({})",
        first.site_words(),
        runs.join(", ")
    )
}

/// What coverage.py said of one line in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineSeen {
    /// A statement that ran.
    Ran,
    /// A statement that never ran; the line it was reported under.
    NotRun(u32),
    /// No statement coverage.py reports (a continuation line whose
    /// statement is not known, a comment, an excluded line), or a module
    /// the report does not list.
    Unknown,
}

/// One module's lines in coverage.py's report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ModuleLines {
    executed: BTreeSet<u32>,
    missing: BTreeSet<u32>,
}

/// coverage.py's JSON report: the lines of each file.
#[derive(Deserialize)]
struct ToolReport {
    files: BTreeMap<String, ToolFile>,
}

#[derive(Deserialize)]
struct ToolFile {
    #[serde(default)]
    executed_lines: Vec<u32>,
    #[serde(default)]
    missing_lines: Vec<u32>,
}

/// One lane's coverage run, read back.
#[derive(Debug, Clone)]
pub struct CoverageRun {
    pub record: CoverageRunRecord,
    /// Its trials, to check it ran what a mutant runs there.
    read: ReadRun,
    modules: BTreeMap<String, ModuleLines>,
}

impl CoverageRun {
    /// Reads run directory `dir` (a `latest` link is resolved to the run
    /// it names): its `kvcr-coverage.json` (the build it
    /// measured), coverage.py's `coverage.json` (the lines) and its
    /// `results.json` (the lane, from the run's label, and its trials).
    pub fn read(dir: &Path) -> Result<CoverageRun, String> {
        // The run's own directory, not a `latest` link that moves on.
        let dir = &std::fs::canonicalize(dir)
            .map_err(|e| format!("{}: {e}: not a run directory", dir.display()))?;
        let coverage = KvcrCoverage::read(dir)?;
        if coverage.table.is_none() {
            return Err(format!(
                "{} measured no coverage: {}",
                dir.display(),
                coverage.error.as_deref().unwrap_or("no data")
            ));
        }
        let report = dir.join(&coverage.data_dir).join(TOOL_REPORT);
        let text = std::fs::read_to_string(&report).map_err(|e| {
            format!(
                "{}: {e} (coverage.py's report of the run)",
                report.display()
            )
        })?;
        let modules = modules_of(&text, &coverage.package_dir)
            .map_err(|e| format!("{}: {e}", report.display()))?;
        let results = dir.join("results.json");
        let doc: serde_json::Value = std::fs::read_to_string(&results)
            .map_err(|e| format!("{}: {e}: not a finished run", results.display()))
            .and_then(|t| {
                serde_json::from_str(&t).map_err(|e| format!("{}: {e}", results.display()))
            })?;
        let label = doc["run"]["label"].as_str().unwrap_or_default();
        let lane = label
            .split_whitespace()
            .next()
            .and_then(Lane::of)
            .ok_or_else(|| {
                format!(
                    "{}: its label {label:?} names no lane (a run of a `cargo test` target's cases)",
                    results.display()
                )
            })?;
        let read = ReadRun::from_root(dir).map_err(|e| e.to_string())?;
        Ok(CoverageRun {
            record: CoverageRunRecord {
                lane: lane.target.to_string(),
                run_dir: dir.to_path_buf(),
                kvcr_files_sha256: coverage.kvcr_files_sha256.clone(),
                started_at: doc["run"]["started_at"].as_str().map(String::from),
                processes_without_data: coverage
                    .without_data()
                    .iter()
                    .map(|p| format!("{} (pid {})", p.component, p.pid))
                    .collect(),
            },
            read,
            modules,
        })
    }

    /// What the run saw of `line` of `module` (`kvcr/core.py`), looked up
    /// at `statement_line` (the first line of its statement) when coverage.py
    /// does not know the line itself.
    pub fn seen(&self, module: &str, line: u32, statement_line: Option<u32>) -> LineSeen {
        let Some(lines) = self.modules.get(module) else {
            return LineSeen::Unknown;
        };
        let at = |l: u32| match (lines.missing.contains(&l), lines.executed.contains(&l)) {
            (true, _) => Some(LineSeen::NotRun(l)),
            (false, true) => Some(LineSeen::Ran),
            (false, false) => None,
        };
        at(line)
            .or_else(|| statement_line.filter(|&s| s != line).and_then(at))
            .unwrap_or(LineSeen::Unknown)
    }
}

/// Each file of the package in `package_dir` with its executed and missing
/// lines, named `kvcr/<module>.py` as the coverage table names it.
fn modules_of(report: &str, package_dir: &Path) -> Result<BTreeMap<String, ModuleLines>, String> {
    let report: ToolReport = serde_json::from_str(report)
        .map_err(|e| format!("it is not coverage.py's JSON report: {e}"))?;
    let modules: BTreeMap<String, ModuleLines> = report
        .files
        .into_iter()
        .filter(|(path, _)| Path::new(path).starts_with(package_dir))
        .map(|(path, file)| {
            let lines = ModuleLines {
                executed: file.executed_lines.into_iter().collect(),
                missing: file.missing_lines.into_iter().collect(),
            };
            (module_name(Path::new(&path), package_dir), lines)
        })
        .collect();
    if modules.is_empty() {
        return Err(format!(
            "it lists no file of the kvcr package {}",
            package_dir.display()
        ));
    }
    Ok(modules)
}

/// A draw's lanes: those it runs, in the sequence's order, and those its
/// line's coverage says cannot kill it.
#[derive(Debug, Clone, PartialEq)]
pub struct DrawPlan {
    pub run: Vec<SequenceLane>,
    pub skipped: Vec<SkippedLane>,
}

impl DrawPlan {
    /// Every lane of the sequence (no `--coverage`).
    pub fn all(lanes: &[SequenceLane]) -> DrawPlan {
        DrawPlan {
            run: lanes.to_vec(),
            skipped: Vec::new(),
        }
    }

    /// The test targets it runs, in order.
    pub fn targets(&self) -> Vec<&'static str> {
        self.run.iter().map(|l| l.target).collect()
    }
}

/// The coverage runs of a batch, one per lane, checked against its
/// sequence.
#[derive(Debug, Clone)]
pub struct LaneCoverage {
    runs: Vec<CoverageRun>,
}

impl LaneCoverage {
    /// Reads each of `dirs` and checks it is a coverage run of a lane of
    /// `lanes`, the only one of its lane, that ran and passed every trial a
    /// mutant runs there (a run of fewer trials, or one cut short by a
    /// failure, may not have run what the lane runs).
    pub fn load(dirs: &[PathBuf], lanes: &[SequenceLane]) -> Result<LaneCoverage, String> {
        let mut runs: Vec<CoverageRun> = Vec::new();
        for dir in dirs {
            let run = CoverageRun::read(dir).map_err(|e| format!("--coverage: {e}"))?;
            let lane_name = run.record.lane.clone();
            if let Some(other) = runs.iter().find(|r| r.record.lane == lane_name) {
                return Err(format!(
                    "--coverage: {} and {} are both runs of {lane_name}: give one run per lane",
                    other.record.run_dir.display(),
                    dir.display()
                ));
            }
            let Some(lane) = lanes.iter().find(|l| l.target == lane_name) else {
                let sequence: Vec<&str> = lanes.iter().map(|l| l.target).collect();
                return Err(format!(
                    "--coverage: {} is a run of {lane_name}, which is not a lane of the sequence \
                     ({}): leave it out of --coverage, or add {lane_name} to --lanes",
                    dir.display(),
                    sequence.join(", ")
                ));
            };
            match classify_run(None, &lane.trials, Ok(&run.read)) {
                MutantResult::Survived => {}
                other => {
                    let why = match other {
                        MutantResult::Killed { trial, message, .. } => {
                            format!("{trial} failed: {message}")
                        }
                        MutantResult::Broken { why } => why,
                        other => other.word().to_string(),
                    };
                    return Err(format!(
                        "--coverage: {} ({lane_name}) did not run and pass every trial a mutant \
                         runs there ({why}); measure the whole lane on the base build: \
                         `cargo test --test {lane_name} -- --kvcr-coverage`",
                        dir.display()
                    ));
                }
            }
            runs.push(run);
        }
        Ok(LaneCoverage { runs })
    }

    /// Checks every run measured the base build, whose files digest is
    /// `base` (a line another build does not run says nothing of this one).
    pub fn check_build(&self, base: &str) -> Result<(), String> {
        for run in &self.runs {
            let measured = &run.record.kvcr_files_sha256;
            if measured != base {
                return Err(format!(
                    "--coverage: {} measured kvcr files {}, not the base build the mutants are \
                     made from (files {}): measure each lane on the default build (no --kvcr)",
                    run.record.run_dir.display(),
                    short(measured),
                    short(base)
                ));
            }
        }
        Ok(())
    }

    /// What the batch records of its coverage runs, in the given order.
    pub fn records(&self) -> Vec<CoverageRunRecord> {
        self.runs.iter().map(|r| r.record.clone()).collect()
    }

    /// The plan of a mutant at `line` of `module`, its statement starting
    /// at `statement_line`: a lane is skipped only when it has a coverage
    /// run and that run saw the line not run; every other lane runs. A run
    /// with processes that saved no data (SIGKILLed by a case) may have
    /// missed what they ran, so its lane is skipped only when no coverage
    /// run given ran the line: seed 5's draw 30 was killed on `phase1` at a
    /// line only its SIGKILLed replacements ran there.
    pub fn plan(
        &self,
        lanes: &[SequenceLane],
        module: &str,
        line: u32,
        statement_line: Option<u32>,
    ) -> DrawPlan {
        let mut plan = DrawPlan {
            run: Vec::new(),
            skipped: Vec::new(),
        };
        let run_nowhere = self
            .runs
            .iter()
            .all(|r| matches!(r.seen(module, line, statement_line), LineSeen::NotRun(_)));
        for lane in lanes {
            let run = self.runs.iter().find(|r| r.record.lane == lane.target);
            match run.map(|r| (r, r.seen(module, line, statement_line))) {
                Some((run, LineSeen::NotRun(at)))
                    if run.record.processes_without_data.is_empty() || run_nowhere =>
                {
                    plan.skipped.push(SkippedLane {
                        lane: lane.target.to_string(),
                        module: module.to_string(),
                        line,
                        statement_line: (at != line).then_some(at),
                        run_dir: run.record.run_dir.clone(),
                    })
                }
                _ => plan.run.push(lane.clone()),
            }
        }
        plan
    }
}

/// Each mutant's plan, in the draw's order: every lane without `coverage`;
/// with it, [`LaneCoverage::plan`] of its site, a continuation line looked
/// up at its statement's first line (`statement_lines`, aligned with
/// `mutants`).
pub fn draw_plans(
    mutants: &[GeneratedMutant],
    lanes: &[SequenceLane],
    coverage: Option<&LaneCoverage>,
    statement_lines: &[Option<u32>],
) -> Vec<DrawPlan> {
    mutants
        .iter()
        .enumerate()
        .map(|(i, m)| match coverage {
            None => DrawPlan::all(lanes),
            Some(coverage) => coverage.plan(
                lanes,
                &m.site.module,
                m.site.start[0],
                statement_lines.get(i).copied().flatten(),
            ),
        })
        .collect()
}

/// The first line of the innermost statement holding each `(module, line)`
/// of `sites` (modules relative to `root`, the directory of the `kvcr`
/// package), by Python's `ast` run with `python`; `None` where no
/// statement holds the line.
pub fn statement_lines(
    python: &Path,
    root: &Path,
    sites: &[(String, u32)],
) -> Result<Vec<Option<u32>>, String> {
    let input = serde_json::to_vec(sites).map_err(|e| e.to_string())?;
    let mut child = Command::new(python)
        .arg("-c")
        .arg(STATEMENT_LINES)
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or("no stdin to the statement lookup")?;
    // The script reads its whole input before it writes: no deadlock.
    stdin
        .write_all(&input)
        .map_err(|e| format!("writing the sites to the statement lookup: {e}"))?;
    drop(stdin);
    let output = child
        .wait_with_output()
        .map_err(|e| format!("the statement lookup: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "the statement lookup ({} statement_lines.py) failed ({}): {}",
            python.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let lines: Vec<Option<u32>> = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("the statement lookup printed no lines: {e}"))?;
    if lines.len() != sites.len() {
        return Err(format!(
            "the statement lookup answered {} of {} sites",
            lines.len(),
            sites.len()
        ));
    }
    Ok(lines)
}

/// `coverage-plan.json`: the coverage runs and each draw's lanes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanFile {
    pub coverage_runs: Vec<CoverageRunRecord>,
    /// The sequence, in order.
    pub lanes: Vec<String>,
    pub draws: Vec<PlannedDraw>,
}

/// One draw's lanes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedDraw {
    pub name: String,
    pub module: String,
    pub line: u32,
    /// The lanes it runs, in order (none: survived without a stack).
    pub run: Vec<String>,
    pub skipped: Vec<SkippedLane>,
}

impl PlanFile {
    pub fn new(
        coverage: &LaneCoverage,
        lanes: &[SequenceLane],
        mutants: &[GeneratedMutant],
        plans: &[DrawPlan],
    ) -> PlanFile {
        PlanFile {
            coverage_runs: coverage.records(),
            lanes: lanes.iter().map(|l| l.target.to_string()).collect(),
            draws: mutants
                .iter()
                .zip(plans)
                .map(|(m, plan)| PlannedDraw {
                    name: m.name.clone(),
                    module: m.site.module.clone(),
                    line: m.site.start[0],
                    run: plan.targets().iter().map(|t| t.to_string()).collect(),
                    skipped: plan.skipped.clone(),
                })
                .collect(),
        }
    }

    /// One line per draw: the lanes it runs, and those it skips and why.
    pub fn lines(&self) -> Vec<String> {
        let total = self.draws.len();
        self.draws
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let head = format!(
                    "[{}/{total}] {} ({} line {})",
                    i + 1,
                    d.name,
                    d.module,
                    d.line
                );
                match (d.run.is_empty(), d.skipped.is_empty()) {
                    (true, _) => format!(
                        "{head}: runs no lane, survived without a stack: {}",
                        none_ran_words(&d.skipped)
                    ),
                    (false, true) => format!("{head}: {}", d.run.join(" → ")),
                    (false, false) => format!(
                        "{head}: {}; skipped by coverage: {}",
                        d.run.join(" → "),
                        skipped_words(&d.skipped)
                    ),
                }
            })
            .collect()
    }

    /// `12 of 40 draws skip a lane by coverage, 5 of them every lane`.
    pub fn summary(&self) -> String {
        let some = self.draws.iter().filter(|d| !d.skipped.is_empty()).count();
        let all = self.draws.iter().filter(|d| d.run.is_empty()).count();
        let skipped: usize = self.draws.iter().map(|d| d.skipped.len()).sum();
        format!(
            "coverage ({} runs: {}): {some} of {} draws skip a lane ({skipped} lane runs saved), \
             {all} of them every lane (survived without a stack)",
            self.coverage_runs.len(),
            self.coverage_runs
                .iter()
                .map(|r| r.lane.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            self.draws.len()
        )
    }

    pub fn write(&self, out: &Path) -> Result<PathBuf, String> {
        let path = out.join(PLAN_FILE);
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())? + "\n";
        std::fs::create_dir_all(out)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::evidence::kvcr_coverage::{self, tests::sample};
    use crate::mutants::generated::sequence;

    /// The package directory the fake runs measured.
    pub(crate) const PACKAGE: &str = "/env/site/kvcr";

    /// One file of a fake coverage.py report: module (`core.py`), executed
    /// and missing lines.
    pub(crate) type Lines<'a> = (&'a str, &'a [u32], &'a [u32]);

    /// A fake `--kvcr-coverage` run directory of `lane` under `root`: its
    /// `kvcr-coverage.json` (of build `digest`), coverage.py's report with
    /// `files`, and a results.json whose trials are the lane's, all passed
    /// (`failed`: that trial failed).
    pub(crate) fn fake_run(
        root: &Path,
        lane: &str,
        digest: &str,
        files: &[Lines],
        failed: Option<&str>,
    ) -> PathBuf {
        let dir = root.join(lane).join("20261207T101500Z-4242-abcd");
        std::fs::create_dir_all(dir.join(kvcr_coverage::DIR)).unwrap();
        // Every process saved its data ([`lose_data`] makes one that did not).
        let mut record = KvcrCoverage {
            kvcr_files_sha256: digest.into(),
            package_dir: PACKAGE.into(),
            ..sample()
        };
        record.processes.retain(|p| p.data_file.is_some());
        std::fs::write(
            dir.join(kvcr_coverage::FILE),
            serde_json::to_string(&record).unwrap(),
        )
        .unwrap();
        let mut report = serde_json::json!({
            "meta": {"format": 3, "version": "7.18.0", "branch_coverage": true},
            "files": {},
            "totals": {"num_statements": 0, "missing_lines": 0}
        });
        for (module, executed, missing) in files {
            report["files"][format!("{PACKAGE}/{module}")] = serde_json::json!({
                "executed_lines": executed,
                "missing_lines": missing,
                "excluded_lines": [],
                "summary": {"num_statements": executed.len() + missing.len(), "missing_lines": missing.len()}
            });
        }
        std::fs::write(
            dir.join(kvcr_coverage::DIR).join(TOOL_REPORT),
            report.to_string(),
        )
        .unwrap();
        let trials = Lane::of(lane)
            .and_then(|l| l.cases())
            .map(sequence::trials)
            .unwrap_or_default();
        let cases: Vec<serde_json::Value> = trials
            .iter()
            .map(|t| match failed == Some(t.as_str()) {
                true => {
                    serde_json::json!({"name": t, "outcome": "failed", "message": "claim: 1 ≠ 2"})
                }
                false => serde_json::json!({"name": t, "outcome": "passed"}),
            })
            .collect();
        let results = serde_json::json!({
            "schema_version": 1,
            "run": {
                "label": format!("{lane} cpu/aggregated/dense"),
                "started_at": "2026-12-07T10:15:00Z",
                "cases": cases,
                "kvcr": {"spec": "pypi:0.1.1", "version": "0.1.1", "files_sha256": digest}
            }
        });
        std::fs::write(dir.join("results.json"), results.to_string()).unwrap();
        dir
    }

    /// `run`'s record with a process that saved no data (SIGKILLed).
    fn lose_data(run: &Path) {
        let path = run.join(kvcr_coverage::FILE);
        let mut record: KvcrCoverage =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        record.processes = sample().processes;
        std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
    }

    fn digest() -> String {
        "5bcf".repeat(16)
    }

    fn lanes(targets: &[&str]) -> Vec<SequenceLane> {
        sequence::plan(targets).unwrap()
    }

    /// core.py: line 10 ran, 20 and 30 did not; 40 is a statement whose
    /// line 41 is a continuation line (in neither list).
    const CORE_PHASE1: Lines = ("core.py", &[1, 10, 40], &[20, 30]);

    #[test]
    fn a_lane_is_skipped_only_where_its_run_saw_the_line_not_run() {
        let tmp = tempfile::tempdir().unwrap();
        let p1 = fake_run(tmp.path(), "phase1", &digest(), &[CORE_PHASE1], None);
        // phase2 ran line 20 but not 30.
        let p2 = fake_run(
            tmp.path(),
            "phase2",
            &digest(),
            &[("core.py", &[1, 10, 20], &[30, 40])],
            None,
        );
        let seq = lanes(&["phase1", "phase2", "phase3"]);
        let coverage = LaneCoverage::load(&[p1.clone(), p2.clone()], &seq).unwrap();
        let runs = |plan: &DrawPlan| plan.targets();
        let skipped = |plan: &DrawPlan| -> Vec<String> {
            plan.skipped.iter().map(|s| s.lane.clone()).collect()
        };

        // Executed everywhere: every lane runs.
        let plan = coverage.plan(&seq, "kvcr/core.py", 10, None);
        assert_eq!(runs(&plan), ["phase1", "phase2", "phase3"]);
        assert!(plan.skipped.is_empty());

        // Missing on phase1 only: phase1 is skipped, phase3 (no coverage run) runs.
        let plan = coverage.plan(&seq, "kvcr/core.py", 20, None);
        assert_eq!(runs(&plan), ["phase2", "phase3"]);
        assert_eq!(skipped(&plan), ["phase1"]);
        assert_eq!(
            plan.skipped[0],
            SkippedLane {
                lane: "phase1".into(),
                module: "kvcr/core.py".into(),
                line: 20,
                statement_line: None,
                run_dir: std::fs::canonicalize(&p1).unwrap(),
            }
        );

        // Missing on both: only the lane without a coverage run is left.
        let plan = coverage.plan(&seq, "kvcr/core.py", 30, None);
        assert_eq!(runs(&plan), ["phase3"]);
        assert_eq!(skipped(&plan), ["phase1", "phase2"]);

        // Unknown (a line coverage.py does not report, a module it does
        // not list): runs everywhere.
        for (module, line) in [("kvcr/core.py", 41), ("kvcr/guard.py", 20)] {
            let plan = coverage.plan(&seq, module, line, None);
            assert_eq!(
                runs(&plan),
                ["phase1", "phase2", "phase3"],
                "{module}:{line}"
            );
        }

        // A continuation line is looked up at its statement's first line:
        // 40 ran on phase1, did not on phase2.
        let plan = coverage.plan(&seq, "kvcr/core.py", 41, Some(40));
        assert_eq!(runs(&plan), ["phase1", "phase3"]);
        assert_eq!(plan.skipped[0].lane, "phase2");
        assert_eq!(plan.skipped[0].statement_line, Some(40));
        assert_eq!(
            plan.skipped[0].site_words(),
            "kvcr/core.py line 41 (its statement's line 40)"
        );
        // ... and a statement line coverage.py does not know either: runs.
        let plan = coverage.plan(&seq, "kvcr/core.py", 42, Some(41));
        assert!(plan.skipped.is_empty());
        // The site's own line wins over its statement's.
        let plan = coverage.plan(&seq, "kvcr/core.py", 10, Some(30));
        assert!(plan.skipped.is_empty());
    }

    /// A run that lost a process's data may have missed the line: its lane
    /// is skipped only where no run given ran the line.
    #[test]
    fn a_run_that_lost_data_skips_only_a_line_no_run_ran() {
        let tmp = tempfile::tempdir().unwrap();
        let p1 = fake_run(tmp.path(), "phase1", &digest(), &[CORE_PHASE1], None);
        lose_data(&p1);
        let p2 = fake_run(
            tmp.path(),
            "phase2",
            &digest(),
            &[("core.py", &[1, 10, 20], &[30, 40])],
            None,
        );
        let seq = lanes(&["phase1", "phase2"]);
        let coverage = LaneCoverage::load(&[p1, p2], &seq).unwrap();
        // Line 20: not run on phase1, whose run lost data, but run on phase2.
        let plan = coverage.plan(&seq, "kvcr/core.py", 20, None);
        assert_eq!(plan.targets(), ["phase1", "phase2"]);
        // Line 30: no run ran it: both skipped.
        let plan = coverage.plan(&seq, "kvcr/core.py", 30, None);
        assert!(plan.run.is_empty(), "{:?}", plan.targets());
    }

    #[test]
    fn a_line_no_lane_ran_skips_every_lane_and_says_where() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = ["phase1", "phase2"]
            .iter()
            .map(|lane| fake_run(tmp.path(), lane, &digest(), &[CORE_PHASE1], None))
            .collect();
        let seq = lanes(&["phase1", "phase2"]);
        let coverage = LaneCoverage::load(&dirs, &seq).unwrap();
        let plan = coverage.plan(&seq, "kvcr/core.py", 30, None);
        assert!(plan.run.is_empty(), "no lane runs");
        assert_eq!(
            none_ran_words(&plan.skipped),
            "kvcr/core.py line 30 ran in none of the 2 lanes' coverage runs \
             (phase1 20261207T101500Z-4242-abcd, phase2 20261207T101500Z-4242-abcd)"
        );
        assert_eq!(
            skipped_words(&plan.skipped),
            "phase1, phase2 (kvcr/core.py line 30 not run in their coverage runs)"
        );
        assert_eq!(
            skipped_words(&plan.skipped[..1]),
            "phase1 (kvcr/core.py line 30 not run in its coverage run)"
        );
    }

    #[test]
    fn the_recorded_runs_name_lane_directory_build_date_and_lost_data() {
        let tmp = tempfile::tempdir().unwrap();
        let p1 = fake_run(tmp.path(), "phase1", &digest(), &[CORE_PHASE1], None);
        lose_data(&p1);
        // Given as the lane's `latest` link: the run it names is recorded.
        let latest = p1.parent().unwrap().join("latest");
        std::os::unix::fs::symlink(&p1, &latest).unwrap();
        let coverage = LaneCoverage::load(&[latest], &lanes(&["phase1"])).unwrap();
        assert_eq!(
            coverage.records(),
            [CoverageRunRecord {
                lane: "phase1".into(),
                run_dir: std::fs::canonicalize(&p1).unwrap(),
                kvcr_files_sha256: digest(),
                started_at: Some("2026-12-07T10:15:00Z".into()),
                processes_without_data: vec!["worker-A (pid 11)".into()],
            }]
        );
        let json = serde_json::to_value(&coverage.records()[0]).unwrap();
        assert_eq!(json["lane"], "phase1");
        assert_eq!(json["started_at"], "2026-12-07T10:15:00Z");
    }

    #[test]
    fn runs_without_coverage_of_one_lane_twice_or_outside_the_sequence_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let seq = lanes(&["phase1", "phase2"]);
        let p1 = fake_run(tmp.path(), "phase1", &digest(), &[CORE_PHASE1], None);
        let err = |dirs: &[PathBuf]| LaneCoverage::load(dirs, &seq).unwrap_err();

        // No kvcr-coverage.json.
        let bare = tmp.path().join("bare");
        std::fs::create_dir_all(&bare).unwrap();
        let e = err(&[bare]);
        assert!(e.contains("was it run with --kvcr-coverage?"), "{e}");
        let e = err(&[tmp.path().join("absent")]);
        assert!(e.contains("not a run directory"), "{e}");

        // A run whose coverage could not be combined.
        let empty = fake_run(
            &tmp.path().join("e"),
            "phase1",
            &digest(),
            &[CORE_PHASE1],
            None,
        );
        let record = KvcrCoverage {
            table: None,
            error: Some("no KVCR process saved coverage data".into()),
            ..sample()
        };
        std::fs::write(
            empty.join(kvcr_coverage::FILE),
            serde_json::to_string(&record).unwrap(),
        )
        .unwrap();
        let e = err(&[empty]);
        assert!(
            e.ends_with("measured no coverage: no KVCR process saved coverage data"),
            "{e}"
        );

        // A report of another package's files.
        let other = fake_run(&tmp.path().join("o"), "phase1", &digest(), &[], None);
        let e = err(&[other]);
        assert!(
            e.contains("lists no file of the kvcr package /env/site/kvcr"),
            "{e}"
        );

        // Two runs of one lane.
        let again = fake_run(
            &tmp.path().join("again"),
            "phase1",
            &digest(),
            &[CORE_PHASE1],
            None,
        );
        let e = err(&[p1.clone(), again]);
        assert!(
            e.contains("are both runs of phase1: give one run per lane"),
            "{e}"
        );

        // A lane the sequence does not run.
        let p3 = fake_run(tmp.path(), "phase3", &digest(), &[CORE_PHASE1], None);
        let e = err(&[p1.clone(), p3]);
        assert!(
            e.contains("is a run of phase3, which is not a lane of the sequence (phase1, phase2)")
                && e.contains("add phase3 to --lanes"),
            "{e}"
        );

        // A label that names no lane.
        let stray = fake_run(
            &tmp.path().join("s"),
            "phase1",
            &digest(),
            &[CORE_PHASE1],
            None,
        );
        let results = std::fs::read_to_string(stray.join("results.json")).unwrap();
        std::fs::write(
            stray.join("results.json"),
            results.replace("phase1 cpu", "bench cpu"),
        )
        .unwrap();
        let e = err(&[stray]);
        assert!(
            e.contains("its label \"bench cpu/aggregated/dense\" names no lane"),
            "{e}"
        );
    }

    #[test]
    fn a_coverage_run_must_have_passed_every_trial_a_mutant_runs_there() {
        let tmp = tempfile::tempdir().unwrap();
        let seq = lanes(&["phase1"]);
        let failed = fake_run(
            tmp.path(),
            "phase1",
            &digest(),
            &[CORE_PHASE1],
            Some("TC-03::hinted_peer_transfer"),
        );
        let e = LaneCoverage::load(std::slice::from_ref(&failed), &seq).unwrap_err();
        assert!(
            e.contains("did not run and pass every trial")
                && e.contains("TC-03::hinted_peer_transfer failed: claim: 1 ≠ 2")
                && e.contains("cargo test --test phase1 -- --kvcr-coverage"),
            "{e}"
        );
        // A run of fewer trials (`--cases`) misses one.
        let results = std::fs::read_to_string(failed.join("results.json")).unwrap();
        let mut doc: serde_json::Value = serde_json::from_str(&results).unwrap();
        doc["run"]["cases"] =
            serde_json::json!([{"name": "TC-01::generation_correctness", "outcome": "passed"}]);
        std::fs::write(failed.join("results.json"), doc.to_string()).unwrap();
        let e = LaneCoverage::load(&[failed], &seq).unwrap_err();
        assert!(e.contains("is not in the run's results"), "{e}");
    }

    #[test]
    fn coverage_of_another_build_than_the_base_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let p1 = fake_run(tmp.path(), "phase1", &digest(), &[CORE_PHASE1], None);
        let coverage = LaneCoverage::load(&[p1], &lanes(&["phase1"])).unwrap();
        assert!(coverage.check_build(&digest()).is_ok());
        let e = coverage.check_build(&"ab".repeat(32)).unwrap_err();
        assert!(
            e.contains("measured kvcr files 5bcf5bcf5bcf, not the base build")
                && e.contains("(files abababababab)"),
            "{e}"
        );
    }

    /// Python's parser maps a continuation line to its statement's first
    /// line, as coverage.py reports it; a line of no statement to none.
    #[test]
    fn a_continuation_line_is_mapped_to_its_statements_first_line() {
        let tmp = tempfile::tempdir().unwrap();
        let source = "\
import os  # 1

def f(a, b):  # 3
    if (a <  # 4
            b):  # 5
        return g(a,  # 6
                 b + 1)  # 7
    # a comment  8
    try:  # 9
        x = [i for i in  # 10
             range(3)]  # 11
    except (ValueError,  # 12
            KeyError):  # 13
        pass  # 14
    return x  # 15

@decorator(  # 17
    1)  # 18
def h():  # 19
    pass  # 20
";
        std::fs::create_dir_all(tmp.path().join("kvcr")).unwrap();
        std::fs::write(tmp.path().join("kvcr/m.py"), source).unwrap();
        let sites: Vec<(String, u32)> = [1, 2, 4, 5, 6, 7, 8, 10, 11, 13, 15, 17, 18, 19, 20, 99]
            .iter()
            .map(|&l| ("kvcr/m.py".to_string(), l))
            .collect();
        let got = statement_lines(Path::new("python3"), tmp.path(), &sites).unwrap();
        let want = [
            Some(1),  // a statement's own line
            None,     // blank
            Some(4),  // the `if`
            Some(4),  // its condition's second line
            Some(6),  // return
            Some(6),  // its call's second line
            Some(3),  // a comment between statements: the `def` holds it
            Some(10), // a comprehension's first line
            Some(10), // and its second
            Some(9),  // an `except` clause: inside the `try`
            Some(15), // a statement
            None,     // a top-level definition's decorator
            None,     // and its second line
            Some(19), // the `def`
            Some(20), // its body
            None,     // past the end
        ];
        let pairs: Vec<(u32, Option<u32>)> = sites.iter().map(|s| s.1).zip(got).collect();
        let expected: Vec<(u32, Option<u32>)> = sites.iter().map(|s| s.1).zip(want).collect();
        assert_eq!(pairs, expected);

        std::fs::write(tmp.path().join("kvcr/bad.py"), "def (:\n").unwrap();
        let err = statement_lines(
            Path::new("python3"),
            tmp.path(),
            &[("kvcr/bad.py".into(), 1)],
        )
        .unwrap_err();
        assert!(err.contains("SyntaxError"), "{err}");
    }

    fn mutant(module: &str, line: u32) -> GeneratedMutant {
        let site = crate::mutants::generated::sample::Site {
            module: format!("kvcr/{module}.py"),
            operator: "core/AddNot".into(),
            occurrence: line,
            start: [line, 4],
            end: [line, 5],
            definition: None,
        };
        GeneratedMutant {
            name: site.name(),
            site,
            draw: 0,
            diff: PathBuf::from("/out/diffs/m.diff"),
        }
    }

    #[test]
    fn each_draw_is_planned_and_the_plan_file_lists_it() {
        let tmp = tempfile::tempdir().unwrap();
        let seq = lanes(&["phase1", "phase2"]);
        let dirs: Vec<PathBuf> = ["phase1", "phase2"]
            .iter()
            .map(|lane| fake_run(tmp.path(), lane, &digest(), &[CORE_PHASE1], None))
            .collect();
        let coverage = LaneCoverage::load(&dirs[..1], &seq).unwrap();
        let both = LaneCoverage::load(&dirs, &seq).unwrap();
        let mutants = [mutant("core", 10), mutant("core", 31), mutant("core", 30)];
        // Without coverage: every lane.
        for plan in draw_plans(&mutants, &seq, None, &[]) {
            assert_eq!(plan, DrawPlan::all(&seq));
        }
        // 31 is a continuation of 30.
        let statements = [Some(10), Some(30), Some(30)];
        let plans = draw_plans(&mutants, &seq, Some(&coverage), &statements);
        let targets: Vec<Vec<&str>> = plans.iter().map(DrawPlan::targets).collect();
        assert_eq!(
            targets,
            [vec!["phase1", "phase2"], vec!["phase2"], vec!["phase2"]]
        );
        let plans = draw_plans(&mutants, &seq, Some(&both), &statements);
        let file = PlanFile::new(&both, &seq, &mutants, &plans);
        assert_eq!(file.lanes, ["phase1", "phase2"]);
        assert_eq!(file.draws[2].run, Vec::<String>::new());
        let lines = file.lines();
        assert_eq!(
            lines[0],
            "[1/3] gen-core-AddNot-10-L10 (kvcr/core.py line 10): phase1 → phase2"
        );
        assert!(
            lines[1].starts_with(
                "[2/3] gen-core-AddNot-31-L31 (kvcr/core.py line 31): runs no lane, survived \
                 without a stack: kvcr/core.py line 31 (its statement's line 30) ran in none of \
                 the 2 lanes' coverage runs"
            ),
            "{}",
            lines[1]
        );
        assert_eq!(
            file.summary(),
            "coverage (2 runs: phase1, phase2): 2 of 3 draws skip a lane (4 lane runs saved), \
             2 of them every lane (survived without a stack)"
        );
        let path = file.write(tmp.path()).unwrap();
        let back: PlanFile = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(back, file);

        // A partial skip is listed with the lanes it runs.
        let plans = draw_plans(&mutants, &seq, Some(&coverage), &statements);
        let file = PlanFile::new(&coverage, &seq, &mutants, &plans);
        assert!(
            file.lines()[2].ends_with(
                "phase2; skipped by coverage: phase1 (kvcr/core.py line 30 not run in its coverage run)"
            ),
            "{}",
            file.lines()[2]
        );
    }
}
