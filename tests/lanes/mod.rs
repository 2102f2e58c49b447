//! What the live test targets share (runner lanes, attach, lifecycle, the
//! namespace node): budgets from the user's settings, polling with a
//! deadline, children that die with the test, and the `phase1` suite
//! binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kvcr_e2e::config;
use kvcr_e2e::wait::{self, Poll};

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
    settings().startup_timeout * 2
}

/// Polls `check` every 100 ms until it yields ([`wait::until`]), or panics
/// naming `what`.
pub fn poll<T>(what: &str, budget: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    wait::until(what, budget, Duration::from_millis(100), || {
        check().map_or_else(|| Poll::Pending("not yet".into()), Poll::Ready)
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Whether this host has a network link `name` (`ip link show`).
pub fn link_exists(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A child process this test started; SIGKILLed and reaped when dropped.
pub struct Owned(pub Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `phase1` suite binary, built from the current sources: `cargo test
/// --no-run --test phase1` (a no-op when it is fresh). The build runs
/// without the `CARGO_*` variables cargo set for this test, which would
/// otherwise make it rebuild dependencies whose build scripts watch them.
pub fn phase1_binary() -> PathBuf {
    let mut cargo = Command::new(env!("CARGO"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if (name.starts_with("CARGO_") && name != "CARGO_HOME") || name.starts_with("RUSTC") {
            cargo.env_remove(&name);
        }
    }
    let output = cargo
        .args([
            "test",
            "--no-run",
            "--test",
            "phase1",
            "--message-format=json",
        ])
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo test --no-run --test phase1: {}",
        output.status
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["target"]["name"] == "phase1")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports the phase1 executable")
}

/// A fresh directory for one test's evidence, kept after it:
/// `target/phase1/lanes/<test>/<pid>-<time>`.
pub fn evidence_dir(test: &str) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let dir = root().join(format!(
        "target/phase1/lanes/{test}/{}-{stamp}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("evidence directory");
    dir
}
