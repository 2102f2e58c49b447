//! `kvcr-e2e mutants --generated N --seed S`: draw the sample, write each
//! mutant's diff under the lane's directory, and run each as a child of
//! each lane of the sequence (`--lanes`) with `--kvcr <default
//! build>+<diff>`, until a lane does not pass; each lane's run classified
//! as the curated ones are.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::diff;
use super::resume;
use super::sample::{self, Site};
use super::sequence::{self, SequenceLane};
use super::tool::Tool;
use super::COSMIC_RAY;
use crate::config::KvcrSpec;
use crate::drive::{self, Phase1Child};
use crate::engine::{GeometryKind, Kind, StackSpec, Topology};
use crate::lanes::Lane;
use crate::mutants::args::{GeneratedArgs, MutantsArgs};
use crate::mutants::classify::MutantResult;
use crate::mutants::control::{self, ControlPlan, ControlRun};
use crate::mutants::driver::{
    finish, print_finished, refuse, report, run_child, stamp, LaneError, RowHead,
};
use crate::mutants::report::{
    ChildEvidence, LaneReport, MutantRow, PassedLane, Rerun, NO_EXPECTATION,
};
use crate::mutants::score::BatchStart;

/// A file in the lane's directory that ends the lane after the running
/// mutant (`touch DIR/stop`): the running stack tears down as usual and
/// the table keeps what ran.
pub const STOP_FILE: &str = "stop";

/// One drawn mutant, ready to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GeneratedMutant {
    pub name: String,
    pub site: Site,
    /// Its position in the draw (0-based; skipped sites count).
    pub draw: usize,
    pub diff: PathBuf,
}

/// `sample.json`: how the sample was drawn, and what was skipped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SampleRecord {
    pub tool: String,
    pub kvcr_version: String,
    pub modules: Vec<String>,
    pub seed: u64,
    pub count: u32,
    /// Sites per module, and in all.
    pub sites: Vec<(String, usize)>,
    pub sites_total: usize,
    pub mutants: Vec<GeneratedMutant>,
    /// Drawn sites that made no valid module, with why (not run, not scored).
    pub skipped: Vec<(String, String)>,
}

/// Draws the sample and writes `sites.jsonl`, `diffs/<name>.diff` and
/// `sample.json` into `out`; reuses the draw already there (a
/// `--draw-only` run into the same `--out`) when it is of the same seed,
/// count, modules and tool, and its diffs are in place.
pub fn draw(repo_root: &Path, out: &Path, args: &GeneratedArgs) -> Result<SampleRecord, String> {
    if let Some(record) = earlier_draw(out, args) {
        println!("reusing the draw in {}", out.join("sample.json").display());
        return Ok(record);
    }
    let tool = Tool::ready(repo_root, out)?;
    let lines = tool.sites(&args.modules)?;
    write(&out.join("sites.jsonl"), &lines)?;
    let sites = sample::parse_sites(&lines)?;
    let order = sample::draw_order(&sites, args.seed);
    let drawn = tool.mutate(&order, args.count)?;
    let mut record = SampleRecord {
        tool: COSMIC_RAY.to_string(),
        kvcr_version: tool.kvcr_version.clone(),
        modules: args.modules.clone(),
        seed: args.seed,
        count: args.count,
        sites: args
            .modules
            .iter()
            .map(|m| {
                (
                    m.clone(),
                    sites.iter().filter(|s| s.module_name() == m).count(),
                )
            })
            .collect(),
        sites_total: sites.len(),
        mutants: Vec::new(),
        skipped: Vec::new(),
    };
    for (i, d) in drawn.into_iter().enumerate() {
        let name = d.site.name();
        let Some(mutated) = d.mutated else {
            let why = d.skipped.unwrap_or_else(|| "no mutated module".into());
            record.skipped.push((name, why));
            continue;
        };
        let pristine = tool.pristine(&d.site.module)?;
        let header = header(&name, &d.site, i, &record);
        let Some(text) = diff::unified(&d.site.module, &pristine, &mutated, &header) else {
            record
                .skipped
                .push((name, "the mutated module equals the pristine one".into()));
            continue;
        };
        let file = out.join("diffs").join(format!("{name}.diff"));
        write(&file, &text)?;
        record.mutants.push(GeneratedMutant {
            name,
            site: d.site,
            draw: i,
            diff: file,
        });
    }
    let json = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?;
    write(&out.join("sample.json"), &json)?;
    if record.mutants.len() < args.count as usize {
        println!(
            "only {} of the {} sites make a valid mutant; running those",
            record.mutants.len(),
            sites.len()
        );
    }
    Ok(record)
}

