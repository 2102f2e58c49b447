//! `kvcr-e2e`: developer commands around the phase 1 suite.
//!
//! ```text
//! kvcr-e2e python-env        create or check the CPU stack's pinned Python env
//! kvcr-e2e stack up [FLAGS]  bring a stack up and keep it (attach runs to it)
//! kvcr-e2e stack down        tear that stack down
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: kvcr-e2e <command>

commands:
  python-env [--python PATH]   create (or reuse) the pinned Python env of the CPU stack
                               in .venv, or check an existing interpreter
  stack up [--manifest PATH] [HARNESS FLAGS]
                               bring the stack up (and the reference cache warm), write
                               its description (default target/phase1/stack.json), and
                               keep it running until `stack down` or Ctrl-C; takes the
                               same flags as the suite (--profile, --geometry, ...)
  stack down [--manifest PATH] tear that stack down
  help                         this text

Attach test runs to a running stack with
  cargo test --test phase1 -- --attach target/phase1/stack.json TC-03

The suite itself runs with `cargo test --test phase1` (see README.md).";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match args.first().map(String::as_str) {
        Some("python-env") => python_env(&repo_root, &args[1..]),
        Some("stack") => stack(&repo_root, &args[1..]),
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

fn stack(repo_root: &std::path::Path, args: &[String]) -> ExitCode {
    use kvcr_e2e::suite::commands;
    let (manifest, rest) = match args.get(1).map(String::as_str) {
        Some("--manifest") => match args.get(2) {
            Some(path) => (PathBuf::from(path), &args[3..]),
            None => {
                eprintln!("error: --manifest needs a path\n\n{USAGE}");
                return ExitCode::from(2);
            }
        },
        _ => (
            commands::default_manifest(repo_root),
            args.get(1..).unwrap_or(&[]),
        ),
    };
    match args.first().map(String::as_str) {
        Some("up") => {
            let argv = std::iter::once("kvcr-e2e stack up".to_string())
                .chain(rest.iter().cloned())
                .collect();
            commands::stack_up(argv, &manifest)
        }
        Some("down") if rest.is_empty() => commands::stack_down(&manifest),
        _ => {
            eprintln!("error: expected `stack up [--manifest PATH] [FLAGS]` or `stack down [--manifest PATH]`\n\n{USAGE}");
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
