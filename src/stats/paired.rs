//! The head − base difference as the mean of per-pair differences, and the
//! smallest change an interval can detect.
//!
//! **Paired differences.** Each round pair ran one base and one head round
//! side by side, so whatever the machine did during that pair (a slower
//! stack, a noisy neighbour, a drift) moves both of its rounds. The
//! statistic of each round is taken first, then the pair's difference
//! dₖ = stat(headₖ) − stat(baseₖ): the drift shared by a pair cancels
//! inside dₖ instead of being pooled into both builds' samples. The
//! estimate is the mean of the k differences and its interval Student's t
//! with k − 1 degrees of freedom, mean ± t · s / √k: exact for normal
//! differences, and for the 6–16 pairs of a comparison a difference of
//! medians is close to normal.
//!
//! **Minimum detectable effect.** The smallest true change that a design
//! with this spread reports as a verdict with probability `power` (80 %):
//! with the interval's half-width h = t(α) · se, a true change δ is found
//! when the lower end clears 0, so δ ≥ (t(α) + t(power)) · se = h · (1 +
//! t(power) / t(α)); and when the verdict also asks for a relative size m
//! of |base|, δ ≥ m · |base| + t(power) · se. The larger of the two is the
//! MDE. A "no change detected" whose MDE is 6 % says a change of 6 % or
//! more would have been seen four times in five; one whose MDE is 40 % says
//! little.

use super::bootstrap::{Difference, Interval, PairSamples, Statistic};
use super::student::t_two_sided;

/// The power an MDE is quoted at.
pub const MDE_POWER: f64 = 0.80;

/// head − base of `statistic` as the mean of the per-pair differences,
/// with its Student-t interval at `confidence` (see the module doc).
/// `base` and `head` are the statistic over each build's pooled samples (as
/// the report shows them); `delta` is the mean paired difference. Pairs
/// missing a side take no part; `None` without a complete pair. With one
/// pair the interval is the point (no spread to measure; such a figure is
/// inconclusive by the pair minimum).
pub fn paired_difference(
    pairs: &[PairSamples],
    statistic: Statistic,
    confidence: f64,
) -> Option<Difference> {
    let (per_pair, base, head) = pair_statistics(pairs, statistic)?;
    let diffs: Vec<f64> = per_pair.iter().map(|(h, b)| h - b).collect();
    let (delta, half) = mean_and_half_width(&diffs, confidence);
    Some(Difference {
        base,
        head,
        delta,
        relative: (base != 0.0).then(|| delta / base.abs()),
        interval: Interval {
            lo: delta - half,
            hi: delta + half,
        },
    })
}

/// head − base of `statistic` from the per-pair ratios: the mean of
/// ln(headₖ / baseₖ) with its Student-t interval at `confidence`, turned
/// back into the figure's unit against the pooled base (change = base ·
/// (e^mean − 1), the interval likewise). A pair that ran once much slower
/// (a thread that lost the interpreter lock for its switch interval) is
/// one factor among k here, where on the difference scale it alone can
/// widen the interval past 0. `None` when a pair's statistic is not
/// positive (no ratio), as well as without a complete pair.
pub fn paired_ratio(
    pairs: &[PairSamples],
    statistic: Statistic,
    confidence: f64,
) -> Option<Difference> {
    let (per_pair, base, head) = pair_statistics(pairs, statistic)?;
    if base <= 0.0 || per_pair.iter().any(|&(h, b)| h <= 0.0 || b <= 0.0) {
        return None;
    }
    let logs: Vec<f64> = per_pair.iter().map(|(h, b)| (h / b).ln()).collect();
    let (mean, half) = mean_and_half_width(&logs, confidence);
    let at = |log_ratio: f64| base * log_ratio.exp_m1();
    Some(Difference {
        base,
        head,
        delta: at(mean),
        relative: Some(mean.exp_m1()),
        interval: Interval {
            lo: at(mean - half),
            hi: at(mean + half),
        },
    })
}

/// Each complete pair's (head, base) statistic, then the statistic of
/// base's and of head's pooled samples.
type PairStatistics = (Vec<(f64, f64)>, f64, f64);

