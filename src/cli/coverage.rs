//! `kvcr-e2e coverage merge`: the KVCR coverage of several runs as one table.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::USAGE;
use crate::evidence::kvcr_coverage_merge::{self, MERGED_JSON, MERGED_MD};

/// Where the merged data and tables go unless `--out` says.
const DEFAULT_OUT: &str = "target/kvcr-coverage/merged";

/// `kvcr-e2e coverage …`; `args` follow `coverage`.
pub fn coverage(repo_root: &Path, args: &[String]) -> ExitCode {
    let usage = |why: &str| {
        eprintln!("error: {why}\n\n{USAGE}");
        ExitCode::from(2)
    };
    let Some(("merge", rest)) = args.split_first().map(|(c, r)| (c.as_str(), r)) else {
        return usage("coverage takes `merge RUN_DIR... [--out DIR] [--python PATH]`");
    };
    let mut runs = Vec::new();
    let mut out = repo_root.join(DEFAULT_OUT);
    let mut python = None;
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--out" | "--python" => {
                let Some(value) = rest.next() else {
                    return usage(&format!("{arg} needs a value"));
                };
                if arg == "--out" {
                    out = PathBuf::from(value);
                } else {
                    python = Some(PathBuf::from(value));
                }
            }
            flag if flag.starts_with("--") => {
                return usage(&format!("coverage merge does not take {flag}"))
            }
            dir => runs.push(PathBuf::from(dir)),
        }
    }
    if runs.is_empty() {
        return usage("coverage merge needs at least one run directory");
    }
    let python = match crate::pyenv::ensure(repo_root, python.as_deref()) {
        Ok(env) => env.python,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // coverage.py runs in `out`: every path it is given must not depend on
    // the directory it runs in.
    let cwd = std::env::current_dir().unwrap_or_default();
    let absolute = |p: PathBuf| if p.is_relative() { cwd.join(p) } else { p };
    let runs: Vec<PathBuf> = runs.into_iter().map(absolute).collect();
    let out = absolute(out);
    match kvcr_coverage_merge::merge(&python, &runs, &out) {
        Ok(merged) => {
            print!("{}", kvcr_coverage_merge::markdown(&merged));
            println!(
                "\nwritten: {} and {} (data: {})",
                out.join(MERGED_MD).display(),
                out.join(MERGED_JSON).display(),
                out.join(crate::pyenv::coverage::COMBINED).display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
