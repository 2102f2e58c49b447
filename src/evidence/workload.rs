//! A workload trace replayed through the stack, as results.json records it
//! (`perf.workload`): hit rate per tier, latency, goodput under the
//! service-level targets, KVCR on against KVCR off, and the rate sweep.
//!
//! Each request of the KVCR-on replay is also a [`super::RequestRecord`]
//! of case [`WORKLOAD_CASE`] in results.json's `requests`.

use serde::{Deserialize, Serialize};

use super::perf::{percentiles, Percentiles};

/// The case id of the trace replay's requests.
pub const WORKLOAD_CASE: &str = "WL-01";

/// The measurement key under which the replay's case records its
/// [`WorkloadSummary`]; JUnit gives that case its figures as properties
/// (`workload.on.hit_rate.total_pct`, ...) instead of the whole summary.
pub const WORKLOAD_MEASUREMENT: &str = "workload";

/// Service-level targets: a request meets them when its TTFT and its TPOT
/// are both at most the target (a request of one output token has no TPOT
/// and is judged by its TTFT alone).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// The fraction of requests that must meet them for a rate to count
    /// as sustained in the sweep (0.9: nine requests in ten).
    pub attainment: f64,
}

impl Slo {
    /// Whether a request with these timings meets the targets.
    pub fn met(&self, ttft_ms: Option<f64>, tpot_ms: Option<f64>) -> bool {
        match ttft_ms {
            Some(ttft) => ttft <= self.ttft_ms && tpot_ms.map_or(true, |t| t <= self.tpot_ms),
            None => false,
        }
    }
}

/// The trace that was replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceInfo {
    /// Its file name (no directory).
    pub name: String,
    /// SHA-256 of its bytes.
    pub sha256: String,
    pub requests: u32,
    /// Tokens per block id.
    pub block_size: u32,
    /// Last arrival − first, as written in the trace, s.
    pub duration_s: f64,
}

/// Prompt tokens served from each tier, over one replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TierTokens {
    /// The engine's own prefix cache (device memory).
    pub device: u64,
    /// KVCR's host DRAM pool (`local_deliver`).
    pub dram: u64,
    /// A peer's pool, through a router hint (`remote_deliver`).
    pub peer: u64,
    /// KVCR's disk tier (`g3_deliver`).
    pub disk: u64,
}

impl TierTokens {
    pub fn total(&self) -> u64 {
        self.device + self.dram + self.peer + self.disk
    }
}

/// Hit rates as fractions of the replay's prompt tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TierRates {
    pub device: f64,
    pub dram: f64,
    pub peer: f64,
    pub disk: f64,
    pub total: f64,
}

impl TierRates {
    /// `tokens` as fractions of `prompt_tokens` (all 0 when there were none).
    pub fn of(tokens: &TierTokens, prompt_tokens: u64) -> Self {
        let f = |t: u64| match prompt_tokens {
            0 => 0.0,
            p => t as f64 / p as f64,
        };
        TierRates {
            device: f(tokens.device),
            dram: f(tokens.dram),
            peer: f(tokens.peer),
            disk: f(tokens.disk),
            total: f(tokens.total()),
        }
    }

    /// The tiers by name, in report order.
    pub fn named(&self) -> [(&'static str, f64); 5] {
        [
            ("device", self.device),
            ("dram", self.dram),
            ("peer", self.peer),
            ("disk", self.disk),
            ("total", self.total),
        ]
    }
}

/// One window of a replay, for the hit rate over time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HitWindow {
    /// Window start, s after the replay started.
    pub start_s: f64,
    /// Requests sent in the window.
    pub requests: u32,
    pub prompt_tokens: u64,
    /// Prompt tokens the engine reported as cached (`usage`'s
    /// `cached_tokens`: every tier together).
    pub cached_tokens: u64,
}

impl HitWindow {
    pub fn hit_rate(&self) -> f64 {
        match self.prompt_tokens {
            0 => 0.0,
            p => self.cached_tokens as f64 / p as f64,
        }
    }
}

