//! From rounds to verdicts: a [`Collector`] takes each round's figures, and
//! [`Collector::compare`] turns them into a [`Comparison`], one
//! [`FigureResult`] per figure with its difference, interval and verdict.

use serde::{Deserialize, Serialize};

use super::errors::CompareError;
use super::figures::{Better, Family, FigureSpec, Judged, RunResults};
use super::gate::Gate;
use super::rounds::{Build, Round};
use crate::stats::{
    difference, min_detectable_effect, paired_difference, paired_ratio, Bootstrap, Difference,
    PairSamples,
};

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
    /// The smallest |head − base| / |base| that counts (0.05: 5 %). Half
    /// the change a comparison is meant to find: with the size rule at 10 %,
    /// a true 10 % change would pass it only half the time.
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
    /// How head − base and its interval are estimated. Absent in files
    /// written before it existed: [`Method::Pooled`].
    #[serde(default = "Method::pooled")]
    pub method: Method,
    /// How many times the rounds are looked at for a verdict (`--early-stop`:
    /// one look per ABBA block from the pair minimum on,
    /// [`Rule::early_stop_looks`]); the error rate is split over them
    /// (Bonferroni across looks), so stopping at the first look where every
    /// figure has a verdict keeps the chance of any false verdict within
    /// 1 − confidence. 1 without early stop.
    #[serde(default = "one_look")]
    pub looks: u32,
    /// The share of the family-wise error rate that the figures isolating
    /// a KVCR path ([`Family::Path`]) split among themselves; the other
    /// figures split the rest ([`Rule::family_confidences`]). Absent in
    /// files written before it existed: 0, every figure in one family.
    #[serde(default)]
    pub path_share: f64,
}

/// The default [`Rule::path_share`]: the few path figures (three in a
/// default comparison) share half the error rate, the thirty-odd others
/// the other half. With eight pairs a path figure's interval is then about
/// a quarter narrower than in one family of all, and another figure's
/// about a tenth wider (docs/benchmarks.md, "Two families").
pub const PATH_SHARE: f64 = 0.5;

fn one_look() -> u32 {
    1
}

/// How a figure's head − base and its interval are estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The mean of the per-pair differences of the statistic, with a
    /// Student-t interval over the pairs ([`crate::stats::paired_difference`]):
    /// the drift a pair shares cancels inside its difference (the default).
    Paired,
    /// The mean of the per-pair log ratios head / base, with a Student-t
    /// interval over the pairs, in the figure's unit
    /// ([`crate::stats::paired_ratio`]; `--method paired-log`): one
    /// far-off pair weighs as one factor among the pairs.
    PairedLog,
    /// The statistic of each build's pooled samples, with a round-pair
    /// bootstrap interval ([`crate::stats::difference`]; `--pooled`).
    Pooled,
}

impl Method {
    fn pooled() -> Self {
        Method::Pooled
    }

    /// `paired`, `paired-log` or `pooled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Paired => "paired",
            Method::PairedLog => "paired-log",
            Method::Pooled => "pooled",
        }
    }
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            confidence: 0.95,
            min_relative_change: 0.05,
            min_pairs: DEFAULT_MIN_PAIRS,
            familywise: true,
            method: Method::Paired,
            looks: 1,
            path_share: PATH_SHARE,
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
        if !(0.0..1.0).contains(&self.path_share) {
            return Err(CompareError::Setting(format!(
                "the path figures' share of the error rate must lie in [0, 1), got {}",
                self.path_share
            )));
        }
        if self.looks == 0 {
            return Err(CompareError::Setting(
                "a comparison looks at its rounds at least once".into(),
            ));
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
        let looks = f64::from(self.looks.max(1));
        match self.familywise && judged > 1 {
            true => 1.0 - (1.0 - self.confidence) / (judged as f64 * looks),
            false => 1.0 - (1.0 - self.confidence) / looks,
        }
    }

    /// The confidence of each interval when `path` figures of
    /// [`Family::Path`] and `other` figures of [`Family::Other`] get a
    /// verdict, as (path, other). Family-wise, a weighted Bonferroni: the
    /// path figures split [`Rule::path_share`] of the error rate, the
    /// others the rest, so the chance of any false verdict among all of
    /// them still stays within 1 − confidence. A family with no figure
    /// leaves the whole rate to the other; a share of 0 makes one family
    /// of all ([`Rule::figure_confidence`]).
    pub fn family_confidences(&self, path: usize, other: usize) -> (f64, f64) {
        if !self.familywise || self.path_share == 0.0 || path == 0 || other == 0 {
            let each = self.figure_confidence(path + other);
            return (each, each);
        }
        let alpha = (1.0 - self.confidence) / f64::from(self.looks.max(1));
        (
            1.0 - alpha * self.path_share / path as f64,
            1.0 - alpha * (1.0 - self.path_share) / other as f64,
        )
    }

    /// The pair counts at which an early-stopping comparison of `pairs`
    /// pairs looks: every second pair (one ABBA block, over which a linear
    /// drift cancels) from the pair minimum on, and the last pair.
    pub fn early_stop_looks(&self, pairs: u32) -> Vec<u32> {
        let mut looks: Vec<u32> = (self.min_pairs..pairs).step_by(2).collect();
        if pairs >= self.min_pairs {
            looks.push(pairs);
        }
        looks
    }

    /// The rule in words.
    pub fn describe(&self) -> String {
        let scope = match self.familywise {
            true => "family-wise interval (Bonferroni over the figures judged)",
            false => "interval (per figure)",
        };
        let estimate = match self.method {
            Method::Paired => "mean paired difference",
            Method::PairedLog => "mean paired log ratio",
            Method::Pooled => "head − base",
        };
        let looks = match self.looks {
            0 | 1 => String::new(),
            n => format!(", split over {n} looks (early stop)"),
        };
        format!(
            "the {:.0} % {scope} of {estimate} excludes 0 and |change| ≥ {:.0} % of base, \
             over at least {} round pairs{looks}",
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
    /// [`Rule::min_pairs`]: no verdict either way. The comparison has no
    /// verdict either ([`Gate::NoVerdict`]).
    #[serde(rename = "inconclusive")]
    Inconclusive,
    /// The interval contains no change of the rule's size, but it is wider
    /// than the rule's minimum change: it cannot exclude a change of that
    /// size. Reported apart from a tight "no change", not a failure (on a
    /// shared machine most latency intervals are this wide; see
    /// docs/benchmarks.md).
    #[serde(rename = "no change detected, interval too wide")]
    NoChangeTooWide,
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
            Verdict::NoChangeTooWide => "no change detected, interval too wide",
        }
    }

    /// Whether it is a finding against head (exit 1).
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Regression | Verdict::Missing)
    }
}

