//! The figures a comparison looks at, as data, and how each is read from a
//! lane run's `results.json` (phase1's perf trials, or a trace replay).
//!
//! | figure | samples of one run | statistic | worse when |
//! |---|---|---|---|
//! | `TC-05::<arm>::ttft_p50` / `ttft_p90` | each ok request's TTFT | p50 / p90 | higher |
//! | `TC-05::<arm>::tpot_p50` | each ok request's TPOT | p50 | higher |
//! | `TC-05::<arm>::itl_p50` | each ok request's median inter-token gap | p50 | higher |
//! | `TC-05::<arm>::kvcr::<scope>` | the mean duration of one KVCR operation of that scope (`result=success`, all workers) over the arm's ok requests after the warm-up: their `kvcr_duration_seconds` sum increases over their count increases, one value per run | mean | higher |
//! | `TC-05::kvcr_deliver_bench::local_deliver` | the mean duration of one KVCR `local_deliver` (`result=success`) over TC-05's deliver bench: hundreds of delivers of one prompt's blocks from KVCR's pool, timed apart from any request; their summed seconds over their count, one value per run | mean | higher |
//! | `TC-05::kvcr_deliver_bench::deliver_p10` | each bench deliver's wall time as the worker awaited it (submit to completion seen), hundreds per run | p10 | higher |
//! | `TC-05::kvcr_pull_bench::remote_deliver` | the mean duration of one KVCR `remote_deliver` (`result=success`) on the target over TC-05's pull bench: hundreds of hinted pulls of one prompt's blocks from the peer, timed apart from any request; their summed seconds over their count, one value per run | mean | higher |
//! | `TC-05::kvcr_pull_bench::pull_p10` | each bench pull's wall time as the target awaited its deliver (submit to completion seen, the source's write inside it), hundreds per run | p10 | higher |
//! | `TC-05::concurrency_sweep::c<N>::throughput` | the level's ok requests/s | mean | lower |
//! | `TC-05::concurrency_sweep::c<N>::ttft_p50` | each ok request's TTFT at that level | p50 | higher |
//! | `TC-05::concurrency_sweep::r<rate>::{throughput,ttft_p50}` | the same, for an open-loop level | as above | as above |
//! | `TC-06::guard_recovery_timing::{t1,t2,promotion}` | the run's t1, t2, Guard promotion time; on a Guard pool of 1 GiB or more the id ends with its size (`promotion@4GiB`) | p50 | higher |
//! | `TC-06::guard_recovery_timing::promotion_{recovery,setup,start}` | the promotion's stages as the Guard logged them | p50 | higher |
//! | `TC-06::guard_recovery_timing::t1_kvcr::<scope>` | the mean duration of one KVCR operation of that scope on the target during t1's request (the pull from the Guard: `remote_deliver`), one value per run | p50 | higher |
//! | `TC-12::disk_tier::g3_hit` | each ok read-back's TTFT: a prefix evicted from KVCR's DRAM pool, delivered from its disk tier (G3) | p50 | higher |
//! | `TC-12::disk_tier::kvcr::{g3_deliver,g3_fill}` | the mean duration of one KVCR read from disk of that scope (`result=success`) over the ok read-backs after the warm-up, one value per run, as for TC-05's arms | mean | higher |
//! | `TC-12::g3_read_bench::g3_deliver` | the mean duration of one KVCR `g3_deliver` (`result=success`) over TC-12's G3 read bench: hundreds of delivers of one prompt's blocks that KVCR holds on disk only, each a read from disk, timed apart from any request; their summed seconds over their count, one value per run | mean | higher |
//! | `TC-12::g3_read_bench::read_p10` | each bench read's wall time as the worker awaited it (submit to completion seen), hundreds per run | p10 | higher |
//! | `TC-05::<trial>::failed_requests` | the trial's requests that got no answer, one count per run | mean | any increase |
//! | `TC-05::<trial>::wrong_tokens` | the trial's requests answered with tokens other than the reference's | mean | any increase |
//! | `WL-01::hit_rate::{device,dram,peer,disk,total}` | the trace replay's (KVCR on) prompt tokens served from that tier, % of its prompt tokens, one value per run | mean | lower |
//! | `WL-01::goodput` | the replay's requests/s meeting the TTFT and TPOT targets, one value per run | mean | lower |
//! | `WL-01::ttft_p50` / `ttft_p90` | each ok replay request's TTFT | p50 / p90 | higher |
//! | `WL-01::tpot_p50` | each ok replay request's TPOT | p50 | higher |
//! | `WL-01::max_sustained_rate` | the highest offered rate of the rate sweep that met the targets, one value per run (only with a sweep) | mean | lower |
//! | `WL-01::failed_requests` / `wrong_tokens` | the replay's requests that got no answer / answered with tokens other than the reference's, one count per run | mean | any increase |
//!
//! The `WL-01` figures come from a workload trace replayed (`perf.workload`,
//! and the replay's requests of case `WL-01`); a tier KVCR never serves
//! on the stack (a peer on one node, the disk without its tier) stays in,
//! a 0 in every round of both builds, which the comparison reports as no
//! change without spending any of its confidence on it.
//!
//! Arms are cold, local_hit, dram_hit and remote_hit. The request is the
//! sampling unit: ITL uses one value per request (its median gap) so that a
//! long stream does not count as many independent samples. An arm's first
//! ok request in a run is a warm-up and takes no part
//! ([`WARM_UP_REQUESTS`]). The KVCR figures isolate KVCR's own time (a
//! `local_deliver` on the DRAM hit, `source_write` and `remote_deliver` on
//! the remote hit, `g3_deliver` on TC-12's read-back from disk) from the
//! engine's and the router's, so a deliver that gets slower shows even
//! where the client's TTFT hides it. TC-12's read-backs are requests of
//! case [`DISK_TIER_CASE`] without an arm; their first is a warm-up too.
//!
//! The latency figures rest on the requests that succeeded; the two count
//! figures (for each arm and for the concurrency sweep) make the others
//! visible, so a head build that times out or answers wrong tokens cannot
//! look faster for it. A count is read from the requests recorded as not ok
//! and, since a trial stops at its first bad request and records none of
//! its requests, from the trial's own failure: a trial that failed on a
//! stream counts one failed request, one that failed on the reference
//! tokens one wrong-token request ([`RequestFault`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::errors::CompareError;
use crate::drive::{TrialOutcome, TrialRecord};
use crate::evidence::{
    Arm, KvcrBench, KvcrOps, PerfSummary, RequestRecord, DISK_TIER_CASE, RESULTS_SCHEMA_VERSION,
    WORKLOAD_CASE,
};
use crate::stats::{quantile, Statistic};

/// A Guard pool from this size on is a production-size one (the `scale`
/// profiles): TC-06's figures then carry its size, so a promotion at 1 GiB
/// is never compared with one at 4 GiB, nor with the default small pool's.
const PRODUCTION_POOL_BYTES: u64 = 1 << 30;

/// The id suffix and label words of TC-06's figures for a Guard pool of
/// `bytes`: `@4GiB` and `, 4 GiB pool` on a production-size pool, nothing
/// on a smaller one (the figures of the default stack keep their ids).
fn pool_size_words(bytes: Option<u64>) -> (String, String) {
    match bytes {
        Some(b) if b >= PRODUCTION_POOL_BYTES => {
            let gib = b as f64 / PRODUCTION_POOL_BYTES as f64;
            let gib = if gib.fract() == 0.0 {
                format!("{gib:.0}")
            } else {
                format!("{gib:.2}")
            };
            (format!("@{gib}GiB"), format!(", {gib} GiB pool"))
        }
        _ => (String::new(), String::new()),
    }
}

/// The TC-05 trial that sends sweep requests (records without an arm).
const SWEEP_TRIAL: &str = "concurrency_sweep";

/// TC-05's deliver bench: KVCR's host-tier deliver timed apart from requests.
const DELIVER_BENCH_TRIAL: &str = "kvcr_deliver_bench";

/// TC-05's pull bench: KVCR's hinted peer pull timed apart from requests.
const PULL_BENCH_TRIAL: &str = "kvcr_pull_bench";

/// TC-12's trial name, whose read-backs from disk are figures.
const DISK_TIER_TRIAL: &str = "disk_tier";

/// TC-12's G3 read bench: KVCR's read from disk timed apart from requests.
const G3_READ_BENCH_TRIAL: &str = "g3_read_bench";

