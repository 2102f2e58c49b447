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
//! Test targets outside the suite (libtest-mimic programs of their own, the
//! runner lanes) use [`machine_trial`] and [`machine_cannot_run_trial`] for
//! the same rule: a test this machine cannot run is reported ignored with
//! its reason, never `ok`.

use std::fmt::Display;

use libtest_mimic::{Completion, Failed, Trial};

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

/// A trial of a test target outside the suite that needs something of this
/// machine (root, a tool, a cluster): when `precondition` says what is
/// missing, the trial is ignored with that reason (failed with it under
/// `--require-all`); otherwise `body` runs, and fails by panicking as a
/// `#[test]` does.
///
/// ```no_run
/// # fn precondition() -> Result<(), String> { Ok(()) }
/// # fn a_node_has_its_own_pids() {}
/// let trials = vec![kvcr_e2e::suite::machine_trial(
///     "a_node_has_its_own_pids",
///     precondition,
///     a_node_has_its_own_pids,
/// )];
/// let conclusion = libtest_mimic::run(&libtest_mimic::Arguments::from_args(), trials);
/// ```
pub fn machine_trial<E: Display>(
    name: &str,
    precondition: impl FnOnce() -> Result<(), E> + Send + 'static,
    body: impl FnOnce() + Send + 'static,
) -> Trial {
    Trial::ignorable_test(name, move || {
        run_if_the_machine_can(precondition, body, require_all_from_env())
    })
}

/// A machine trial's run: `body` when `precondition` holds; otherwise
/// ignored with the reason, or failed with it under `--require-all`.
fn run_if_the_machine_can<E: Display>(
    precondition: impl FnOnce() -> Result<(), E>,
    body: impl FnOnce(),
    require_all: bool,
) -> Result<Completion, Failed> {
    if let Err(reason) = precondition() {
        return Skip::machine_cannot(reason.to_string()).completion(require_all);
    }
    body();
    Ok(Completion::Completed)
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

    // Judged without libtest-mimic's runner: its report of a failed trial
    // inside this unit test would read as a failed test run.
    #[test]
    fn a_machine_trial_that_cannot_run_is_ignored_with_its_reason() {
        let ignored = run_if_the_machine_can(|| Err("not root"), || panic!("ran"), false);
        assert!(
            matches!(&ignored, Ok(Completion::Ignored { reason }) if reason.as_deref().is_some_and(|r| r.contains("not root"))),
            "a trial this machine cannot run was not ignored with its reason"
        );
        let failed = run_if_the_machine_can(|| Err("not root"), || panic!("ran"), true);
        let Err(failed) = failed else {
            panic!("a trial this machine cannot run passed under --require-all");
        };
        assert!(failed.message().is_some_and(|m| m.contains("not root")));
        let mut ran = false;
        let completed = run_if_the_machine_can(|| Ok::<(), String>(()), || ran = true, true);
        assert!(matches!(completed, Ok(Completion::Completed)) && ran);
    }
}
