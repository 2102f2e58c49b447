//! From rounds to verdicts: a [`Collector`] takes each round's figures, and
//! [`Collector::compare`] turns them into a [`Comparison`], one
//! [`FigureResult`] per figure with its difference, interval and verdict.

use serde::{Deserialize, Serialize};

use super::errors::CompareError;
use super::figures::{Better, FigureSpec, RunResults};
use super::rounds::{Build, Round};
use super::stats::{difference, Bootstrap, Difference, PairSamples};

/// Version of the compare.json layout.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

/// The fewest round pairs a figure needs for a verdict (`--min-pairs`).
///
/// Why 6: the pairs are the independent units (rounds differ far more than
/// requests within a round), and with k pairs no test that treats their
/// differences as exchangeable reaches p < 0.05 two-sided below k = 6: the
/// exact sign-flip test's smallest p is 2 / 2^k (0.0625 at k = 5, 0.031 at
/// k = 6). Below that an interval that excludes 0 says more about how the
/// rounds fell (two pairs that happen to agree give a near-zero-width
/// interval) than about the builds. The simulation in docs/benchmarks.md
/// ("False-positive and detection rates") measures the rates per k.
pub const DEFAULT_MIN_PAIRS: u32 = 6;

fn default_min_pairs() -> u32 {
    DEFAULT_MIN_PAIRS
}

/// When a difference is a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Confidence of the interval (0.95: a 95 % interval).
    pub confidence: f64,
    /// The smallest |head − base| / |base| that counts (0.10: 10 %).
    pub min_relative_change: f64,
    /// The fewest complete round pairs for a verdict; with fewer a figure is
    /// [`Verdict::Inconclusive`] ([`DEFAULT_MIN_PAIRS`]).
    #[serde(default = "default_min_pairs")]
    pub min_pairs: u32,
    /// Whether `confidence` holds for the whole comparison (Bonferroni:
    /// each of the m figures with a verdict gets a 1 − (1 − confidence)/m
    /// interval) rather than for each figure alone (`--per-figure`).
    /// Absent in files written before it existed: per figure.
    #[serde(default)]
    pub familywise: bool,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            confidence: 0.95,
            min_relative_change: 0.10,
            min_pairs: DEFAULT_MIN_PAIRS,
            familywise: true,
        }
    }
}

impl Rule {
    /// The rule, if its settings make sense.
    pub fn checked(self) -> Result<Self, CompareError> {
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(CompareError::Setting(format!(
                "the confidence must lie strictly between 0 and 1 (0.95 for a 95 % interval), got {}",
                self.confidence
            )));
        }
        if !(self.min_relative_change >= 0.0 && self.min_relative_change.is_finite()) {
            return Err(CompareError::Setting(format!(
                "the minimum relative change must be a fraction of at least 0 (0.10 for 10 %), got {}",
                self.min_relative_change
            )));
        }
        if self.min_pairs < 2 {
            return Err(CompareError::Setting(format!(
                "the minimum number of round pairs must be at least 2 (an interval needs the \
                 spread between pairs; {DEFAULT_MIN_PAIRS} by default), got {}",
                self.min_pairs
            )));
        }
        Ok(self)
    }

    /// The confidence of each figure's interval when `judged` figures get a
    /// verdict: family-wise, Bonferroni's 1 − (1 − confidence)/judged, so
    /// that the chance of any false verdict among them stays within
    /// 1 − confidence; per figure, the confidence itself.
    ///
    /// Why family-wise by default: a comparison judges some 27 figures, and
    /// at 95 % each, two builds that are the same got a false verdict in 3
    /// of 4 runs on the 2-core machine (docs/benchmarks.md, "Proof runs").
    pub fn figure_confidence(&self, judged: usize) -> f64 {
        match self.familywise && judged > 1 {
            true => 1.0 - (1.0 - self.confidence) / judged as f64,
            false => self.confidence,
        }
    }

    /// The rule in words.
    pub fn describe(&self) -> String {
        let scope = match self.familywise {
            true => "family-wise interval (Bonferroni over the figures judged)",
            false => "interval (per figure)",
        };
        format!(
            "the {:.0} % {scope} of head − base excludes 0 and |change| ≥ {:.0} % of base, \
             over at least {} round pairs",
            self.confidence * 100.0,
            self.min_relative_change * 100.0,
            self.min_pairs
        )
    }
}