/// KVCR's scopes of a read from its disk tier: straight into engine
/// memory (`g3_deliver`, the CPU engine's path) or into DRAM first
/// (`g3_fill`). Another scope a read-back's window happens to hold (an
/// older block's `g3_store` finishing) is no part of the read and would
/// come and go between rounds: no figure.
const DISK_READ_SCOPES: &[&str] = &["g3_deliver", "g3_fill"];

/// The KVCR scopes a TC-05 arm's figures read: whole operations of a path
/// (a host-tier deliver or fill, a peer pull and the source's write inside
/// it). The steps inside them (`transfer`, `transfer_submit`,
/// `transfer_post`, `control_enqueue`) are parts of these, and each judged
/// figure narrows every other's interval (the family-wise rule), so they
/// get none.
const ARM_SCOPES: &[&str] = &[
    "local_deliver",
    "local_fill",
    "remote_deliver",
    "source_write",
];

/// Which way a figure gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Lower is better (latencies): up is a regression.
    Lower,
    /// Higher is better (throughput): down is a regression.
    Higher,
}

/// How a figure's verdict is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judged {
    /// By the interval of head − base and the minimum relative change
    /// ([`super::Rule`]).
    #[default]
    Interval,
    /// Counts of things that should not happen (failed or wrong-token
    /// requests): any increase in head is a regression, whatever the
    /// interval or the relative change (base is normally 0).
    AnyIncrease,
}

impl Judged {
    fn is_interval(&self) -> bool {
        *self == Judged::Interval
    }
}

/// Which share of the comparison's error rate a figure's interval is
/// sized from ([`super::Rule::family_confidences`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// A figure that isolates one KVCR path from the engine, the router
    /// and the client: a bench's p10 per op, the Guard promotion's recovery
    /// stage. A KVCR change that slows a path shows here first, and a few
    /// such figures share most of the error rate, so their intervals stay
    /// narrow beside the dozens of other figures.
    Path,
    /// Every other figure: client latencies and throughput, KVCR's means,
    /// the promotion's total and its other stages.
    #[default]
    Other,
}

impl Family {
    fn is_other(&self) -> bool {
        *self == Family::Other
    }
}

/// What a figure is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FigureSpec {
    /// Stable id, also the JUnit testcase name (`TC-05::dram_hit::ttft_p50`).
    pub id: String,
    /// For people (`dram_hit TTFT p50`).
    pub label: String,
    /// Unit of the samples (`ms`, `req/s`).
    pub unit: String,
    /// The statistic compared.
    pub statistic: Statistic,
    /// Which way is better.
    pub better: Better,
    /// How its verdict is reached; absent in compare.json: by the interval.
    #[serde(default, skip_serializing_if = "Judged::is_interval")]
    pub judged: Judged,
    /// Whose share of the error rate its interval gets; absent in
    /// compare.json: [`Family::Other`].
    #[serde(default, skip_serializing_if = "Family::is_other")]
    pub family: Family,
}

impl FigureSpec {
    fn new(id: String, label: String, unit: &str, statistic: Statistic, better: Better) -> Self {
        FigureSpec {
            id,
            label,
            unit: unit.to_string(),
            statistic,
            better,
            judged: Judged::Interval,
            family: Family::Other,
        }
    }

    /// A figure of [`Family::Path`].
    fn isolating_a_path(self) -> Self {
        FigureSpec {
            family: Family::Path,
            ..self
        }
    }

    /// A count of requests that should not happen, per run.
    fn count(id: String, label: String) -> Self {
        FigureSpec {
            judged: Judged::AnyIncrease,
            ..Self::new(id, label, "requests", Statistic::Mean, Better::Lower)
        }
    }
}

/// Why a request of a perf trial has no good answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFault {
    /// No answer: the stream failed (an HTTP error, a timeout, a cut stream).
    Failed,
    /// An answer whose tokens differ from the reference.
    WrongTokens,
}

impl RequestFault {
    /// The claim of the reference-token check (`verdict::tokens`), which
    /// begins the message of a request or trial that failed on it.
    pub const WRONG_TOKENS_CLAIM: &'static str = "reference tokens";

    /// The fault a not-ok request's error names.
    pub fn of_request_error(error: &str) -> Self {
        match error.contains(Self::WRONG_TOKENS_CLAIM) {
            true => RequestFault::WrongTokens,
            false => RequestFault::Failed,
        }
    }

    /// The fault a failed trial's message names: its first line begins
    /// with the reference-token claim, or says a stream failed (`stream of
    /// <prompt> failed`); `None` for any other failure (a telemetry check,
    /// a setup step), which is no request of its own.
    pub fn of_trial_failure(message: &str) -> Option<Self> {
        let first = message.lines().next().unwrap_or_default();
        if first.starts_with(Self::WRONG_TOKENS_CLAIM) {
            Some(RequestFault::WrongTokens)
        } else if first.contains("stream of ") && first.contains(" failed") {
            Some(RequestFault::Failed)
        } else {
            None
        }
    }
}

/// One figure's samples in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureValues {
    /// The figure.
    pub spec: FigureSpec,
    /// Its samples (at least one).
    pub values: Vec<f64>,
}

/// The run part of results.json that a comparison names.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunInfo {
    /// The run id.
    pub run_id: String,
    /// The lane label (`cpu/agg/dense`).
    #[serde(default)]
    pub label: String,
    /// When the run started (RFC 3339); rounds given to `compare-results`
    /// must have started in the order of the round plan.
    #[serde(default)]
    pub started_at: Option<String>,
    /// Every trial and how it ended.
    #[serde(default)]
    pub cases: Vec<TrialRecord>,
}

impl RunInfo {
    /// The start instant, if recorded and readable.
    pub fn started(&self) -> Option<time::OffsetDateTime> {
        let text = self.started_at.as_deref()?;
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
    }

    /// The trials that failed, each as `name: first line of its message`.
    pub fn failed_trials(&self) -> Vec<String> {
        self.cases
            .iter()
            .filter_map(|t| match &t.outcome {
                TrialOutcome::Failed { message } => Some(format!(
                    "{}: {}",
                    t.name,
                    message.lines().next().unwrap_or_default()
                )),
                _ => None,
            })
            .collect()
    }
}

/// What a comparison reads of a phase1 `results.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunResults {
    /// Layout version; must be [`RESULTS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run: RunInfo,
    /// Every request the perf cases sent.
    #[serde(default)]
    pub requests: Vec<RequestRecord>,
    /// Arms, sweep and recovery timeline.
    #[serde(default)]
    pub perf: PerfSummary,
}

impl RunResults {
    /// Reads `path`: a run directory or its `results.json`.
    pub fn read(path: &Path) -> Result<(Self, PathBuf), CompareError> {
        let file = if path.is_dir() {
            path.join("results.json")
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file).map_err(|source| CompareError::Read {
            path: file.clone(),
            source,
        })?;
        let results = Self::parse(&text).map_err(|message| CompareError::Parse {
            path: file.clone(),
            message,
        })?;
        Ok((results, file))
    }

