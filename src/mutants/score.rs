//! The batch's score file: `mutation-score-<UTC stamp>.json` in the batch's
//! directory (and a copy wherever `--record DIR` says), one batch's numbers
//! with what they stand on: the harness commit, the KVCR base build the
//! control ran, the machine's load, the control's result and each mutant's
//! outcome. A mutation score quoted in the docs is one such file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::control::ControlRun;
use super::driver::stamp;
use super::generated::coverage::CoverageRunRecord;
use super::report::{ChildEvidence, LaneReport, Score};
use crate::drive::KvcrSeen;

/// Version of the score file's layout.
pub const SCORE_SCHEMA_VERSION: u32 = 1;

/// The harness build a batch ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessCommit {
    /// `git rev-parse HEAD` of the checkout; `None` outside a git checkout.
    pub commit: Option<String>,
    /// Tracked files changed, or untracked files not ignored.
    pub dirty: bool,
}

impl HarnessCommit {
    /// The checkout at `repo_root` as it is now.
    pub fn of(repo_root: &Path) -> HarnessCommit {
        match crate::pyenv::kvcr_files::git_state(repo_root) {
            Some(git) => HarnessCommit {
                commit: Some(git.commit),
                dirty: git.dirty,
            },
            None => HarnessCommit {
                commit: None,
                dirty: true,
            },
        }
    }
}

/// The machine's load at one moment: `/proc/loadavg`'s 1, 5 and 15 minute
/// averages (`None` where it cannot be read).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Load {
    pub at: Option<[f64; 3]>,
}

impl Load {
    pub fn now() -> Load {
        Load {
            at: crate::proc::procfs::load_average(),
        }
    }
}

/// When the batch ran and what it stood on, taken at its start.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchStart {
    pub at: OffsetDateTime,
    pub load: Load,
    pub harness: HarnessCommit,
}

impl BatchStart {
    pub fn now(repo_root: &Path) -> BatchStart {
        BatchStart {
            at: OffsetDateTime::now_utc(),
            load: Load::now(),
            harness: HarnessCommit::of(repo_root),
        }
    }

    /// `mutation-score-20261205T143000Z.json`.
    pub fn file_name(&self) -> String {
        format!("mutation-score-{}.json", stamp(self.at))
    }
}

/// One mutant's line in the score file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredMutant {
    pub name: String,
    pub class: String,
    /// `killed`, `survived`, `flaky` or `broken`.
    pub outcome: String,
    /// Whether its survival is read as equivalent (left out of the score).
    pub equivalent: bool,
    /// The first failed trial of a kill.
    pub trial: Option<String>,
    /// Whether a second run confirmed a kill (generated mutants).
    pub rerun: Option<String>,
    /// The mutant's run directory, relative to the batch directory where
    /// it lies under it.
    pub run_dir: Option<PathBuf>,
    /// A generated mutant's lane where it ended: its kill's (or where it
    /// broke or was flaky), a survivor's last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// A generated mutant's lanes it passed, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes_passed: Vec<String>,
    /// A generated mutant's lanes it did not run (`--coverage`): their
    /// coverage run never executed its line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes_skipped_by_coverage: Vec<String>,
    /// Why it skipped them (a survivor that ran no lane: its line ran in
    /// none of the lanes' coverage runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage_note: Option<String>,
}

/// The score of a scored batch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// Every mutant of the batch: killed / (killed + survived + flaky).
    pub all: Counted,
    /// The classes Phase 1 claims to check.
    pub phase1_claimed: Counted,
    /// Pool pressure, lifecycle and slowdowns, counted apart.
    pub not_yet_claimed: Counted,
}

/// One score and the counts it is made of.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Counted {
    pub killed: u32,
    pub survived: u32,
    pub flaky: u32,
    pub broken: u32,
    pub equivalent: u32,
    /// killed + survived + flaky: the denominator.
    pub judged: u32,
    /// killed / judged; `None` when nothing was judged.
    pub rate: Option<f64>,
}

impl From<Score> for Counted {
    fn from(s: Score) -> Counted {
        Counted {
            killed: s.killed,
            survived: s.survived,
            flaky: s.flaky,
            broken: s.broken,
            equivalent: s.equivalent,
            judged: s.judged(),
            rate: s.rate(),
        }
    }
}

