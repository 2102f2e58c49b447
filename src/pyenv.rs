//! The pinned Python environment of the CPU stack.
//!
//! The system under test is Python (Dynamo's worker API, KVCR), so the CPU
//! stack needs an interpreter with exactly the pinned packages of
//! `fixtures/python/requirements.lock`. [`ensure`] creates a project-local
//! virtualenv on first use (showing progress), reuses it while the lock is
//! unchanged, and rebuilds it when the lock changes. A user may bring their
//! own interpreter instead (`--python`); it is checked, never modified.
//!
//! `.ci/run`, `kvcr-e2e python-env` and the harness all go through [`ensure`].

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Where the lock lives, relative to the repository root.
pub const LOCK_FILE: &str = "fixtures/python/requirements.lock";
/// The project-local virtualenv, relative to the repository root.
pub const VENV_DIR: &str = ".venv";
const MARKER: &str = "kvcr-e2e-lock.sha256";
/// Modules the CPU stack imports; checked after every install.
const REQUIRED_MODULES: &str =
    "import kvcr, kvcr.kvcr_service, dynamo.runtime, dynamo.llm, dynamo.frontend, nixl";

#[derive(Debug, thiserror::Error)]
pub enum PyEnvError {
    #[error("cannot read the Python lock {path}: {source}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}); see the output above. To use your own interpreter instead, pass --python PATH (or PHASE1_PYTHON)")]
    Step { command: String, status: String },
    #[error("`{command}` could not run: {source}")]
    Run {
        command: String,
        source: std::io::Error,
    },
    #[error("{python} cannot import the CPU stack's packages ({detail}). Install fixtures/python/requirements.lock into it with `pip install --no-deps -r fixtures/python/requirements.lock`, or drop --python to use the project venv")]
    MissingPackages { python: PathBuf, detail: String },
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The interpreter a run uses, and how it was obtained.
#[derive(Debug, Clone, Serialize)]
pub struct PythonEnv {
    pub python: PathBuf,
    /// `project-venv` or `user-interpreter`.
    pub source: &'static str,
    /// Present when this call (re)built the venv.
    pub bootstrap: Option<BootstrapReport>,
}

/// Measurements of one bootstrap, recorded in the run's evidence.
#[derive(Debug, Clone, Serialize)]
pub struct BootstrapReport {
    pub seconds: f64,
    pub venv_bytes: u64,
    pub lock_sha256: String,
}

/// Returns a ready interpreter: `user_python` after checking it, or the
/// project venv under `repo_root`, built or rebuilt as needed.
pub fn ensure(repo_root: &Path, user_python: Option<&Path>) -> Result<PythonEnv, PyEnvError> {
    if let Some(python) = user_python {
        check_imports(python)?;
        return Ok(PythonEnv {
            python: python.to_path_buf(),
            source: "user-interpreter",
            bootstrap: None,
        });
    }
    let lock_path = repo_root.join(LOCK_FILE);
    let lock = fs::read(&lock_path).map_err(|source| PyEnvError::Lock {
        path: lock_path.clone(),
        source,
    })?;
    let digest = hex::encode(Sha256::digest(&lock));
    let venv = repo_root.join(VENV_DIR);
    let python = venv.join("bin/python");

    // Two runs starting at once must not build the venv twice.
    let guard_path = repo_root.join(".venv.lock");
    let guard_file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&guard_path)
        .map_err(|source| PyEnvError::Io {
            path: guard_path.clone(),
            source,
        })?;
    let _guard =
        Flock::lock(guard_file, FlockArg::LockExclusive).map_err(|(_, errno)| PyEnvError::Io {
            path: guard_path.clone(),
            source: errno.into(),
        })?;

    let marker = venv.join(MARKER);
    if fs::read_to_string(&marker).is_ok_and(|m| m.trim() == digest) && python.exists() {
        return Ok(PythonEnv {
            python,
            source: "project-venv",
            bootstrap: None,
        });
    }
    let report = bootstrap(&venv, &lock_path, &digest)?;
    Ok(PythonEnv {
        python,
        source: "project-venv",
        bootstrap: Some(report),
    })
}

fn bootstrap(venv: &Path, lock_path: &Path, digest: &str) -> Result<BootstrapReport, PyEnvError> {
    let started = Instant::now();
    let base = std::env::var("PHASE1_BASE_PYTHON").unwrap_or_else(|_| "python3".into());
    progress(&format!(
        "creating the CPU stack's Python env in {} from {} (one time, about 30 s)",
        venv.display(),
        lock_path.display()
    ));
    if venv.exists() {
        fs::remove_dir_all(venv).map_err(|source| PyEnvError::Io {
            path: venv.to_path_buf(),
            source,
        })?;
    }
    progress("step 1/3: python -m venv");
    run_step(Command::new(&base).arg("-m").arg("venv").arg(venv))?;
    progress("step 2/3: pip install --no-deps -r requirements.lock (about 620 MB)");
    run_step(
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--no-deps",
                "--disable-pip-version-check",
                "--no-input",
                "--progress-bar",
                "off",
                "-r",
            ])
            .arg(lock_path),
    )?;
    progress("step 3/3: checking imports");
    let python = venv.join("bin/python");
    check_imports(&python)?;
    let marker = venv.join(MARKER);
    fs::write(&marker, digest).map_err(|source| PyEnvError::Io {
        path: marker,
        source,
    })?;
    let report = BootstrapReport {
        seconds: started.elapsed().as_secs_f64(),
        venv_bytes: dir_size(venv),
        lock_sha256: digest.to_string(),
    };
    progress(&format!(
        "Python env ready in {:.1} s ({} MB)",
        report.seconds,
        report.venv_bytes / 1_000_000
    ));
    Ok(report)
}

fn progress(message: &str) {
    eprintln!("[kvcr-e2e] {message}");
}

fn run_step(command: &mut Command) -> Result<(), PyEnvError> {
    let shown = format!("{command:?}");
    let status = command.status().map_err(|source| PyEnvError::Run {
        command: shown.clone(),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(PyEnvError::Step {
            command: shown,
            status: status.to_string(),
        })
    }
}

fn check_imports(python: &Path) -> Result<(), PyEnvError> {
    let output = Command::new(python)
        .arg("-c")
        .arg(REQUIRED_MODULES)
        .output()
        .map_err(|source| PyEnvError::Run {
            command: format!("{} -c '{REQUIRED_MODULES}'", python.display()),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(PyEnvError::MissingPackages {
        python: python.to_path_buf(),
        detail: stderr.lines().last().unwrap_or("no output").to_string(),
    })
}

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_size(&entry.path()),
            Ok(t) if t.is_file() => entry.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_interpreter_without_the_packages_is_refused_clearly() {
        let err = ensure(Path::new("."), Some(Path::new("/bin/false"))).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("cannot import") && text.contains("--no-deps"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_lock_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = ensure(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("requirements.lock"), "{err}");
    }
}
