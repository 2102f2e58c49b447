//! `kvcr-e2e live-runs`: the machine's live kvcr-e2e runs
//! ([`live_runs`](crate::proc::live_runs)).
//!
//! ```text
//! kvcr-e2e live-runs [list] [--json] [HARNESS FLAGS]   every live run, one per line
//! kvcr-e2e live-runs exclusive [HARNESS FLAGS] -- CMD  wait until no run is live, then
//!                                                      hold the machine while CMD runs
//! ```
//!
//! `exclusive` is what CI wraps `cargo test` in: it waits (up to
//! `exclusive_timeout_s`) for every other live run, registers one exclusive
//! entry for the whole command, and marks CMD's runs as its session, so
//! they neither wait for it nor for each other (a test that runs two stacks
//! at once still can), while runs from outside are warned.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Duration;

use crate::config::{self, Settings};
use crate::proc::live_runs::{Registry, RunInfo, RunKind, SESSION_ENV};

use crate::suite::registry_dir;

/// `kvcr-e2e live-runs …`; `args` follow `live-runs`.
pub fn live_runs(repo_root: &Path, args: &[String]) -> ExitCode {
    let (verb, rest) = match args.first().map(String::as_str) {
        Some(v @ ("list" | "exclusive" | "hold")) => (v, &args[1..]),
        _ => ("list", args),
    };
    let (before, command) = match rest.iter().position(|a| a == "--") {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let mut json = false;
    let mut target = "hold".to_string();
    let mut harness = vec![format!("kvcr-e2e live-runs {verb}")];
    let mut it = before.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--json" if verb == "list" => json = true,
            "--target" if verb == "hold" => match it.next() {
                Some(t) => target = t.clone(),
                None => return usage("--target needs a name"),
            },
            _ => harness.push(arg.clone()),
        }
    }
    let settings = match resolve(harness) {
        Ok(settings) => settings,
        Err(e) => return usage(&e),
    };
    let registry = match Registry::open(&registry_dir(&settings, repo_root)) {
        Ok(registry) => registry,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match verb {
        "exclusive" if command.is_empty() => usage("`live-runs exclusive` needs `-- CMD [ARGS]`"),
        "exclusive" => exclusive(&registry, &settings, command),
        "hold" => hold(&registry, &settings, &target),
        _ => list(&registry, json),
    }
}

fn resolve(harness: Vec<String>) -> Result<Settings, String> {
    let (args, rest) = config::split_args(harness).map_err(|e| e.to_string())?;
    if rest.len() > 1 {
        return Err(format!("unexpected arguments: {}", rest[1..].join(" ")));
    }
    let env = config::Env::from_process().map_err(|e| e.to_string())?;
    config::resolve(&args, &env)
        .map(|r| r.settings)
        .map_err(|e| e.to_string())
}

fn usage(message: &str) -> ExitCode {
    eprintln!(
        "error: {message}\n\nusage: kvcr-e2e live-runs [list] [--json] [--live-runs-dir DIR]\n       \
         kvcr-e2e live-runs exclusive [--live-runs-dir DIR] [--exclusive-timeout-s N] -- CMD [ARGS]"
    );
    ExitCode::from(2)
}

fn list(registry: &Registry, json: bool) -> ExitCode {
    match registry.live() {
        Ok(live) if json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&live).unwrap_or_else(|_| "[]".into())
            );
            ExitCode::SUCCESS
        }
        Ok(live) => {
            if live.is_empty() {
                println!(
                    "no live kvcr-e2e run (registry {})",
                    registry.dir().display()
                );
            }
            for entry in &live {
                println!("{}", entry.describe());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn say_waiting(waiting: &[crate::proc::live_runs::Entry], timeout: Duration) {
    eprintln!(
        "[kvcr-e2e] live-runs exclusive: waiting (up to {} s, exclusive_timeout_s) for {} other live run(s) to end:",
        timeout.as_secs(),
        waiting.len()
    );
    for entry in waiting {
        eprintln!("[kvcr-e2e]   {}", entry.describe());
    }
}

/// Waits for the others, then runs `command` as this session; exits as it does.
fn exclusive(registry: &Registry, settings: &Settings, command: &[String]) -> ExitCode {
    let timeout = settings.exclusive_timeout;
    let cwd = std::env::current_dir().unwrap_or_default();
    let me = RunInfo::new(
        format!("session `{}`", command.join(" ")),
        cwd,
        RunKind::Session,
        true,
    );
    let session = match registry.register_exclusive(&me, timeout, |w| say_waiting(w, timeout)) {
        Ok(session) => session,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "[kvcr-e2e] live-runs exclusive: this machine's kvcr-e2e runs are `{}`'s (session {}, waited {:.1} s)",
        command.join(" "),
        session.entry.id,
        session.waited.as_secs_f64()
    );
    let status = Command::new(&command[0])
        .args(&command[1..])
        .env(SESSION_ENV, &session.entry.id)
        .status();
    session.end();
    crate::proc::reaper::finish();
    match status {
        Ok(status) => match status.code() {
            Some(0) => ExitCode::SUCCESS,
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("error: cannot run `{}`: {e}", command[0]);
            ExitCode::FAILURE
        }
    }
}

/// Registers (waiting first with `--exclusive`), prints `registered <id>`
/// and one `beside <id> <relation>` line per neighbour, and holds the entry
/// until stdin closes. What the registry's two-process test drives.
fn hold(registry: &Registry, settings: &Settings, target: &str) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_default();
    let me = RunInfo::new(target, cwd, RunKind::Provisions, settings.exclusive);
    let timeout = settings.exclusive_timeout;
    let registered = if settings.exclusive {
        registry.register_exclusive(&me, timeout, |w| {
            for entry in w {
                println!("waiting for {}", entry.id);
            }
            let _ = std::io::stdout().flush();
        })
    } else {
        registry.register(&me)
    };
    let registration = match registered {
        Ok(registration) => registration,
        Err(e) => {
            println!("failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("registered {}", registration.entry.id);
    for n in &registration.at_start.neighbours {
        println!("beside {} {:?}", n.run.id, n.relation);
    }
    let _ = std::io::stdout().flush();
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    registration.end();
    crate::proc::reaper::finish();
    ExitCode::SUCCESS
}
