//! `kvcr-e2e replay CASE_DIR REQUEST_ID [--stack PATH | --frontend URL]`:
//! one request a case recorded (`cases/<case>/requests.json`) sent again to
//! a running stack, its tokens compared with the reference.
//!
//! The recorded body and headers are sent as they are, with two changes: a
//! fresh `x-request-id` (so the replay's log lines are its own), and the
//! worker pin. Instance ids differ from stack to stack, so a request pinned
//! to slot A is pinned to that stack's worker A (read from its
//! `stack.json`) the way the suite pins it: the instance header for an
//! aggregated worker, `nvext.prefill_worker_id` / `nvext.decode_worker_id`
//! in a disaggregated stack. The recorded pin and the new one are printed.
//!
//! The reference tokens come from the entry itself (`reference_tokens`),
//! else from the reference cache entry the run used (its `reference.json`
//! digest, its `config.json` cache directory).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::client::{Client, HEADER_REQUEST_ID};
use crate::suite::replay::{
    compare, find_request, pin_words, recorded_pin, reference_tokens, repin, Comparison,
    StackTarget,
};

const USAGE: &str =
    "usage: kvcr-e2e replay CASE_DIR REQUEST_ID [--stack PATH | --frontend URL] [--request-timeout-s N]";

/// The request timeout of the default profile and the environment.
fn default_request_timeout() -> Result<Duration, String> {
    let env = crate::config::Env::from_process().map_err(|e| e.to_string())?;
    crate::config::resolve(&crate::config::HarnessArgs::default(), &env)
        .map(|r| r.settings.request_timeout)
        .map_err(|e| e.to_string())
}

/// `kvcr-e2e replay …`; `args` follow `replay`. Exit 0: the same tokens as
/// the reference; 1: different tokens, or the request failed; 2: usage.
pub fn replay(repo_root: &Path, args: &[String]) -> ExitCode {
    let mut positional = Vec::new();
    let (mut stack, mut frontend, mut timeout) = (None, None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let value = |it: &mut std::slice::Iter<String>| it.next().cloned();
        match arg.as_str() {
            "--stack" => match value(&mut it) {
                Some(v) => stack = Some(PathBuf::from(v)),
                None => return usage("--stack needs a path"),
            },
            "--frontend" => match value(&mut it) {
                Some(v) => frontend = Some(v),
                None => return usage("--frontend needs a URL"),
            },
            "--request-timeout-s" => match value(&mut it).and_then(|v| v.parse().ok()) {
                Some(s) => timeout = Some(Duration::from_secs(s)),
                None => return usage("--request-timeout-s needs a number of seconds"),
            },
            flag if flag.starts_with("--") => return usage(&format!("unknown flag {flag}")),
            _ => positional.push(arg.clone()),
        }
    }
    let [case_dir, request_id] = positional.as_slice() else {
        return usage("expected a case directory and a request id");
    };
    if stack.is_some() && frontend.is_some() {
        return usage("--stack and --frontend exclude each other");
    }
    // The run's own budget by default: the profile's and PHASE1_*'s.
    let timeout = match timeout.map_or_else(default_request_timeout, Ok) {
        Ok(timeout) => timeout,
        Err(e) => {
            eprintln!("error: the settings: {e}");
            return ExitCode::from(2);
        }
    };
    match run(
        repo_root,
        Path::new(case_dir),
        request_id,
        stack,
        frontend,
        timeout,
    ) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("error: {message}\n\n{USAGE}");
    ExitCode::from(2)
}

/// Sends the request again and compares; `Ok(true)` when the tokens are the reference's.
fn run(
    repo_root: &Path,
    case_dir: &Path,
    request_id: &str,
    stack: Option<PathBuf>,
    frontend: Option<String>,
    timeout: Duration,
) -> Result<bool, String> {
    let entry = find_request(case_dir, request_id)?;
    let Some(recorded) = entry.sent.clone() else {
        return Err(format!(
            "request {} ({}) was recorded without its body: it was never sent, or the run predates recorded bodies",
            entry.request_id, entry.prompt
        ));
    };
    println!(
        "request {} ({}, {}) from {}",
        entry.request_id,
        entry.prompt,
        if recorded.streams() {
            "streamed"
        } else {
            "not streamed"
        },
        case_dir.display()
    );
    let mut wire = recorded.clone();
    let base = match frontend {
        Some(url) => {
            if let Some(slot) = &entry.pinned_to {
                println!(
                    "pin: worker {slot}: recorded {} kept (--frontend cannot re-pin by slot; pass --stack)",
                    pin_words(recorded_pin(&recorded))
                );
            }
            url
        }
        None => {
            let manifest = stack.unwrap_or_else(|| crate::cli::stack::default_manifest(repo_root));
            let target = StackTarget::read(&manifest)?;
            println!(
                "frontend: {} (stack {})",
                target.frontend,
                manifest.display()
            );
            match &entry.pinned_to {
                Some(slot) => {
                    let worker = target.worker(slot).ok_or_else(|| {
                        format!(
                            "the stack in {} has no worker {slot} (it has {})",
                            manifest.display(),
                            target.names()
                        )
                    })?;
                    let was = repin(&mut wire, worker);
                    println!(
                        "pin: worker {slot}: recorded {}, now {}",
                        pin_words(was),
                        pin_words(recorded_pin(&wire))
                    );
                }
                None if recorded_pin(&recorded).is_some() => println!(
                    "pin: recorded {} kept (the case pinned it by id, not by slot)",
                    pin_words(recorded_pin(&recorded))
                ),
                None => println!("pin: none (the router picks, as it did)"),
            }
            target.frontend
        }
    };
    let fresh = crate::client::new_request_id();
    wire.set_header(HEADER_REQUEST_ID, fresh.clone());
    println!(
        "x-request-id of the replay: {fresh} (recorded: {})",
        entry.request_id
    );
    let (reference, source) = reference_tokens(&entry, case_dir, repo_root)?;
    let client = Client::new(base.clone(), timeout).map_err(|e| e.to_string())?;
    let (tokens, worker) = crate::rt::block_on(client.send_recorded(&wire))
        .map_err(|e| format!("the replay failed: {e}"))?;
    let Some(tokens) = tokens else {
        return Err("the response carried no token ids".into());
    };
    println!(
        "reference: {} tokens ({source}); replay: {} tokens from worker {}",
        reference.len(),
        tokens.len(),
        worker.map_or("unknown".to_string(), |w| w.to_string())
    );
    let comparison = compare(&reference, &tokens);
    println!("{comparison}");
    Ok(comparison == Comparison::Same(reference.len()))
}
