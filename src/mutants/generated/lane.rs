//! `kvcr-e2e mutants --generated N --seed S`: draw the sample, write each
//! mutant's diff under the lane's directory, and run each as a child of
//! each lane of the sequence (`--lanes`) with `--kvcr <default
//! build>+<diff>`, until a lane does not pass; each lane's run classified
//! as the curated ones are.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::coverage::{self, DrawPlan, LaneCoverage, PlanFile};
use super::diff;
use super::resume;
use super::sample::{self, Site};
use super::sequence::{self, SequenceLane};
use super::tool::{PristineKvcr, Tool};
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
    let lanes = sequence::plan(&generated.lanes).map_err(LaneError::Usage)?;
    // Checked before the draw: a wrong --coverage costs nothing.
    let guide = coverage_guide(repo_root, &generated.coverage, &lanes)?;
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
    let (plans, plan_file) = plan_draws(&record, &lanes, guide.as_ref())?;
    if let Some(file) = &plan_file {
        let path = file.write(&out)?;
        println!(
            "{}; each draw's lanes in {}",
            file.summary(),
            path.display()
        );
    }
    if generated.draw_only {
        for line in plan_file.iter().flat_map(PlanFile::lines) {
            println!("  {line}");
        }
        return Ok((report(now, args, &[], &[]), out));
    }
    let coverage_runs = guide.as_ref().map(|(c, _)| c.records()).unwrap_or_default();
    // Read before the control runs: a resume with other coverage runs is
    // refused before any stack starts.
    let earlier = earlier_lane(&out, args, &generated.lanes, &coverage_runs)?;
    let mut binaries: Vec<(&str, PathBuf)> = Vec::new();
    for lane in &lanes {
        let binary = drive::test_binary(repo_root, lane.target).map_err(|e| e.to_string())?;
        binaries.push((lane.target, binary));
    }
    let coverage_words = match coverage_runs.is_empty() {
        true => String::new(),
        false => format!(
            " --coverage {}",
            coverage_runs
                .iter()
                .map(|r| r.lane.as_str())
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    let selection = format!(
        "--generated {} --seed {} --modules {} --lanes {}{coverage_words} ({} drawn, {COSMIC_RAY}, kvcr {})",
        generated.count,
        generated.seed,
        generated.modules.join(","),
        generated.lanes.join(","),
        record.mutants.len(),
        record.kvcr_version
    );
    let table = |control: &[ControlRun], rows: &[MutantRow]| {
        report(now, args, control, rows)
            .with_lanes(&generated.lanes)
            .with_coverage(&coverage_runs)
    };
    let control = control::run_all(
        repo_root,
        &control_plans(&lanes, &args.harness),
        &binaries,
        &out,
    )?;
    if let Some((coverage, _)) = &guide {
        // The control ran the build the coverage runs measured.
        for seen in control.iter().filter_map(|c| c.kvcr.as_ref()) {
            coverage.check_build(&seen.files_sha256)?;
        }
    }
    if table(&control, &[]).refused.is_some() {
        // No draw runs, but the table keeps what an earlier run finished.
        let kept = resume::kept_rows(earlier.as_ref(), &record.mutants, &plans);
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
    let (mut kept, mut ran, mut no_lane, mut stopping) = (0, 0, 0, false);
    for (i, (mutant, plan)) in record.mutants.iter().zip(&plans).enumerate() {
        let earlier_row = earlier
            .as_ref()
            .map(|e| resume::decide_planned(e, mutant, plan))
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
        if plan.run.is_empty() {
            // No lane can kill it, and no stack starts: recorded even
            // after a stop.
            let row = run_planned(mutant, plan, |_, _| unreachable!("no lane runs"))?;
            println!(
                "[{}/{total}] {}: survived without a stack: {}",
                i + 1,
                mutant.name,
                coverage::none_ran_words(&plan.skipped)
            );
            rows.push(row);
            no_lane += 1;
            table(&control, &rows).write(&out)?;
            continue;
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
        let skips = match plan.skipped.is_empty() {
            true => String::new(),
            false => format!(
                " (skipped by coverage: {})",
                coverage::skipped_words(&plan.skipped)
            ),
        };
        println!(
            "[{}/{total}] {}: {}{skips}",
            i + 1,
            mutant.name,
            plan.targets().join(" → ")
        );
        let child = |_: usize, lane: &SequenceLane| {
            let binary = binaries
                .iter()
                .find(|(t, _)| *t == lane.target)
                .map(|(_, b)| b.clone())
                .unwrap_or_default();
            mutant_child(repo_root, &out, mutant, lane, binary, &args.harness)
        };
        let row = run_planned(mutant, plan, child)?;
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
    if no_lane > 0 {
        println!("{no_lane} of {total} draws ran no lane: their line ran in none of the lanes' coverage runs");
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

/// Runs `mutant` on the lanes of its `plan` ([`run_sequence`]), its row
/// naming the lanes coverage skipped; a plan that runs no lane is a
/// survivor without a stack ([`no_lane_row`]), and `child` is not called.
fn run_planned(
    mutant: &GeneratedMutant,
    plan: &DrawPlan,
    child: impl Fn(usize, &SequenceLane) -> Phase1Child,
) -> Result<MutantRow, String> {
    if plan.run.is_empty() {
        return Ok(no_lane_row(mutant, plan));
    }
    let mut row = run_sequence(mutant, &plan.run, child)?;
    row.skipped_by_coverage = plan.skipped.clone();
    Ok(row)
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
/// engine, harness flags and lanes); says why when they may not. One that
/// could be resumed but was guided by other coverage runs than
/// `coverage_runs` refuses the run.
fn earlier_lane(
    out: &Path,
    args: &MutantsArgs,
    lanes: &[&str],
    coverage_runs: &[coverage::CoverageRunRecord],
) -> Result<Option<resume::EarlierLane>, LaneError> {
    let earlier = match resume::EarlierLane::read(out) {
        Ok(Some(earlier)) => earlier,
        Ok(None) => return Ok(None),
        Err(why) => {
            println!("not resuming: the earlier table does not read ({why}); every draw runs");
            return Ok(None);
        }
    };
    if let Some(why) = earlier.mismatch(args.engine.as_str(), &args.harness, lanes) {
        println!(
            "not resuming the earlier run in {}: {why}; every draw runs",
            out.display()
        );
        return Ok(None);
    }
    match earlier.coverage_mismatch(coverage_runs) {
        None => Ok(Some(earlier)),
        Some(why) => Err(LaneError::Usage(format!(
            "the earlier run in {} cannot be resumed: {why}",
            out.display()
        ))),
    }
}

/// The coverage runs of `dirs`, checked against the sequence `lanes` and
/// the base build, with the base build; `None` without `--coverage`.
fn coverage_guide(
    repo_root: &Path,
    dirs: &[PathBuf],
    lanes: &[SequenceLane],
) -> Result<Option<(LaneCoverage, PristineKvcr)>, LaneError> {
    if dirs.is_empty() {
        return Ok(None);
    }
    let coverage = LaneCoverage::load(dirs, lanes).map_err(LaneError::Usage)?;
    let pristine = PristineKvcr::find(repo_root)?;
    coverage
        .check_build(&pristine.files_sha256()?)
        .map_err(LaneError::Usage)?;
    let lost: Vec<String> = coverage
        .records()
        .iter()
        .filter(|r| !r.processes_without_data.is_empty())
        .map(|r| format!("{}: {}", r.lane, r.processes_without_data.join(", ")))
        .collect();
    if !lost.is_empty() {
        println!(
            "note: some KVCR processes of the coverage runs saved no data (SIGKILLed unasked, or ended by os._exit), \
             so a line only they ran reads as not run there, which can turn a kill into a \
             survivor, never the other way: {}",
            lost.join("; ")
        );
    }
    Ok(Some((coverage, pristine)))
}

/// Each draw's lanes, and with coverage the plan file that lists them.
fn plan_draws(
    record: &SampleRecord,
    lanes: &[SequenceLane],
    guide: Option<&(LaneCoverage, PristineKvcr)>,
) -> Result<(Vec<DrawPlan>, Option<PlanFile>), String> {
    let Some((coverage, pristine)) = guide else {
        return Ok((
            coverage::draw_plans(&record.mutants, lanes, None, &[]),
            None,
        ));
    };
    let sites: Vec<(String, u32)> = record
        .mutants
        .iter()
        .map(|m| (m.site.module.clone(), m.site.start[0]))
        .collect();
    let statements = coverage::statement_lines(&pristine.python, &pristine.root, &sites)?;
    let plans = coverage::draw_plans(&record.mutants, lanes, Some(coverage), &statements);
    let file = PlanFile::new(coverage, lanes, &record.mutants, &plans);
    Ok((plans, Some(file)))
}

/// The row of a draw whose every lane was skipped by coverage: survived,
/// with no stack, no trial and no command.
fn no_lane_row(mutant: &GeneratedMutant, plan: &DrawPlan) -> MutantRow {
    let head = row_head(mutant);
    MutantRow {
        name: head.name,
        class: head.class,
        phase1_claims_it: head.phase1_claims_it,
        expect: head.expect,
        expected_message: head.expected_message,
        target: String::new(),
        trials: Vec::new(),
        result: MutantResult::Survived,
        // A verdict: no lane of the sequence can see it.
        met: true,
        child: ChildEvidence {
            command: String::new(),
            run_dir: None,
            log: PathBuf::new(),
            exit_code: None,
            wall_s: 0.0,
        },
        kvcr: None,
        equivalent: head.equivalent,
        rerun: None,
        passed: Vec::new(),
        skipped_by_coverage: plan.skipped.clone(),
    }
}

/// What a generated mutant's row says before it runs.
fn row_head(mutant: &GeneratedMutant) -> RowHead {
    RowHead {
        name: mutant.name.clone(),
        class: format!("generated:{}", mutant.site.module_name()),
        // The modules sampled are the ones Phase 1 claims to cover.
        phase1_claims_it: true,
        expect: NO_EXPECTATION.into(),
        expected_message: None,
        equivalent: false,
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
    let head = row_head(mutant);
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
            coverage: vec![],
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

    /// The default CPU sequence and a stand-in binary per lane: lane
    /// `kill_on` (if any) fails its first trial on every run, the others pass.
    fn sequence_binaries(
        dir: &Path,
        kill_on: Option<&str>,
    ) -> (Vec<SequenceLane>, Vec<(&'static str, PathBuf)>) {
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
        (lanes, binaries)
    }

    /// Runs `m` on the default CPU sequence, lane `kill_on` (if any)
    /// failing its first trial on every run, the others passing.
    fn sequence_run(dir: &Path, m: &GeneratedMutant, kill_on: Option<&str>) -> MutantRow {
        let (lanes, binaries) = sequence_binaries(dir, kill_on);
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

    /// The coverage runs of `lanes` under `dir` (fake, of one build):
    /// local_dram.py line 412 ran on the lanes of `ran_on`, on no other.
    fn coverage_of(dir: &Path, lanes: &[&str], ran_on: &[&str]) -> LaneCoverage {
        use super::super::coverage::tests::fake_run;
        let digest = "5bcf".repeat(16);
        let dirs: Vec<PathBuf> = lanes
            .iter()
            .map(|lane| {
                let lines: (&[u32], &[u32]) = match ran_on.contains(lane) {
                    true => (&[1, 412], &[]),
                    false => (&[1], &[412]),
                };
                fake_run(
                    dir,
                    lane,
                    &digest,
                    &[("local_dram.py", lines.0, lines.1)],
                    None,
                )
            })
            .collect();
        let sequence = sequence::plan(sequence::CPU_LANES).unwrap();
        LaneCoverage::load(&dirs, &sequence).unwrap()
    }

    /// Runs `m`'s `plan` with a stand-in binary per lane of the default
    /// sequence, `kill_on` failing its first trial.
    fn planned_run(
        dir: &Path,
        m: &GeneratedMutant,
        plan: &DrawPlan,
        kill_on: Option<&str>,
    ) -> MutantRow {
        let (_, binaries) = sequence_binaries(dir, kill_on);
        let child = |_: usize, lane: &SequenceLane| {
            let binary = binaries
                .iter()
                .find(|(t, _)| *t == lane.target)
                .unwrap()
                .1
                .clone();
            mutant_child(dir, dir, m, lane, binary, &[])
        };
        run_planned(m, plan, child).unwrap()
    }

    /// A mutant whose line ran on phase1 and phase3 only skips the other
    /// covered lanes; phase2_g3, without a coverage run, runs.
    #[test]
    fn a_mutant_skips_the_lanes_whose_coverage_run_never_ran_its_line() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path());
        let covered = ["phase1", "phase2", "phase3_api", "phase3"];
        let coverage = coverage_of(&tmp.path().join("cov"), &covered, &["phase1", "phase3"]);
        let sequence = sequence::plan(sequence::CPU_LANES).unwrap();
        let plan = coverage.plan(&sequence, &m.site.module, m.site.start[0], None);
        assert_eq!(plan.targets(), ["phase1", "phase3", "phase2_g3"]);

        let row = planned_run(tmp.path(), &m, &plan, Some("phase3"));
        assert_eq!(row.result.word(), "killed");
        assert_eq!(row.target, "phase3");
        assert_eq!(row.lanes_passed(), ["phase1"]);
        assert_eq!(row.lanes_skipped(), ["phase2", "phase3_api"]);
        let runs = tmp.path().join("runs").join(&m.name);
        assert!(runs.join("phase1").is_dir() && runs.join("phase3").is_dir());
        for lane in ["phase2", "phase3_api", "phase2_g3"] {
            assert!(!runs.join(lane).exists(), "{lane} ran");
        }
        assert_eq!(
            row.lane_words(),
            "killed on phase3 (passed phase1; skipped by coverage: phase2, phase3_api \
             (kvcr/local_dram.py line 412 not run in their coverage runs))"
        );

        let tmp = tempfile::tempdir().unwrap();
        let row = planned_run(tmp.path(), &m, &plan, None);
        assert_eq!(row.result, MutantResult::Survived);
        assert_eq!(row.lanes_passed(), ["phase1", "phase3", "phase2_g3"]);
        assert_eq!(row.target, "phase2_g3");
        assert!(row.lane_words().starts_with(
            "passed phase1, phase3, phase2_g3; skipped by coverage: phase2, phase3_api"
        ));
    }

    /// A line no lane ran: survived, with no stack, and recorded so in
    /// the table, mutants.json, the page and the score file; the score is
    /// killed / judged as ever, the survivor judged.
    #[test]
    fn a_draw_no_lane_can_kill_survives_without_a_stack() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path());
        let coverage = coverage_of(&tmp.path().join("cov"), sequence::CPU_LANES, &[]);
        let sequence = sequence::plan(sequence::CPU_LANES).unwrap();
        let plan = coverage.plan(&sequence, &m.site.module, m.site.start[0], None);
        assert!(plan.run.is_empty());
        let row = run_planned(&m, &plan, |_, _| panic!("no lane may start")).unwrap();
        assert_eq!(row.result, MutantResult::Survived);
        assert!(row.met && row.ran_no_lane() && row.rerun.is_none());
        assert_eq!(row.wall_s(), 0.0);
        assert_eq!(row.lanes_skipped(), sequence::CPU_LANES);
        let note = row.coverage_note().unwrap();
        assert!(
            note.starts_with(
                "kvcr/local_dram.py line 412 ran in none of the 5 lanes' coverage runs (phase1 "
            ),
            "{note}"
        );
        assert!(!tmp.path().join("runs").exists(), "no child ran");

        // Beside a kill: 1 of 2 judged killed.
        let kill_dir = tmp.path().join("k");
        std::fs::create_dir_all(&kill_dir).unwrap();
        let mut kill = sequence_run(&kill_dir, &mutant(tmp.path()), Some("phase1"));
        kill.name = "gen-killed".into();
        let records = coverage.records();
        let green = crate::mutants::control::sample(crate::mutants::control::ControlOutcome::Green);
        let report = LaneReport::new(
            "t".into(),
            "cpu",
            vec![],
            vec![green],
            vec![kill, row.clone()],
        )
        .with_lanes(sequence::CPU_LANES)
        .with_coverage(&records);
        let score = report.score_all();
        assert_eq!((score.killed, score.survived, score.judged()), (1, 1, 2));
        let table = report.table();
        let line = table.lines().find(|l| l.starts_with(&m.name)).unwrap();
        assert!(
            line.contains(" survived ")
                && line.contains("no lane run: kvcr/local_dram.py line 412"),
            "{table}"
        );
        assert!(
            table.contains("coverage run of phase3_api (a mutant skips it"),
            "{table}"
        );

        let doc = serde_json::to_value(&report).unwrap();
        assert_eq!(doc["coverage_runs"].as_array().unwrap().len(), 5);
        assert_eq!(doc["coverage_runs"][0]["lane"], "phase1");
        assert_eq!(
            doc["coverage_runs"][0]["kvcr_files_sha256"],
            "5bcf".repeat(16)
        );
        assert_eq!(
            doc["coverage_runs"][0]["started_at"],
            "2026-12-07T10:15:00Z"
        );
        let skipped = &doc["mutants"][1]["skipped_by_coverage"];
        assert_eq!(skipped.as_array().unwrap().len(), 5);
        assert_eq!(skipped[2]["lane"], "phase3_api");
        assert_eq!(skipped[2]["line"], 412);
        assert!(doc["mutants"][0].get("skipped_by_coverage").is_none());
        // mutants.json reads back for a resume.
        report.write(tmp.path()).unwrap();
        let earlier = resume::EarlierLane::read(tmp.path()).unwrap().unwrap();
        assert_eq!(earlier.coverage_runs, records);
        assert_eq!(earlier.mutants[1], row);

        let page = report.html(tmp.path());
        assert!(page.contains("no stack: no lane could kill it"), "{page}");
        assert!(page.contains("Coverage-guided"), "{page}");

        let start = BatchStart::now(Path::new(env!("CARGO_MANIFEST_DIR")));
        let file = crate::mutants::score::ScoreFile::new(
            &report,
            tmp.path(),
            "generated",
            "x".into(),
            &start,
            true,
        );
        assert_eq!(file.coverage_runs.len(), 5);
        assert_eq!(file.coverage_runs[0].kvcr_files_sha256, "5bcf".repeat(16));
        let scored = &file.mutants[1];
        assert_eq!(scored.outcome, "survived");
        assert_eq!(scored.lane, None);
        assert_eq!(scored.lanes_skipped_by_coverage, sequence::CPU_LANES);
        assert_eq!(scored.coverage_note.as_deref(), Some(note.as_str()));
        assert!(file.mutants[0].lanes_skipped_by_coverage.is_empty());
        assert_eq!(file.score.unwrap().all.rate, Some(0.5));
    }
}
