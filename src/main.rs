//! `kvcr-e2e`: developer commands around the phase 1 suite.
//!
//! ```text
//! kvcr-e2e python-env        create or check the CPU stack's pinned Python env
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: kvcr-e2e <command>

commands:
  python-env [--python PATH]   create (or reuse) the pinned Python env of the CPU stack
                               in .venv, or check an existing interpreter
  help                         this text

The suite itself runs with `cargo test --test phase1` (see README.md).";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match args.first().map(String::as_str) {
        Some("python-env") => python_env(&repo_root, &args[1..]),
        Some("help" | "--help" | "-h") | None => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("error: unknown command `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn python_env(repo_root: &std::path::Path, args: &[String]) -> ExitCode {
    let user_python = match args {
        [] => None,
        [flag, path] if flag == "--python" => Some(PathBuf::from(path)),
        _ => {
            eprintln!("error: python-env takes only --python PATH\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match kvcr_e2e::pyenv::ensure(repo_root, user_python.as_deref()) {
        Ok(env) => {
            println!("{} ({})", env.python.display(), env.source);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