/// The largest relative change (a fraction of |base|) that the interval of
/// `d` cannot exclude: max(|lo|, |hi|) / |base|. `None` when base is 0
/// and the interval is not [0, 0] (no relative bound).
pub fn largest_unexcluded_change(d: &Difference) -> Option<f64> {
    let reach = d.interval.lo.abs().max(d.interval.hi.abs());
    match (reach == 0.0, d.base == 0.0) {
        (true, _) => Some(0.0),
        (false, true) => None,
        (false, false) => Some(reach / d.base.abs()),
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
    /// The largest change, as a fraction of base, that the interval cannot
    /// exclude ([`largest_unexcluded_change`]); absent without an interval
    /// or a relative bound, and for counts (judged by any increase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cannot_exclude: Option<f64>,
    /// The minimum detectable effect, as a fraction of |base|: the smallest
    /// change this run's spread would report as a verdict four times in
    /// five ([`crate::stats::min_detectable_effect`]); absent without an
    /// interval over two pairs or more, with base 0, and for counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mde: Option<f64>,
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
    /// Why the round is no clean evidence: its run exited non-zero, a
    /// trial failed, or it left no run directory of its own. Such a round
    /// gives the comparison no verdict ([`Gate::NoVerdict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
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
    /// The confidence of each figure's interval ([`Rule::figure_confidence`]),
    /// of the [`Family::Other`] figures where the path figures have their
    /// own ([`Comparison::path_confidence`]); absent in files written
    /// before it existed (then `rule.confidence`).
    #[serde(default)]
    pub figure_confidence: Option<f64>,
    /// The confidence of each [`Family::Path`] figure's interval
    /// ([`Rule::family_confidences`]); absent where the path figures had
    /// no share of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_confidence: Option<f64>,
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
    /// No change detected, but the interval is wider than the rule's
    /// minimum change.
    pub too_wide: usize,
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
            too_wide: n(Verdict::NoChangeTooWide),
        }
    }

    /// The rule in words, with the confidence each figure's interval had.
    pub fn describe_rule(&self) -> String {
        let each = self.figure_confidence.unwrap_or(self.rule.confidence);
        let judged = |family: Option<Family>| {
            self.figures
                .iter()
                .filter(|f| f.spec.judged == Judged::Interval)
                .filter(|f| family.map_or(true, |family| f.spec.family == family))
                .filter(|f| f.pairs >= self.rule.min_pairs && f.difference.is_some())
                .count()
        };
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        match (self.path_confidence, each == self.rule.confidence) {
            (Some(path), _) => {
                let (p, o) = (judged(Some(Family::Path)), judged(Some(Family::Other)));
                format!(
                    "{}; {p} figure{} isolating a KVCR path judged, each interval at {} \
                     ({:.0} % of the error rate), {o} other figure{}, each at {}",
                    self.rule.describe(),
                    plural(p),
                    percent(path),
                    self.rule.path_share * 100.0,
                    plural(o),
                    percent(each)
                )
            }
            (None, true) => self.rule.describe(),
            (None, false) => format!(
                "{}; {} figures judged, each interval at {}",
                self.rule.describe(),
                judged(None),
                percent(each)
            ),
        }
    }

    /// What the comparison concluded: a finding against head, no verdict,
    /// or a pass ([`Gate`], whose exit codes `kvcr-e2e` returns).
    pub fn gate(&self) -> Gate {
        if self.figures.iter().any(|f| f.verdict.fails()) {
            Gate::Regression
        } else if !self.without_verdict().is_empty() {
            Gate::NoVerdict
        } else {
            Gate::Pass
        }
    }

    /// Whether an early-stopping comparison may stop at this look: a
    /// figure is a regression (the comparison fails whatever the rounds
    /// still to come add), or every figure has its verdict ([`Self::decided`]).
    pub fn may_stop(&self) -> bool {
        self.figures
            .iter()
            .any(|f| f.verdict == Verdict::Regression)
            || self.decided()
    }

    /// Whether every figure has its verdict and every round is clean
    /// evidence: no figure inconclusive or too wide to rule out the rule's
    /// change.
    pub fn decided(&self) -> bool {
        !self.figures.is_empty()
            && self.without_verdict().is_empty()
            && self.figures.iter().all(|f| {
                matches!(
                    f.verdict,
                    Verdict::Regression
                        | Verdict::Improvement
                        | Verdict::NoChange
                        | Verdict::Missing
                )
            })
    }

    /// One line on where the comparison stands (printed as rounds finish):
    /// the verdicts so far, and the regressions by id.
    pub fn progress(&self) -> String {
        let k = self.counts();
        let regressions: Vec<&str> = self
            .figures
            .iter()
            .filter(|f| f.verdict.fails())
            .map(|f| f.spec.id.as_str())
            .collect();
        let open = k.inconclusive + k.too_wide;
        let mut line = format!(
            "{} regression(s) or missing, {} improvement(s), {} no change, {open} without a verdict yet",
            k.regression + k.missing,
            k.improvement,
            k.no_change
        );
        if !regressions.is_empty() {
            line.push_str(&format!(": {}", regressions.join(", ")));
        }
        line
    }

    /// Every figure judged, no regression, nothing missing, and every round
    /// clean evidence.
    pub fn passed(&self) -> bool {
        self.gate() == Gate::Pass
    }

    /// Why the comparison has no verdict, one line each: no figures at
    /// all, each round that is no clean evidence, each inconclusive figure.
    /// Empty when every figure has a verdict.
    pub fn without_verdict(&self) -> Vec<String> {
        let mut why = Vec::new();
        if self.figures.is_empty() {
            why.push(
                "no figures: the rounds recorded none of the figures compared (did the \
                 trials run? see each round's results.json)"
                    .to_string(),
            );
        }
        for r in &self.rounds {
            if let Some(problem) = &r.problem {
                why.push(format!(
                    "round {} ({}): {problem}",
                    r.round.index,
                    r.round.build.as_str()
                ));
            }
        }
        for f in self
            .figures
            .iter()
            .filter(|f| f.verdict == Verdict::Inconclusive)
        {
            why.push(format!(
                "{}: only {} round pair(s) with both builds, fewer than {}",
                f.spec.id, f.pairs, self.rule.min_pairs
            ));
        }
        why
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
                 --rounds {} or more (two spare pairs). A figure without a verdict fails \
                 the comparison as no verdict (exit {}), not as a regression.",
                self.rule.min_pairs,
                2 * (self.rule.min_pairs + 2),
                Gate::NoVerdict.exit_code()
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
/// use kvcr_e2e::compare::{Collector, RoundPlan, Rule};
/// use kvcr_e2e::stats::Bootstrap;
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
    /// A trial that failed makes the round no clean evidence
    /// ([`RoundRecord::problem`]); its figures are still compared.
    pub fn add_round(&mut self, round: Round, run: &RunResults, source: impl Into<String>) {
        let failed = run.run.failed_trials();
        self.rounds.push(RoundRecord {
            round,
            run_id: run.run.run_id.clone(),
            source: source.into(),
            problem: None,
        });
        if !failed.is_empty() {
            self.flag_round(
                round,
                format!("{} trial(s) failed: {}", failed.len(), failed.join("; ")),
            );
        }
        for figure in run.figures() {
            self.add_samples(round, &figure.spec, &figure.values);
        }
    }

    /// Records a round that gave no results at all (no run directory of
    /// its own, or one that cannot be read), with why.
    pub fn lose_round(&mut self, round: Round, why: impl Into<String>) {
        self.rounds.push(RoundRecord {
            round,
            run_id: String::new(),
            source: String::new(),
            problem: None,
        });
        self.flag_round(round, why);
    }

    /// Adds `problem` to what is wrong with `round` (which must have been
    /// added).
    pub fn flag_round(&mut self, round: Round, problem: impl Into<String>) {
        let problem = problem.into();
        if let Some(r) = self
            .rounds
            .iter_mut()
            .find(|r| r.round.index == round.index)
        {
            r.problem = Some(match r.problem.take() {
                Some(earlier) => format!("{earlier}; {problem}"),
                None => problem,
            });
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
                problem: None,
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
        // Counts are judged without an interval, and a figure of one value
        // in every round cannot move by chance: neither takes a share of
        // the family-wise confidence.
        let judged = |family: Family| {
            self.figures
                .iter()
                .filter(|(spec, _)| spec.judged == Judged::Interval && spec.family == family)
                .filter(|(_, samples)| complete_pairs(samples) >= rule.min_pairs)
                .filter(|(_, samples)| constant(samples).is_none())
                .count()
        };
        let (path, other) = rule.family_confidences(judged(Family::Path), judged(Family::Other));
        let figures = self
            .figures
            .iter()
            .map(|(spec, samples)| {
                let confidence = match spec.family {
                    Family::Path => path,
                    Family::Other => other,
                };
                compare_figure(spec, samples, rule, confidence, bootstrap)
            })
            .collect();
        let mut rounds = self.rounds.clone();
        rounds.sort_by_key(|r| r.round.index);
        Comparison {
            schema_version: COMPARE_SCHEMA_VERSION,
            rule: *rule,
            bootstrap: *bootstrap,
            rounds,
            figures,
            figure_confidence: Some(other),
            path_confidence: (path != other).then_some(path),
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

/// The one value of `samples` when every round of both builds has it and
/// nothing else (a hit rate of a tier KVCR never serves on the stack: 0
/// everywhere). Its interval is [0, 0] whatever the confidence.
fn constant(samples: &[(Round, f64)]) -> Option<f64> {
    let (_, first) = samples.first()?;
    samples.iter().all(|(_, v)| v == first).then_some(*first)
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
    let diff = match rule.method {
        Method::Paired => paired_difference(&pairs, spec.statistic, confidence),
        // A figure with no ratio (a zero or negative statistic) keeps the
        // difference.
        Method::PairedLog => paired_ratio(&pairs, spec.statistic, confidence)
            .or_else(|| paired_difference(&pairs, spec.statistic, confidence)),
        Method::Pooled => difference(&pairs, spec.statistic, confidence, &boot),
    };
    let (base, head) = (side(Build::Base), side(Build::Head));
    let (verdict, reason) = match (&diff, constant(samples)) {
        (None, _) => (Verdict::Missing, missing_reason(&pairs)),
        (Some(_), _) if spec.judged == Judged::AnyIncrease => {
            count_verdict(spec, &base, &head, complete, rule)
        }
        (Some(d), _) if complete < rule.min_pairs => (
            Verdict::Inconclusive,
            format!(
                "{}, but only {complete} round pair(s) with both builds, fewer than the {} a \
                 verdict needs (--min-pairs)",
                measured(spec, d, confidence),
                rule.min_pairs
            ),
        ),
        (Some(_), Some(value)) => (
            Verdict::NoChange,
            format!(
                "{value} {} in every round of both builds: no change",
                spec.unit
            ),
        ),
        (Some(d), None) => {
            let v = match verdict(d, spec.better, rule) {
                Verdict::NoChange if !within_rule(d, rule) => Verdict::NoChangeTooWide,
                v => v,
            };
            (v, reason(spec, d, v, rule, confidence))
        }
    };
    let cannot_exclude = match spec.judged {
        Judged::Interval => diff.as_ref().and_then(largest_unexcluded_change),
        Judged::AnyIncrease => None,
    };
    let mde = match (spec.judged, &diff) {
        (Judged::Interval, Some(d)) if d.base != 0.0 => min_detectable_effect(
            (d.interval.hi - d.interval.lo) / 2.0,
            complete as usize,
            confidence,
            rule.min_relative_change,
            d.base,
        )
        .map(|abs| abs / d.base.abs()),
        _ => None,
    };
    FigureResult {
        spec: spec.clone(),
        base,
        head,
        pairs: complete,
        difference: diff,
        verdict,
        reason,
        cannot_exclude,
        mde,
    }
}

/// The verdict of a count (failed or wrong-token requests), one sample per
/// round: more per round in head than in base is a regression, whatever the
/// number of pairs (each one is a request that went wrong, not an
/// estimate); fewer is an improvement and the same is no change, each only
/// over enough pairs, as any verdict.
fn count_verdict(
    spec: &FigureSpec,
    base: &[Sample],
    head: &[Sample],
    complete: u32,
    rule: &Rule,
) -> (Verdict, String) {
    let total = |s: &[Sample]| s.iter().map(|s| s.value).sum::<f64>();
    let per_round = |s: &[Sample]| total(s) / s.len().max(1) as f64;
    let what = spec.label.as_str();
    let said = format!(
        "{what}: {} in {} head round(s), {} in {} base round(s)",
        total(head),
        head.len(),
        total(base),
        base.len()
    );
    let increase = per_round(head) > per_round(base);
    match () {
        _ if increase => (
            Verdict::Regression,
            format!("{said}: more in head, and any increase is a regression"),
        ),
        _ if complete < rule.min_pairs => (
            Verdict::Inconclusive,
            format!(
                "{said}, but only {complete} round pair(s) with both builds, fewer than the {} \
                 a verdict needs (--min-pairs)",
                rule.min_pairs
            ),
        ),
        _ if per_round(head) < per_round(base) => {
            (Verdict::Improvement, format!("{said}: fewer in head"))
        }
        _ => (Verdict::NoChange, format!("{said}: no more in head")),
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

/// Whether the interval of `d` excludes every change of the rule's size:
/// the largest change it cannot exclude is within the minimum.
fn within_rule(d: &Difference, rule: &Rule) -> bool {
    largest_unexcluded_change(d).is_some_and(|c| c <= rule.min_relative_change)
}

/// A relative change in percent with one decimal (`±6.2 %`).
fn plus_minus(change: f64) -> String {
    format!("±{:.1} %", change * 100.0)
}

fn reason(spec: &FigureSpec, d: &Difference, v: Verdict, rule: &Rule, confidence: f64) -> String {
    let head = measured(spec, d, confidence);
    let min = format!("{:.0} %", rule.min_relative_change * 100.0);
    let why = match v {
        Verdict::Regression | Verdict::Improvement => {
            format!("excludes 0 and the change is at least {min}")
        }
        _ => {
            let seen = match d.interval.excludes_zero() {
                true => format!("excludes 0 but the change is under {min}"),
                false => "contains 0".to_string(),
            };
            match largest_unexcluded_change(d) {
                Some(c) if c <= rule.min_relative_change => {
                    format!("{seen}: no change beyond {}", plus_minus(c))
                }
                Some(c) => format!(
                    "{seen}, but it cannot exclude a change of {}: too wide to rule out {min}",
                    plus_minus(c)
                ),
                None => format!(
                    "{seen}, but base is 0, so it bounds no relative change: too wide to rule \
                     out {min}"
                ),
            }
        }
    };
    format!("{head} {why}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Interval, Statistic};

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

    /// Twelve figures: eleven the same in both builds, one (`f0`, of
    /// `moved`'s family) that moved by a few units in each pair, as a build
    /// that is the same does by chance once in some twenty figures.
    fn twelve_figures(moved: Family) -> Collector {
        let spec = |f: usize| FigureSpec {
            id: format!("f{f}"),
            label: format!("figure {f}"),
            unit: "ms".into(),
            statistic: Statistic::P50,
            better: crate::compare::figures::Better::Lower,
            judged: Judged::Interval,
            family: match f {
                0 => moved,
                _ => Family::Other,
            },
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
            // The same in both builds of a pair, but not from pair to
            // pair (a figure of one value everywhere is not judged).
            for f in 1..12 {
                c.add_samples(*round, &spec(f), &[base + f64::from(round.pair())]);
            }
        }
        c
    }

    /// At 95 % per figure the moved one of twelve is a regression;
    /// family-wise (each interval at 99.58 %) it is not.
    #[test]
    fn familywise_does_not_judge_a_chance_shift_in_one_of_many_figures() {
        let c = twelve_figures(Family::Other);
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
        // Family-wise its interval reaches 0, and past the 10 % (it is
        // 20 ms ± a few): no verdict of a change, and not a tight one.
        assert_eq!(verdict, Verdict::NoChangeTooWide);
        assert!((each.unwrap() - (1.0 - 0.05 / 12.0)).abs() < 1e-12);
    }

    /// The moved figure isolating a KVCR path, the only one: its family's
    /// share (half the error rate) narrows its interval to 97.5 %, where
    /// the same shift is a regression that one family of twelve (99.58 %
    /// each) does not call; the eleven others split the rest (99.77 %).
    #[test]
    fn a_path_figure_is_judged_at_its_familys_share_of_the_error_rate() {
        let judged = |rule: Rule| {
            let c = twelve_figures(Family::Path).compare(&rule, &Bootstrap::default());
            let text = c.describe_rule();
            (
                c.figures[0].verdict,
                c.path_confidence,
                c.figure_confidence,
                text,
            )
        };
        let (verdict, path, other, text) = judged(Rule::default());
        assert_eq!(verdict, Verdict::Regression);
        assert!((path.unwrap() - 0.975).abs() < 1e-12, "{path:?}");
        assert!(
            (other.unwrap() - (1.0 - 0.025 / 11.0)).abs() < 1e-12,
            "{other:?}"
        );
        assert!(
            text.ends_with(
                "1 figure isolating a KVCR path judged, each interval at 97.50 % (50 % of the \
                 error rate), 11 other figures, each at 99.77 %"
            ),
            "{text}"
        );
        let one_family = Rule {
            path_share: 0.0,
            ..Rule::default()
        };
        let (verdict, path, other, _) = judged(one_family);
        assert_eq!(verdict, Verdict::NoChangeTooWide);
        assert_eq!(path, None);
        assert!((other.unwrap() - (1.0 - 0.05 / 12.0)).abs() < 1e-12);
    }

    /// Weighted Bonferroni: the path figures' and the others' error rates
    /// add up to the comparison's; an empty family leaves all of it to the
    /// other, as does a share of 0 (files written before the families).
    #[test]
    fn the_two_families_split_the_error_rate_by_the_path_share() {
        let rule = Rule::default();
        let (path, other) = rule.family_confidences(3, 36);
        let spent = 3.0 * (1.0 - path) + 36.0 * (1.0 - other);
        assert!((spent - 0.05).abs() < 1e-12, "{spent}");
        assert!((path - (1.0 - 0.025 / 3.0)).abs() < 1e-12);
        for (p, o) in [(0, 39), (39, 0)] {
            let each = rule.figure_confidence(39);
            assert_eq!(rule.family_confidences(p, o), (each, each));
        }
        let looks = Rule { looks: 2, ..rule };
        assert!((looks.family_confidences(3, 36).0 - (1.0 - 0.0125 / 3.0)).abs() < 1e-12);
        let old: Rule = serde_json::from_str(
            r#"{"confidence":0.95,"min_relative_change":0.05,"familywise":true}"#,
        )
        .unwrap();
        assert_eq!(old.path_share, 0.0);
        assert_eq!(old.family_confidences(3, 36).0, old.figure_confidence(39));
        let bad = Rule {
            path_share: 1.0,
            ..rule
        };
        assert!(bad.checked().is_err());
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
        // Real but under 5 %.
        let small = diff(100.0, 104.0, 2.0, 8.0);
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
    fn looks_split_the_error_rate_and_fall_on_abba_blocks() {
        let rule = Rule::default();
        assert_eq!(rule.early_stop_looks(8), [6, 8]);
        assert_eq!(rule.early_stop_looks(9), [6, 8, 9]);
        assert_eq!(rule.early_stop_looks(6), [6]);
        assert!(rule.early_stop_looks(5).is_empty());
        let two = Rule { looks: 2, ..rule };
        // 10 figures, 2 looks: each interval at 1 − 0.05/20.
        assert!((two.figure_confidence(10) - 0.9975).abs() < 1e-12);
        assert!((rule.figure_confidence(10) - 0.995).abs() < 1e-12);
        let per_figure = Rule {
            familywise: false,
            ..two
        };
        assert!((per_figure.figure_confidence(10) - 0.975).abs() < 1e-12);
        assert!(two.describe().ends_with("split over 2 looks (early stop)"));
        assert!(Rule { looks: 0, ..rule }.checked().is_err());
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
            judged: Judged::Interval,
            family: Family::Other,
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
        assert!(!t1.verdict.fails());
        assert_eq!(cmp.gate(), Gate::NoVerdict, "no verdict is no pass");
        assert!(!cmp.passed());
        assert_eq!(
            cmp.without_verdict(),
            ["t1: only 2 round pair(s) with both builds, fewer than 6"]
        );
        assert_eq!(cmp.counts().inconclusive, 1);
        assert!(cmp.caution().unwrap().contains("--rounds 16"));
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
    fn the_largest_unexcluded_change_is_the_far_end_of_the_interval() {
        let c = |d: &Difference| largest_unexcluded_change(d).map(|c| (c * 1000.0).round());
        assert_eq!(c(&diff(100.0, 101.0, -3.0, 6.0)), Some(60.0));
        assert_eq!(c(&diff(100.0, 90.0, -30.0, 2.0)), Some(300.0));
        assert_eq!(c(&diff(-50.0, -50.0, -5.0, 5.0)), Some(100.0));
        assert_eq!(c(&diff(0.0, 0.0, 0.0, 0.0)), Some(0.0));
        assert_eq!(c(&diff(0.0, 1.0, -1.0, 2.0)), None);
    }

    /// Six pairs of one figure, head − base of each pair given: the same
    /// build with a little or a lot of round-to-round spread.
    fn no_change_of(spread: [f64; 6]) -> FigureResult {
        let mut c = Collector::default();
        for round in crate::compare::RoundPlan::abba(12).unwrap().rounds() {
            let value = match round.build {
                Build::Base => 100.0,
                Build::Head => 100.0 + spread[round.pair() as usize],
            };
            c.add_samples(*round, &spec("f"), &[value]);
        }
        c.compare(&Rule::default(), &Bootstrap::default()).figures[0].clone()
    }

    /// Six pairs of one figure where head is `shift` above base in every
    /// pair, with a little spread.
    fn shifted(shift: f64) -> Comparison {
        let mut c = Collector::default();
        let spread = [1.0, -1.0, 0.5, -0.5, 1.0, -1.0];
        for round in crate::compare::RoundPlan::abba(12).unwrap().rounds() {
            let value = match round.build {
                Build::Base => 100.0,
                Build::Head => 100.0 + shift + spread[round.pair() as usize],
            };
            c.add_samples(*round, &spec("f"), &[value]);
        }
        c.compare(&Rule::default(), &Bootstrap::default())
    }

    #[test]
    fn a_regression_may_stop_early_and_the_progress_line_names_it() {
        let slow = shifted(20.0);
        assert!(slow.may_stop() && slow.decided());
        assert_eq!(
            slow.progress(),
            "1 regression(s) or missing, 0 improvement(s), 0 no change, 0 without a verdict yet: f"
        );
        // No change within the rule: decided, may stop, nothing named.
        let same = shifted(0.0);
        assert_eq!(same.figures[0].verdict, Verdict::NoChange);
        assert!(same.may_stop());
        assert!(same
            .progress()
            .ends_with("1 no change, 0 without a verdict yet"));
        // A too-wide figure keeps the comparison going.
        let wide = no_change_of([20.0, -25.0, 30.0, -20.0, 15.0, -18.0]);
        let c = Comparison {
            figures: vec![wide],
            ..same.clone()
        };
        assert!(!c.decided() && !c.may_stop());
        // So does a round that is no clean evidence.
        let mut flagged = same.clone();
        flagged.rounds[0].problem = Some("its run exited 101".into());
        assert!(!flagged.decided());
    }

    #[test]
    fn the_mde_grows_with_the_spread_and_stays_above_the_size_rule() {
        let tight = shifted(0.0).figures[0].mde.unwrap();
        let wide = no_change_of([20.0, -25.0, 30.0, -20.0, 15.0, -18.0])
            .mde
            .unwrap();
        assert!(
            tight > Rule::default().min_relative_change && tight < 0.08,
            "{tight}"
        );
        assert!(wide > 0.25, "{wide}");
    }

    #[test]
    fn a_tight_no_change_says_how_far_it_reaches_and_a_wide_one_says_it_is_too_wide() {
        let tight = no_change_of([1.0, -1.0, 1.0, -1.0, 1.0, -1.0]);
        assert_eq!(tight.verdict, Verdict::NoChange, "{}", tight.reason);
        let reach = tight.cannot_exclude.unwrap();
        assert!(reach > 0.0 && reach <= 0.05, "{reach}");
        assert!(
            tight.reason.ends_with(&format!(
                "contains 0: no change beyond ±{:.1} %",
                reach * 100.0
            )),
            "{}",
            tight.reason
        );
        let wide = no_change_of([20.0, -25.0, 30.0, -20.0, 15.0, -18.0]);
        assert_eq!(wide.verdict, Verdict::NoChangeTooWide, "{}", wide.reason);
        assert!(wide.cannot_exclude.unwrap() > 0.05);
        // The MDE reads the same spread: small for the tight one.
        assert!(tight.mde.unwrap() < wide.mde.unwrap(), "{tight:?} {wide:?}");
        assert!(
            wide.reason.contains("but it cannot exclude a change of ±")
                && wide.reason.ends_with("too wide to rule out 5 %"),
            "{}",
            wide.reason
        );
        assert_ne!(wide.verdict.as_str(), tight.verdict.as_str());
        assert!(!wide.verdict.fails());
    }

    fn count_spec() -> FigureSpec {
        FigureSpec {
            id: "TC-05::cold::wrong_tokens".into(),
            label: "cold wrong tokens".into(),
            unit: "requests".into(),
            statistic: Statistic::Mean,
            better: Better::Lower,
            judged: Judged::AnyIncrease,
            family: Family::Other,
        }
    }

    /// `pairs` pairs of a count figure; head has `extra` in its first round.
    fn counts(pairs: u32, base_extra: f64, head_extra: f64) -> Comparison {
        let mut c = Collector::default();
        for round in crate::compare::RoundPlan::abba(2 * pairs).unwrap().rounds() {
            let value = match (round.pair(), round.build) {
                (0, Build::Head) => head_extra,
                (0, Build::Base) => base_extra,
                _ => 0.0,
            };
            c.add_samples(*round, &count_spec(), &[value]);
        }
        c.compare(&Rule::default(), &Bootstrap::default())
    }

    #[test]
    fn any_increase_of_a_count_is_a_regression_whatever_the_interval() {
        let one = counts(8, 0.0, 1.0);
        let f = &one.figures[0];
        // One wrong-token request in 8 head rounds: the interval of the mean
        // difference reaches 0, yet it is a regression.
        assert!(!f.difference.unwrap().interval.excludes_zero(), "{f:?}");
        assert_eq!(f.verdict, Verdict::Regression, "{}", f.reason);
        assert!(
            f.reason
                .contains("1 in 8 head round(s), 0 in 8 base round(s)"),
            "{}",
            f.reason
        );
        assert_eq!(f.cannot_exclude, None);
        assert_eq!(one.gate(), Gate::Regression);
        // Even with fewer pairs than a verdict needs.
        assert_eq!(counts(2, 0.0, 1.0).figures[0].verdict, Verdict::Regression);
        // None on either side: no change, given enough pairs.
        assert_eq!(counts(8, 0.0, 0.0).figures[0].verdict, Verdict::NoChange);
        assert_eq!(counts(8, 0.0, 0.0).gate(), Gate::Pass);
        assert_eq!(
            counts(2, 0.0, 0.0).figures[0].verdict,
            Verdict::Inconclusive
        );
        assert_eq!(counts(8, 2.0, 0.0).figures[0].verdict, Verdict::Improvement);
        // Counts take no share of the family-wise confidence.
        assert_eq!(one.figure_confidence, Some(0.95));
    }

    #[test]
    fn a_failed_or_lost_round_gives_no_verdict_and_a_regression_outranks_it() {
        let mut c = Collector::default();
        let plan = crate::compare::RoundPlan::abba(16).unwrap();
        for round in plan.rounds() {
            c.add_samples(*round, &spec("f"), &[100.0]);
        }
        assert_eq!(
            c.compare(&Rule::default(), &Bootstrap::default()).gate(),
            Gate::Pass
        );
        c.flag_round(plan.rounds()[5], "its run exited 101");
        let cmp = c.compare(&Rule::default(), &Bootstrap::default());
        assert_eq!(cmp.gate(), Gate::NoVerdict);
        assert_eq!(
            cmp.without_verdict(),
            ["round 5 (head): its run exited 101"]
        );
        assert_eq!(cmp.rounds[5].problem.as_deref(), Some("its run exited 101"));
        let mut lost = Collector::default();
        for round in plan.rounds() {
            if round.index == 6 {
                lost.lose_round(*round, "it left no run directory of its own");
                continue;
            }
            lost.add_samples(*round, &spec("f"), &[100.0]);
        }
        let cmp = lost.compare(&Rule::default(), &Bootstrap::default());
        // The spare pairs keep the figure judged; the lost round still
        // leaves the comparison without a verdict.
        assert_eq!(cmp.figures[0].pairs, 7);
        assert_eq!(cmp.figures[0].verdict, Verdict::NoChange);
        assert_eq!(cmp.gate(), Gate::NoVerdict);
        c.add_samples(plan.rounds()[1], &spec("g"), &[1.0]);
        let both = c.compare(&Rule::default(), &Bootstrap::default());
        assert_eq!(both.figures[1].verdict, Verdict::Missing);
        assert_eq!(both.gate(), Gate::Regression);
    }

    #[test]
    fn no_figures_is_no_verdict() {
        let mut c = Collector::default();
        for round in crate::compare::RoundPlan::abba(16).unwrap().rounds() {
            c.add_samples(*round, &spec("f"), &[]);
        }
        let cmp = c.compare(&Rule::default(), &Bootstrap::default());
        assert!(cmp.figures.iter().all(|f| f.verdict == Verdict::Missing));
        let empty = Collector::default().compare(&Rule::default(), &Bootstrap::default());
        assert!(empty.figures.is_empty());
        assert_eq!(empty.gate(), Gate::NoVerdict);
        assert!(empty.without_verdict()[0].starts_with("no figures"));
    }

    /// A hit rate of a tier the stack never uses: 0 in every round of both
    /// builds. No change, said as such, and no share of the family-wise
    /// confidence; one round's 0.5 % in head is a figure like any other.
    #[test]
    fn a_figure_of_one_value_everywhere_is_no_change_and_costs_no_confidence() {
        let zero = FigureSpec {
            unit: "%".into(),
            statistic: Statistic::Mean,
            better: Better::Higher,
            ..spec("WL-01::hit_rate::disk")
        };
        let plan = crate::compare::RoundPlan::abba(16).unwrap();
        let mut c = Collector::default();
        for round in plan.rounds() {
            c.add_samples(*round, &zero, &[0.0]);
            let k = f64::from(round.index);
            c.add_samples(*round, &spec("ttft"), &[100.0 + k, 101.0 + k]);
        }
        let cmp = c.compare(&Rule::default(), &Bootstrap::default());
        let disk = &cmp.figures[0];
        assert_eq!(disk.verdict, Verdict::NoChange, "{}", disk.reason);
        assert_eq!(disk.reason, "0 % in every round of both builds: no change");
        assert_eq!(disk.cannot_exclude, Some(0.0));
        assert_eq!(cmp.figure_confidence, Some(0.95), "one figure judged");
        assert_eq!(cmp.gate(), Gate::Pass);
        // Below the pairs a verdict needs it is still inconclusive.
        let mut few = Collector::default();
        for round in crate::compare::RoundPlan::abba(4).unwrap().rounds() {
            few.add_samples(*round, &zero, &[0.0]);
        }
        let few = few.compare(&Rule::default(), &Bootstrap::default());
        assert_eq!(few.figures[0].verdict, Verdict::Inconclusive);
        // Not constant: judged by its interval, and it takes its share.
        c.add_samples(plan.rounds()[1], &zero, &[0.5]);
        let cmp = c.compare(&Rule::default(), &Bootstrap::default());
        assert_ne!(cmp.figures[0].reason, disk.reason);
        assert!(!cmp.figures[0].verdict.fails(), "{}", cmp.figures[0].reason);
        assert_eq!(cmp.figure_confidence, Some(0.975));
    }

    #[test]
    fn figures_resample_independently_but_reproducibly() {
        assert_ne!(figure_seed(1, "a"), figure_seed(1, "b"));
        assert_eq!(figure_seed(1, "a"), figure_seed(1, "a"));
    }
}
