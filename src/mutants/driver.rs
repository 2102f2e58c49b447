//! `kvcr-e2e mutants`: each selected mutant on a fresh stack of its target,
//! as a child phase1 run, classified and tabled.

use std::path::{Path, PathBuf};

use time::macros::format_description;
use time::OffsetDateTime;

use super::args::MutantsArgs;
use super::classify::{classify_run, meets_expectation, MutantResult};
use super::control::{self, ControlRun};
use super::curated::{self, Mutant};
use super::plan::{plan, MutantRun};
use super::report::{expect_word, ChildEvidence, LaneReport, MutantRow};
use super::score::{self, BatchStart, ScoreFile};
use crate::drive::{self, ChildExit, Phase1Child, ReadRun};

/// Why the lane did not run to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneError {
    /// The command line asks for what is not there (an unknown `--only`
    /// name, a mutant of another lane): a usage error, exit status 2.
    Usage(String),
    /// The control (the unmutated build) was not green: the batch wrote
    /// what it has and is not scored; exit status 3.
    NotScored(String),
    /// Anything else (a header, a plan, a build, a child): exit status 1.
    Failed(String),
}

impl std::fmt::Display for LaneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaneError::Usage(e) | LaneError::NotScored(e) | LaneError::Failed(e) => f.write_str(e),
        }
    }
}

impl From<String> for LaneError {
    fn from(e: String) -> Self {
        LaneError::Failed(e)
    }
}

/// The mutants `args` select, or a usage error naming the known ones.
pub fn chosen(repo_root: &Path, args: &MutantsArgs) -> Result<Vec<Mutant>, LaneError> {
    let all = curated::load_all(&repo_root.join(super::MUTANTS_DIR))?;
    let chosen: Vec<Mutant> = curated::select(all, args.only.as_deref(), args.engine)
        .map_err(LaneError::Usage)?
        .into_iter()
        .map(|m| {
            let header = m.header.for_engine(args.engine);
            let header = match args.stack {
                Some(stack) => header.on_stack(stack).map_err(LaneError::Usage)?,
                None => header,
            };
            Ok(Mutant {
                header,
                diff: m.diff,
            })
        })
        .collect::<Result<_, LaneError>>()?;
    if chosen.is_empty() {
        return Err(LaneError::Usage(format!(
            "no curated mutant applies to the {} lane",
            args.engine.as_str()
        )));
    }
    Ok(chosen)
}

/// Runs the lane: the control on every target first, then each mutant;
/// progress goes to stdout, one line per run. Ends by writing the batch's
/// score file (and its `--record` copy).
pub fn run_lane(repo_root: &Path, args: &MutantsArgs) -> Result<(LaneReport, PathBuf), LaneError> {
    let chosen = chosen(repo_root, args)?;
    // Every plan is checked before the first child starts.
    let plans: Vec<(Mutant, MutantRun)> = chosen
        .into_iter()
        .map(|m| plan(&m, args.engine, &args.harness).map(|p| (m, p)))
        .collect::<Result<_, _>>()?;
    let start = BatchStart::now(repo_root);
    let now = start.at;
    let out = match &args.out {
        Some(dir) => absolute(dir),
        None => repo_root.join("target/mutants").join(stamp(now)),
    };
    let mut binaries: Vec<(&str, PathBuf)> = Vec::new();
    for (_, run) in &plans {
        if !binaries.iter().any(|(t, _)| *t == run.target) {
            let binary = drive::test_binary(repo_root, run.target)
                .map_err(|e| LaneError::Failed(e.to_string()))?;
            binaries.push((run.target, binary));
        }
    }
    let report = run_plans(repo_root, args, &plans, &binaries, &start, &out)?;
    Ok((report, out))
}

