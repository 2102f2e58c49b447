//! KVCR's disk tier: `cargo test --test phase2_g3` (TC-12).
//!
//! The phase 1 stack with the `phase2-g3` profile
//! (fixtures/profiles/phase2-g3.toml): a G3 file of 64 blocks per worker
//! beside a Guard pool of 8, so blocks spill from DRAM to disk.

#[path = "../phase2/cases/mod.rs"]
mod cases;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults(
        "phase2_g3",
        cases::disk_tier(),
        &["--profile", "phase2-g3"],
    )
}
