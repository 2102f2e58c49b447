//! Performance data: per-request records, per-arm summaries, the
//! concurrency sweep and the recovery timeline, with field names a
//! vLLM-bench / AIPerf user recognises (`ttft_ms`, `tpot_ms`, `itl_ms`, `e2el_ms`).

use serde::{Deserialize, Serialize};

use super::kvcr_ops::{KvcrBench, KvcrOps};

use crate::stats::{
    estimate, quantile_interval, small_sample_widening, windowed_throughput, Bootstrap,
    DelaySummary, Interval, QuantileInterval, ScheduledSend, Statistic,
};

/// Confidence of the per-arm and per-level intervals.
pub const INTERVAL_CONFIDENCE: f64 = 0.95;

/// Windows a sweep level's wall time is cut into for its throughput
/// interval (batch means).
pub const THROUGHPUT_WINDOWS: usize = 6;

/// One streamed request as the client saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The case that sent it (`TC-05`).
    pub case: String,
    /// The performance arm, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<Arm>,
    /// The sweep concurrency level, if sent by the sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Time to first token (client side), ms.
    pub ttft_ms: Option<f64>,
    /// Time per output token after the first: (e2el − ttft) / (output_tokens − 1), ms.
    pub tpot_ms: Option<f64>,
    /// Inter-token latencies: the gaps between chunks, ms.
    pub itl_ms: Vec<f64>,
    /// End-to-end latency, ms.
    pub e2el_ms: Option<f64>,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub output_tokens: u32,
    /// The serving worker's instance id.
    pub worker_id: Option<u64>,
    /// HTTP 200, non-empty choices, reference tokens.
    pub ok: bool,
    /// Why it was not ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The `x-request-id` it was sent with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// When its first content chunk arrived, CLOCK_MONOTONIC ns (send + TTFT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_monotonic_ns: Option<u64>,
    /// That arrival minus the engine's own stamp of sending the first token,
    /// ms (see [`TtftAccuracy`]); absent where the engine stamps nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_offset_ms: Option<f64>,
    /// Sweep requests: when it was sent, ms after its level started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at_ms: Option<f64>,
    /// Open-loop sweep requests: the level's arrival rate, requests/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<u32>,
    /// Open-loop sweep requests: intended and actual send, and the
    /// schedule delay between them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduledSend>,
    /// KVCR's own operations during the request, per worker, scope and
    /// result (TC-05's arms, TC-12's read-backs); empty where not recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kvcr_ops: Vec<KvcrOps>,
}

/// A TC-05 performance arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// A prompt no cache has seen.
    Cold,
    /// A hit in the worker's device prefix cache.
    LocalHit,
    /// A hit in host memory (KVCR pool or host tier) after device eviction.
    DramHit,
    /// A hinted peer transfer.
    RemoteHit,
}

impl Arm {
    /// All arms in report order.
    pub const ALL: [Arm; 4] = [Arm::Cold, Arm::LocalHit, Arm::DramHit, Arm::RemoteHit];

    /// The arm's name as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::Cold => "cold",
            Arm::LocalHit => "local_hit",
            Arm::DramHit => "dram_hit",
            Arm::RemoteHit => "remote_hit",
        }
    }
}

impl std::fmt::Display for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The case whose measured requests (no arm) are read-backs from KVCR's
/// disk tier (G3): each a prefix evicted from KVCR's DRAM pool and
/// delivered again from disk (TC-12).
pub const DISK_TIER_CASE: &str = "TC-12";

/// Mean and nearest-rank percentiles of a sample, in the sample's unit.
/// An empty sample has `n = 0` and every statistic `None` (JSON `null`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Percentiles {
    /// Sample size.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: Option<f64>,
    /// Median (nearest rank).
    pub p50: Option<f64>,
    /// 90th percentile (nearest rank).
    pub p90: Option<f64>,
    /// 99th percentile (nearest rank).
    pub p99: Option<f64>,
}

