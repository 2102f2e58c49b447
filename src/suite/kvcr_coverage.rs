//! `--kvcr-coverage` in a run: the stack starts through an interpreter that
//! turns the KVCR env's coverage hook on, and after teardown the data of
//! every KVCR process becomes the run's [`KvcrCoverage`].

use std::path::PathBuf;

use crate::config::Settings;
use crate::evidence::kvcr_coverage::DIR;
use crate::evidence::{ComponentImport, KvcrCoverage, RunDir};
use crate::pyenv::{coverage, PythonEnv};

/// The interpreter the stack runs: `env`'s own, or with `--kvcr-coverage`
/// a wrapper that has every process measure its KVCR build into the run
/// directory (after checking that the env has coverage.py).
pub fn interpreter(settings: &Settings, run: &RunDir, env: &PythonEnv) -> Result<PathBuf, String> {
    if !settings.kvcr_coverage {
        return Ok(env.python.clone());
    }
    let build = env
        .kvcr
        .as_ref()
        .ok_or("--kvcr-coverage: the run's Python env has no KVCR build to measure")?;
    let version = coverage::check_installed(&env.python).map_err(|e| e.to_string())?;
    let dir = run.root().join(DIR);
    let wrapper = coverage::measured_python(&env.python, &build.location, &dir)
        .map_err(|e| format!("--kvcr-coverage: {e}"))?;
    tracing::info!(
        "KVCR processes run under coverage.py {version}; data in {}",
        coverage::data_dir(&dir).display()
    );
    Ok(wrapper)
}

/// An attached stack's processes were started by another run, without
/// measurement: `--kvcr-coverage` cannot apply.
pub fn refuse_attached(settings: &Settings) -> Result<(), String> {
    if settings.kvcr_coverage {
        return Err("--kvcr-coverage measures the KVCR processes a run starts; this run attaches to a stack another run started (--attach). Drop one of the two".into());
    }
    Ok(())
}

/// After teardown: the run's coverage, written as `kvcr-coverage.json`;
/// `None` without `--kvcr-coverage` or without a KVCR build (an attach
/// that failed, no stack).
pub fn collect(
    settings: &Settings,
    run: &RunDir,
    python: Option<&PythonEnv>,
    imports: &[ComponentImport],
) -> Option<KvcrCoverage> {
    if !settings.kvcr_coverage {
        return None;
    }
    let env = python?;
    let build = env.kvcr.as_ref()?;
    let coverage = KvcrCoverage::collect(&env.python, run.root(), build, imports, &run.logs_dir());
    if let Err(e) = coverage.write(run) {
        tracing::warn!("cannot write the KVCR coverage record: {e}");
    }
    Some(coverage)
}