/// The batch once its binaries are built: the controls, then each mutant
/// of `plans` if they are green, then the score file.
pub(crate) fn run_plans(
    repo_root: &Path,
    args: &MutantsArgs,
    plans: &[(Mutant, MutantRun)],
    binaries: &[(&str, PathBuf)],
    start: &BatchStart,
    out: &Path,
) -> Result<LaneReport, LaneError> {
    let (now, start, out) = (start.at, start, out.to_path_buf());
    let runs: Vec<MutantRun> = plans.iter().map(|(_, r)| r.clone()).collect();
    let control = control::run_all(repo_root, &control::plans(&runs), binaries, &out)?;
    let selection = match &args.only {
        Some(names) => format!("--only {}", names.join(",")),
        None => format!("every curated mutant of the {} lane", args.engine.as_str()),
    };
    let mut rows = Vec::new();
    if report(now, args, &control, &rows).refused.is_some() {
        return Err(refuse(
            &report(now, args, &control, &rows),
            &out,
            start,
            selection,
            args,
        ));
    }
    let total = plans.len();
    for (i, (mutant, run)) in plans.iter().enumerate() {
        let binary = binaries
            .iter()
            .find(|(t, _)| *t == run.target)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| LaneError::Failed("a target without its binary".into()))?;
        let child = Phase1Child {
            binary,
            repo_root: repo_root.to_path_buf(),
            flags: run.flags.clone(),
            filters: run.trials.clone(),
            exact: true,
            run_base: out.join("runs").join(&mutant.header.name),
        };
        println!(
            "[{}/{total}] {} ({}): {} {}",
            i + 1,
            mutant.header.name,
            mutant.header.class,
            run.target,
            run.trials.join(" ")
        );
        let row = run_one(mutant, run, &child)?;
        let note = if row.met {
            ""
        } else {
            " (NOT what its header expects)"
        };
        print_finished(i, total, &row, note);
        rows.push(row);
        // Rewritten after each mutant: a lane cut short keeps what it ran.
        report(now, args, &control, &rows).write(&out)?;
    }
    let report = report(now, args, &control, &rows);
    report.write(&out)?;
    finish(&report, &out, start, "curated", selection, true, args)?;
    Ok(report)
}

/// Writes the batch's score file (and its `--record` copy) and says where.
pub(crate) fn finish(
    report: &LaneReport,
    out: &Path,
    start: &BatchStart,
    batch: &str,
    selection: String,
    complete: bool,
    args: &MutantsArgs,
) -> Result<ScoreFile, LaneError> {
    let file = ScoreFile::new(report, out, batch, selection, start, complete);
    let written = score::write_batch(&file, &start.file_name(), out, args.record.as_deref())?;
    for path in &written {
        println!("score file: {} ({})", path.display(), file.words());
    }
    Ok(file)
}

/// A batch whose control is not green: its table and score file say so,
/// and the error names the control's failures and where they are.
pub(crate) fn refuse(
    report: &LaneReport,
    out: &Path,
    start: &BatchStart,
    selection: String,
    args: &MutantsArgs,
) -> LaneError {
    let written = report.write(out);
    let batch = match args.generated {
        Some(_) => "generated",
        None => "curated",
    };
    let file = ScoreFile::new(report, out, batch, selection, start, false);
    let score = file.write(out, &start.file_name());
    let why = report.refused.clone().unwrap_or_default();
    let mut message = format!("not scored: {why}; no mutant ran");
    if !report.mutants.is_empty() {
        message.push_str(&format!(
            " (the table keeps the {} draws an earlier run finished)",
            report.mutants.len()
        ));
    }
    for control in &report.control {
        message.push_str(&format!(
            "\n  control {}: {} (log {})",
            control.target,
            control.child.command,
            control.child.log.display()
        ));
    }
    match (written, score) {
        (Ok(w), Ok(score)) => {
            message.push_str(&format!("\n  {}\n  {}", w.json.display(), score.display()))
        }
        (Err(e), _) | (_, Err(e)) => message.push_str(&format!("\n  {e}")),
    }
    LaneError::NotScored(message)
}

