//! What a gate run concluded, as data: each lane's result, the comparison's,
//! and the one exit code; the writers over it (the console summary,
//! `gate.json`, JUnit, `gate.html`) are in [`super::report`].
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | pass: every lane green, the comparison judged every figure and found no regression |
//! | 1 | a finding against the build: a lane failed, or the comparison found a regression or a missing figure |
//! | 2 | nothing compared: usage, a build that does not resolve, or a comparison that could not run |
//! | 3 | no verdict: a lane that ran no trial or left no run, or a comparison without a verdict |
//!
//! As in `compare` ([`crate::compare::Gate`]), a finding outranks
//! everything else: a run with a failed lane exits 1 whatever the rest.

use std::path::PathBuf;

use serde::Serialize;

use crate::compare::{Comparison, Gate, Verdict, Written, EXIT_NOT_COMPARED};
use crate::drive::{TrialOutcome, TrialRecord};

/// How one lane's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneStatus {
    /// It exited 0 with its results, and ran at least one trial.
    Passed,
    /// It exited non-zero with a run directory: a trial failed, or its
    /// stack did not start (`setup-error.txt`).
    Failed,
    /// No evidence either way: it left no run directory of its own, could
    /// not be started, or every trial was ignored.
    NoVerdict,
}

/// One lane's run with the build under test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneResult {
    /// Its test target.
    pub target: String,
    pub status: LaneStatus,
    /// The child's exit code; `None` when a signal ended it or it never ran.
    pub exit_code: Option<i32>,
    /// Its run directory (results.json, report.html).
    pub run_dir: Option<PathBuf>,
    /// Its output.
    pub log: Option<PathBuf>,
    /// Its wall time.
    pub wall_s: f64,
    /// Its trials as results.json records them.
    pub trials: Vec<TrialRecord>,
    /// Why it failed or has no verdict, in one line.
    pub problem: Option<String>,
}

/// What a lane's child left, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneEvidence {
    pub exit_code: Option<i32>,
    pub run_dir: Option<PathBuf>,
    pub trials: Vec<TrialRecord>,
    /// Its `setup-error.txt`.
    pub setup_error: Option<String>,
}

impl LaneResult {
    /// Judges a lane from what its child left: green only with an exit 0,
    /// a run directory of its own and at least one trial that ran.
    pub fn judge(target: &str, evidence: LaneEvidence, log: Option<PathBuf>, wall_s: f64) -> Self {
        let exited = match evidence.exit_code {
            Some(code) => format!("exited {code}"),
            None => "was ended by a signal".to_string(),
        };
        let ran = evidence
            .trials
            .iter()
            .filter(|t| !matches!(t.outcome, TrialOutcome::Ignored { .. }))
            .count();
        let (status, problem) = match (&evidence.run_dir, evidence.exit_code) {
            (None, _) => (
                LaneStatus::NoVerdict,
                Some(format!(
                    "its run {exited} and left no run directory of its own"
                )),
            ),
            (Some(_), Some(0)) if ran == 0 => (
                LaneStatus::NoVerdict,
                Some(match evidence.trials.first() {
                    Some(TrialRecord {
                        outcome: TrialOutcome::Ignored { reason },
                        ..
                    }) => format!("every trial was ignored (the first: {reason})"),
                    _ => "it ran no trial".to_string(),
                }),
            ),
            (Some(_), Some(0)) => (LaneStatus::Passed, None),
            (Some(_), _) => (LaneStatus::Failed, Some(failure_words(&evidence, &exited))),
        };
        LaneResult {
            target: target.to_string(),
            status,
            exit_code: evidence.exit_code,
            run_dir: evidence.run_dir,
            log,
            wall_s,
            trials: evidence.trials,
            problem,
        }
    }

    /// A lane that could not be run at all.
    pub fn not_run(target: &str, why: impl Into<String>) -> Self {
        LaneResult {
            target: target.to_string(),
            status: LaneStatus::NoVerdict,
            exit_code: None,
            run_dir: None,
            log: None,
            wall_s: 0.0,
            trials: Vec::new(),
            problem: Some(why.into()),
        }
    }

    /// `11 passed, 2 expected failures, 1 failed, 0 ignored`
    pub fn counts(&self) -> String {
        let n = |f: fn(&TrialOutcome) -> bool| self.trials.iter().filter(|t| f(&t.outcome)).count();
        format!(
            "{} passed, {} expected failures, {} failed, {} ignored",
            n(|o| matches!(o, TrialOutcome::Passed)),
            n(|o| matches!(o, TrialOutcome::ExpectedFailure { .. })),
            n(|o| matches!(o, TrialOutcome::Failed { .. })),
            n(|o| matches!(o, TrialOutcome::Ignored { .. })),
        )
    }
}