/// What a figure's comparison concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Head is worse, by the rule.
    #[serde(rename = "regression")]
    Regression,
    /// Head is better, by the rule.
    #[serde(rename = "improvement")]
    Improvement,
    /// The rule found no difference.
    #[serde(rename = "no change detected")]
    NoChange,
    /// One build has no samples of the figure in any round pair: nothing to
    /// compare, which is a failure (absent is not zero).
    #[serde(rename = "missing")]
    Missing,
    /// Both builds have samples, but in fewer round pairs than
    /// [`Rule::min_pairs`]: no verdict either way. Not a failure, but the
    /// summary, JUnit (skipped) and the page say so.
    #[serde(rename = "inconclusive")]
    Inconclusive,
}

impl Verdict {
    /// As written in compare.json and the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::NoChange => "no change detected",
            Verdict::Missing => "missing",
            Verdict::Inconclusive => "inconclusive",
        }
    }

    /// Whether a CI gate fails on it.
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Regression | Verdict::Missing)
    }
}

/// The verdict of `d` for a figure where `better` is better.
pub fn verdict(d: &Difference, better: Better, rule: &Rule) -> Verdict {
    let big = d
        .relative
        .map_or(true, |r| r.abs() >= rule.min_relative_change);
    // The interval and the point estimate must agree on the direction.
    let up = d.interval.lo > 0.0 && d.delta > 0.0;
    let down = d.interval.hi < 0.0 && d.delta < 0.0;
    if !big || !(up || down) {
        return Verdict::NoChange;
    }
    match (better, up) {
        (Better::Lower, true) | (Better::Higher, false) => Verdict::Regression,
        _ => Verdict::Improvement,
    }
}

/// One sample and the round it came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The round's index in the plan.
    pub round: u32,
    /// The value, in the figure's unit.
    pub value: f64,
}

/// One figure compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureResult {
    /// What the figure is.
    #[serde(flatten)]
    pub spec: FigureSpec,
    /// The base build's samples, with their rounds.
    pub base: Vec<Sample>,
    /// The head build's samples, with their rounds.
    pub head: Vec<Sample>,
    /// Round pairs with samples of both builds (the ones compared).
    pub pairs: u32,
    /// Statistics, difference and interval; absent when missing.
    pub difference: Option<Difference>,
    /// The verdict.
    pub verdict: Verdict,
    /// The verdict in a sentence.
    pub reason: String,
}

/// A round as the comparison records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// The round.
    #[serde(flatten)]
    pub round: Round,
    /// Its run id.
    pub run_id: String,
    /// Where its results came from.
    pub source: String,
}

/// A whole comparison: what `compare.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// [`COMPARE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The verdict rule.
    pub rule: Rule,
    /// The bootstrap settings.
    pub bootstrap: Bootstrap,
    /// The rounds in running order.
    pub rounds: Vec<RoundRecord>,
    /// Every figure, in report order.
    pub figures: Vec<FigureResult>,
    /// The confidence of each figure's interval ([`Rule::figure_confidence`]);
    /// absent in files written before it existed (then `rule.confidence`).
    #[serde(default)]
    pub figure_confidence: Option<f64>,
}

/// How many figures got each verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Regressions.
    pub regression: usize,
    /// Improvements.
    pub improvement: usize,
    /// No change detected.
    pub no_change: usize,
    /// Missing from one build.
    pub missing: usize,
    /// Too few round pairs for a verdict.
    pub inconclusive: usize,
}

impl Comparison {
    /// How many figures got each verdict.
    pub fn counts(&self) -> Counts {
        let n = |v: Verdict| self.figures.iter().filter(|f| f.verdict == v).count();
        Counts {
            regression: n(Verdict::Regression),
            improvement: n(Verdict::Improvement),
            no_change: n(Verdict::NoChange),
            missing: n(Verdict::Missing),
            inconclusive: n(Verdict::Inconclusive),
        }
    }

