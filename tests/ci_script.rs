//! `.ci/test-step`, the step of `.ci/run` that runs README's test command:
//! its exit status is the test command's, so a red target fails CI. (An
//! earlier `.ci/run` read the status through a process substitution under
//! `set -e`, which ended before writing it, and a red run exited 0.)

use std::path::Path;
use std::process::Command;

fn test_step(script: &str) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join(".ci/test-step"))
        .args(["bash", "-c", script])
        .current_dir(root)
        .output()
        .expect("run .ci/test-step");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

const TARGETS: &str = "echo '     Running tests/a.rs (target/debug/deps/a-1)'; \
                       echo 'test x ... FAILED'; \
                       echo '   Doc-tests kvcr_e2e'";

#[test]
fn a_failing_test_command_fails_the_step_with_its_status() {
    let (code, text) = test_step(&format!("{TARGETS}; exit 101"));
    assert_eq!(code, 101, "{text}");
    assert!(text.contains("test x ... FAILED"), "output streams: {text}");
    assert!(text.contains("wall time per test target:"), "{text}");
    assert!(text.contains("tests/a.rs"), "{text}");
    assert!(text.contains("doc-tests kvcr_e2e"), "{text}");
    assert!(
        !text.contains("kvcr-e2e-ci-status"),
        "the marker is not shown: {text}"
    );
}

#[test]
fn a_green_test_command_passes_the_step() {
    let (code, text) = test_step(&format!("{TARGETS}; exit 0"));
    assert_eq!(code, 0, "{text}");
}

#[test]
fn a_test_command_killed_by_a_signal_fails_the_step() {
    let (code, text) = test_step("kill -TERM $$");
    assert_eq!(code, 128 + 15, "{text}");
}

#[test]
fn ci_run_takes_its_status_from_the_test_step() {
    let run = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run"))
        .expect("read .ci/run");
    let line = run
        .lines()
        .find(|l| l.starts_with(".ci/test-step "))
        .expect(".ci/run runs README's test command through .ci/test-step");
    assert!(line.contains("cargo test --no-fail-fast"), "{line}");
    assert!(line.ends_with("|| status=$?"), "{line}");
    assert!(
        run.trim_end().ends_with("exit \"$status\""),
        ".ci/run exits with it"
    );
}
