//! The test binary of a target, built (or found fresh) by cargo.
//!
//! A lane builds each target once, before its first child, and then runs the
//! binary directly: every child of the lane runs the same harness build (an
//! edit made while a long lane runs cannot slip into its later children), and
//! no child waits on cargo's build lock or its freshness check.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::errors::DriveError;

/// Builds `cargo test --no-run --test <target>` in `repo_root` (cargo's own
/// progress goes to stderr) and returns the test binary's path.
pub fn test_binary(repo_root: &Path, target: &str) -> Result<PathBuf, DriveError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let build_error = |message: String| DriveError::Build {
        target: target.to_string(),
        message,
    };
    let mut command = Command::new(&cargo);
    // Under `cargo test` (a test target driving a lane) this process holds
    // the `CARGO_*` variables cargo set for it; a build that sees them
    // rebuilds dependencies whose build scripts watch them.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if (name.starts_with("CARGO_") && name != "CARGO_HOME") || name.starts_with("RUSTC") {
            command.env_remove(&name);
        }
    }
    let output = command
        .args(["test", "--no-run", "--test", target])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(repo_root)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| build_error(format!("cannot start {}: {e}", cargo.to_string_lossy())))?;
    if !output.status.success() {
        return Err(build_error(format!(
            "cargo exited with {} (its errors are above)",
            output.status
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    executable_from_cargo_json(&stdout, target).ok_or_else(|| {
        build_error("cargo's messages name no executable for this test target".into())
    })
}

/// The `executable` of the `compiler-artifact` message for test target
/// `target` in cargo's `--message-format=json` output.
pub fn executable_from_cargo_json(stdout: &str, target: &str) -> Option<PathBuf> {
    stdout
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| m["target"]["name"] == target)
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == "test"))
        })
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_targets_executable_is_found_among_other_messages() {
        let out = r#"{"reason":"compiler-artifact","target":{"name":"kvcr_e2e","kind":["lib"]},"executable":null}
not json at all
{"reason":"compiler-artifact","target":{"name":"phase1_hybrid","kind":["test"]},"executable":"/t/deps/phase1_hybrid-1"}
{"reason":"compiler-artifact","target":{"name":"phase1","kind":["test"]},"executable":"/t/deps/phase1-2"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            executable_from_cargo_json(out, "phase1"),
            Some(PathBuf::from("/t/deps/phase1-2"))
        );
        assert_eq!(
            executable_from_cargo_json(out, "phase1_hybrid"),
            Some(PathBuf::from("/t/deps/phase1_hybrid-1"))
        );
        assert_eq!(executable_from_cargo_json(out, "phase1_2p1d"), None);
    }
}
