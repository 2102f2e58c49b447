//! `kvcr-e2e stack up` / `stack down`: a stack that outlives one test run,
//! for the developer loop (`cargo test --test phase1 -- --attach …`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use nix::sys::signal::{self, SigSet, Signal};
use nix::unistd::Pid;

use crate::proc::procfs;
use crate::suite::{install_teardown_on_signal, Suite};
use crate::wait::{self, Poll};

use super::USAGE;

/// `kvcr-e2e stack …`; `args` follow `stack`.
pub fn stack(repo_root: &Path, args: &[String]) -> ExitCode {
    let (manifest, rest) = match args.get(1).map(String::as_str) {
        Some("--manifest") => match args.get(2) {
            Some(path) => (PathBuf::from(path), &args[3..]),
            None => {
                eprintln!("error: --manifest needs a path\n\n{USAGE}");
                return ExitCode::from(2);
            }
        },
        _ => (default_manifest(repo_root), args.get(1..).unwrap_or(&[])),
    };
    match args.first().map(String::as_str) {
        Some("up") => {
            let argv = std::iter::once("kvcr-e2e stack up".to_string())
                .chain(rest.iter().cloned())
                .collect();
            stack_up(argv, &manifest)
        }
        Some("down") if rest.is_empty() => stack_down(&manifest),
        Some("replace-worker") => match rest {
            [flag, worker, flags @ ..] if flag == "--worker" => {
                let argv = std::iter::once("kvcr-e2e stack replace-worker".to_string())
                    .chain(flags.iter().cloned())
                    .collect();
                stack_replace_worker(argv, &manifest, worker)
            }
            _ => {
                eprintln!("error: expected `stack replace-worker [--manifest PATH] --worker SLOT [FLAGS]`\n\n{USAGE}");
                ExitCode::from(2)
            }
        },
        _ => {
            eprintln!("error: expected `stack up [--manifest PATH] [FLAGS]` or `stack down [--manifest PATH]`\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Where `stack up` describes its stack, unless `--manifest PATH` says otherwise.
pub fn default_manifest(repo_root: &Path) -> PathBuf {
    repo_root.join("target/phase1/stack.json")
}

/// Brings the stack up (and the reference cache warm), writes its
/// `stack.json`, and keeps it running until SIGINT or SIGTERM
/// (`kvcr-e2e stack down`), then tears it down.
pub fn stack_up(argv: Vec<String>, manifest: &Path) -> ExitCode {
    let (suite, _) = match Suite::from_argv("stack-up", argv, &[]) {
        Ok(ready) => ready,
        Err(exit) => return exit,
    };
    if suite.settings.attach.is_some() {
        eprintln!("error: `stack up` starts a stack; --attach is for test runs");
        return ExitCode::from(2);
    }
    install_teardown_on_signal();
    let stack = match suite.stack().and_then(|s| suite.references().map(|_| s)) {
        Ok(stack) => stack,
        Err(e) => {
            eprintln!("error: {e}");
            suite.finish();
            return ExitCode::FAILURE;
        }
    };
    if let Some(dir) = manifest.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = stack.set_manifest(manifest) {
        eprintln!("error: cannot write {}: {e}", manifest.display());
        suite.finish();
        return ExitCode::FAILURE;
    }
    match stack.serve_logs() {
        Ok(url) => println!("stack logs: {url}"),
        Err(e) => eprintln!("warning: cannot serve the stack's logs over HTTP: {e}"),
    }
    println!("stack up: {}", manifest.display());
    println!(
        "  run cases:  cargo test --test phase1 -- --attach {} TC-03",
        manifest.display()
    );
    println!("  stop it:    cargo run -- stack down");
    // The signal thread tears the stack down and exits; this thread only
    // has to stay alive until then.
    let mut never = SigSet::empty();
    never.add(Signal::SIGUSR2);
    loop {
        let _ = never.wait();
    }
}

/// Starts a replacement for the dead worker in slot `worker` of the stack
/// in `manifest`, records it there and returns once it serves; the
/// replacement outlives this command (the stack's owner stops it). This is
/// the `replace_worker` hook of a stack started with `stack up`, run where
/// the stack runs (`nsenter`, `podman exec`, `kubectl exec`).
pub fn stack_replace_worker(argv: Vec<String>, manifest: &Path, worker: &str) -> ExitCode {
    let (suite, _) = match Suite::from_argv("stack-replace-worker", argv, &[]) {
        Ok(ready) => ready,
        Err(exit) => return exit,
    };
    let settings = &suite.settings;
    let stack = match crate::stack::attach_to_repair(suite.engine(), manifest) {
        Ok(stack) => stack.with_run_budgets(settings.kill_timeout, settings.probe_timeout),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !stack.control().sees_processes() {
        eprintln!(
            "error: the stack in {} runs in another PID namespace; run this command there",
            manifest.display()
        );
        return ExitCode::FAILURE;
    }
    match stack.worker(worker).map(|w| w.process.is_running()) {
        Ok(true) => {
            eprintln!("error: worker {worker} is running; replace only a dead worker");
            return ExitCode::FAILURE;
        }
        Ok(false) => {}
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    match stack.start_replacement(worker) {
        Ok(fresh) => {
            println!(
                "replaced worker {worker}: {} (pid {}) serves at {}",
                fresh.process.name(),
                fresh.process.pid(),
                fresh.admin_url()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Asks the owner of the stack in `manifest` to tear it down, and waits.
pub fn stack_down(manifest: &Path) -> ExitCode {
    let description = std::fs::read_to_string(manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let namespace = description
        .as_ref()
        .and_then(|v| v.get("pid_namespace")?.as_str().map(String::from));
    if namespace.is_some() && namespace != procfs::pid_namespace() {
        eprintln!(
            "error: the stack in {} runs in another PID namespace ({}); its owner's pid means nothing here: run `kvcr-e2e stack down` where the stack runs",
            manifest.display(),
            namespace.unwrap_or_default()
        );
        return ExitCode::FAILURE;
    }
    let owner = std::fs::read_to_string(manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("owner_pid")?.as_u64());
    let Some(owner) = owner.and_then(|p| u32::try_from(p).ok()) else {
        eprintln!(
            "error: {} does not describe a running stack (no owner_pid)",
            manifest.display()
        );
        return ExitCode::FAILURE;
    };
    if !procfs::is_alive(owner) {
        eprintln!(
            "the stack's owner (pid {owner}) is gone already; its reaper cleaned up after it"
        );
        let _ = std::fs::remove_file(manifest);
        return ExitCode::SUCCESS;
    }
    if let Err(e) = signal::kill(Pid::from_raw(owner as i32), Signal::SIGTERM) {
        eprintln!("error: cannot signal the stack's owner (pid {owner}): {e}");
        return ExitCode::FAILURE;
    }
    let done = wait::until(
        format!("the stack's owner (pid {owner}) to tear down and exit"),
        Duration::from_secs(60),
        Duration::from_millis(100),
        || {
            if procfs::is_alive(owner) {
                Poll::Pending("still running".into())
            } else {
                Poll::Ready(())
            }
        },
    );
    match done {
        Ok(()) => {
            let _ = std::fs::remove_file(manifest);
            println!("stack down");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
