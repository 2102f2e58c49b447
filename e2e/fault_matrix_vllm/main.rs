//! The fault matrix on real vLLM: `cargo test --test fault_matrix_vllm`.
//!
//! The rows of `fault_matrix` that need no engine fault switch (a killed
//! router, a stopped Guard, a replacement with another KVCR compatibility
//! digest), on the vLLM CPU lane's stack (fixtures/profiles/vllm-cpu.toml).
//! Each passes only when its case fails with the claim the row names;
//! docs/fault-matrix.md lists them.

#[path = "../phase1/cases/mod.rs"]
#[allow(dead_code)]
mod cases;
#[path = "../fault_matrix/rows.rs"]
mod rows;

fn main() -> std::process::ExitCode {
    let rows = rows::all()
        .into_iter()
        .filter(|row| rows::ENGINE_NEUTRAL.contains(&row.name))
        .collect();
    kvcr_e2e::suite::Suite::main_with_defaults(
        "fault_matrix_vllm",
        rows,
        &["--profile", "vllm-cpu"],
    )
}
