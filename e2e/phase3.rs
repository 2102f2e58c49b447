//! `cargo test --test phase3`: the phase 3 cases on the CPU stack (TC-17)
//! with the `phase3` profile. Its row is in `kvcr_e2e::lanes::LANES`
//! (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase3")
}
