//! `cargo test --test phase1_2p1d`: Phase 1 on two prefill workers and one
//! decode worker. Its row is in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase1_2p1d")
}