/// The lane's table as it stands (rewritten after each mutant).
pub(crate) fn report(
    started: OffsetDateTime,
    args: &MutantsArgs,
    control: &[ControlRun],
    rows: &[MutantRow],
) -> LaneReport {
    let started = started
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    LaneReport::new(
        started,
        args.engine.as_str(),
        args.harness.clone(),
        control.to_vec(),
        rows.to_vec(),
    )
}

/// One mutant's child run, read back and classified.
pub(crate) struct ChildOutcome {
    pub result: MutantResult,
    pub exit: ChildExit,
    pub log: PathBuf,
    pub read: Option<ReadRun>,
}

/// The progress line of the `i`th (0-based) of `total` mutants once it ran.
pub(crate) fn print_finished(i: usize, total: usize, row: &MutantRow, note: &str) {
    println!(
        "[{}/{total}] {}: {} in {:.0} s{note}",
        i + 1,
        row.name,
        row.result.word(),
        row.wall_s(),
    );
}

/// What a report row says of a mutant before it runs.
pub(crate) struct RowHead {
    pub name: String,
    pub class: String,
    pub phase1_claims_it: bool,
    pub expect: String,
    pub expected_message: Option<String>,
    /// A survivor its header reads as equivalent.
    pub equivalent: bool,
}

impl ChildOutcome {
    /// The report row of this run of `child` over `target`'s `trials`;
    /// `met` says whether the result is the one expected.
    pub(crate) fn into_row(
        self,
        head: RowHead,
        target: &str,
        trials: &[String],
        child: &Phase1Child,
        met: impl FnOnce(&MutantResult) -> bool,
    ) -> MutantRow {
        let ChildOutcome {
            result,
            exit,
            log,
            read,
        } = self;
        MutantRow {
            name: head.name,
            class: head.class,
            phase1_claims_it: head.phase1_claims_it,
            expect: head.expect,
            expected_message: head.expected_message,
            target: target.to_string(),
            trials: trials.to_vec(),
            met: met(&result),
            result,
            child: ChildEvidence::new(child.command_line(), read.as_ref(), log, &exit),
            kvcr: read.and_then(|r| r.kvcr),
            equivalent: head.equivalent,
            rerun: None,
            passed: Vec::new(),
            skipped_by_coverage: Vec::new(),
        }
    }
}

/// Runs `child` (its output in `child.log` of its run base), reads its run
/// directory and classifies it against `expected_message`.
pub(crate) fn run_child(
    child: &Phase1Child,
    trials: &[String],
    expected_message: Option<&str>,
) -> Result<ChildOutcome, String> {
    let log = child.run_base.join("child.log");
    let exit = child.run(&log).map_err(|e| e.to_string())?;
    let read = ReadRun::from_base(&child.run_base);
    let exit_words = match exit.code {
        Some(code) => format!("exit {code}"),
        None => "ended by a signal".to_string(),
    };
    let result = classify_run(
        expected_message,
        trials,
        read.as_ref()
            .map_err(|e| format!("{e} ({exit_words}; see {})", log.display())),
    );
    Ok(ChildOutcome {
        result,
        exit,
        log,
        read: read.ok(),
    })
}

fn run_one(mutant: &Mutant, run: &MutantRun, child: &Phase1Child) -> Result<MutantRow, String> {
    let header = &mutant.header;
    let head = RowHead {
        name: header.name.clone(),
        class: header.class.to_string(),
        phase1_claims_it: header.class.phase1_claims_it(),
        expect: expect_word(header.expect).to_string(),
        expected_message: header.message.clone(),
        equivalent: header
            .reading
            .as_deref()
            .is_some_and(|r| r.trim_start().starts_with("equivalent")),
    };
    Ok(
        run_child(child, &run.trials, header.message.as_deref())?.into_row(
            head,
            run.target,
            &run.trials,
            child,
            |result| meets_expectation(header, result),
        ),
    )
}

