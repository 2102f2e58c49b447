//! `cargo test --test fault_matrix_phase3`: the phase 3 cases' fault rows
//! on the `phase3` stack. Its row is in `kvcr_e2e::lanes::LANES`
//! (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix_phase3")
}
