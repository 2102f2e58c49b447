//! `cargo test --test fault_matrix_workload`: WL-01's fault rows on the
//! workload stack. Its row is in `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix_workload")
}
