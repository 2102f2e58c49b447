//! A KVCR component started where it must refuse (TC-16): it exits non-zero
//! within the start-up timeout, KVCR's own exception names the cause, and it
//! leaves no pool file, socket or process behind. One start is allowed to
//! succeed: a Guard whose pool directory holds its pool group exactly
//! (KVCR reserves the whole pool at start, so later deposits cannot run out
//! of room); it must then stop cleanly and leave nothing either.

use std::path::PathBuf;

use serde::Serialize;

use super::start_leftovers::Leftovers;
use super::{Checks, Violation};

/// Claim: a start in a hostile environment is refused cleanly.
pub const REFUSED: &str = "a KVCR component refuses a hostile start with its own exception";
/// Claim: a refused (or stopped) start leaves nothing behind.
pub const NOTHING_LEFT: &str = "a refused start leaves no pool file, socket or process";
/// Claim: a Guard with exactly the room its pool group needs starts, holds
/// the whole pool from the start, and stops cleanly.
pub const RESERVED_AT_START: &str =
    "a Guard reserves its whole pool at start, so a full pool directory cannot fail it later";

/// What the harness saw of one start attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartAttempt {
    /// The hostile condition, as a word (`pool_dir_too_small`).
    pub attempt: String,
    /// The component started: `guard` (KVCR's Guard service) or `worker`
    /// (the engine with KVCR).
    pub component: String,
    /// The harness's own account of the condition, with its numbers.
    pub cause: String,
    /// Words one of which KVCR's exception must contain to name the cause
    /// (empty where the start must succeed).
    pub cause_words: Vec<String>,
    /// The component's exit code; `None` when it did not exit on its own
    /// within the deadline, or died of a signal.
    pub exit_code: Option<i32>,
    /// It logged its ready line (a start that must be refused did not).
    pub ready: bool,
    /// Still running at the deadline (then killed).
    pub hung: bool,
    pub elapsed_ms: u64,
    pub deadline_ms: u64,
    /// The last line of each Python traceback in its log, in order: KVCR's
    /// exception and whatever it was raised from.
    pub exceptions: Vec<String>,
    /// Files found under the attempt's own `/dev/shm` (its pool directory,
    /// socket directory and work directory) after it exited.
    pub left_files: Vec<String>,
    /// The listing of those files ran (a listing that never ran proves
    /// nothing).
    pub listed: bool,
    /// Processes of its process group alive after it exited.
    pub left_processes: Vec<u32>,
    /// The pool files while it was ready (`RESERVED_AT_START` only).
    pub pool_files: Vec<PoolFileSpace>,
    /// What a crashed and a live Guard left for it (`over_a_crashed_guard`
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leftovers: Option<Leftovers>,
    /// The component's log.
    pub log: PathBuf,
}

/// One pool file of a ready Guard: its size and the bytes its filesystem
/// has allocated to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolFileSpace {
    pub name: String,
    pub size_bytes: u64,
    pub allocated_bytes: u64,
}

impl StartAttempt {
    fn who(&self) -> String {
        format!("the {} ({})", self.component, self.cause)
    }
}

/// The attempt was refused: a non-zero exit within the deadline, never
/// ready, with KVCR's exception naming the cause.
pub fn expect_refused(a: &StartAttempt) -> Result<(), Violation> {
    let mut c = Checks::new(REFUSED);
    let log = a.log.display();
    c.check(!a.ready, || {
        format!(
            "{} started and logged its ready line although it must refuse; log {log}",
            a.who()
        )
    })
    .check(!a.hung, || {
        let said = if a.exceptions.is_empty() {
            String::new()
        } else {
            format!(" (it logged `{}` but did not exit)", a.exceptions.join(" <- "))
        };
        format!(
            "{} was still running {} ms after its start (the start-up timeout) without refusing{said}; log {log}",
            a.who(),
            a.deadline_ms
        )
    });
    if !a.ready && !a.hung {
        c.check(matches!(a.exit_code, Some(code) if code != 0), || {
            format!(
                "{} ended with {} instead of a non-zero exit code; log {log}",
                a.who(),
                a.exit_code.map_or_else(
                    || "a signal".to_string(),
                    |code| format!("exit code {code}")
                )
            )
        })
        .check(!a.exceptions.is_empty(), || {
            format!(
                "{} exited without an exception in its log; log {log}",
                a.who()
            )
        });
        if !a.exceptions.is_empty() {
            c.check(names_the_cause(a), || {
                format!(
                    "{}: its exception does not name the cause (none of {:?} in `{}`); log {log}",
                    a.who(),
                    a.cause_words,
                    a.exceptions.join(" <- ")
                )
            });
        }
    }
    c.verdict()
}

