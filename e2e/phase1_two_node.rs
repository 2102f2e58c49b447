//! `cargo test --test phase1_two_node`: Phase 1 with worker B on a namespace
//! node (root). Its row is in `kvcr_e2e::lanes::LANES`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("phase1_two_node")
}
