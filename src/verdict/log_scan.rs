//! KVCR's known bad lines in the components' logs over a case's own window:
//! the source-stall latch, `pool recovery disabled`, `Guard N failed`, a
//! dropped placement, Python tracebacks. A case that did not expect one
//! fails naming the line (Dynamo's fault tests check "no exceptions" the
//! same way).

use serde::Serialize;

use super::Violation;
use crate::telemetry::names::{kvcr_bad_lines as bad, kvcr_log};

/// A kind of bad line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BadLine {
    SourceStalled,
    PoolRecoveryDisabled,
    GuardFailed,
    PlacementFailed,
    Traceback,
    /// A traceback that follows `KVCR start_write setup failed`: a promoted
    /// Guard refusing a target's first write because the target sent its
    /// metadata to the dead primary only (KVCR 0.1.1, docs/cpu-engine.md);
    /// the target re-sends it and its next read is served.
    StartWriteRefused,
    /// A traceback that follows `KVCR discarding a handback region that was
    /// never finished`: a claim threw an unfinished handback region away
    /// and started cold (TC-23 cuts one short).
    HandbackDiscarded,
    Uncontained,
}

impl BadLine {
    /// The kind `line` is, if any.
    pub fn of(line: &str) -> Option<BadLine> {
        if line.contains(bad::SOURCE_STALLED) {
            Some(BadLine::SourceStalled)
        } else if line.contains(bad::POOL_RECOVERY_DISABLED) {
            Some(BadLine::PoolRecoveryDisabled)
        } else if line.contains(bad::UNCONTAINED) {
            Some(BadLine::Uncontained)
        } else if line.contains(kvcr_log::GUARD_PREFIX)
            && line.trim_end().ends_with(bad::GUARD_FAILED_SUFFIX)
        {
            Some(BadLine::GuardFailed)
        } else if line.contains(bad::PLACEMENT_FAILED) {
            Some(BadLine::PlacementFailed)
        } else if line.contains(bad::TRACEBACK) {
            Some(BadLine::Traceback)
        } else {
            None
        }
    }
}

/// One bad line found: which log, which line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub log: String,
    pub line_no: usize,
    pub kind: BadLine,
    pub text: String,
    /// For a traceback: the line before it (what the component said
    /// failed) and the exception it ends with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceback: Option<Traceback>,
}

/// What a traceback in a log says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Traceback {
    /// The line before the traceback, e.g. `WARNING ... KVCR recovery
    /// publication failed`.
    pub after: String,
    /// The exception line that ends it, e.g. `AttributeError: ...`.
    pub raised: String,
}

/// Every bad line of `text` (a log's window starting at line `first_line_no`).
pub fn scan(log: &str, text: &str, first_line_no: usize) -> Vec<Found> {
    let lines: Vec<&str> = text.lines().collect();
    let mut previous = "";
    let mut found = Vec::new();
    for (i, line) in lines.iter().copied().enumerate() {
        let kind = match BadLine::of(line) {
            Some(BadLine::Traceback) if previous.contains(bad::START_WRITE_SETUP_FAILED) => {
                Some(BadLine::StartWriteRefused)
            }
            Some(BadLine::Traceback) if previous.contains(bad::HANDBACK_DISCARDED) => {
                Some(BadLine::HandbackDiscarded)
            }
            other => other,
        };
        if let Some(kind) = kind {
            found.push(Found {
                log: log.to_string(),
                line_no: first_line_no + i,
                kind,
                text: line.trim().chars().take(300).collect(),
                traceback: line
                    .contains(bad::TRACEBACK)
                    .then(|| traceback(previous, &lines[i + 1..])),
            });
        }
        previous = line;
    }
    found
}

/// The traceback after `previous`, whose frames are `rest` (indented) up to
/// the exception line.
fn traceback(previous: &str, rest: &[&str]) -> Traceback {
    let raised = rest
        .iter()
        .find(|l| !l.starts_with(char::is_whitespace) && !l.is_empty())
        .map_or("", |l| l.trim());
    Traceback {
        after: previous.trim().chars().take(300).collect(),
        raised: raised.chars().take(300).collect(),
    }
}

