//! [`Snapshot`]: one worker's values by meaning at one instant; [`Delta`]:
//! after − before per meaning, the only thing cases gate on. Also the
//! Prometheus [`scrape`] of a worker's `/metrics`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::fields::excerpt;
use super::names::{
    families_named, meaning_of_sample, Counter, Gauge, Meaning, OpResult, Scope, WhenAbsent,
};
use super::problem::ParseProblem;
use super::prometheus::{self, Exposition};

/// Where a snapshot's values came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SnapshotSource {
    /// A scrape of a `/metrics` URL.
    Prometheus {
        /// The URL scraped.
        url: String,
    },
    /// Exposition text handed over directly (tests, saved scrapes).
    Text {
        /// A label saying where the text came from.
        label: String,
    },
    /// Interval log lines accumulated from a log file.
    IntervalLog {
        /// The log file.
        path: String,
        /// First byte accumulated.
        from_offset: u64,
        /// Byte read up to.
        to_offset: u64,
        /// Interval lines seen.
        lines: usize,
    },
    /// Nothing yet (an empty starting point).
    Empty,
}

impl fmt::Display for SnapshotSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotSource::Prometheus { url } => write!(f, "scrape of {url}"),
            SnapshotSource::Text { label } => write!(f, "text {label}"),
            SnapshotSource::IntervalLog {
                path,
                from_offset,
                to_offset,
                lines,
            } => write!(
                f,
                "{lines} interval lines of {path} bytes {from_offset}..{to_offset}"
            ),
            SnapshotSource::Empty => f.write_str("empty"),
        }
    }
}

/// Values by meaning for one worker at one instant.
///
/// Samples that differ only in extra labels (`engine`, `model_name`, DP
/// ranks) are summed into one meaning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The worker's name, when known.
    pub worker: Option<String>,
    /// Where the values came from.
    pub source: SnapshotSource,
    /// Wall-clock time taken, for people reading evidence (Unix ms).
    pub taken_unix_ms: u64,
    /// Monotonic time taken (not serialized).
    #[serde(skip)]
    pub taken_at: Option<Instant>,
    /// Counters.
    pub counters: BTreeMap<Counter, f64>,
    /// Gauges.
    pub gauges: BTreeMap<Gauge, f64>,
    /// Samples or keys with no meaning to the harness (counted, not kept).
    pub unmapped_samples: usize,
    /// Lines the parser could not read.
    pub problems: Vec<ParseProblem>,
    /// Known metric families the source reported (a sample, or a `# TYPE`
    /// line): tells a lazily created series (absent, family reported: 0)
    /// from one the source does not export at all.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub reported_families: BTreeSet<String>,
}

/// The `result` label of an operation counter that the harness has no name for.
fn unmapped_result(meaning: &Meaning) -> Option<&str> {
    match meaning {
        Meaning::Counter(Counter::OpCount(_, OpResult::Other(r)))
        | Meaning::Counter(Counter::OpSeconds(_, OpResult::Other(r))) => Some(r),
        _ => None,
    }
}

fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Snapshot {
    /// An empty snapshot taken now.
    pub fn new(worker: Option<String>, source: SnapshotSource) -> Self {
        Snapshot {
            worker,
            source,
            taken_unix_ms: unix_ms_now(),
            taken_at: Some(Instant::now()),
            counters: BTreeMap::new(),
            gauges: BTreeMap::new(),
            unmapped_samples: 0,
            problems: Vec::new(),
            reported_families: BTreeSet::new(),
        }
    }

    /// Notes that the source reports the families `name` belongs to.
    pub fn note_reported(&mut self, name: &str) {
        self.reported_families
            .extend(families_named(name).map(str::to_string));
    }

    /// Maps parsed Prometheus samples to meanings. A sample of a known
    /// family that cannot be trusted is recorded as a problem, naming its
    /// series and line: a non-finite value (a KVCR count is never `NaN` or
    /// infinite; the value is dropped), or a `result` label the harness does
    /// not map (a result KVCR added or renamed; the value is kept, so a
    /// verdict summing every result other than `success` still sees it).
    pub fn from_exposition(
        exp: &Exposition,
        worker: Option<String>,
        source: SnapshotSource,
    ) -> Self {
        let mut s = Snapshot::new(worker, source);
        s.problems = exp.problems.clone();
        for name in exp.types.keys() {
            s.note_reported(name);
        }
        for sample in &exp.samples {
            s.note_reported(&sample.name);
            let known_family = families_named(&sample.name).next().is_some();
            let meaning = meaning_of_sample(&sample.name, &sample.labels);
            let at = format!("line {}", sample.line);
            if !sample.value.is_finite() {
                if known_family || meaning.is_some() {
                    s.problems.push(ParseProblem::new(
                        at,
                        format!(
                            "series {} has the non-finite value {}: a KVCR or engine count is never NaN or infinite",
                            sample.name, sample.value
                        ),
                        &sample.text,
                    ));
                } else {
                    s.unmapped_samples += 1;
                }
                continue;
            }
            let Some(meaning) = meaning else {
                s.unmapped_samples += 1;
                continue;
            };
            if let Some(result) = unmapped_result(&meaning) {
                s.problems.push(ParseProblem::new(
                    at,
                    format!(
                        "series {} ({meaning}) has the result label {result:?}, which the harness does not map: KVCR added or renamed a result; name it in telemetry/names.rs (OpResult) and in the verdicts that read it",
                        sample.name
                    ),
                    &sample.text,
                ));
            }
            match meaning {
                Meaning::Counter(c) => *s.counters.entry(c).or_insert(0.0) += sample.value,
                Meaning::Gauge(g) => *s.gauges.entry(g).or_insert(0.0) += sample.value,
            }
        }
        s
    }

    /// Parses exposition text and maps it (see [`Snapshot::from_exposition`]).
    pub fn from_prometheus_text(
        text: &str,
        worker: Option<String>,
        source: SnapshotSource,
    ) -> Self {
        Snapshot::from_exposition(&prometheus::parse(text), worker, source)
    }

    /// Names the worker.
    pub fn with_worker(mut self, worker: impl Into<String>) -> Self {
        self.worker = Some(worker.into());
        self
    }

    /// A counter's value, `None` when the source did not report it.
    pub fn counter(&self, c: &Counter) -> Option<f64> {
        self.counters.get(c).copied()
    }

    /// A gauge's value, `None` when the source did not report it.
    pub fn gauge(&self, g: &Gauge) -> Option<f64> {
        self.gauges.get(g).copied()
    }

    /// after − before; see [`Delta::between`].
    pub fn since(&self, before: &Snapshot) -> Result<Delta, DeltaError> {
        Delta::between(before, self)
    }
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.6}")
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "snapshot of {} from {} ({} counters, {} gauges, {} unmapped, {} problems)",
            self.worker.as_deref().unwrap_or("<unnamed worker>"),
            self.source,
            self.counters.len(),
            self.gauges.len(),
            self.unmapped_samples,
            self.problems.len()
        )?;
        for (c, v) in &self.counters {
            writeln!(f, "  {c} = {}", fmt_value(*v))?;
        }
        for (g, v) in &self.gauges {
            writeln!(f, "  {g} = {} (gauge)", fmt_value(*v))?;
        }
        for p in &self.problems {
            writeln!(f, "  problem: {p}")?;
        }
        Ok(())
    }
}

/// A gauge's level before and after a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GaugeChange {
    /// Level before (`None`: not reported).
    pub before: Option<f64>,
    /// Level after (`None`: not reported).
    pub after: Option<f64>,
}

/// One counter that went down (or vanished) between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterReset {
    /// The counter.
    pub counter: Counter,
    /// Value before.
    pub before: f64,
    /// Value after (`None`: no longer reported).
    pub after: Option<f64>,
}

