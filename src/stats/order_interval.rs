//! Distribution-free confidence intervals for a quantile from order
//! statistics.
//!
//! For a sample of n values sorted as x(1) ≤ … ≤ x(n), the number B of
//! values below the true q-quantile is Binomial(n, q), whatever the
//! distribution (continuous). So [x(l), x(u)] covers the quantile with
//! probability P(l ≤ B ≤ u − 1). The interval here is equal-tailed: l the
//! largest rank with P(B ≤ l − 1) ≤ α/2, u the smallest with
//! P(B ≤ u − 1) ≥ 1 − α/2, for α = 1 − confidence. Its coverage is at least
//! the confidence (the binomial is discrete, so usually above it) and is
//! reported. Too small a sample has no such interval: a two-sided 95 %
//! interval of the median needs n ≥ 6 ([x(1), x(6)] covers 96.9 %), of the
//! 90th percentile n ≥ 36 (0.9^36 < 0.025 < 0.9^35).
//!
//! Unlike a bootstrap of a median, which at small n draws only a few
//! observed values and is biased narrow, this interval is exact.
//!
//! ```
//! use kvcr_e2e::stats::quantile_interval;
//! let ttft: Vec<f64> = (1..=10).map(f64::from).collect();
//! let i = quantile_interval(&ttft, 0.5, 0.95).unwrap();
//! assert_eq!((i.lo, i.hi, i.lo_rank, i.hi_rank), (2.0, 9.0, 2, 9));
//! assert!(i.coverage > 0.95);
//! assert_eq!(quantile_interval(&ttft[..5], 0.5, 0.95), None); // n = 5 is too few
//! ```

use serde::{Deserialize, Serialize};

/// A quantile's order-statistic interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QuantileInterval {
    /// Sample size.
    pub n: usize,
    /// The quantile (0.5 for the median).
    pub q: f64,
    /// The confidence asked for.
    pub confidence: f64,
    /// Lower end: the sample's `lo_rank`-th smallest value.
    pub lo: f64,
    /// Upper end: the sample's `hi_rank`-th smallest value.
    pub hi: f64,
    /// 1-based rank of `lo` in the sorted sample.
    pub lo_rank: usize,
    /// 1-based rank of `hi`.
    pub hi_rank: usize,
    /// The interval's exact coverage, P(lo_rank ≤ B ≤ hi_rank − 1).
    pub coverage: f64,
}

/// The smallest sample whose equal-tailed `confidence` interval of the
/// `q`-quantile exists (6 for the median at 95 %, 36 for the p90).
pub fn min_sample_for(q: f64, confidence: f64) -> usize {
    let tail = (1.0 - confidence) / 2.0;
    // Both extreme ranks must be in the tails: q^n ≤ tail and (1 − q)^n ≤ tail.
    let worst = q.max(1.0 - q);
    if !(0.0 < worst && worst < 1.0 && tail > 0.0) {
        return usize::MAX;
    }
    (tail.ln() / worst.ln()).ceil().max(1.0) as usize
}

/// The equal-tailed order-statistic interval of the `q`-quantile of
/// `values` (non-finite values left out) at `confidence`; `None` when the
/// sample is too small for one ([`min_sample_for`]) or the arguments are
/// out of range.
pub fn quantile_interval(values: &[f64], q: f64, confidence: f64) -> Option<QuantileInterval> {
    if !(0.0 < q && q < 1.0 && 0.0 < confidence && confidence < 1.0) {
        return None;
    }
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n == 0 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let cdf = binomial_cdf(n, q);
    let tail = (1.0 - confidence) / 2.0;
    // cdf[k] = P(B ≤ k). Lower rank l: the largest with P(B ≤ l − 1) ≤ tail.
    let lo_rank = (1..=n).rev().find(|&l| cdf[l - 1] <= tail)?;
    // Upper rank u: the smallest with P(B ≤ u − 1) ≥ 1 − tail (u ≤ n).
    let hi_rank = (lo_rank..=n).find(|&u| cdf[u - 1] >= 1.0 - tail)?;
    Some(QuantileInterval {
        n,
        q,
        confidence,
        lo: v[lo_rank - 1],
        hi: v[hi_rank - 1],
        lo_rank,
        hi_rank,
        coverage: cdf[hi_rank - 1] - cdf[lo_rank - 1],
    })
}

