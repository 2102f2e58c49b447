//! A gate run: each lane a child run of its test target with the build
//! under test, one after the other, then `compare` (its public entry
//! point, [`crate::compare::run_compare`]), into one directory:
//!
//! ```text
//! <out>/lanes/<target>/...   each lane's run directory and child.log
//! <out>/compare/             compare's rounds, compare.json, junit.xml, compare.html
//! <out>/gate.json, junit.xml, gate.html
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::args::GateArgs;
use super::outcome::{CompareOutcome, GateReport, LaneEvidence, LaneResult, LaneStatus};
use crate::compare::{self, CompareDriveArgs, Comparison, Written};
use crate::config::{self, KvcrSpec};
use crate::drive::{self, Phase1Child, ReadRun};
use crate::proc::live_runs::{Registration, Registry, RunInfo, RunKind, SESSION_ENV};

/// One lane's child run.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneRun {
    /// Its test target.
    pub target: String,
    /// Harness flags: the user's, then `--kvcr SPEC`.
    pub flags: Vec<String>,
    /// Its `--run-dir` base (`<out>/lanes/<target>`).
    pub run_base: PathBuf,
}

/// The lanes of `args` in running order, each with the build under test
/// and a run directory of its own under `out`.
pub fn lane_runs(args: &GateArgs, out: &Path) -> Vec<LaneRun> {
    args.lanes
        .iter()
        .map(|target| {
            let mut flags = args.harness.clone();
            flags.push("--kvcr".into());
            flags.push(args.kvcr.to_string());
            LaneRun {
                target: target.clone(),
                flags,
                run_base: out.join("lanes").join(target),
            }
        })
        .collect()
}

/// What a gate run does, one step at a time: a lane, then the comparison.
/// [`LocalSteps`] runs them for real; tests give stand-ins.
pub trait Steps {
    /// Runs one lane to its end.
    fn lane(&mut self, run: &LaneRun) -> LaneResult;
    /// Runs the comparison into `out`.
    fn compare(
        &mut self,
        args: &CompareDriveArgs,
        out: &Path,
    ) -> Result<(Comparison, Written), String>;
}

/// Runs every lane, then the comparison (unless a lane failed and
/// `--keep-going` was not given), and gathers the report. Progress lines
/// go to the console as each step starts and ends.
pub fn run_gate(steps: &mut impl Steps, args: &GateArgs, out: &Path) -> GateReport {
    let runs = lane_runs(args, out);
    let total = runs.len();
    let mut lanes = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        println!(
            "[gate lane {}/{total}] {} with {}",
            i + 1,
            run.target,
            args.kvcr
        );
        let result = steps.lane(run);
        println!(
            "[gate lane {}/{total}] {} {:?} in {:.0} s: {}{}",
            i + 1,
            run.target,
            result.status,
            result.wall_s,
            result.counts(),
            result
                .problem
                .as_deref()
                .map(|p| format!("; {p}"))
                .unwrap_or_default()
        );
        lanes.push(result);
    }
    let failed: Vec<&str> = lanes
        .iter()
        .filter(|l| l.status == LaneStatus::Failed)
        .map(|l| l.target.as_str())
        .collect();
    let compare = if !failed.is_empty() && !args.keep_going {
        CompareOutcome::Skipped {
            why: format!(
                "lane(s) {} failed, which decides the gate (--keep-going compares anyway)",
                failed.join(", ")
            ),
        }
    } else {
        println!(
            "[gate compare] {} against {}: {} rounds of {} on {}",
            args.kvcr,
            args.base,
            args.compare.rounds,
            args.compare.trials.join(" "),
            args.compare.target
        );
        match steps.compare(&args.compare, &out.join("compare")) {
            Ok((comparison, written)) => {
                print!("{}", compare::render_summary(&comparison));
                CompareOutcome::Compared {
                    comparison: Box::new(comparison),
                    written,
                }
            }
            Err(why) => CompareOutcome::NotCompared { why },
        }
    };
    GateReport {
        kvcr: args.kvcr.to_string(),
        base: args.base.to_string(),
        lanes,
        compare,
    }
}

/// The real steps: every lane's test binary built once up front, each lane
/// a [`Phase1Child`], the comparison [`compare::run_compare`].
pub struct LocalSteps {
    repo_root: PathBuf,
    binaries: Vec<(String, PathBuf)>,
}

impl LocalSteps {
    /// Before any stack: checks that both builds resolve over the CPU
    /// stack's Python env (a diff that does not apply, a wheel that does not
    /// install or a build that does not import fails here, in seconds), and
    /// builds every lane's test binary and the comparison's.
    pub fn prepare(repo_root: &Path, args: &GateArgs) -> Result<Self, String> {
        resolve_builds(repo_root, &[&args.kvcr, &args.base])?;
        let mut binaries = Vec::new();
        let mut targets: Vec<&str> = args.lanes.iter().map(String::as_str).collect();
        if !targets.contains(&args.compare.target.as_str()) {
            targets.push(&args.compare.target);
        }
        for target in targets {
            let binary = drive::test_binary(repo_root, target).map_err(|e| e.to_string())?;
            binaries.push((target.to_string(), binary));
        }
        Ok(LocalSteps {
            repo_root: repo_root.to_path_buf(),
            binaries,
        })
    }
}

