//! The statistics the harness measures and judges with: type-7 quantiles,
//! percentile-bootstrap intervals of a sample and of a head − base
//! difference over paired rounds (widened for few pairs with Student's t),
//! distribution-free intervals of a quantile from order statistics, the
//! mean of per-pair differences with its t interval and the minimum
//! detectable effect of an interval, the open-loop arrival schedule and its
//! delays, and the seeded generator they all draw from. Pure functions of numbers: nothing here knows a case, a run
//! or a build.
//!
//! ```
//! use kvcr_e2e::stats::{quantile, quantile_interval};
//! let mut ttft_ms: Vec<f64> = (1..=100).map(f64::from).collect();
//! assert_eq!(quantile(&mut ttft_ms, 0.5), Some(50.5));
//! let p50 = quantile_interval(&ttft_ms, 0.5, 0.95).expect("enough samples");
//! assert!(p50.lo <= 50.5 && 50.5 <= p50.hi);
//! ```

mod arrivals;
mod bootstrap;
mod order_interval;
mod paired;
mod rng;
mod student;

pub use arrivals::{DelaySummary, OpenLoop, RateError, ScheduledSend};
pub use bootstrap::{
    difference, estimate, quantile, small_sample_widening, windowed_throughput, Bootstrap,
    Difference, Estimate, Interval, PairSamples, Statistic,
};
pub use order_interval::{min_sample_for, quantile_interval, QuantileInterval};
pub use paired::{min_detectable_effect, paired_difference, paired_ratio, MDE_POWER};
pub use rng::SplitMix64;
