//! `kvcr-e2e compare`: a lane's perf trials (phase1's by default, or a
//! trace replay on the `workload` lane) on two KVCR builds in ABBA rounds,
//! each round a child run of the lane's test target with `--kvcr <spec>`,
//! then the run directories compared as `compare-results` compares them.

use std::path::{Path, PathBuf};

use super::cli::apply_statistics_flag;
use super::comparison::{Collector, Comparison, Rule, DEFAULT_MIN_PAIRS};
use super::figures::RunResults;
use super::rounds::{Build, Round, RoundPlan};
use super::{write_outputs, Written};
use crate::config::{command_flags, KvcrSpec};
use crate::drive::{self, Phase1Child};
use crate::evidence::{DISK_TIER_CASE, WORKLOAD_CASE};
use crate::pyenv::kvcr_spec;
use crate::stats::Bootstrap;

/// Rounds without `--rounds`: two round pairs more than a verdict needs
/// ([`DEFAULT_MIN_PAIRS`]), 16 rounds = 8 pairs. A round that is lost (its
/// run left no results) costs its pair, and with exactly the minimum one lost
/// round would leave every figure inconclusive; two spare pairs keep a
/// verdict through two lost rounds (in different pairs). A round that
/// failed still makes the comparison a no-verdict (exit 3): the spare pairs
/// keep the figures judged, so the summary shows what the rounds measured.
/// Cost: about 33 s a round with the default trials on the 2-core machine
/// (30–40 s in a recorded A-against-A comparison), so 16 rounds take about
/// 9 minutes; with `--early-stop` a comparison that stops at its first look
/// runs 12 (about 7 minutes).
pub const DEFAULT_ROUNDS: u32 = 2 * (DEFAULT_MIN_PAIRS + 2);

/// Trial filters without `--trials`: every TC-05 arm and TC-06.
pub const DEFAULT_TRIALS: &[&str] = &["TC-05", "TC-06"];

/// The test target the rounds run without `--target`.
pub const DEFAULT_TARGET: &str = "phase1";

/// The lane whose trial replays a workload trace; without `--trials` its
/// rounds run that trial ([`WORKLOAD_CASE`]).
pub const WORKLOAD_TARGET: &str = "workload";

/// The lane of KVCR's disk tier (its `phase2-g3` profile); without
/// `--trials` its rounds run TC-12 ([`DISK_TIER_CASE`]), whose read-backs
/// from disk are its figures.
pub const DISK_TIER_TARGET: &str = "phase2_g3";

/// Harness settings each round sets itself (profile keys).
pub const RESERVED_KEYS: &[&str] = &["kvcr", "run_dir", "junit", "attach", "cases"];

/// Parsed `kvcr-e2e compare` arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareDriveArgs {
    pub base: KvcrSpec,
    pub head: KvcrSpec,
    /// The lane's test target the rounds run (`--target`).
    pub target: String,
    /// Rounds in all (even, at least 2).
    pub rounds: u32,
    /// Trial filters (substrings of trial names, as libtest's).
    pub trials: Vec<String>,
    /// `--out DIR`; `None`: `target/compare/<timestamp>/`.
    pub out: Option<PathBuf>,
    pub rule: Rule,
    pub bootstrap: Bootstrap,
    /// Harness flags for every round, in order.
    pub harness: Vec<String>,
    /// `--early-stop`: stop at the first look where a figure is a
    /// regression or every figure has a verdict ([`Rule::early_stop_looks`];
    /// the error rate is split over the looks).
    pub early_stop: bool,
}