/// One replay of the trace: KVCR on (the stack's workers) or off (the
/// reference workers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplaySummary {
    pub kvcr: bool,
    /// Arrival times were the trace's divided by this.
    pub rate_factor: f64,
    /// Offered load: (requests − 1) / (last intended send − first), /s.
    pub offered_rate_per_s: f64,
    pub requests: u32,
    /// Answered with the reference tokens.
    pub ok: u32,
    /// No answer (HTTP error, timeout, cut stream).
    pub failed: u32,
    /// Answered with tokens other than the reference's.
    pub wrong_tokens: u32,
    /// First send to last answer, s.
    pub duration_s: f64,
    pub prompt_tokens: u64,
    /// Prompt tokens per tier, from the engines' and KVCR's counters
    /// (KVCR on; off: the device tier alone, from `cached_tokens`).
    pub tiers: TierTokens,
    pub hit_rate: TierRates,
    /// Sum of every answer's `cached_tokens`.
    pub cached_tokens_reported: u64,
    /// Tokens KVCR delivered that the engines did not use as hits (the
    /// blocks of a partial peer delivery after its first missing one).
    #[serde(default)]
    pub delivered_unused_tokens: u64,
    /// KVCR deliveries (host pool and peer) that ended other than
    /// `success`, by scope and result (`remote_deliver partial`).
    #[serde(default)]
    pub unsuccessful_deliveries: std::collections::BTreeMap<String, u64>,
    /// What did not reconcile between the counters and the answers
    /// (empty: reconciled).
    #[serde(default)]
    pub reconciliation: Vec<String>,
    pub ttft_ms: Percentiles,
    pub tpot_ms: Percentiles,
    pub e2el_ms: Percentiles,
    /// Actual send − intended send.
    pub schedule_delay_ms: Percentiles,
    /// Requests meeting the targets.
    pub slo_met: u32,
    /// `slo_met` / `duration_s`.
    pub goodput_per_s: f64,
    /// `slo_met` / `requests`.
    pub slo_attainment: f64,
    /// Hit rate over time (windows of [`HIT_WINDOW_S`]).
    #[serde(default)]
    pub timeline: Vec<HitWindow>,
    /// Every ok request's TTFT, ms, in send order (the distribution chart).
    #[serde(default)]
    pub ttft_samples_ms: Vec<f64>,
}

/// Width of a timeline window, s.
pub const HIT_WINDOW_S: f64 = 10.0;

/// One rate of the sweep (KVCR on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub rate_factor: f64,
    pub offered_rate_per_s: f64,
    pub requests: u32,
    pub ok: u32,
    pub slo_met: u32,
    pub goodput_per_s: f64,
    pub slo_attainment: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p90_ms: Option<f64>,
    /// `slo_attainment` ≥ the targets' attainment, with no failed or
    /// wrong-token request.
    pub sustained: bool,
}

/// What results.json records of a trace replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSummary {
    pub trace: TraceInfo,
    pub slo: Slo,
    /// KVCR on.
    pub on: ReplaySummary,
    /// KVCR off: the same trace at the same rate on the reference workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<ReplaySummary>,
    /// The rate sweep, slowest first (empty without `--sweep`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<SweepPoint>,
    /// The highest offered rate of the sweep that was sustained, /s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sustained_rate_per_s: Option<f64>,
}

/// One request of a replay as the summaries need it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayedRequest {
    /// Intended send, s after the replay started.
    pub intended_s: f64,
    /// Actual send − intended, ms.
    pub schedule_delay_ms: f64,
    pub prompt_tokens: u32,
    /// `None`: the request failed.
    pub answer: Option<Answer>,
}

/// What came back for a request that got an answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub ttft_ms: f64,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: f64,
    /// Ends at, s after the replay started.
    pub finished_s: f64,
    pub cached_tokens: u64,
    pub reference_tokens: bool,
}

