//! The batch's control: the unmutated base build, run first on every target
//! the batch's mutants run, with every trial they run. A kill means something
//! only when the same trials pass without the mutant, in the same batch, on
//! the same harness build; a batch whose control is not green is not scored.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::classify::{classify_run, MutantResult};
use super::plan::{MutantRun, TC01};
use super::report::ChildEvidence;
use crate::config::KvcrSpec;
use crate::drive::{KvcrSeen, Phase1Child, ReadRun, TrialOutcome};

/// What one control runs, before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPlan {
    pub target: &'static str,
    /// Every trial a mutant of this target runs, TC-01 first where a mutant
    /// runs it, each once.
    pub trials: Vec<String>,
    /// The mutants' flags with the base build in place of each diff.
    pub flags: Vec<String>,
}

/// How the control ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ControlOutcome {
    /// Every trial ran and passed on the base build.
    Green,
    /// A trial failed on the unmutated build: the trials do not tell a
    /// mutant from the base build.
    Red { failed: Vec<(String, String)> },
    /// No verdict: the stack did not start, a trial did not run, or the run
    /// did not report the base build.
    Broken { why: String },
}

/// One control's run and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRun {
    pub target: String,
    pub trials: Vec<String>,
    pub outcome: ControlOutcome,
    #[serde(flatten)]
    pub child: ChildEvidence,
    /// The KVCR build the run reported: the batch's base build.
    pub kvcr: Option<KvcrSeen>,
}

impl ControlRun {
    pub fn is_green(&self) -> bool {
        self.outcome == ControlOutcome::Green
    }

