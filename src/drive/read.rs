//! What a child's run left: its run directory, the outcome of each trial
//! (`results.json`), the setup error when the stack or the reference phase
//! did not start (`setup-error.txt`), and which KVCR it ran.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::errors::DriveError;

/// How one trial ended, as results.json records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TrialOutcome {
    Passed,
    Failed {
        message: String,
    },
    /// It showed the known findings declared for it, and nothing else failed.
    ExpectedFailure {
        #[serde(default)]
        findings: Vec<u32>,
    },
    Ignored {
        #[serde(default)]
        reason: String,
    },
}

/// One trial of the run (`TC-03::hinted_peer_transfer`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// The trial name.
    pub name: String,
    #[serde(flatten)]
    pub outcome: TrialOutcome,
}

/// The KVCR build the run reported (results.json `run.kvcr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvcrSeen {
    pub spec: String,
    pub version: String,
    pub files_sha256: String,
}

#[derive(Deserialize)]
struct ResultsDoc {
    run: RunDoc,
}

#[derive(Deserialize)]
struct RunDoc {
    #[serde(default)]
    cases: Vec<TrialRecord>,
    #[serde(default)]
    kvcr: Option<KvcrSeen>,
}

/// A child's run, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRun {
    /// The run directory.
    pub root: PathBuf,
    /// Its trials in run order; empty without results.json.
    pub trials: Vec<TrialRecord>,
    /// Whether results.json was there.
    pub has_results: bool,
    /// `setup-error.txt`: the stack or the reference phase did not start.
    pub setup_error: Option<String>,
    /// The KVCR build it ran, when it reported one.
    pub kvcr: Option<KvcrSeen>,
}

#[cfg(test)]
impl ReadRun {
    /// A run directory at `root` whose results.json held `outcomes` in
    /// order, with no setup error, that reported `kvcr`.
    pub(crate) fn with_outcomes(
        root: &str,
        outcomes: &[(&str, TrialOutcome)],
        kvcr: Option<KvcrSeen>,
    ) -> Self {
        Self {
            root: root.into(),
            trials: outcomes
                .iter()
                .map(|(name, outcome)| TrialRecord {
                    name: name.to_string(),
                    outcome: outcome.clone(),
                })
                .collect(),
            has_results: true,
            setup_error: None,
            kvcr,
        }
    }
}

impl ReadRun {
    /// Reads the one run directory under `base` (see [`find_run_root`]).
    pub fn from_base(base: &Path) -> Result<Self, DriveError> {
        let root = find_run_root(base)?.ok_or_else(|| DriveError::NoRunDir(base.into()))?;
        Self::from_root(&root)
    }

    /// Reads run directory `root`.
    pub fn from_root(root: &Path) -> Result<Self, DriveError> {
        let setup_path = root.join("setup-error.txt");
        let setup_error = match std::fs::read_to_string(&setup_path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(DriveError::io(&setup_path)(e)),
        };
        let results = root.join("results.json");
        let (trials, kvcr, has_results) = match std::fs::read_to_string(&results) {
            Ok(text) => {
                let doc: ResultsDoc =
                    serde_json::from_str(&text).map_err(|e| DriveError::Parse {
                        path: results.clone(),
                        message: e.to_string(),
                    })?;
                (doc.run.cases, doc.run.kvcr, true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), None, false),
            Err(e) => return Err(DriveError::io(&results)(e)),
        };
        Ok(ReadRun {
            root: root.to_path_buf(),
            trials,
            has_results,
            setup_error,
            kvcr,
        })
    }

    /// The record of trial `name`, if the run has one.
    pub fn trial(&self, name: &str) -> Option<&TrialRecord> {
        self.trials.iter().find(|t| t.name == name)
    }
}

/// The run directory under `base`: a directory at depth 1 or 2
/// (`<base>/<run-id>/` or `<base>/<target>/<run-id>/`, never a `latest`
/// link) holding results.json or setup-error.txt; the newest run id when
/// there are several. `None` when there is none.
pub fn find_run_root(base: &Path) -> Result<Option<PathBuf>, DriveError> {
    let is_run =
        |dir: &Path| dir.join("results.json").is_file() || dir.join("setup-error.txt").is_file();
    let mut found = Vec::new();
    for dir in subdirs(base)? {
        if is_run(&dir) {
            found.push(dir);
            continue;
        }
        found.extend(subdirs(&dir)?.into_iter().filter(|d| is_run(d)));
    }
    found.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(found.pop())
}