    /// The rule in words, with the confidence each figure's interval had.
    pub fn describe_rule(&self) -> String {
        let each = self.figure_confidence.unwrap_or(self.rule.confidence);
        let judged = self
            .figures
            .iter()
            .filter(|f| f.pairs >= self.rule.min_pairs && f.difference.is_some())
            .count();
        match each == self.rule.confidence {
            true => self.rule.describe(),
            false => format!(
                "{}; {judged} figures judged, each interval at {}",
                self.rule.describe(),
                percent(each)
            ),
        }
    }

    /// No regression and nothing missing.
    pub fn passed(&self) -> bool {
        !self.figures.iter().any(|f| f.verdict.fails())
    }

    /// A warning when the rounds cannot measure their own spread: with one
    /// pair, two runs of the same build that differ by chance (load, a
    /// slower stack) look like a difference between the builds.
    pub fn caution(&self) -> Option<String> {
        let inconclusive = self.counts().inconclusive;
        (inconclusive > 0).then(|| {
            format!(
                "{inconclusive} figure(s) inconclusive: fewer than {} round pairs with samples \
                 of both builds, too few to tell a change from how the rounds fell (a drift \
                 of the machine across rounds looks like a difference between builds); run \
                 --rounds {} or more. Not counted as a regression.",
                self.rule.min_pairs,
                2 * self.rule.min_pairs
            )
        })
    }

    /// The letters of the rounds in running order (`ABBA`).
    pub fn letters(&self) -> String {
        self.rounds
            .iter()
            .map(|r| match r.round.build {
                Build::Base => 'A',
                Build::Head => 'B',
            })
            .collect()
    }
}

/// Gathers rounds, then compares.
///
/// ```
/// use kvcr_e2e::compare::{Bootstrap, Collector, RoundPlan, Rule};
/// # fn run_phase1(_: kvcr_e2e::compare::Build) -> kvcr_e2e::compare::RunResults { todo!() }
/// # fn demo() -> Result<(), kvcr_e2e::compare::CompareError> {
/// let plan = RoundPlan::abba(6)?;
/// let mut collector = Collector::default();
/// for round in plan.rounds() {
///     let results = run_phase1(round.build);   // one run of TC-05 + TC-06
///     collector.add_round(*round, &results, "target/phase1/runs/...");
/// }
/// let comparison = collector.compare(&Rule::default(), &Bootstrap::default());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Collector {
    rounds: Vec<RoundRecord>,
    figures: Vec<(FigureSpec, Vec<(Round, f64)>)>,
}

impl Collector {
    /// Adds every figure of one round's run.
    pub fn add_round(&mut self, round: Round, run: &RunResults, source: impl Into<String>) {
        self.rounds.push(RoundRecord {
            round,
            run_id: run.run.run_id.clone(),
            source: source.into(),
        });
        for figure in run.figures() {
            self.add_samples(round, &figure.spec, &figure.values);
        }
    }

    /// Adds samples of one figure in `round` (for figures that do not come
    /// from a results.json; such a round has no run id or source).
    pub fn add_samples(&mut self, round: Round, spec: &FigureSpec, values: &[f64]) {
        if !self.rounds.iter().any(|r| r.round.index == round.index) {
            self.rounds.push(RoundRecord {
                round,
                run_id: String::new(),
                source: String::new(),
            });
        }
        let slot = match self.figures.iter().position(|(s, _)| s.id == spec.id) {
            Some(i) => i,
            None => {
                self.figures.push((spec.clone(), Vec::new()));
                self.figures.len() - 1
            }
        };
        let samples = &mut self.figures[slot].1;
        samples.extend(values.iter().map(|&v| (round, v)));
    }

    /// Compares every figure under `rule`.
    pub fn compare(&self, rule: &Rule, bootstrap: &Bootstrap) -> Comparison {
        let judged = self
            .figures
            .iter()
            .filter(|(_, samples)| complete_pairs(samples) >= rule.min_pairs)
            .count();
        let confidence = rule.figure_confidence(judged);
        let figures = self
            .figures
            .iter()
            .map(|(spec, samples)| compare_figure(spec, samples, rule, confidence, bootstrap))
            .collect();
        let mut rounds = self.rounds.clone();
        rounds.sort_by_key(|r| r.round.index);
        Comparison {
            schema_version: COMPARE_SCHEMA_VERSION,
            rule: *rule,
            bootstrap: *bootstrap,
            rounds,
            figures,
            figure_confidence: Some(confidence),
        }
    }
}

