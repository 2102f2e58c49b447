//! Open-loop load: when each request is meant to be sent, and how late it
//! actually went.
//!
//! A closed loop (N requests in flight, the next one sent when one ends)
//! sends less while the server is slow, so the slow stretch is measured by
//! few requests (coordinated omission). An open loop fixes the send instants
//! in advance — here Poisson arrivals at a set rate: exponential gaps with
//! mean 1 / rate, drawn from a seed — and each request records its
//! **schedule delay**, actual send − intended send. Latency counted from the
//! intended instant (delay + TTFT) is what a user arriving at that instant
//! would have seen.
//!
//! ```
//! use kvcr_e2e::stats::{OpenLoop, ScheduledSend};
//! use std::time::Duration;
//! let plan = OpenLoop::new(20.0, 7).unwrap();        // 20 requests/s, seed 7
//! let intended = plan.first(100);                     // offsets from the start
//! assert_eq!(intended.len(), 100);
//! // the sender waits until start + intended[i], sends, and records:
//! let sent = ScheduledSend::new(intended[0], intended[0] + Duration::from_micros(300));
//! assert!((sent.delay_ms - 0.3).abs() < 1e-9);
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::bootstrap::quantile;
use super::rng::SplitMix64;

/// A rate an open loop cannot send at.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("an open-loop rate must be a finite number of requests per second above 0, got {0}")]
pub struct RateError(pub f64);

/// Poisson arrivals at `rate_per_s`, from `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OpenLoop {
    /// Mean requests per second.
    pub rate_per_s: f64,
    /// Seed of the gaps: the same seed gives the same schedule.
    pub seed: u64,
}

impl OpenLoop {
    /// A schedule at `rate_per_s` (finite, above 0).
    pub fn new(rate_per_s: f64, seed: u64) -> Result<Self, RateError> {
        if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
            return Err(RateError(rate_per_s));
        }
        Ok(OpenLoop { rate_per_s, seed })
    }

    /// The intended send instants (offsets from the level's start) in
    /// order: each gap is −ln(U) / rate for U uniform in (0, 1).
    pub fn instants(&self) -> impl Iterator<Item = Duration> {
        let mut rng = SplitMix64::new(self.seed);
        let rate = self.rate_per_s;
        let mut at = 0.0_f64;
        std::iter::repeat_with(move || {
            at += -rng.unit_open().ln() / rate;
            Duration::from_secs_f64(at)
        })
    }

    /// The first `count` instants.
    pub fn first(&self, count: usize) -> Vec<Duration> {
        self.instants().take(count).collect()
    }

    /// Every instant before `horizon` (a level of fixed duration).
    pub fn within(&self, horizon: Duration) -> Vec<Duration> {
        self.instants().take_while(|t| *t < horizon).collect()
    }
}

/// One request's send against its schedule (belongs in its request record).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScheduledSend {
    /// Intended send, ms after the level's start.
    pub intended_ms: f64,
    /// Actual send, ms after the level's start.
    pub actual_ms: f64,
    /// actual − intended, ms (signed: an early send is recorded, not hidden).
    pub delay_ms: f64,
}

impl ScheduledSend {
    /// The record of a request meant for `intended` and sent at `actual`.
    pub fn new(intended: Duration, actual: Duration) -> Self {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        ScheduledSend {
            intended_ms: ms(intended),
            actual_ms: ms(actual),
            delay_ms: ms(actual) - ms(intended),
        }
    }

    /// A latency measured from the actual send, counted from the intended
    /// send instead (free of coordinated omission).
    pub fn from_intended_ms(&self, latency_ms: f64) -> f64 {
        latency_ms + self.delay_ms
    }
}

/// How well a level kept to its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DelaySummary {
    /// Requests.
    pub n: usize,
    /// Median schedule delay, ms (type-7, as [`super::quantile`]).
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// The mean rate actually sent: requests / (last actual send), per second.
    pub achieved_rate_per_s: f64,
}

impl DelaySummary {
    /// The summary of `sends`; `None` when there are none.
    pub fn of(sends: &[ScheduledSend]) -> Option<Self> {
        let mut delays: Vec<f64> = sends.iter().map(|s| s.delay_ms).collect();
        let last_ms = sends.iter().map(|s| s.actual_ms).fold(0.0, f64::max);
        Some(DelaySummary {
            n: sends.len(),
            p50_ms: quantile(&mut delays, 0.5)?,
            p99_ms: quantile(&mut delays, 0.99)?,
            max_ms: delays.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            achieved_rate_per_s: if last_ms > 0.0 {
                sends.len() as f64 / (last_ms / 1000.0)
            } else {
                0.0
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_exponential_at_the_set_rate() {
        let plan = OpenLoop::new(50.0, 11).unwrap();
        let t = plan.first(20_000);
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "instants are ordered");
        let gaps: Vec<f64> = std::iter::once(t[0].as_secs_f64())
            .chain(t.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()))
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 0.02).abs() < 0.0005, "mean gap {mean}");
        // Exponential: the standard deviation equals the mean, and
        // P(gap > mean) = e^-1.
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.03,
            "cv {}",
            var.sqrt() / mean
        );
        let above = gaps.iter().filter(|g| **g > 0.02).count() as f64 / gaps.len() as f64;
        assert!((above - (-1.0f64).exp()).abs() < 0.01, "{above}");
    }

    #[test]
    fn a_seed_fixes_the_schedule_and_a_horizon_cuts_it() {
        let a = OpenLoop::new(10.0, 3).unwrap();
        assert_eq!(a.first(50), a.first(50));
        assert_ne!(a.first(50), OpenLoop::new(10.0, 4).unwrap().first(50));
        let within = a.within(Duration::from_secs(60));
        assert!(within.iter().all(|t| *t < Duration::from_secs(60)));
        assert_eq!(within[..], a.first(within.len())[..]);
        // About 600 arrivals in 60 s at 10/s (Poisson sd ≈ 24.5).
        assert!((500..700).contains(&within.len()), "{}", within.len());
    }

    #[test]
    fn a_bad_rate_is_refused() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = OpenLoop::new(rate, 1).unwrap_err();
            assert!(err.to_string().contains("rate"), "{err}");
        }
    }

    #[test]
    fn schedule_delay_is_actual_minus_intended() {
        let ms = Duration::from_millis;
        let sends = [
            ScheduledSend::new(ms(0), ms(1)),
            ScheduledSend::new(ms(100), ms(100)),
            ScheduledSend::new(ms(200), ms(230)),
            ScheduledSend::new(ms(300), ms(299)),
        ];
        assert_eq!(
            sends.iter().map(|s| s.delay_ms).collect::<Vec<_>>(),
            vec![1.0, 0.0, 30.0, -1.0]
        );
        assert_eq!(sends[2].from_intended_ms(12.0), 42.0);
        let s = DelaySummary::of(&sends).unwrap();
        assert_eq!((s.n, s.p50_ms, s.max_ms), (4, 0.5, 30.0));
        assert!((s.achieved_rate_per_s - 4.0 / 0.299).abs() < 1e-9);
        assert_eq!(DelaySummary::of(&[]), None);
    }
}