fn earlier_draw(out: &Path, args: &GeneratedArgs) -> Option<SampleRecord> {
    let text = std::fs::read_to_string(out.join("sample.json")).ok()?;
    let record: SampleRecord = serde_json::from_str(&text).ok()?;
    let same = record.tool == COSMIC_RAY
        && record.seed == args.seed
        && record.count == args.count
        && record.modules == args.modules
        && record.mutants.iter().all(|m| m.diff.is_file());
    same.then_some(record)
}

/// The diff's comment header (skipped by `patch`).
fn header(name: &str, site: &Site, draw: usize, record: &SampleRecord) -> Vec<String> {
    vec![
        format!("generated: {name}"),
        format!(
            "site: {} line {} column {}{}",
            site.module,
            site.start[0],
            site.start[1],
            site.definition
                .as_deref()
                .map(|d| format!(", in {d}"))
                .unwrap_or_default()
        ),
        format!("operator: {} occurrence {}", site.operator, site.occurrence),
        format!(
            "drawn: {draw} of seed {} over {} ({COSMIC_RAY}, kvcr {}); no expectation",
            record.seed,
            record.modules.join(","),
            record.kvcr_version
        ),
    ]
}

/// Runs the lane: draw, the control (the unmutated build, each lane of the
/// sequence with the trials a mutant runs there), then each mutant lane
/// after lane until one does not pass, a kill run twice; progress on
/// stdout. Ends by writing the batch's score file.
pub fn run_generated(
    repo_root: &Path,
    args: &MutantsArgs,
    generated: &GeneratedArgs,
) -> Result<(LaneReport, PathBuf), LaneError> {
    let start = BatchStart::now(repo_root);
    let now = start.at;
    let out = match &args.out {
        Some(dir) if dir.is_relative() => std::env::current_dir()
            .map(|cwd| cwd.join(dir))
            .unwrap_or_else(|_| dir.clone()),
        Some(dir) => dir.clone(),
        None => repo_root
            .join("target/mutants")
            .join(format!("{}-generated", stamp(now))),
    };
    let record = draw(repo_root, &out, generated)?;
    println!(
        "drew {} mutants from {} sites of {} (seed {}, kvcr {}); diffs in {}",
        record.mutants.len(),
        record.sites_total,
        record.modules.join(", "),
        record.seed,
        record.kvcr_version,
        out.join("diffs").display()
    );
    if generated.draw_only {
        return Ok((report(now, args, &[], &[]), out));
    }
    let lanes = sequence::plan(&generated.lanes).map_err(LaneError::Usage)?;
    let mut binaries: Vec<(&str, PathBuf)> = Vec::new();
    for lane in &lanes {
        let binary = drive::test_binary(repo_root, lane.target).map_err(|e| e.to_string())?;
        binaries.push((lane.target, binary));
    }
    let selection = format!(
        "--generated {} --seed {} --modules {} --lanes {} ({} drawn, {COSMIC_RAY}, kvcr {})",
        generated.count,
        generated.seed,
        generated.modules.join(","),
        generated.lanes.join(","),
        record.mutants.len(),
        record.kvcr_version
    );
    let table = |control: &[ControlRun], rows: &[MutantRow]| {
        report(now, args, control, rows).with_lanes(&generated.lanes)
    };
    let control = control::run_all(
        repo_root,
        &control_plans(&lanes, &args.harness),
        &binaries,
        &out,
    )?;
    let earlier = earlier_lane(&out, args, &generated.lanes);
    if table(&control, &[]).refused.is_some() {
        // No draw runs, but the table keeps what an earlier run finished.
        let kept = resume::kept_rows(earlier.as_ref(), &record.mutants, &lanes);
        return Err(refuse(
            &table(&control, &kept),
            &out,
            &start,
            selection,
            args,
        ));
    }
    let total = record.mutants.len();
    let stop = out.join(STOP_FILE);
    if earlier.is_some() && stop.exists() {
        // Left by the run this one resumes.
        std::fs::remove_file(&stop).map_err(|e| format!("{}: {e}", stop.display()))?;
        println!("removed {} left by the earlier run", stop.display());
    }
    let mut rows = Vec::new();
    let (mut kept, mut ran, mut stopping) = (0, 0, false);
    for (i, mutant) in record.mutants.iter().enumerate() {
        let earlier_row = earlier
            .as_ref()
            .map(|e| resume::decide(e, mutant, &lanes))
            .transpose();
        match earlier_row {
            Ok(Some(row)) => {
                println!(
                    "[{}/{total}] {}: kept from the earlier run ({})",
                    i + 1,
                    mutant.name,
                    resume::outcome_words(&row)
                );
                kept += 1;
                rows.push(row);
                continue;
            }
            Err(why) => println!("[{}/{total}] {}: not kept: {why}", i + 1, mutant.name),
            Ok(None) => {}
        }
        if !stopping && stop.exists() {
            println!(
                "stopping: {} exists; {ran} mutants ran, {kept} kept so far",
                stop.display()
            );
            stopping = true;
        }
        if stopping {
            // Later draws kept from the earlier run still go in the table.
            continue;
        }
        println!(
            "[{}/{total}] {}: {}",
            i + 1,
            mutant.name,
            generated.lanes.join(" → ")
        );
        // `binaries` holds each lane's, in the sequence's order.
        let child = |i: usize, lane: &SequenceLane| {
            let binary = binaries[i].1.clone();
            mutant_child(repo_root, &out, mutant, lane, binary, &args.harness)
        };
        let row = run_sequence(mutant, &lanes, child)?;
        let note = match &row.result {
            MutantResult::Killed { trial, .. } => format!(" on {} by {trial}", row.target),
            MutantResult::Survived => format!(" ({})", row.lane_words()),
            _ => format!(" on {}", row.target),
        };
        print_finished(i, total, &row, &note);
        rows.push(row);
        ran += 1;
        // Rewritten after each mutant: a lane cut short keeps what it ran.
        table(&control, &rows).write(&out)?;
    }
    if kept > 0 {
        println!("{kept} of {total} draws kept from the earlier run, {ran} ran now");
    }
    let report = table(&control, &rows);
    report.write(&out)?;
    let complete = rows.len() == total;
    finish(
        &report,
        &out,
        &start,
        "generated",
        selection,
        complete,
        args,
    )?;
    Ok((report, out))
}

