//! `cargo test --test workload`: a workload trace replayed through the
//! CPU stack, KVCR on and off (WL-01). Its row is in
//! `kvcr_e2e::lanes::LANES` (src/lanes.rs).

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("workload")
}
