//! The run's events split by trial: what JUnit puts in each testcase's
//! output and the rest in the suite's.

use std::collections::BTreeMap;

use super::{Event, RunEvent};

/// A run's events: the run's own, and each trial's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grouped {
    /// Events outside every trial (setup, the stack, neighbours, the end).
    pub run: Vec<Event>,
    /// Each trial's events by trial name: from its start to its end, and
    /// any other event that names it.
    pub trials: BTreeMap<String, Vec<Event>>,
}

/// `events` split by trial: an event that names a trial is that trial's;
/// one emitted while a trial runs (a worker replaced, a clock step) is the
/// running trial's; the rest are the run's.
pub fn by_trial(events: &[Event]) -> Grouped {
    let mut grouped = Grouped::default();
    let mut running: Option<String> = None;
    for event in events {
        if let RunEvent::TrialStarted { trial } = &event.kind {
            running = Some(trial.clone());
        }
        let owner = event
            .kind
            .trial()
            .map(str::to_string)
            .or_else(|| running.clone());
        if let RunEvent::TrialFinished { trial, .. } = &event.kind {
            if running.as_deref() == Some(trial) {
                running = None;
            }
        }
        match owner {
            Some(trial) => grouped.trials.entry(trial).or_default().push(event.clone()),
            None => grouped.run.push(event.clone()),
        }
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::TrialOutcome;

    fn event(kind: RunEvent) -> Event {
        Event::now(kind)
    }

    #[test]
    fn events_inside_a_trial_are_its_own_and_the_rest_the_runs() {
        let events = vec![
            event(RunEvent::StackReady {
                total_ms: 1,
                components: Vec::new(),
                restarts: Vec::new(),
            }),
            event(RunEvent::TrialStarted { trial: "a".into() }),
            event(RunEvent::WorkerReplaced {
                worker: "B".into(),
                reason: "worker B latched".into(),
            }),
            event(RunEvent::TrialFinished {
                trial: "a".into(),
                outcome: TrialOutcome::Passed,
                duration_ms: 5,
                detail: None,
            }),
            // Between trials, but naming the next one.
            event(RunEvent::NotWholeBefore {
                trial: "b".into(),
                found: "worker A dropped out".into(),
            }),
            event(RunEvent::MachineShared { others: 1 }),
        ];
        let grouped = by_trial(&events);
        assert_eq!(grouped.run.len(), 2, "{:?}", grouped.run);
        assert_eq!(grouped.trials["a"].len(), 3);
        assert!(matches!(
            grouped.trials["a"][1].kind,
            RunEvent::WorkerReplaced { .. }
        ));
        assert_eq!(grouped.trials["b"].len(), 1);
    }
}