impl ReplaySummary {
    /// The summary of a replay's requests (in send order), without the
    /// tier split (set by the caller from the counters).
    pub fn of(kvcr: bool, rate_factor: f64, slo: &Slo, requests: &[ReplayedRequest]) -> Self {
        let answered = || requests.iter().filter_map(|r| r.answer);
        let ok = answered().filter(|a| a.reference_tokens).count() as u32;
        let failed = requests.iter().filter(|r| r.answer.is_none()).count() as u32;
        let wrong_tokens = answered().filter(|a| !a.reference_tokens).count() as u32;
        let good = || answered().filter(|a| a.reference_tokens);
        let slo_met = good()
            .filter(|a| slo.met(Some(a.ttft_ms), a.tpot_ms))
            .count() as u32;
        let first = requests
            .iter()
            .map(|r| r.intended_s)
            .fold(f64::NAN, f64::min);
        let last_intended = requests
            .iter()
            .map(|r| r.intended_s)
            .fold(f64::NAN, f64::max);
        let end = answered()
            .map(|a| a.finished_s)
            .fold(last_intended, f64::max);
        let duration_s = if first.is_finite() { end - first } else { 0.0 };
        let n = requests.len() as u32;
        let offered_rate_per_s = match n {
            0 | 1 => 0.0,
            n if last_intended > first => (n - 1) as f64 / (last_intended - first),
            _ => 0.0,
        };
        let per_s = |count: u32| match duration_s > 0.0 {
            true => count as f64 / duration_s,
            false => 0.0,
        };
        let ttft: Vec<f64> = good().map(|a| a.ttft_ms).collect();
        ReplaySummary {
            kvcr,
            rate_factor,
            offered_rate_per_s,
            requests: n,
            ok,
            failed,
            wrong_tokens,
            duration_s,
            prompt_tokens: requests.iter().map(|r| r.prompt_tokens as u64).sum(),
            cached_tokens_reported: answered().map(|a| a.cached_tokens).sum(),
            ttft_ms: percentiles(&ttft),
            tpot_ms: percentiles(&good().filter_map(|a| a.tpot_ms).collect::<Vec<_>>()),
            e2el_ms: percentiles(&good().map(|a| a.e2el_ms).collect::<Vec<_>>()),
            schedule_delay_ms: percentiles(
                &requests
                    .iter()
                    .map(|r| r.schedule_delay_ms)
                    .collect::<Vec<_>>(),
            ),
            slo_met,
            goodput_per_s: per_s(slo_met),
            slo_attainment: match n {
                0 => 0.0,
                n => slo_met as f64 / n as f64,
            },
            timeline: timeline(requests),
            ttft_samples_ms: ttft,
            ..ReplaySummary::default()
        }
    }

    /// The sweep point of this replay.
    pub fn sweep_point(&self, slo: &Slo) -> SweepPoint {
        SweepPoint {
            rate_factor: self.rate_factor,
            offered_rate_per_s: self.offered_rate_per_s,
            requests: self.requests,
            ok: self.ok,
            slo_met: self.slo_met,
            goodput_per_s: self.goodput_per_s,
            slo_attainment: self.slo_attainment,
            ttft_p50_ms: self.ttft_ms.p50,
            ttft_p90_ms: self.ttft_ms.p90,
            sustained: self.failed == 0
                && self.wrong_tokens == 0
                && self.slo_attainment >= slo.attainment,
        }
    }
}

/// The highest offered rate of `sweep` that was sustained.
pub fn max_sustained_rate(sweep: &[SweepPoint]) -> Option<f64> {
    sweep
        .iter()
        .filter(|p| p.sustained)
        .map(|p| p.offered_rate_per_s)
        .fold(None, |best, r| Some(best.map_or(r, |b: f64| b.max(r))))
}

