//! `cargo test --test fault_matrix`: each row switches one fault on and passes
//! only when its case fails with the claim the row names (docs/fault-matrix.md).
//! Its row is in `kvcr_e2e::lanes::LANES`, its rows in `kvcr_e2e::fault_matrix::agg`.

fn main() -> std::process::ExitCode {
    kvcr_e2e::lanes::main("fault_matrix")
}
