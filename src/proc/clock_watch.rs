//! The machine's clocks, watched for the two events that break a stack
//! without any component being at fault: the wall clock stepping (a time
//! sync after a VM pause, `date -s`) and the machine not running the
//! harness at all for seconds (a stalled or paused VM).
//!
//! Both matter because Dynamo's file discovery (1.6.1, `FileStore`) keys
//! liveness on wall-clock file ages: every process deletes any entry not
//! refreshed for 10 s of wall time, and an owner never writes a deleted
//! entry again. A forward step past that, or a stall that lets one process
//! run before the others, leaves live workers that the router no longer
//! lists (docs/results.md, F16). A run records every such event with
//! its time, and a case that failed while one happened says so.
//!
//! One watcher thread per process samples both clocks every
//! [`SAMPLE_EVERY`]; [`start`] is idempotent.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use once_cell::sync::Lazy;
use serde::Serialize;

/// How often the watcher samples both clocks.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// A wall-clock change this much larger or smaller than the monotonic one
/// between two samples is a step.
pub const STEP_AT_LEAST: Duration = Duration::from_secs(1);
/// A gap between two samples this long is a stall: the harness did not run
/// (a loaded 2-core machine delays a thread by well under a second).
pub const STALL_AT_LEAST: Duration = Duration::from_secs(5);

/// What happened to the machine's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClockEventKind {
    /// The wall clock moved by `seconds` more than the monotonic clock
    /// (negative: backwards).
    WallClockStep { seconds: f64 },
    /// No sample was taken for `seconds` of monotonic time.
    Stall { seconds: f64 },
}

/// One event, with when it was seen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockEvent {
    #[serde(flatten)]
    pub kind: ClockEventKind,
    /// The wall time (RFC 3339, UTC) of the sample that saw it (after a
    /// step: the new time).
    pub seen_at: String,
    #[serde(skip)]
    pub seen: Instant,
}

impl ClockEvent {
    /// What happened and by how many seconds, in the events' words.
    fn kind_and_seconds(&self) -> (crate::events::ClockKind, f64) {
        use crate::events::ClockKind;
        match self.kind {
            ClockEventKind::WallClockStep { seconds } => (ClockKind::WallClockStep, seconds),
            ClockEventKind::Stall { seconds } => (ClockKind::Stall, seconds),
        }
    }

    /// The run's event for it.
    pub fn as_run_event(&self) -> crate::events::RunEvent {
        let (kind, seconds) = self.kind_and_seconds();
        crate::events::RunEvent::MachineClock {
            kind,
            seconds,
            seen_at: self.seen_at.clone(),
        }
    }
}

impl std::fmt::Display for ClockEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The console's sentence for it.
        let (kind, seconds) = self.kind_and_seconds();
        f.write_str(&crate::events::console::clock_sentence(
            kind,
            seconds,
            &self.seen_at,
        ))
    }
}

/// One sample of both clocks.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub mono: Instant,
    pub wall: SystemTime,
}

impl Sample {
    pub fn now() -> Self {
        Sample {
            mono: Instant::now(),
            wall: SystemTime::now(),
        }
    }
}

/// Signed seconds from `earlier` to `later` on the wall clock.
fn wall_seconds(earlier: SystemTime, later: SystemTime) -> f64 {
    match later.duration_since(earlier) {
        Ok(forward) => forward.as_secs_f64(),
        Err(backward) => -backward.duration().as_secs_f64(),
    }
}

/// The events between two consecutive samples: a step, a stall, both or
/// neither (a paused VM whose clocks both ran on is a stall, not a step).
pub fn classify(before: Sample, after: Sample) -> Vec<ClockEventKind> {
    let mono = after.mono.saturating_duration_since(before.mono);
    let wall = wall_seconds(before.wall, after.wall);
    let mut events = Vec::new();
    if mono >= STALL_AT_LEAST {
        events.push(ClockEventKind::Stall {
            seconds: mono.as_secs_f64(),
        });
    }
    let step = wall - mono.as_secs_f64();
    if step.abs() >= STEP_AT_LEAST.as_secs_f64() {
        events.push(ClockEventKind::WallClockStep { seconds: step });
    }
    events
}

