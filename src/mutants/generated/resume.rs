//! Resuming a generated lane: a rerun of the same draw into the same
//! `--out` keeps each draw the earlier run finished (its outcome is in
//! `mutants.json` and its run directory holds its results) and runs only
//! the rest.

use std::path::Path;

use serde::Deserialize;

use super::lane::GeneratedMutant;
use crate::mutants::classify::MutantResult;
use crate::mutants::report::MutantRow;

/// What a rerun reads of the earlier `mutants.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct EarlierLane {
    pub engine: String,
    pub harness_flags: Vec<String>,
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
    /// `harness` flags running `trials`, or `None` when they can.
    pub fn mismatch(&self, engine: &str, harness: &[String]) -> Option<String> {
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
        None
    }
}

/// The earlier row of `mutant` to keep, or why it runs. A row is
/// kept when it is of the same mutant (name, diff, trials) and finished:
/// its child exited by itself (not by a signal) and left a run directory
/// with its `results.json`, and a kill was confirmed by a second run.
pub fn decide(
    earlier: &EarlierLane,
    mutant: &GeneratedMutant,
    trials: &[String],
) -> Result<MutantRow, &'static str> {
    let row = earlier
        .mutants
        .iter()
        .find(|r| r.name == mutant.name)
        .ok_or("not in the earlier table")?;
    if row.trials != trials {
        return Err("the earlier run asked other trials");
    }
    if !row
        .child
        .command
        .contains(&mutant.diff.display().to_string())
    {
        return Err("the earlier run applied another diff");
    }
    if row.child.exit_code.is_none() {
        return Err("its earlier child ended by a signal");
    }
    let finished = row
        .child
        .run_dir
        .as_ref()
        .is_some_and(|d| d.join("results.json").is_file());
    if !finished {
        return Err("its earlier run directory holds no results.json");
    }
    if matches!(row.result, MutantResult::Killed { .. }) && row.rerun.is_none() {
        // Made before kills were run twice: run it again, twice.
        return Err("its earlier kill was not run a second time");
    }
    Ok(row.clone())
}

/// `killed by TC-02::local_dram_flow`, `survived`, `broken: why`.
pub fn outcome_words(result: &MutantResult) -> String {
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
            outcome_words(first),
            outcome_words(second)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::generated;
    use crate::mutants::generated::sample::Site;
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
        }
    }

    fn lane(rows: Vec<MutantRow>) -> EarlierLane {
        EarlierLane {
            engine: "cpu".into(),
            harness_flags: vec![],
            mutants: rows,
        }
    }

    fn killed() -> MutantResult {
        MutantResult::Killed {
            trial: "TC-04::guard_takeover_and_replacement".into(),
            message: "m".into(),
            message_matches: false,
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
        assert_eq!(decide(&earlier, &a, &trials()).unwrap().result, killed());
        assert_eq!(
            decide(&earlier, &b, &trials()).unwrap().result,
            MutantResult::Survived
        );
        assert_eq!(decide(&earlier, &c, &trials()).unwrap().result, broken);
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
        let why = |m| decide(&earlier, m, &trials()).unwrap_err();
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
            decide(&lane(vec![old]), &m, &trials()).unwrap_err(),
            "its earlier kill was not run a second time"
        );
    }

    #[test]
    fn a_row_of_other_trials_or_another_diff_is_not_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let m = mutant(tmp.path(), 1);
        let earlier = lane(vec![row(tmp.path(), &m, killed(), true)]);
        assert_eq!(
            decide(&earlier, &m, &trials()[..2]).unwrap_err(),
            "the earlier run asked other trials"
        );
        let moved = GeneratedMutant {
            diff: tmp.path().join("elsewhere/m.diff"),
            ..m.clone()
        };
        assert_eq!(
            decide(&earlier, &moved, &trials()).unwrap_err(),
            "the earlier run applied another diff"
        );
    }

    #[test]
    fn other_harness_flags_or_engine_keep_nothing() {
        let earlier = lane(vec![]);
        assert!(earlier.mismatch("cpu", &[]).is_none());
        assert!(earlier
            .mismatch("vllm", &[])
            .unwrap()
            .contains("the cpu engine"));
        assert!(earlier
            .mismatch("cpu", &["--timeout-scale".into(), "2".into()])
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
            outcome_words(&earlier.mutants[0].result),
            "killed by TC-04::guard_takeover_and_replacement"
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
}
