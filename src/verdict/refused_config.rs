//! A KVCR component started with a configuration it must refuse (TC-16's
//! configuration rows): judged as any refused start
//! ([`expect_refused`](super::hostile_start::expect_refused),
//! [`expect_nothing_left`](super::hostile_start::expect_nothing_left)),
//! where KVCR's message is its exception or, for the Guard service's command
//! line, its usage error; and whatever was beside it (another live service
//! on its socket, a file at a path it was given, a worker's own Guard, which
//! must still serve and exit 0 when stopped) is left as it was.

use serde::Serialize;

use super::hostile_start::StartAttempt;
use super::{Checks, Violation};

/// Claim: what was beside a refused start is left as it was.
pub const BESIDE_UNTOUCHED: &str =
    "a refused start leaves what was beside it (another service, a worker's own Guard, the harness's files) as it was";

/// One thing beside the attempt and whether the wrapper found it as it was
/// after the component exited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Untouched {
    /// What was checked, as the wrapper said it (`the live service on ...`).
    pub what: String,
    pub kept: bool,
}

/// What the harness saw of one configuration row's start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigAttempt {
    /// The start itself; its `cause` names the configuration and what was
    /// set, its `cause_words` are KVCR's own words for the refusal.
    #[serde(flatten)]
    pub start: StartAttempt,
    /// How many things beside it the wrapper had to check.
    pub beside_expected: usize,
    pub beside: Vec<Untouched>,
}

/// Lines of an argparse usage error (`prog: error: message`): how KVCR's
/// Guard service refuses a bad command line, with no traceback.
pub fn usage_errors(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(": error: "))
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// Everything beside the attempt was checked, and found as it was.
pub fn expect_beside_untouched(a: &ConfigAttempt) -> Result<(), Violation> {
    let mut c = Checks::new(BESIDE_UNTOUCHED);
    let who = format!("the {} ({})", a.start.component, a.start.cause);
    c.check(a.beside.len() == a.beside_expected, || {
        format!(
            "{who}: {} of the {} checks of what was beside it ran; log {}",
            a.beside.len(),
            a.beside_expected,
            a.start.log.display()
        )
    });
    for u in &a.beside {
        c.check(u.kept, || {
            format!(
                "{who}: {} was not as it was after the refused start; log {}",
                u.what,
                a.start.log.display()
            )
        });
    }
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::super::hostile_start::{expect_nothing_left, expect_refused};
    use super::*;

    fn attempt(exceptions: &[&str]) -> ConfigAttempt {
        ConfigAttempt {
            start: StartAttempt {
                attempt: "operation_timeout_zero".into(),
                component: "worker".into(),
                cause: "configuration operation_timeout_zero: --kvcr-config-override config.operation_timeout_ms=0".into(),
                cause_words: vec!["operation_timeout_ms must be positive".into()],
                exit_code: Some(1),
                ready: false,
                hung: false,
                elapsed_ms: 2_400,
                deadline_ms: 60_000,
                exceptions: exceptions.iter().map(|e| e.to_string()).collect(),
                left_files: vec![],
                listed: true,
                left_processes: vec![],
                pool_files: vec![],
                leftovers: None,
                log: "logs/hostile-operation_timeout_zero.log".into(),
            },
            beside_expected: 0,
            beside: vec![],
        }
    }

    const REFUSAL: &str = "ValueError: operation_timeout_ms must be positive";

    #[test]
    fn a_refusal_in_kvcrs_words_within_the_deadline_passes() {
        let a = attempt(&[REFUSAL]);
        assert_eq!(expect_refused(&a.start), Ok(()));
        assert_eq!(expect_nothing_left(&a.start), Ok(()));
        assert_eq!(expect_beside_untouched(&a), Ok(()));
    }

    #[test]
    fn another_refusal_fails_naming_the_configuration_and_what_was_seen() {
        let a = attempt(&[
            "ValueError: abandon_timeout_ms must be at least twice operation_timeout_ms",
        ]);
        let v = expect_refused(&a.start).unwrap_err();
        assert!(
            v.detail.contains("configuration operation_timeout_zero"),
            "{v}"
        );
        assert!(v.detail.contains("config.operation_timeout_ms=0"), "{v}");
        assert!(
            v.detail
                .contains("abandon_timeout_ms must be at least twice"),
            "{v}"
        );
        assert!(
            v.detail.contains("operation_timeout_ms must be positive"),
            "{v}"
        );
    }

    #[test]
    fn a_start_that_served_or_outlived_the_deadline_fails() {
        let mut served = attempt(&[]);
        served.start.ready = true;
        served.start.exit_code = Some(0);
        let v = expect_refused(&served.start).unwrap_err();
        assert!(
            v.detail.contains("started and logged its ready line"),
            "{v}"
        );

        let mut hung = attempt(&[REFUSAL]);
        hung.start.hung = true;
        hung.start.exit_code = None;
        let v = expect_refused(&hung.start).unwrap_err();
        assert!(v.detail.contains("still running 60000 ms"), "{v}");
        assert!(v.detail.contains(REFUSAL), "{v}");

        let mut zero = attempt(&[REFUSAL]);
        zero.start.exit_code = Some(0);
        assert!(expect_refused(&zero.start).is_err());
    }

    #[test]
    fn the_guard_services_usage_error_is_its_message() {
        let log = "usage: kvcr_service.py [-h] --socket-path SOCKET_PATH\n\
                   kvcr_service.py: error: --guard-count must be at least 1\n\
                   INFO:kvcr.kvcr_service:other\n";
        assert_eq!(
            usage_errors(log),
            vec!["kvcr_service.py: error: --guard-count must be at least 1".to_string()]
        );
        assert!(usage_errors("ERROR:kvcr.guard:failed\n").is_empty());
        let mut a = attempt(&[]);
        a.start.cause_words = vec!["--guard-count must be at least 1".into()];
        a.start.exit_code = Some(2);
        assert!(expect_refused(&a.start).is_err(), "no message, no pass");
        a.start.exceptions = usage_errors(log);
        assert_eq!(expect_refused(&a.start), Ok(()));
    }

    #[test]
    fn what_was_beside_must_be_checked_and_kept() {
        let mut a = attempt(&[REFUSAL]);
        a.beside_expected = 1;
        let v = expect_beside_untouched(&a).unwrap_err();
        assert!(v.detail.contains("0 of the 1 checks"), "{v}");
        a.beside = vec![Untouched {
            what: "the live service on /s/g.sock".into(),
            kept: false,
        }];
        let v = expect_beside_untouched(&a).unwrap_err();
        assert!(
            v.detail
                .contains("the live service on /s/g.sock was not as it was"),
            "{v}"
        );
        a.beside[0].kept = true;
        assert_eq!(expect_beside_untouched(&a), Ok(()));
    }
}
