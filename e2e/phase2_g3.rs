//! `cargo test --test phase2_g3`: KVCR's disk tier (TC-12) on the `phase2-g3`
//! stack. Its row is in `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase2_g3")
}
