//! The run's recorder: every event emitted in this process, in order, and
//! the console writer fed as each one arrives.
//!
//! One recorder per process, global: a run is one process (libtest-mimic
//! runs its trials in it, one suite each), and the code that emits lives
//! in every layer, often with no handle on the run (the clock watcher's
//! thread, the Python env builder, a worker restarted during provisioning).
//! Passing a recorder down through each of those signatures would thread
//! the run through rooms that otherwise know nothing of it. A reader that
//! wants one run's events takes a [`Mark`] when the run begins and reads
//! [`since`] it.

use std::sync::Mutex;

use once_cell::sync::Lazy;

use super::{Event, RunEvent};

/// The process's recorder, printing to the console.
static RECORDER: Lazy<Recorder> = Lazy::new(|| Recorder::new(true));

/// Records `kind`, stamped now, and prints its console line (if it has one).
pub fn emit(kind: RunEvent) {
    RECORDER.record(kind);
}

/// Where the process's events stand now: [`since`] it reads the later ones.
pub fn mark() -> Mark {
    RECORDER.mark()
}

/// The process's events emitted after `from`, in order.
pub fn since(from: Mark) -> Vec<Event> {
    RECORDER.since(from)
}

/// A position in a recorder's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark(usize);

/// Events in the order they were emitted; with `console`, each one's line
/// goes to stderr as it arrives.
#[derive(Debug, Default)]
pub struct Recorder {
    events: Mutex<Vec<Event>>,
    console: bool,
}

impl Recorder {
    /// An empty recorder; `console`: print each event's line to stderr.
    pub fn new(console: bool) -> Self {
        Recorder {
            events: Mutex::new(Vec::new()),
            console,
        }
    }

    /// Records `kind` stamped now; returns the event.
    pub fn record(&self, kind: RunEvent) -> Event {
        let event = Event::now(kind);
        if self.console {
            super::console::print(&event);
        }
        if let Ok(mut events) = self.events.lock() {
            events.push(event.clone());
        }
        event
    }

    /// Where the events stand now.
    pub fn mark(&self) -> Mark {
        Mark(self.events.lock().map(|e| e.len()).unwrap_or_default())
    }

    /// The events recorded after `from`.
    pub fn since(&self, from: Mark) -> Vec<Event> {
        self.events
            .lock()
            .map(|e| e.get(from.0..).map(<[Event]>::to_vec).unwrap_or_default())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_only_the_later_events_in_order() {
        let recorder = Recorder::new(false);
        recorder.record(RunEvent::MachineShared { others: 1 });
        let from = recorder.mark();
        recorder.record(RunEvent::TrialStarted { trial: "a".into() });
        recorder.record(RunEvent::NoRestore { trial: "a".into() });
        let seen: Vec<RunEvent> = recorder.since(from).into_iter().map(|e| e.kind).collect();
        assert_eq!(
            seen,
            vec![
                RunEvent::TrialStarted { trial: "a".into() },
                RunEvent::NoRestore { trial: "a".into() },
            ]
        );
        assert!(recorder.since(recorder.mark()).is_empty());
    }

    #[test]
    fn each_event_is_stamped_when_recorded() {
        let recorder = Recorder::new(false);
        let before = crate::utc::UtcTime::now();
        let event = recorder.record(RunEvent::MachineShared { others: 2 });
        assert!(event.at >= before && event.at <= crate::utc::UtcTime::now());
    }

    #[test]
    fn the_global_recorder_keeps_what_is_emitted() {
        let from = mark();
        emit(RunEvent::Restore {
            trial: "the_global_recorder_keeps_what_is_emitted".into(),
        });
        assert!(since(from).iter().any(|e| e.kind
            == RunEvent::Restore {
                trial: "the_global_recorder_keeps_what_is_emitted".into()
            }));
    }
}
