//! Generated KVCR mutants: operator mutations (a `<` for a `<=`, a dropped
//! `not`, a constant changed) of the KVCR modules Phase 1 claims to cover,
//! enumerated by cosmic-ray ([`tool`]), drawn by a seed ([`sample`]), each
//! written as a unified diff ([`diff`]) and run as a patched build through
//! `--kvcr pypi:<version>+<diff>` on a fresh stack of each lane of a
//! sequence ([`sequence`], [`lane`]) until one does not pass. They have no
//! header, so no expectation: the lane reports killed, survived or broken
//! and a score, and survivors are for reading. With `--coverage`, a draw
//! skips each lane whose coverage run never executed its line
//! ([`coverage`]).

pub mod coverage;
pub mod diff;
pub mod lane;
pub mod resume;
pub mod sample;
pub mod sequence;
pub mod tool;

pub use lane::run_generated;

use crate::cases;

/// The KVCR modules Phase 1's cases claim to cover (the default sample).
pub const MODULES: &[&str] = &[
    "local_dram",
    "remote_fw_dram",
    "guard",
    "recovery_journal",
    "hint_parser",
    "core",
];

/// What every generated mutant runs on phase 1's lane: each trial of phase
/// 1's cases ([`cases::PHASE1`]) with a verdict on KVCR's behaviour, in
/// case-number order ([`sequence::trials`]: TC-05's performance arms left
/// out).
pub fn trials() -> Vec<String> {
    sequence::trials(cases::PHASE1)
}

/// The cosmic-ray release pinned in `fixtures/python/requirements-mutgen.lock`.
pub const COSMIC_RAY: &str = "cosmic-ray 8.7.0";

/// `--modules a,b`: names from [`MODULES`], in the given order, no repeats.
pub fn parse_modules(value: &str) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !MODULES.contains(&name) {
            return Err(format!(
                "--modules {name:?}: not a module the suite claims to cover ({})",
                MODULES.join(", ")
            ));
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        return Err("--modules needs at least one module".into());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Phase 1's trials but TC-05's arms, by case number: the list the
    /// lane ran before it was derived from the cases.
    #[test]
    fn the_trials_are_phase_1s_but_the_performance_arms() {
        assert_eq!(
            trials(),
            [
                "TC-01::generation_correctness",
                "TC-02::local_dram_flow",
                "TC-03::hinted_peer_transfer",
                "TC-04::guard_takeover_and_replacement",
                "TC-04::worker_killed_under_load",
                "TC-06::guard_recovery_timing",
            ]
        );
    }

    #[test]
    fn modules_are_checked_and_deduplicated() {
        assert_eq!(
            parse_modules("guard, core,guard").unwrap(),
            ["guard", "core"]
        );
        assert!(parse_modules("api").unwrap_err().contains("local_dram"));
    }

    #[test]
    fn the_lock_pins_the_named_cosmic_ray() {
        let lock = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(crate::pyenv::MUTGEN.lock),
        )
        .unwrap();
        let version = COSMIC_RAY.strip_prefix("cosmic-ray ").unwrap();
        assert!(
            lock.lines().any(|l| l == format!("cosmic_ray=={version}")),
            "{lock}"
        );
    }
}