/// Why two snapshots do not subtract into a delta.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeltaError {
    /// Counters went down: the worker restarted (or its counters reset)
    /// inside the window, so the window's counts are unknown.
    #[error("{} counter(s) of worker {} went down between {before} and {after}: {}; the worker restarted or its counters were reset inside the window, so its counts are unknown (check the worker's log for a restart)",
        resets.len(),
        worker.as_deref().unwrap_or("<unnamed>"),
        resets.iter().map(|r| format!("{} {} -> {}", r.counter, fmt_value(r.before), r.after.map(fmt_value).unwrap_or_else(|| "absent".into()))).collect::<Vec<_>>().join(", "))]
    CounterReset {
        /// The worker.
        worker: Option<String>,
        /// Every counter that went down.
        resets: Vec<CounterReset>,
        /// Source of the earlier snapshot, rendered.
        before: String,
        /// Source of the later snapshot, rendered.
        after: String,
    },
    /// The snapshots belong to different workers.
    #[error(
        "cannot subtract snapshots of different workers: before is {before:?}, after is {after:?}"
    )]
    WorkerMismatch {
        /// Worker of the earlier snapshot.
        before: Option<String>,
        /// Worker of the later snapshot.
        after: Option<String>,
    },
}

/// after − before per meaning, for one worker over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// The worker.
    pub worker: Option<String>,
    /// Source of the earlier snapshot.
    pub before: SnapshotSource,
    /// Source of the later snapshot.
    pub after: SnapshotSource,
    /// Monotonic time between the snapshots, when both carry it.
    pub elapsed_ms: Option<f64>,
    /// Counter increases; a counter reported by either snapshot is present
    /// (a series that appears in `after` only started from 0).
    pub counters: BTreeMap<Counter, f64>,
    /// Gauge levels before and after.
    pub gauges: BTreeMap<Gauge, GaugeChange>,
    /// Families the later snapshot reported (see [`Snapshot::reported_families`]).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub reported_families: BTreeSet<String>,
    /// Lines of either snapshot that could not be read or trusted: while
    /// any is here, no counter of the window is read ([`Delta::required`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<ParseProblem>,
}

/// A counter a verdict reads that the source did not report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{series} not reported by {component}: expected the series {expected} in the {origin}; without it the verdict cannot judge (absent is never read as 0; open the component's /metrics or log to see what it exports)")]
pub struct NotReported {
    /// The counter, by meaning (its engine-neutral form).
    pub series: String,
    /// `worker A`, or `<unnamed worker>`.
    pub component: String,
    /// The Prometheus sample it is expected as.
    pub expected: String,
    /// Where the values came from.
    pub origin: String,
}

/// A counter a verdict reads from a window whose scrapes cannot be trusted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{series} of {component} not read: {origin} carry {} line(s) the harness cannot trust: {}; a verdict never reads a scrape with a malformed line, a non-finite value or a result label it does not know", problems.len(), problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
pub struct ScrapeProblems {
    /// The counter asked for, by meaning.
    pub series: String,
    /// `worker A`, or `<unnamed worker>`.
    pub component: String,
    /// Where the values came from (both snapshots).
    pub origin: String,
    /// Every problem of the window's snapshots.
    pub problems: Vec<ParseProblem>,
}

/// Why a verdict cannot read a counter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unreadable {
    /// The source does not report it.
    #[error(transparent)]
    NotReported(#[from] NotReported),
    /// The source's scrapes carry lines that cannot be trusted.
    #[error(transparent)]
    Problems(#[from] ScrapeProblems),
}

/// Operations of one scope in a window: successes, and every other result
/// by its label (`partial`, `failed`, `timeout`, or one KVCR adds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpsByResult {
    /// `result=success` operations.
    pub success: u64,
    /// Every other result that moved, by label (zeros left out).
    pub unsuccessful: std::collections::BTreeMap<String, u64>,
}

impl OpsByResult {
    /// Operations whose result is anything but `success`.
    pub fn unsuccessful_total(&self) -> u64 {
        self.unsuccessful.values().sum()
    }