/// The control of each lane of the sequence, in its order: the unmutated
/// base build with every trial a mutant runs there.
pub fn control_plans(lanes: &[SequenceLane], harness: &[String]) -> Vec<ControlPlan> {
    lanes
        .iter()
        .map(|lane| ControlPlan {
            target: lane.target,
            trials: lane.trials.clone(),
            flags: control::without_kvcr(&lane.flags(harness)),
        })
        .collect()
}

/// `mutant`'s child on `lane`: the patched build, the lane's trials, its
/// run under `DIR/runs/<name>/<target>/`.
fn mutant_child(
    repo_root: &Path,
    out: &Path,
    mutant: &GeneratedMutant,
    lane: &SequenceLane,
    binary: PathBuf,
    harness: &[String],
) -> Phase1Child {
    let mut flags = lane.flags(harness);
    flags.push("--kvcr".into());
    flags.push(format!("{}+{}", KvcrSpec::default(), mutant.diff.display()));
    Phase1Child {
        binary,
        repo_root: repo_root.to_path_buf(),
        flags,
        filters: lane.trials.clone(),
        exact: true,
        run_base: out.join("runs").join(&mutant.name).join(lane.target),
    }
}

/// Runs `mutant` on `lanes` in order, each through `child(i, lane)`, until
/// one does not pass ([`sequence::walk`]): the row of the lane that ended
/// it (a survivor's last), with every lane it passed.
fn run_sequence(
    mutant: &GeneratedMutant,
    lanes: &[SequenceLane],
    child: impl Fn(usize, &SequenceLane) -> Phase1Child,
) -> Result<MutantRow, String> {
    let (passed, ended) = sequence::walk(
        lanes,
        |i, lane| {
            if i > 0 {
                println!(
                    "    {}: passed {}; on to {}",
                    mutant.name,
                    lanes[i - 1].target,
                    lane.target
                );
            }
            run_one(mutant, lane.target, &lane.trials, &child(i, lane))
        },
        |row: &MutantRow| &row.result,
    )?;
    let mut row = ended.ok_or("a lane sequence without a lane")?;
    row.passed = passed.iter().map(PassedLane::of).collect();
    if matches!(row.result, MutantResult::Survived) {
        row.passed.push(PassedLane::of(&row));
    }
    Ok(row)
}

