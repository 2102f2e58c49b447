//! Phase 1 of the KVCR end-to-end suite: `cargo test --test phase1`.
//!
//! Each case is an ordinary function in `cases/`, written like its paragraph
//! in docs/test-plan.md. The suite provisions one stack on first need,
//! shares it, and writes JUnit and a run directory (see README.md).

mod cases;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main("phase1", cases::all())
}
