//! Strict offline validation of Kubernetes objects against a pinned
//! Kubernetes release, with PyPI's `kubernetes-validate` (it carries the
//! OpenAPI schemas of every release) in a small env of its own.
//!
//! The env lives in `target/tool-envs/k8s-validate`, is built on first use
//! from `fixtures/runners/k8s-validate.lock` (progress on stderr) and is
//! reused while that lock is unchanged. It is not the stack's Python env.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};

/// The Kubernetes release every generated object must be valid for. 1.29
/// is the first with native sidecars (init containers with
/// `restartPolicy: Always`), which the stack pod's Guard uses.
pub const KUBERNETES_VERSION: &str = "1.31.0";

pub const LOCK_FILE: &str = "fixtures/runners/k8s-validate.lock";
const ENV_DIR: &str = "target/tool-envs/k8s-validate";
const MARKER: &str = "lock.sha256";

#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("cannot read the validator's lock {path}: {error}")]
    Lock { path: PathBuf, error: String },
    #[error("cannot build the validator env in {dir}: `{step}` failed: {error} (delete {dir} and retry; it needs python3 with venv and PyPI)")]
    Build {
        dir: PathBuf,
        step: String,
        error: String,
    },
    #[error("cannot run {tool}: {error}")]
    Run { tool: PathBuf, error: String },
    #[error("Kubernetes {version} strict validation rejected the objects:\n{report}")]
    Rejected { version: String, report: String },
}

/// The `kubernetes-validate` executable, built or reused.
pub fn ensure_tool(repo_root: &Path) -> Result<PathBuf, ValidateError> {
    let lock_path = repo_root.join(LOCK_FILE);
    let lock = fs::read(&lock_path).map_err(|e| ValidateError::Lock {
        path: lock_path.clone(),
        error: e.to_string(),
    })?;
    let digest = hex::encode(Sha256::digest(&lock));
    let dir = repo_root.join(ENV_DIR);
    let tool = dir.join("bin/kubernetes-validate");
    let build_error = |step: &str, error: String| ValidateError::Build {
        dir: dir.clone(),
        step: step.to_string(),
        error,
    };
    fs::create_dir_all(dir.parent().unwrap_or(&dir))
        .map_err(|e| build_error("mkdir", e.to_string()))?;
    // Two test processes starting at once build the env once.
    let guard_path = dir.with_extension("lock");
    let guard_file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&guard_path)
        .map_err(|e| build_error("open the build lock", e.to_string()))?;
    let _guard = Flock::lock(guard_file, FlockArg::LockExclusive)
        .map_err(|(_, errno)| build_error("flock", errno.to_string()))?;
    let marker = dir.join(MARKER);
    if fs::read_to_string(&marker).is_ok_and(|m| m.trim() == digest) && tool.exists() {
        return Ok(tool);
    }
    let started = Instant::now();
    say(format!(
        "building the Kubernetes validator env in {} from {} (one time, about 15 s)",
        dir.display(),
        lock_path.display()
    ));
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|e| build_error("remove the stale env", e.to_string()))?;
    }
    let run = |step: &str, command: &mut Command| -> Result<(), ValidateError> {
        say(step.to_string());
        let output = command
            .output()
            .map_err(|e| build_error(step, e.to_string()))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(build_error(
                step,
                format!(
                    "{}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            ))
        }
    };
    run(
        "step 1/2: python3 -m venv",
        Command::new("python3").arg("-m").arg("venv").arg(&dir),
    )?;
    run(
        "step 2/2: pip install --no-deps -r k8s-validate.lock",
        Command::new(dir.join("bin/pip"))
            .args([
                "install",
                "--no-deps",
                "--disable-pip-version-check",
                "--no-input",
                "-q",
                "-r",
            ])
            .arg(&lock_path),
    )?;
    fs::write(&marker, &digest).map_err(|e| build_error("write the marker", e.to_string()))?;
    say(format!(
        "Kubernetes validator ready in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(tool)
}

/// Validates `files` strictly (unknown fields are errors) against
/// [`KUBERNETES_VERSION`]. The error quotes the validator's report.
pub fn validate_strict(tool: &Path, files: &[PathBuf]) -> Result<(), ValidateError> {
    let output = Command::new(tool)
        .args(["--strict", "--no-warn", "--quiet", "-k", KUBERNETES_VERSION])
        .args(files)
        .output()
        .map_err(|e| ValidateError::Run {
            tool: tool.to_path_buf(),
            error: e.to_string(),
        })?;
    if output.status.success() {
        return Ok(());
    }
    let mut report = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !stderr.trim().is_empty() {
        report.push('\n');
        report.push_str(stderr.trim());
    }
    Err(ValidateError::Rejected {
        version: KUBERNETES_VERSION.to_string(),
        report: format!("{report}\n(exit status {})", output.status),
    })
}

/// A step of the build, as the run's event (the console prints it).
fn say(message: String) {
    crate::events::emit(crate::events::RunEvent::SetupStep {
        part: crate::events::SetupPart::Validator,
        message,
    });
}