    /// Parses results.json text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let results: RunResults = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if results.schema_version != RESULTS_SCHEMA_VERSION {
            return Err(format!(
                "schema_version {} (this kvcr-e2e reads {RESULTS_SCHEMA_VERSION})",
                results.schema_version
            ));
        }
        Ok(results)
    }

    /// Every figure this run has samples of, in report order.
    pub fn figures(&self) -> Vec<FigureValues> {
        let mut out = Vec::new();
        let mut push = |spec: FigureSpec, values: Vec<f64>| {
            let values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
            if !values.is_empty() {
                out.push(FigureValues { spec, values });
            }
        };
        let ok = |r: &&RequestRecord| r.ok;
        for arm in Arm::ALL {
            let all: Vec<&RequestRecord> = self
                .requests
                .iter()
                .filter(ok)
                .filter(|r| r.arm == Some(arm))
                .collect();
            let mine = after_warm_up(&all);
            let id = |m: &str| format!("TC-05::{arm}::{m}");
            let ttft: Vec<f64> = mine.iter().filter_map(|r| r.ttft_ms).collect();
            let ms = "ms";
            let (p50, p90, lower) = (Statistic::P50, Statistic::P90, Better::Lower);
            let label = |m: &str| format!("{arm} {m}");
            push(
                FigureSpec::new(id("ttft_p50"), label("TTFT p50"), ms, p50, lower),
                ttft.clone(),
            );
            push(
                FigureSpec::new(id("ttft_p90"), label("TTFT p90"), ms, p90, lower),
                ttft,
            );
            push(
                FigureSpec::new(id("tpot_p50"), label("TPOT p50"), ms, p50, lower),
                mine.iter().filter_map(|r| r.tpot_ms).collect(),
            );
            push(
                FigureSpec::new(id("itl_p50"), label("ITL p50"), ms, p50, lower),
                mine.iter()
                    .filter_map(|r| quantile(&mut r.itl_ms.clone(), 0.5))
                    .collect(),
            );
            let paths = kvcr_op_times(mine)
                .into_iter()
                .filter(|(scope, _)| ARM_SCOPES.contains(&scope.as_str()));
            for (scope, values) in paths {
                push(
                    FigureSpec::new(
                        id(&format!("kvcr::{scope}")),
                        label(&format!("KVCR {scope} (mean per op)")),
                        ms,
                        Statistic::Mean,
                        lower,
                    ),
                    values,
                );
            }
        }
        self.kvcr_bench_figures(&mut push);
        for level in &self.perf.sweep {
            // `c4` for a closed-loop level, `r8` for an open-loop one.
            let key = level.key();
            let shown = match &level.open_loop {
                Some(o) => format!("rate={}/s", o.rate_per_s),
                None => format!("c={}", level.concurrency),
            };
            let id = |m: &str| format!("TC-05::concurrency_sweep::{key}::{m}");
            push(
                FigureSpec::new(
                    id("throughput"),
                    format!("sweep {shown} throughput"),
                    "req/s",
                    Statistic::Mean,
                    Better::Higher,
                ),
                vec![level.request_throughput_per_s],
            );
            push(
                FigureSpec::new(
                    id("ttft_p50"),
                    format!("sweep {shown} TTFT p50"),
                    "ms",
                    Statistic::P50,
                    Better::Lower,
                ),
                self.requests
                    .iter()
                    .filter(ok)
                    .filter(|r| level.holds(r))
                    .filter_map(|r| r.ttft_ms)
                    .collect(),
            );
        }
        if let Some(t) = &self.perf.recovery {
            let (at, on) = pool_size_words(t.guard_pool_bytes);
            for (name, label, value) in [
                ("t1", "TC-06 t1 (Guard serves)", t.t1_ms),
                ("t2", "TC-06 t2 (replacement serves)", t.t2_ms),
                ("promotion", "TC-06 Guard promotion", t.promotion_ms),
            ] {
                push(
                    FigureSpec::new(
                        format!("TC-06::guard_recovery_timing::{name}{at}"),
                        format!("{label}{on}"),
                        "ms",
                        Statistic::P50,
                        Better::Lower,
                    ),
                    value.into_iter().collect(),
                );
            }
            // KVCR's own time serving t1's request (the pull from the
            // Guard), one value per run.
            let paths = kvcr_ops_times(&t.t1_kvcr_ops)
                .into_iter()
                .filter(|(scope, _)| ARM_SCOPES.contains(&scope.as_str()));
            for (scope, values) in paths {
                push(
                    FigureSpec::new(
                        format!("TC-06::guard_recovery_timing::t1_kvcr::{scope}"),
                        format!("TC-06 t1 request, KVCR {scope} (mean per op)"),
                        "ms",
                        Statistic::P50,
                        Better::Lower,
                    ),
                    values,
                );
            }
            // The promotion's stages isolate where a slower promotion
            // spends its time. The recovery stage (the pool's adoption) is
            // KVCR's alone and holds still between rounds: a path figure.
            if let Some(stages) = &t.promotion_stages {
                for (name, value, family) in [
                    ("recovery", stages.recovery_ms, Family::Path),
                    ("setup", stages.setup_ms, Family::Other),
                    ("start", stages.start_ms, Family::Other),
                ] {
                    push(
                        FigureSpec {
                            family,
                            ..FigureSpec::new(
                                format!("TC-06::guard_recovery_timing::promotion_{name}"),
                                format!("TC-06 Guard promotion, {name} stage"),
                                "ms",
                                Statistic::P50,
                                Better::Lower,
                            )
                        },
                        vec![value],
                    );
                }
            }
        }
        self.disk_tier_figures(&mut push);
        self.g3_read_bench_figures(&mut push);
        self.workload_figures(&mut push);
        for (trial, counts) in self.request_faults() {
            let id = |m: &str| format!("TC-05::{trial}::{m}");
            push(
                FigureSpec::count(id("failed_requests"), format!("{trial} failed")),
                vec![counts.failed as f64],
            );
            push(
                FigureSpec::count(id("wrong_tokens"), format!("{trial} wrong tokens")),
                vec![counts.wrong_tokens as f64],
            );
        }
        out
    }

    /// The figures of TC-05's KVCR benches, when the run has them: the
    /// deliver bench's, then the pull bench's ([`KvcrBenchFigures`]).
    fn kvcr_bench_figures(&self, push: &mut impl FnMut(FigureSpec, Vec<f64>)) {
        let deliver = KvcrBenchFigures {
            case: "TC-05",
            trial: DELIVER_BENCH_TRIAL,
            bench: "bench",
            benches: &self.perf.kvcr_bench,
            scope: KvcrBench::SCOPE,
            op: "deliver",
        };
        let pull = KvcrBenchFigures {
            case: "TC-05",
            trial: PULL_BENCH_TRIAL,
            bench: "bench",
            benches: &self.perf.kvcr_pull_bench,
            scope: KvcrBench::PULL_SCOPE,
            op: "pull",
        };
        deliver.push_figures(push);
        pull.push_figures(push);
    }

    /// The figures of TC-12's read-backs from the disk tier, when the run
    /// has any: their TTFT and KVCR's own time per read scope
    /// ([`DISK_READ_SCOPES`]), the first read-back a warm-up.
    fn disk_tier_figures(&self, push: &mut impl FnMut(FigureSpec, Vec<f64>)) {
        let all: Vec<&RequestRecord> = self
            .requests
            .iter()
            .filter(|r| r.ok && r.case == DISK_TIER_CASE && r.arm.is_none())
            .collect();
        let mine = after_warm_up(&all);
        let id = |m: &str| format!("{DISK_TIER_CASE}::{DISK_TIER_TRIAL}::{m}");
        let (ms, p50, lower) = ("ms", Statistic::P50, Better::Lower);
        push(
            FigureSpec::new(
                id("g3_hit"),
                "disk_tier g3_hit TTFT p50".into(),
                ms,
                p50,
                lower,
            ),
            mine.iter().filter_map(|r| r.ttft_ms).collect(),
        );
        let reads = kvcr_op_times(mine)
            .into_iter()
            .filter(|(scope, _)| DISK_READ_SCOPES.contains(&scope.as_str()));
        for (scope, values) in reads {
            push(
                FigureSpec::new(
                    id(&format!("kvcr::{scope}")),
                    format!("disk_tier g3_hit KVCR {scope} (mean per op)"),
                    ms,
                    Statistic::Mean,
                    lower,
                ),
                values,
            );
        }
    }

    /// The figures of TC-12's G3 read bench, when the run has one
    /// ([`KvcrBenchFigures`]: hundreds of reads from disk a run, where the
    /// read-backs are ten requests).
    fn g3_read_bench_figures(&self, push: &mut impl FnMut(FigureSpec, Vec<f64>)) {
        KvcrBenchFigures {
            case: DISK_TIER_CASE,
            trial: G3_READ_BENCH_TRIAL,
            bench: "G3 read bench",
            benches: &self.perf.g3_read_bench,
            scope: KvcrBench::G3_READ_SCOPE,
            op: "read",
        }
        .push_figures(push);
    }

    /// The figures of a workload trace replayed (KVCR on), when the run
    /// has one: hit rate per tier, goodput, TTFT and TPOT of its ok
    /// requests, the sweep's highest sustained rate, failed and
    /// wrong-token requests.
    fn workload_figures(&self, push: &mut impl FnMut(FigureSpec, Vec<f64>)) {
        let Some(w) = &self.perf.workload else {
            return;
        };
        let on = &w.on;
        let id = |m: &str| format!("{WORKLOAD_CASE}::{m}");
        let label = |m: &str| format!("{WORKLOAD_CASE} {m}");
        let (mean, higher, lower) = (Statistic::Mean, Better::Higher, Better::Lower);
        for (tier, rate) in on.hit_rate.named() {
            push(
                FigureSpec::new(
                    id(&format!("hit_rate::{tier}")),
                    label(&format!("hit rate {tier}")),
                    "%",
                    mean,
                    higher,
                ),
                vec![rate * 100.0],
            );
        }
        push(
            FigureSpec::new(id("goodput"), label("goodput"), "req/s", mean, higher),
            vec![on.goodput_per_s],
        );
        let mine: Vec<&RequestRecord> = self
            .requests
            .iter()
            .filter(|r| r.ok && r.case == WORKLOAD_CASE)
            .collect();
        // Without request records, the summary's own TTFT samples.
        let ttft: Vec<f64> = match mine.is_empty() {
            true => on.ttft_samples_ms.clone(),
            false => mine.iter().filter_map(|r| r.ttft_ms).collect(),
        };
        for (name, shown, statistic) in [
            ("ttft_p50", "TTFT p50", Statistic::P50),
            ("ttft_p90", "TTFT p90", Statistic::P90),
        ] {
            push(
                FigureSpec::new(id(name), label(shown), "ms", statistic, lower),
                ttft.clone(),
            );
        }
        push(
            FigureSpec::new(
                id("tpot_p50"),
                label("TPOT p50"),
                "ms",
                Statistic::P50,
                lower,
            ),
            mine.iter().filter_map(|r| r.tpot_ms).collect(),
        );
        push(
            FigureSpec::new(
                id("max_sustained_rate"),
                label("max sustained rate"),
                "req/s",
                mean,
                higher,
            ),
            // A sweep that sustained no rate sustained 0 /s.
            match (&w.max_sustained_rate_per_s, w.sweep.is_empty()) {
                (Some(rate), _) => vec![*rate],
                (None, false) => vec![0.0],
                (None, true) => Vec::new(),
            },
        );
        push(
            FigureSpec::count(id("failed_requests"), label("failed")),
            vec![f64::from(on.failed)],
        );
        push(
            FigureSpec::count(id("wrong_tokens"), label("wrong tokens")),
            vec![f64::from(on.wrong_tokens)],
        );
    }

    /// Failed and wrong-token requests of each TC-05 trial that ran
    /// (passed or failed) in this run, arms first, then the sweep.
    fn request_faults(&self) -> Vec<(String, FaultCounts)> {
        let trials = Arm::ALL
            .iter()
            .map(|arm| (arm.to_string(), Some(*arm)))
            .chain([(SWEEP_TRIAL.to_string(), None)]);
        let mut out = Vec::new();
        for (trial, arm) in trials {
            let name = format!("TC-05::{trial}");
            let Some(record) = self.run.cases.iter().find(|t| t.name == name) else {
                continue;
            };
            let mut counts = FaultCounts::default();
            let mine = self.requests.iter().filter(|r| match arm {
                Some(arm) => r.arm == Some(arm),
                None => r.arm.is_none() && (r.concurrency.is_some() || r.rate_per_s.is_some()),
            });
            for r in mine.filter(|r| !r.ok) {
                counts.add(RequestFault::of_request_error(
                    r.error.as_deref().unwrap_or_default(),
                ));
            }
            match &record.outcome {
                TrialOutcome::Ignored { .. } => continue,
                TrialOutcome::Failed { message } if counts.total() == 0 => {
                    if let Some(fault) = RequestFault::of_trial_failure(message) {
                        counts.add(fault);
                    }
                }
                _ => {}
            }
            out.push((trial, counts));
        }
        out
    }
}

