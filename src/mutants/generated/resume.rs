//! Resuming a generated lane: a rerun of the same draw into the same
//! `--out` keeps each draw the earlier run finished (its outcome is in
//! `mutants.json` and its run directory holds its results) and runs only
//! the rest.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::coverage::{CoverageRunRecord, DrawPlan};
use super::lane::GeneratedMutant;
use super::sequence::SequenceLane;
use crate::drive::ReadRun;
use crate::mutants::classify::{classify_run, MutantResult};
use crate::mutants::report::{ChildEvidence, MutantRow};

/// What a rerun reads of the earlier `mutants.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct EarlierLane {
    pub engine: String,
    pub harness_flags: Vec<String>,
    /// The lanes each mutant ran, in order; absent in a table made before
    /// mutants ran a sequence of lanes (they ran the engine's phase 1 lane).
    #[serde(default)]
    pub lanes: Option<Vec<String>>,
    /// The coverage runs it was guided by (`--coverage`); none in a table
    /// made without.
    #[serde(default)]
    pub coverage_runs: Vec<CoverageRunRecord>,
    pub mutants: Vec<MutantRow>,
}

impl EarlierLane {
    /// The earlier run's table in `out`: `Ok(None)` when there is none,
    /// `Err` when one is there but does not read.
    pub fn read(out: &Path) -> Result<Option<EarlierLane>, String> {
        let path = out.join("mutants.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Why none of its rows can be kept for a run of `engine` with
    /// `harness` flags running `lanes` in order, or `None` when they can.
    pub fn mismatch(&self, engine: &str, harness: &[String], lanes: &[&str]) -> Option<String> {
        if self.engine != engine {
            return Some(format!(
                "it ran the {} engine, this run the {engine}",
                self.engine
            ));
        }
        if self.harness_flags != harness {
            return Some(format!(
                "it ran with harness flags {:?}, this run with {harness:?}",
                self.harness_flags
            ));
        }
        let earlier: Vec<String> = match &self.lanes {
            Some(lanes) => lanes.clone(),
            None => engine
                .parse()
                .ok()
                .and_then(|kind| super::lane::target(kind).ok())
                .map(|t| vec![t.to_string()])
                .unwrap_or_default(),
        };
        if earlier != lanes {
            return Some(format!(
                "it ran the lanes {}, this run {}",
                earlier.join(" → "),
                lanes.join(" → ")
            ));
        }
        None
    }
}

impl EarlierLane {
    /// Why its rows cannot be resumed by a run guided by `runs` (none: no
    /// `--coverage`): a table that has rows and was guided by other
    /// coverage runs (other lanes, directories or builds), or by none
    /// where this run is, or the other way. Its rows skipped other lanes
    /// than this run's draws would, so the run is refused rather than
    /// mixing the two.
    pub fn coverage_mismatch(&self, runs: &[CoverageRunRecord]) -> Option<String> {
        if self.mutants.is_empty() {
            return None;
        }
        let key = |runs: &[CoverageRunRecord]| {
            let mut key: Vec<(String, PathBuf, String)> = runs
                .iter()
                .map(|r| {
                    (
                        r.lane.clone(),
                        r.run_dir.clone(),
                        r.kvcr_files_sha256.clone(),
                    )
                })
                .collect();
            key.sort();
            key
        };
        if key(&self.coverage_runs) == key(runs) {
            return None;
        }
        let words = |runs: &[CoverageRunRecord]| match runs.is_empty() {
            true => "no --coverage".to_string(),
            false => format!(
                "--coverage {}",
                runs.iter()
                    .map(|r| r.run_dir.display().to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        Some(format!(
            "its {} rows were run with {}, this run has {}: give the earlier run's \
             --coverage to resume it, or use another --out",
            self.mutants.len(),
            words(&self.coverage_runs),
            words(runs)
        ))
    }
}

/// The rows of `mutants` that `earlier` finished and [`decide_planned`]
/// keeps, in draw order (`plans` aligned with `mutants`): what a run
/// stopped before any draw (by a red control) still writes to the table,
/// so the next resume loses nothing.
pub fn kept_rows(
    earlier: Option<&EarlierLane>,
    mutants: &[GeneratedMutant],
    plans: &[DrawPlan],
) -> Vec<MutantRow> {
    let Some(earlier) = earlier else {
        return Vec::new();
    };
    mutants
        .iter()
        .zip(plans)
        .filter_map(|(m, plan)| decide_planned(earlier, m, plan).ok())
        .collect()
}

/// `mutant`'s row in the earlier table.
fn earlier_row<'a>(
    earlier: &'a EarlierLane,
    mutant: &GeneratedMutant,
) -> Result<&'a MutantRow, &'static str> {
    earlier
        .mutants
        .iter()
        .find(|r| r.name == mutant.name)
        .ok_or("not in the earlier table")
}

/// [`decide`] for a draw whose `plan` may skip lanes by coverage: the
/// earlier row must have skipped the same lanes; one that skipped every
/// lane ran nothing and is kept as it is.
pub fn decide_planned(
    earlier: &EarlierLane,
    mutant: &GeneratedMutant,
    plan: &DrawPlan,
) -> Result<MutantRow, &'static str> {
    let row = earlier_row(earlier, mutant)?;
    if row.skipped_by_coverage != plan.skipped {
        return Err("the earlier run skipped other lanes by coverage");
    }
    if plan.run.is_empty() {
        return match row.ran_no_lane() && matches!(row.result, MutantResult::Survived) {
            true => Ok(row.clone()),
            false => Err("the earlier run ran lanes"),
        };
    }
    decide(earlier, mutant, &plan.run)
}

/// The earlier row of `mutant` to keep, or why it runs. A row is kept
/// when it is of the same mutant (name, diff) on the same lanes with the
/// same trials, and finished: each of its lanes' children exited by itself
/// (not by a signal) and left a run directory with its `results.json`, and
/// a kill was confirmed by a second run.
pub fn decide(
    earlier: &EarlierLane,
    mutant: &GeneratedMutant,
    lanes: &[SequenceLane],
) -> Result<MutantRow, &'static str> {
    let row = earlier_row(earlier, mutant)?;
    // The lanes it ran: those it passed, then the one that ended it (a
    // survivor's last passed lane is its own).
    let mut ran: Vec<(&str, &[String], &ChildEvidence)> = row
        .passed
        .iter()
        .map(|p| (p.target.as_str(), p.trials.as_slice(), &p.child))
        .collect();
    let survived = matches!(row.result, MutantResult::Survived);
    if !survived || row.passed.is_empty() {
        ran.push((row.target.as_str(), row.trials.as_slice(), &row.child));
    }
    if ran.len() > lanes.len() || (survived && ran.len() != lanes.len()) {
        return Err("the earlier run ran other lanes");
    }
    for ((target, trials, _), lane) in ran.iter().zip(lanes) {
        if *target != lane.target {
            return Err("the earlier run ran other lanes");
        }
        if *trials != lane.trials.as_slice() {
            return Err("the earlier run asked other trials");
        }
    }
    let diff = mutant.diff.display().to_string();
    if !ran
        .iter()
        .all(|(_, _, child)| child.command.contains(&diff))
    {
        return Err("the earlier run applied another diff");
    }
    if ran.iter().any(|(_, _, child)| child.exit_code.is_none()) {
        return Err("its earlier child ended by a signal");
    }
    let finished = |child: &ChildEvidence| {
        child
            .run_dir
            .as_ref()
            .is_some_and(|d| d.join("results.json").is_file())
    };
    if !ran.iter().all(|(_, _, child)| finished(child)) {
        return Err("its earlier run directory holds no results.json");
    }
    if matches!(row.result, MutantResult::Killed { .. }) && row.rerun.is_none() {
        // Made before kills were run twice: run it again, twice.
        return Err("its earlier kill was not run a second time");
    }
    Ok(rejudged(row.clone()))
}

/// A kept flaky row judged again by this build's rule ([`MutantResult::confirmed_by`]):
/// both runs' outcomes are in the row (each failed trial's claim read again
/// from its run directory where the row predates them), so a rule that now
/// reads them as one failure makes it a kill without running it again.
fn rejudged(mut row: MutantRow) -> MutantRow {
    if let MutantResult::Flaky { first, second } = row.result {
        let rerun_dir = row.rerun.as_ref().and_then(|r| r.child.run_dir.as_deref());
        let first = with_claims(*first, row.child.run_dir.as_deref(), &row.trials);
        let second = with_claims(*second, rerun_dir, &row.trials);
        row.result = first.confirmed_by(second);
        row.met = !matches!(row.result, MutantResult::Flaky { .. });
    }
    row
}

/// `result` with each failed trial's claim, read from its run directory
/// when the kill was kept without them (a table of an earlier build);
/// as it was when that directory does not read.
fn with_claims(
    mut result: MutantResult,
    run_dir: Option<&Path>,
    trials: &[String],
) -> MutantResult {
    if let (MutantResult::Killed { claims, .. }, Some(dir)) = (&mut result, run_dir) {
        if claims.is_empty() {
            if let Ok(read) = ReadRun::from_root(dir) {
                if let MutantResult::Killed { claims: read, .. } =
                    classify_run(None, trials, Ok(&read))
                {
                    *claims = read;
                }
            }
        }
    }
    result
}

/// `killed on phase2 by TC-07::…`, `survived (passed phase1, phase2)`,
/// `broken on phase1: why`: a row's outcome and where.
pub fn outcome_words(row: &MutantRow) -> String {
    let words = result_words(&row.result);
    let ran_or_skipped = !(row.passed.is_empty() && row.skipped_by_coverage.is_empty());
    match (&row.result, ran_or_skipped) {
        (MutantResult::Survived, false) => words,
        (MutantResult::Survived, true) => format!("{words} ({})", row.lane_words()),
        (result, _) => {
            let word = result.word();
            let rest = words.strip_prefix(word).unwrap_or(&words);
            format!("{word} on {}{rest}", row.target)
        }
    }
}

/// `killed by TC-02::local_dram_flow`, `survived`, `broken: why`.
pub fn result_words(result: &MutantResult) -> String {
    match result {
        MutantResult::Killed { trial, .. } => format!("killed by {trial}"),
        MutantResult::Survived => "survived".into(),
        MutantResult::Broken { why } => {
            let short: String = why.chars().take(120).collect();
            format!(
                "broken: {short}{}",
                if short.len() < why.len() { "…" } else { "" }
            )
        }
        MutantResult::Flaky { first, second } => format!(
            "flaky: {}, then {}",
            result_words(first),
            result_words(second)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::generated;
    use crate::mutants::generated::sample::Site;
    use crate::mutants::report::PassedLane;
    use std::path::PathBuf;

    fn mutant(dir: &Path, line: u32) -> GeneratedMutant {
        let site = Site {
            module: "kvcr/guard.py".into(),
            operator: "core/AddNot".into(),
            occurrence: 4,
            start: [line, 8],
            end: [line, 9],
            definition: None,
        };
        GeneratedMutant {
            name: site.name(),
            diff: dir.join(format!("diffs/{}.diff", site.name())),
            site,
            draw: 0,
        }
    }

    fn trials() -> Vec<String> {
        generated::trials()
    }

    fn phase1() -> Vec<SequenceLane> {
        sequence("phase1")
    }

    fn sequence(targets: &str) -> Vec<SequenceLane> {
        let targets: Vec<&str> = targets.split(',').collect();
        generated::sequence::plan(&targets).unwrap()
    }

    /// An earlier row of `m` with `result`; `results` says whether its run
    /// directory holds a results.json.
    fn row(dir: &Path, m: &GeneratedMutant, result: MutantResult, results: bool) -> MutantRow {
        let run_dir = dir.join("runs").join(&m.name).join("phase1/x");
        std::fs::create_dir_all(&run_dir).unwrap();
        if results {
            std::fs::write(run_dir.join("results.json"), "{}").unwrap();
        }
        MutantRow {
            name: m.name.clone(),
            class: "generated:guard".into(),
            phase1_claims_it: true,
            expect: "unknown".into(),
            expected_message: None,
            target: "phase1".into(),
            trials: trials(),
            met: true,
            child: crate::mutants::report::ChildEvidence {
                command: format!("phase1 --kvcr pypi:0.1.1+{} --exact", m.diff.display()),
                run_dir: Some(run_dir),
                log: PathBuf::from("child.log"),
                exit_code: Some(101),
                wall_s: 50.0,
            },
            kvcr: None,
            equivalent: false,
            // A kill made now carries its confirming second run.
            rerun: matches!(result, MutantResult::Killed { .. }).then(|| {
                crate::mutants::report::Rerun {
                    result: result.clone(),
                    child: crate::mutants::report::ChildEvidence {
                        command: "phase1".into(),
                        run_dir: None,
                        log: PathBuf::from("rerun.log"),
                        exit_code: Some(101),
                        wall_s: 50.0,
                    },
                }
            }),
            result,
            passed: vec![],
            skipped_by_coverage: vec![],
        }
    }

    fn lane(rows: Vec<MutantRow>) -> EarlierLane {
        EarlierLane {
            engine: "cpu".into(),
            harness_flags: vec![],
            lanes: None,
            coverage_runs: vec![],
            mutants: rows,
        }
    }

    fn killed() -> MutantResult {
        MutantResult::Killed {
            trial: "TC-04::guard_takeover_and_replacement".into(),
            message: "m".into(),
            message_matches: false,
            claims: Default::default(),
            failed: vec![],
        }
    }

    #[test]
    fn finished_draws_are_kept_whatever_their_outcome() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            mutant(tmp.path(), 1),
            mutant(tmp.path(), 2),
            mutant(tmp.path(), 3),
        );
        let broken = MutantResult::Broken {
            why: "setup failed".into(),
        };
        let earlier = lane(vec![
            row(tmp.path(), &a, killed(), true),
            row(tmp.path(), &b, MutantResult::Survived, true),
            row(tmp.path(), &c, broken.clone(), true),
        ]);
        assert_eq!(decide(&earlier, &a, &phase1()).unwrap().result, killed());
        assert_eq!(
            decide(&earlier, &b, &phase1()).unwrap().result,
            MutantResult::Survived
        );
        assert_eq!(decide(&earlier, &c, &phase1()).unwrap().result, broken);
    }

    #[test]
    fn a_kept_flaky_row_is_judged_again_by_this_rule() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let hang = |trial: &str, failed: &[&str]| MutantResult::Killed {
            trial: trial.into(),
            message: format!("request f00{}v1 failed: no response", failed.len()),
            message_matches: false,
            claims: Default::default(),
            failed: failed.iter().map(|t| t.to_string()).collect(),
        };
        let first = hang("TC-01::a", &["TC-01::a", "TC-03::b"]);
        let mut flaky = row(tmp.path(), &m, MutantResult::Survived, true);
        flaky.result = MutantResult::Flaky {
            first: Box::new(first.clone()),
            second: Box::new(hang("TC-03::b", &["TC-03::b"])),
        };
        flaky.met = false;
        let kept = decide(&lane(vec![flaky.clone()]), &m, &phase1()).unwrap();
        assert_eq!(kept.result, first);
        assert!(kept.met);
        // Two runs that failed apart stay flaky.
        flaky.result = MutantResult::Flaky {
            first: Box::new(first),
            second: Box::new(hang("TC-04::c", &["TC-04::c"])),
        };
        let kept = decide(&lane(vec![flaky]), &m, &phase1()).unwrap();
        assert_eq!(kept.result.word(), "flaky");
        assert!(!kept.met);
    }

    #[test]
    fn a_kept_flaky_row_of_an_earlier_build_reads_its_claims_from_both_runs() {
        // The first run failed TC-02 first, the re-run TC-01 first and TC-02
        // again the same way: the row, kept without claims, is a kill.
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let results = |dir: &Path, tc01: &str| {
            std::fs::create_dir_all(dir).unwrap();
            let cases = format!(
                r#"[{tc01},{{"id":"TC-02","name":"TC-02::local_dram_flow","outcome":"failed","message":"host-tier (DRAM) hit: 0 blocks"}}]"#
            );
            std::fs::write(
                dir.join("results.json"),
                format!(r#"{{"schema_version":1,"run":{{"run_id":"r","cases":{cases}}},"requests":[],"perf":{{}}}}"#),
            )
            .unwrap();
        };
        let kill = |trial: &str, message: &str| MutantResult::Killed {
            trial: trial.into(),
            message: message.into(),
            message_matches: false,
            claims: Default::default(),
            failed: vec![trial.into()],
        };
        let mut flaky = row(tmp.path(), &m, MutantResult::Survived, true);
        let first_dir = flaky.child.run_dir.clone().unwrap();
        let rerun_dir = tmp.path().join("rerun");
        results(
            &first_dir,
            r#"{"id":"TC-01","name":"TC-01::generation_correctness","outcome":"passed","duration_ms":1.0}"#,
        );
        results(
            &rerun_dir,
            r#"{"id":"TC-01","name":"TC-01::generation_correctness","outcome":"failed","message":"cached pass reused the cache: f000v1"}"#,
        );
        let first = kill("TC-02::local_dram_flow", "host-tier (DRAM) hit: 0 blocks");
        let second = kill(
            "TC-01::generation_correctness",
            "cached pass reused the cache: f000v1",
        );
        flaky.rerun = Some(crate::mutants::report::Rerun {
            result: second.clone(),
            child: crate::mutants::report::ChildEvidence {
                run_dir: Some(rerun_dir),
                ..flaky.child.clone()
            },
        });
        flaky.result = MutantResult::Flaky {
            first: Box::new(first),
            second: Box::new(second),
        };
        flaky.met = false;
        let kept = decide(&lane(vec![flaky]), &m, &phase1()).unwrap();
        assert_eq!(kept.result.word(), "killed", "{:?}", kept.result);
        assert!(kept.met);
    }

    #[test]
    fn a_stopped_run_keeps_the_finished_rows_in_draw_order() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            mutant(tmp.path(), 1),
            mutant(tmp.path(), 2),
            mutant(tmp.path(), 3),
        );
        // b finished; a's child left no results.json; c never ran.
        let earlier = lane(vec![
            row(tmp.path(), &b, MutantResult::Survived, true),
            row(tmp.path(), &a, killed(), false),
        ]);
        let mutants = [a, b.clone(), c];
        let plans = vec![DrawPlan::all(&phase1()); 3];
        let kept = kept_rows(Some(&earlier), &mutants, &plans);
        let names: Vec<&str> = kept.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, [b.name.as_str()]);
        assert!(kept_rows(None, &mutants, &plans).is_empty());
    }

    #[test]
    fn a_missing_or_unfinished_draw_runs_again() {
        let tmp = tempfile::tempdir().unwrap();
        let never_ran = mutant(tmp.path(), 1);
        let no_results = mutant(tmp.path(), 2);
        let signalled = mutant(tmp.path(), 3);
        let no_run_dir = mutant(tmp.path(), 4);
        let mut by_signal = row(tmp.path(), &signalled, killed(), true);
        by_signal.child.exit_code = None;
        let mut without_dir = row(tmp.path(), &no_run_dir, MutantResult::Survived, true);
        without_dir.child.run_dir = None;
        let earlier = lane(vec![
            row(tmp.path(), &no_results, MutantResult::Survived, false),
            by_signal,
            without_dir,
        ]);
        let why = |m| decide(&earlier, m, &phase1()).unwrap_err();
        assert_eq!(why(&never_ran), "not in the earlier table");
        assert_eq!(
            why(&no_results),
            "its earlier run directory holds no results.json"
        );
        assert_eq!(why(&signalled), "its earlier child ended by a signal");
        assert_eq!(
            why(&no_run_dir),
            "its earlier run directory holds no results.json"
        );
    }

    #[test]
    fn a_kill_that_was_not_run_a_second_time_is_run_again() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let mut old = row(tmp.path(), &m, killed(), true);
        old.rerun = None;
        assert_eq!(
            decide(&lane(vec![old]), &m, &phase1()).unwrap_err(),
            "its earlier kill was not run a second time"
        );
    }

    #[test]
    fn a_row_of_other_trials_or_another_diff_is_not_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let earlier = lane(vec![row(tmp.path(), &m, killed(), true)]);
        assert_eq!(
            decide(
                &earlier,
                &m,
                &[SequenceLane {
                    trials: trials()[..2].to_vec(),
                    ..phase1()[0].clone()
                }]
            )
            .unwrap_err(),
            "the earlier run asked other trials"
        );
        let moved = GeneratedMutant {
            diff: tmp.path().join("elsewhere/m.diff"),
            ..m.clone()
        };
        assert_eq!(
            decide(&earlier, &moved, &phase1()).unwrap_err(),
            "the earlier run applied another diff"
        );
    }

    #[test]
    fn other_harness_flags_or_engine_keep_nothing() {
        let earlier = lane(vec![]);
        assert!(earlier.mismatch("cpu", &[], &["phase1"]).is_none());
        assert!(earlier
            .mismatch("vllm", &[], &["phase1_vllm"])
            .unwrap()
            .contains("the cpu engine"));
        assert!(earlier
            .mismatch("cpu", &["--timeout-scale".into(), "2".into()], &["phase1"])
            .unwrap()
            .contains("harness flags"));
    }

    #[test]
    fn the_earlier_table_of_a_lane_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let report = crate::mutants::report::LaneReport::new(
            "2026-12-01T21:06:08Z".into(),
            "cpu",
            vec![],
            vec![],
            vec![row(tmp.path(), &m, killed(), true)],
        );
        report.write(tmp.path()).unwrap();
        let earlier = EarlierLane::read(tmp.path()).unwrap().expect("reads back");
        assert_eq!(earlier.mutants[0].name, m.name);
        assert_eq!(
            outcome_words(&earlier.mutants[0]),
            "killed on phase1 by TC-04::guard_takeover_and_replacement"
        );
        assert!(EarlierLane::read(&tmp.path().join("none"))
            .unwrap()
            .is_none());
        std::fs::write(tmp.path().join("mutants.json"), "{").unwrap();
        assert!(
            EarlierLane::read(tmp.path()).is_err(),
            "a broken table is said"
        );
    }

    /// A table that names its lanes keeps its rows only for the same
    /// lanes in the same order; one made before lane sequences ran the
    /// engine's phase 1 lane.
    #[test]
    fn a_different_lane_sequence_keeps_nothing() {
        let mut earlier = lane(vec![]);
        earlier.lanes = Some(vec!["phase1".into(), "phase2".into()]);
        assert!(earlier
            .mismatch("cpu", &[], &["phase1", "phase2"])
            .is_none());
        for other in [
            &["phase1"][..],
            &["phase2", "phase1"][..],
            &["phase1", "phase2", "phase3"][..],
        ] {
            let why = earlier.mismatch("cpu", &[], other).unwrap();
            assert!(
                why.starts_with("it ran the lanes phase1 → phase2, this run "),
                "{why}"
            );
        }
        let legacy = lane(vec![]);
        assert!(legacy.mismatch("cpu", &[], &["phase1"]).is_none());
        assert!(legacy
            .mismatch("cpu", &[], &["phase1", "phase2"])
            .unwrap()
            .contains("it ran the lanes phase1, this run phase1 → phase2"));
    }

    /// A row that passed lanes: kept only when each lane it ran is the
    /// sequence's, in order, with the same trials, and finished.
    #[test]
    fn a_row_of_several_lanes_is_kept_only_on_the_same_lanes() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let lanes = sequence("phase1,phase2,phase3");
        let passed_phase1 = PassedLane::of(&row(tmp.path(), &m, MutantResult::Survived, true));
        // Killed on phase2 after passing phase1.
        let mut kill = row(tmp.path(), &m, killed(), true);
        kill.target = "phase2".into();
        kill.trials = lanes[1].trials.clone();
        kill.passed = vec![passed_phase1.clone()];
        let earlier = lane(vec![kill.clone()]);
        assert_eq!(decide(&earlier, &m, &lanes).unwrap().target, "phase2");
        // The same row against a sequence that does not start phase1, phase2.
        assert_eq!(
            decide(&earlier, &m, &sequence("phase2,phase1")).unwrap_err(),
            "the earlier run ran other lanes"
        );
        // A survivor must have passed every lane of the sequence.
        let mut survivor = row(tmp.path(), &m, MutantResult::Survived, true);
        survivor.target = "phase2".into();
        survivor.trials = lanes[1].trials.clone();
        survivor.passed = vec![passed_phase1.clone(), PassedLane::of(&survivor)];
        let earlier = lane(vec![survivor]);
        assert!(decide(&earlier, &m, &lanes[..2]).is_ok());
        assert_eq!(
            decide(&earlier, &m, &lanes).unwrap_err(),
            "the earlier run ran other lanes",
            "it never ran phase3"
        );
        // A passed lane whose run directory lost its results runs again.
        let mut gone = kill;
        gone.passed[0].child.run_dir = Some(tmp.path().join("nowhere"));
        assert_eq!(
            decide(&lane(vec![gone]), &m, &lanes).unwrap_err(),
            "its earlier run directory holds no results.json"
        );
    }

    fn skipped(lane: &str, line: u32) -> crate::mutants::generated::coverage::SkippedLane {
        crate::mutants::generated::coverage::SkippedLane {
            lane: lane.into(),
            module: "kvcr/guard.py".into(),
            line,
            statement_line: None,
            run_dir: PathBuf::from(format!("/cov/{lane}/r1")),
        }
    }

    fn coverage_run(lane: &str) -> CoverageRunRecord {
        CoverageRunRecord {
            lane: lane.into(),
            run_dir: PathBuf::from(format!("/cov/{lane}/r1")),
            kvcr_files_sha256: "5bcf".repeat(16),
            started_at: None,
            processes_without_data: vec![],
        }
    }

    /// A draw that skipped every lane ran nothing: kept as it is when this
    /// run's plan skips the same lanes; a row that skipped other lanes
    /// runs again.
    #[test]
    fn a_row_skipped_by_coverage_is_kept_only_for_the_same_plan() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let lanes = sequence("phase1,phase2");
        let mut none_ran = row(tmp.path(), &m, MutantResult::Survived, false);
        none_ran.target = String::new();
        none_ran.trials = vec![];
        none_ran.child.command = String::new();
        none_ran.child.run_dir = None;
        none_ran.child.exit_code = None;
        none_ran.skipped_by_coverage = vec![skipped("phase1", 1), skipped("phase2", 1)];
        assert!(none_ran.ran_no_lane());
        let earlier = lane(vec![none_ran.clone()]);
        let all_skipped = DrawPlan {
            run: vec![],
            skipped: none_ran.skipped_by_coverage.clone(),
        };
        assert_eq!(
            decide_planned(&earlier, &m, &all_skipped).unwrap(),
            none_ran
        );
        assert_eq!(
            outcome_words(&none_ran),
            "survived (no lane run: kvcr/guard.py line 1 ran in none of the 2 lanes' coverage runs (phase1 r1, phase2 r1))"
        );
        // This run would run phase2: the earlier row skipped other lanes.
        let phase2_runs = DrawPlan {
            run: lanes[1..].to_vec(),
            skipped: vec![skipped("phase1", 1)],
        };
        assert_eq!(
            decide_planned(&earlier, &m, &phase2_runs).unwrap_err(),
            "the earlier run skipped other lanes by coverage"
        );
        // A row that ran phase2 after skipping phase1 is kept for that plan.
        let mut ran_phase2 = row(tmp.path(), &m, killed(), true);
        ran_phase2.target = "phase2".into();
        ran_phase2.trials = lanes[1].trials.clone();
        ran_phase2.skipped_by_coverage = vec![skipped("phase1", 1)];
        let earlier = lane(vec![ran_phase2]);
        assert_eq!(
            decide_planned(&earlier, &m, &phase2_runs).unwrap().target,
            "phase2"
        );
        // ... and not for a run without coverage.
        assert_eq!(
            decide_planned(&earlier, &m, &DrawPlan::all(&lanes)).unwrap_err(),
            "the earlier run skipped other lanes by coverage"
        );
        let kept = kept_rows(Some(&earlier), &[m], &[phase2_runs]);
        assert_eq!(kept.len(), 1);
    }

    /// A resume must be given the coverage runs the earlier rows were
    /// planned with (in any order); an earlier table without rows resumes
    /// nothing, so it never refuses.
    #[test]
    fn a_resume_with_other_coverage_runs_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let mut earlier = lane(vec![row(tmp.path(), &m, killed(), true)]);
        earlier.coverage_runs = vec![coverage_run("phase1"), coverage_run("phase2")];
        let same = [coverage_run("phase2"), coverage_run("phase1")];
        assert!(earlier.coverage_mismatch(&same).is_none());
        let mut moved = coverage_run("phase2");
        moved.run_dir = PathBuf::from("/cov/phase2/r2");
        let mut rebuilt = coverage_run("phase2");
        rebuilt.kvcr_files_sha256 = "ab".repeat(32);
        for other in [
            vec![coverage_run("phase1")],
            vec![coverage_run("phase1"), moved],
            vec![coverage_run("phase1"), rebuilt],
            vec![],
        ] {
            let why = earlier.coverage_mismatch(&other).unwrap();
            assert!(
                why.starts_with("its 1 rows were run with --coverage /cov/phase1/r1,/cov/phase2/r1, this run has ")
                    && why.ends_with("or use another --out"),
                "{why}"
            );
        }
        assert!(earlier
            .coverage_mismatch(&[])
            .unwrap()
            .contains("this run has no --coverage"));
        // A table made without --coverage, resumed with it.
        let plain = lane(vec![row(tmp.path(), &m, killed(), true)]);
        assert!(plain.coverage_mismatch(&[]).is_none());
        assert!(plain
            .coverage_mismatch(&same)
            .unwrap()
            .contains("were run with no --coverage"));
        assert!(lane(vec![]).coverage_mismatch(&same).is_none());
    }
}