/// Installs (or finds cached) the KVCR env of each build and imports it.
fn resolve_builds(repo_root: &Path, builds: &[&KvcrSpec]) -> Result<(), String> {
    let user = std::env::var_os("PHASE1_PYTHON").map(PathBuf::from);
    let env = crate::pyenv::ensure(repo_root, user.as_deref())
        .map_err(|e| format!("the CPU stack's Python env: {e}"))?;
    for spec in builds {
        crate::pyenv::kvcr::resolve(repo_root, &env.python, spec)
            .map_err(|e| format!("the build {spec} does not resolve: {e}"))?;
    }
    Ok(())
}

impl Steps for LocalSteps {
    fn lane(&mut self, run: &LaneRun) -> LaneResult {
        let Some((_, binary)) = self.binaries.iter().find(|(t, _)| *t == run.target) else {
            return LaneResult::not_run(&run.target, "its test binary was not built");
        };
        run_lane_child(binary, &self.repo_root, run)
    }

    fn compare(
        &mut self,
        args: &CompareDriveArgs,
        out: &Path,
    ) -> Result<(Comparison, Written), String> {
        compare::run_compare(&self.repo_root, args, out)
    }
}

/// Runs one lane's child (every trial of its target) and judges what it
/// left. A run directory that was there before (a rerun into the same
/// `--out`) is not this run's.
pub fn run_lane_child(binary: &Path, repo_root: &Path, run: &LaneRun) -> LaneResult {
    let child = Phase1Child {
        binary: binary.to_path_buf(),
        repo_root: repo_root.to_path_buf(),
        flags: run.flags.clone(),
        filters: Vec::new(),
        exact: false,
        run_base: run.run_base.clone(),
    };
    let log = run.run_base.join("child.log");
    let started = Instant::now();
    let before = drive::find_run_root(&run.run_base).ok().flatten();
    let exit = match child.run(&log) {
        Ok(exit) => exit,
        Err(e) => return LaneResult::not_run(&run.target, e.to_string()),
    };
    let wall_s = started.elapsed().as_secs_f64();
    let root = drive::find_run_root(&run.run_base)
        .ok()
        .flatten()
        .filter(|root| before.as_ref() != Some(root));
    let read = root.as_deref().map(ReadRun::from_root);
    let evidence = match read {
        None => LaneEvidence {
            exit_code: exit.code,
            run_dir: None,
            trials: Vec::new(),
            setup_error: None,
        },
        Some(Err(e)) => return LaneResult::not_run(&run.target, e.to_string()),
        Some(Ok(read)) => LaneEvidence {
            exit_code: exit.code,
            run_dir: Some(read.root),
            trials: read.trials,
            setup_error: read.setup_error,
        },
    };
    LaneResult::judge(&run.target, evidence, Some(log), wall_s)
}

/// The machine held for the whole gate run, with `--exclusive`: the gate
/// registers as a live-run session once every other run has ended, and its
/// lanes and rounds (children that inherit the session) run inside it
/// without waiting for it; a run from outside is warned. Without
/// `--exclusive` nothing is held here: each child registers itself, and
/// they run one at a time. Inside `live-runs exclusive` the session is
/// already held.
pub fn hold_machine(
    repo_root: &Path,
    harness: &[String],
    out: &Path,
) -> Result<Option<Registration>, String> {
    let argv = std::iter::once("kvcr-e2e gate".to_string()).chain(harness.iter().cloned());
    let (args, _) = config::split_args(argv).map_err(|e| e.to_string())?;
    let env = config::Env::from_process().map_err(|e| e.to_string())?;
    let settings = config::resolve(&args, &env)
        .map_err(|e| e.to_string())?
        .settings;
    if !settings.exclusive || std::env::var_os(SESSION_ENV).is_some_and(|s| !s.is_empty()) {
        return Ok(None);
    }
    let registry = Registry::open(&crate::suite::registry_dir(&settings, repo_root))
        .map_err(|e| e.to_string())?;
    let me = RunInfo::new("gate", out, RunKind::Session, true);
    let timeout = settings.exclusive_timeout;
    let session = registry
        .register_exclusive(&me, timeout, |waiting| {
            eprintln!(
                "[kvcr-e2e] gate: waiting (up to {} s) for {} other live run(s) to end",
                timeout.as_secs(),
                waiting.len()
            );
        })
        .map_err(|e| e.to_string())?;
    // The children inherit it: they are this session's runs.
    std::env::set_var(SESSION_ENV, &session.entry.id);
    Ok(Some(session))
}
