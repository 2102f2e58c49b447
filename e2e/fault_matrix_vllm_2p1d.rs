//! `cargo test --test fault_matrix_vllm_2p1d -- --ignored`: the P→D fault
//! row on the `phase1_vllm_2p1d` stack (a prefill killed before the
//! decode's NIXL pull). Its row is in `kvcr_e2e::lanes::LANES`; ignored
//! unless asked for.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix_vllm_2p1d")
}
