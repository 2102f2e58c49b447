//! Do two clients' TTFT distributions of the same workload agree? Each
//! quantile of one against the same quantile of the other, judged against
//! the two clients' documented accuracy; a two-sample Kolmogorov–Smirnov
//! statistic as a second, scale-free view.
//!
//! ```
//! use kvcr_e2e::peer_bench::ttft_agreement::{Accuracy, Agreement, Verdict};
//! let ours = [20.0, 22.0, 25.0, 31.0];
//! let aiperf = [24.0, 26.0, 29.0, 35.0];
//! let a = Agreement::of(&ours, &aiperf, &Accuracy::DOCUMENTED).unwrap();
//! assert_eq!(a.verdict, Verdict::Agree);
//! ```

use serde::Serialize;

/// The quantiles compared, in percent.
pub const QUANTILES: [f64; 6] = [10.0, 25.0, 50.0, 75.0, 90.0, 99.0];

/// How far each client's per-request TTFT may be from the server's, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Accuracy {
    pub ours_ms: f64,
    pub aiperf_ms: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

impl Accuracy {
    /// The client benchmark's latest figures (docs/benchmarks.md,
    /// `client_peers`, "Latest figures"): |client TTFT − server TTFT| p99,
    /// each client against the server's own stamps, paced phase.
    pub const DOCUMENTED: Accuracy = Accuracy {
        ours_ms: 1.36,
        aiperf_ms: 32.3,
        source: "docs/benchmarks.md, client_peers latest figures: |TTFT error| p99 against the server's stamps",
    };

    /// The most two quantiles of the same requests may differ by when each
    /// client is off by at most its accuracy.
    pub fn combined_ms(&self) -> f64 {
        self.ours_ms + self.aiperf_ms
    }
}

/// One quantile of both distributions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QuantileRow {
    pub percent: f64,
    pub ours_ms: f64,
    pub aiperf_ms: f64,
    /// AIPerf − ours.
    pub difference_ms: f64,
    pub within: bool,
}

/// Two-sample Kolmogorov–Smirnov: the largest gap between the two
/// empirical distribution functions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KolmogorovSmirnov {
    pub d: f64,
    /// The gap beyond which the samples differ at the 5 % level
    /// (1.358 · √((n + m) / (n m)), asymptotic).
    pub critical_d_5pct: f64,
    /// Asymptotic p-value of `d`.
    pub p_value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every quantile's difference is within the combined accuracy.
    Agree,
    /// At least one is not.
    Disagree,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Disagree => "disagree",
        }
    }
}

/// The two distributions compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    pub ours_n: usize,
    pub aiperf_n: usize,
    pub tolerance_ms: f64,
    pub accuracy: Accuracy,
    pub quantiles: Vec<QuantileRow>,
    pub ks: KolmogorovSmirnov,
    pub verdict: Verdict,
}

impl Agreement {
    /// `None` when either sample is empty.
    pub fn of(ours_ms: &[f64], aiperf_ms: &[f64], accuracy: &Accuracy) -> Option<Agreement> {
        let ours = sorted(ours_ms)?;
        let aiperf = sorted(aiperf_ms)?;
        let tolerance_ms = accuracy.combined_ms();
        let quantiles: Vec<QuantileRow> = QUANTILES
            .iter()
            .map(|&percent| {
                let (o, a) = (nearest_rank(&ours, percent), nearest_rank(&aiperf, percent));
                QuantileRow {
                    percent,
                    ours_ms: o,
                    aiperf_ms: a,
                    difference_ms: a - o,
                    within: (a - o).abs() <= tolerance_ms,
                }
            })
            .collect();
        let verdict = if quantiles.iter().all(|q| q.within) {
            Verdict::Agree
        } else {
            Verdict::Disagree
        };
        Some(Agreement {
            ours_n: ours.len(),
            aiperf_n: aiperf.len(),
            tolerance_ms,
            accuracy: *accuracy,
            quantiles,
            ks: kolmogorov_smirnov(&ours, &aiperf),
            verdict,
        })
    }

    /// The quantiles as a markdown table, then the KS line and the verdict.
    pub fn markdown(&self) -> String {
        let mut t = format!(
            "| quantile | ours (ms) | AIPerf (ms) | AIPerf − ours (ms) | within ±{:.2} ms |\n|---|---|---|---|---|\n",
            self.tolerance_ms
        );
        for q in &self.quantiles {
            t.push_str(&format!(
                "| p{} | {:.2} | {:.2} | {:+.2} | {} |\n",
                q.percent,
                q.ours_ms,
                q.aiperf_ms,
                q.difference_ms,
                if q.within { "yes" } else { "no" }
            ));
        }
        t.push_str(&format!(
            "\nn = {} (ours), {} (AIPerf). Kolmogorov–Smirnov D = {:.3} (5 % critical D {:.3}, p = {:.3}). \
             Tolerance: ours {:.2} ms + AIPerf {:.2} ms ({}).\n",
            self.ours_n,
            self.aiperf_n,
            self.ks.d,
            self.ks.critical_d_5pct,
            self.ks.p_value,
            self.accuracy.ours_ms,
            self.accuracy.aiperf_ms,
            self.accuracy.source,
        ));
        t
    }
}

fn sorted(values: &[f64]) -> Option<Vec<f64>> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v)
}

