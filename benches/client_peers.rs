//! The streaming client against its peers (AIPerf, `vllm bench serve`) in
//! one run, against one deterministic SSE server: chunks per CPU second at
//! saturation, per-chunk overhead, TTFT and ITL error against the server's
//! send stamps, as ratios to ours. Method and results: docs/benchmarks.md.
//!
//! `cargo bench --bench client_peers` (builds the `aiperf` env on first use).

use std::path::Path;

use kvcr_e2e::peer_bench::{run_all, Plan, Tools};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools = Tools::ensure(root, env!("CARGO_BIN_EXE_kvcr-e2e").into())
        .unwrap_or_else(|e| panic!("the clients' Python envs: {e}"));
    let dir = root.join("target/bench/client_peers");
    let report = run_all(&Plan::full(), &tools, &dir);
    print!("{}", report.table());
    let path = root.join("target/bench/client_peers.json");
    let text = serde_json::to_string_pretty(&report).expect("the report serializes");
    std::fs::write(&path, text + "\n").expect("write the report");
    println!(
        "wrote {} (each client's files under {})",
        path.display(),
        dir.display()
    );
    if let Err(e) = report.complete() {
        eprintln!("client_peers: incomplete run:\n{e}");
        std::process::exit(1);
    }
}
