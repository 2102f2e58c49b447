//! `cargo test --test phase1`: the Phase 1 suite on the default (CPU) stack.
//! Its row, and every other lane's, is in `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase1")
}