/// Mean and percentiles of `values`, ignoring non-finite values.
///
/// Percentiles use the **nearest-rank** method: the p-th percentile is the
/// smallest value with at least p% of the sample at or below it, i.e. the
/// value at 1-based rank ⌈p/100 · n⌉ of the sorted sample. Every reported
/// percentile is therefore an observed value (no interpolation).
pub fn percentiles(values: &[f64]) -> Percentiles {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Percentiles::default();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let rank = |p: f64| {
        let r = (p / 100.0 * n as f64).ceil() as usize;
        v[r.clamp(1, n) - 1]
    };
    Percentiles {
        n,
        mean: Some(v.iter().sum::<f64>() / n as f64),
        p50: Some(rank(50.0)),
        p90: Some(rank(90.0)),
        p99: Some(rank(99.0)),
    }
}

/// TTFT of the KVCR-disabled reference engine, the baseline of every arm.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Baseline {
    /// A prompt the reference engine has not seen.
    pub cold_ttft_ms: Percentiles,
    /// The same prompt again (the reference engine's own prefix cache).
    pub warm_ttft_ms: Percentiles,
}

/// Differences of an arm's TTFT p50 from the baselines' p50, ms
/// (negative = faster than the baseline).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct DeltaVsBaseline {
    /// Arm p50 − baseline cold p50.
    pub cold: Option<f64>,
    /// Arm p50 − baseline warm p50.
    pub warm: Option<f64>,
}

/// One arm's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmSummary {
    /// The arm.
    pub arm: Arm,
    /// Requests summarized (the ok ones).
    pub n: usize,
    /// Time to first token.
    pub ttft_ms: Percentiles,
    /// Time per output token.
    pub tpot_ms: Percentiles,
    /// Inter-token latency (all gaps of all requests).
    pub itl_ms: Percentiles,
    /// TTFT p50 against the KVCR-disabled baselines.
    pub delta_vs_baseline_ms: DeltaVsBaseline,
    /// The TTFT median's 95 % order-statistic interval (distribution-free);
    /// absent below 6 requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_interval_ms: Option<QuantileInterval>,
    /// The TTFT p90's 95 % interval; absent below 36 requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p90_interval_ms: Option<QuantileInterval>,
}

impl ArmSummary {
    /// Summarizes the ok requests of `arm` among `requests`.
    pub fn from_requests(
        arm: Arm,
        requests: &[RequestRecord],
        baseline: Option<&Baseline>,
    ) -> Self {
        let mine: Vec<&RequestRecord> = requests
            .iter()
            .filter(|r| r.ok && r.arm == Some(arm))
            .collect();
        let ttft_values: Vec<f64> = mine.iter().filter_map(|r| r.ttft_ms).collect();
        let ttft = percentiles(&ttft_values);
        let tpot = percentiles(&mine.iter().filter_map(|r| r.tpot_ms).collect::<Vec<_>>());
        let itl = percentiles(
            &mine
                .iter()
                .flat_map(|r| r.itl_ms.iter().copied())
                .collect::<Vec<_>>(),
        );
        let delta = |b: Option<f64>| Some(ttft.p50? - b?);
        ArmSummary {
            arm,
            n: mine.len(),
            ttft_ms: ttft,
            tpot_ms: tpot,
            itl_ms: itl,
            delta_vs_baseline_ms: DeltaVsBaseline {
                cold: delta(baseline.and_then(|b| b.cold_ttft_ms.p50)),
                warm: delta(baseline.and_then(|b| b.warm_ttft_ms.p50)),
            },
            ttft_p50_interval_ms: quantile_interval(&ttft_values, 0.5, INTERVAL_CONFIDENCE),
            ttft_p90_interval_ms: quantile_interval(&ttft_values, 0.9, INTERVAL_CONFIDENCE),
        }
    }
}

/// One level of the concurrency sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepLevel {
    /// Requests in flight.
    pub concurrency: u32,
    /// Requests completed ok.
    pub requests: usize,
    /// Wall time of the level, seconds.
    pub duration_s: f64,
    /// Ok requests per second.
    pub request_throughput_per_s: f64,
    /// Generated tokens per second.
    pub output_throughput_tok_per_s: f64,
    /// Time to first token.
    pub ttft_ms: Percentiles,
    /// Time per output token.
    pub tpot_ms: Percentiles,
    /// The request throughput's 95 % interval: batch means over
    /// [`THROUGHPUT_WINDOWS`] equal spans of the level, widened for their
    /// number ([`small_sample_widening`]); absent when the requests carry
    /// no send instants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_throughput_interval_per_s: Option<Interval>,
    /// The TTFT median's 95 % order-statistic interval; absent below 6 requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_interval_ms: Option<QuantileInterval>,
    /// The TTFT p90's 95 % interval; absent below 36 requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p90_interval_ms: Option<QuantileInterval>,
    /// An open-loop level: its schedule and how well it was kept. Absent
    /// for a closed-loop level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopLevel>,
}

