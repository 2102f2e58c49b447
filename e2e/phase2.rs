//! `cargo test --test phase2`: the production-conditions cases (TC-07..TC-11)
//! on the phase 1 stack with the `phase2` profile. Its row is in
//! `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase2")
}
