//! A case's outcome from its result and the known findings it checked
//! (docs/kvcr-findings.md, declared in `verdict::findings`): while each
//! finding declared for the case shows, a case that otherwise passed is an
//! expected failure; a declared finding that no longer shows fails it
//! ("unexpected pass: finding N no longer shows: retire it"), and so does a
//! finding that shows where it is not declared. A fault row's outcome is
//! its own (it passes when its case failed with the claim), so this applies
//! to cases only.

use libtest_mimic::{Completion, Failed};

use crate::evidence::expected::FindingCheck;
use crate::evidence::Outcome;

/// The outcome of a case that ended with `result` and checked `checks`.
pub(super) fn outcome(result: Result<(), String>, checks: &[FindingCheck]) -> Outcome {
    let problems: Vec<String> = checks
        .iter()
        .filter_map(|c| {
            if c.is_unexpected_pass() {
                Some(format!(
                    "unexpected pass: finding {} no longer shows: retire it ({}; seen: {})",
                    c.finding, c.title, c.seen
                ))
            } else if c.is_undeclared() {
                Some(format!(
                    "finding {} shows where it is not declared (src/verdict/findings.rs): {}",
                    c.finding, c.seen
                ))
            } else {
                None
            }
        })
        .collect();
    match result {
        Err(message) if problems.is_empty() => Outcome::Failed { message },
        Err(message) => Outcome::Failed {
            message: format!("{message}; also, {}", problems.join("; ")),
        },
        Ok(()) if !problems.is_empty() => Outcome::Failed {
            message: problems.join("; "),
        },
        Ok(()) => {
            let shown: Vec<&FindingCheck> =
                checks.iter().filter(|c| c.is_expected_failure()).collect();
            if shown.is_empty() {
                return Outcome::Passed;
            }
            let mut findings: Vec<u32> = shown.iter().map(|c| c.finding).collect();
            findings.dedup();
            let message = shown
                .iter()
                .map(|c| format!("{}; seen: {}", c.headline(), c.seen))
                .collect::<Vec<_>>()
                .join("\n");
            Outcome::ExpectedFailure {
                message: format!("expected failure ({message})",),
                findings,
            }
        }
    }
}

/// What libtest-mimic reports for `outcome`: an expected failure is
/// ignored with its findings (`ignored, expected failure (finding 17)`),
/// never `ok`.
pub(super) fn completion(outcome: &Outcome) -> Result<Completion, Failed> {
    match outcome {
        Outcome::Passed => Ok(Completion::Completed),
        Outcome::ExpectedFailure { .. } => Ok(Completion::ignored_with(outcome.words())),
        Outcome::Failed { message } => Err(Failed::from(message.as_str())),
        Outcome::Ignored { reason, .. } => Ok(Completion::ignored_with(reason.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(finding: u32, shows: bool, expected: bool) -> FindingCheck {
        FindingCheck {
            finding,
            title: format!("title {finding}"),
            shows,
            expected,
            seen: format!("seen {finding}"),
        }
    }

    #[test]
    fn a_declared_finding_that_shows_is_an_expected_failure() {
        let outcome = outcome(Ok(()), &[check(17, true, true)]);
        let Outcome::ExpectedFailure { findings, message } = &outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(findings, &[17]);
        assert_eq!(
            message,
            "expected failure (finding 17: title 17; seen: seen 17)"
        );
        assert_eq!(outcome.words(), "expected failure (finding 17)");
        assert!(completion(&outcome).is_ok());
        let both = super::outcome(Ok(()), &[check(2, true, true), check(3, true, true)]);
        assert_eq!(both.words(), "expected failure (findings 2, 3)");
    }

    #[test]
    fn a_declared_finding_that_no_longer_shows_fails_the_case() {
        let outcome = outcome(Ok(()), &[check(8, false, true)]);
        assert_eq!(
            outcome,
            Outcome::Failed {
                message:
                    "unexpected pass: finding 8 no longer shows: retire it (title 8; seen: seen 8)"
                        .into()
            }
        );
        assert!(completion(&outcome).is_err());
        // One of two findings gone: still a failure.
        let half = super::outcome(Ok(()), &[check(2, true, true), check(3, false, true)]);
        assert!(
            matches!(&half, Outcome::Failed { message } if message.starts_with("unexpected pass: finding 3 ")),
            "{half:?}"
        );
    }

    #[test]
    fn a_failed_case_stays_failed_and_says_what_else_it_saw() {
        let failed = outcome(Err("tokens differ".into()), &[check(17, true, true)]);
        assert_eq!(
            failed,
            Outcome::Failed {
                message: "tokens differ".into()
            }
        );
        let gone = outcome(Err("tokens differ".into()), &[check(8, false, true)]);
        assert!(
            matches!(&gone, Outcome::Failed { message } if message.starts_with("tokens differ; also, unexpected pass: finding 8")),
            "{gone:?}"
        );
    }

    #[test]
    fn an_undeclared_finding_fails_and_an_absent_undeclared_one_is_nothing() {
        let undeclared = outcome(Ok(()), &[check(17, true, false)]);
        assert!(
            matches!(&undeclared, Outcome::Failed { message } if message.contains("finding 17 shows where it is not declared")),
            "{undeclared:?}"
        );
        assert_eq!(outcome(Ok(()), &[check(17, false, false)]), Outcome::Passed);
        assert_eq!(outcome(Ok(()), &[]), Outcome::Passed);
    }
}
