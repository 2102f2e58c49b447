//! `cargo test --test fault_matrix_vllm`: the fault rows that need no engine
//! switch, on real vLLM. Its row is in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix_vllm")
}