/// [`PairStatistics`] of `pairs`; `None` without a complete pair.
fn pair_statistics(pairs: &[PairSamples], statistic: Statistic) -> Option<PairStatistics> {
    let complete: Vec<&PairSamples> = pairs
        .iter()
        .filter(|p| !p.base.is_empty() && !p.head.is_empty())
        .collect();
    let per_pair: Vec<(f64, f64)> = complete
        .iter()
        .filter_map(|p| {
            let h = statistic.of(&mut p.head.clone())?;
            let b = statistic.of(&mut p.base.clone())?;
            Some((h, b))
        })
        .collect();
    if per_pair.is_empty() {
        return None;
    }
    let pooled = |side: fn(&PairSamples) -> &Vec<f64>| -> Vec<f64> {
        complete
            .iter()
            .flat_map(|p| side(p).iter().copied())
            .collect()
    };
    let base = statistic.of(&mut pooled(|p| &p.base))?;
    let head = statistic.of(&mut pooled(|p| &p.head))?;
    Some((per_pair, base, head))
}

/// The mean of `values` and the half-width of its Student-t interval at
/// `confidence` (0 for one value: no spread to measure).
fn mean_and_half_width(values: &[f64], confidence: f64) -> (f64, f64) {
    let k = values.len();
    let mean = values.iter().sum::<f64>() / k as f64;
    let half = match k {
        1 => 0.0,
        _ => {
            let var = values.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
            t_two_sided(confidence, k as u32 - 1) * (var / k as f64).sqrt()
        }
    };
    (mean, half)
}

