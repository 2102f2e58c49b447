//! Phase 1 in hybrid geometry: `cargo test --test phase1_hybrid`.
//!
//! The same cases as `phase1`, on a stack whose KV blocks are attention
//! pages plus SSM state parts (fixtures/profiles/hybrid.toml: 2 + 3 = 5
//! pages). TC-03 then checks exact pages: bytes = blocks × the page sizes.
//! Equivalent to `cargo test --test phase1 -- --geometry hybrid`.

#[path = "../phase1/cases/mod.rs"]
mod cases;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults(
        "phase1_hybrid",
        cases::all(),
        // A flag, not `--profile hybrid`: a profile chosen by the user or CI
        // (PHASE1_PROFILE=ci) still applies to this target.
        &["--geometry", "hybrid"],
    )
}
