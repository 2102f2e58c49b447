//! Phase 1 against a KVCR source tree: `cargo test --test phase1_kvcr_source`.
//!
//! The KVCR under test is kvcr 0.1.1's sdist, unpacked (fetched once with
//! pip into `target/kvcr-envs/sdist/`), so this target runs what a KVCR
//! developer runs with `cargo test --test phase1 -- --kvcr <their checkout>`:
//! the build is installed into a KVCR env over `.venv`, every Guard and
//! worker must report importing it, and the evidence says `source dir`.
//! TC-01 only by default (the rest of the suite is the same code as
//! `phase1`); other cases with `--cases`. See docs/kvcr-under-test.md.

#[path = "../phase1/cases/mod.rs"]
mod cases;

fn main() -> std::process::ExitCode {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let base = match kvcr_e2e::pyenv::ensure(root, None) {
        Ok(env) => env.python,
        Err(e) => {
            eprintln!("error: the CPU stack's Python env: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let source = match kvcr_e2e::pyenv::kvcr::sdist_source_dir(root, &base, "0.1.1") {
        Ok(dir) => dir.display().to_string(),
        Err(e) => {
            eprintln!("error: kvcr 0.1.1's sdist: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    kvcr_e2e::suite::Suite::main_with_defaults(
        "phase1_kvcr_source",
        cases::all(),
        &["--kvcr", &source, "--cases", "TC-01"],
    )
}
