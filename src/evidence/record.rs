//! What happened, as data: one record per case and one for the run. Every
//! writer (JUnit, results.json, report, summary) renders these.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::utc::UtcTime;

/// Serializes a [`Duration`] as milliseconds (a float), for fields named `*_ms`.
pub mod duration_ms {
    use std::time::Duration;

    use serde::Serializer;

    /// Milliseconds with microsecond resolution.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64((d.as_micros() as f64) / 1000.0)
    }
}

/// The measurement of a case that left the stack broken: each worker the
/// next case found latched off or dropped out of discovery before it
/// began, and replaced.
pub const LEFT_BROKEN: &str = "left_stack_broken";

/// The measurement of a case whose stack was found broken before it began
/// and healed first (the same lines; the case that ran before has them as
/// [`LEFT_BROKEN`]).
pub const HEALED_BEFORE: &str = "healed_before";

/// Why a case did not run: what `--require-all` tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IgnoredBecause {
    /// `--cases` did not select it.
    NotSelected,
    /// It does not apply to the lane by definition (TC-05 on two-node,
    /// TC-03 on SGLang): never a failure.
    #[default]
    NotApplicable,
    /// This machine cannot run it (not root for two-node, no GPU, a tool
    /// or an env missing): a failure under `--require-all`.
    MachineCannot,
}

impl IgnoredBecause {
    /// A few words for the summary and the report.
    pub fn words(self) -> &'static str {
        match self {
            IgnoredBecause::NotSelected => "not selected",
            IgnoredBecause::NotApplicable => "does not apply to this lane",
            IgnoredBecause::MachineCannot => "this machine cannot run it (--require-all fails it)",
        }
    }
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// It passed.
    Passed,
    /// It failed; the message names the evidence to open.
    Failed {
        /// The failure message.
        message: String,
    },
    /// It showed the known findings declared for it (docs/kvcr-findings.md)
    /// and nothing else failed: green, but not a pass.
    ExpectedFailure {
        /// The findings that showed, by number.
        findings: Vec<u32>,
        /// Each finding and what showed it.
        message: String,
    },
    /// It did not run: not selected, not applicable, or this machine
    /// cannot run it.
    Ignored {
        /// Why.
        reason: String,
        /// Which of the three.
        because: IgnoredBecause,
    },
}

impl Outcome {
    /// `passed`, `FAILED`, `expected failure` or `ignored`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed { .. } => "FAILED",
            Outcome::ExpectedFailure { .. } => "expected failure",
            Outcome::Ignored { .. } => "ignored",
        }
    }

    /// The label, with the findings of an expected failure:
    /// `expected failure (finding 17)`.
    pub fn words(&self) -> String {
        match self {
            Outcome::ExpectedFailure { findings, .. } => format!(
                "expected failure ({})",
                super::expected::numbers_words(findings)
            ),
            other => other.label().to_string(),
        }
    }
}

/// One case (or arm) of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseRecord {
    /// Case id (`TC-04`, `TC-05/cold`).
    pub id: String,
    /// Trial name as libtest shows it.
    pub name: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// When it started.
    pub started_at: UtcTime,
    /// How long it took (monotonic clock).
    #[serde(rename = "duration_ms", with = "duration_ms")]
    pub duration: Duration,
    /// Files it wrote (relative to the run directory where possible).
    pub evidence: Vec<PathBuf>,
    /// Named measurements (`t1_ms`, `source_write_blocks`, ...).
    pub measurements: BTreeMap<String, serde_json::Value>,
    /// Earlier attempts that failed while the machine's clock stepped or
    /// stalled, each run again on a restored stack (empty: one attempt).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried: Vec<RetriedAttempt>,
}

/// An attempt of a trial that failed while the machine's clock stepped or
/// the machine stalled, and was run again.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetriedAttempt {
    /// Its failure message.
    pub message: String,
    /// The machine's clock events during it, as sentences.
    pub clock_events: Vec<String>,
    /// Its evidence (relative to the run directory where possible).
    pub evidence: Vec<PathBuf>,
}

