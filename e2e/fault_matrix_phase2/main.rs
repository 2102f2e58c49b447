//! The production cases' fault matrix: `cargo test --test fault_matrix_phase2`.
//!
//! Each row turns one CPU-engine switch on, runs the phase 2 case that must
//! catch it, and passes only when that case FAILS with the claim the row
//! names (docs/fault-matrix.md, "Production conditions"). The planted KVCR
//! bugs that turn these cases red are in `fixtures/kvcr-mutants/`.

#[path = "../phase2/cases/mod.rs"]
#[allow(dead_code)]
mod cases;
mod rows;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults(
        "fault_matrix_phase2",
        rows::all(),
        &["--profile", "phase2"],
    )
}