    /// `partial 1, timeout 2`, or `none`.
    pub fn unsuccessful_text(&self) -> String {
        if self.unsuccessful.is_empty() {
            return "none".into();
        }
        self.unsuccessful
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Delta {
    /// after − before. Fails when a counter went down or vanished (reset),
    /// or when the snapshots name different workers.
    pub fn between(before: &Snapshot, after: &Snapshot) -> Result<Delta, DeltaError> {
        if before.worker.is_some() && after.worker.is_some() && before.worker != after.worker {
            return Err(DeltaError::WorkerMismatch {
                before: before.worker.clone(),
                after: after.worker.clone(),
            });
        }
        let worker = after.worker.clone().or_else(|| before.worker.clone());
        let mut counters = BTreeMap::new();
        let mut resets = Vec::new();
        for (c, &b) in &before.counters {
            match after.counters.get(c) {
                // A zero series that vanished lost nothing, but is no longer
                // reported: it stays absent.
                None if b == 0.0 => {}
                None => resets.push(CounterReset {
                    counter: c.clone(),
                    before: b,
                    after: None,
                }),
                Some(&a) if a < b - 1e-9 * b.abs().max(1.0) => resets.push(CounterReset {
                    counter: c.clone(),
                    before: b,
                    after: Some(a),
                }),
                Some(&a) => {
                    counters.insert(c.clone(), (a - b).max(0.0));
                }
            }
        }
        if !resets.is_empty() {
            return Err(DeltaError::CounterReset {
                worker,
                resets,
                before: before.source.to_string(),
                after: after.source.to_string(),
            });
        }
        for (c, &a) in &after.counters {
            counters.entry(c.clone()).or_insert(a);
        }
        let mut gauges = BTreeMap::new();
        for g in before.gauges.keys().chain(after.gauges.keys()) {
            gauges.insert(
                g.clone(),
                GaugeChange {
                    before: before.gauge(g),
                    after: after.gauge(g),
                },
            );
        }
        let elapsed_ms = match (before.taken_at, after.taken_at) {
            (Some(b), Some(a)) => Some(a.saturating_duration_since(b).as_secs_f64() * 1000.0),
            _ => None,
        };
        Ok(Delta {
            worker,
            before: before.source.clone(),
            after: after.source.clone(),
            elapsed_ms,
            counters,
            gauges,
            reported_families: after.reported_families.clone(),
            problems: before
                .problems
                .iter()
                .chain(&after.problems)
                .cloned()
                .collect(),
        })
    }

    /// The increase of `c`, for a verdict: absent is 0 only where
    /// [`Counter::when_absent`] says so and the family is reported;
    /// otherwise [`Unreadable::NotReported`]. A window whose snapshots
    /// carry problems (a line not read, a non-finite value, an unmapped
    /// result) is [`Unreadable::Problems`] for every counter.
    pub fn required(&self, c: &Counter) -> Result<f64, Unreadable> {
        if !self.problems.is_empty() {
            return Err(Unreadable::Problems(ScrapeProblems {
                series: c.to_string(),
                component: self.component(),
                origin: format!("{} and {}", self.before, self.after),
                problems: self.problems.clone(),
            }));
        }
        if let Some(v) = self.counters.get(c) {
            return Ok(*v);
        }
        let lazy = c.when_absent() == WhenAbsent::ZeroBeforeFirstEvent;
        if lazy && self.reported_families.contains(c.family_name()) {
            return Ok(0.0);
        }
        Err(Unreadable::NotReported(NotReported {
            series: c.to_string(),
            component: self.component(),
            expected: c.prometheus().to_string(),
            origin: self.after.to_string(),
        }))
    }

    fn component(&self) -> String {
        match &self.worker {
            Some(w) => format!("worker {w}"),
            None => "<unnamed worker>".into(),
        }
    }

    /// [`Delta::required`] as a whole count (rounded, never below 0).
    pub fn required_count(&self, c: &Counter) -> Result<u64, Unreadable> {
        self.required(c).map(whole)
    }

    /// Operations of `scope` by result, for a verdict: the `success` series
    /// is required (so a scope the source does not report fails), and every
    /// other result that moved is listed, whatever its label, so "nothing
    /// failed" can mean every result other than `success` is 0.
    pub fn ops_by_result(&self, scope: &Scope) -> Result<OpsByResult, Unreadable> {
        let success = self.required_count(&Counter::OpCount(scope.clone(), OpResult::Success))?;
        let mut unsuccessful = std::collections::BTreeMap::new();
        for (c, v) in &self.counters {
            if let Counter::OpCount(s, r) = c {
                if s == scope && *r != OpResult::Success && whole(*v) > 0 {
                    unsuccessful.insert(r.label().to_string(), whole(*v));
                }
            }
        }
        Ok(OpsByResult {
            success,
            unsuccessful,
        })
    }

    /// The increase of `c`; 0 when neither snapshot reported it. Never feed
    /// a verdict with it: use [`Delta::required`].
    pub fn get(&self, c: &Counter) -> f64 {
        self.observed(c).unwrap_or(0.0)
    }

    /// The increase of `c` as a whole count (rounded; 0 when absent).
    pub fn count(&self, c: &Counter) -> u64 {
        whole(self.get(c))
    }

    /// The increase of `c`, or `None` when neither snapshot reported it.
    pub fn observed(&self, c: &Counter) -> Option<f64> {
        self.counters.get(c).copied()
    }

    /// Sum of the increases of every counter matching `pred`
    /// (e.g. all results of one scope).
    pub fn sum_where(&self, pred: impl Fn(&Counter) -> bool) -> f64 {
        self.counters
            .iter()
            .filter(|(c, _)| pred(c))
            .map(|(_, v)| *v)
            .sum()
    }

    /// Counters that increased, in meaning order.
    pub fn nonzero(&self) -> impl Iterator<Item = (&Counter, f64)> {
        self.counters
            .iter()
            .filter(|(_, v)| **v != 0.0)
            .map(|(c, v)| (c, *v))
    }

    /// A gauge's level at the end of the window.
    pub fn gauge_after(&self, g: &Gauge) -> Option<f64> {
        self.gauges.get(g).and_then(|c| c.after)
    }

    /// The window's length, when both snapshots carried monotonic times.
    pub fn elapsed(&self) -> Option<Duration> {
        self.elapsed_ms
            .map(|ms| Duration::from_secs_f64(ms / 1000.0))
    }
}

impl fmt::Display for Delta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "delta of {} from {} to {}",
            self.worker.as_deref().unwrap_or("<unnamed worker>"),
            self.before,
            self.after
        )?;
        let mut any = false;
        for (c, v) in self.nonzero() {
            any = true;
            writeln!(f, "  {c} +{}", fmt_value(v))?;
        }
        if !any {
            writeln!(f, "  (no counter moved)")?;
        }
        for (g, ch) in &self.gauges {
            if ch.before != ch.after {
                let show = |v: Option<f64>| v.map(fmt_value).unwrap_or_else(|| "absent".into());
                writeln!(f, "  {g} {} -> {} (gauge)", show(ch.before), show(ch.after))?;
            }
        }
        Ok(())
    }
}

