//! The import check turns a run red before any case when the stack's KVCR
//! processes import another kvcr than the build under test.
//!
//! The fault: a copy of the default build's `kvcr` package with one line
//! added, put first on the harness's `PYTHONPATH` (as a user testing a
//! local edit by hand would). Every Guard and worker then imports the copy
//! (a component's `PYTHONPATH` adds to the harness's own), not the resolved
//! build, and the run must fail at setup naming them, with the copy's path,
//! and run no case. One real CPU stack, no reference phase when the cache
//! holds it: `cargo test --test kvcr_import_check`.

#[path = "lanes/mod.rs"]
mod lanes;

use std::process::Command;

use kvcr_e2e::config::KvcrSpec;
use kvcr_e2e::pyenv::{self, kvcr};

#[test]
fn a_stack_that_imports_another_kvcr_fails_before_any_case() {
    let root = lanes::root();
    let base = pyenv::ensure(root, None).expect("the CPU stack's Python env");
    let default = kvcr::resolve(root, &base.python, &KvcrSpec::default()).expect("default");
    let evidence = lanes::evidence_dir("kvcr_import_check");

    // The shadowing copy: the same package, one line more.
    let shadow = evidence.join("shadow");
    std::fs::create_dir_all(&shadow).expect("mkdir");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(&default.build.location)
        .arg(shadow.join("kvcr"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(copied, "copy {}", default.build.location.display());
    let init = shadow.join("kvcr/__init__.py");
    let mut text = std::fs::read_to_string(&init).expect("read");
    text.push_str("\nE2E_SHADOW = True  # planted by tests/kvcr_import_check.rs\n");
    std::fs::write(&init, text).expect("write");

    let runs = evidence.join("runs");
    let out = Command::new(lanes::phase1_binary())
        .args(["--cases", "TC-01", "--run-dir"])
        .arg(&runs)
        .arg("TC-01")
        .env("PYTHONPATH", &shadow)
        .current_dir(root)
        .output()
        .expect("the suite runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the run must fail:\n{stderr}");
    let run_dir = std::fs::read_dir(runs.join("phase1"))
        .expect("a run directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("setup-error.txt").is_file())
        .unwrap_or_else(|| panic!("no setup-error.txt under {}:\n{stderr}", runs.display()));
    let error = std::fs::read_to_string(run_dir.join("setup-error.txt")).expect("read");
    let copy = shadow.join("kvcr").canonicalize().expect("canonical");
    assert!(
        error.starts_with("KVCR import check failed: the KVCR processes do not all import the build under test, kvcr 0.1.1 from"),
        "{error}"
    );
    for component in ["guard", "worker-A", "worker-B"] {
        assert!(
            error.contains(&format!("{component} (pid ")),
            "{component} named: {error}"
        );
    }
    assert!(
        error.contains(&format!("from {}", copy.display())),
        "{error}"
    );
    // No case ran against the wrong build.
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("results.json")).expect("results.json"),
    )
    .expect("json");
    let cases = results["run"]["cases"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(cases.iter().all(|c| c["outcome"] != "passed"), "{cases:?}");
}