/// The failed trials (each `name: first line`), or the setup error.
fn failure_words(evidence: &LaneEvidence, exited: &str) -> String {
    let first_line = |s: &str| s.lines().next().unwrap_or("").trim().to_string();
    if let Some(setup) = &evidence.setup_error {
        return format!("its stack did not start: {}", first_line(setup));
    }
    let failed: Vec<String> = evidence
        .trials
        .iter()
        .filter_map(|t| match &t.outcome {
            TrialOutcome::Failed { message } => {
                Some(format!("{}: {}", t.name, first_line(message)))
            }
            _ => None,
        })
        .collect();
    match failed.len() {
        0 => format!("its run {exited} with no failed trial recorded (see its log)"),
        _ => failed.join("; "),
    }
}

/// How the comparison ended.
#[derive(Debug, Clone)]
pub enum CompareOutcome {
    /// It ran and concluded.
    Compared {
        comparison: Box<Comparison>,
        written: Written,
    },
    /// It could not run or read its rounds (compare's exit 2).
    NotCompared { why: String },
    /// Not run: a lane failed and `--keep-going` was not given.
    Skipped { why: String },
}

impl CompareOutcome {
    /// Its figures with a finding: `id (+12.3 %)`.
    pub fn findings(&self) -> Vec<String> {
        let CompareOutcome::Compared { comparison, .. } = self else {
            return Vec::new();
        };
        comparison
            .figures
            .iter()
            .filter(|f| f.verdict.fails())
            .map(|f| {
                let change = f
                    .difference
                    .as_ref()
                    .and_then(|d| d.relative)
                    .map(|r| format!(" ({:+.1} %)", r * 100.0))
                    .unwrap_or_default();
                match f.verdict {
                    Verdict::Missing => format!("{} missing from one build", f.spec.id),
                    _ => format!("{}{change}", f.spec.id),
                }
            })
            .collect()
    }

    /// Compare's own conclusion, when it ran.
    pub fn gate(&self) -> Option<Gate> {
        match self {
            CompareOutcome::Compared { comparison, .. } => Some(comparison.gate()),
            _ => None,
        }
    }
}

/// A gate run's conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    Pass,
    Fail,
    NotCompared,
    NoVerdict,
}

impl GateVerdict {
    /// The process exit code (0, 1, 2, 3; the module's table).
    pub fn exit_code(self) -> u8 {
        match self {
            GateVerdict::Pass => Gate::Pass.exit_code(),
            GateVerdict::Fail => Gate::Regression.exit_code(),
            GateVerdict::NotCompared => EXIT_NOT_COMPARED,
            GateVerdict::NoVerdict => Gate::NoVerdict.exit_code(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GateVerdict::Pass => "PASS",
            GateVerdict::Fail => "FAIL",
            GateVerdict::NotCompared => "NOT COMPARED",
            GateVerdict::NoVerdict => "NO VERDICT",
        }
    }
}

/// Everything a gate run did.
#[derive(Debug, Clone)]
pub struct GateReport {
    /// The build under test and its base, as specs.
    pub kvcr: String,
    pub base: String,
    pub lanes: Vec<LaneResult>,
    pub compare: CompareOutcome,
}

impl GateReport {
    /// The conclusion: a finding (a failed lane, a regression) first, then
    /// nothing compared, then no verdict.
    pub fn verdict(&self) -> GateVerdict {
        let lane_failed = self.lanes.iter().any(|l| l.status == LaneStatus::Failed);
        if lane_failed || self.compare.gate() == Some(Gate::Regression) {
            return GateVerdict::Fail;
        }
        if matches!(self.compare, CompareOutcome::NotCompared { .. }) {
            return GateVerdict::NotCompared;
        }
        let lane_without = self.lanes.iter().any(|l| l.status == LaneStatus::NoVerdict);
        if lane_without || self.compare.gate() != Some(Gate::Pass) {
            return GateVerdict::NoVerdict;
        }
        GateVerdict::Pass
    }

    /// Why the run is not a pass, one line each (empty on a pass).
    pub fn reasons(&self) -> Vec<String> {
        let mut why: Vec<String> = self
            .lanes
            .iter()
            .filter(|l| l.status != LaneStatus::Passed)
            .map(|l| {
                let what = match l.status {
                    LaneStatus::Failed => "failed",
                    _ => "has no verdict",
                };
                format!(
                    "lane {} {what}: {}",
                    l.target,
                    l.problem.as_deref().unwrap_or("")
                )
            })
            .collect();
        match &self.compare {
            CompareOutcome::Compared { comparison, .. } => {
                why.extend(
                    self.compare
                        .findings()
                        .into_iter()
                        .map(|f| format!("compare: regression {f}")),
                );
                if comparison.gate() == Gate::NoVerdict {
                    why.extend(
                        comparison
                            .without_verdict()
                            .into_iter()
                            .map(|w| format!("compare: no verdict: {w}")),
                    );
                }
            }
            CompareOutcome::NotCompared { why: w } => {
                why.push(format!("compare: not compared: {w}"))
            }
            CompareOutcome::Skipped { why: w } => why.push(format!("compare: not run: {w}")),
        }
        why
    }
}