/// Hit rate over time: the requests sent in each window of
/// [`HIT_WINDOW_S`], by their intended send.
fn timeline(requests: &[ReplayedRequest]) -> Vec<HitWindow> {
    let mut windows: Vec<HitWindow> = Vec::new();
    for r in requests {
        let index = (r.intended_s.max(0.0) / HIT_WINDOW_S) as usize;
        while windows.len() <= index {
            let start_s = windows.len() as f64 * HIT_WINDOW_S;
            windows.push(HitWindow {
                start_s,
                ..HitWindow::default()
            });
        }
        let w = &mut windows[index];
        w.requests += 1;
        w.prompt_tokens += r.prompt_tokens as u64;
        w.cached_tokens += r.answer.map_or(0, |a| a.cached_tokens);
    }
    windows
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLO: Slo = Slo {
        ttft_ms: 100.0,
        tpot_ms: 20.0,
        attainment: 0.9,
    };

    fn answered(
        at: f64,
        ttft: f64,
        tpot: Option<f64>,
        cached: u64,
        right: bool,
    ) -> ReplayedRequest {
        ReplayedRequest {
            intended_s: at,
            schedule_delay_ms: 0.5,
            prompt_tokens: 100,
            answer: Some(Answer {
                ttft_ms: ttft,
                tpot_ms: tpot,
                e2el_ms: ttft + 200.0,
                finished_s: at + (ttft + 200.0) / 1000.0,
                cached_tokens: cached,
                reference_tokens: right,
            }),
        }
    }

    #[test]
    fn a_request_meets_the_targets_only_with_both_timings_within_them() {
        assert!(SLO.met(Some(100.0), Some(20.0)));
        assert!(SLO.met(Some(50.0), None));
        assert!(!SLO.met(Some(100.1), Some(1.0)));
        assert!(!SLO.met(Some(10.0), Some(20.5)));
        assert!(!SLO.met(None, Some(1.0)));
    }

    #[test]
    fn goodput_counts_only_right_answers_within_the_targets() {
        let requests = [
            answered(0.0, 50.0, Some(10.0), 0, true),
            answered(1.0, 150.0, Some(10.0), 50, true), // TTFT over
            answered(2.0, 50.0, Some(10.0), 80, false), // wrong tokens
            ReplayedRequest {
                intended_s: 3.0,
                prompt_tokens: 100,
                ..ReplayedRequest::default()
            }, // failed
            answered(4.0, 60.0, Some(5.0), 100, true),
        ];
        let s = ReplaySummary::of(true, 1.0, &SLO, &requests);
        assert_eq!((s.requests, s.ok, s.failed, s.wrong_tokens), (5, 3, 1, 1));
        assert_eq!(s.slo_met, 2);
        // From 0 s to the last answer at 4.26 s.
        assert!((s.duration_s - 4.26).abs() < 1e-9);
        assert!((s.goodput_per_s - 2.0 / 4.26).abs() < 1e-9);
        assert!((s.slo_attainment - 0.4).abs() < 1e-9);
        assert!((s.offered_rate_per_s - 1.0).abs() < 1e-9);
        assert_eq!(s.prompt_tokens, 500);
        assert_eq!(s.cached_tokens_reported, 230);
        assert_eq!(s.ttft_samples_ms, vec![50.0, 150.0, 60.0]);
        let point = s.sweep_point(&SLO);
        assert!(!point.sustained);
    }

    #[test]
    fn the_timeline_has_a_window_per_ten_seconds_with_its_hit_rate() {
        let requests = [
            answered(1.0, 50.0, None, 50, true),
            answered(25.0, 50.0, None, 100, true),
        ];
        let t = ReplaySummary::of(true, 1.0, &SLO, &requests).timeline;
        assert_eq!(t.len(), 3);
        assert_eq!(t[1].requests, 0);
        assert_eq!(t[2].start_s, 20.0);
        assert!((t[0].hit_rate() - 0.5).abs() < 1e-9);
        assert!((t[2].hit_rate() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn tier_rates_are_fractions_of_prompt_tokens() {
        let tokens = TierTokens {
            device: 100,
            dram: 50,
            peer: 25,
            disk: 25,
        };
        let r = TierRates::of(&tokens, 400);
        assert_eq!(
            (r.device, r.dram, r.peer, r.disk, r.total),
            (0.25, 0.125, 0.0625, 0.0625, 0.5)
        );
        assert_eq!(TierRates::of(&tokens, 0).total, 0.0);
    }

    #[test]
    fn the_sustained_maximum_ignores_points_that_missed() {
        let p = |rate: f64, sustained: bool| SweepPoint {
            offered_rate_per_s: rate,
            sustained,
            ..SweepPoint::default()
        };
        assert_eq!(
            max_sustained_rate(&[p(2.0, true), p(4.0, true), p(8.0, false)]),
            Some(4.0)
        );
        assert_eq!(max_sustained_rate(&[p(2.0, false)]), None);
    }
}
