//! A stranger on a Guard service's claim socket (TC-09): messages no KVCR
//! worker sends, one connection each (`python -m cpu_engine.stranger_probe`).
//! The service must answer each with its error, in KVCR 0.1.1's words, or,
//! where the stranger hung up itself, go on answering the next; it must
//! never hand the stranger a group.

use serde::{Deserialize, Serialize};

use super::{Checks, Violation};

/// What the service did with one attempt, as the probe saw it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct StrangerAnswer {
    /// The attempt's name (`garbage`, `held_without_pidfd`, ...).
    pub attempt: String,
    /// `error`, `granted`, `closed`, `silent`, `hung_up`, `unreachable` or `other`.
    pub answer: String,
    /// The service's words (an error), or what the probe saw instead.
    pub message: String,
    /// Connect to answer.
    pub ms: f64,
}

/// What the service must do with an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Expected {
    /// Answer KVCR's error frame, its message containing these words.
    Error(&'static str),
    /// The stranger closed the connection mid-message: nothing to answer;
    /// the attempts after it show the service still answers.
    HungUp,
}

/// One attempt of the probe: its name, what it sends, what must come back.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Attempt {
    pub name: &'static str,
    pub sends: &'static str,
    pub expected: Expected,
}

const fn attempt(name: &'static str, sends: &'static str, expected: Expected) -> Attempt {
    Attempt {
        name,
        sends,
        expected,
    }
}

/// The probe's attempts, in its order, with KVCR 0.1.1's answer to each
/// (`control_channels.py`'s framing, `guard_protocol.py`'s decoder,
/// `kvcr_service.py`'s dispatch, `guard.py`'s reservation). On a kernel with
/// `SO_PEERPIDFD` (6.5+) the service takes the peer's pidfd from the
/// kernel, so a claim without one, or with a descriptor that is no pidfd,
/// is judged as a claim of the stranger's own process: the held group is
/// refused.
pub const ATTEMPTS: [Attempt; 17] = [
    attempt(
        "garbage",
        "16 bytes whose header announces a 3.7 GB frame",
        Expected::Error("invalid frame length"),
    ),
    attempt(
        "not_msgpack",
        "a well-framed payload that is not msgpack",
        Expected::Error("invalid message payload"),
    ),
    attempt(
        "short_header",
        "2 bytes of a 4-byte header, then end of stream",
        Expected::Error("truncated frame"),
    ),
    attempt(
        "truncated_frame",
        "a header announcing 64 bytes, 5 of them, then end of stream",
        Expected::Error("truncated frame"),
    ),
    attempt(
        "wrong_type",
        "a well-framed heartbeat where a claim must come",
        Expected::Error("invalid message payload"),
    ),
    attempt(
        "wrong_version",
        "a claim of protocol version 2",
        Expected::Error("invalid message payload"),
    ),
    attempt(
        "wrong_digest",
        "a claim with another compatibility digest",
        Expected::Error("compatibility digest does not match the service"),
    ),
    attempt(
        "out_of_range",
        "a claim of a group past the service's",
        Expected::Error("is out of range"),
    ),
    attempt(
        "held_without_pidfd",
        "a claim of the held group with no descriptor",
        Expected::Error("is held by another worker"),
    ),
    attempt(
        "held_with_a_file_for_pidfd",
        "a claim of the held group carrying /dev/null as its pidfd",
        Expected::Error("is held by another worker"),
    ),
    attempt(
        "two_descriptors",
        "a claim of the held group carrying two pidfds",
        Expected::Error("multiple file descriptors received"),
    ),
    attempt(
        "four_descriptors",
        "a claim of the held group carrying more descriptors than the service reads",
        Expected::Error("truncated ancillary data"),
    ),
    attempt(
        "held_with_own_pidfd",
        "a claim of the held group exactly as a worker makes it",
        Expected::Error("is held by another worker"),
    ),
    attempt(
        "hung_up_silently",
        "a connection closed before a byte",
        Expected::HungUp,
    ),
    attempt(
        "hung_up_mid_frame",
        "half a claim of the held group, then close",
        Expected::HungUp,
    ),
    attempt(
        "hung_up_after_claim",
        "a claim of the held group, closed before its answer",
        Expected::HungUp,
    ),
    attempt(
        "held_after_hang_ups",
        "a claim of the held group, after the hang-ups",
        Expected::Error("is held by another worker"),
    ),
];

/// How long an answer may take: a refusal, not a hang.
const ANSWER_MS: f64 = 5000.0;

/// Every attempt was made and answered as KVCR must: its error in its
/// words, fast, and no group granted.
pub fn expect_strangers_turned_away(answers: &[StrangerAnswer]) -> Result<(), Violation> {
    let mut c = Checks::new("a stranger on the Guard service's socket is turned away");
    for a in answers {
        c.check(a.answer != "granted", || {
            format!("`{}` was granted a group: {}", a.attempt, a.message)
        });
    }
    for expected in &ATTEMPTS {
        let Some(seen) = answers.iter().find(|a| a.attempt == expected.name) else {
            c.check(false, || format!("`{}` was not tried", expected.name));
            continue;
        };
        match expected.expected {
            Expected::Error(words) => {
                c.check(
                    seen.answer == "error" && seen.message.contains(words),
                    || {
                        format!(
                            "`{}` ({}) got {} `{}`, not KVCR's error `{words}`",
                            seen.attempt, expected.sends, seen.answer, seen.message
                        )
                    },
                )
                .check(seen.ms <= ANSWER_MS, || {
                    format!(
                        "`{}` was answered after {:.0} ms (more than {ANSWER_MS} ms)",
                        seen.attempt, seen.ms
                    )
                });
            }
            Expected::HungUp => {
                c.check(seen.answer == "hung_up", || {
                    format!(
                        "`{}` ({}) was not the stranger's own hang-up: {} `{}`",
                        seen.attempt, expected.sends, seen.answer, seen.message
                    )
                });
            }
        }
    }
    c.verdict()
}