/// Requests at the start of an arm in each round that take no part in its
/// latency figures: the first request of an arm pays for what the arm
/// before it left behind (a cold connection, a first peer set-up), about
/// 7 % on the cold and 10 % on the remote-hit TTFT in recorded A-against-A
/// rounds.
pub const WARM_UP_REQUESTS: usize = 1;

/// An arm's ok requests less the warm-up ones, when at least two remain
/// after them (a short arm keeps all it has).
fn after_warm_up<'r>(ok: &'r [&'r RequestRecord]) -> &'r [&'r RequestRecord] {
    match ok.len() >= WARM_UP_REQUESTS + 2 {
        true => &ok[WARM_UP_REQUESTS..],
        false => ok,
    }
}

/// Per KVCR scope that succeeded during these requests (in scope order),
/// one value for the run: the mean duration of one of its operations, ms,
/// over every operation of the scope these requests ran on every worker
/// (their summed `kvcr_ops` seconds over their summed count). A scope no
/// request ran gives no figure (absent is not 0).
///
/// Why one ratio per run and not one mean per request: an operation's
/// duration on a loaded stack spreads over two orders of magnitude (0.2 to
/// 30 ms for one 8 KiB deliver), and the median of ten per-request means
/// moved between rounds of one build about 2.5 times as much as the
/// ratio over all of them did (docs/benchmarks.md, "The KVCR figures").
fn kvcr_op_times(requests: &[&RequestRecord]) -> Vec<(String, Vec<f64>)> {
    let ops: Vec<&KvcrOps> = requests.iter().flat_map(|r| &r.kvcr_ops).collect();
    mean_op_times(ops)
}

/// The mean duration of one successful operation per scope, ms, over
/// `ops` (one value each).
fn kvcr_ops_times(ops: &[KvcrOps]) -> Vec<(String, Vec<f64>)> {
    mean_op_times(ops.iter().collect())
}

fn mean_op_times(ops: Vec<&KvcrOps>) -> Vec<(String, Vec<f64>)> {
    let mut sums: std::collections::BTreeMap<&str, (u64, f64)> = Default::default();
    for op in ops.into_iter().filter(|op| op.result == "success") {
        let slot = sums.entry(op.scope.as_str()).or_default();
        slot.0 += op.count;
        slot.1 += op.seconds;
    }
    sums.into_iter()
        .filter(|(_, (count, seconds))| *count > 0 && seconds.is_finite())
        .map(|(scope, (count, seconds))| (scope.to_string(), vec![seconds * 1000.0 / count as f64]))
        .collect()
}

/// One of TC-05's KVCR benches (hundreds of operations of one path a run,
/// timed apart from any request) and its two figures.
struct KvcrBenchFigures<'r> {
    /// The case of the trial (`TC-05`).
    case: &'static str,
    /// The trial (`kvcr_deliver_bench`).
    trial: &'static str,
    /// The bench in the figures' labels (`bench`).
    bench: &'static str,
    /// The run's benches of that trial.
    benches: &'r [KvcrBench],
    /// KVCR's scope of the bench's operation (`local_deliver`).
    scope: &'static str,
    /// The operation in the per-op figure's id and label (`deliver`).
    op: &'static str,
}

impl KvcrBenchFigures<'_> {
    /// KVCR's mean `scope` over every bench operation it timed (hundreds a
    /// run, where an arm has ten requests), one value a run, and each
    /// operation's wall time as the worker awaited it, whose p10 is the
    /// `<op>_p10` figure.
    fn push_figures(&self, push: &mut impl FnMut(FigureSpec, Vec<f64>)) {
        let ops: Vec<&KvcrOps> = self.benches.iter().flat_map(|b| &b.kvcr_ops).collect();
        let mine = mean_op_times(ops)
            .into_iter()
            .filter(|(scope, _)| scope == self.scope);
        for (scope, values) in mine {
            push(
                FigureSpec::new(
                    format!("{}::{}::{scope}", self.case, self.trial),
                    format!("KVCR {scope}, {} (mean per op)", self.bench),
                    "ms",
                    Statistic::Mean,
                    Better::Lower,
                ),
                values,
            );
        }
        // Each operation as the worker awaited it: its quick mode (p10)
        // holds still between rounds where the mean, made of waits for the
        // other threads, does not (docs/benchmarks.md, "The deliver bench").
        let ops_ms: Vec<f64> = self
            .benches
            .iter()
            .flat_map(|b| b.op_seconds.iter().map(|s| s * 1e3))
            .collect();
        if !ops_ms.is_empty() {
            push(
                FigureSpec::new(
                    format!("{}::{}::{}_p10", self.case, self.trial, self.op),
                    format!("KVCR {}, {} (p10 per op)", self.op, self.bench),
                    "ms",
                    Statistic::P10,
                    Better::Lower,
                )
                .isolating_a_path(),
                ops_ms,
            );
        }
    }
}