/// `20261201T163000Z`: the default output directory's name.
pub fn stamp(at: OffsetDateTime) -> String {
    at.format(format_description!(
        "[year][month][day]T[hour][minute][second]Z"
    ))
    .unwrap_or_else(|_| "run".into())
}

fn absolute(path: &Path) -> PathBuf {
    match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => cwd.join(path),
        _ => path.to_path_buf(),
    }
}

/// Writes `script` to `path` and makes it executable: a stand-in child for
/// the tests of the lanes.
#[cfg(test)]
pub(crate) fn write_executable(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(path, perms).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::MutantResult;

    /// A stand-in test binary: a script that, like phase1, makes its run
    /// directory under `--run-dir` and writes `files` (name, text) there.
    fn fake_binary(dir: &Path, files: &[(&str, &str)], exit: i32) -> PathBuf {
        let mut script = String::from(
            "#!/bin/sh\necho \"$@\"\nwhile [ \"$1\" != --run-dir ]; do shift; done\n\
             run=\"$2/phase1/20261201T000000Z-1-abcd\"\nmkdir -p \"$run\"\n",
        );
        for (name, text) in files {
            script.push_str(&format!("cat > \"$run/{name}\" <<'EOF'\n{text}\nEOF\n"));
        }
        script.push_str(&format!("exit {exit}\n"));
        let path = dir.join("phase1-fake");
        write_executable(&path, &script);
        path
    }

    fn curated(name: &str) -> Mutant {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate::mutants::MUTANTS_DIR);
        curated::load_all(&dir)
            .unwrap()
            .into_iter()
            .find(|m| m.header.name == name)
            .unwrap()
    }

    fn child(binary: PathBuf, run: &MutantRun, out: &Path) -> Phase1Child {
        Phase1Child {
            binary,
            repo_root: out.to_path_buf(),
            flags: run.flags.clone(),
            filters: run.trials.clone(),
            exact: true,
            run_base: out.join("runs/m"),
        }
    }

    #[test]
    fn a_child_that_fails_the_named_trial_is_a_kill_with_its_evidence() {
        let tmp = tempfile::tempdir().unwrap();
        let m = curated("source-write-bytes-double-counted");
        let run = plan(&m, crate::engine::Kind::Cpu, &[]).unwrap();
        let results = r#"{"schema_version":1,"run":{"cases":[
          {"name":"TC-01::generation_correctness","outcome":"passed"},
          {"name":"TC-03::hinted_peer_transfer","outcome":"failed","message":"peer transfer reconciles: target read bytes 32768 ≠ source_write bytes 65536"}],
          "kvcr":{"spec":"x+m.diff","version":"0.1.1","files_sha256":"f00d"}}}"#;
        let binary = fake_binary(tmp.path(), &[("results.json", results)], 101);
        let row = run_one(&m, &run, &child(binary, &run, tmp.path())).unwrap();
        assert_eq!(row.result.word(), "killed");
        assert!(row.met, "{:?}", row.result);
        assert_eq!(row.child.exit_code, Some(101));
        assert_eq!(row.kvcr.unwrap().files_sha256, "f00d");
        assert!(row
            .child
            .run_dir
            .unwrap()
            .ends_with("phase1/20261201T000000Z-1-abcd"));
        let log = std::fs::read_to_string(&row.child.log).unwrap();
        assert!(
            log.contains("--exact TC-01::generation_correctness TC-03::hinted_peer_transfer"),
            "{log}"
        );
        assert!(
            log.contains("--kvcr") && log.contains("source-write-bytes-double-counted.diff"),
            "{log}"
        );
    }

    #[test]
    fn a_child_whose_stack_did_not_start_is_broken_and_one_without_a_run_dir_too() {
        let tmp = tempfile::tempdir().unwrap();
        let m = curated("lru-evicts-newest");
        let run = plan(&m, crate::engine::Kind::Cpu, &[]).unwrap();
        let binary = fake_binary(
            tmp.path(),
            &[("setup-error.txt", "worker A exited 1 before ready")],
            101,
        );
        let row = run_one(&m, &run, &child(binary, &run, tmp.path())).unwrap();
        assert_eq!(
            row.result,
            MutantResult::Broken {
                why: "setup failed (setup-error.txt): worker A exited 1 before ready".into()
            }
        );
        assert!(!row.met);

        let tmp = tempfile::tempdir().unwrap();
        let crash = tmp.path().join("crash");
        write_executable(&crash, "#!/bin/sh\nexit 3\n");
        let row = run_one(&m, &run, &child(crash, &run, tmp.path())).unwrap();
        let MutantResult::Broken { why } = &row.result else {
            panic!("{:?}", row.result)
        };
        assert!(
            why.contains("no run directory") && why.contains("exit 3"),
            "{why}"
        );
    }

    #[test]
    fn an_unknown_only_name_is_a_usage_error_listing_the_known_ones() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let args = MutantsArgs::parse(&["--only".into(), "no-such-mutant".into()]).unwrap();
        let Err(LaneError::Usage(why)) = chosen(root, &args) else {
            panic!("an unknown name is not a usage error");
        };
        assert!(why.contains("no curated mutant `no-such-mutant`"), "{why}");
        assert!(
            why.contains("known: ") && why.contains("lru-evicts-newest"),
            "{why}"
        );
        let args = MutantsArgs::parse(&["--only".into(), "lru-evicts-newest".into()]).unwrap();
        assert_eq!(chosen(root, &args).unwrap().len(), 1);
    }

    /// A stand-in test binary that passes every trial on the base build
    /// (`--kvcr pypi:0.1.1`) when `control_passes`, and fails TC-03 on a
    /// mutant's build; it reports the build it was given.
    fn two_way_binary(dir: &Path, control_passes: bool) -> PathBuf {
        let control_outcome = match control_passes {
            true => r#""outcome":"passed""#,
            false => r#""outcome":"failed","message":"peer transfer reconciles: the base build""#,
        };
        let script = format!(
            r#"#!/bin/sh
kvcr=""; run=""
while [ $# -gt 0 ]; do
  case "$1" in --kvcr) kvcr="$2"; shift;; --run-dir) run="$2"; shift;; esac
  shift
done
dir="$run/phase1/20261201T000000Z-1-abcd"; mkdir -p "$dir"
case "$kvcr" in
  *.diff) tc03='"outcome":"failed","message":"peer transfer reconciles: target read bytes 32768 ≠ source_write bytes 65536"'; code=101;;
  *) tc03='{control_outcome}'; code=0;;