/// The score file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreFile {
    pub schema_version: u32,
    /// `curated` or `generated`.
    pub batch: String,
    /// What was asked: the `--only` names, or the generated draw.
    pub selection: String,
    /// `cpu` or `vllm`.
    pub engine: String,
    pub harness_flags: Vec<String>,
    /// A generated batch's lanes, in the order each mutant runs them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<Vec<String>>,
    /// A generated batch's coverage runs (`--coverage`): lane, run
    /// directory, the build's files digest, when it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage_runs: Vec<CoverageRunRecord>,
    pub started_at: String,
    pub ended_at: String,
    pub harness: HarnessCommit,
    /// The KVCR base build every mutant's diff was applied to, as the
    /// control's run reported it (spec, version, files digest).
    pub kvcr_base: Option<KvcrSeen>,
    pub load_start: Load,
    pub load_end: Load,
    pub control: Vec<ControlRun>,
    pub control_green: bool,
    /// Whether every selected mutant ran (a batch ended by `stop` did not).
    pub complete: bool,
    /// `None`, with `refused` saying why, when the batch is not scored.
    pub score: Option<Scores>,
    pub refused: Option<String>,
    pub mutants: Vec<ScoredMutant>,
}

impl ScoreFile {
    /// The score file of `report`, the batch in `dir` that began at `start`.
    pub fn new(
        report: &LaneReport,
        dir: &Path,
        batch: &str,
        selection: String,
        start: &BatchStart,
        complete: bool,
    ) -> ScoreFile {
        let rfc = |t: OffsetDateTime| {
            t.format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default()
        };
        let control_green = report.refused.is_none();
        ScoreFile {
            schema_version: SCORE_SCHEMA_VERSION,
            batch: batch.into(),
            selection,
            engine: report.engine.clone(),
            harness_flags: report.harness_flags.clone(),
            lanes: report.lanes.clone(),
            coverage_runs: report
                .coverage_runs
                .iter()
                .map(|r| CoverageRunRecord {
                    run_dir: local_path(&r.run_dir, dir),
                    ..r.clone()
                })
                .collect(),
            started_at: rfc(start.at),
            ended_at: rfc(OffsetDateTime::now_utc()),
            harness: start.harness.clone(),
            kvcr_base: report.control.iter().find_map(|c| c.kvcr.clone()),
            load_start: start.load,
            load_end: Load::now(),
            control: report
                .control
                .iter()
                .map(|c| ControlRun {
                    child: ChildEvidence {
                        run_dir: c.child.run_dir.as_ref().map(|d| relative(d, dir)),
                        log: relative(&c.child.log, dir),
                        command: without_local_paths(&c.child.command, dir),
                        ..c.child.clone()
                    },
                    ..c.clone()
                })
                .collect(),
            control_green,
            complete,
            score: control_green.then(|| Scores {
                all: report.score_all().into(),
                phase1_claimed: report.score_phase1_claimed.into(),
                not_yet_claimed: report.score_not_yet_claimed.into(),
            }),
            refused: report.refused.clone(),
            mutants: report
                .mutants
                .iter()
                .map(|row| ScoredMutant {
                    name: row.name.clone(),
                    class: row.class.clone(),
                    outcome: row.result.word().into(),
                    equivalent: row.equivalent,
                    trial: match &row.result {
                        super::MutantResult::Killed { trial, .. } => Some(trial.clone()),
                        _ => None,
                    },
                    rerun: row.rerun.as_ref().map(|r| r.result.word().to_string()),
                    run_dir: row.child.run_dir.as_ref().map(|d| relative(d, dir)),
                    // None for one that ran no lane (skipped by coverage).
                    lane: (row.is_generated() && !row.ran_no_lane()).then(|| row.target.clone()),
                    lanes_passed: row.lanes_passed().into_iter().map(String::from).collect(),
                    lanes_skipped_by_coverage: row
                        .lanes_skipped()
                        .into_iter()
                        .map(String::from)
                        .collect(),
                    coverage_note: row.coverage_note(),
                })
                .collect(),
        }
    }

    /// Writes the file as `name` into `dir`; returns its path.
    pub fn write(&self, dir: &Path, name: &str) -> Result<PathBuf, String> {
        let path = dir.join(name);
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())? + "\n";
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }

    /// `all mutants: 12/15 killed (80 %), …` or `not scored: why`.
    pub fn words(&self) -> String {
        match (&self.score, &self.refused) {
            (Some(score), _) => {
                let all = score.all;
                let rate = all
                    .rate
                    .map(|r| format!(" ({:.0} %)", r * 100.0))
                    .unwrap_or_default();
                format!(
                    "{} of {} judged killed{rate}; {} survived, {} flaky, {} broken, {} equivalent",
                    all.killed, all.judged, all.survived, all.flaky, all.broken, all.equivalent
                )
            }
            (None, Some(why)) => format!("not scored: {why}"),
            (None, None) => "not scored".into(),
        }
    }
}