/// Bad requests of one trial in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct FaultCounts {
    failed: u32,
    wrong_tokens: u32,
}

impl FaultCounts {
    fn add(&mut self, fault: RequestFault) {
        match fault {
            RequestFault::Failed => self.failed += 1,
            RequestFault::WrongTokens => self.wrong_tokens += 1,
        }
    }

    fn total(&self) -> u32 {
        self.failed + self.wrong_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{RecoveryTimeline, SweepLevel};

    fn request(arm: Option<Arm>, concurrency: Option<u32>, ttft: f64, ok: bool) -> RequestRecord {
        RequestRecord {
            case: "TC-05".into(),
            arm,
            concurrency,
            ttft_ms: Some(ttft),
            tpot_ms: Some(ttft / 10.0),
            itl_ms: vec![1.0, 2.0, 9.0],
            e2el_ms: Some(ttft * 2.0),
            prompt_tokens: 64,
            output_tokens: 8,
            worker_id: None,
            ok,
            error: None,
            request_id: None,
            first_token_monotonic_ns: None,
            first_token_offset_ms: None,
            sent_at_ms: None,
            rate_per_s: None,
            schedule: None,
            kvcr_ops: Vec::new(),
        }
    }

    pub(crate) fn sample_run() -> RunResults {
        let mut requests = vec![
            request(Some(Arm::Cold), None, 40.0, true),
            request(Some(Arm::Cold), None, 44.0, true),
            request(Some(Arm::Cold), None, 999.0, false),
            request(Some(Arm::DramHit), None, 20.0, true),
        ];
        requests.push(request(None, Some(2), 30.0, true));
        let sweep = SweepLevel::from_requests(2, &requests[4..], 0.5);
        RunResults {
            schema_version: RESULTS_SCHEMA_VERSION,
            run: RunInfo {
                run_id: "run-1".into(),
                label: "cpu/agg/dense".into(),
                started_at: Some("2026-12-01T12:47:16.739922711Z".into()),
                cases: ["cold", "dram_hit"]
                    .iter()
                    .map(|arm| TrialRecord {
                        name: format!("TC-05::{arm}"),
                        outcome: TrialOutcome::Passed,
                    })
                    .collect(),
            },
            requests,
            perf: PerfSummary {
                sweep: vec![sweep],
                recovery: Some(RecoveryTimeline {
                    t1_ms: Some(800.0),
                    t2_ms: None,
                    promotion_ms: Some(450.0),
                    ..RecoveryTimeline::default()
                }),
                ..PerfSummary::default()
            },
        }
    }

    /// On a production-size pool TC-06's figures carry its size in their id
    /// and label; on the default small pool they keep their ids.
    #[test]
    fn tc06_figures_carry_a_production_pool_size() {
        let ids = |bytes: Option<u64>| {
            let mut run = sample_run();
            if let Some(t) = run.perf.recovery.as_mut() {
                t.guard_pool_bytes = bytes;
            }
            run.figures()
                .into_iter()
                .filter(|f| f.spec.id.starts_with("TC-06"))
                .map(|f| (f.spec.id.clone(), f.spec.label.clone()))
                .collect::<Vec<_>>()
        };
        let at_4g = ids(Some(4 << 30));
        assert_eq!(
            at_4g,
            vec![
                (
                    "TC-06::guard_recovery_timing::t1@4GiB".to_string(),
                    "TC-06 t1 (Guard serves), 4 GiB pool".to_string()
                ),
                (
                    "TC-06::guard_recovery_timing::promotion@4GiB".to_string(),
                    "TC-06 Guard promotion, 4 GiB pool".to_string()
                ),
            ]
        );
        assert_eq!(
            ids(Some(1 << 30))[1].0,
            "TC-06::guard_recovery_timing::promotion@1GiB"
        );
        assert_eq!(
            ids(Some(3 << 29))[1].0,
            "TC-06::guard_recovery_timing::promotion@1.50GiB"
        );
        // 0.05 GB, the default stack's pool, and a run that did not say.
        for small in [Some(53_687_091), None] {
            assert_eq!(ids(small)[1].0, "TC-06::guard_recovery_timing::promotion");
        }
    }

    #[test]
    fn figures_of_a_run_in_report_order() {
        let figures = sample_run().figures();
        let ids: Vec<&str> = figures.iter().map(|f| f.spec.id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "TC-05::cold::ttft_p50",
                "TC-05::cold::ttft_p90",
                "TC-05::cold::tpot_p50",
                "TC-05::cold::itl_p50",
                "TC-05::dram_hit::ttft_p50",
                "TC-05::dram_hit::ttft_p90",
                "TC-05::dram_hit::tpot_p50",
                "TC-05::dram_hit::itl_p50",
                "TC-05::concurrency_sweep::c2::throughput",
                "TC-05::concurrency_sweep::c2::ttft_p50",
                "TC-06::guard_recovery_timing::t1",
                "TC-06::guard_recovery_timing::promotion",
                "TC-05::cold::failed_requests",
                "TC-05::cold::wrong_tokens",
                "TC-05::dram_hit::failed_requests",
                "TC-05::dram_hit::wrong_tokens",
            ]
        );
        // Only ok requests; ITL is one median per request.
        assert_eq!(figures[0].values, vec![40.0, 44.0]);
        assert_eq!(figures[3].values, vec![2.0, 2.0]);
        assert_eq!(figures[8].values, vec![2.0]); // 1 request in 0.5 s
        assert_eq!(figures[8].spec.better, Better::Higher);
        assert_eq!(figures[9].values, vec![30.0]);
        assert_eq!(figures[10].values, vec![800.0]);
    }

    fn count(run: &RunResults, id: &str) -> Option<f64> {
        let figures = run.figures();
        let f = figures.iter().find(|f| f.spec.id == id)?;
        assert_eq!(f.spec.judged, Judged::AnyIncrease, "{id}");
        assert_eq!(f.values.len(), 1, "{id}: one count per run");
        Some(f.values[0])
    }

    #[test]
    fn failed_and_wrong_token_requests_are_counted_per_trial() {
        let mut run = sample_run();
        // The not-ok cold request (its error names no tokens): one failed.
        assert_eq!(count(&run, "TC-05::cold::failed_requests"), Some(1.0));
        assert_eq!(count(&run, "TC-05::cold::wrong_tokens"), Some(0.0));
        run.requests[2].error = Some("reference tokens: token 3 of 8 differs".into());
        assert_eq!(count(&run, "TC-05::cold::failed_requests"), Some(0.0));
        assert_eq!(count(&run, "TC-05::cold::wrong_tokens"), Some(1.0));
        // A trial that stopped at its first bad request recorded none: its
        // message counts.
        run.run.cases[1].outcome = TrialOutcome::Failed {
            message: "reference tokens: token 0 of 8 differs (x-request-id r1)
evidence: a"
                .into(),
        };
        assert_eq!(count(&run, "TC-05::dram_hit::wrong_tokens"), Some(1.0));
        run.run.cases[1].outcome = TrialOutcome::Failed {
            message: "stream of f004v1 failed: timed out after 30 s".into(),
        };
        assert_eq!(count(&run, "TC-05::dram_hit::failed_requests"), Some(1.0));
        assert_eq!(count(&run, "TC-05::dram_hit::wrong_tokens"), Some(0.0));
        // A failure that is no request of its own counts none (the round
        // still gives no verdict: it failed).
        run.run.cases[1].outcome = TrialOutcome::Failed {
            message: "host-tier hit: 0 blocks loaded".into(),
        };
        assert_eq!(count(&run, "TC-05::dram_hit::failed_requests"), Some(0.0));
        assert_eq!(
            run.run.failed_trials(),
            ["TC-05::dram_hit: host-tier hit: 0 blocks loaded"]
        );
        // A trial that did not run has no count: absent is not zero.
        run.run.cases[1].outcome = TrialOutcome::Ignored {
            reason: "not selected".into(),
        };
        assert_eq!(count(&run, "TC-05::dram_hit::failed_requests"), None);
        assert_eq!(count(&run, "TC-05::remote_hit::failed_requests"), None);
    }

