//! `cargo test --test phase1_vllm`: Phase 1 on real vLLM, on CPU. Its row is
//! in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase1_vllm")
}
