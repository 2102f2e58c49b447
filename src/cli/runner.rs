//! `kvcr-e2e runner KIND`: the Slurm, container or Kubernetes artifacts.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::USAGE;

/// `kvcr-e2e runner KIND …`; `args` follow `runner`.
pub fn runner(repo_root: &Path, args: &[String]) -> ExitCode {
    use crate::config;
    use crate::runner::{self, RunnerKind};
    let kinds: Vec<RunnerKind> = match args.first().map(String::as_str) {
        Some("base-image") if args.len() == 1 => {
            let work = repo_root.join("target/tool-envs/base-image");
            return match runner::base_image::ensure(&work) {
                Ok(image) => {
                    println!("{image}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: base image: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Some("all") => RunnerKind::ALL.to_vec(),
        Some(word) => match RunnerKind::from_word(word) {
            Some(kind) => vec![kind],
            None => {
                eprintln!("error: unknown runner `{word}`; expected slurm, container, k8s or all\n\n{USAGE}");
                return ExitCode::from(2);
            }
        },
        None => {
            eprintln!("error: `runner` needs a kind: slurm, container, k8s or all\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut out: Option<PathBuf> = None;
    let mut apply = false;
    let mut harness_argv = vec!["kvcr-e2e runner".to_string()];
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        if arg == "--apply" {
            apply = true;
        } else if arg == "--out" {
            match rest.next() {
                Some(dir) => out = Some(PathBuf::from(dir)),
                None => {
                    eprintln!("error: --out needs a directory\n\n{USAGE}");
                    return ExitCode::from(2);
                }
            }
        } else {
            harness_argv.push(arg.clone());
        }
    }
    let settings = match config::split_args(harness_argv)
        .map_err(|e| e.to_string())
        .and_then(|(harness, _)| {
            let env = config::Env::from_process().map_err(|e| e.to_string())?;
            config::resolve(&harness, &env).map_err(|e| e.to_string())
        }) {
        Ok(resolved) => resolved.settings,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    for kind in kinds {
        let dir = match (&out, args.first().map(String::as_str)) {
            (Some(dir), Some("all")) => dir.join(kind.as_str()),
            (Some(dir), _) => dir.clone(),
            (None, _) => repo_root.join("target/runners").join(kind.as_str()),
        };
        let written = runner::artifacts(kind, &settings, repo_root).and_then(|files| {
            runner::write_all(&files, &dir)
                .map_err(|e| format!("cannot write into {}: {e}", dir.display()))
        });
        match written {
            Ok(paths) => {
                for path in &paths {
                    println!("{}", path.display());
                }
                if apply && kind == RunnerKind::K8s {
                    let objects = runner::k8s_apply::applicable(&paths);
                    if let Err(e) = runner::k8s_apply::apply(&objects) {
                        eprintln!("error: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            Err(e) => {
                eprintln!("error: {} runner: {e}", kind.as_str());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