/// Round pairs in which both builds have samples.
fn complete_pairs(samples: &[(Round, f64)]) -> u32 {
    let pairs = |build: Build| -> std::collections::BTreeSet<u32> {
        samples
            .iter()
            .filter(|(r, _)| r.build == build)
            .map(|(r, _)| r.pair())
            .collect()
    };
    pairs(Build::Base).intersection(&pairs(Build::Head)).count() as u32
}

/// A confidence as a percentage with the digits it needs (95 %, 99.81 %).
fn percent(confidence: f64) -> String {
    let p = confidence * 100.0;
    match (p - p.round()).abs() < 1e-9 {
        true => format!("{p:.0} %"),
        false => format!("{p:.2} %"),
    }
}

/// A per-figure seed: the comparison's seed mixed with the figure's id
/// (FNV-1a), so figures resample independently and reproducibly.
fn figure_seed(seed: u64, id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    }) ^ seed
}

fn compare_figure(
    spec: &FigureSpec,
    samples: &[(Round, f64)],
    rule: &Rule,
    confidence: f64,
    bootstrap: &Bootstrap,
) -> FigureResult {
    let side = |build: Build| -> Vec<Sample> {
        samples
            .iter()
            .filter(|(r, _)| r.build == build)
            .map(|(r, v)| Sample {
                round: r.index,
                value: *v,
            })
            .collect()
    };
    let npairs = samples.iter().map(|(r, _)| r.pair() + 1).max().unwrap_or(0);
    let mut pairs = vec![PairSamples::default(); npairs as usize];
    for (round, value) in samples {
        let pair = &mut pairs[round.pair() as usize];
        match round.build {
            Build::Base => pair.base.push(*value),
            Build::Head => pair.head.push(*value),
        }
    }
    let complete = complete_pairs(samples);
    let boot = Bootstrap {
        seed: figure_seed(bootstrap.seed, &spec.id),
        ..*bootstrap
    };
    let diff = difference(&pairs, spec.statistic, confidence, &boot);
    let (verdict, reason) = match &diff {
        None => (Verdict::Missing, missing_reason(&pairs)),
        Some(d) if complete < rule.min_pairs => (
            Verdict::Inconclusive,
            format!(
                "{}, but only {complete} round pair(s) with both builds, fewer than the {} a \
                 verdict needs (--min-pairs)",
                measured(spec, d, confidence),
                rule.min_pairs
            ),
        ),
        Some(d) => {
            let v = verdict(d, spec.better, rule);
            (v, reason(spec, d, v, rule, confidence))
        }
    };
    FigureResult {
        spec: spec.clone(),
        base: side(Build::Base),
        head: side(Build::Head),
        pairs: complete,
        difference: diff,
        verdict,
        reason,
    }
}

fn missing_reason(pairs: &[PairSamples]) -> String {
    let has = |f: fn(&PairSamples) -> bool| pairs.iter().any(f);
    match (has(|p| !p.base.is_empty()), has(|p| !p.head.is_empty())) {
        (true, false) => "no head round has samples of this figure".into(),
        (false, true) => "no base round has samples of this figure".into(),
        _ => "no round pair has samples of this figure from both builds".into(),
    }
}

/// The figures in words: statistic, base → head, difference, interval.
fn measured(spec: &FigureSpec, d: &Difference, confidence: f64) -> String {
    let u = &spec.unit;
    let rel = d
        .relative
        .map(|r| format!(" ({:+.1} %)", r * 100.0))
        .unwrap_or_default();
    format!(
        "{} {:.2} → {:.2} {u}, head − base {:+.2} {u}{rel}, {} interval [{:+.2}, {:+.2}]",
        spec.statistic.as_str(),
        d.base,
        d.head,
        d.delta,
        percent(confidence),
        d.interval.lo,
        d.interval.hi,
    )
}