/// How many descriptors the stranger may leave the service holding more
/// than before: a connection or two still closing. Each attempt that
/// reaches a claim gives the service at least one (its pidfd of the
/// stranger, or the ones the stranger sent), about a dozen in all.
pub const DESCRIPTOR_SLACK: usize = 2;

/// The Guard service's open descriptors around the stranger's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Descriptors {
    pub before: usize,
    /// Once settled (or as they were when the wait gave up).
    pub after: usize,
}

/// The service closed what the stranger's connections gave it: the
/// descriptors it received and the pidfds it took of the stranger.
pub fn expect_descriptors_closed(d: &Descriptors) -> Result<(), Violation> {
    let mut c = Checks::new("the Guard service keeps no descriptor of a stranger's");
    c.check(d.after <= d.before + DESCRIPTOR_SLACK, || {
        format!(
            "the service had {} descriptors open before the stranger and {} after (more than {DESCRIPTOR_SLACK} more)",
            d.before, d.after
        )
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_kvcr_answers() -> Vec<StrangerAnswer> {
        ATTEMPTS
            .iter()
            .map(|a| StrangerAnswer {
                attempt: a.name.to_string(),
                answer: match a.expected {
                    Expected::Error(_) => "error".into(),
                    Expected::HungUp => "hung_up".into(),
                },
                message: match a.expected {
                    Expected::Error(words) => format!("KVCR says: {words} (details)"),
                    Expected::HungUp => "closed after sending 105 bytes".into(),
                },
                ms: 0.4,
            })
            .collect()
    }

    fn with(attempt: &str, answer: &str, message: &str) -> Vec<StrangerAnswer> {
        let mut answers = as_kvcr_answers();
        let a = answers.iter_mut().find(|a| a.attempt == attempt).unwrap();
        a.answer = answer.into();
        a.message = message.into();
        answers
    }

    #[test]
    fn kvcrs_answers_pass() {
        assert_eq!(expect_strangers_turned_away(&as_kvcr_answers()), Ok(()));
    }

    #[test]
    fn a_grant_fails() {
        let e = expect_strangers_turned_away(&with(
            "held_without_pidfd",
            "granted",
            "granted Guard group 0",
        ))
        .unwrap_err();
        assert!(e.detail.contains("`held_without_pidfd` was granted"), "{e}");
    }

    #[test]
    fn a_dropped_connection_where_kvcr_answers_fails() {
        let e = expect_strangers_turned_away(&with("garbage", "closed", "")).unwrap_err();
        assert!(
            e.detail.contains("not KVCR's error `invalid frame length`"),
            "{e}"
        );
    }

    #[test]
    fn other_words_fail() {
        let e = expect_strangers_turned_away(&with(
            "out_of_range",
            "error",
            "internal KVCR service error",
        ))
        .unwrap_err();
        assert!(e.detail.contains("is out of range"), "{e}");
    }

    #[test]
    fn a_service_gone_after_the_hang_ups_fails() {
        let e = expect_strangers_turned_away(&with(
            "held_after_hang_ups",
            "unreachable",
            "[Errno 111] Connection refused",
        ))
        .unwrap_err();
        assert!(e.detail.contains("held_after_hang_ups"), "{e}");
    }

    #[test]
    fn a_missing_attempt_and_a_slow_answer_fail() {
        let mut answers = as_kvcr_answers();
        answers.retain(|a| a.attempt != "wrong_type");
        answers[0].ms = 6000.0;
        let e = expect_strangers_turned_away(&answers).unwrap_err();
        assert!(e.detail.contains("`wrong_type` was not tried"), "{e}");
        assert!(e.detail.contains("after 6000 ms"), "{e}");
    }

    #[test]
    fn a_hang_up_must_be_the_strangers_own() {
        let e =
            expect_strangers_turned_away(&with("hung_up_after_claim", "silent", "")).unwrap_err();
        assert!(e.detail.contains("hung_up_after_claim"), "{e}");
    }

    #[test]
    fn descriptors_kept_by_the_service_fail() {
        let ok = Descriptors {
            before: 40,
            after: 40 + DESCRIPTOR_SLACK,
        };
        assert_eq!(expect_descriptors_closed(&ok), Ok(()));
        let leaked = Descriptors {
            before: 40,
            after: 44,
        };
        let e = expect_descriptors_closed(&leaked).unwrap_err();
        assert!(e.detail.contains("40 descriptors open before"), "{e}");
    }

    #[test]
    fn the_attempts_match_the_probes() {
        crate::verdict::assert_probe_order("stranger_probe.py", ATTEMPTS.iter().map(|a| a.name));
    }
}
