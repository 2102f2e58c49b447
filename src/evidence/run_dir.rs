//! The run directory: `<base>/<run-id>/` with `logs/`, `cases/<case-id>/`,
//! `config.json`, `stack.json`, and a `<base>/latest` symlink to it.

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

use serde::Serialize;
use time::macros::format_description;
use time::OffsetDateTime;

use super::errors::EvidenceError;
use crate::config::Redactor;

/// A created run directory. Everything written through it is scrubbed of
/// secrets by its [`Redactor`] and written atomically (temp file + rename).
#[derive(Debug, Clone)]
pub struct RunDir {
    base: PathBuf,
    /// The suite's own directory under `base` (`phase1`), when it has one.
    target: Option<String>,
    root: PathBuf,
    run_id: String,
    redactor: Redactor,
}

impl RunDir {
    /// Creates `<base>/<run-id>/` with `logs/` and `cases/`, and points
    /// `<base>/latest` at it. The run id is the UTC time plus the pid and a
    /// random suffix, so parallel runs never share a directory.
    pub fn create(base: &Path, redactor: Redactor) -> Result<RunDir, EvidenceError> {
        Self::create_at(base, None, redactor)
    }

    /// Creates `<base>/<target>/<run-id>/` for one test target (`phase1`,
    /// `phase1_hybrid`, `fault_matrix`), so targets run one after another
    /// never overwrite each other's evidence: `<base>/<target>/latest` is
    /// that target's last run; `<base>/latest` stays the last run of any.
    pub fn create_for(
        base: &Path,
        target: &str,
        redactor: Redactor,
    ) -> Result<RunDir, EvidenceError> {
        Self::create_at(base, Some(sanitize(target)), redactor)
    }

    fn create_at(
        base: &Path,
        target: Option<String>,
        redactor: Redactor,
    ) -> Result<RunDir, EvidenceError> {
        let parent = match &target {
            Some(t) => base.join(t),
            None => base.to_path_buf(),
        };
        std::fs::create_dir_all(&parent)
            .map_err(EvidenceError::io("create run base directory", &parent))?;
        const ATTEMPTS: u32 = 16;
        for _ in 0..ATTEMPTS {
            let run_id = new_run_id();
            let root = parent.join(&run_id);
            match std::fs::create_dir(&root) {
                Ok(()) => {
                    for sub in ["logs", "cases"] {
                        let p = root.join(sub);
                        std::fs::create_dir(&p).map_err(EvidenceError::io("create", &p))?;
                    }
                    let dir = RunDir {
                        base: base.to_path_buf(),
                        target: target.clone(),
                        root,
                        run_id,
                        redactor,
                    };
                    dir.point_latest();
                    return Ok(dir);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(EvidenceError::io("create run directory", &root)(e)),
            }
        }
        Err(EvidenceError::NoUniqueRunId {
            base: parent,
            attempts: ATTEMPTS,
        })
    }

    /// The run id (`20251129T174100Z-1234-9f3a`).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// `<base>/<run-id>/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The base directory holding all runs.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// The redactor applied to everything written.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// `logs/`, for component log files.
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// `logs/<component>.log`.
    pub fn log_file(&self, component: &str) -> PathBuf {
        self.logs_dir().join(format!("{}.log", sanitize(component)))
    }

    /// `cases/<case-id>/` (the id made filesystem-safe: `TC-05/cold` → `TC-05_cold`).
    pub fn case_dir(&self, case: &str) -> PathBuf {
        self.root.join("cases").join(sanitize(case))
    }

    /// `cases/<case-id>/<name>`; the directory is created on first write.
    pub fn case_file(&self, case: &str, name: &str) -> PathBuf {
        self.case_dir(case).join(name)
    }

    /// A path relative to the run directory when it is inside it.
    pub fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.root)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| path.to_path_buf())
    }

    /// Writes `value` as pretty JSON to `cases/<case>/<name>` and returns the
    /// path, so a failure message can name it.
    pub fn write_json(
        &self,
        case: &str,
        name: &str,
        value: &impl Serialize,
    ) -> Result<PathBuf, EvidenceError> {
        self.write_json_at(self.case_file(case, name), name, value)
    }

    /// Writes text to `cases/<case>/<name>` (scrubbed) and returns the path.
    pub fn write_text(&self, case: &str, name: &str, text: &str) -> Result<PathBuf, EvidenceError> {
        let path = self.case_file(case, name);
        self.write_bytes(&path, self.redactor.scrub(text).as_bytes())?;
        Ok(path)
    }

    /// Writes `value` as pretty JSON to `<run dir>/<name>` and returns the path.
    pub fn write_root_json(
        &self,
        name: &str,
        value: &impl Serialize,
    ) -> Result<PathBuf, EvidenceError> {
        self.write_json_at(self.root.join(name), name, value)
    }

    /// Writes text to `<run dir>/<name>` (scrubbed) and returns the path.
    pub fn write_root_text(&self, name: &str, text: &str) -> Result<PathBuf, EvidenceError> {
        let path = self.root.join(name);
        self.write_bytes(&path, self.redactor.scrub(text).as_bytes())?;
        Ok(path)
    }

    /// Writes the resolved settings to `config.json`.
    pub fn write_config(&self, settings: &impl Serialize) -> Result<PathBuf, EvidenceError> {
        self.write_root_json("config.json", settings)
    }

    /// Writes the stack description to `stack.json`.
    pub fn write_stack(&self, stack: &serde_json::Value) -> Result<PathBuf, EvidenceError> {
        self.write_root_json("stack.json", stack)
    }

    fn write_json_at(
        &self,
        path: PathBuf,
        what: &str,
        value: &impl Serialize,
    ) -> Result<PathBuf, EvidenceError> {
        let json = serde_json::to_value(value)
            .and_then(|v| serde_json::to_vec_pretty(&self.redactor.scrub_json(v)))
            .map_err(|source| EvidenceError::Json {
                what: what.to_string(),
                path: path.clone(),
                source,
            })?;
        self.write_bytes(&path, &json)?;
        Ok(path)
    }

    /// Writes bytes atomically, creating the parent directory.
    pub(crate) fn write_bytes(&self, path: &Path, bytes: &[u8]) -> Result<(), EvidenceError> {
        write_atomic(path, bytes)
    }

    /// Points `<base>/latest` (and `<base>/<target>/latest`) at this run
    /// (relative links, replaced atomically). A failure is logged, not
    /// fatal: the run directory is what matters.
    fn point_latest(&self) {
        match &self.target {
            Some(target) => {
                point_link(&self.base.join(target), Path::new(&self.run_id));
                point_link(&self.base, &Path::new(target).join(&self.run_id));
            }
            None => point_link(&self.base, Path::new(&self.run_id)),
        }
    }
}