/// Passes when every bad line found is of a kind the case expects.
pub fn expect_no_bad_lines(found: &[Found], expected: &[BadLine]) -> Result<(), Violation> {
    let unexpected: Vec<&Found> = found
        .iter()
        .filter(|f| !expected.contains(&f.kind))
        .collect();
    match unexpected.first() {
        None => Ok(()),
        Some(first) => Err(Violation {
            claim: "no unexpected KVCR error in any component's log",
            detail: format!(
                "{} unexpected bad lines, the first {}:{}: `{}`{}",
                unexpected.len(),
                first.log,
                first.line_no,
                first.text,
                match &first.traceback {
                    Some(t) => format!(" after `{}`, raising `{}`", t.after, t.raised),
                    None => String::new(),
                }
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_kind() {
        let text = "ok\n\
            x ERROR KVCR resilience event kind=source_stalled: KVCR source progress stalled for 1512.7 ms\n\
            WARNING:kvcr.guard:KVCR pool recovery disabled; claimable but cold if this primary dies: x\n\
            CRITICAL:kvcr.guard:KVCR Guard 0 failed\n\
            WARNING KVCR placement failed (transfer failed); dropping the source residency\n\
            Traceback (most recent call last):\n\
            INFO KVCR Guard 0 promoted after heartbeat timeout\n";
        let found = scan("worker-A.log", text, 10);
        let kinds: Vec<BadLine> = found.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            vec![
                BadLine::SourceStalled,
                BadLine::PoolRecoveryDisabled,
                BadLine::GuardFailed,
                BadLine::PlacementFailed,
                BadLine::Traceback
            ]
        );
        assert_eq!(found[0].line_no, 11);
    }

    #[test]
    fn a_traceback_after_a_refused_start_write_is_its_own_kind() {
        let text = "WARNING:kvcr.core:KVCR start_write setup failed for op=1\n\
            Traceback (most recent call last):\n\
            INFO other\n\
            Traceback (most recent call last):\n";
        let kinds: Vec<BadLine> = scan("guard.log", text, 1).iter().map(|f| f.kind).collect();
        assert_eq!(kinds, vec![BadLine::StartWriteRefused, BadLine::Traceback]);
        let found = scan("guard.log", text, 1);
        assert!(expect_no_bad_lines(&found, &[BadLine::StartWriteRefused]).is_err());
    }

    #[test]
    fn a_traceback_after_a_discarded_handback_is_its_own_kind() {
        let text = "WARNING:kvcr.recovery_journal:KVCR discarding a handback region that was never finished\n\
            Traceback (most recent call last):\n\
            INFO other\n\
            Traceback (most recent call last):\n";
        let found = scan("guard.log", text, 1);
        let kinds: Vec<BadLine> = found.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, vec![BadLine::HandbackDiscarded, BadLine::Traceback]);
        assert!(expect_no_bad_lines(&found, &[BadLine::HandbackDiscarded]).is_err());
        assert!(expect_no_bad_lines(&found[..1], &[BadLine::HandbackDiscarded]).is_ok());
    }

    #[test]
    fn an_unexpected_line_fails_naming_it() {
        let found = scan("guard.log", "KVCR source progress stalled for 1000 ms\n", 5);
        assert!(expect_no_bad_lines(&found, &[BadLine::SourceStalled]).is_ok());
        let v = expect_no_bad_lines(&found, &[]).unwrap_err();
        assert!(
            v.detail
                .contains("guard.log:5: `KVCR source progress stalled"),
            "{v}"
        );
        assert!(expect_no_bad_lines(&[], &[]).is_ok());
    }

    #[test]
    fn a_traceback_is_named_by_what_failed_and_what_it_raised() {
        let text = "WARNING:kvcr.recovery_journal:KVCR recovery publication failed\n\
            Traceback (most recent call last):\n\
            \x20 File \"/x/kvcr/recovery_journal.py\", line 114, in _project_recovery_record\n\
            \x20   g3 = record.g3.slot\n\
            AttributeError: 'NoneType' object has no attribute 'slot'\n\
            INFO served\n";
        let found = scan("worker-A.log", text, 1);
        assert_eq!(found.len(), 1);
        let v = expect_no_bad_lines(&found, &[]).unwrap_err();
        assert!(
            v.detail.contains(
                "worker-A.log:2: `Traceback (most recent call last):` after \
                 `WARNING:kvcr.recovery_journal:KVCR recovery publication failed`, raising \
                 `AttributeError: 'NoneType' object has no attribute 'slot'`"
            ),
            "{v}"
        );
    }
}
