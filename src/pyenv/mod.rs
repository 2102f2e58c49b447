//! The pinned Python environments of the suite.
//!
//! The system under test is Python (Dynamo, KVCR, vLLM), so each stack needs
//! an interpreter with exactly the pinned packages of its lock. An env is
//! described as data ([`EnvSpec`]: [`CPU_STACK`], [`VLLM_CPU`]); [`ensure_env`]
//! creates its project-local virtualenv on first use (showing progress),
//! applies its reviewed patches ([`patches`]), reuses it while the digest of
//! the lock and the patch files is unchanged, and rebuilds (or only re-patches)
//! it when they change. A user may bring their own interpreter instead
//! (`--python`); it is checked, never modified.
//!
//! `.ci/run`, `kvcr-e2e python-env` and the harness all go through here.

pub mod coverage;
pub mod coverage_table;
pub mod derived;
pub mod guard_cli;
pub mod identity;
pub mod import_report;
pub mod kvcr;
pub mod kvcr_diff;
pub mod kvcr_files;
pub mod kvcr_spec;
pub mod patches;
pub mod provenance;
pub mod spec;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use kvcr_spec::KvcrSpec;
pub use patches::{AppliedPatch, Patch, PatchError};
pub use provenance::{ComponentImport, GitState, KvcrBuild, KvcrProvenance, PatchState};
pub use spec::{EnvSpec, Probe, AIPERF, CPU_STACK, MUTGEN, VLLM_CPU};

