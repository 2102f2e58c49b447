//! Production conditions: `cargo test --test phase2` (TC-07..TC-11).
//!
//! The phase 1 stack with the `phase2` profile (fixtures/profiles/phase2.toml):
//! Guard pools of 12 blocks that the working set overflows, no host tier,
//! heartbeat promotion, a 2 s KVCR operation timeout. Each case is an
//! ordinary function in `cases/`, written like its paragraph in
//! docs/test-plan.md; the disk tier (TC-12) has its own stack
//! (`cargo test --test phase2_g3`). Equivalent to
//! `cargo test --test phase1 -- --profile phase2` with these cases.

mod cases;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults("phase2", cases::all(), &["--profile", "phase2"])
}