/// What an open-loop sweep level planned and how late it sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenLoopLevel {
    /// Arrival rate, requests per second (Poisson).
    pub rate_per_s: u32,
    /// Seed of the arrival schedule.
    pub seed: u64,
    /// Schedule delay (actual − intended send) over the level's requests.
    pub schedule_delay_ms: Option<DelaySummary>,
    /// TTFT counted from the intended send (schedule delay + TTFT): what a
    /// user arriving on schedule saw, free of coordinated omission.
    pub ttft_from_intended_ms: Percentiles,
}

impl SweepLevel {
    /// The figures' key of the level: `c<N>` for a closed-loop level,
    /// `r<rate>` for an open-loop one.
    pub fn key(&self) -> String {
        match &self.open_loop {
            Some(o) => format!("r{}", o.rate_per_s),
            None => format!("c{}", self.concurrency),
        }
    }

    /// Whether `r` was sent by this level.
    pub fn holds(&self, r: &RequestRecord) -> bool {
        r.arm.is_none()
            && match &self.open_loop {
                Some(o) => r.rate_per_s == Some(o.rate_per_s),
                None => r.rate_per_s.is_none() && r.concurrency == Some(self.concurrency),
            }
    }

    /// Summarizes an open-loop level at `rate_per_s` from `seed`: the
    /// closed-loop figures ([`SweepLevel::from_requests`], with
    /// `concurrency` the most requests that were in flight at once) and the
    /// schedule delays of its requests.
    pub fn open_loop(
        rate_per_s: u32,
        seed: u64,
        requests: &[RequestRecord],
        duration_s: f64,
    ) -> Self {
        let mut level = SweepLevel::from_requests(peak_in_flight(requests), requests, duration_s);
        let sends: Vec<ScheduledSend> = requests.iter().filter_map(|r| r.schedule).collect();
        let from_intended: Vec<f64> = requests
            .iter()
            .filter(|r| r.ok)
            .filter_map(|r| Some(r.schedule?.from_intended_ms(r.ttft_ms?)))
            .collect();
        level.open_loop = Some(OpenLoopLevel {
            rate_per_s,
            seed,
            schedule_delay_ms: DelaySummary::of(&sends),
            ttft_from_intended_ms: percentiles(&from_intended),
        });
        level
    }

    /// Summarizes the ok requests of one level that took `duration_s`.
    pub fn from_requests(concurrency: u32, requests: &[RequestRecord], duration_s: f64) -> Self {
        let ok: Vec<&RequestRecord> = requests.iter().filter(|r| r.ok).collect();
        let ttft_values: Vec<f64> = ok.iter().filter_map(|r| r.ttft_ms).collect();
        let tokens: u64 = ok.iter().map(|r| u64::from(r.output_tokens)).sum();
        let per_s = |x: f64| {
            if duration_s > 0.0 {
                x / duration_s
            } else {
                0.0
            }
        };
        SweepLevel {
            concurrency,
            requests: ok.len(),
            duration_s,
            request_throughput_per_s: per_s(ok.len() as f64),
            output_throughput_tok_per_s: per_s(tokens as f64),
            ttft_ms: percentiles(&ttft_values),
            tpot_ms: percentiles(&ok.iter().filter_map(|r| r.tpot_ms).collect::<Vec<_>>()),
            request_throughput_interval_per_s: throughput_interval(&ok, duration_s),
            ttft_p50_interval_ms: quantile_interval(&ttft_values, 0.5, INTERVAL_CONFIDENCE),
            ttft_p90_interval_ms: quantile_interval(&ttft_values, 0.9, INTERVAL_CONFIDENCE),
            open_loop: None,
        }
    }
}

/// When each request ended, seconds after its level started (send + E2EL);
/// `None` when a request lacks either.
fn done_instants_s(requests: &[&RequestRecord]) -> Option<Vec<f64>> {
    requests
        .iter()
        .map(|r| Some((r.sent_at_ms? + r.e2el_ms?) / 1000.0))
        .collect()
}