/// `path` relative to the batch directory `dir` where it lies under it.
fn relative(path: &Path, dir: &Path) -> PathBuf {
    path.strip_prefix(dir).unwrap_or(path).to_path_buf()
}

/// `path` relative to the batch directory, else to the working directory
/// (the checkout) where it lies under either: a recorded score file names
/// no path of the machine it ran on.
fn local_path(path: &Path, dir: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix(dir) {
        return rest.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => path.strip_prefix(&cwd).unwrap_or(path).to_path_buf(),
        Err(_) => path.to_path_buf(),
    }
}

/// A command line with the batch directory and the working directory (the
/// checkout) left out of its paths, so that a recorded score file names no
/// path of the machine it ran on.
fn without_local_paths(command: &str, dir: &Path) -> String {
    let mut command = command.replace(&format!("{}/", dir.display()), "");
    if let Ok(cwd) = std::env::current_dir() {
        command = command.replace(&format!("{}/", cwd.display()), "");
    }
    command
}

/// Writes the batch's score file into `dir` and, when `record` names a
/// directory, a copy there (a batch that is not scored, or did not run
/// every selected mutant, is not recorded: the docs quote scored, whole
/// batches only). Returns the paths written.
pub fn write_batch(
    file: &ScoreFile,
    name: &str,
    dir: &Path,
    record: Option<&Path>,
) -> Result<Vec<PathBuf>, String> {
    let mut written = vec![file.write(dir, name)?];
    if let Some(record) = record {
        if file.score.is_none() {
            return Err(format!(
                "not recording into {}: the batch is not scored ({}); its file is {}",
                record.display(),
                file.refused.as_deref().unwrap_or("no score"),
                written[0].display()
            ));
        }
        if !file.complete {
            return Err(format!(
                "not recording into {}: not every selected mutant ran; its file is {}",
                record.display(),
                written[0].display()
            ));
        }
        written.push(file.write(record, name)?);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::control::{sample, ControlOutcome};

    fn report(control: ControlOutcome) -> LaneReport {
        LaneReport::new(
            "2026-12-05T14:00:00Z".into(),
            "cpu",
            vec![],
            vec![sample(control)],
            vec![],
        )
    }

    #[test]
    fn a_recorded_command_names_no_path_of_this_machine() {
        let cwd = std::env::current_dir().unwrap();
        let dir = Path::new("/scratch/batch");
        let command = format!(
            "{}/target/debug/deps/phase1-1 --run-dir /scratch/batch/runs/control-phase1 --exact TC-01",
            cwd.display()
        );
        assert_eq!(
            without_local_paths(&command, dir),
            "target/debug/deps/phase1-1 --run-dir runs/control-phase1 --exact TC-01"
        );
    }

    #[test]
    fn only_a_scored_whole_batch_is_recorded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let start = BatchStart::now(root);
        let name = start.file_name();
        assert!(name.starts_with("mutation-score-") && name.ends_with("Z.json"));
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("docs");

        let red = report(ControlOutcome::Broken {
            why: "setup failed".into(),
        });
        let file = ScoreFile::new(&red, dir.path(), "curated", "x".into(), &start, false);
        assert!(file.score.is_none());
        assert!(file.words().starts_with("not scored: "), "{}", file.words());
        let err = write_batch(&file, &name, dir.path(), Some(&record)).unwrap_err();
        assert!(
            err.contains("not recording") && err.contains("not scored"),
            "{err}"
        );
        assert!(dir.path().join(&name).is_file(), "the batch keeps its file");
        assert!(!record.exists());

        let green = report(ControlOutcome::Green);
        let cut_short = ScoreFile::new(&green, dir.path(), "generated", "x".into(), &start, false);
        let err = write_batch(&cut_short, &name, dir.path(), Some(&record)).unwrap_err();
        assert!(err.contains("not every selected mutant ran"), "{err}");

        let whole = ScoreFile::new(&green, dir.path(), "curated", "x".into(), &start, true);
        let written = write_batch(&whole, &name, dir.path(), Some(&record)).unwrap();
        assert_eq!(written, [dir.path().join(&name), record.join(&name)]);
        let back: ScoreFile =
            serde_json::from_str(&std::fs::read_to_string(record.join(&name)).unwrap()).unwrap();
        assert_eq!(back, whole, "the file reads back as written");
        assert_eq!(back.score.unwrap().all.judged, 0);
        assert_eq!(back.kvcr_base.unwrap().spec, "pypi:0.1.1");
    }
}
