//! Phase 1 on the disaggregated 2P+1D topology: `cargo test --test phase1_2p1d`.
//!
//! The same cases as `phase1`, on a stack of two prefill workers (A, B) and
//! one decode worker (C) behind the real Dynamo frontend, whose prefill
//! router picks A or B and hands the decode the prefill's result. The P→D
//! transfer is KVCR's REMOTE path: the decode pulls the prompt's pages from
//! the prefill over NIXL (TC-01 checks it reconciles). Equivalent to
//! `cargo test --test phase1 -- --topology 2p1d`.

#[path = "../phase1/cases/mod.rs"]
mod cases;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults("phase1_2p1d", cases::all(), &["--topology", "2p1d"])
}
