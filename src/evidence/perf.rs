//! Performance data: per-request records, per-arm summaries, the
//! concurrency sweep and the recovery timeline, with field names a
//! vLLM-bench / AIPerf user recognises (`ttft_ms`, `tpot_ms`, `itl_ms`, `e2el_ms`).

use serde::{Deserialize, Serialize};

/// One streamed request as the client saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        let ttft = percentiles(&mine.iter().filter_map(|r| r.ttft_ms).collect::<Vec<_>>());
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
}

impl SweepLevel {
    /// Summarizes the ok requests of one level that took `duration_s`.
    pub fn from_requests(concurrency: u32, requests: &[RequestRecord], duration_s: f64) -> Self {
        let ok: Vec<&RequestRecord> = requests.iter().filter(|r| r.ok).collect();
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
            ttft_ms: percentiles(&ok.iter().filter_map(|r| r.ttft_ms).collect::<Vec<_>>()),
            tpot_ms: percentiles(&ok.iter().filter_map(|r| r.tpot_ms).collect::<Vec<_>>()),
        }
    }
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
    /// Every attempt in order.
    pub attempts: Vec<RecoveryAttempt>,
    /// Why there is no t1, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_t1_reason: Option<String>,
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
}
