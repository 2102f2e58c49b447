//! `kvcr-e2e`: developer commands around the phase 1 suite; each lives in
//! [`kvcr_e2e::cli`], this program only picks one.

use std::path::PathBuf;
use std::process::ExitCode;

use kvcr_e2e::cli::{self, USAGE};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match args.first().map(String::as_str) {
        Some("python-env") => cli::python_env(&repo_root, &args[1..]),
        Some("stack") => cli::stack(&repo_root, &args[1..]),
        Some("runner") => cli::runner(&repo_root, &args[1..]),
        Some("gpu-check") => cli::gpu_check(&args[1..]),
        Some("bench-client") => cli::bench_client(&args[1..]),
        Some("compare-results") => cli::compare_results(&repo_root, &args[1..]),
        Some("compare") => cli::compare(&repo_root, &args[1..]),
        Some("gate") => cli::gate(&repo_root, &args[1..]),
        Some("coverage") => cli::coverage(&repo_root, &args[1..]),
        Some("mutants") => cli::mutants(&repo_root, &args[1..]),
        Some("replay") => cli::replay(&repo_root, &args[1..]),
        Some("live-runs") => cli::live_runs(&repo_root, &args[1..]),
        // Hidden: the degraded link's packet delayer (TC-14), started by the harness.
        Some("net-delay") => cli::net_delay(&args[1..]),
        Some("workload") if args.get(1).map(String::as_str) == Some("side-by-side") => {
            kvcr_e2e::peer_bench::side_by_side::command(&repo_root, &args[2..], USAGE)
        }
        Some("workload") if args.get(1).is_some_and(|a| a.starts_with("--")) => {
            cli::replay_trace(&repo_root, &args[1..])
        }
        Some("workload") => kvcr_e2e::workload::cli::workload(&args[1..], USAGE),
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
