//! `cargo test --test phase1_kvcr_source`: Phase 1 against a KVCR source
//! tree (kvcr 0.1.1's sdist, unpacked), TC-01 by default; docs/kvcr-under-test.md.
//! Its row is in `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase1_kvcr_source")
}