/// The earlier run's table in `out` when its rows may be kept (same
/// engine, harness flags and lanes); says why when they may not.
fn earlier_lane(out: &Path, args: &MutantsArgs, lanes: &[&str]) -> Option<resume::EarlierLane> {
    let earlier = match resume::EarlierLane::read(out) {
        Ok(earlier) => earlier?,
        Err(why) => {
            println!("not resuming: the earlier table does not read ({why}); every draw runs");
            return None;
        }
    };
    match earlier.mismatch(args.engine.as_str(), &args.harness, lanes) {
        None => Some(earlier),
        Some(why) => {
            println!(
                "not resuming the earlier run in {}: {why}; every draw runs",
                out.display()
            );
            None
        }
    }
}

/// The test target that runs phase 1's cases on `engine`'s aggregated
/// dense stack (the first lane of every sequence without `--lanes`).
pub fn target(engine: Kind) -> Result<&'static str, String> {
    let stack = StackSpec::new(engine, Topology::Agg, GeometryKind::Dense);
    Lane::running(stack, crate::cases::PHASE1).map(|lane| lane.target)
}

/// One lane's run of `mutant`, a kill run a second time to confirm it.
fn run_one(
    mutant: &GeneratedMutant,
    target: &str,
    trials: &[String],
    child: &Phase1Child,
) -> Result<MutantRow, String> {
    let head = RowHead {
        name: mutant.name.clone(),
        class: format!("generated:{}", mutant.site.module_name()),
        // The modules sampled are the ones Phase 1 claims to cover.
        phase1_claims_it: true,
        expect: NO_EXPECTATION.into(),
        expected_message: None,
        equivalent: false,
    };
    // No expectation: "met" says a verdict was reached (a flaky kill is none).
    let reached = |result: &MutantResult| {
        !matches!(
            result,
            MutantResult::Broken { .. } | MutantResult::Flaky { .. }
        )
    };
    let mut row = run_child(child, trials, None)?.into_row(head, target, trials, child, reached);
    if !matches!(row.result, MutantResult::Killed { .. }) {
        return Ok(row);
    }
    // A kill counts only when a second run fails the same trial the same way.
    println!(
        "    {}: {} on {target}; running {target} again to confirm the kill",
        mutant.name,
        resume::result_words(&row.result)
    );
    let again = Phase1Child {
        run_base: rerun_base(&child.run_base),
        ..child.clone()
    };
    let second = run_child(&again, trials, None)?;
    row.rerun = Some(Rerun {
        result: second.result.clone(),
        child: ChildEvidence::new(
            again.command_line(),
            second.read.as_ref(),
            second.log,
            &second.exit,
        ),
    });
    row.result = row.result.confirmed_by(second.result);
    row.met = reached(&row.result);
    Ok(row)
}

