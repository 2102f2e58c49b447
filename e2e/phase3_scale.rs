//! `cargo test --test phase3_scale -- --ignored`: TC-12, TC-09, TC-04, TC-06 and
//! TC-08 on Guard pools of 1 GiB per worker (the `scale` profile). Its row
//! is in `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase3_scale")
}
