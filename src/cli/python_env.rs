//! `kvcr-e2e python-env`: create or check a pinned Python env.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::USAGE;

/// `kvcr-e2e python-env …`; `args` follow `python-env`.
pub fn python_env(repo_root: &Path, args: &[String]) -> ExitCode {
    use crate::pyenv::{self, spec};
    let mut env = &pyenv::CPU_STACK;
    let mut user_python = None;
    let mut kvcr = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match (flag.as_str(), rest.next()) {
            ("--python", Some(path)) => user_python = Some(PathBuf::from(path)),
            ("--kvcr", Some(text)) => match crate::config::KvcrSpec::parse(text) {
                Ok(spec) => kvcr = Some(spec),
                Err(why) => {
                    eprintln!(
                        "error: invalid value `{text}` for --kvcr: expected {} ({why})",
                        crate::pyenv::kvcr_spec::ACCEPTED
                    );
                    return ExitCode::from(2);
                }
            },
            ("--env", Some(name)) => match spec::by_name(name) {
                Some(found) => env = found,
                None => {
                    let known: Vec<_> = spec::ALL.iter().map(|s| s.name).collect();
                    eprintln!(
                        "error: unknown env `{name}`; expected one of: {}\n\n{USAGE}",
                        known.join(", ")
                    );
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!(
                    "error: python-env takes only --env cpu|vllm|aiperf|mutgen, --python PATH and --kvcr SPEC, saw `{flag}`\n\n{USAGE}"
                );
                return ExitCode::from(2);
            }
        }
    }
    let ensured = pyenv::ensure_env(repo_root, env, user_python.as_deref())
        .map_err(|e| e.to_string())
        .and_then(|env| match &kvcr {
            Some(spec) => pyenv::layer(repo_root, env, spec).map_err(|e| e.to_string()),
            None => Ok(env),
        });
    match ensured {
        Ok(env) => {
            println!("{} ({}, env {})", env.python.display(), env.source, env.env);
            if let Some(build) = &env.kvcr {
                println!("{}", build.one_line());
                println!("kvcr imported from {}", build.location.display());
            }
            for patch in &env.patches {
                println!(
                    "patch {} on {} (sha256 {})",
                    patch.file, patch.applies_to, patch.sha256
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
