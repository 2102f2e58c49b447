//! Cases that do not run, and `--require-all`.
//!
//! A case is not run for one of three reasons ([`IgnoredBecause`]): it was
//! not selected, it does not apply to the lane by definition (TC-05 on
//! two-node, TC-03 on SGLang: `config::applicability`), or this machine
//! cannot run it (not root for two-node, no GPU, a tool or env missing).
//! Only the last depends on the machine, so only the last turns into a
//! failure under `--require-all` (`PHASE1_REQUIRE_ALL`): a green run then
//! means every case of its lane ran.
//!
//! Test targets outside the suite (plain `#[test]`s, the runner lanes) use
//! [`machine_cannot_run`] and [`machine_cannot_run_trial`] for the same rule.

use std::fmt::Display;

use libtest_mimic::{Completion, Failed};

use crate::evidence::{IgnoredBecause, Outcome};

/// A case that does not run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub because: IgnoredBecause,
    pub reason: String,
}

impl Skip {
    /// Not selected by `--cases`.
    pub fn not_selected(reason: impl Into<String>) -> Self {
        Self::new(IgnoredBecause::NotSelected, reason)
    }

    /// Does not apply to the lane by definition.
    pub fn not_applicable(reason: impl Into<String>) -> Self {
        Self::new(IgnoredBecause::NotApplicable, reason)
    }

    /// This machine lacks what the case needs.
    pub fn machine_cannot(reason: impl Into<String>) -> Self {
        Self::new(IgnoredBecause::MachineCannot, reason)
    }

    fn new(because: IgnoredBecause, reason: impl Into<String>) -> Self {
        Skip {
            because,
            reason: reason.into(),
        }
    }

    /// Whether, with `require_all`, the case fails instead.
    pub fn fails(&self, require_all: bool) -> bool {
        require_all && self.because == IgnoredBecause::MachineCannot
    }

    /// The failure message under `--require-all`.
    pub fn failure(&self) -> String {
        required_message(&self.reason)
    }

    /// What the run records.
    pub fn outcome(&self, require_all: bool) -> Outcome {
        if self.fails(require_all) {
            Outcome::Failed {
                message: self.failure(),
            }
        } else {
            Outcome::Ignored {
                reason: self.reason.clone(),
                because: self.because,
            }
        }
    }

    /// What libtest-mimic reports.
    pub fn completion(&self, require_all: bool) -> Result<Completion, Failed> {
        if self.fails(require_all) {
            Err(Failed::from(self.failure()))
        } else {
            Ok(Completion::ignored_with(self.reason.clone()))
        }
    }
}

fn required_message(reason: &str) -> String {
    format!("--require-all: this machine cannot run the case: {reason}")
}

/// `require_all` as the environment and profiles set it (`PHASE1_REQUIRE_ALL`),
/// for test targets that resolve no settings of their own. Settings that do
/// not resolve count as not required: the suite itself reports them.
pub fn require_all_from_env() -> bool {
    let Ok(env) = crate::config::Env::from_process() else {
        return false;
    };
    let Ok((args, _)) = crate::config::split_args(["kvcr-e2e"]) else {
        return false;
    };
    crate::config::resolve(&args, &env).is_ok_and(|r| r.settings.require_all)
}

/// For a plain `#[test]` that cannot run on this machine: prints the
/// reason (the test then returns and passes), or, under `--require-all`,
/// panics with it.
///
/// ```no_run
/// # fn precondition() -> Result<(), String> { Ok(()) }
/// if let Err(e) = precondition() {
///     kvcr_e2e::suite::machine_cannot_run(e);
///     return;
/// }
/// ```
pub fn machine_cannot_run(reason: impl Display) {
    let reason = reason.to_string();
    if require_all_from_env() {
        panic!("{}", required_message(&reason));
    }
    eprintln!("skipped, this machine cannot run it: {reason} (PHASE1_REQUIRE_ALL=1 fails it)");
}

/// For a libtest-mimic trial that cannot run on this machine: ignored with
/// the reason, or, under `--require-all`, failed with it.
pub fn machine_cannot_run_trial(reason: impl Into<String>) -> Result<Completion, Failed> {
    Skip::machine_cannot(reason).completion(require_all_from_env())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_all_fails_only_what_the_machine_cannot_run() {
        let machine = Skip::machine_cannot("TC-01 on two-node: this process lacks CAP_SYS_ADMIN");
        let lane = Skip::not_applicable(
            "TC-05 on cpu/two-node: the performance arms are defined on the agg topology",
        );
        let unselected = Skip::not_selected("TC-02 is not selected by --cases");
        for skip in [&machine, &lane, &unselected] {
            assert_eq!(
                skip.outcome(false),
                Outcome::Ignored {
                    reason: skip.reason.clone(),
                    because: skip.because
                }
            );
            assert!(skip.completion(false).is_ok());
        }
        assert_eq!(
            machine.outcome(true),
            Outcome::Failed {
                message: "--require-all: this machine cannot run the case: TC-01 on two-node: this process lacks CAP_SYS_ADMIN".into()
            }
        );
        let Err(failed) = machine.completion(true) else {
            panic!("a case this machine cannot run passed under --require-all");
        };
        assert_eq!(
            failed.message(),
            Some("--require-all: this machine cannot run the case: TC-01 on two-node: this process lacks CAP_SYS_ADMIN")
        );
        for skip in [&lane, &unselected] {
            assert!(matches!(skip.outcome(true), Outcome::Ignored { .. }));
            assert!(skip.completion(true).is_ok(), "{skip:?}");
        }
    }
}
