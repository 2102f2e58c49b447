//! `cargo test --test phase1_vllm_2p1d -- --ignored`: the Phase 1 cases on
//! real vLLM (CPU build) with two prefill workers and one decode worker;
//! the decode pulls with vLLM's NixlConnector. Its row is in
//! `kvcr_e2e::lanes::LANES`; its trials are ignored unless asked for, so a
//! plain `cargo test` starts no stack for it.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase1_vllm_2p1d")
}
