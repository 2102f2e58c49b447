//! `cargo test --test phase3_api`: the KVCR calls a GPU engine makes (TC-18)
//! with the `phase3-api` profile. Its row is in `kvcr_e2e::lanes::LANES`
//! (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase3_api")
}