impl CompareDriveArgs {
    /// Parses the arguments after `compare`; `targets` are the lanes'
    /// test targets (`--target` must name one).
    pub fn parse(args: &[String], targets: &[&str]) -> Result<Self, String> {
        let (mut base, mut head, mut rounds, mut trials, mut out) = (None, None, None, None, None);
        let mut target = DEFAULT_TARGET.to_string();
        let (mut rule, mut bootstrap) = (Rule::default(), Bootstrap::default());
        let mut harness = Vec::new();
        let mut early_stop = false;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if arg == "--early-stop" {
                early_stop = true;
                continue;
            }
            let (name, inline) = command_flags::split(arg);
            let ours = matches!(
                name,
                "--base"
                    | "--head"
                    | "--target"
                    | "--rounds"
                    | "--trials"
                    | "--cases"
                    | "--out"
                    | "--resamples"
                    | "--seed"
                    | "--confidence"
                    | "--min-change"
                    | "--min-pairs"
                    | "--scope"
                    | "--method"
            );
            if !ours {
                harness.push(arg.clone());
                continue;
            }
            let value = command_flags::value(name, inline, &mut it)?;
            let spec = |value: &str| kvcr_spec::parse_flag(name, value);
            match name {
                "--base" => base = Some(spec(&value)?),
                "--head" => head = Some(spec(&value)?),
                "--target" => target = value,
                "--rounds" => {
                    let n: u32 = value
                        .parse()
                        .map_err(|_| format!("--rounds {value:?}: not a count"))?;
                    RoundPlan::abba(n).map_err(|e| format!("--rounds {n}: {e}"))?;
                    rounds = Some(n);
                }
                // `--cases` is the and phase1's spelling; here it
                // takes trial filters, as `--trials` does.
                "--trials" | "--cases" => {
                    let list: Vec<String> = value
                        .split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(String::from)
                        .collect();
                    if list.is_empty() {
                        return Err(format!("{name} needs at least one filter (e.g. TC-06)"));
                    }
                    trials = Some(list);
                }
                "--out" => out = Some(PathBuf::from(value)),
                other => {
                    apply_statistics_flag(other, &value, &mut rule, &mut bootstrap)?;
                }
            }
        }
        let (Some(base), Some(head)) = (base, head) else {
            return Err("give both builds: --base SPEC --head SPEC".into());
        };
        if !targets.contains(&target.as_str()) {
            return Err(format!(
                "--target {target:?}: no lane has that test target; the lanes are {}",
                targets.join(", ")
            ));
        }
        drive::check_harness_flags(&harness, RESERVED_KEYS).map_err(|e| e.to_string())?;
        let trials = trials.unwrap_or_else(|| default_trials(&target));
        Ok(CompareDriveArgs {
            base,
            head,
            target,
            rounds: rounds.unwrap_or(DEFAULT_ROUNDS),
            trials,
            out,
            rule: rule.checked().map_err(|e| e.to_string())?,
            bootstrap,
            harness,
            early_stop,
        })
    }

    /// Refuses a trial filter that matches no trial of the rounds' lane
    /// (every round would run nothing of it), naming the lanes whose
    /// trials it matches: `--cases TC-12` on `phase1` is a comparison of
    /// nothing, on `phase2_g3` one of the disk tier. `lanes` are each
    /// lane's test target and trial names; a target not among them is not
    /// checked.
    pub fn check_trials(&self, lanes: &[(&str, Vec<String>)]) -> Result<(), String> {
        let matches = |names: &[String], filter: &str| names.iter().any(|n| n.contains(filter));
        let Some((_, own)) = lanes.iter().find(|(target, _)| *target == self.target) else {
            return Ok(());
        };
        for filter in &self.trials {
            if matches(own, filter) {
                continue;
            }
            let elsewhere: Vec<&str> = lanes
                .iter()
                .filter(|(_, names)| matches(names, filter))
                .map(|(target, _)| *target)
                .collect();
            let hint = match elsewhere.is_empty() {
                true => "no lane has a trial it matches".to_string(),
                false => format!(
                    "the lanes whose trials it matches: {} (choose one with --target)",
                    elsewhere.join(", ")
                ),
            };
            return Err(format!(
                "trial filter {filter:?} matches no trial of the {} lane; {hint}",
                self.target
            ));
        }
        Ok(())
    }

    /// The rule the rounds are judged by: with `--early-stop`, the error
    /// rate split over its looks.
    pub fn judging_rule(&self) -> Rule {
        match self.early_stop {
            true => Rule {
                looks: self.rule.early_stop_looks(self.rounds / 2).len().max(1) as u32,
                ..self.rule
            },
            false => self.rule,
        }
    }
}

