//! `cargo test --test phase2_vllm -- --ignored`: the production-conditions
//! cases that apply to vLLM (TC-09, TC-10, TC-11) on real vLLM, on CPU. Its
//! row is in `kvcr_e2e::lanes::LANES`; its trials are ignored unless asked
//! for, so a plain `cargo test` starts no stack for it.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase2_vllm")
}