    fn op(
        worker: &str,
        scope: &str,
        result: &str,
        count: u64,
        ms: f64,
    ) -> crate::evidence::KvcrOps {
        crate::evidence::KvcrOps {
            worker: worker.into(),
            scope: scope.into(),
            result: result.into(),
            count,
            seconds: ms / 1000.0,
        }
    }

    #[test]
    fn the_guard_promotion_stages_are_figures_when_recorded() {
        let mut run = sample_run();
        assert!(values(&run, "TC-06::guard_recovery_timing::promotion_setup").is_none());
        run.perf.recovery.as_mut().unwrap().promotion_stages =
            Some(crate::evidence::PromotionStages {
                recovery_ms: 0.2,
                setup_ms: 0.5,
                start_ms: 6.0,
            });
        // The recovery stage, KVCR's adoption of the pool, isolates the
        // promotion's path; the others do not hold still.
        for (id, want, family) in [
            ("recovery", 0.2, Family::Path),
            ("setup", 0.5, Family::Other),
            ("start", 6.0, Family::Other),
        ] {
            let id = format!("TC-06::guard_recovery_timing::promotion_{id}");
            let (spec, v) = values(&run, &id).unwrap();
            assert_eq!((v, spec.family), (vec![want], family), "{id}");
        }
        // The pull from the Guard for t1's request.
        let t1 = "TC-06::guard_recovery_timing::t1_kvcr::remote_deliver";
        assert!(values(&run, t1).is_none());
        run.perf.recovery.as_mut().unwrap().t1_kvcr_ops = vec![
            op("B", "remote_deliver", "success", 2, 30.0),
            op("B", "remote_deliver", "partial", 1, 90.0),
        ];
        assert_eq!(values(&run, t1).unwrap().1, [15.0]);
    }

    #[test]
    fn an_arms_first_request_is_a_warm_up_and_kvcr_op_times_are_figures() {
        let mut run = sample_run();
        run.requests = [90.0, 50.0, 52.0, 54.0]
            .iter()
            .map(|&ttft| request(Some(Arm::DramHit), None, ttft, true))
            .collect();
        // Two local delivers of 4 and 6 ms, and a failed one (no part).
        run.requests[1].kvcr_ops = vec![
            op("A", "local_deliver", "success", 2, 10.0),
            op("A", "local_deliver", "failed", 1, 500.0),
        ];
        run.requests[2].kvcr_ops = vec![op("A", "local_deliver", "success", 1, 6.0)];
        // The warm-up request's ops take no part either.
        run.requests[0].kvcr_ops = vec![op("A", "local_deliver", "success", 1, 99.0)];
        assert_eq!(
            values(&run, "TC-05::dram_hit::ttft_p50").unwrap().1,
            [50.0, 52.0, 54.0]
        );
        let (spec, v) = values(&run, "TC-05::dram_hit::kvcr::local_deliver").unwrap();
        // (10 + 6) ms over 3 operations: one value for the run.
        assert!((v[0] - 16.0 / 3.0).abs() < 1e-9 && v.len() == 1, "{v:?}");
        assert_eq!(spec.statistic, Statistic::Mean);
        assert_eq!((spec.unit.as_str(), spec.better), ("ms", Better::Lower));
        assert_eq!(spec.label, "dram_hit KVCR local_deliver (mean per op)");
        // A scope that never succeeded, or an arm without ops, has no
        // figure (not a 0).
        assert!(values(&run, "TC-05::dram_hit::kvcr::source_write").is_none());
        run.requests.iter_mut().for_each(|r| r.kvcr_ops.clear());
        assert!(run
            .figures()
            .iter()
            .all(|f| !f.spec.id.contains("::kvcr::")));
        // Two ok requests: nothing is dropped.
        run.requests.truncate(2);
        assert_eq!(
            values(&run, "TC-05::dram_hit::ttft_p50").unwrap().1,
            [90.0, 50.0]
        );
    }

