//! KVCR envs on disk: small directories layered over a lane's base env.
//!
//! ```text
//! target/kvcr-envs/
//!   source-dir-3fa2b1c4d5e6f708/   one build (kind + 16 hex of its key)
//!     site/kvcr/, site/kvcr-X.dist-info/   the build, installed (pip --target)
//!     site/sitecustomize.py       the import report hook (import_report.rs), the coverage hook (coverage.rs)
//!     bin/python                  the base interpreter with site/ first on PYTHONPATH
//!     build.json                  the resolved build (provenance::KvcrBuild)
//!     READY                       written last: a directory without it is rebuilt
//!     in-use.lock                 held (shared) by every run using the env
//!   base-91c0aa1e2f3b4c5d/        the base env as it is, with only the hook
//!   downloads/<version>/          releases fetched for pypi:<version>
//!   sdist/kvcr-<version>/         unpacked sdists (kvcr::sdist_source_dir)
//!   guard-help/<files digest>.txt each build's `kvcr_service --help`
//! ```
//!
//! `bin/python` is a shell script that puts `site/` before everything else
//! on `PYTHONPATH` (keeping what the caller set, such as the CPU engine's
//! package directory) and execs the base interpreter, so `sys.prefix`,
//! `sys.executable` and the base env's own files stay the base env's. A
//! subprocess (vLLM's engine core) inherits `PYTHONPATH`, and with it the
//! build and the hook. Since `site/` comes before the base env's
//! site-packages, both `import kvcr` and `importlib.metadata` find the
//! build first; the base env's own `kvcr` is shadowed, never modified.
//!
//! Envs are reused while their key is unchanged and pruned to the
//! [`KEEP`] most recently used; an env another run holds is never removed.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use nix::fcntl::{Flock, FlockArg};
use once_cell::sync::Lazy;

use super::import_report::HOOK_SOURCE;
use super::kvcr::KvcrError;

/// Where KVCR envs live, relative to the repository root.
pub const ENVS_DIR: &str = "target/kvcr-envs";
/// How many envs pruning keeps (the most recently used).
pub const KEEP: usize = 4;
/// Directories of [`ENVS_DIR`] that are not envs.
const NOT_ENVS: &[&str] = &["downloads", "sdist", "guard-help"];

/// In-use locks this process holds until it exits.
static HELD: Lazy<Mutex<Vec<Flock<fs::File>>>> = Lazy::new(|| Mutex::new(Vec::new()));

/// One env directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvDir {
    pub dir: PathBuf,
}

impl EnvDir {
    /// The env of `kind` keyed by `key` under `envs`.
    pub fn new(envs: &Path, kind: &str, key: &str) -> Self {
        let short = key.get(..16).unwrap_or(key);
        Self {
            dir: envs.join(format!("{kind}-{short}")),
        }
    }

    pub fn site(&self) -> PathBuf {
        self.dir.join("site")
    }

    pub fn python(&self) -> PathBuf {
        self.dir.join("bin/python")
    }

    pub fn record(&self) -> PathBuf {
        self.dir.join("build.json")
    }

    /// Whether a build finished here.
    pub fn is_ready(&self) -> bool {
        self.dir.join("READY").is_file() && self.record().is_file() && self.python().is_file()
    }

    /// Empties the directory for a (re)build.
    pub fn reset(&self) -> Result<(), KvcrError> {
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        }
        fs::create_dir_all(self.site()).map_err(|e| io(&self.site(), e))
    }

    /// Writes the hook and the interpreter wrapper over `base_python`.
    pub fn write_launcher(&self, base_python: &Path) -> Result<(), KvcrError> {
        write_if_changed(
            &self.site().join("sitecustomize.py"),
            &sitecustomize(),
            false,
        )?;
        write_if_changed(&self.python(), &wrapper(&self.site(), base_python), true)
    }

    /// Marks the build finished (after `build.json` is written).
    pub fn mark_ready(&self) -> Result<(), KvcrError> {
        write_if_changed(&self.dir.join("READY"), "", false)
    }

    /// Holds the env for this process's lifetime (pruning skips it) and
    /// records its use.
    pub fn hold(&self) -> Result<(), KvcrError> {
        let lock = self.dir.join("in-use.lock");
        let file = open_lock(&lock)?;
        let held = Flock::lock(file, FlockArg::LockShared).map_err(|(_, e)| io(&lock, e.into()))?;
        if let Ok(mut all) = HELD.lock() {
            all.push(held);
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        write_if_changed(&self.dir.join("last-used"), &now.to_string(), false)
    }
}

/// A KVCR env's `sitecustomize.py`: the import report, then the coverage
/// hook (inert unless a run asks for coverage).
pub fn sitecustomize() -> String {
    format!("{HOOK_SOURCE}{}", super::coverage::HOOK_SOURCE)
}

/// The interpreter wrapper: the env's site dir first on `PYTHONPATH`, then
/// whatever the caller set, then the base interpreter's own path.
pub fn wrapper(site: &Path, base_python: &Path) -> String {
    format!(
        "#!/bin/sh\n\
         # Generated by kvcr-e2e (docs/kvcr-under-test.md): the base interpreter with\n\
         # this KVCR env's site directory first on its path.\n\
         PYTHONPATH={site}\"${{PYTHONPATH:+:$PYTHONPATH}}\"\n\
         export PYTHONPATH\n\
         exec {python} \"$@\"\n",
        site = sh_quote(&site.display().to_string()),
        python = sh_quote(&base_python.display().to_string()),
    )
}

