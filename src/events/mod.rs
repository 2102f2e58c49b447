//! What a run does, as data: stack ready, a setup step, a trial started
//! and finished, a retry, a restore, a neighbour seen, a warning. Code
//! anywhere in the crate emits a [`RunEvent`]; the recorder stamps it with
//! the UTC time and keeps it; the writers read the same events: the
//! console ([`console::line`], the lines a user sees as it happens),
//! `results.json` (`run.events`), JUnit (a trial's events in its
//! `system-out`, the run's own in the suite's) and the HTML report (its
//! timeline).
//!
//! ```
//! use kvcr_e2e::events::{self, RunEvent};
//! let from = events::mark();
//! events::emit(RunEvent::NoRestore { trial: "TC-04::guard_takeover_replacement".into() });
//! let seen = events::since(from);
//! assert!(seen.iter().any(|e| matches!(&e.kind, RunEvent::NoRestore { .. })));
//! ```
//!
//! The room sits low in the layers (it knows only [`crate::utc`]): a file
//! deep in the stack (the clock watcher, the Python env builder) emits
//! without importing anything above it.

pub mod console;
mod kinds;
mod recorder;
mod timeline;

pub use kinds::{ClockKind, ComponentReady, Moment, RunEvent, SetupPart, TrialOutcome, Unwritten};
pub use recorder::{emit, mark, since, Mark, Recorder};
pub use timeline::{by_trial, Grouped};

use serde::Serialize;

use crate::utc::UtcTime;

/// One event of the run, with when it was emitted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// When it was emitted (UTC).
    pub at: UtcTime,
    /// What happened, with its fields (`"event": "stack_ready"`, ...).
    #[serde(flatten)]
    pub kind: RunEvent,
}

impl Event {
    /// `kind`, stamped now.
    pub fn now(kind: RunEvent) -> Self {
        Event {
            at: UtcTime::now(),
            kind,
        }
    }

    /// The event's kind as results.json names it (`stack_ready`).
    pub fn name(&self) -> String {
        self.kind.name()
    }

    /// The event's console text, or `None` for one the console does not
    /// print (libtest prints trials itself).
    pub fn line(&self) -> Option<String> {
        console::line(&self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_serializes_as_its_time_its_kind_and_its_fields() {
        let event = Event {
            at: UtcTime(time::macros::datetime!(2026-12-05 20:00:00 UTC)),
            kind: RunEvent::StackReady {
                total_ms: 6_900,
                components: vec![ComponentReady {
                    component: "worker-A".into(),
                    ready_ms: 4_100,
                }],
                restarts: Vec::new(),
            },
        };
        assert_eq!(
            serde_json::to_value(&event).expect("json"),
            serde_json::json!({
                "at": "2026-12-05T20:00:00Z",
                "event": "stack_ready",
                "total_ms": 6900,
                "components": [{"component": "worker-A", "ready_ms": 4100}],
                "restarts": [],
            })
        );
        let finished = Event {
            at: event.at,
            kind: RunEvent::TrialFinished {
                trial: "TC-04::x".into(),
                outcome: TrialOutcome::ExpectedFailure,
                duration_ms: 10,
                detail: None,
            },
        };
        assert_eq!(
            serde_json::to_value(&finished).expect("json"),
            serde_json::json!({
                "at": "2026-12-05T20:00:00Z",
                "event": "trial_finished",
                "trial": "TC-04::x",
                "outcome": "expected_failure",
                "duration_ms": 10,
            })
        );
    }

    #[test]
    fn every_setup_part_and_clock_kind_is_a_snake_case_word() {
        let words =
            serde_json::to_value([SetupPart::PythonEnv, SetupPart::KvcrBuild]).expect("json");
        assert_eq!(words, serde_json::json!(["python_env", "kvcr_build"]));
        let clock = serde_json::to_value(RunEvent::MachineClock {
            kind: ClockKind::WallClockStep,
            seconds: -1.5,
            seen_at: "t".into(),
        })
        .expect("json");
        assert_eq!(clock["event"], "machine_clock");
        assert_eq!(clock["kind"], "wall_clock_step");
    }

    #[test]
    fn an_events_name_is_its_results_json_kind() {
        assert_eq!(
            RunEvent::NoRestore { trial: "a".into() }.name(),
            "no_restore"
        );
        assert_eq!(
            RunEvent::EvidenceDir { path: "r".into() }.name(),
            "evidence_dir"
        );
    }
}