/// The throughput's interval (see [`SweepLevel::request_throughput_interval_per_s`]).
fn throughput_interval(ok: &[&RequestRecord], duration_s: f64) -> Option<Interval> {
    let done = done_instants_s(ok)?;
    let rates = windowed_throughput(&done, duration_s, THROUGHPUT_WINDOWS);
    let e = estimate(
        &rates,
        Statistic::Mean,
        INTERVAL_CONFIDENCE,
        &Bootstrap::default(),
    )?;
    let widen = small_sample_widening(rates.len(), INTERVAL_CONFIDENCE);
    Some(Interval {
        lo: e.value - (e.value - e.interval.lo) * widen,
        hi: e.value + (e.interval.hi - e.value) * widen,
    })
}

/// The most requests in flight at once (from send instants and E2EL); 0
/// when none carries both.
fn peak_in_flight(requests: &[RequestRecord]) -> u32 {
    let mut events: Vec<(f64, i32)> = requests
        .iter()
        .filter_map(|r| Some((r.sent_at_ms?, r.e2el_ms?)))
        .flat_map(|(sent, e2el)| [(sent, 1), (sent + e2el, -1)])
        .collect();
    // Ends before starts at the same instant.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        peak = peak.max(now);
    }
    peak.max(0) as u32
}

/// One TC-06 attempt after the kill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoveryAttempt {
    /// When it was sent, ms after t0 (the SIGKILL).
    pub at_ms: f64,
    /// The worker it was pinned to.
    pub target: String,
    /// Its verdict (`guard_served`, `recomputed`, `error: ...`, `replacement_served`).
    pub outcome: String,
}

/// TC-06: what happened after t0 (the harness's monotonic clock at SIGKILL).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RecoveryTimeline {
    /// First correct, Guard-sourced response, ms after t0.
    pub t1_ms: Option<f64>,
    /// First correct response served by the replacement, ms after t0.
    pub t2_ms: Option<f64>,
    /// The Guard's own promotion time, as it logged it.
    pub promotion_ms: Option<f64>,
    /// Bytes of the promoted Guard's pools (its `ready` line): the figures
    /// of a production-size pool carry its size (`compare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard_pool_bytes: Option<u64>,
    /// The promotion's stages as the Guard logged them (`guard_promoted`'s
    /// `recovery_ms`, `setup_ms`, `start_ms`); absent in runs recorded
    /// before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_stages: Option<PromotionStages>,
    /// KVCR's own operations on the target during the attempt the Guard
    /// served (t1's request): its `remote_deliver` is the pull from the
    /// Guard.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub t1_kvcr_ops: Vec<KvcrOps>,
    /// Every attempt in order.
    pub attempts: Vec<RecoveryAttempt>,
    /// Why there is no t1, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_t1_reason: Option<String>,
}

/// The stages of a Guard promotion, ms, as the Guard measured them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PromotionStages {
    /// Draining the dead primary's journal and recovering its records.
    pub recovery_ms: f64,
    /// Setting up the pool to serve.
    pub setup_ms: f64,
    /// Starting the serving core.
    pub start_ms: f64,
}

/// What a TTFT delta is worth: per request, the client's first-chunk arrival
/// minus the engine's own stamp of sending its first token, both on
/// CLOCK_MONOTONIC (system-wide on Linux). The offset is what the client's
/// TTFT holds beyond the engine's: the frontend (detokenising, SSE), the
/// HTTP hop and the client's own decode. A TTFT delta between two arms that
/// is within the offset's spread (p99 − p50) is not a difference the
/// engine made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TtftAccuracy {
    /// The case (`TC-05::cold`).
    pub case: String,
    /// The engine (`cpu`, `vllm`).
    pub engine: String,
    /// Where the engine's stamp comes from.
    pub source: String,
    /// The offset distribution, ms; absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_ms: Option<OffsetStats>,
    /// Why there is no distribution (the engine reports no per-request
    /// first-token instant, or a stamp was missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// A distribution of offsets, ms (nearest-rank percentiles, as [`percentiles`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OffsetStats {
    /// Requests.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// One request's two instants for [`ttft_offsets`].
#[derive(Debug, Clone, PartialEq)]
pub struct FirstTokenPair {
    /// The request (its `x-request-id`).
    pub request_id: String,
    /// The client's first-chunk arrival, CLOCK_MONOTONIC ns.
    pub client_ns: Option<u64>,
    /// The engine's first-token send, CLOCK_MONOTONIC ns.
    pub engine_ns: Option<u64>,
}

