//! `cargo test --test fault_matrix_two_node`: the fault rows of the two-node
//! topology (root). Its row is in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix_two_node")
}