impl RetriedAttempt {
    /// One line: why the attempt was run again.
    pub fn why(&self) -> String {
        let headline = self.message.lines().next().unwrap_or_default();
        format!(
            "attempt failed while {}: {headline}",
            self.clock_events.join("; ")
        )
    }
}

impl CaseRecord {
    /// A record started now, passed until told otherwise.
    pub fn start(id: impl Into<String>, name: impl Into<String>) -> Self {
        CaseRecord {
            id: id.into(),
            name: name.into(),
            outcome: Outcome::Passed,
            started_at: UtcTime::now(),
            duration: Duration::ZERO,
            evidence: Vec::new(),
            measurements: BTreeMap::new(),
            retried: Vec::new(),
        }
    }

    /// A case that does not apply (never started).
    pub fn ignored(
        id: impl Into<String>,
        name: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        let mut r = CaseRecord::start(id, name);
        r.outcome = Outcome::Ignored {
            reason: reason.into(),
            because: IgnoredBecause::NotApplicable,
        };
        r
    }

    /// Adds an evidence file.
    pub fn with_evidence(mut self, path: impl Into<PathBuf>) -> Self {
        self.evidence.push(path.into());
        self
    }

    /// The texts of the list measurement `key` (none when absent).
    pub fn texts(&self, key: &str) -> Vec<&str> {
        self.measurements
            .get(key)
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect()
    }

    /// What the stack showed around the case beyond its verdict: lines for
    /// the summary and the report (what it left broken, what was healed
    /// before it).
    pub fn stack_notes(&self) -> Vec<String> {
        let left = self
            .texts(LEFT_BROKEN)
            .into_iter()
            .map(|l| format!("left the stack broken: {l}"));
        let healed = self
            .texts(HEALED_BEFORE)
            .into_iter()
            .map(|l| format!("stack healed before the case: {l}"));
        left.chain(healed).collect()
    }

    /// The event of this record's end: its trial, outcome, duration and
    /// the first line of its failure or reason.
    pub fn finished_event(&self) -> crate::events::RunEvent {
        use crate::events::TrialOutcome;
        let first = |text: &str| Some(text.lines().next().unwrap_or_default().to_string());
        let (outcome, detail) = match &self.outcome {
            Outcome::Passed => (TrialOutcome::Passed, None),
            Outcome::Failed { message } => (TrialOutcome::Failed, first(message)),
            Outcome::ExpectedFailure { .. } => {
                (TrialOutcome::ExpectedFailure, Some(self.outcome.words()))
            }
            Outcome::Ignored { reason, .. } => (TrialOutcome::Ignored, first(reason)),
        };
        crate::events::RunEvent::TrialFinished {
            trial: self.name.clone(),
            outcome,
            duration_ms: self.duration.as_millis() as u64,
            detail,
        }
    }

    /// Records a measurement.
    pub fn measure(&mut self, name: impl Into<String>, value: impl Serialize) {
        let v = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.measurements.insert(name.into(), v);
    }
}

/// How long one stack component took to become ready.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartupTiming {
    /// Component name (`guard`, `worker-A`, `router`).
    pub component: String,
    /// From launch to ready.
    #[serde(rename = "ready_ms", with = "duration_ms")]
    pub ready: Duration,
}

/// The stack's provisioning.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct StackSummary {
    /// How many times a stack was provisioned in this run (1 normally; 0 when attached).
    pub provisioned: u32,
    /// Whether the harness attached to a running stack.
    pub attached: bool,
    /// Per-component startup.
    pub startup: Vec<StartupTiming>,
    /// From the first launch to a real completion through the router.
    #[serde(rename = "total_startup_ms", with = "duration_ms")]
    pub total_startup: Duration,
}