/// The offsets (client − engine, ms, signed) of `pairs` and their
/// distribution. Every request must have both instants: a missing one is an
/// error naming the request, never a zero.
pub fn ttft_offsets(pairs: &[FirstTokenPair]) -> Result<(Vec<f64>, OffsetStats), String> {
    if pairs.is_empty() {
        return Err("no streamed requests to compare".into());
    }
    let mut offsets = Vec::with_capacity(pairs.len());
    for p in pairs {
        let client = p.client_ns.ok_or_else(|| {
            format!(
                "request {}: the client recorded no first-chunk instant",
                p.request_id
            )
        })?;
        let engine = p.engine_ns.ok_or_else(|| {
            format!(
                "request {}: the engine's log has no first-token stamp for it",
                p.request_id
            )
        })?;
        offsets.push((client as i128 - engine as i128) as f64 / 1e6);
    }
    let q = percentiles(&offsets);
    let stats = OffsetStats {
        n: q.n,
        min: offsets.iter().copied().fold(f64::INFINITY, f64::min),
        p50: q.p50.unwrap_or(f64::NAN),
        p99: q.p99.unwrap_or(f64::NAN),
        max: offsets.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    };
    Ok((offsets, stats))
}

/// Everything TC-05 and TC-06 measured, for results.json, the report and the summary.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PerfSummary {
    /// What TTFT, TPOT, ITL and E2EL mean here (given by the client module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_definitions: Option<String>,
    /// The KVCR-disabled baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// One summary per arm that ran.
    pub arms: Vec<ArmSummary>,
    /// The concurrency sweep, one entry per level.
    pub sweep: Vec<SweepLevel>,
    /// The TC-06 timeline, if TC-06 ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryTimeline>,
    /// TTFT accuracy per TC-05 case: client against engine first-token instants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_accuracy: Vec<TtftAccuracy>,
    /// A workload trace replayed, KVCR on and off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<super::workload::WorkloadSummary>,
    /// TC-05's deliver bench: KVCR's host-tier deliver timed apart from
    /// requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kvcr_bench: Vec<KvcrBench>,
    /// TC-05's pull bench: KVCR's hinted peer pull timed apart from
    /// requests (the target's operations and the source's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kvcr_pull_bench: Vec<KvcrBench>,
    /// TC-12's G3 read bench: KVCR's read from its disk tier timed apart
    /// from requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub g3_read_bench: Vec<KvcrBench>,
}

#[cfg(test)]
mod interval_tests {
    use super::*;

    fn record(arm: Option<Arm>, ttft: f64, sent_at: Option<f64>, e2el: f64) -> RequestRecord {
        RequestRecord {
            case: "TC-05".into(),
            arm,
            concurrency: None,
            ttft_ms: Some(ttft),
            tpot_ms: Some(1.0),
            itl_ms: vec![1.0],
            e2el_ms: Some(e2el),
            prompt_tokens: 72,
            output_tokens: 16,
            worker_id: None,
            ok: true,
            error: None,
            request_id: None,
            first_token_monotonic_ns: None,
            first_token_offset_ms: None,
            sent_at_ms: sent_at,
            rate_per_s: None,
            schedule: None,
            kvcr_ops: Vec::new(),
        }
    }

    #[test]
    fn an_arm_reports_its_medians_interval_once_n_allows_it() {
        let ten: Vec<RequestRecord> = (1..=10)
            .map(|i| record(Some(Arm::LocalHit), f64::from(i) * 5.0, None, 100.0))
            .collect();
        let a = ArmSummary::from_requests(Arm::LocalHit, &ten, None);
        let i = a
            .ttft_p50_interval_ms
            .expect("n = 10 has a median interval");
        assert_eq!((a.n, i.n, i.lo, i.hi), (10, 10, 10.0, 45.0)); // ranks 2 and 9
        assert!(a.ttft_p90_interval_ms.is_none(), "a p90 interval needs 36");
        let three = ArmSummary::from_requests(Arm::LocalHit, &ten[..3], None);
        assert_eq!(three.ttft_p50_interval_ms, None);
        // Requests that were not ok are not in the interval either.
        let mut bad = ten.clone();
        for r in bad.iter_mut().take(5) {
            r.ok = false;
        }
        let five_ok = ArmSummary::from_requests(Arm::LocalHit, &bad, None);
        assert_eq!((five_ok.n, five_ok.ttft_p50_interval_ms), (5, None));
    }

