//! The short client benchmark inside `cargo test` (issue 14): our streaming
//! client, AIPerf and `vllm bench serve` against one deterministic SSE
//! server, fewer streams than `cargo bench --bench client_peers`. It prints
//! the ratios and asserts nothing about speed; it fails when a client
//! errors or a figure is missing. The `aiperf` env is built on first use.

use std::path::Path;

use kvcr_e2e::peer_bench::{run_all, Plan, Tools};
use libtest_mimic::{Arguments, Failed, Trial};

fn short_benchmark() -> Result<(), Failed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools = Tools::ensure(root, env!("CARGO_BIN_EXE_kvcr-e2e").into())
        .map_err(|e| format!("the clients' Python envs: {e}"))?;
    let dir = root.join("target/bench/client_peers-short");
    let report = run_all(&Plan::short(), &tools, &dir);
    println!("\n{}", report.table());
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("report.json"), text).map_err(|e| e.to_string())?;
    report.complete().map_err(Failed::from)
}

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let trials = vec![Trial::test("client_peers_short", short_benchmark)];
    libtest_mimic::run(&args, trials).exit_code()
}