/// Trial filters without `--trials`: the trace replay on the workload
/// lane, TC-12 on the disk tier's, TC-05 and TC-06 on any other.
fn default_trials(target: &str) -> Vec<String> {
    match target {
        WORKLOAD_TARGET => vec![WORKLOAD_CASE.to_string()],
        DISK_TIER_TARGET => vec![DISK_TIER_CASE.to_string()],
        _ => DEFAULT_TRIALS.iter().map(|t| t.to_string()).collect(),
    }
}

/// One round's child run.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRun {
    pub round: Round,
    /// The build it runs.
    pub spec: KvcrSpec,
    /// Harness flags: the user's, then `--kvcr SPEC`.
    pub flags: Vec<String>,
    /// Its `--run-dir` base (`<out>/rounds/<NN>-<base|head>`).
    pub run_base: PathBuf,
}

/// The rounds of `args` in running order (ABBA…), each with its build and
/// run directory under `out`.
pub fn round_runs(args: &CompareDriveArgs, out: &Path) -> Result<Vec<RoundRun>, String> {
    let plan = RoundPlan::abba(args.rounds).map_err(|e| e.to_string())?;
    Ok(plan
        .rounds()
        .iter()
        .map(|round| {
            let spec = match round.build {
                Build::Base => args.base.clone(),
                Build::Head => args.head.clone(),
            };
            let mut flags = args.harness.clone();
            flags.push("--kvcr".into());
            flags.push(spec.to_string());
            RoundRun {
                round: *round,
                spec,
                flags,
                run_base: out.join("rounds").join(format!(
                    "{:02}-{}",
                    round.index,
                    round.build.as_str()
                )),
            }
        })
        .collect())
}

/// Runs every round and compares them; `out` receives the rounds' run
/// directories and compare.json, junit.xml and compare.html. A round whose
/// run exits non-zero, or that leaves no run directory of its own, is
/// recorded as such and the comparison goes on: it has no verdict.
pub fn run_compare(
    repo_root: &Path,
    args: &CompareDriveArgs,
    out: &Path,
) -> Result<(Comparison, Written), String> {
    let binary = drive::test_binary(repo_root, &args.target).map_err(|e| e.to_string())?;
    run_rounds_with(&binary, repo_root, args, out)
}

