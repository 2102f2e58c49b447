//! The fault matrix: `cargo test --test fault_matrix`.
//!
//! Each row switches one fault on (a CPU-engine fault switch, or a fault
//! the harness injects: kill, stop, replacement), runs the phase 1 case that
//! must catch it, and passes only when that case FAILS with the claim the
//! row names. A row whose case passes proves a verdict that cannot fail.
//! docs/fault-matrix.md is the same table in prose.

#[path = "../phase1/cases/mod.rs"]
#[allow(dead_code)]
mod cases;
mod rows;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main("fault_matrix", rows::all())
}