/// P(B ≤ k) for k = 0..=n, B ~ Binomial(n, q), summed in log space so that
/// large n does not underflow the terms.
fn binomial_cdf(n: usize, q: f64) -> Vec<f64> {
    let (lq, lp) = (q.ln(), (1.0 - q).ln());
    let nf = n as f64;
    let mut ln_choose = 0.0_f64; // ln C(n, 0)
    let mut acc = 0.0_f64;
    let mut out = Vec::with_capacity(n + 1);
    for k in 0..=n {
        if k > 0 {
            let kf = k as f64;
            ln_choose += (nf - kf + 1.0).ln() - kf.ln();
        }
        acc += (ln_choose + k as f64 * lq + (nf - k as f64) * lp).exp();
        out.push(acc.min(1.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binomial_cdf_matches_hand_values() {
        let c = binomial_cdf(10, 0.5);
        // P(B ≤ 1) = 11/1024, P(B ≤ 8) = 1013/1024.
        assert!((c[1] - 11.0 / 1024.0).abs() < 1e-12, "{}", c[1]);
        assert!((c[8] - 1013.0 / 1024.0).abs() < 1e-12, "{}", c[8]);
        assert!((c[10] - 1.0).abs() < 1e-12);
        let big = binomial_cdf(5000, 0.9);
        assert!(big.windows(2).all(|w| w[0] <= w[1]));
        assert!((big[5000] - 1.0).abs() < 1e-9, "{}", big[5000]);
    }

    #[test]
    fn median_ranks_follow_the_binomial_tables() {
        // Classical 95 % ranks of the median: n = 6: (1, 6); n = 10: (2, 9);
        // n = 20: (6, 15); n = 30: (10, 21).
        for (n, lo, hi) in [(6, 1, 6), (10, 2, 9), (20, 6, 15), (30, 10, 21)] {
            let v: Vec<f64> = (1..=n).map(|i| i as f64 * 10.0).collect();
            let i = quantile_interval(&v, 0.5, 0.95).unwrap();
            assert_eq!((i.lo_rank, i.hi_rank), (lo, hi), "n = {n}");
            assert_eq!((i.lo, i.hi), (lo as f64 * 10.0, hi as f64 * 10.0));
            assert!(i.coverage >= 0.95 && i.coverage < 1.0, "{i:?}");
        }
    }

    #[test]
    fn order_does_not_matter_and_non_finite_values_are_left_out() {
        let a = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0, 10.0];
        let mut b = a.to_vec();
        b.push(f64::NAN);
        b.reverse();
        assert_eq!(
            quantile_interval(&a, 0.5, 0.95),
            quantile_interval(&b, 0.5, 0.95)
        );
    }

    #[test]
    fn too_small_a_sample_has_no_interval() {
        assert_eq!(min_sample_for(0.5, 0.95), 6);
        assert_eq!(min_sample_for(0.9, 0.95), 36);
        let v: Vec<f64> = (1..=40).map(f64::from).collect();
        assert!(quantile_interval(&v[..5], 0.5, 0.95).is_none());
        assert!(quantile_interval(&v[..6], 0.5, 0.95).is_some());
        assert!(quantile_interval(&v[..35], 0.9, 0.95).is_none());
        let p90 = quantile_interval(&v[..36], 0.9, 0.95).unwrap();
        assert_eq!(p90.hi_rank, 36);
        assert!(quantile_interval(&[], 0.5, 0.95).is_none());
        assert!(quantile_interval(&v, 0.0, 0.95).is_none());
        assert!(quantile_interval(&v, 0.5, 1.0).is_none());
    }

    #[test]
    fn coverage_holds_in_simulation() {
        // Log-normal TTFT-like samples of 12: the true median is e^3.
        let mut rng = crate::stats::SplitMix64::new(5);
        let truth = 3.0f64.exp();
        let trials = 4000;
        let exact = quantile_interval(&[0.0; 12], 0.5, 0.95).unwrap().coverage;
        assert!((exact - 0.9614).abs() < 1e-3, "{exact}"); // ranks (3, 10)
        let covered = (0..trials)
            .filter(|_| {
                let v: Vec<f64> = (0..12).map(|_| (3.0 + 0.4 * rng.normal()).exp()).collect();
                let i = quantile_interval(&v, 0.5, 0.95).unwrap();
                i.lo <= truth && truth <= i.hi
            })
            .count();
        let rate = covered as f64 / f64::from(trials);
        assert!((rate - exact).abs() < 0.012, "{rate} against {exact}");
    }
}
