//! What the runner and attach test targets share: budgets from the user's
//! settings, polling with a deadline, children that die with the test, and
//! the `phase1` suite binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kvcr_e2e::config;

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The user's settings (profiles, `PHASE1_*`), as the suite would see them.
pub fn settings() -> config::Settings {
    let args = config::split_args(["lanes"]).expect("no flags").0;
    let env = config::Env::from_process().unwrap_or_else(|e| panic!("PHASE1_* environment: {e}"));
    config::resolve(&args, &env)
        .unwrap_or_else(|e| panic!("settings: {e}"))
        .settings
}

/// How long a stack may take to come up with its reference phase done:
/// the user's startup timeout for each of the two.
pub fn stack_budget() -> Duration {
    Duration::from_secs(settings().startup_timeout_s * 2)
}

/// Polls `check` every 100 ms until it yields, or panics naming `what`.
pub fn poll<T>(what: &str, budget: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            started.elapsed() < budget,
            "timed out after {budget:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child process this test started; SIGKILLed and reaped when dropped.
pub struct Owned(pub Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `phase1` suite binary: the newest one cargo built beside this test,
/// else built now (`cargo test --no-run --test phase1`).
pub fn phase1_binary() -> PathBuf {
    let deps = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .expect("the test binary lives in target/<profile>/deps");
    let newest = |deps: &Path| {
        std::fs::read_dir(deps)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                name.starts_with("phase1-") && !name.contains('.')
            })
            .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
    };
    let own = std::fs::metadata(std::env::current_exe().expect("current exe"))
        .and_then(|m| m.modified())
        .ok();
    if let Some(found) = newest(&deps) {
        // Built with (or after) this test binary: from the same sources.
        if found.metadata().and_then(|m| m.modified()).ok() >= own {
            return found;
        }
    }
    eprintln!("[lanes] building the phase1 suite binary (cargo test --no-run --test phase1)");
    let status = Command::new(env!("CARGO"))
        .args(["test", "--no-run", "--test", "phase1"])
        .current_dir(root())
        .stdout(Stdio::null())
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "cargo test --no-run --test phase1: {status}"
    );
    newest(&deps).expect("cargo built the phase1 test binary")
}
