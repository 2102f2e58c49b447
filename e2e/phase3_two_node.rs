//! `cargo test --test phase3_two_node`: the phase 3 cases on two nodes
//! (TC-13) with the `phase3-network` profile; needs root, as
//! `phase1_two_node`. Its row is in `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase3_two_node")
}
