//! `kvcr-e2e bench-client`: our streaming client as a benchmark peer.

use std::path::PathBuf;
use std::process::ExitCode;

use super::USAGE;

/// `kvcr-e2e bench-client …`; `args` follow `bench-client`.
pub fn bench_client(args: &[String]) -> ExitCode {
    let (mut url, mut out) = (None, None);
    let (mut concurrency, mut requests, mut max_tokens) = (1usize, 1usize, 16u32);
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().map(String::as_str).unwrap_or("");
        let bad = |what: &str| {
            eprintln!("error: bench-client {flag} {value:?}: {what}\n\n{USAGE}");
            ExitCode::from(2)
        };
        match flag.as_str() {
            "--url" => url = Some(value.to_string()),
            "--out" => out = Some(PathBuf::from(value)),
            "--concurrency" => match value.parse() {
                Ok(n) => concurrency = n,
                Err(_) => return bad("not a count"),
            },
            "--requests" => match value.parse() {
                Ok(n) => requests = n,
                Err(_) => return bad("not a count"),
            },
            "--max-tokens" => match value.parse() {
                Ok(n) => max_tokens = n,
                Err(_) => return bad("not a count"),
            },
            _ => return bad("unknown flag"),
        }
    }
    let (Some(url), Some(out)) = (url, out) else {
        eprintln!("error: bench-client needs --url and --out\n\n{USAGE}");
        return ExitCode::from(2);
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let log = rt.block_on(crate::peer_bench::ours::run(
        &url,
        concurrency,
        requests,
        max_tokens,
    ));
    let text = serde_json::to_string(&log).expect("a client log serializes");
    if let Err(e) = std::fs::write(&out, text) {
        eprintln!("error: cannot write {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    if log.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "bench-client: {} requests failed, first: {}",
            log.errors.len(),
            log.errors[0]
        );
        ExitCode::FAILURE
    }
}