/// Nearest-rank percentile of a sorted, non-empty sample (as the client
/// benchmark's figures).
fn nearest_rank(sorted: &[f64], percent: f64) -> f64 {
    let rank = (percent / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn kolmogorov_smirnov(a: &[f64], b: &[f64]) -> KolmogorovSmirnov {
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    let effective = n * m / (n + m);
    let sqrt_ne = effective.sqrt();
    let lambda = (sqrt_ne + 0.12 + 0.11 / sqrt_ne) * d;
    KolmogorovSmirnov {
        d,
        critical_d_5pct: 1.358 / sqrt_ne,
        p_value: kolmogorov_q(lambda),
    }
}

/// Q_KS(λ) = 2 Σ (−1)^(j−1) e^(−2 j² λ²), the Kolmogorov distribution's tail.
fn kolmogorov_q(lambda: f64) -> f64 {
    if lambda < 1e-3 {
        return 1.0;
    }
    let mut sum = 0.0;
    for j in 1..=100 {
        let term = (-2.0 * (j * j) as f64 * lambda * lambda).exp();
        sum += if j % 2 == 1 { term } else { -term };
        if term < 1e-12 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIGHT: Accuracy = Accuracy {
        ours_ms: 1.0,
        aiperf_ms: 4.0,
        source: "test",
    };

    fn ramp(n: usize, from: f64, step: f64) -> Vec<f64> {
        (0..n).map(|i| from + step * i as f64).collect()
    }

    #[test]
    fn quantiles_are_nearest_rank_of_each_sample() {
        let ours = ramp(100, 1.0, 1.0); // 1..=100
        let aiperf = ramp(100, 3.0, 1.0); // 3..=102
        let a = Agreement::of(&ours, &aiperf, &TIGHT).unwrap();
        let row = |p: f64| *a.quantiles.iter().find(|q| q.percent == p).unwrap();
        assert_eq!((row(10.0).ours_ms, row(10.0).aiperf_ms), (10.0, 12.0));
        assert_eq!((row(50.0).ours_ms, row(99.0).ours_ms), (50.0, 99.0));
        assert_eq!(row(75.0).difference_ms, 2.0);
        assert_eq!(a.quantiles.len(), 6);
        assert_eq!((a.ours_n, a.aiperf_n), (100, 100));
    }

    #[test]
    fn a_shift_within_the_combined_accuracy_agrees() {
        // AIPerf reads every request 4.9 ms later: within 1 + 4 = 5 ms.
        let ours = ramp(200, 20.0, 0.5);
        let aiperf: Vec<f64> = ours.iter().map(|t| t + 4.9).collect();
        let a = Agreement::of(&ours, &aiperf, &TIGHT).unwrap();
        assert_eq!(a.verdict, Verdict::Agree);
        assert!(a.quantiles.iter().all(|q| q.within));
        assert_eq!(a.tolerance_ms, 5.0);
    }

    #[test]
    fn a_shift_beyond_it_in_either_direction_disagrees() {
        let ours = ramp(200, 20.0, 0.5);
        for shift in [5.2, -5.2] {
            let aiperf: Vec<f64> = ours.iter().map(|t| t + shift).collect();
            let a = Agreement::of(&ours, &aiperf, &TIGHT).unwrap();
            assert_eq!(a.verdict, Verdict::Disagree, "shift {shift}");
            assert!(a.quantiles.iter().all(|q| !q.within));
        }
    }

    #[test]
    fn one_quantile_out_is_enough_to_disagree() {
        // Same bulk, AIPerf's tail 20 ms longer: only p99 differs.
        let ours = ramp(100, 20.0, 0.1);
        let mut aiperf = ours.clone();
        for t in aiperf.iter_mut().skip(95) {
            *t += 20.0;
        }
        let a = Agreement::of(&ours, &aiperf, &TIGHT).unwrap();
        assert_eq!(a.verdict, Verdict::Disagree);
        let out: Vec<f64> = a
            .quantiles
            .iter()
            .filter(|q| !q.within)
            .map(|q| q.percent)
            .collect();
        assert_eq!(out, vec![99.0]);
        assert!(a.markdown().contains("| p99 |"), "{}", a.markdown());
        assert!(a.markdown().contains("| no |"));
    }

    #[test]
    fn the_ks_statistic_is_zero_for_equal_samples_and_one_for_disjoint_ones() {
        let x = ramp(50, 1.0, 1.0);
        let same = Agreement::of(&x, &x, &TIGHT).unwrap().ks;
        assert_eq!(same.d, 0.0);
        assert!(same.p_value > 0.99);
        let far = ramp(50, 1000.0, 1.0);
        let apart = Agreement::of(&x, &far, &TIGHT).unwrap().ks;
        assert_eq!(apart.d, 1.0);
        assert!(apart.p_value < 1e-6, "{apart:?}");
        assert!((apart.critical_d_5pct - 1.358 / 5.0).abs() < 1e-12);
        // Half the values shifted past the other sample: D = 0.5.
        let half: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| if i < 25 { *v } else { v + 1000.0 })
            .collect();
        assert!((Agreement::of(&x, &half, &TIGHT).unwrap().ks.d - 0.5).abs() < 1e-12);
    }

    #[test]
    fn an_empty_sample_has_no_agreement_and_nan_is_left_out() {
        assert!(Agreement::of(&[], &[1.0], &TIGHT).is_none());
        assert!(Agreement::of(&[1.0], &[f64::NAN], &TIGHT).is_none());
        let a = Agreement::of(&[1.0, f64::NAN], &[2.0], &TIGHT).unwrap();
        assert_eq!(a.ours_n, 1);
    }

    #[test]
    fn the_documented_accuracy_is_the_client_benchmarks_p99_errors() {
        let docs = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.md"),
        )
        .unwrap();
        // The figures stated here are the table's: ours, then AIPerf.
        assert!(docs.contains("| 1.36 ms (1.00×) |"), "ours' figure moved");
        assert!(
            docs.contains("| 32.3 ms (23.7×) |"),
            "AIPerf's figure moved"
        );
        assert!((Accuracy::DOCUMENTED.combined_ms() - 33.66).abs() < 1e-9);
    }
}