fn whole(v: f64) -> u64 {
    let v = v.round();
    if v <= 0.0 {
        0
    } else {
        v as u64
    }
}

/// Default timeout of [`scrape`].
pub const DEFAULT_SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// Failure to scrape a `/metrics` URL.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    /// No response (refused, timed out, bad URL).
    #[error("scraping {url} failed within {timeout:?}: {source}; is the worker alive and serving metrics there? see its log")]
    Request {
        /// The URL.
        url: String,
        /// The timeout in force.
        timeout: Duration,
        /// The transport error.
        #[source]
        source: reqwest::Error,
    },
    /// A response that is not 200.
    #[error("scraping {url}: expected HTTP 200, got {status}; body starts: {body}")]
    Status {
        /// The URL.
        url: String,
        /// The status received.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The body could not be read.
    #[error("scraping {url}: reading the body failed: {source}")]
    Body {
        /// The URL.
        url: String,
        /// The transport error.
        #[source]
        source: reqwest::Error,
    },
}

/// The `/metrics` URL for `url`: a bare origin (as in the CPU engine's
/// ready file, `http://127.0.0.1:9101`) gets `/metrics` appended.
pub fn metrics_url(url: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    let after_scheme = trimmed.split_once("://").map(|(_, r)| r).unwrap_or(trimmed);
    if after_scheme.contains('/') {
        trimmed.to_string()
    } else {
        format!("{trimmed}/metrics")
    }
}