/// After the attempt: no file under its directories, no process of its
/// group, and the listing that shows it ran.
pub fn expect_nothing_left(a: &StartAttempt) -> Result<(), Violation> {
    let mut c = Checks::new(NOTHING_LEFT);
    c.check(a.listed, || {
        format!(
            "{}: the listing of its directories after it exited never ran; log {}",
            a.who(),
            a.log.display()
        )
    })
    .check(a.left_files.is_empty(), || {
        format!("{} left {}", a.who(), a.left_files.join(", "))
    })
    .check(a.left_processes.is_empty(), || {
        format!(
            "{} left processes running: pids {:?}",
            a.who(),
            a.left_processes
        )
    });
    c.verdict()
}

/// A Guard given exactly the room its pool group needs: it started, every
/// pool file was fully allocated while it ran (nothing a later deposit
/// could fail to get), and it exited 0 when stopped.
pub fn expect_reserved_at_start(a: &StartAttempt) -> Result<(), Violation> {
    let mut c = Checks::new(RESERVED_AT_START);
    let log = a.log.display();
    c.check(a.ready, || {
        format!(
            "{} never logged its ready line (exit {:?}, `{}`); log {log}",
            a.who(),
            a.exit_code,
            a.exceptions.join(" <- ")
        )
    });
    if a.ready {
        c.check(!a.pool_files.is_empty(), || {
            format!(
                "{} was ready with no pool file in its pool directory",
                a.who()
            )
        });
        for f in &a.pool_files {
            c.check(f.allocated_bytes >= f.size_bytes, || {
                format!(
                    "{}: pool file {} has {} of its {} bytes allocated: a deposit could still find the directory full",
                    a.who(),
                    f.name,
                    f.allocated_bytes,
                    f.size_bytes
                )
            });
        }
        c.check(a.exit_code == Some(0), || {
            format!(
                "{} did not exit 0 when stopped with SIGTERM (exit {:?}); log {log}",
                a.who(),
                a.exit_code
            )
        });
    }
    c.verdict()
}

fn names_the_cause(a: &StartAttempt) -> bool {
    a.cause_words
        .iter()
        .any(|w| a.exceptions.iter().any(|e| e.contains(w.as_str())))
}

