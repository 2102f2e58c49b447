//! `cargo test --test phase1_vllm_two_node`: its row is in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase1_vllm_two_node")
}
