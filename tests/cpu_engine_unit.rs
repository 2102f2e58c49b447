//! The CPU engine worker's own unit tests (pytest), run from `cargo test` in
//! the project's pinned Python env.

use std::path::Path;
use std::process::Command;

#[test]
fn cpu_engine_unit_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("PHASE1_PYTHON").map(std::path::PathBuf::from);
    let env = kvcr_e2e::pyenv::ensure(root, python.as_deref()).expect("the pinned Python env");
    let output = Command::new(&env.python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "fixtures/cpu-engine/tests",
        ])
        .env("PYTHONPATH", root.join("fixtures/cpu-engine"))
        .current_dir(root)
        .output()
        .expect("pytest runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{text}");
    assert!(
        output.status.success(),
        "the CPU engine's unit tests failed:\n{text}"
    );
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");
}
