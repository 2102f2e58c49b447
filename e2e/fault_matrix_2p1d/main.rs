//! The fault matrix of the disaggregated paths: `cargo test --test fault_matrix_2p1d`.
//!
//! Like `fault_matrix`, on a 2P+1D stack: each row switches one fault on,
//! runs the case that must catch it, and passes only when that case FAILS
//! with the claim the row names. docs/fault-matrix.md lists the rows.

#[path = "../phase1/cases/mod.rs"]
#[allow(dead_code)]
mod cases;
mod rows;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults(
        "fault_matrix_2p1d",
        rows::all(),
        &["--topology", "2p1d"],
    )
}