    #[test]
    fn a_level_gets_a_throughput_interval_around_its_throughput() {
        // 24 requests, one every 100 ms, each 100 ms long: 10 req/s over 2.5 s.
        let reqs: Vec<RequestRecord> = (0..24)
            .map(|i| record(None, 50.0, Some(f64::from(i) * 100.0), 100.0))
            .collect();
        let l = SweepLevel::from_requests(1, &reqs, 2.5);
        let i = l.request_throughput_interval_per_s.expect("sent instants");
        assert!((l.request_throughput_per_s - 9.6).abs() < 1e-9);
        assert!(i.lo <= 9.6 && 9.6 <= i.hi, "{i:?}");
        assert!(i.hi - i.lo < 6.0, "{i:?}");
        assert!(l.ttft_p50_interval_ms.is_some());
        // Without send instants (a results.json of before), no interval.
        let old: Vec<RequestRecord> = (0..24).map(|_| record(None, 50.0, None, 100.0)).collect();
        let l = SweepLevel::from_requests(1, &old, 2.5);
        assert_eq!(l.request_throughput_interval_per_s, None);
        assert_eq!(l.key(), "c1");
    }

    #[test]
    fn a_burstier_level_gets_a_wider_throughput_interval() {
        let even: Vec<RequestRecord> = (0..24)
            .map(|i| record(None, 50.0, Some(f64::from(i) * 100.0), 100.0))
            .collect();
        // The same 24 completions, all in the first half of the level.
        let bursty: Vec<RequestRecord> = (0..24)
            .map(|i| record(None, 50.0, Some(f64::from(i) * 50.0), 50.0))
            .collect();
        let width = |r: &[RequestRecord]| {
            let i = SweepLevel::from_requests(1, r, 2.5)
                .request_throughput_interval_per_s
                .unwrap();
            i.hi - i.lo
        };
        assert!(width(&bursty) > 2.0 * width(&even));
    }

    #[test]
    fn an_open_loop_level_accounts_each_requests_schedule_delay() {
        let ms = std::time::Duration::from_millis;
        // Intended 0, 100, 200, 300 ms; sent 2, 101, 260, 300 ms.
        let reqs: Vec<RequestRecord> = [(0, 2), (100, 101), (200, 260), (300, 300)]
            .into_iter()
            .map(|(intended, actual)| {
                let mut r = record(None, 40.0, Some(actual as f64), 150.0);
                r.rate_per_s = Some(10);
                r.schedule = Some(ScheduledSend::new(ms(intended), ms(actual)));
                r
            })
            .collect();
        let l = SweepLevel::open_loop(10, 7, &reqs, 0.5);
        let ol = l.open_loop.as_ref().unwrap();
        assert_eq!((ol.rate_per_s, ol.seed), (10, 7));
        let d = ol.schedule_delay_ms.unwrap();
        assert_eq!(d.n, 4);
        assert!((d.p50_ms - 1.5).abs() < 1e-9, "{d:?}"); // delays 2, 1, 60, 0
        assert!((d.max_ms - 60.0).abs() < 1e-9);
        // TTFT from the intended send: 42, 41, 100, 40.
        assert_eq!(ol.ttft_from_intended_ms.p50, Some(41.0));
        assert_eq!(ol.ttft_from_intended_ms.p99, Some(100.0));
        // In flight: [2, 152), [101, 251), [260, 410), [300, 450): at most 2.
        assert_eq!(l.concurrency, 2);
        assert_eq!(l.key(), "r10");
        assert!(l.holds(&reqs[0]));
        let mut closed = reqs[0].clone();
        closed.rate_per_s = None;
        closed.concurrency = Some(2);
        assert!(!l.holds(&closed));
    }

    #[test]
    fn in_flight_ends_before_it_starts_again() {
        let a = record(None, 1.0, Some(0.0), 100.0);
        let b = record(None, 1.0, Some(100.0), 100.0);
        assert_eq!(peak_in_flight(&[a.clone(), b]), 1);
        assert_eq!(peak_in_flight(&[a.clone(), a]), 2);
        assert_eq!(peak_in_flight(&[]), 0);
    }
}