/// [`run_compare`] with the test binary given.
fn run_rounds_with(
    binary: &Path,
    repo_root: &Path,
    args: &CompareDriveArgs,
    out: &Path,
) -> Result<(Comparison, Written), String> {
    let runs = round_runs(args, out)?;
    let mut collector = Collector::default();
    let total = runs.len();
    let rule = args.judging_rule();
    let looks = match args.early_stop {
        true => rule.early_stop_looks(args.rounds / 2),
        false => Vec::new(),
    };
    if args.early_stop {
        println!(
            "[compare] early stop: looks after {} pair(s), each at a share of the error rate",
            looks
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for run in &runs {
        let child = Phase1Child {
            binary: binary.to_path_buf(),
            repo_root: repo_root.to_path_buf(),
            flags: run.flags.clone(),
            filters: args.trials.clone(),
            exact: false,
            run_base: run.run_base.clone(),
        };
        println!(
            "[round {}/{total}] {} ({}): {} {}",
            run.round.index + 1,
            run.round.build.as_str(),
            run.spec,
            args.target,
            args.trials.join(" ")
        );
        let log = run.run_base.join("child.log");
        // A run directory that was there before the child ran (a rerun
        // into the same --out) is not this round's.
        let before = drive::find_run_root(&run.run_base).map_err(|e| e.to_string())?;
        let exit = child.run(&log).map_err(|e| e.to_string())?;
        let after = drive::find_run_root(&run.run_base).map_err(|e| e.to_string())?;
        let exited = match exit.code {
            Some(0) => None,
            Some(code) => Some(format!("its run exited {code}")),
            None => Some("its run was ended by a signal".to_string()),
        };
        let see = format!("see {}", log.display());
        let outcome = match after.filter(|root| before.as_ref() != Some(root)) {
            None => Err(format!(
                "it left no run directory of its own under {} ({})",
                run.run_base.display(),
                exited.as_deref().unwrap_or("its run exited 0")
            )),
            Some(root) => RunResults::read(&root)
                .map_err(|e| format!("{e} ({})", exited.as_deref().unwrap_or("exit 0")))
                .map(|(results, file)| (root, results, file)),
        };
        let note = match &outcome {
            Ok((root, results, file)) => {
                collector.add_round(run.round, results, file.display().to_string());
                if let Some(exited) = &exited {
                    collector.flag_round(run.round, format!("{exited}; {see}"));
                }
                match &exited {
                    Some(exited) => format!(
                        "{} ({exited}: no verdict for the comparison; {see})",
                        root.display()
                    ),
                    None => root.display().to_string(),
                }
            }
            Err(why) => {
                collector.lose_round(run.round, format!("{why}; {see}"));
                format!("no results: {why} (no verdict for the comparison; {see})")
            }
        };
        println!(
            "[round {}/{total}] {} in {:.0} s: {note}",
            run.round.index + 1,
            run.round.build.as_str(),
            exit.wall.as_secs_f64(),
        );
        if let Some(pairs) = completed_pairs(run.round) {
            if pairs >= 2 {
                let so_far = collector.compare(&rule, &args.bootstrap);
                println!(
                    "[pair {pairs}/{}] {}{}",
                    total / 2,
                    interim_label(pairs, total as u32 / 2, looks.contains(&pairs)),
                    so_far.progress()
                );
                if looks.contains(&pairs) && pairs < total as u32 / 2 && so_far.may_stop() {
                    let why = match so_far.decided() {
                        true => "every figure has a verdict",
                        false => "a figure is a regression",
                    };
                    println!("[compare] early stop after {pairs} pair(s): {why}");
                    break;
                }
            }
        }
    }
    let comparison = collector.compare(&rule, &args.bootstrap);
    let written = write_outputs(&comparison, out).map_err(|e| e.to_string())?;
    Ok((comparison, written))
}

/// What a progress line before the last pair is: a look of early stop,
/// or a glance whose regressions are no verdict (acting on every glance
/// would call more false regressions than the rule allows).
fn interim_label(pairs: u32, total_pairs: u32, look: bool) -> &'static str {
    match (pairs >= total_pairs, look) {
        (true, _) => "",
        (false, true) => "early-stop look: ",
        (false, false) => "so far, no verdict until the last pair: ",
    }
}

/// The pairs complete once `round` has run: its pair's second round
/// completes it.
fn completed_pairs(round: Round) -> Option<u32> {
    (round.index % 2 == 1).then(|| round.pair() + 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_progress_line_before_the_last_pair_says_it_is_no_verdict() {
        assert_eq!(
            super::interim_label(3, 8, false),
            "so far, no verdict until the last pair: "
        );
        assert_eq!(super::interim_label(6, 8, true), "early-stop look: ");
        assert_eq!(super::interim_label(8, 8, true), "");
    }

    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    /// Lane targets as the caller passes them.
    const TARGETS: &[&str] = &["phase1", "phase1_hybrid", "workload", "phase2_g3"];

    fn parse(line: &str) -> Result<CompareDriveArgs, String> {
        CompareDriveArgs::parse(&args(line), TARGETS)
    }

    #[test]
    fn defaults_are_sixteen_rounds_of_tc05_and_tc06() {
        let a = parse("--base pypi:0.1.1 --head pypi:0.1.2").unwrap();
        assert_eq!(a.base.to_string(), "pypi:0.1.1");
        assert_eq!(a.head.to_string(), "pypi:0.1.2");
        assert_eq!(a.rounds, 16);
        // Two spare pairs: a lost round leaves a verdict possible.
        assert!(a.rounds / 2 >= a.rule.min_pairs + 2);
        assert_eq!(a.trials, ["TC-05", "TC-06"]);
        assert_eq!(a.target, "phase1");
        assert_eq!(
            (a.out, a.rule, a.bootstrap),
            (None, Rule::default(), Bootstrap::default())
        );
        assert!(a.harness.is_empty());
    }

    /// TC-06 on production-size pools: the profile goes to every round's
    /// lane run, the case filter stays the driver's.
    #[test]
    fn tc06_on_the_scale_profile() {
        let a = parse("--base pypi:0.1.1 --head pypi:0.1.1 --profile scale --cases TC-06").unwrap();
        assert_eq!(a.target, "phase1");
        assert_eq!(a.trials, ["TC-06"]);
        assert_eq!(a.harness, args("--profile scale"));
    }

    /// The disk tier's lane runs TC-12 on its own profile: no `--profile`
    /// or `--cases` needed, and none passed on.
    #[test]
    fn the_disk_tier_lane_runs_tc12() {
        let a = parse("--base pypi:0.1.1 --head pypi:0.1.1 --target phase2_g3").unwrap();
        assert_eq!(
            (a.target.as_str(), a.trials.as_slice()),
            ("phase2_g3", &["TC-12".to_string()][..])
        );
        assert!(a.harness.is_empty());
        let b = parse(
            "--base pypi:0.1.1 --head pypi:0.1.1 --target phase2_g3 --cases TC-12 --rounds 8",
        )
        .unwrap();
        assert_eq!(
            (b.trials.as_slice(), b.rounds),
            (&["TC-12".to_string()][..], 8)
        );
    }

    #[test]
    fn a_filter_that_matches_no_trial_of_the_lane_is_refused_naming_its_lanes() {
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let lanes = [
            (
                "phase1",
                names(&[
                    "TC-05::cold",
                    "TC-05::dram_hit",
                    "TC-06::guard_recovery_timing",
                ]),
            ),
            ("phase2_g3", names(&["TC-12::disk_tier"])),
            (
                "phase3_scale",
                names(&["TC-12::disk_tier", "TC-06::guard_recovery_timing"]),
            ),
        ];
        let check = |line: &str| parse(line).unwrap().check_trials(&lanes);
        let on_phase1 =
            check("--base pypi:0.1.1 --head pypi:0.1.1 --profile phase2-g3 --cases TC-12");
        assert_eq!(
            on_phase1.unwrap_err(),
            "trial filter \"TC-12\" matches no trial of the phase1 lane; the lanes whose \
             trials it matches: phase2_g3, phase3_scale (choose one with --target)"
        );
        assert!(check("--base pypi:0.1.1 --head pypi:0.1.1 --target phase2_g3").is_ok());
        assert!(check("--base pypi:0.1.1 --head pypi:0.1.1").is_ok());
        assert!(check("--base pypi:0.1.1 --head pypi:0.1.1 --cases TC-05::dram_hit").is_ok());
        let typo = check("--base pypi:0.1.1 --head pypi:0.1.1 --cases TC-05,TC-6").unwrap_err();
        assert!(typo.ends_with("no lane has a trial it matches"), "{typo}");
        // A target the caller gave no trials of is not checked.
        assert!(check("--base pypi:0.1.1 --head pypi:0.1.1 --target workload").is_ok());
    }

    #[test]
    fn every_flag_and_harness_flags_in_order() {
        let a = parse(
            "--log-level debug --base=pypi:0.1.1 --head pypi:0.1.2 --rounds 6 --trials TC-06,TC-05::dram_hit \
             --out o --min-change 0.2 --resamples 300 --startup-timeout-s 90",
        )
        .unwrap();
        assert_eq!(a.rounds, 6);
        assert_eq!(a.trials, ["TC-06", "TC-05::dram_hit"]);
        assert_eq!(a.out, Some(PathBuf::from("o")));
        assert_eq!(a.rule.min_relative_change, 0.2);
        assert_eq!(a.bootstrap.resamples, 300);
        assert_eq!(a.harness, args("--log-level debug --startup-timeout-s 90"));
        let c = parse("--base pypi:0.1.1 --head pypi:0.1.1 --cases TC-05,TC-06::recovery").unwrap();
        assert_eq!(c.trials, ["TC-05", "TC-06::recovery"]);
        assert!(
            c.harness.is_empty(),
            "--cases is the driver's, not passed on"
        );
    }

    #[test]
    fn the_workload_lane_runs_the_trace_replay_unless_told_otherwise() {
        let a = parse("--base pypi:0.1.1 --head pypi:0.1.2 --target workload").unwrap();
        assert_eq!(
            (a.target.as_str(), a.trials.as_slice()),
            ("workload", &["WL-01".to_string()][..])
        );
        assert!(a.harness.is_empty(), "--target is the driver's");
        let b = parse(
            "--base pypi:0.1.1 --head pypi:0.1.2 --target=workload --trials WL-01::trace_replay",
        )
        .unwrap();
        assert_eq!(b.trials, ["WL-01::trace_replay"]);
        // Another lane keeps TC-05 and TC-06.
        let c = parse("--base pypi:0.1.1 --head pypi:0.1.2 --target phase1_hybrid").unwrap();
        assert_eq!((c.target.as_str(), c.trials.len()), ("phase1_hybrid", 2));
        let err = parse("--base pypi:0.1.1 --head pypi:0.1.2 --target phase9").unwrap_err();
        assert_eq!(
            err,
            "--target \"phase9\": no lane has that test target; the lanes are phase1, \
             phase1_hybrid, workload, phase2_g3"
        );
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        for (line, want) in [
            ("--base pypi:0.1.1", "--base SPEC --head SPEC"),
            ("--base nonsense --head pypi:0.1.1", "--base \"nonsense\""),
            ("--base pypi:0.1.1 --head pypi:0.1.1 --rounds 3", "even"),
            (
                "--base pypi:0.1.1 --head pypi:0.1.1 --rounds x",
                "not a count",
            ),
            (
                "--base pypi:0.1.1 --head pypi:0.1.1 --trials ,",
                "at least one filter",
            ),
            (
                "--base pypi:0.1.1 --head pypi:0.1.1 --confidence 2",
                "between 0 and 1",
            ),
            (
                "--base pypi:0.1.1 --head pypi:0.1.1 --kvcr pypi:0.1.1",
                "set by the driver",
            ),
            (
                "--base pypi:0.1.1 --head pypi:0.1.1 TC-05",
                "not a harness flag",
            ),
            ("--base pypi:0.1.1 --head", "needs a value"),
        ] {
            let err = parse(line).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
    }

    #[test]
    fn rounds_alternate_abba_each_with_its_build_and_own_run_dir() {
        let a = parse("--base pypi:0.1.1 --head pypi:0.1.2 --rounds 6 --log-level debug").unwrap();
        let runs = round_runs(&a, Path::new("/out")).unwrap();
        let letters: String = runs
            .iter()
            .map(|r| match r.round.build {
                Build::Base => 'A',
                Build::Head => 'B',
            })
            .collect();
        assert_eq!(letters, "ABBAAB");
        for run in &runs {
            let want = match run.round.build {
                Build::Base => "pypi:0.1.1",
                Build::Head => "pypi:0.1.2",
            };
            assert_eq!(run.flags, args(&format!("--log-level debug --kvcr {want}")));
            assert_eq!(run.spec.to_string(), want);
        }
        let dirs: Vec<String> = runs
            .iter()
            .map(|r| r.run_base.display().to_string())
            .collect();
        assert_eq!(dirs[0], "/out/rounds/00-base");
        assert_eq!(dirs[2], "/out/rounds/02-head");
        assert_eq!(dirs[5], "/out/rounds/05-head");
    }

    /// A stand-in phase1 that records its flags in `calls`; in the round
    /// whose run directory ends in `odd_round` it exits `odd_exit` and, if
    /// `odd_writes` is false, writes nothing; every other round writes the
    /// same results.json into its run directory and exits 0.
    fn fake_phase1(dir: &Path, odd_round: &str, odd_exit: u8, odd_writes: bool) -> PathBuf {
        let results = dir.join("results.json");
        std::fs::write(&results, include_str!("testdata/results-tc05-tc06.json")).unwrap();
        let binary = dir.join("phase1-fake");
        let script = format!(
            "#!/bin/sh\necho \"$@\" >> {calls}\nwhile [ \"$1\" != --run-dir ]; do shift; done\n\
             code=0; write=1\ncase \"$2\" in *{odd_round}) code={odd_exit}; write={w};; esac\n\
             run=\"$2/phase1/20261201T000000Z-1-abcd\"\n\
             if [ $write = 1 ]; then mkdir -p \"$run\"; cp {results} \"$run/\"; fi\nexit $code\n",
            calls = dir.join("calls").display(),
            results = results.display(),
            w = u8::from(odd_writes),
        );
        std::fs::write(&binary, script).unwrap();
        let mut perms = std::fs::metadata(&binary).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&binary, perms).unwrap();
        binary
    }

    #[test]
    fn every_round_runs_its_build_and_the_runs_are_compared() {
        // A against A, no change.
        let tmp = tempfile::tempdir().unwrap();
        let binary = fake_phase1(tmp.path(), "none", 0, true);
        let a =
            parse("--base pypi:0.1.1 --head pypi:0.1.2 --rounds 4 --min-pairs 2 --resamples 200")
                .unwrap();
        let out = tmp.path().join("out");
        let (comparison, written) = run_rounds_with(&binary, tmp.path(), &a, &out).unwrap();
        let calls = std::fs::read_to_string(tmp.path().join("calls")).unwrap();
        let specs: Vec<&str> = calls
            .lines()
            .map(|l| l.split_whitespace().nth(1).unwrap())
            .collect();
        assert_eq!(
            specs,
            ["pypi:0.1.1", "pypi:0.1.2", "pypi:0.1.2", "pypi:0.1.1"]
        );
        assert!(
            calls.lines().all(|l| l.ends_with(" TC-05 TC-06")),
            "{calls}"
        );
        assert_eq!(comparison.letters(), "ABBA");
        assert!(!comparison.figures.is_empty());
        assert!(comparison.passed(), "identical runs are no regression");
        assert!(comparison.rounds.iter().all(|r| r.problem.is_none()));
        assert!(written.json.is_file() && written.junit.is_file() && written.page.is_file());
        assert!(out
            .join("rounds/03-base/phase1/20261201T000000Z-1-abcd/results.json")
            .is_file());
    }

    #[test]
    fn early_stop_stops_at_the_first_look_where_every_figure_has_a_verdict() {
        // Identical rounds: every figure a tight no change at the first
        // look (6 pairs), so 12 of the 16 rounds run.
        let tmp = tempfile::tempdir().unwrap();
        let binary = fake_phase1(tmp.path(), "none", 0, true);
        let a = parse("--base pypi:0.1.1 --head pypi:0.1.2 --early-stop --resamples 200").unwrap();
        assert!(
            a.early_stop && a.harness.is_empty(),
            "--early-stop is the driver's"
        );
        assert_eq!(a.rule.early_stop_looks(8), [6, 8]);
        assert_eq!(a.judging_rule().looks, 2);
        let out = tmp.path().join("out");
        let (c, _) = run_rounds_with(&binary, tmp.path(), &a, &out).unwrap();
        assert_eq!(c.rounds.len(), 12, "{}", c.letters());
        assert!(c.passed() && c.decided());
        assert_eq!(c.rule.looks, 2, "the error rate stays split over the looks");
        // Without the flag every round runs, at one look.
        let b = parse("--base pypi:0.1.1 --head pypi:0.1.2 --rounds 14 --resamples 200").unwrap();
        assert_eq!((b.early_stop, b.judging_rule().looks), (false, 1));
    }

    #[test]
    fn a_pair_completes_with_its_second_round() {
        let plan = RoundPlan::abba(4).unwrap();
        let done: Vec<Option<u32>> = plan.rounds().iter().map(|r| completed_pairs(*r)).collect();
        assert_eq!(done, [None, Some(1), None, Some(2)]);
    }

    fn four_rounds() -> CompareDriveArgs {
        parse("--base pypi:0.1.1 --head pypi:0.1.2 --rounds 4 --min-pairs 2 --resamples 200")
            .unwrap()
    }

    #[test]
    fn a_round_whose_run_failed_is_compared_but_gives_no_verdict() {
        let tmp = tempfile::tempdir().unwrap();
        let binary = fake_phase1(tmp.path(), "02-head", 101, true);
        let out = tmp.path().join("out");
        let (c, written) = run_rounds_with(&binary, tmp.path(), &four_rounds(), &out).unwrap();
        assert_eq!(c.gate(), crate::compare::Gate::NoVerdict);
        let problem = c.rounds[2].problem.as_deref().unwrap();
        assert!(problem.starts_with("its run exited 101; see "), "{problem}");
        assert!(problem.ends_with("rounds/02-head/child.log"), "{problem}");
        assert!(
            c.figures.iter().all(|f| f.pairs == 2),
            "its figures still count"
        );
        let xml = std::fs::read_to_string(written.junit).unwrap();
        assert!(xml.contains("testcase name=\"round::02-head\""), "{xml}");
    }

    #[test]
    fn a_round_without_a_run_directory_of_its_own_gives_no_verdict() {
        let tmp = tempfile::tempdir().unwrap();
        let binary = fake_phase1(tmp.path(), "01-head", 0, false);
        let out = tmp.path().join("out");
        let (c, _) = run_rounds_with(&binary, tmp.path(), &four_rounds(), &out).unwrap();
        assert_eq!(c.gate(), crate::compare::Gate::NoVerdict);
        let problem = c.rounds[1].problem.as_deref().unwrap();
        assert!(
            problem.starts_with("it left no run directory of its own under ")
                && problem.contains("(its run exited 0)"),
            "{problem}"
        );
        assert_eq!(c.rounds[1].run_id, "");
        // One pair lost: the figures rest on the other.
        assert!(c.figures.iter().all(|f| f.pairs == 1));

        // A run directory left by an earlier compare into the same --out
        // is not this round's.
        let again = fake_phase1(tmp.path(), "01-head", 0, false);
        let stale = out.join("rounds/01-head/phase1/20261130T000000Z-1-old");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(
            stale.join("results.json"),
            include_str!("testdata/results-tc05-tc06.json"),
        )
        .unwrap();
        let (c, _) = run_rounds_with(&again, tmp.path(), &four_rounds(), &out).unwrap();
        let problem = c.rounds[1].problem.as_deref().unwrap();
        assert!(
            problem.starts_with("it left no run directory of its own"),
            "{problem}"
        );
    }
}
