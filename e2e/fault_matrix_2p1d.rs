//! `cargo test --test fault_matrix_2p1d`: the fault rows of the P→D path, on
//! a 2P+1D stack. Its row is in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix_2p1d")
}