/// Takes the exclusive build lock of `envs` (one build or prune at a time).
pub fn lock_envs(envs: &Path) -> Result<Flock<fs::File>, KvcrError> {
    fs::create_dir_all(envs).map_err(|e| io(envs, e))?;
    let path = envs.join(".lock");
    let file = open_lock(&path)?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io(&path, e.into()))
}

/// Removes envs beyond the [`KEEP`] most recently used, except `keep` and
/// any env another run holds. Returns the directories removed.
pub fn prune(envs: &Path, keep: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(envs) else {
        return Vec::new();
    };
    let mut dirs: Vec<(u64, PathBuf)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !NOT_ENVS.contains(&n))
        })
        .map(|p| (last_used(&p), p))
        .collect();
    dirs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut removed = Vec::new();
    for (_, dir) in dirs.into_iter().skip(KEEP) {
        if dir == keep {
            continue;
        }
        let lock = dir.join("in-use.lock");
        let free = match open_lock(&lock) {
            Ok(file) => Flock::lock(file, FlockArg::LockExclusiveNonblock).is_ok(),
            Err(_) => true,
        };
        if free && fs::remove_dir_all(&dir).is_ok() {
            removed.push(dir);
        }
    }
    removed
}

fn last_used(dir: &Path) -> u64 {
    fs::read_to_string(dir.join("last-used"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

fn open_lock(path: &Path) -> Result<fs::File, KvcrError> {
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io(path, e))
}

/// Writes `contents` unless the file already holds it, through a rename so
/// a process starting meanwhile never reads half a file.
fn write_if_changed(path: &Path, contents: &str, executable: bool) -> Result<(), KvcrError> {
    use std::os::unix::fs::PermissionsExt;
    if fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    fs::write(&tmp, contents).map_err(|e| io(&tmp, e))?;
    if executable {
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755)).map_err(|e| io(&tmp, e))?;
    }
    fs::rename(&tmp, path).map_err(|e| io(path, e))
}

fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

fn io(path: &Path, source: std::io::Error) -> KvcrError {
    super::kvcr::io(path, source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_puts_the_site_first_and_keeps_the_callers_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = EnvDir::new(dir.path(), "wheel", &"ab".repeat(32));
        assert!(env.dir.ends_with("wheel-abababababababab"));
        env.reset().expect("reset");
        // A stand-in interpreter that prints its PYTHONPATH and arguments.
        let fake = dir.path().join("fake python");
        fs::write(&fake, "#!/bin/sh\necho \"$PYTHONPATH|$*\"\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).expect("chmod");
        env.write_launcher(&fake).expect("launcher");
        let run = |pythonpath: Option<&str>| {
            let mut cmd = std::process::Command::new(env.python());
            cmd.args(["-m", "x"]);
            match pythonpath {
                Some(p) => cmd.env("PYTHONPATH", p),
                None => cmd.env_remove("PYTHONPATH"),
            };
            String::from_utf8(cmd.output().expect("runs").stdout).expect("utf8")
        };
        let site = env.site().display().to_string();
        assert_eq!(run(None).trim(), format!("{site}|-m x"));
        assert_eq!(run(Some("/engine")).trim(), format!("{site}:/engine|-m x"));
        assert!(fs::read_to_string(env.site().join("sitecustomize.py"))
            .expect("hook")
            .contains("kvcr-e2e: kvcr"));
    }

    #[test]
    fn pruning_keeps_the_most_recent_the_current_and_the_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let envs: Vec<EnvDir> = (0..7)
            .map(|i| {
                let env = EnvDir::new(dir.path(), "wheel", &format!("{i}{}", "0".repeat(63)));
                env.reset().expect("reset");
                fs::write(env.dir.join("last-used"), (100 + i).to_string()).expect("write");
                env
            })
            .collect();
        fs::create_dir_all(dir.path().join("downloads/0.1.1")).expect("downloads");
        // The oldest is the current one; the second oldest is held by a run.
        let held = open_lock(&envs[1].dir.join("in-use.lock")).expect("open");
        let _held = Flock::lock(held, FlockArg::LockShared).expect("lock");
        let removed = prune(dir.path(), &envs[0].dir);
        assert_eq!(removed, vec![envs[2].dir.clone()]);
        for (i, env) in envs.iter().enumerate() {
            assert_eq!(env.dir.exists(), i != 2, "env {i}");
        }
        assert!(dir.path().join("downloads/0.1.1").exists());
    }

    #[test]
    fn a_directory_without_ready_is_not_a_build() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = EnvDir::new(dir.path(), "source-dir", &"cd".repeat(32));
        env.reset().expect("reset");
        env.write_launcher(Path::new("/usr/bin/python3"))
            .expect("launcher");
        fs::write(env.record(), "{}").expect("record");
        assert!(!env.is_ready());
        env.mark_ready().expect("ready");
        assert!(env.is_ready());
    }
}