static EVENTS: Lazy<Mutex<Vec<ClockEvent>>> = Lazy::new(|| Mutex::new(Vec::new()));
static STARTED: std::sync::Once = std::sync::Once::new();

/// Starts the watcher thread (once per process).
pub fn start() {
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("clock-watch".into())
            .spawn(watch);
        if let Err(e) = spawned {
            tracing::warn!("the clock watcher did not start: {e}");
        }
    });
}

fn watch() {
    // SIGINT and SIGTERM belong to the suite's signal thread, which tears
    // the stack down; this thread may start before that one blocks them
    // process-wide, and a signal delivered here would kill the process
    // with no teardown.
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGINT);
    set.add(nix::sys::signal::Signal::SIGTERM);
    if let Err(e) = set.thread_block() {
        tracing::warn!("the clock watcher cannot block SIGINT/SIGTERM: {e}");
    }
    let mut before = Sample::now();
    loop {
        std::thread::sleep(SAMPLE_EVERY);
        let after = Sample::now();
        for kind in classify(before, after) {
            let event = ClockEvent {
                kind,
                seen_at: rfc3339(after.wall),
                seen: after.mono,
            };
            crate::events::emit(event.as_run_event());
            if let Ok(mut events) = EVENTS.lock() {
                events.push(event);
            }
        }
        before = after;
    }
}

/// `wall` as RFC 3339 text, UTC.
fn rfc3339(wall: SystemTime) -> String {
    time::OffsetDateTime::from(wall)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Every event seen so far in this process.
pub fn events() -> Vec<ClockEvent> {
    EVENTS.lock().map(|e| e.clone()).unwrap_or_default()
}

/// The events seen since `from` (a stall seen after it may have begun
/// before it: it is included, as it overlaps).
pub fn events_since(from: Instant) -> Vec<ClockEvent> {
    events().into_iter().filter(|e| e.seen >= from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(mono: Instant, wall: SystemTime) -> Sample {
        Sample { mono, wall }
    }

    #[test]
    fn steady_clocks_give_no_event() {
        let (m, w) = (Instant::now(), SystemTime::now());
        let after = sample(
            m + SAMPLE_EVERY,
            w + SAMPLE_EVERY + Duration::from_millis(300),
        );
        assert!(classify(sample(m, w), after).is_empty());
    }

    #[test]
    fn a_forward_and_a_backward_wall_step_are_seen_with_their_sign() {
        let (m, w) = (Instant::now(), SystemTime::now());
        let forward = classify(
            sample(m, w),
            sample(m + SAMPLE_EVERY, w + Duration::from_secs(40) + SAMPLE_EVERY),
        );
        assert!(
            matches!(forward[..], [ClockEventKind::WallClockStep { seconds }] if (seconds - 40.0).abs() < 1e-6),
            "{forward:?}"
        );
        let backward = classify(
            sample(m, w),
            sample(m + SAMPLE_EVERY, w - Duration::from_secs(15) + SAMPLE_EVERY),
        );
        assert!(
            matches!(backward[..], [ClockEventKind::WallClockStep { seconds }] if (seconds + 15.0).abs() < 1e-6),
            "{backward:?}"
        );
    }

    #[test]
    fn a_pause_that_both_clocks_saw_is_a_stall_only() {
        let (m, w) = (Instant::now(), SystemTime::now());
        let gap = Duration::from_secs(60);
        let events = classify(sample(m, w), sample(m + gap, w + gap));
        assert!(
            matches!(events[..], [ClockEventKind::Stall { seconds }] if (seconds - 60.0).abs() < 1e-6),
            "{events:?}"
        );
    }

    #[test]
    fn an_event_reads_as_what_happened_to_the_machine() {
        let event = ClockEvent {
            kind: ClockEventKind::WallClockStep { seconds: 40.0 },
            seen_at: "2026-12-03T05:53:30Z".into(),
            seen: Instant::now(),
        };
        assert_eq!(
            event.to_string(),
            "the machine's wall clock stepped +40.0 s (seen at 2026-12-03T05:53:30Z)"
        );
    }
}