/// The reference phase.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ReferenceSummary {
    /// Digest of (engine, model, prompt set, generation settings).
    pub digest: String,
    /// Whether the cached references were used.
    pub from_cache: bool,
    /// Where the references (and the baselines and probes) were computed:
    /// host name and run directory; empty for caches that predate it.
    #[serde(default)]
    pub computed_by: String,
    /// When they were computed, Unix seconds (0: unknown).
    #[serde(default)]
    pub computed_unix_s: u64,
    /// Their age when this run started using them, seconds (`None`: unknown).
    #[serde(default)]
    pub age_s: Option<u64>,
    /// Prompts with reference tokens.
    pub prompts: usize,
    /// Bare-engine probes: name → passed.
    pub probes: BTreeMap<String, bool>,
    /// How long it took.
    #[serde(rename = "duration_ms", with = "duration_ms")]
    pub duration: Duration,
    /// Prompt families in flight in the reference phase and TC-01 (1 =
    /// sequential) and why: the batch probe's finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batching: Option<String>,
}

/// The machine's other live kvcr-e2e runs and its load, when the run
/// started its stack (or attached) and when its cases were done.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Neighbourhood {
    /// The registry of live runs that was read.
    pub registry: PathBuf,
    /// Whether the run waited for the others first (`--exclusive`).
    pub exclusive: bool,
    /// How long it waited, seconds.
    pub waited_s: f64,
    pub at_start: crate::proc::live_runs::Surroundings,
    /// `None` until the run's cases are done.
    pub at_end: Option<crate::proc::live_runs::Surroundings>,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    /// The run id (the run directory's name).
    pub run_id: String,
    /// The run directory.
    pub run_dir: PathBuf,
    /// When the run started.
    pub started_at: UtcTime,
    /// Engine/topology/geometry, for titles.
    pub label: String,
    /// SHA-256 of the resolved (redacted) config.json.
    pub settings_digest: String,
    /// Stack provisioning, if a stack was needed.
    pub stack: Option<StackSummary>,
    /// Reference phase, if it ran.
    pub reference: Option<ReferenceSummary>,
    /// Every trial, in order.
    pub cases: Vec<CaseRecord>,
    /// The other live runs beside it and the load (`None`: no stack was
    /// needed, or no registry could be read).
    #[serde(default)]
    pub neighbours: Option<Neighbourhood>,
    /// Facts about what ran, as `key = value` (the Python env, the patches
    /// applied to third-party packages); JUnit carries them as properties.
    #[serde(default)]
    pub environment: std::collections::BTreeMap<String, String>,
    /// The KVCR build under test and what each KVCR process imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvcr: Option<super::KvcrProvenance>,
    /// Every wall-clock step and stall of the machine seen during the run
    /// (`proc::clock_watch`).
    #[serde(default)]
    pub clock_events: Vec<crate::proc::clock_watch::ClockEvent>,
    /// What the run did, in order ([`crate::events`]): setup steps, the
    /// stack ready, each trial's start and end, retries, restores,
    /// neighbours, warnings.
    #[serde(default)]
    pub events: Vec<crate::events::Event>,
}

impl RunRecord {
    /// Counts of (passed, failed, ignored); expected failures are in
    /// none of them ([`RunRecord::expected_failures`]).
    pub fn counts(&self) -> (usize, usize, usize) {
        self.cases
            .iter()
            .fold((0, 0, 0), |(p, f, i), c| match c.outcome {
                Outcome::Passed => (p + 1, f, i),
                Outcome::Failed { .. } => (p, f + 1, i),
                Outcome::ExpectedFailure { .. } => (p, f, i),
                Outcome::Ignored { .. } => (p, f, i + 1),
            })
    }

    /// How many cases ended as an expected failure.
    pub fn expected_failures(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::ExpectedFailure { .. }))
            .count()
    }
}

/// SHA-256 (hex) of a value's JSON form.
pub fn settings_digest(value: &impl Serialize) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}