esac
cat > "$dir/results.json" <<END
{{"schema_version":1,"run":{{"cases":[
 {{"name":"TC-01::generation_correctness","outcome":"passed"}},
 {{"name":"TC-03::hinted_peer_transfer",$tc03}}],
 "kvcr":{{"spec":"$kvcr","version":"0.1.1","files_sha256":"5bcf"}}}}}}
END
exit $code
"#
        );
        let path = dir.join("phase1-fake");
        write_executable(&path, &script);
        path
    }

    /// The batch of `source-write-bytes-double-counted` against a stand-in.
    fn batch(
        control_passes: bool,
        record: Option<PathBuf>,
    ) -> (tempfile::TempDir, Result<LaneReport, LaneError>) {
        let tmp = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let m = curated("source-write-bytes-double-counted");
        let run = plan(&m, crate::engine::Kind::Cpu, &[]).unwrap();
        let binary = two_way_binary(tmp.path(), control_passes);
        let args = MutantsArgs {
            record,
            ..MutantsArgs::parse(&[]).unwrap()
        };
        let out = tmp.path().join("out");
        let result = run_plans(
            root,
            &args,
            &[(m, run)],
            &[("phase1", binary)],
            &BatchStart::now(root),
            &out,
        );
        (tmp, result)
    }

    fn score_file(out: &Path) -> serde_json::Value {
        let name = std::fs::read_dir(out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("mutation-score-") && n.ends_with(".json"))
            .expect("a score file");
        serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap()
    }

    #[test]
    fn a_red_control_refuses_to_score_runs_no_mutant_and_writes_what_it_has() {
        let (tmp, result) = batch(false, None);
        let Err(LaneError::NotScored(why)) = result else {
            panic!("a red control must refuse: {result:?}");
        };
        assert!(
            why.contains("not scored") && why.contains("no mutant ran"),
            "{why}"
        );
        assert!(
            why.contains(
                "phase1 RED: TC-03::hinted_peer_transfer: peer transfer reconciles: the base build"
            ),
            "{why}"
        );
        let out = tmp.path().join("out");
        let table: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("mutants.json")).unwrap())
                .unwrap();
        assert_eq!(table["control"][0]["outcome"]["kind"], "red");
        assert_eq!(
            table["mutants"].as_array().unwrap().len(),
            0,
            "no mutant ran"
        );
        assert!(table["refused"].as_str().unwrap().contains("not green"));
        assert!(!out.join("runs/source-write-bytes-double-counted").exists());
        let score = score_file(&out);
        assert!(score["score"].is_null(), "{score}");
        assert_eq!(score["control_green"], false);
        assert!(score["refused"].as_str().unwrap().contains("not green"));
    }

    #[test]
    fn a_green_control_then_a_kill_is_scored_in_a_stamped_dated_file() {
        let record = tempfile::tempdir().unwrap();
        let (tmp, result) = batch(true, Some(record.path().join("scores")));
        let report = result.unwrap();
        assert!(report.scored());
        assert_eq!(report.mutants[0].result.word(), "killed");
        assert!(report.all_met);
        let out = tmp.path().join("out");
        let score = score_file(&out);
        for field in [
            "schema_version",
            "batch",
            "selection",
            "engine",
            "started_at",
            "ended_at",
            "harness",
            "kvcr_base",
            "load_start",
            "load_end",
            "control",
            "score",
            "mutants",
        ] {
            assert!(!score[field].is_null(), "{field} missing: {score}");
        }
        assert_eq!(score["batch"], "curated");
        assert_eq!(score["control_green"], true);
        assert_eq!(score["complete"], true);
        let commit = score["harness"]["commit"]
            .as_str()
            .expect("the harness commit");
        assert_eq!(commit.len(), 40, "{commit}");
        assert!(score["harness"]["dirty"].is_boolean());
        assert_eq!(score["kvcr_base"]["spec"], "pypi:0.1.1");
        assert_eq!(score["kvcr_base"]["files_sha256"], "5bcf");
        assert_eq!(score["load_start"]["at"].as_array().unwrap().len(), 3);
        assert_eq!(score["control"][0]["target"], "phase1");
        assert_eq!(
            score["control"][0]["log"], "runs/control-phase1/child.log",
            "paths relative to the batch directory"
        );
        assert_eq!(score["score"]["all"]["killed"], 1);
        assert_eq!(score["score"]["all"]["judged"], 1);
        assert_eq!(score["score"]["all"]["rate"], 1.0);
        assert_eq!(
            score["mutants"][0]["name"],
            "source-write-bytes-double-counted"
        );
        assert_eq!(score["mutants"][0]["outcome"], "killed");
        assert_eq!(score["mutants"][0]["trial"], "TC-03::hinted_peer_transfer");
        // The same file, recorded where --record says.
        let recorded: Vec<_> = std::fs::read_dir(record.path().join("scores"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(recorded.len(), 1, "{recorded:?}");
        assert!(
            recorded[0].starts_with("mutation-score-20") && recorded[0].ends_with("Z.json"),
            "{recorded:?}"
        );
    }

    #[test]
    fn the_default_out_dir_is_a_utc_stamp() {
        let at = time::macros::datetime!(2026-12-01 16:30:05 UTC);
        assert_eq!(stamp(at), "20261201T163005Z");
    }
}