/// `<dir>/latest` → `to` (relative to `dir`).
fn point_link(dir: &Path, to: &Path) {
    #[cfg(unix)]
    {
        let link = dir.join("latest");
        let tmp = dir.join(format!(
            ".latest-{}-{}",
            std::process::id(),
            to.display().to_string().replace('/', "_")
        ));
        let result =
            std::os::unix::fs::symlink(to, &tmp).and_then(|()| std::fs::rename(&tmp, &link));
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            tracing::warn!("cannot point {} at {}: {e}", link.display(), to.display());
        }
    }
}

/// Writes `bytes` to `path` through a temp file in the same directory.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EvidenceError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(EvidenceError::io("create", parent))?;
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(EvidenceError::io("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(EvidenceError::io("rename into place", path))
}

/// `[A-Za-z0-9._-]` kept, anything else becomes `_`.
fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        "_".to_string()
    } else {
        s
    }
}

fn new_run_id() -> String {
    let now = OffsetDateTime::now_utc();
    let stamp = now
        .format(format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_else(|_| now.unix_timestamp().to_string());
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(now.unix_timestamp_nanos() as u128);
    h.write_u32(std::process::id());
    format!("{stamp}-{}-{:04x}", std::process::id(), h.finish() & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_latest() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("runs");
        let a = RunDir::create(&base, Redactor::none()).unwrap();
        assert!(a.root().join("logs").is_dir());
        assert!(a.root().join("cases").is_dir());
        let b = RunDir::create(&base, Redactor::none()).unwrap();
        assert_ne!(a.run_id(), b.run_id());
        let latest = std::fs::read_link(base.join("latest")).unwrap();
        assert_eq!(latest, PathBuf::from(b.run_id()));
        assert!(
            a.run_id().contains(&format!("Z-{}-", std::process::id())),
            "{}",
            a.run_id()
        );
    }

    #[test]
    fn each_target_has_its_own_latest() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("runs");
        let p1 = RunDir::create_for(&base, "phase1", Redactor::none()).unwrap();
        let fm = RunDir::create_for(&base, "fault_matrix", Redactor::none()).unwrap();
        assert_eq!(p1.root(), base.join("phase1").join(p1.run_id()));
        assert_eq!(
            std::fs::read_link(base.join("phase1/latest")).unwrap(),
            PathBuf::from(p1.run_id())
        );
        assert_eq!(
            std::fs::read_link(base.join("fault_matrix/latest")).unwrap(),
            PathBuf::from(fm.run_id())
        );
        // The shared link follows whichever ran last.
        assert_eq!(
            std::fs::read_link(base.join("latest")).unwrap(),
            Path::new("fault_matrix").join(fm.run_id())
        );
        assert!(base.join("latest/cases").is_dir());
        assert!(base.join("phase1/latest/cases").is_dir());
    }

    #[test]
    fn parallel_runs_get_unique_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        let ids: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        RunDir::create(&base, Redactor::none())
                            .unwrap()
                            .run_id()
                            .to_string()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut uniq = ids.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), ids.len());
    }

    #[test]
    fn writes_return_paths_and_are_redacted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(
            tmp.path(),
            Redactor::from_values(["s3cr3t-value".to_string()]),
        )
        .unwrap();
        let p = dir
            .write_json(
                "TC-05/cold",
                "requests.json",
                &serde_json::json!({"auth": "Bearer s3cr3t-value", "n": 1}),
            )
            .unwrap();
        assert_eq!(p, dir.root().join("cases/TC-05_cold/requests.json"));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("[REDACTED]") && !text.contains("s3cr3t"),
            "{text}"
        );
        let c = dir
            .write_config(&serde_json::json!({"python": "/x/s3cr3t-value/py"}))
            .unwrap();
        assert!(!std::fs::read_to_string(c).unwrap().contains("s3cr3t"));
        let s = dir
            .write_stack(&serde_json::json!({"router": {"port": 8000}}))
            .unwrap();
        assert_eq!(s, dir.root().join("stack.json"));
        let t = dir
            .write_text("TC-01", "log-tail.txt", "token=s3cr3t-value\n")
            .unwrap();
        assert_eq!(std::fs::read_to_string(t).unwrap(), "token=[REDACTED]\n");
        assert_eq!(
            dir.relative(&p),
            PathBuf::from("cases/TC-05_cold/requests.json")
        );
        assert_eq!(
            dir.log_file("worker A"),
            dir.root().join("logs/worker_A.log")
        );
        assert_eq!(sanitize(".."), "_");
    }
}