    #[test]
    fn a_deliver_bench_is_one_local_deliver_figure_per_run() {
        let id = "TC-05::kvcr_deliver_bench::local_deliver";
        let mut run = sample_run();
        assert!(values(&run, id).is_none(), "no bench, no figure");
        let bench = |kvcr_ops| crate::evidence::KvcrBench {
            worker: "A".into(),
            ops: 400,
            failed: 0,
            blocks_per_op: 4,
            wall_seconds: 2.0,
            first_failure: None,
            kvcr_ops,
            op_seconds: Vec::new(),
        };
        // 400 delivers in 2 s: 5 ms each; the steps inside them and an
        // unsuccessful deliver take no part.
        run.perf.kvcr_bench = vec![bench(vec![
            op("A", "local_deliver", "success", 400, 2_000.0),
            op("A", "local_deliver", "failed", 1, 900.0),
            op("A", "transfer", "success", 400, 1_200.0),
        ])];
        let (spec, v) = values(&run, id).unwrap();
        assert_eq!(v, [5.0]);
        assert_eq!(spec.label, "KVCR local_deliver, bench (mean per op)");
        assert_eq!(
            (spec.unit.as_str(), spec.statistic, spec.better, spec.judged),
            ("ms", Statistic::Mean, Better::Lower, Judged::Interval)
        );
        assert!(run
            .figures()
            .iter()
            .all(|f| !f.spec.id.starts_with("TC-05::kvcr_deliver_bench::transfer")));
        // Two benches in one run are one value: summed time over summed count.
        run.perf.kvcr_bench.push(bench(vec![op(
            "A",
            "local_deliver",
            "success",
            100,
            1_000.0,
        )]));
        assert_eq!(values(&run, id).unwrap().1, [6.0]);
        // A bench KVCR timed none of has no figure (absent is not 0).
        run.perf.kvcr_bench = vec![bench(Vec::new())];
        assert!(values(&run, id).is_none());
        // Read back from results.json: the figure survives the round trip.
        run.perf.kvcr_bench = vec![bench(vec![op("A", "local_deliver", "success", 2, 8.0)])];
        let text = serde_json::to_string(&run.perf).unwrap();
        let back: PerfSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back.kvcr_bench, run.perf.kvcr_bench);
        assert!(!serde_json::to_string(&PerfSummary::default())
            .unwrap()
            .contains("kvcr_bench"));
    }

    #[test]
    fn a_deliver_bench_with_per_op_times_is_also_a_p10_figure_of_them() {
        let id = "TC-05::kvcr_deliver_bench::deliver_p10";
        let mut run = sample_run();
        let bench = |op_seconds: Vec<f64>| crate::evidence::KvcrBench {
            worker: "A".into(),
            ops: op_seconds.len() as u64,
            failed: 0,
            blocks_per_op: 4,
            // Not the ops' sum: serde_json's parse of a sum's 17 digits may
            // miss its last bit, and the round trip below compares exactly.
            wall_seconds: 0.02,
            first_failure: None,
            kvcr_ops: Vec::new(),
            op_seconds,
        };
        // A run recorded before the worker timed each deliver has none.
        run.perf.kvcr_bench = vec![bench(Vec::new())];
        assert!(values(&run, id).is_none(), "no per-op times, no figure");
        run.perf.kvcr_bench = vec![bench(vec![0.001, 0.002, 0.010])];
        let (spec, v) = values(&run, id).unwrap();
        assert_eq!(v, [1.0, 2.0, 10.0], "every deliver a sample, in ms");
        assert_eq!(spec.label, "KVCR deliver, bench (p10 per op)");
        assert_eq!(
            (spec.unit.as_str(), spec.statistic, spec.better, spec.judged),
            ("ms", Statistic::P10, Better::Lower, Judged::Interval)
        );
        assert_eq!(spec.family, Family::Path, "it isolates the deliver path");
        let text = serde_json::to_string(&run.perf).unwrap();
        let back: PerfSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back.kvcr_bench, run.perf.kvcr_bench);
    }

    fn pull_bench(kvcr_ops: Vec<KvcrOps>, op_seconds: Vec<f64>) -> crate::evidence::KvcrBench {
        crate::evidence::KvcrBench {
            worker: "B".into(),
            ops: 400,
            failed: 0,
            blocks_per_op: 4,
            wall_seconds: 4.0,
            first_failure: None,
            kvcr_ops,
            op_seconds,
        }
    }

    #[test]
    fn a_pull_bench_is_one_remote_deliver_figure_per_run() {
        let id = "TC-05::kvcr_pull_bench::remote_deliver";
        let mut run = sample_run();
        assert!(values(&run, id).is_none(), "no bench, no figure");
        // 400 pulls in 4 s on the target: 10 ms each; the source's writes,
        // an unsuccessful pull and the steps inside them take no part.
        run.perf.kvcr_pull_bench = vec![pull_bench(
            vec![
                op("B", "remote_deliver", "success", 400, 4_000.0),
                op("B", "remote_deliver", "failed", 1, 900.0),
                op("B", "transfer", "success", 400, 1_200.0),
                op("A", "source_write", "success", 400, 2_000.0),
            ],
            Vec::new(),
        )];
        let (spec, v) = values(&run, id).unwrap();
        assert_eq!(v, [10.0]);
        assert_eq!(spec.label, "KVCR remote_deliver, bench (mean per op)");
        assert_eq!(
            (spec.unit.as_str(), spec.statistic, spec.better, spec.judged),
            ("ms", Statistic::Mean, Better::Lower, Judged::Interval)
        );
        let pull_ids: Vec<String> = run
            .figures()
            .into_iter()
            .map(|f| f.spec.id)
            .filter(|id| id.starts_with("TC-05::kvcr_pull_bench::"))
            .collect();
        assert_eq!(pull_ids, [id], "no source_write or transfer figure");
        // The pull bench is no deliver bench, and the other way round.
        assert!(run
            .figures()
            .iter()
            .all(|f| !f.spec.id.starts_with("TC-05::kvcr_deliver_bench")));
        run.perf.kvcr_bench = run.perf.kvcr_pull_bench.clone();
        run.perf.kvcr_pull_bench.clear();
        assert!(values(&run, id).is_none());
        // A bench KVCR timed no pull of has no figure (absent is not 0).
        run.perf.kvcr_pull_bench = vec![pull_bench(Vec::new(), Vec::new())];
        assert!(values(&run, id).is_none());
    }

    #[test]
    fn a_pull_bench_with_per_op_times_is_also_a_p10_figure_of_them() {
        let id = "TC-05::kvcr_pull_bench::pull_p10";
        let mut run = sample_run();
        run.perf.kvcr_pull_bench = vec![pull_bench(Vec::new(), Vec::new())];
        assert!(values(&run, id).is_none(), "no per-op times, no figure");
        run.perf.kvcr_pull_bench = vec![pull_bench(Vec::new(), vec![0.009, 0.011, 0.030])];
        let (spec, v) = values(&run, id).unwrap();
        assert_eq!(v, [9.0, 11.0, 30.0], "every pull a sample, in ms");
        assert_eq!(spec.label, "KVCR pull, bench (p10 per op)");
        assert_eq!(spec.family, Family::Path);
        assert_eq!(
            (spec.unit.as_str(), spec.statistic, spec.better, spec.judged),
            ("ms", Statistic::P10, Better::Lower, Judged::Interval)
        );
        assert!(values(&run, "TC-05::kvcr_deliver_bench::deliver_p10").is_none());
        // Read back from results.json: the bench survives the round trip.
        let text = serde_json::to_string(&run.perf).unwrap();
        assert!(text.contains("\"kvcr_pull_bench\""), "{text}");
        let back: PerfSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back.kvcr_pull_bench, run.perf.kvcr_pull_bench);
        assert!(!serde_json::to_string(&PerfSummary::default())
            .unwrap()
            .contains("kvcr_pull_bench"));
    }

    /// A phase2_g3 run's results.json in the layout TC-12 writes (ten
    /// read-backs from disk; the values are illustrative).
    fn tc12_run() -> RunResults {
        RunResults::parse(include_str!("testdata/results-tc12.json")).unwrap()
    }

    #[test]
    fn a_g3_read_bench_is_a_g3_deliver_mean_and_a_p10_of_its_reads() {
        let (mean_id, p10_id) = (
            "TC-12::g3_read_bench::g3_deliver",
            "TC-12::g3_read_bench::read_p10",
        );
        let mut run = tc12_run();
        assert!(values(&run, p10_id).is_none(), "no bench, no figure");
        let bench = |kvcr_ops, op_seconds: Vec<f64>| crate::evidence::KvcrBench {
            worker: "A".into(),
            ops: 400,
            failed: 0,
            blocks_per_op: 4,
            wall_seconds: 1.2,
            first_failure: None,
            kvcr_ops,
            op_seconds,
        };
        // 400 reads in 1.2 s of KVCR's time: 3 ms each; an unsuccessful read
        // and a scope the bench does not time take no part.
        run.perf.g3_read_bench = vec![bench(
            vec![
                op("A", "g3_deliver", "success", 400, 1_200.0),
                op("A", "g3_deliver", "failed", 1, 900.0),
                op("A", "g3_store", "success", 1, 8.0),
            ],
            vec![0.002, 0.003, 0.010],
        )];
        let ids: Vec<String> = run.figures().into_iter().map(|f| f.spec.id).collect();
        assert_eq!(
            ids,
            [
                "TC-12::disk_tier::g3_hit",
                "TC-12::disk_tier::kvcr::g3_deliver",
                mean_id,
                p10_id,
            ],
            "beside the read-backs' figures, and no deliver bench's"
        );
        let (spec, v) = values(&run, mean_id).unwrap();
        assert_eq!(v, [3.0]);
        assert_eq!(spec.label, "KVCR g3_deliver, G3 read bench (mean per op)");
        assert_eq!(
            (spec.unit.as_str(), spec.statistic, spec.better, spec.judged),
            ("ms", Statistic::Mean, Better::Lower, Judged::Interval)
        );
        let (spec, v) = values(&run, p10_id).unwrap();
        assert_eq!(v, [2.0, 3.0, 10.0], "every read a sample, in ms");
        assert_eq!(spec.label, "KVCR read, G3 read bench (p10 per op)");
        assert_eq!(spec.family, Family::Path);
        assert_eq!(
            (spec.unit.as_str(), spec.statistic, spec.better, spec.judged),
            ("ms", Statistic::P10, Better::Lower, Judged::Interval)
        );
        // A bench KVCR timed none of, without per-op times, has no figure
        // (absent is not 0).
        run.perf.g3_read_bench = vec![bench(Vec::new(), Vec::new())];
        assert!(values(&run, mean_id).is_none() && values(&run, p10_id).is_none());
        // Read back from results.json: the bench survives the round trip,
        // apart from the deliver bench's.
        run.perf.g3_read_bench = vec![bench(
            vec![op("A", "g3_deliver", "success", 2, 8.0)],
            vec![0.004],
        )];
        let text = serde_json::to_string(&run.perf).unwrap();
        assert!(text.contains("\"g3_read_bench\"") && !text.contains("\"kvcr_bench\""));
        let back: PerfSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back.g3_read_bench, run.perf.g3_read_bench);
        assert!(!serde_json::to_string(&PerfSummary::default())
            .unwrap()
            .contains("g3_read_bench"));
    }

    #[test]
    fn tc12_read_backs_are_the_disk_tier_figures() {
        let run = tc12_run();
        let ids: Vec<String> = run.figures().into_iter().map(|f| f.spec.id).collect();
        assert_eq!(
            ids,
            [
                "TC-12::disk_tier::g3_hit",
                "TC-12::disk_tier::kvcr::g3_deliver",
            ],
            "no TC-05 figure and no count from TC-12's requests, and none of \
             the store one read-back's window held"
        );
        // The first read-back is a warm-up: nine of ten.
        let (hit, ttft) = values(&run, "TC-12::disk_tier::g3_hit").unwrap();
        assert_eq!(ttft, [47.2, 45.9, 48.4, 46.6, 47.9, 45.1, 49.3, 46.2, 47.5]);
        assert_eq!(hit.label, "disk_tier g3_hit TTFT p50");
        assert_eq!(
            (hit.unit.as_str(), hit.statistic, hit.better, hit.judged),
            ("ms", Statistic::P50, Better::Lower, Judged::Interval)
        );
        let (read, ms) = values(&run, "TC-12::disk_tier::kvcr::g3_deliver").unwrap();
        assert_eq!(ms.len(), 1, "one value per run");
        assert_eq!(read.label, "disk_tier g3_hit KVCR g3_deliver (mean per op)");
        assert_eq!(
            (read.statistic, read.better),
            (Statistic::Mean, Better::Lower)
        );
        assert!(values(&run, "TC-12::disk_tier::kvcr::g3_store").is_none());
        // A read into DRAM first is a read from disk too: the read-backs
        // after the warm-up that ran it, as one value.
        let mut fills = tc12_run();
        for r in fills.requests.iter_mut().take(3) {
            r.kvcr_ops.push(op("A", "g3_fill", "success", 2, 12.0));
        }
        assert_eq!(
            values(&fills, "TC-12::disk_tier::kvcr::g3_fill").unwrap().1,
            [6.0]
        );
    }

    #[test]
    fn disk_tier_figures_are_absent_without_read_backs_never_zero() {
        // A run without TC-12 has none.
        assert!(sample_run()
            .figures()
            .iter()
            .all(|f| !f.spec.id.starts_with("TC-12")));
        // Read-backs without KVCR's operations: the TTFT figure only.
        let mut run = tc12_run();
        run.requests.iter_mut().for_each(|r| r.kvcr_ops.clear());
        let ids: Vec<String> = run.figures().into_iter().map(|f| f.spec.id).collect();
        assert_eq!(ids, ["TC-12::disk_tier::g3_hit"]);
        // A read-back that failed is no sample; none ok, no figure.
        run.requests[3].ok = false;
        assert_eq!(values(&run, "TC-12::disk_tier::g3_hit").unwrap().1.len(), 8);
        run.requests.iter_mut().for_each(|r| r.ok = false);
        assert!(run.figures().is_empty());
    }

    #[test]
    fn read_backs_beside_tc05_are_no_arms_samples() {
        let mut run = sample_run();
        let before = run.figures();
        let read_backs = tc12_run().requests;
        run.requests.extend(read_backs);
        let after = run.figures();
        let tc05 = |figures: &[FigureValues]| -> Vec<FigureValues> {
            figures
                .iter()
                .filter(|f| !f.spec.id.starts_with("TC-12"))
                .cloned()
                .collect()
        };
        assert_eq!(tc05(&after), before);
        assert_eq!(after.len(), before.len() + 2);
    }

    #[test]
    fn the_wrong_token_claim_is_the_token_checks_own() {
        let v = crate::verdict::tokens::expect_reference_tokens(&[1, 2], &[1, 3]).unwrap_err();
        let message = crate::suite::CaseError::from(v).to_string();
        assert_eq!(
            RequestFault::of_trial_failure(&message),
            Some(RequestFault::WrongTokens),
            "{message}"
        );
        assert_eq!(
            RequestFault::of_request_error(&message),
            RequestFault::WrongTokens
        );
        assert_eq!(
            RequestFault::of_trial_failure("concurrency 4: stream of f001v0 failed: HTTP 503"),
            Some(RequestFault::Failed)
        );
    }

    fn workload_request(ttft: f64, ok: bool) -> RequestRecord {
        RequestRecord {
            case: WORKLOAD_CASE.into(),
            ..request(None, None, ttft, ok)
        }
    }

    /// The sample run with a trace replayed: three replay requests, one
    /// not ok.
    fn run_with_workload() -> RunResults {
        let mut run = sample_run();
        run.perf.workload = Some(crate::evidence::sample::workload());
        run.requests.extend([
            workload_request(120.0, true),
            workload_request(150.0, true),
            workload_request(900.0, false),
        ]);
        run
    }

    fn values(run: &RunResults, id: &str) -> Option<(FigureSpec, Vec<f64>)> {
        run.figures()
            .into_iter()
            .find(|f| f.spec.id == id)
            .map(|f| (f.spec, f.values))
    }

    #[test]
    fn a_trace_replay_gives_hit_rate_per_tier_goodput_latency_and_counts() {
        let run = run_with_workload();
        let ids: Vec<String> = run
            .figures()
            .into_iter()
            .map(|f| f.spec.id)
            .filter(|id| id.starts_with("WL-01::"))
            .collect();
        assert_eq!(
            ids,
            [
                "WL-01::hit_rate::device",
                "WL-01::hit_rate::dram",
                "WL-01::hit_rate::peer",
                "WL-01::hit_rate::disk",
                "WL-01::hit_rate::total",
                "WL-01::goodput",
                "WL-01::ttft_p50",
                "WL-01::ttft_p90",
                "WL-01::tpot_p50",
                "WL-01::max_sustained_rate",
                "WL-01::failed_requests",
                "WL-01::wrong_tokens",
            ]
        );
        let w = run.perf.workload.as_ref().unwrap();
        let (total, v) = values(&run, "WL-01::hit_rate::total").unwrap();
        assert_eq!(v, [w.on.hit_rate.total * 100.0]);
        assert_eq!((total.unit.as_str(), total.better), ("%", Better::Higher));
        assert_eq!(total.statistic, Statistic::Mean);
        // A tier never used stays in, as a 0.
        assert_eq!(values(&run, "WL-01::hit_rate::disk").unwrap().1, [0.0]);
        let (goodput, v) = values(&run, "WL-01::goodput").unwrap();
        assert_eq!(v, [w.on.goodput_per_s]);
        assert_eq!(goodput.better, Better::Higher);
        // The ok replay requests, not TC-05's and not the failed one.
        let (p90, v) = values(&run, "WL-01::ttft_p90").unwrap();
        assert_eq!(v, [120.0, 150.0]);
        assert_eq!((p90.statistic, p90.better), (Statistic::P90, Better::Lower));
        assert_eq!(values(&run, "WL-01::tpot_p50").unwrap().1, [12.0, 15.0]);
        assert_eq!(
            values(&run, "WL-01::max_sustained_rate").unwrap().1,
            [w.max_sustained_rate_per_s.unwrap()]
        );
        assert_eq!(count(&run, "WL-01::failed_requests"), Some(0.0));
        assert_eq!(count(&run, "WL-01::wrong_tokens"), Some(0.0));
        // The replay's requests are no TC-05 figure's samples.
        assert_eq!(
            values(&run, "TC-05::cold::ttft_p50").unwrap().1,
            [40.0, 44.0]
        );
    }

    #[test]
    fn replay_counts_and_the_sweep_follow_the_summary() {
        let mut run = run_with_workload();
        let w = run.perf.workload.as_mut().unwrap();
        w.on.failed = 2;
        w.on.wrong_tokens = 1;
        // A sweep that sustained no rate sustained 0 /s.
        w.max_sustained_rate_per_s = None;
        assert_eq!(count(&run, "WL-01::failed_requests"), Some(2.0));
        assert_eq!(count(&run, "WL-01::wrong_tokens"), Some(1.0));
        assert_eq!(values(&run, "WL-01::max_sustained_rate").unwrap().1, [0.0]);
        // Without a sweep there is no such figure.
        run.perf.workload.as_mut().unwrap().sweep.clear();
        assert!(values(&run, "WL-01::max_sustained_rate").is_none());
        // Without request records, the summary's TTFT samples.
        run.requests.retain(|r| r.case != WORKLOAD_CASE);
        let samples = run
            .perf
            .workload
            .as_ref()
            .unwrap()
            .on
            .ttft_samples_ms
            .clone();
        assert_eq!(values(&run, "WL-01::ttft_p50").unwrap().1, samples);
        assert!(values(&run, "WL-01::tpot_p50").is_none());
        // No replay, no WL-01 figure.
        run.perf.workload = None;
        assert!(run
            .figures()
            .iter()
            .all(|f| !f.spec.id.starts_with("WL-01")));
    }

    #[test]
    fn a_real_results_file_parses_and_a_wrong_schema_is_refused() {
        let text = include_str!("testdata/results-tc05-tc06.json");
        let run = RunResults::parse(text).unwrap();
        let figures = run.figures();
        assert!(figures
            .iter()
            .any(|f| f.spec.id == "TC-05::local_hit::ttft_p50"));
        assert!(figures
            .iter()
            .any(|f| f.spec.id == "TC-06::guard_recovery_timing::t1"));
        assert_eq!(count(&run, "TC-05::remote_hit::wrong_tokens"), Some(0.0));
        assert_eq!(
            count(&run, "TC-05::concurrency_sweep::failed_requests"),
            Some(0.0)
        );
        assert!(run.run.started().is_some());
        assert!(run.run.failed_trials().is_empty());
        let bumped = text.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1);
        let err = RunResults::parse(&bumped).unwrap_err();
        assert!(err.contains("schema_version 99"), "{err}");
    }
}