/// The last line of every Python traceback in `log`: the exception raised,
/// then (for a chained one) what it was raised from, in the order printed.
pub fn traceback_exceptions(log: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_traceback = false;
    for line in log.lines() {
        if line.starts_with("Traceback (most recent call last):") {
            in_traceback = true;
            continue;
        }
        if in_traceback && !line.starts_with(' ') && !line.starts_with('\t') && !line.is_empty() {
            found.push(line.trim_end().to_string());
            in_traceback = false;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> StartAttempt {
        StartAttempt {
            attempt: "pool_dir_too_small".into(),
            component: "guard".into(),
            cause: "its pool directory is a tmpfs of 52428800 bytes".into(),
            cause_words: vec!["No space left on device".into()],
            exit_code: Some(1),
            ready: false,
            hung: false,
            elapsed_ms: 900,
            deadline_ms: 60_000,
            exceptions: vec!["OSError: [Errno 28] No space left on device".into()],
            left_files: vec![],
            listed: true,
            left_processes: vec![],
            pool_files: vec![],
            leftovers: None,
            log: "logs/hostile-pool_dir_too_small.log".into(),
        }
    }

    fn reserved() -> StartAttempt {
        StartAttempt {
            attempt: "pool_dir_full_after_start".into(),
            cause_words: vec![],
            exit_code: Some(0),
            ready: true,
            exceptions: vec![],
            pool_files: vec![PoolFileSpace {
                name: "kvcr-pool_0-ab".into(),
                size_bytes: 158_543_872,
                allocated_bytes: 158_543_872,
            }],
            ..refused()
        }
    }

    #[test]
    fn a_clean_refusal_passes() {
        assert_eq!(expect_refused(&refused()), Ok(()));
        assert_eq!(expect_nothing_left(&refused()), Ok(()));
    }

    #[test]
    fn a_start_that_must_be_refused_but_is_ready_fails() {
        let a = StartAttempt {
            ready: true,
            exit_code: Some(0),
            exceptions: vec![],
            ..refused()
        };
        let v = expect_refused(&a).unwrap_err();
        assert_eq!(v.claim, REFUSED);
        assert!(
            v.detail.contains("started and logged its ready line"),
            "{v}"
        );
        assert!(v.detail.contains("the guard (its pool directory"), "{v}");
    }

    #[test]
    fn a_hang_fails() {
        let a = StartAttempt {
            hung: true,
            exit_code: None,
            exceptions: vec![],
            ..refused()
        };
        let v = expect_refused(&a).unwrap_err();
        assert!(v.detail.contains("still running 60000 ms"), "{v}");
        let stuck = StartAttempt {
            hung: true,
            exit_code: None,
            ..refused()
        };
        let v = expect_refused(&stuck).unwrap_err();
        assert!(
            v.detail.contains(
                "it logged `OSError: [Errno 28] No space left on device` but did not exit"
            ),
            "{v}"
        );
    }

    #[test]
    fn exit_zero_or_no_exception_or_another_cause_fails() {
        let zero = StartAttempt {
            exit_code: Some(0),
            ..refused()
        };
        assert!(expect_refused(&zero)
            .unwrap_err()
            .detail
            .contains("exit code 0 instead of a non-zero"));
        let silent = StartAttempt {
            exceptions: vec![],
            ..refused()
        };
        assert!(expect_refused(&silent)
            .unwrap_err()
            .detail
            .contains("without an exception"));
        let other = StartAttempt {
            exceptions: vec!["ValueError: something else".into()],
            ..refused()
        };
        assert!(expect_refused(&other)
            .unwrap_err()
            .detail
            .contains("does not name the cause"));
    }

    /// A service refused at its second pool group must give back the
    /// first group's pool file too: refused and clean passes, the first
    /// group's file left fails, naming it.
    #[test]
    fn a_start_refused_at_its_second_group_must_leave_the_first_groups_file_neither() {
        let clean = StartAttempt {
            attempt: "pool_dir_for_one_of_two_groups".into(),
            cause: "it holds two pool groups of 158543872 bytes each and its pool directory is a tmpfs of 158543872 bytes".into(),
            ..refused()
        };
        assert_eq!(expect_refused(&clean), Ok(()));
        assert_eq!(expect_nothing_left(&clean), Ok(()));
        let kept = StartAttempt {
            left_files: vec![
                "/dev/shm/hostile/pool_dir_for_one_of_two_groups/pools/kvcr-pool_0-ab".into(),
            ],
            ..clean
        };
        let v = expect_nothing_left(&kept).unwrap_err();
        assert_eq!(v.claim, NOTHING_LEFT);
        assert!(v.detail.contains("two pool groups"), "{v}");
        assert!(v.detail.contains("pools/kvcr-pool_0-ab"), "{v}");
    }

    #[test]
    fn a_file_a_process_or_no_listing_left_fails() {
        let file = StartAttempt {
            left_files: vec!["/dev/shm/hostile/a/pools/kvcr-pool_0-x".into()],
            ..refused()
        };
        let v = expect_nothing_left(&file).unwrap_err();
        assert_eq!(v.claim, NOTHING_LEFT);
        assert!(
            v.detail
                .contains("left /dev/shm/hostile/a/pools/kvcr-pool_0-x"),
            "{v}"
        );
        let process = StartAttempt {
            left_processes: vec![4242],
            ..refused()
        };
        assert!(expect_nothing_left(&process)
            .unwrap_err()
            .detail
            .contains("4242"));
        let unlisted = StartAttempt {
            listed: false,
            ..refused()
        };
        assert!(expect_nothing_left(&unlisted)
            .unwrap_err()
            .detail
            .contains("never ran"));
    }

    #[test]
    fn a_fully_reserved_pool_passes_and_a_sparse_one_fails() {
        assert_eq!(expect_reserved_at_start(&reserved()), Ok(()));
        let mut sparse = reserved();
        sparse.pool_files[0].allocated_bytes = 4096;
        let v = expect_reserved_at_start(&sparse).unwrap_err();
        assert_eq!(v.claim, RESERVED_AT_START);
        assert!(v.detail.contains("4096 of its 158543872 bytes"), "{v}");
        let never = StartAttempt {
            ready: false,
            exit_code: Some(1),
            pool_files: vec![],
            ..reserved()
        };
        assert!(expect_reserved_at_start(&never)
            .unwrap_err()
            .detail
            .contains("never logged its ready line"));
        let unclean = StartAttempt {
            exit_code: Some(1),
            ..reserved()
        };
        assert!(expect_reserved_at_start(&unclean)
            .unwrap_err()
            .detail
            .contains("did not exit 0"));
    }

    #[test]
    fn tracebacks_give_their_last_lines_in_order() {
        let log = "\
INFO:kvcr:starting
Traceback (most recent call last):
  File \"x.py\", line 1, in <module>
    bind()
zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:20001')

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File \"y.py\", line 2, in <module>
kvcr.api.KVCRStartupError: KVCR failed to start
ERROR:cpu_engine:bye
";
        assert_eq!(
            traceback_exceptions(log),
            vec![
                "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:20001')",
                "kvcr.api.KVCRStartupError: KVCR failed to start"
            ]
        );
        assert!(traceback_exceptions("INFO: fine\n").is_empty());
    }
}