/// The CPU stack's lock, relative to the repository root.
pub const LOCK_FILE: &str = CPU_STACK.lock;
/// The CPU stack's virtualenv, relative to the repository root.
pub const VENV_DIR: &str = CPU_STACK.venv_dir;
/// Inside a venv: the digest of the lock and patches it was built from.
pub(crate) const MARKER: &str = "kvcr-e2e-lock.sha256";
/// Inside a venv: the digest of the lock alone (its installed packages).
const PACKAGES_MARKER: &str = "kvcr-e2e-packages.sha256";
/// Inside a venv: copies of the patches applied to it, to revert them.
const APPLIED_DIR: &str = "kvcr-e2e-patches";

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
    #[error("{python} cannot import the packages of {purpose} ({detail}). Install {lock} into it with `pip install --no-deps -r {lock}`, or drop --python to use the project venv")]
    MissingPackages {
        python: PathBuf,
        purpose: &'static str,
        lock: &'static str,
        detail: String,
    },
    #[error("{python}: expected `{expect}` from `{code}` ({what}), saw `{seen}`")]
    Probe {
        python: PathBuf,
        what: &'static str,
        code: &'static str,
        expect: &'static str,
        seen: String,
    },
    #[error("the interpreter {python} does not exist; pass an existing python to --python (or PHASE1_PYTHON), or drop it to use the project venv")]
    NoInterpreter { python: PathBuf },
    #[error(transparent)]
    Patch(#[from] PatchError),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The interpreter a run uses, and how it was obtained.
#[derive(Debug, Clone, Serialize)]
pub struct PythonEnv {
    /// The env's name (`cpu`, `vllm`).
    pub env: &'static str,
    pub python: PathBuf,
    /// `project-venv` or `user-interpreter`.
    pub source: &'static str,
    /// Present when this call (re)built or re-patched the venv.
    pub bootstrap: Option<BootstrapReport>,
    /// The reviewed patches in this env: applied by the bootstrap (project
    /// venv) or verified as applied (user interpreter). Empty for `cpu`.
    pub patches: Vec<AppliedPatch>,
    /// The KVCR build layered over the env ([`layer`]); `python` is then the
    /// KVCR env's interpreter and `kvcr.base_python` the base env's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kvcr: Option<KvcrBuild>,
}

/// `env` with the KVCR build `spec` layered over it ([`kvcr::resolve`]):
/// the same env, run through the KVCR env's interpreter.
pub fn layer(
    repo_root: &Path,
    env: PythonEnv,
    spec: &KvcrSpec,
) -> Result<PythonEnv, kvcr::KvcrError> {
    let layered = kvcr::resolve(repo_root, &env.python, spec)?;
    Ok(PythonEnv {
        python: layered.python,
        kvcr: Some(layered.build),
        ..env
    })
}

/// Measurements of one bootstrap, recorded in the run's evidence.
#[derive(Debug, Clone, Serialize)]
pub struct BootstrapReport {
    /// `built` (a fresh venv) or `re-patched` (same packages, patches changed).
    pub kind: &'static str,
    pub seconds: f64,
    pub venv_bytes: u64,
    pub lock_sha256: String,
    /// Digest of the lock and the patch files together (the reuse key).
    pub env_sha256: String,
}

/// The CPU stack's env: `ensure_env(repo_root, &CPU_STACK, user_python)`.
pub fn ensure(repo_root: &Path, user_python: Option<&Path>) -> Result<PythonEnv, PyEnvError> {
    ensure_env(repo_root, &CPU_STACK, user_python)
}

/// Returns a ready interpreter for `spec`: `user_python` after checking it
/// (imports, probes, patches already applied), or the project venv under
/// `repo_root`, built, re-patched or reused as needed.
pub fn ensure_env(
    repo_root: &Path,
    spec: &EnvSpec,
    user_python: Option<&Path>,
) -> Result<PythonEnv, PyEnvError> {
    let patch_files = spec
        .patches
        .iter()
        .map(|p| Patch::load(&repo_root.join(p)))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(python) = user_python {
        if !python.exists() {
            return Err(PyEnvError::NoInterpreter {
                python: python.to_path_buf(),
            });
        }
        check(python, spec)?;
        let site = site_packages(python)?;
        let applied = patch_files
            .iter()
            .map(|p| patches::verify_applied(python, &site, p))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(PythonEnv {
            env: spec.name,
            python: python.to_path_buf(),
            source: "user-interpreter",
            bootstrap: None,
            patches: applied,
            kvcr: None,
        });
    }
    let lock_path = repo_root.join(spec.lock);
    let lock = fs::read(&lock_path).map_err(|source| PyEnvError::Lock {
        path: lock_path.clone(),
        source,
    })?;
    let lock_digest = hex::encode(Sha256::digest(&lock));
    let digest = env_digest(&lock, &patch_files);
    let venv = repo_root.join(spec.venv_dir);
    let python = venv.join("bin/python");

    // Two runs starting at once must not build the venv twice.
    let _guard = lock_exclusive(&repo_root.join(format!("{}.lock", spec.venv_dir)))?;

    let project_env = |bootstrap, patches| PythonEnv {
        env: spec.name,
        python: python.clone(),
        source: "project-venv",
        bootstrap,
        patches,
        kvcr: None,
    };
    if read_trimmed(&venv.join(MARKER)).as_deref() == Some(digest.as_str()) && python.exists() {
        let records = patch_files.iter().map(Patch::record).collect();
        return Ok(project_env(None, records));
    }
    let started = Instant::now();
    let same_packages = read_trimmed(&venv.join(PACKAGES_MARKER)).as_deref()
        == Some(lock_digest.as_str())
        && python.exists();
    if same_packages {
        match repatch(&venv, spec, &patch_files, &digest) {
            Ok(applied) => {
                let report = report("re-patched", started, &venv, &lock_digest, &digest);
                return Ok(project_env(Some(report), applied));
            }
            Err(e) => progress(&format!("re-patching failed ({e}); rebuilding the env")),
        }
    }
    let applied = bootstrap(&venv, spec, &lock_path, &patch_files, &lock_digest, &digest)?;
    let report = report("built", started, &venv, &lock_digest, &digest);
    progress(&format!(
        "Python env `{}` ready in {:.1} s ({} MB)",
        spec.name,
        report.seconds,
        report.venv_bytes / 1_000_000
    ));
    Ok(project_env(Some(report), applied))
}

/// The reuse key: the lock's digest alone when there are no patches (so the
/// CPU stack's existing venvs stay valid), else the lock and every patch file.
pub fn env_digest(lock: &[u8], patch_files: &[Patch]) -> String {
    if patch_files.is_empty() {
        return hex::encode(Sha256::digest(lock));
    }
    let mut hasher = Sha256::new();
    hasher.update(b"lock\0");
    hasher.update(lock);
    for patch in patch_files {
        hasher.update(b"\0patch\0");
        hasher.update(patch.file.as_bytes());
        hasher.update(b"\0");
        hasher.update(&patch.bytes);
    }
    hex::encode(hasher.finalize())
}

fn bootstrap(
    venv: &Path,
    spec: &EnvSpec,
    lock_path: &Path,
    patch_files: &[Patch],
    lock_digest: &str,
    digest: &str,
) -> Result<Vec<AppliedPatch>, PyEnvError> {
    if !patch_files.is_empty() {
        patches::require_patch_program()?;
    }
    let base = std::env::var("PHASE1_BASE_PYTHON").unwrap_or_else(|_| "python3".into());
    progress(&format!(
        "creating the Python env `{}` for {} in {} from {} ({})",
        spec.name,
        spec.purpose,
        venv.display(),
        lock_path.display(),
        spec.size_hint
    ));
    let steps = if patch_files.is_empty() { 3 } else { 4 };
    if venv.exists() {
        fs::remove_dir_all(venv).map_err(|source| PyEnvError::Io {
            path: venv.to_path_buf(),
            source,
        })?;
    }
    progress(&format!("step 1/{steps}: python -m venv"));
    run_step(Command::new(&base).arg("-m").arg("venv").arg(venv))?;
    progress(&format!(
        "step 2/{steps}: pip install --no-deps -r {} ({})",
        spec.lock, spec.install_hint
    ));
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
    write(&venv.join(PACKAGES_MARKER), lock_digest)?;
    let python = venv.join("bin/python");
    let applied = if patch_files.is_empty() {
        Vec::new()
    } else {
        progress(&format!(
            "step 3/{steps}: applying {} reviewed patches (version-checked, dry run first)",
            patch_files.len()
        ));
        apply_all(venv, &python, patch_files)?
    };
    progress(&format!("step {steps}/{steps}: checking imports"));
    check(&python, spec)?;
    write(&venv.join(MARKER), digest)?;
    Ok(applied)
}

/// Same packages, changed patches: revert the copies recorded at the last
/// apply, then apply the current files. Any failure means a rebuild.
fn repatch(
    venv: &Path,
    spec: &EnvSpec,
    patch_files: &[Patch],
    digest: &str,
) -> Result<Vec<AppliedPatch>, PyEnvError> {
    progress(&format!(
        "the patches of `{}` changed, the lock did not: re-patching {}",
        spec.name,
        venv.display()
    ));
    patches::require_patch_program()?;
    let marker = venv.join(MARKER);
    if marker.exists() {
        fs::remove_file(&marker).map_err(|source| PyEnvError::Io {
            path: marker.clone(),
            source,
        })?;
    }
    let python = venv.join("bin/python");
    let site = site_packages(&python)?;
    // Revert what the last apply recorded, in reverse order of application.
    let applied_dir = venv.join(APPLIED_DIR);
    let order = read_trimmed(&applied_dir.join("ORDER")).unwrap_or_default();
    let old = order
        .lines()
        .rev()
        .map(|file| Patch::load(&applied_dir.join(file)))
        .collect::<Result<Vec<_>, _>>()?;
    for patch in &old {
        progress(&format!("reverting {}", patch.file));
        patches::revert(&site, patch)?;
    }
    let applied = apply_all(venv, &python, patch_files)?;
    progress("checking imports");
    check(&python, spec)?;
    write(&marker, digest)?;
    progress(&format!("Python env `{}` re-patched", spec.name));
    Ok(applied)
}

/// Applies every patch and keeps a copy of each (and their order) in the venv.
fn apply_all(
    venv: &Path,
    python: &Path,
    patch_files: &[Patch],
) -> Result<Vec<AppliedPatch>, PyEnvError> {
    let site = site_packages(python)?;
    let applied_dir = venv.join(APPLIED_DIR);
    if applied_dir.exists() {
        fs::remove_dir_all(&applied_dir).map_err(|source| PyEnvError::Io {
            path: applied_dir.clone(),
            source,
        })?;
    }
    fs::create_dir_all(&applied_dir).map_err(|source| PyEnvError::Io {
        path: applied_dir.clone(),
        source,
    })?;
    let mut applied = Vec::new();
    let mut order = String::new();
    for patch in patch_files {
        let record = patches::apply(python, &site, patch)?;
        progress(&format!(
            "  applied {} to {} (sha256 {})",
            record.file,
            record.applies_to,
            &record.sha256[..12]
        ));
        fs::write(applied_dir.join(&patch.file), &patch.bytes).map_err(|source| {
            PyEnvError::Io {
                path: applied_dir.join(&patch.file),
                source,
            }
        })?;
        order.push_str(&patch.file);
        order.push('\n');
        write(&applied_dir.join("ORDER"), &order)?;
        applied.push(record);
    }
    Ok(applied)
}

fn report(
    kind: &'static str,
    started: Instant,
    venv: &Path,
    lock_digest: &str,
    digest: &str,
) -> BootstrapReport {
    BootstrapReport {
        kind,
        seconds: started.elapsed().as_secs_f64(),
        venv_bytes: dir_size(venv),
        lock_sha256: lock_digest.to_string(),
        env_sha256: digest.to_string(),
    }
}

fn lock_exclusive(path: &Path) -> Result<Flock<fs::File>, PyEnvError> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| PyEnvError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| PyEnvError::Io {
        path: path.to_path_buf(),
        source: errno.into(),
    })
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn write(path: &Path, contents: &str) -> Result<(), PyEnvError> {
    fs::write(path, contents).map_err(|source| PyEnvError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn progress(message: &str) {
    crate::events::emit(crate::events::RunEvent::SetupStep {
        part: crate::events::SetupPart::PythonEnv,
        message: message.to_string(),
    });
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

/// Runs `code` with `python`; Ok(stdout) on success, Err(last stderr line).
fn python_output(python: &Path, code: &str) -> Result<Result<String, String>, PyEnvError> {
    let output = Command::new(python)
        .arg("-c")
        .arg(code)
        .output()
        .map_err(|source| PyEnvError::Run {
            command: format!("{} -c '{code}'", python.display()),
            source,
        })?;
    if output.status.success() {
        return Ok(Ok(String::from_utf8_lossy(&output.stdout).into_owned()));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Ok(Err(stderr
        .lines()
        .last()
        .unwrap_or("no output")
        .to_string()))
}

/// The env's imports and probes.
fn check(python: &Path, spec: &EnvSpec) -> Result<(), PyEnvError> {
    let imports = format!("import {}", spec.required_imports.join(", "));
    if let Err(detail) = python_output(python, &imports)? {
        return Err(PyEnvError::MissingPackages {
            python: python.to_path_buf(),
            purpose: spec.purpose,
            lock: spec.lock,
            detail,
        });
    }
    for probe in spec.probes {
        let seen = python_output(python, probe.code)?.unwrap_or_else(|err| err);
        if !seen.lines().any(|line| line.trim() == probe.expect) {
            return Err(PyEnvError::Probe {
                python: python.to_path_buf(),
                what: probe.what,
                code: probe.code,
                expect: probe.expect,
                seen: seen.trim().to_string(),
            });
        }
    }
    Ok(())
}

fn site_packages(python: &Path) -> Result<PathBuf, PyEnvError> {
    let code = "import sysconfig; print(sysconfig.get_path('purelib'))";
    match python_output(python, code)? {
        Ok(path) if !path.trim().is_empty() => Ok(PathBuf::from(path.trim())),
        Ok(_) => Err(PyEnvError::Probe {
            python: python.to_path_buf(),
            what: "where site-packages is",
            code,
            expect: "a directory",
            seen: String::new(),
        }),
        Err(seen) => Err(PyEnvError::Probe {
            python: python.to_path_buf(),
            what: "where site-packages is",
            code,
            expect: "a directory",
            seen,
        }),
    }
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
mod tests;
