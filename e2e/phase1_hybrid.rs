//! `cargo test --test phase1_hybrid`: Phase 1 in hybrid geometry (attention
//! pages plus SSM state parts). Its row is in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase1_hybrid")
}
