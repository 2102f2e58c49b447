//! Every kind of run event and its fields.

use std::path::PathBuf;

use serde::Serialize;

/// What happened. Serialized with its kind as `"event"` (snake case) beside
/// its fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    // The run and its setup.
    /// Something the user should know that changes no verdict (a setting
    /// that is ignored, no registry of live runs here).
    Warning { message: String },
    /// The run directory, once it exists.
    EvidenceDir { path: PathBuf },
    /// A step of building what the stack needs (a Python env, the KVCR build
    /// under test, the base image, the Kubernetes validator).
    SetupStep { part: SetupPart, message: String },
    /// No NVML here: GPU telemetry is off, nothing else changes.
    GpuTelemetryOff { message: String },
    /// Provisioning begins.
    StackStarting { engine: String, logs: PathBuf },
    /// A running stack was attached (no provisioning, no teardown).
    StackAttached {
        manifest: PathBuf,
        /// Reached through its URLs: it runs in another PID namespace.
        through_urls: bool,
    },
    /// A worker that never became ready was started once more.
    WorkerRestarted { worker: String, reason: String },
    /// Every KVCR process of the stack imports the build under test.
    KvcrChecked { build: String, processes: usize },
    /// The stack serves: its startup, per component.
    StackReady {
        total_ms: u64,
        /// Each component from spawn to serving.
        components: Vec<ComponentReady>,
        /// Workers started a second time, and why.
        restarts: Vec<String>,
    },
    /// The stack outlives the run (`keep_stack`).
    StackKept { manifest: PathBuf },

    // The reference phase.
    /// The reference tokens came from the cache.
    ReferenceFromCache { path: PathBuf },
    /// The reference phase records this many prompts.
    ReferencePhase { prompts: usize },
    /// The engine takes no extended prompt: those references are missing.
    ReferenceWithoutExtended {
        tokens: usize,
        example: String,
        max_prompt: usize,
    },
    /// How many prompt families the reference phase sends at once, and why.
    ReferenceBatching { concurrency: u32, reason: String },
    /// The workload trace replayed on the KVCR-off reference worker.
    ReferenceWorkload {
        trace: PathBuf,
        requests: usize,
        rate: f64,
    },
    /// The determinism probes start on the bare engine.
    DeterminismProbes { engine: String },

    // The machine and its other runs.
    /// `--exclusive` waits for these live runs to end.
    ExclusiveWaiting { timeout_s: u64, runs: Vec<String> },
    /// `--exclusive` waited this long.
    ExclusiveWaited { seconds: f64 },
    /// Another live run beside this one.
    NeighbourSeen {
        when: Moment,
        relation: String,
        pid: u32,
        target: String,
        /// The run in words (`pid 4242 phase1 (own stack) since …`).
        run: String,
    },
    /// The machine's load when the run started.
    MachineLoad { load: String },
    /// A neighbour runs `--exclusive`: this run disturbs it.
    DisturbsExclusive { pid: u32, target: String },
    /// Other live runs share the machine.
    MachineShared { others: usize },
    /// The machine's wall clock stepped or the machine stalled.
    MachineClock {
        kind: ClockKind,
        seconds: f64,
        /// RFC 3339, UTC, of the sample that saw it.
        seen_at: String,
    },
    /// SIGINT or SIGTERM: the stack is torn down, the run ends.
    SignalReceived { signal: String },

    // The trials.
    /// A trial starts (after its does-not-apply check).
    TrialStarted { trial: String },
    /// A trial ended.
    TrialFinished {
        trial: String,
        outcome: TrialOutcome,
        duration_ms: u64,
        /// The failure's or the reason's first line.
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The shared setup (stack, reference phase) failed: the trial that
    /// shows the whole error.
    SetupFailed { trial: String, error: String },
    /// An attempt failed while the machine's clock misbehaved: it runs again.
    Retry {
        trial: String,
        /// The attempt that runs next (2 for the first retry).
        attempt: usize,
        why: String,
    },
    /// The stack was found not whole before a trial (and is restored).
    NotWholeBefore { trial: String, found: String },
    /// A trial left the stack broken: it is restored for the next one.
    Restore { trial: String },
    /// A trial left the stack broken, but no later trial uses it.
    NoRestore { trial: String },
    /// A live worker dropped out of discovery or latched: it is replaced.
    WorkerReplaced { worker: String, reason: String },
    /// A timed-out trial still has not stopped.
    StillStopping {
        trial: String,
        doing: String,
        waited_s: u64,
        now: String,
    },

    // The evidence.
    /// An evidence file could not be written.
    EvidenceNotWritten { what: Unwritten, error: String },
    /// The run's evidence and JUnit, at its end.
    EvidenceWritten { path: PathBuf, junit: PathBuf },

    // Programs that drive runs or benchmarks.
    /// A lane run as a child (`kvcr-e2e workload --trace`).
    ChildRun { what: String, command: String },
    /// The child's run recorded no trace replay.
    NoReplayRecorded { log: PathBuf },
    /// The client benchmark runs one peer on one phase.
    PeerRun { peer: String, phase: String },
    /// A trace replayed side by side by one client.
    SideBySideReplay {
        client: String,
        requests: usize,
        rate: f64,
    },
}

impl RunEvent {
    /// Its kind as results.json names it (`stack_ready`, `trial_finished`).
    pub fn name(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("event")?.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// The trial this event is about, when it names one.
    pub fn trial(&self) -> Option<&str> {
        match self {
            RunEvent::TrialStarted { trial }
            | RunEvent::TrialFinished { trial, .. }
            | RunEvent::SetupFailed { trial, .. }
            | RunEvent::Retry { trial, .. }
            | RunEvent::NotWholeBefore { trial, .. }
            | RunEvent::Restore { trial }
            | RunEvent::NoRestore { trial }
            | RunEvent::StillStopping { trial, .. } => Some(trial),
            _ => None,
        }
    }
}

/// What a [`RunEvent::SetupStep`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SetupPart {
    /// A pinned Python env.
    PythonEnv,
    /// The KVCR build under test, layered over an env.
    KvcrBuild,
    /// The container runner's base image.
    BaseImage,
    /// The Kubernetes validator's env.
    Validator,
}

/// How a trial ended ([`RunEvent::TrialFinished`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialOutcome {
    Passed,
    Failed,
    ExpectedFailure,
    Ignored,
}

impl TrialOutcome {
    /// `passed`, `FAILED`, `expected failure`, `ignored` (as the summary).
    pub fn label(self) -> &'static str {
        match self {
            TrialOutcome::Passed => "passed",
            TrialOutcome::Failed => "FAILED",
            TrialOutcome::ExpectedFailure => "expected failure",
            TrialOutcome::Ignored => "ignored",
        }
    }
}

/// When a neighbour was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    /// When the run registered (before its stack).
    Start,
    /// When its trials were done.
    End,
}

/// What the machine's clocks did ([`RunEvent::MachineClock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    /// The wall clock moved by `seconds` more than the monotonic clock.
    WallClockStep,
    /// The harness did not run for `seconds`.
    Stall,
}

/// Which evidence a [`RunEvent::EvidenceNotWritten`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unwritten {
    /// `stack.json`, the manifest other runs attach with.
    StackManifest,
    /// results.json and JUnit after a trial.
    ResultsAfterTrial,
    /// The evidence at the run's end.
    Evidence,
}

/// One component's startup ([`RunEvent::StackReady`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentReady {
    pub component: String,
    pub ready_ms: u64,
}
