//! `cargo test --test fault_matrix_phase2`: the production cases' fault rows
//! on the `phase2` stack. Its row is in `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix_phase2")
}