fn reason(spec: &FigureSpec, d: &Difference, v: Verdict, rule: &Rule, confidence: f64) -> String {
    let head = measured(spec, d, confidence);
    let why = match v {
        Verdict::Regression | Verdict::Improvement => format!(
            "excludes 0 and the change is at least {:.0} %",
            rule.min_relative_change * 100.0
        ),
        _ if !d.interval.excludes_zero() => "contains 0".to_string(),
        _ => format!(
            "excludes 0 but the change is under {:.0} %",
            rule.min_relative_change * 100.0
        ),
    };
    format!("{head} {why}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::stats::{Interval, Statistic};

    #[test]
    fn familywise_intervals_are_bonferroni_over_the_figures_judged() {
        let rule = Rule::default();
        assert!(rule.familywise);
        assert_eq!(rule.figure_confidence(1), 0.95);
        assert!((rule.figure_confidence(25) - 0.998).abs() < 1e-12);
        let per_figure = Rule {
            familywise: false,
            ..rule
        };
        assert_eq!(per_figure.figure_confidence(25), 0.95);
        assert_eq!(percent(0.95), "95 %");
        assert_eq!(percent(1.0 - 0.05 / 27.0), "99.81 %");
    }

    /// Twelve figures: eleven the same in both builds, one that moved by a
    /// few units in each pair, as a build that is the same does by chance
    /// once in some twenty figures. At 95 % per figure that one is a
    /// regression; family-wise (each interval at 99.58 %) it is not.
    #[test]
    fn familywise_does_not_judge_a_chance_shift_in_one_of_many_figures() {
        let spec = |f: usize| FigureSpec {
            id: format!("f{f}"),
            label: format!("figure {f}"),
            unit: "ms".into(),
            statistic: Statistic::P50,
            better: crate::compare::figures::Better::Lower,
        };
        let shift = [1.0, 4.0, 2.0, 5.0, 1.0, 3.0];
        let mut c = Collector::default();
        for round in crate::compare::RoundPlan::abba(12).unwrap().rounds() {
            let k = round.pair() as usize;
            let base = 20.0;
            let moved = match round.build {
                Build::Base => base,
                Build::Head => base + shift[k],
            };
            c.add_samples(*round, &spec(0), &[moved]);
            for f in 1..12 {
                c.add_samples(*round, &spec(f), &[base]);
            }
        }
        let verdict_of_the_moved = |familywise| {
            let rule = Rule {
                familywise,
                ..Rule::default()
            };
            let c = c.compare(&rule, &Bootstrap::default());
            (c.figures[0].verdict, c.figure_confidence)
        };
        assert_eq!(
            verdict_of_the_moved(false),
            (Verdict::Regression, Some(0.95))
        );
        let (verdict, each) = verdict_of_the_moved(true);
        assert_eq!(verdict, Verdict::NoChange);
        assert!((each.unwrap() - (1.0 - 0.05 / 12.0)).abs() < 1e-12);
    }

    fn diff(base: f64, head: f64, lo: f64, hi: f64) -> Difference {
        let delta = head - base;
        Difference {
            base,
            head,
            delta,
            relative: (base != 0.0).then(|| delta / base.abs()),
            interval: Interval { lo, hi },
        }
    }

    #[test]
    fn the_verdict_follows_the_rule_and_the_figure_direction() {
        let rule = Rule::default();
        let up = diff(100.0, 120.0, 5.0, 30.0);
        assert_eq!(verdict(&up, Better::Lower, &rule), Verdict::Regression);
        assert_eq!(verdict(&up, Better::Higher, &rule), Verdict::Improvement);
        let down = diff(100.0, 80.0, -30.0, -5.0);
        assert_eq!(verdict(&down, Better::Lower, &rule), Verdict::Improvement);
        assert_eq!(verdict(&down, Better::Higher, &rule), Verdict::Regression);
        // Interval contains 0.
        let wide = diff(100.0, 120.0, -1.0, 30.0);
        assert_eq!(verdict(&wide, Better::Lower, &rule), Verdict::NoChange);
        // Real but under 10 %.
        let small = diff(100.0, 105.0, 2.0, 8.0);
        assert_eq!(verdict(&small, Better::Lower, &rule), Verdict::NoChange);
        let loose = Rule {
            min_relative_change: 0.02,
            ..rule
        };
        assert_eq!(verdict(&small, Better::Lower, &loose), Verdict::Regression);
        // Point and interval disagree on the sign: no verdict.
        let odd = diff(100.0, 80.0, 1.0, 5.0);
        assert_eq!(verdict(&odd, Better::Lower, &rule), Verdict::NoChange);
    }

    #[test]
    fn a_bad_rule_is_refused() {
        assert!(Rule::default().checked().is_ok());
        for (confidence, min) in [(1.0, 0.1), (0.0, 0.1), (0.95, -0.1), (0.95, f64::NAN)] {
            let rule = Rule {
                confidence,
                min_relative_change: min,
                ..Rule::default()
            };
            assert!(rule.checked().is_err(), "{rule:?}");
        }
        let one = Rule {
            min_pairs: 1,
            ..Rule::default()
        };
        assert!(one.checked().is_err());
    }

    fn spec(id: &str) -> FigureSpec {
        FigureSpec {
            id: id.into(),
            label: id.into(),
            unit: "ms".into(),
            statistic: Statistic::P50,
            better: Better::Lower,
        }
    }

    #[test]
    fn samples_keep_their_round_and_a_one_sided_figure_is_missing() {
        let plan = crate::compare::RoundPlan::abba(12).unwrap();
        let mut c = Collector::default();
        for round in plan.rounds() {
            let shift = if round.build == Build::Head {
                30.0
            } else {
                0.0
            };
            let values: Vec<f64> = (0..8).map(|i| 100.0 + shift + f64::from(i)).collect();
            c.add_samples(*round, &spec("slow"), &values);
            if round.build == Build::Base {
                c.add_samples(*round, &spec("base-only"), &values);
            }
        }
        let cmp = c.compare(&Rule::default(), &Bootstrap::default());
        let slow = &cmp.figures[0];
        assert_eq!(slow.verdict, Verdict::Regression, "{}", slow.reason);
        assert_eq!(slow.pairs, 6);
        assert_eq!(slow.base.len(), 48);
        assert_eq!(slow.base[0].round, 0);
        assert_eq!(slow.head[0].round, 1);
        assert_eq!(slow.base[8].round, 3);
        assert!(slow.reason.contains("excludes 0"), "{}", slow.reason);
        let missing = &cmp.figures[1];
        assert_eq!(missing.verdict, Verdict::Missing);
        assert_eq!(missing.reason, "no head round has samples of this figure");
        let counts = cmp.counts();
        assert_eq!((counts.regression, counts.missing), (1, 1));
        assert!(!cmp.passed());
    }

    #[test]
    fn too_few_pairs_are_inconclusive_even_with_a_tight_interval() {
        // As seen live (A against A, 2 pairs): both base rounds ≈ 499 ms,
        // both head rounds ≈ 440 ms, so the interval is a fraction of a ms
        // wide and excludes 0. Below min_pairs that is no verdict.
        let figure = FigureSpec {
            statistic: Statistic::Mean,
            ..spec("t1")
        };
        let mut c = Collector::default();
        for (round, value) in crate::compare::RoundPlan::abba(4)
            .unwrap()
            .rounds()
            .iter()
            .zip([499.4, 439.6, 440.0, 499.6])
        {
            c.add_samples(*round, &figure, &[value]);
        }
        let cmp = c.compare(&Rule::default(), &Bootstrap::default());
        let t1 = &cmp.figures[0];
        assert!(t1.difference.unwrap().interval.excludes_zero(), "{t1:?}");
        assert_eq!(t1.verdict, Verdict::Inconclusive, "{}", t1.reason);
        assert!(t1.reason.contains("2 round pair(s)"), "{}", t1.reason);
        assert!(t1.reason.contains("fewer than the 6"), "{}", t1.reason);
        assert!(!t1.verdict.fails() && cmp.passed());
        assert_eq!(cmp.counts().inconclusive, 1);
        assert!(cmp.caution().unwrap().contains("--rounds 12"));
        // The same figures with a lower bar give the (false) verdict.
        let loose = Rule {
            min_pairs: 2,
            ..Rule::default()
        };
        assert_eq!(
            c.compare(&loose, &Bootstrap::default()).figures[0].verdict,
            Verdict::Improvement
        );
        assert_eq!(c.compare(&loose, &Bootstrap::default()).caution(), None);
    }

    #[test]
    fn figures_resample_independently_but_reproducibly() {
        assert_ne!(figure_seed(1, "a"), figure_seed(1, "b"));
        assert_eq!(figure_seed(1, "a"), figure_seed(1, "a"));
    }
}