/// Scrapes `url` (see [`metrics_url`]) with [`DEFAULT_SCRAPE_TIMEOUT`].
pub async fn scrape(url: &str) -> Result<Snapshot, ScrapeError> {
    scrape_with(&reqwest::Client::new(), url, DEFAULT_SCRAPE_TIMEOUT).await
}

/// Scrapes `url` with a given client and timeout.
pub async fn scrape_with(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<Snapshot, ScrapeError> {
    let url = metrics_url(url);
    let started = std::time::Instant::now();
    let mut retried = false;
    let resp = loop {
        let left = timeout.saturating_sub(started.elapsed());
        match client.get(&url).timeout(left).send().await {
            Ok(resp) => break resp,
            // A pooled keep-alive connection the worker closed just as the
            // request went out fails the send (a slow link widens that
            // window): the GET is idempotent, so once more on a new one.
            Err(e) if !retried && !e.is_timeout() && !left.is_zero() => retried = true,
            Err(source) => {
                return Err(ScrapeError::Request {
                    url,
                    timeout,
                    source,
                })
            }
        }
    };
    let status = resp.status().as_u16();
    let body = resp.text().await.map_err(|source| ScrapeError::Body {
        url: url.clone(),
        source,
    })?;
    if status != 200 {
        return Err(ScrapeError::Status {
            url,
            status,
            body: excerpt(&body, 400),
        });
    }
    Ok(Snapshot::from_prometheus_text(
        &body,
        None,
        SnapshotSource::Prometheus { url },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::names::{OpResult, Resource, Scope, Tier};
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    const BEFORE: &str = r#"
vllm:kvcr_transfer_blocks_total{scope="remote_deliver",engine="0"} 10
vllm:kvcr_transfer_blocks_total{scope="remote_deliver",engine="1"} 5
vllm:kvcr_duration_seconds_count{scope="remote_deliver",result="success"} 2
vllm:kv_offload_tiering_read_bytes_total{tier="1:kvcr"} 1000
vllm:kvcr_state{resource="block_records"} 7
vllm:prefix_cache_hits_total 64
python_gc_objects_collected_total{generation="0"} 12
"#;
    const AFTER: &str = r#"
vllm:kvcr_transfer_blocks_total{scope="remote_deliver",engine="0"} 51
vllm:kvcr_transfer_blocks_total{scope="remote_deliver",engine="1"} 5
vllm:kvcr_duration_seconds_count{scope="remote_deliver",result="success"} 3
vllm:kvcr_duration_seconds_count{scope="remote_deliver",result="partial"} 0
vllm:kv_offload_tiering_read_bytes_total{tier="1:kvcr"} 300942312
vllm:kvcr_state{resource="block_records"} 48
vllm:prefix_cache_hits_total 64
vllm:kvcr_transfer_bytes_total{scope="source_write"} NaN
"#;

    fn snap(text: &str, label: &str) -> Snapshot {
        Snapshot::from_prometheus_text(
            text,
            Some("A".into()),
            SnapshotSource::Text {
                label: label.into(),
            },
        )
    }

    #[test]
    fn delta_by_meaning() {
        let before = snap(BEFORE, "before");
        let after = snap(AFTER, "after");
        assert_eq!(
            before.counter(&Counter::TransferBlocks(Scope::RemoteDeliver)),
            Some(15.0)
        );
        assert_eq!(before.unmapped_samples, 1);
        assert_eq!(after.problems.len(), 1, "NaN counter is a problem");
        let d = after.since(&before).unwrap();
        assert_eq!(d.count(&Counter::TransferBlocks(Scope::RemoteDeliver)), 41);
        assert_eq!(
            d.count(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Success)),
            1
        );
        assert_eq!(
            d.observed(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Partial)),
            Some(0.0)
        );
        assert_eq!(
            d.observed(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Failed)),
            None
        );
        assert_eq!(
            d.get(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Failed)),
            0.0
        );
        assert_eq!(d.count(&Counter::TieringReadBytes(Tier::Kvcr)), 300941312);
        assert_eq!(
            d.gauge_after(&Gauge::State(Resource::BlockRecords)),
            Some(48.0)
        );
        assert_eq!(
            d.sum_where(|c| matches!(c, Counter::OpCount(Scope::RemoteDeliver, _))),
            1.0
        );
        assert!(d.elapsed().is_some());
        insta::assert_snapshot!(d.to_string());
    }

    #[test]
    fn resets_are_explicit() {
        let before = snap(AFTER, "before");
        let after = snap(BEFORE, "after-restart");
        let err = after.since(&before).unwrap_err();
        let DeltaError::CounterReset { resets, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(resets.len(), 3, "{err}");
        insta::assert_snapshot!(err.to_string());
        let other = snap(BEFORE, "b").with_worker("B");
        assert!(matches!(
            other.since(&snap(BEFORE, "a")),
            Err(DeltaError::WorkerMismatch { .. })
        ));
    }

    #[test]
    fn serde_round_trip_for_evidence() {
        let before = snap(BEFORE, "before");
        let after = snap(AFTER, "after");
        let d = after.since(&before).unwrap();
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json["counters"]["transfer_blocks{scope=remote_deliver}"],
            41.0
        );
        let back: Delta = serde_json::from_value(json).unwrap();
        assert_eq!(back, d);
        let mut s = before.clone();
        s.taken_at = None;
        let back: Snapshot = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let mut s = snap(BEFORE, "x");
        s.taken_at = None;
        s.taken_unix_ms = 0;
        insta::assert_json_snapshot!(s);
    }

    #[test]
    fn absent_is_not_zero() {
        let text = "# TYPE vllm:kvcr_duration_seconds summary\n\
            vllm:kvcr_transfer_blocks_total{scope=\"local_fill\"} 4\n\
            vllm:prefix_cache_hits_total 0\n";
        let before = snap(text, "before");
        let after = snap(text, "after");
        let d = after.since(&before).unwrap();
        // Reported, even at 0.
        assert_eq!(d.required(&Counter::PrefixCacheHits), Ok(0.0));
        // A series created on its first event, its family reported: 0.
        let lazy = Counter::TransferBlocks(Scope::RemoteDeliver);
        assert_eq!(d.required(&lazy), Ok(0.0));
        // Declared by `# TYPE` only (a labelled family with no children yet).
        let declared = Counter::OpCount(Scope::RemoteDeliver, OpResult::Success);
        assert_eq!(d.required_count(&declared), Ok(0));
        // An unlabelled series the engine does not export.
        let err = d.required(&Counter::ComputedBlocks).unwrap_err();
        assert_eq!(
            err.to_string().split(':').next(),
            Some("computed_blocks not reported by worker A"),
            "{err}"
        );
        assert!(
            err.to_string().contains("cpu_engine_computed_blocks_total"),
            "{err}"
        );
        // A lazily created series whose whole family is missing.
        let err = d
            .required(&Counter::TieringReadBytes(Tier::Host))
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("tiering_read_bytes{tier=host} not reported by worker A"),
            "{err}"
        );
        // The lenient reader still says 0: it must not feed verdicts.
        assert_eq!(d.count(&Counter::ComputedBlocks), 0);
    }

    #[test]
    fn a_series_that_vanishes_is_not_reported() {
        let before = snap("cpu_engine_computed_blocks_total 0\n", "before");
        let after = snap("vllm:prefix_cache_hits_total 3\n", "after");
        let d = after.since(&before).unwrap();
        assert!(d.required(&Counter::ComputedBlocks).is_err(), "{d}");
        assert_eq!(d.required(&Counter::PrefixCacheHits), Ok(3.0));
    }

    #[test]
    fn metrics_url_forms() {
        assert_eq!(
            metrics_url("http://127.0.0.1:9101"),
            "http://127.0.0.1:9101/metrics"
        );
        assert_eq!(
            metrics_url("http://127.0.0.1:9101/"),
            "http://127.0.0.1:9101/metrics"
        );
        assert_eq!(metrics_url("http://h:1/metrics"), "http://h:1/metrics");
    }

    #[tokio::test]
    async fn scrape_errors_name_the_url() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let err = scrape(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&format!("127.0.0.1:{port}/metrics")), "{msg}");
    }

    /// A server that drops its first `drops` connections unanswered (as a
    /// worker closing a pooled keep-alive connection as the request goes
    /// out), then serves; returns its address and how many it accepted.
    async fn dropping_server(drops: usize) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                let n = seen.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                if n < drops {
                    continue;
                }
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                    AFTER.len(),
                    AFTER
                );
                sock.write_all(resp.as_bytes()).await.unwrap();
            }
        });
        (addr, accepted)
    }

    #[tokio::test]
    async fn a_scrape_whose_connection_is_dropped_once_retries_on_a_new_one() {
        let (addr, accepted) = dropping_server(1).await;
        let s = scrape(&format!("http://{addr}")).await.unwrap();
        assert_eq!(
            s.counter(&Counter::TransferBlocks(Scope::RemoteDeliver)),
            Some(56.0)
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_scrape_dropped_twice_fails_naming_the_url() {
        let (addr, accepted) = dropping_server(usize::MAX).await;
        let err = scrape(&format!("http://{addr}")).await.unwrap_err();
        assert!(
            matches!(&err, ScrapeError::Request { url, .. } if url.ends_with("/metrics")),
            "{err}"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "one retry, no more");
    }

    #[tokio::test]
    async fn scrape_reads_a_served_exposition() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                AFTER.len(),
                AFTER
            );
            sock.write_all(resp.as_bytes()).await.unwrap();
        });
        let s = scrape(&format!("http://{addr}")).await.unwrap();
        assert_eq!(
            s.counter(&Counter::TransferBlocks(Scope::RemoteDeliver)),
            Some(56.0)
        );
        assert!(matches!(s.source, SnapshotSource::Prometheus { .. }));
    }

    /// Number of random inputs each property below runs on.
    const PROPTEST_CASES: u32 = 1024;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(PROPTEST_CASES))]

        #[test]
        fn delta_is_after_minus_before_for_increasing_counters(
            pairs in proptest::collection::vec((0u32..1_000_000, 0u32..1_000_000), 1..8)
        ) {
            let mut before = Snapshot::new(None, SnapshotSource::Empty);
            let mut after = Snapshot::new(None, SnapshotSource::Empty);
            for (i, (b, inc)) in pairs.iter().enumerate() {
                let c = Counter::TransferBlocks(Scope::Other(format!("s{i}")));
                before.counters.insert(c.clone(), f64::from(*b));
                after.counters.insert(c, f64::from(*b) + f64::from(*inc));
            }
            let d = Delta::between(&before, &after).unwrap();
            for (i, (_, inc)) in pairs.iter().enumerate() {
                let c = Counter::TransferBlocks(Scope::Other(format!("s{i}")));
                prop_assert_eq!(d.count(&c), u64::from(*inc));
            }
            // Swapped, any positive increase is a reset.
            let any_inc = pairs.iter().any(|(_, inc)| *inc > 0);
            prop_assert_eq!(Delta::between(&after, &before).is_err(), any_inc);
        }

        #[test]
        fn mapping_never_panics(text in "\\PC*") {
            let s = Snapshot::from_prometheus_text(&text, None, SnapshotSource::Empty);
            let _ = s.to_string();
            let _ = serde_json::to_string(&s);
        }
    }
}