    /// `phase1 green` / `phase1 RED: TC-03::…: message` / `phase1 broken: why`.
    pub fn words(&self) -> String {
        match &self.outcome {
            ControlOutcome::Green => {
                let n = self.trials.len();
                let plural = if n == 1 { "" } else { "s" };
                format!("{} green ({n} trial{plural})", self.target)
            }
            ControlOutcome::Red { failed } => format!(
                "{} RED: {}",
                self.target,
                failed
                    .iter()
                    .map(|(t, m)| format!("{t}: {m}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            ControlOutcome::Broken { why } => format!("{} broken: {why}", self.target),
        }
    }
}

/// The base build every mutant's diff is applied to (the driver refuses a
/// user `--kvcr`, so it is always the default).
pub fn base_spec() -> KvcrSpec {
    KvcrSpec::default()
}

/// One control per target of `runs`, in the order the targets first appear.
pub fn plans(runs: &[MutantRun]) -> Vec<ControlPlan> {
    let mut plans: Vec<ControlPlan> = Vec::new();
    for run in runs {
        let flags = without_kvcr(&run.flags);
        match plans.iter_mut().find(|p| p.target == run.target) {
            Some(plan) => {
                for trial in &run.trials {
                    if !plan.trials.contains(trial) {
                        plan.trials.push(trial.clone());
                    }
                }
            }
            None => plans.push(ControlPlan {
                target: run.target,
                trials: run.trials.clone(),
                flags,
            }),
        }
    }
    for plan in &mut plans {
        if let Some(i) = plan.trials.iter().position(|t| t == TC01) {
            let tc01 = plan.trials.remove(i);
            plan.trials.insert(0, tc01);
        }
    }
    plans
}

/// `flags` with its `--kvcr VALUE` replaced by the base build.
pub fn without_kvcr(flags: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        if flag == "--kvcr" {
            it.next();
        } else if !flag.starts_with("--kvcr=") {
            out.push(flag.clone());
        }
    }
    out.push("--kvcr".into());
    out.push(base_spec().to_string());
    out
}

/// Runs `child`, the control `plan` describes, and reads it back.
pub fn run(plan: &ControlPlan, child: &Phase1Child) -> Result<ControlRun, String> {
    let log = child.run_base.join("child.log");
    let exit = child.run(&log).map_err(|e| e.to_string())?;
    let read = ReadRun::from_base(&child.run_base);
    let outcome = judge(&plan.trials, read.as_ref().map_err(|e| e.to_string()));
    let read = read.ok();
    Ok(ControlRun {
        target: plan.target.to_string(),
        trials: plan.trials.clone(),
        outcome,
        child: ChildEvidence::new(child.command_line(), read.as_ref(), log, &exit),
        kvcr: read.and_then(|r| r.kvcr),
    })
}

/// The control's outcome from its run: green only when every trial passed
/// and the run reported the base build.
pub fn judge(trials: &[String], run: Result<&ReadRun, String>) -> ControlOutcome {
    let seen = run.as_ref().ok().and_then(|r| r.kvcr.clone());
    let failed: Vec<(String, String)> = run
        .as_ref()
        .map(|r| {
            r.trials
                .iter()
                .filter(|t| trials.contains(&t.name))
                .filter_map(|t| match &t.outcome {
                    TrialOutcome::Failed { message } => Some((t.name.clone(), message.clone())),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    match classify_run(None, trials, run) {
        MutantResult::Survived => match seen {
            Some(kvcr) if kvcr.spec == base_spec().to_string() => ControlOutcome::Green,
            Some(kvcr) => ControlOutcome::Broken {
                why: format!(
                    "the run reported kvcr `{}`, not the base build {}",
                    kvcr.spec,
                    base_spec()
                ),
            },
            None => ControlOutcome::Broken {
                why: "the run reported no KVCR build (absent is not the base build)".into(),
            },
        },
        MutantResult::Killed { .. } => ControlOutcome::Red { failed },
        MutantResult::Broken { why } => ControlOutcome::Broken { why },
        MutantResult::Flaky { .. } => ControlOutcome::Broken {
            why: "a control is run once".into(),
        },
    }
}

/// Runs each control of `plans` with its target's binary from `binaries`,
/// into `out/runs/control-<target>/`, one line of progress each.
pub fn run_all(
    repo_root: &Path,
    plans: &[ControlPlan],
    binaries: &[(&str, PathBuf)],
    out: &Path,
) -> Result<Vec<ControlRun>, String> {
    let mut runs = Vec::new();
    for plan in plans {
        let binary = binaries
            .iter()
            .find(|(t, _)| *t == plan.target)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| format!("no test binary for the control's target {}", plan.target))?;
        let child = Phase1Child {
            binary,
            repo_root: repo_root.to_path_buf(),
            flags: plan.flags.clone(),
            filters: plan.trials.clone(),
            exact: true,
            run_base: out.join("runs").join(format!("control-{}", plan.target)),
        };
        println!(
            "[control] {} with {} (the unmutated build): {}",
            plan.target,
            base_spec(),
            plan.trials.join(" ")
        );
        let run = run(plan, &child)?;
        println!("[control] {} in {:.0} s", run.words(), run.child.wall_s);
        runs.push(run);
    }
    Ok(runs)
}

/// A control run for tests: `outcome` on `phase1`, under `/out`.
#[cfg(test)]
pub(crate) fn sample(outcome: ControlOutcome) -> ControlRun {
    ControlRun {
        target: "phase1".into(),
        trials: vec![TC01.into(), "TC-03::hinted_peer_transfer".into()],
        outcome,
        child: ChildEvidence {
            command: "phase1 --kvcr pypi:0.1.1 --exact TC-01::generation_correctness".into(),
            run_dir: Some("/out/runs/control-phase1/phase1/r".into()),
            log: "/out/runs/control-phase1/child.log".into(),
            exit_code: Some(0),
            wall_s: 20.0,
        },
        kvcr: Some(KvcrSeen {
            spec: "pypi:0.1.1".into(),
            version: "0.1.1".into(),
            files_sha256: "5bcf".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(target: &'static str, trials: &[&str], flags: &[&str]) -> MutantRun {
        MutantRun {
            target,
            trials: trials.iter().map(|t| t.to_string()).collect(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        }
    }

    #[test]
    fn one_control_per_target_runs_every_trial_its_mutants_run_on_the_base_build() {
        let runs = [
            run(
                "phase1",
                &[TC01, "TC-02::local_dram_flow"],
                &["--log-level", "debug", "--kvcr", "/m/a.diff"],
            ),
            run(
                "phase1_2p1d",
                &[TC01, "TC-03::hinted_peer_transfer"],
                &["--kvcr", "/m/b.diff"],
            ),
            run(
                "phase1",
                &["TC-04::guard_takeover_and_replacement", TC01],
                &["--log-level", "debug", "--kvcr", "/m/c.diff"],
            ),
        ];
        let plans = plans(&runs);
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[0].target, "phase1");
        assert_eq!(
            plans[0].trials,
            [
                TC01,
                "TC-02::local_dram_flow",
                "TC-04::guard_takeover_and_replacement"
            ]
        );
        assert_eq!(
            plans[0].flags,
            ["--log-level", "debug", "--kvcr", "pypi:0.1.1"],
            "the mutants' flags, the base build for the diff"
        );
        assert_eq!(plans[1].target, "phase1_2p1d");
        assert_eq!(plans[1].flags, ["--kvcr", "pypi:0.1.1"]);
        // A production suite's mutants run no TC-01: neither does its control.
        let p2 = super::plans(&[run(
            "phase2",
            &["TC-07::pool_pressure_and_eviction"],
            &["--kvcr", "/m/d.diff"],
        )]);
        assert_eq!(p2[0].trials, ["TC-07::pool_pressure_and_eviction"]);
    }

    fn read(outcomes: &[(&str, TrialOutcome)], spec: Option<&str>) -> ReadRun {
        let kvcr = spec.map(|spec| KvcrSeen {
            spec: spec.into(),
            version: "0.1.1".into(),
            files_sha256: "5bcf".into(),
        });
        ReadRun::with_outcomes("/out/runs/control-phase1/phase1/r", outcomes, kvcr)
    }

    #[test]
    fn the_control_is_green_only_when_every_trial_passed_on_the_base_build() {
        let trials = vec![TC01.to_string(), "TC-03::hinted_peer_transfer".to_string()];
        let pass = [
            (TC01, TrialOutcome::Passed),
            ("TC-03::hinted_peer_transfer", TrialOutcome::Passed),
        ];
        assert_eq!(
            judge(&trials, Ok(&read(&pass, Some("pypi:0.1.1")))),
            ControlOutcome::Green
        );
        let failed = [
            (TC01, TrialOutcome::Passed),
            (
                "TC-03::hinted_peer_transfer",
                TrialOutcome::Failed {
                    message: "peer transfer reconciles: …".into(),
                },
            ),
        ];
        assert_eq!(
            judge(&trials, Ok(&read(&failed, Some("pypi:0.1.1")))),
            ControlOutcome::Red {
                failed: vec![(
                    "TC-03::hinted_peer_transfer".into(),
                    "peer transfer reconciles: …".into()
                )]
            }
        );
        let ControlOutcome::Broken { why } =
            judge(&trials, Ok(&read(&pass, Some("pypi:0.1.1+/m/a.diff"))))
        else {
            panic!("a patched build is not the control")
        };
        assert!(why.contains("not the base build"), "{why}");
        let ControlOutcome::Broken { why } = judge(&trials, Ok(&read(&pass, None))) else {
            panic!("no reported build is not the base build")
        };
        assert!(why.contains("no KVCR build"), "{why}");
        let ControlOutcome::Broken { why } =
            judge(&trials, Ok(&read(&pass[..1], Some("pypi:0.1.1"))))
        else {
            panic!("a trial that did not run")
        };
        assert!(why.contains("TC-03::hinted_peer_transfer"), "{why}");
        assert_eq!(
            judge(&trials, Err("no run directory".into())),
            ControlOutcome::Broken {
                why: "no run directory".into()
            }
        );
    }
}
