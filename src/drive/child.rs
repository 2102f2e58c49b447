//! One phase1 child: the test binary with harness flags, our run directory
//! and trial filters, its output into a log file.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::errors::DriveError;
use crate::config;

/// A phase1 run to start as a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase1Child {
    /// The target's test binary ([`super::test_binary`]).
    pub binary: PathBuf,
    /// Where it runs (the repository root, as under `cargo test`).
    pub repo_root: PathBuf,
    /// Harness flags (`--kvcr SPEC`, the user's own).
    pub flags: Vec<String>,
    /// Trial filters; a trial runs when it matches any.
    pub filters: Vec<String>,
    /// Whether the filters are whole trial names (`--exact`).
    pub exact: bool,
    /// The base the child's run directory is made under (`--run-dir`): one
    /// per child, so its run is the only one there.
    pub run_base: PathBuf,
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildExit {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Its stdout and stderr.
    pub log: PathBuf,
    /// How long it ran.
    pub wall: Duration,
}

impl Phase1Child {
    /// The arguments after the binary: the flags, `--run-dir`, then
    /// `--exact` and the filters.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = self.flags.clone();
        argv.push("--run-dir".into());
        argv.push(self.run_base.display().to_string());
        if self.exact {
            argv.push("--exact".into());
        }
        argv.extend(self.filters.iter().cloned());
        argv
    }

    /// The command as a user would type it, for logs and reports.
    pub fn command_line(&self) -> String {
        std::iter::once(self.binary.display().to_string())
            .chain(self.argv())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs the child to its end, its output into `log`.
    pub fn run(&self, log: &Path) -> Result<ChildExit, DriveError> {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).map_err(DriveError::io(dir))?;
        }
        std::fs::create_dir_all(&self.run_base).map_err(DriveError::io(&self.run_base))?;
        let out = std::fs::File::create(log).map_err(DriveError::io(log))?;
        let err = out.try_clone().map_err(DriveError::io(log))?;
        let spawn_error = |e: std::io::Error| DriveError::Spawn {
            binary: self.binary.clone(),
            message: e.to_string(),
        };
        let started = Instant::now();
        let status = Command::new(&self.binary)
            .args(self.argv())
            .current_dir(&self.repo_root)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .status()
            .map_err(spawn_error)?;
        Ok(ChildExit {
            code: status.code(),
            log: log.to_path_buf(),
            wall: started.elapsed(),
        })
    }
}

/// Checks that `flags` are harness flags the suite knows and none of
/// `reserved` (profile keys the driver sets itself, e.g. `kvcr`, `run_dir`).
/// Flags that pass go into [`Phase1Child::flags`] unchanged.
pub fn check_harness_flags(flags: &[String], reserved: &[&str]) -> Result<(), DriveError> {
    let argv = std::iter::once("kvcr-e2e".to_string()).chain(flags.iter().cloned());
    let (harness, rest) = config::split_args(argv).map_err(|e| DriveError::Flags(e.to_string()))?;
    if let Some(extra) = rest.get(1) {
        return Err(DriveError::Flags(format!(
            "`{extra}` is not a harness flag (trial filters and libtest flags are the driver's own)"
        )));
    }
    if harness.help || harness.help_harness {
        return Err(DriveError::Flags(
            "--help is not a harness flag here; see `kvcr-e2e help`".into(),
        ));
    }
    if let Some(v) = harness.values.iter().find(|v| reserved.contains(&v.key)) {
        return Err(DriveError::Flags(format!(
            "{} is set by the driver for each child; leave it out",
            v.flag
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn argv_puts_flags_then_run_dir_then_exact_filters() {
        let child = Phase1Child {
            binary: "/t/phase1-1".into(),
            repo_root: "/repo".into(),
            flags: strings(&["--kvcr", "x.diff", "--log-level", "debug"]),
            filters: strings(&["TC-01::generation_correctness", "TC-02::local_dram_flow"]),
            exact: true,
            run_base: "/out/runs/m".into(),
        };
        assert_eq!(
            child.argv(),
            strings(&[
                "--kvcr",
                "x.diff",
                "--log-level",
                "debug",
                "--run-dir",
                "/out/runs/m",
                "--exact",
                "TC-01::generation_correctness",
                "TC-02::local_dram_flow",
            ])
        );
        let loose = Phase1Child {
            exact: false,
            filters: strings(&["TC-05"]),
            ..child
        };
        assert_eq!(
            loose.argv()[4..],
            strings(&["--run-dir", "/out/runs/m", "TC-05"])[..]
        );
        assert!(loose
            .command_line()
            .starts_with("/t/phase1-1 --kvcr x.diff"));
    }

    #[test]
    fn harness_flags_are_checked_and_reserved_ones_refused() {
        assert!(check_harness_flags(&strings(&["--log-level", "debug"]), &["kvcr"]).is_ok());
        assert!(check_harness_flags(&[], &["kvcr"]).is_ok());
        for (flags, want) in [
            (&["--kvcr", "pypi:0.1.1"][..], "set by the driver"),
            (&["--run-dir=/x"][..], "set by the driver"),
            (&["TC-01"][..], "not a harness flag"),
            (&["--exact"][..], "not a harness flag"),
            (&["--frobnicate", "1"][..], "frobnicate"),
        ] {
            let err = check_harness_flags(&strings(flags), &["kvcr", "run_dir"])
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{flags:?}: {err}");
        }
    }
}
