//! Does the KVCR build's Guard service take the flags the harness passes?
//!
//! Another KVCR version may rename or drop a flag of
//! `python -m kvcr.kvcr_service`. Before any process starts, [`check`]
//! reads the build's `--help` (once per build: cached by its files digest)
//! and fails naming every flag the harness would pass that the build does
//! not list, instead of a Guard that exits with argparse's usage line.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use super::KvcrBuild;
use crate::telemetry::names::kvcr_cli::GUARD_MODULE;

/// The `--flags` a `--help` text lists.
pub fn listed_flags(help: &str) -> BTreeSet<String> {
    help.split(|c: char| c.is_whitespace() || "[](),|{}".contains(c))
        .filter_map(|word| {
            let flag = word.split('=').next().unwrap_or(word);
            let ok = flag.len() > 2
                && flag.starts_with("--")
                && flag[2..]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            ok.then(|| flag.to_string())
        })
        .collect()
}

/// The flags of `used` that `help` does not list, as an error naming them
/// and the build.
pub fn missing(used: &[String], help: &str, build: &KvcrBuild) -> Result<(), String> {
    let listed = listed_flags(help);
    let mut absent: Vec<&str> = used
        .iter()
        .map(String::as_str)
        .filter(|f| !listed.contains(*f))
        .collect();
    absent.sort_unstable();
    absent.dedup();
    if absent.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the Guard service of {} does not accept {} the harness passes to `python -m {GUARD_MODULE}`: {} \
         (its --help lists {}). A renamed flag goes in one place: the Guard's command line in src/engine/dynamo.rs",
        build.one_line(),
        if absent.len() == 1 { "a flag" } else { "flags" },
        absent.join(", "),
        listed.into_iter().collect::<Vec<_>>().join(" "),
    ))
}

/// Checks `used` against the `--help` of the build's Guard service, run
/// with `python` (the KVCR env's interpreter); the help text is cached in
/// `cache_dir` under the build's files digest.
pub fn check(
    python: &Path,
    build: &KvcrBuild,
    used: &[String],
    cache_dir: &Path,
) -> Result<(), String> {
    if used.is_empty() {
        return Ok(());
    }
    let cached = cache_dir.join(format!(
        "{}.txt",
        build.files_sha256.get(..32).unwrap_or(&build.files_sha256)
    ));
    let help = match std::fs::read_to_string(&cached) {
        Ok(text) => text,
        Err(_) => {
            let out = Command::new(python)
                .args(["-m", GUARD_MODULE, "--help"])
                .output()
                .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
            if !out.status.success() {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let tail: Vec<&str> = stderr.trim_end().lines().rev().take(12).collect();
                return Err(format!(
                    "the Guard service of {} does not start: `python -m {GUARD_MODULE} --help` failed ({}):\n{}",
                    build.one_line(),
                    out.status,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
            }
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if std::fs::create_dir_all(cache_dir).is_ok() {
                let _ = std::fs::write(&cached, &text);
            }
            text
        }
    };
    missing(used, &help, build)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kvcr 0.1.1's `python -m kvcr.kvcr_service --help`.
    const HELP_0_1_1: &str =
        "usage: kvcr_service.py [-h] --socket-path SOCKET_PATH --pool-dir POOL_DIR
                       --guard-count GUARD_COUNT --pool-sizes-gb
                       POOL_SIZES_BYTES --compatibility-digest
                       COMPATIBILITY_DIGEST
                       [--heartbeat-timeout-ms HEARTBEAT_TIMEOUT_MS]
                       [--log-level {DEBUG,INFO,WARNING,ERROR,CRITICAL}]

options:
  -h, --help            show this help message and exit
  --socket-path SOCKET_PATH
  --pool-dir POOL_DIR
  --guard-count GUARD_COUNT
  --pool-sizes-gb POOL_SIZES_BYTES
  --compatibility-digest COMPATIBILITY_DIGEST
  --heartbeat-timeout-ms HEARTBEAT_TIMEOUT_MS
                        opt in to early Guard promotion (minimum 1000 ms;
                        default: pidfd-only)
  --log-level {DEBUG,INFO,WARNING,ERROR,CRITICAL}
";

    fn used(flags: &[&str]) -> Vec<String> {
        flags.iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn reads_the_flags_of_an_argparse_help() {
        let flags = listed_flags(HELP_0_1_1);
        for f in [
            "--socket-path",
            "--pool-dir",
            "--guard-count",
            "--pool-sizes-gb",
            "--compatibility-digest",
            "--heartbeat-timeout-ms",
            "--log-level",
            "--help",
        ] {
            assert!(flags.contains(f), "{f} in {flags:?}");
        }
        assert!(!flags.iter().any(|f| f.contains('{')), "{flags:?}");
    }

    #[test]
    fn every_flag_0_1_1_takes_passes() {
        let flags = used(&["--socket-path", "--pool-dir", "--log-level"]);
        let build = crate::pyenv::provenance::sample_build();
        assert_eq!(missing(&flags, HELP_0_1_1, &build), Ok(()));
    }

    #[test]
    fn a_renamed_flag_is_named_with_the_build() {
        let renamed = HELP_0_1_1.replace("--pool-sizes-gb", "--pool-sizes");
        let build = crate::pyenv::provenance::sample_build();
        let err = missing(
            &used(&["--socket-path", "--pool-sizes-gb"]),
            &renamed,
            &build,
        )
        .expect_err("renamed");
        assert!(
            err.starts_with("the Guard service of kvcr 0.1.1 (source dir: /src/kvcr)"),
            "{err}"
        );
        assert!(err.contains("does not accept a flag the harness passes to `python -m kvcr.kvcr_service`: --pool-sizes-gb"), "{err}");
        assert!(err.contains("--pool-sizes "), "{err}");
    }
}
