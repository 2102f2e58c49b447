//! `cargo test --test fault_matrix_vllm_two_node`: its row is in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix_vllm_two_node")
}