/// The minimum detectable effect of an interval (see the module doc): the
/// smallest |true change| that a verdict finds with probability
/// [`MDE_POWER`], in the figure's unit. `half_width` is the interval's
/// half-width at `confidence` over `pairs` round pairs, `min_change` the
/// verdict's smallest relative change and `base` the base statistic.
/// `None` below two pairs (no spread, no resolution).
pub fn min_detectable_effect(
    half_width: f64,
    pairs: usize,
    confidence: f64,
    min_change: f64,
    base: f64,
) -> Option<f64> {
    if pairs < 2 || !half_width.is_finite() || half_width < 0.0 {
        return None;
    }
    let df = u32::try_from(pairs - 1).unwrap_or(u32::MAX);
    let t_alpha = t_two_sided(confidence, df);
    // One-sided quantile at the power: two-sided at 2·power − 1.
    let t_power = t_two_sided(2.0 * MDE_POWER - 1.0, df);
    let se = half_width / t_alpha;
    let by_interval = (t_alpha + t_power) * se;
    let by_size = min_change * base.abs() + t_power * se;
    Some(by_interval.max(by_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One value a round: (head, base) of each pair.
    fn rounds(values: &[(f64, f64)]) -> Vec<PairSamples> {
        values
            .iter()
            .map(|&(h, b)| PairSamples {
                base: vec![b],
                head: vec![h],
            })
            .collect()
    }

    #[test]
    fn a_ratio_estimate_keeps_one_far_off_pair_from_hiding_a_change() {
        // A promotion stage of 0.04 ms made 0.62 ms, where one head round
        // of eight lost the interpreter lock for 4 ms (a recorded run).
        let mut v: Vec<(f64, f64)> = [0.615, 0.618, 0.619, 0.624, 0.625, 0.634, 0.677]
            .iter()
            .zip([0.039, 0.04, 0.04, 0.04, 0.042, 0.043, 0.046])
            .map(|(&h, b)| (h, b))
            .collect();
        v.push((4.187, 0.05));
        let p = rounds(&v);
        let conf = 1.0 - 0.05 / 7.0;
        let by_difference = paired_difference(&p, Statistic::Mean, conf).unwrap();
        assert!(by_difference.interval.lo < 0.0, "{by_difference:?}");
        let by_ratio = paired_ratio(&p, Statistic::Mean, conf).unwrap();
        assert!(by_ratio.interval.lo > 0.0, "{by_ratio:?}");
        // Reported in the figure's unit, against the pooled base.
        let base = by_ratio.base;
        let rel = by_ratio.relative.unwrap();
        assert!((by_ratio.delta - base * rel).abs() < 1e-12, "{by_ratio:?}");
        assert!(rel > 10.0 && by_ratio.interval.lo < by_ratio.delta);
    }

    #[test]
    fn a_ratio_estimate_of_equal_rounds_is_no_change_and_needs_positive_values() {
        let same = rounds(&[(2.0, 2.0), (3.0, 3.0), (2.5, 2.5)]);
        let d = paired_ratio(&same, Statistic::Mean, 0.95).unwrap();
        assert_eq!((d.delta, d.interval.lo, d.interval.hi), (0.0, 0.0, 0.0));
        // A zero has no ratio: the caller keeps the difference.
        assert!(paired_ratio(&rounds(&[(1.0, 0.0), (1.0, 1.0)]), Statistic::Mean, 0.95).is_none());
        assert!(paired_ratio(&[], Statistic::Mean, 0.95).is_none());
        // The same one value a round scaled by 1.1 everywhere: +10 % exactly.
        let scaled = rounds(&[(2.2, 2.0), (3.3, 3.0), (1.1, 1.0)]);
        let d = paired_ratio(&scaled, Statistic::Mean, 0.95).unwrap();
        assert!((d.relative.unwrap() - 0.1).abs() < 1e-12, "{d:?}");
    }

    fn pairs(diffs: &[f64], drift: &[f64]) -> Vec<PairSamples> {
        diffs
            .iter()
            .zip(drift)
            .map(|(d, m)| PairSamples {
                base: vec![100.0 + m, 101.0 + m, 99.0 + m],
                head: vec![100.0 + m + d, 101.0 + m + d, 99.0 + m + d],
            })
            .collect()
    }

    #[test]
    fn the_mean_of_pair_differences_with_a_t_interval() {
        // Differences 1..6: mean 3.5, sd √3.5, t(5) at 95 % = 2.5706.
        let p = pairs(
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            &[0.0, 30.0, -20.0, 5.0, 40.0, 0.0],
        );
        let d = paired_difference(&p, Statistic::P50, 0.95).unwrap();
        assert!((d.delta - 3.5).abs() < 1e-9, "{d:?}");
        let half = 2.5706 * (3.5f64 / 6.0).sqrt();
        assert!((d.interval.hi - d.delta - half).abs() < 1e-3, "{d:?}");
        assert!(d.interval.excludes_zero());
    }

    #[test]
    fn drift_between_pairs_cancels_and_no_difference_is_no_difference() {
        // Pairs 40 ms apart, the same build on both sides of each.
        let p = pairs(&[0.0; 6], &[0.0, 40.0, -30.0, 10.0, 25.0, -5.0]);
        let d = paired_difference(&p, Statistic::P50, 0.95).unwrap();
        assert_eq!((d.delta, d.interval.lo, d.interval.hi), (0.0, 0.0, 0.0));
        // A 2 % shift in every pair stands out of the same drift.
        let p = pairs(&[2.0; 6], &[0.0, 40.0, -30.0, 10.0, 25.0, -5.0]);
        let d = paired_difference(&p, Statistic::P50, 0.95).unwrap();
        assert!(d.interval.lo > 1.9, "{d:?}");
        // Drift that a pooled statistic would spread over both builds.
        assert_eq!(d.relative.map(|r| (r * 1000.0).round()), Some(19.0));
    }

    #[test]
    fn no_complete_pair_is_no_difference_and_one_pair_has_no_spread() {
        let lone = PairSamples {
            base: vec![1.0],
            head: vec![],
        };
        assert_eq!(paired_difference(&[lone], Statistic::Mean, 0.95), None);
        let one = pairs(&[3.0], &[0.0]);
        let d = paired_difference(&one, Statistic::Mean, 0.95).unwrap();
        assert_eq!((d.interval.lo, d.interval.hi), (3.0, 3.0));
    }

    #[test]
    fn the_mde_is_the_interval_plus_the_power_margin_or_the_rule_size() {
        // 8 pairs, t(7): 2.3646 at 95 %, 0.8960 one-sided at 80 %.
        let mde = min_detectable_effect(2.3646, 8, 0.95, 0.0, 100.0).unwrap();
        assert!((mde - (2.3646 + 0.8960)).abs() < 1e-3, "{mde}");
        // A 10 % size rule dominates a tight interval: 10 + 0.896 · se.
        let mde = min_detectable_effect(2.3646, 8, 0.95, 0.10, 100.0).unwrap();
        assert!((mde - 10.896).abs() < 1e-3, "{mde}");
        // A wider interval, a larger MDE; below two pairs none.
        assert!(min_detectable_effect(10.0, 8, 0.95, 0.10, 100.0).unwrap() > 13.0);
        assert_eq!(min_detectable_effect(1.0, 1, 0.95, 0.1, 100.0), None);
        assert_eq!(min_detectable_effect(f64::NAN, 8, 0.95, 0.1, 100.0), None);
    }
}