/// Real (not symlinked) subdirectories of `dir`; none when it is missing.
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, DriveError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(DriveError::io(dir)(e)),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(DriveError::io(dir))?;
        let kind = entry.file_type().map_err(DriveError::io(dir))?;
        if kind.is_dir() {
            dirs.push(entry.path());
        }
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    const RESULTS: &str = r#"{"schema_version":1,"run":{"run_id":"r","cases":[
      {"id":"TC-01","name":"TC-01::generation_correctness","outcome":"passed","duration_ms":1.0},
      {"id":"TC-02","name":"TC-02::local_dram_flow","outcome":"failed","message":"reference tokens: token 0 differs"},
      {"id":"TC-05","name":"TC-05::cold","outcome":"ignored","reason":"not selected","because":"not_selected"},
      {"id":"TC-09","name":"TC-09::clean_restart","outcome":"expected_failure","findings":[17],"message":"expected failure (finding 17: ...)"}],
      "kvcr":{"spec":"pypi:0.1.1+/m.diff","version":"0.1.1","files_sha256":"ab12","source":"patched"}},
      "requests":[],"perf":{}}"#;

    #[test]
    fn the_run_under_a_target_directory_is_found_and_read() {
        let base = tempfile::tempdir().unwrap();
        let run = base.path().join("phase1/20261201T100000Z-1-aaaa");
        write(&run.join("results.json"), RESULTS);
        std::os::unix::fs::symlink(&run, base.path().join("phase1/latest")).unwrap();
        std::fs::create_dir_all(base.path().join("reference-cache/x")).unwrap();
        let read = ReadRun::from_base(base.path()).unwrap();
        assert_eq!(read.root, run);
        assert!(read.has_results && read.setup_error.is_none());
        assert_eq!(read.trials.len(), 4);
        assert_eq!(
            read.trial("TC-09::clean_restart").unwrap().outcome,
            TrialOutcome::ExpectedFailure { findings: vec![17] }
        );
        assert_eq!(
            read.trial("TC-02::local_dram_flow").unwrap().outcome,
            TrialOutcome::Failed {
                message: "reference tokens: token 0 differs".into()
            }
        );
        assert!(matches!(
            read.trial("TC-05::cold").unwrap().outcome,
            TrialOutcome::Ignored { .. }
        ));
        assert_eq!(read.kvcr.unwrap().files_sha256, "ab12");
    }

    #[test]
    fn a_setup_error_without_results_is_read_and_nothing_is_an_error() {
        let base = tempfile::tempdir().unwrap();
        let run = base.path().join("20261201T100000Z-1-aaaa");
        write(&run.join("setup-error.txt"), "frontend did not start\nmore");
        let read = ReadRun::from_base(base.path()).unwrap();
        assert!(!read.has_results);
        assert_eq!(
            read.setup_error.as_deref(),
            Some("frontend did not start\nmore")
        );

        let empty = tempfile::tempdir().unwrap();
        let err = ReadRun::from_base(empty.path()).unwrap_err();
        assert!(err.to_string().contains("no run directory"), "{err}");
    }

    #[test]
    fn of_several_runs_the_newest_is_taken() {
        let base = tempfile::tempdir().unwrap();
        for id in ["20261201T100000Z-1-a", "20261201T110000Z-1-b"] {
            write(&base.path().join(id).join("results.json"), RESULTS);
        }
        let root = find_run_root(base.path()).unwrap().unwrap();
        assert!(root.ends_with("20261201T110000Z-1-b"));
    }

    #[test]
    fn a_results_file_of_another_shape_is_an_error_naming_it() {
        let base = tempfile::tempdir().unwrap();
        write(&base.path().join("r/results.json"), "{\"run\": 3}");
        let err = ReadRun::from_base(base.path()).unwrap_err().to_string();
        assert!(err.contains("results.json"), "{err}");
    }
}