/// Where a kill's second run goes: beside the first (`runs/<name>-rerun`).
fn rerun_base(run_base: &Path) -> PathBuf {
    let mut name = run_base
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push("-rerun");
    run_base.with_file_name(name)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::super::trials as phase1_trials;
    use super::*;

    /// A stand-in test binary that makes its run directory under
    /// `--run-dir` and writes `results.json` there.
    fn fake_binary(dir: &Path, results: &str, exit: i32) -> PathBuf {
        let script = format!(
            "#!/bin/sh\necho \"$@\"\nwhile [ \"$1\" != --run-dir ]; do shift; done\n\
             run=\"$2/phase1/20261201T000000Z-1-abcd\"\nmkdir -p \"$run\"\n\
             cat > \"$run/results.json\" <<'EOF'\n{results}\nEOF\nexit {exit}\n"
        );
        let path = dir.join("phase1-fake");
        crate::mutants::driver::write_executable(&path, &script);
        path
    }

    fn results(failed: Option<(&str, &str)>) -> String {
        results_of(&phase1_trials(), failed)
    }

    /// A run's results.json: each of `trials` passed but `failed`.
    fn results_of(trials: &[String], failed: Option<(&str, &str)>) -> String {
        let cases: Vec<String> = trials
            .iter()
            .map(|t| match failed {
                Some((name, message)) if name == t => {
                    format!(r#"{{"name":"{t}","outcome":"failed","message":"{message}"}}"#)
                }
                _ => format!(r#"{{"name":"{t}","outcome":"passed"}}"#),
            })
            .collect();
        format!(
            r#"{{"schema_version":1,"run":{{"cases":[{}]}}}}"#,
            cases.join(",")
        )
    }

    fn mutant(dir: &Path) -> GeneratedMutant {
        let site = Site {
            module: "kvcr/local_dram.py".into(),
            operator: "core/ReplaceComparisonOperator_Lt_LtE".into(),
            occurrence: 3,
            start: [412, 8],
            end: [412, 9],
            definition: Some("deliver".into()),
        };
        GeneratedMutant {
            name: site.name(),
            site,
            draw: 0,
            diff: dir.join("diffs/m.diff"),
        }
    }

    fn run(dir: &Path, results: &str, exit: i32) -> MutantRow {
        let m = mutant(dir);
        let trials = phase1_trials();
        let child = Phase1Child {
            binary: fake_binary(dir, results, exit),
            repo_root: dir.to_path_buf(),
            flags: vec!["--kvcr".into(), format!("pypi:0.1.1+{}", m.diff.display())],
            filters: trials.clone(),
            exact: true,
            run_base: dir.join("runs").join(&m.name),
        };
        run_one(&m, "phase1", &trials, &child).unwrap()
    }

    #[test]
    fn a_generated_kill_names_its_trial_and_message_without_an_expectation() {
        let tmp = tempfile::tempdir().unwrap();
        let row = run(
            tmp.path(),
            &results(Some((
                "TC-02::local_dram_flow",
                "host-tier (DRAM) hit: 3 blocks",
            ))),
            101,
        );
        let MutantResult::Killed {
            trial,
            message,
            message_matches,
            ..
        } = &row.result
        else {
            panic!("{:?}", row.result)
        };
        assert_eq!(trial, "TC-02::local_dram_flow");
        assert_eq!(message, "host-tier (DRAM) hit: 3 blocks");
        assert!(!message_matches, "no header, no expected message");
        assert!(row.met, "a verdict was reached");
        let rerun = row.rerun.as_ref().expect("a kill is run twice");
        assert_eq!(rerun.result.word(), "killed", "and repeated");
        assert_eq!(row.expect, NO_EXPECTATION);
        assert_eq!(row.class, "generated:local_dram");
        assert_eq!(
            row.name,
            "gen-local_dram-ReplaceComparisonOperator_Lt_LtE-3-L412"
        );
        let log = std::fs::read_to_string(&row.child.log).unwrap();
        assert!(log.contains("--kvcr pypi:0.1.1+"), "{log}");
        assert!(
            log.contains("--exact TC-01::generation_correctness"),
            "{log}"
        );
    }

    /// A stand-in whose first run writes `first` and every later run
    /// `then` (it counts its runs in a file beside it).
    fn flipping_binary(dir: &Path, first: &str, then: &str) -> PathBuf {
        let script = format!(
            "#!/bin/sh\nwhile [ \"$1\" != --run-dir ]; do shift; done\n\
             run=\"$2/phase1/20261201T000000Z-1-abcd\"\nmkdir -p \"$run\"\n\
             count={count}\nif [ -e \"$count\" ]; then\n\
             cat > \"$run/results.json\" <<'END'\n{then}\nEND\nelse\ntouch \"$count\"\n\
             cat > \"$run/results.json\" <<'END'\n{first}\nEND\nfi\nexit 101\n",
            count = dir.join("ran-once").display()
        );
        let path = dir.join("phase1-flip");
        crate::mutants::driver::write_executable(&path, &script);
        path
    }

    #[test]
    fn a_kill_is_run_again_and_counts_only_when_it_repeats() {
        let tmp = tempfile::tempdir().unwrap();
        let kill = results(Some((
            "TC-04::guard_takeover_and_replacement",
            "worker-A.1 gave up waiting for worker-A.1 to register in Dynamo's discovery",
        )));
        let m = mutant(tmp.path());
        let trials = phase1_trials();
        let child = Phase1Child {
            binary: flipping_binary(tmp.path(), &kill, &results(None)),
            repo_root: tmp.path().to_path_buf(),
            flags: vec!["--kvcr".into(), format!("pypi:0.1.1+{}", m.diff.display())],
            filters: trials.clone(),
            exact: true,
            run_base: tmp.path().join("runs").join(&m.name),
        };
        let row = run_one(&m, "phase1", &trials, &child).unwrap();
        let MutantResult::Flaky { first, second } = &row.result else {
            panic!("a kill that did not repeat is flaky: {:?}", row.result)
        };
        assert_eq!(first.word(), "killed");
        assert_eq!(**second, MutantResult::Survived);
        assert!(!row.met, "flaky is no verdict");
        // Both runs' evidence: the first in the row, the second in `rerun`.
        assert!(row
            .child
            .run_dir
            .as_ref()
            .unwrap()
            .join("results.json")
            .is_file());
        let rerun = row.rerun.as_ref().expect("the second run's evidence");
        assert_eq!(rerun.result, MutantResult::Survived);
        let second_dir = rerun.child.run_dir.as_ref().unwrap();
        assert!(second_dir.starts_with(tmp.path().join("runs").join(format!("{}-rerun", m.name))));
        assert!(second_dir.join("results.json").is_file());
        assert!(rerun.child.log.is_file());
    }

    #[test]
    fn a_generated_survivor_passed_every_trial_and_a_missing_trial_is_broken() {
        let tmp = tempfile::tempdir().unwrap();
        let row = run(tmp.path(), &results(None), 0);
        assert_eq!(row.result, MutantResult::Survived);
        assert!(row.met);

        let tmp = tempfile::tempdir().unwrap();
        let partial = r#"{"schema_version":1,"run":{"cases":[{"name":"TC-01::generation_correctness","outcome":"passed"}]}}"#;
        let row = run(tmp.path(), partial, 0);
        let MutantResult::Broken { why } = &row.result else {
            panic!("{:?}", row.result)
        };
        assert!(why.contains("TC-02::local_dram_flow"), "{why}");
        assert!(!row.met, "no verdict");
    }

    #[test]
    fn a_draw_of_the_same_seed_count_and_modules_is_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path());
        std::fs::create_dir_all(m.diff.parent().unwrap()).unwrap();
        std::fs::write(&m.diff, "--- a/kvcr/local_dram.py\n").unwrap();
        let args = GeneratedArgs {
            count: 1,
            seed: 5,
            modules: vec!["local_dram".into()],
            draw_only: false,
            lanes: vec!["phase1"],
        };
        let record = SampleRecord {
            tool: COSMIC_RAY.into(),
            kvcr_version: "0.1.1".into(),
            modules: args.modules.clone(),
            seed: 5,
            count: 1,
            sites: vec![("local_dram".into(), 1)],
            sites_total: 1,
            mutants: vec![m.clone()],
            skipped: vec![],
        };
        let json = serde_json::to_string(&record).unwrap();
        std::fs::write(tmp.path().join("sample.json"), json).unwrap();
        let again = earlier_draw(tmp.path(), &args).expect("reused");
        assert_eq!(again.mutants[0].name, m.name);
        let other_seed = GeneratedArgs {
            seed: 6,
            ..args.clone()
        };
        assert!(earlier_draw(tmp.path(), &other_seed).is_none());
        std::fs::remove_file(&m.diff).unwrap();
        assert!(earlier_draw(tmp.path(), &args).is_none(), "a diff is gone");
    }

    #[test]
    fn each_engine_runs_its_aggregated_target() {
        assert_eq!(target(Kind::Cpu), Ok("phase1"));
        assert_eq!(target(Kind::Vllm), Ok("phase1_vllm"));
        let err = target(Kind::Sglang).unwrap_err();
        assert!(err.contains("on sglang/agg/dense"), "{err}");
    }

    /// A stand-in test binary for `lane` that writes `results` into its run
    /// directory and exits `exit`, as the lane's target would.
    fn lane_binary(dir: &Path, lane: &str, results: &str, exit: i32) -> PathBuf {
        let script = format!(
            "#!/bin/sh\nwhile [ \"$1\" != --run-dir ]; do shift; done\n\
             run=\"$2/{lane}/20261201T000000Z-1-abcd\"\nmkdir -p \"$run\"\n\
             cat > \"$run/results.json\" <<'EOF'\n{results}\nEOF\nexit {exit}\n"
        );
        let path = dir.join(format!("{lane}-fake"));
        crate::mutants::driver::write_executable(&path, &script);
        path
    }

    /// Runs `m` on the default CPU sequence, lane `kill_on` (if any)
    /// failing its first trial on every run, the others passing.
    fn sequence_run(dir: &Path, m: &GeneratedMutant, kill_on: Option<&str>) -> MutantRow {
        let lanes = sequence::plan(sequence::CPU_LANES).unwrap();
        let mut binaries = Vec::new();
        for lane in &lanes {
            let (text, exit) = match kill_on == Some(lane.target) {
                true => (
                    results_of(&lane.trials, Some((&lane.trials[0], "a claim: 3 ≠ 4"))),
                    101,
                ),
                false => (results_of(&lane.trials, None), 0),
            };
            binaries.push((lane.target, lane_binary(dir, lane.target, &text, exit)));
        }
        let child = |i: usize, lane: &SequenceLane| {
            let (target, binary) = &binaries[i];
            assert_eq!(*target, lane.target);
            mutant_child(dir, dir, m, lane, binary.clone(), &[])
        };
        run_sequence(m, &lanes, child).unwrap()
    }

    #[test]
    fn a_mutant_runs_lane_after_lane_and_is_killed_on_the_first_that_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path());
        let row = sequence_run(tmp.path(), &m, Some("phase3_api"));
        let MutantResult::Killed { trial, .. } = &row.result else {
            panic!("{:?}", row.result)
        };
        assert_eq!(trial, "TC-18::engine_memory_peer_read");
        assert_eq!(row.target, "phase3_api", "the lane of the kill");
        assert_eq!(row.lanes_passed(), ["phase1", "phase2"]);
        assert_eq!(row.passed[1].trials[0], "TC-07::pool_pressure_and_eviction");
        let rerun = row.rerun.as_ref().expect("the kill's lane ran twice");
        assert_eq!(rerun.result.word(), "killed");
        assert!(rerun.child.log.starts_with(
            tmp.path()
                .join("runs")
                .join(&m.name)
                .join("phase3_api-rerun")
        ));
        let runs = tmp.path().join("runs").join(&m.name);
        for lane in ["phase1", "phase2", "phase3_api"] {
            assert!(runs.join(lane).join("child.log").is_file(), "{lane} ran");
        }
        for lane in ["phase3", "phase2_g3"] {
            assert!(!runs.join(lane).exists(), "{lane} ran after the kill");
        }
        // Each lane's run is its own, with the patched build.
        let phase2 = &row.passed[1].child;
        assert!(
            phase2.command.contains("phase2-fake")
                && phase2.command.contains(&format!("+{}", m.diff.display()))
        );
        assert!(phase2
            .run_dir
            .as_ref()
            .unwrap()
            .starts_with(runs.join("phase2")));
        assert_eq!(
            row.lane_words(),
            "killed on phase3_api (passed phase1, phase2)"
        );
        assert!(row.met);
    }

    #[test]
    fn a_survivor_passed_every_lane_of_the_sequence() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path());
        let row = sequence_run(tmp.path(), &m, None);
        assert_eq!(row.result, MutantResult::Survived);
        assert_eq!(row.lanes_passed(), sequence::CPU_LANES);
        assert_eq!(row.target, "phase2_g3", "its last lane");
        assert_eq!(
            row.trials,
            [
                "TC-12::g3_read_bench",
                "TC-12::disk_tier",
                "TC-20::full_tiers",
                "TC-24::deadline_storm"
            ]
        );
        assert!(row.rerun.is_none());
        let sum: f64 = row.passed.iter().map(|p| p.child.wall_s).sum();
        assert!((row.wall_s() - sum).abs() < 1e-9, "every lane's time, once");
        assert_eq!(
            row.lane_words(),
            "passed phase1, phase2, phase3_api, phase3, phase2_g3"
        );
    }

    #[test]
    fn a_kill_on_the_first_lane_runs_no_other() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path());
        let row = sequence_run(tmp.path(), &m, Some("phase1"));
        assert_eq!(row.result.word(), "killed");
        assert_eq!(row.target, "phase1");
        assert!(row.passed.is_empty());
        assert!(!tmp
            .path()
            .join("runs")
            .join(&m.name)
            .join("phase2")
            .exists());
    }

    /// The control runs every lane of the sequence, in its order, with the
    /// trials a mutant runs there on the base build.
    #[test]
    fn the_control_runs_each_lane_of_the_sequence_on_the_base_build() {
        let lanes = sequence::plan(&["phase1", "phase2", "phase3_scale"]).unwrap();
        let harness = vec!["--log-level".to_string(), "debug".to_string()];
        let plans = control_plans(&lanes, &harness);
        let targets: Vec<&str> = plans.iter().map(|p| p.target).collect();
        assert_eq!(targets, ["phase1", "phase2", "phase3_scale"]);
        for (plan, lane) in plans.iter().zip(&lanes) {
            assert_eq!(plan.trials, lane.trials);
        }
        assert_eq!(
            plans[0].flags,
            ["--log-level", "debug", "--kvcr", "pypi:0.1.1"]
        );
        assert_eq!(
            plans[2].flags,
            [
                "--log-level",
                "debug",
                "--include-ignored",
                "--kvcr",
                "pypi:0.1.1"
            ],
            "an ignored lane's trials are asked for"
        );
    }
}
