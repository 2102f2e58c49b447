//! The one-screen terminal summary of a comparison.

use std::fmt::Write;

use super::comparison::{Comparison, FigureResult, Verdict};

fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn signed(x: f64) -> String {
    if x >= 0.0 {
        format!("+{}", num(x))
    } else {
        num(x)
    }
}

/// A minimum detectable effect as the summary and the page print it
/// (`6.2%`, `–` where there is none).
pub(crate) fn mde_text(mde: Option<f64>) -> String {
    match mde {
        Some(m) if m.is_finite() => format!("{:.1}%", m * 100.0),
        _ => "–".into(),
    }
}

fn row(f: &FigureResult, min_change: f64) -> String {
    let label = format!("{} ({})", f.spec.label, f.spec.unit);
    let n = format!("{}/{}", f.base.len(), f.head.len());
    let verdict = match (f.verdict, f.cannot_exclude) {
        (Verdict::Regression, _) => "REGRESSION".to_string(),
        (Verdict::Missing, _) => "MISSING".to_string(),
        (Verdict::Inconclusive, _) => "INCONCLUSIVE (too few pairs)".to_string(),
        (Verdict::NoChange, Some(c)) => format!("no change beyond ±{:.1} %", c * 100.0),
        (Verdict::NoChangeTooWide, _) => format!(
            "no change detected, interval too wide for {:.0} %",
            min_change * 100.0
        ),
        (v, _) => v.as_str().to_string(),
    };
    let mde = mde_text(f.mde);
    match &f.difference {
        Some(d) => format!(
            "{label:<38} {n:>7} {:>9} {:>9} {:>8} {:>22} {mde:>6}  {verdict}",
            num(d.base),
            num(d.head),
            d.relative
                .map(|r| format!("{:+.1}%", r * 100.0))
                .unwrap_or_else(|| "–".into()),
            format!("[{}, {}]", signed(d.interval.lo), signed(d.interval.hi)),
        ),
        None => format!(
            "{label:<38} {n:>7} {:>9} {:>9} {:>8} {:>22} {mde:>6}  {verdict}",
            "–", "–", "–", "–"
        ),
    }
}

/// Renders the summary: the rule, one line per figure, the regressions in
/// words, what has no verdict, a caution when the rounds are too few, and
/// the counts with the conclusion and its exit code.
pub fn render_summary(c: &Comparison) -> String {
    let mut o = String::new();
    let pairs = c.rounds.len() / 2;
    let _ = writeln!(
        o,
        "kvcr-e2e compare: {} rounds {} ({pairs} pairs), {} resamples",
        c.rounds.len(),
        c.letters(),
        c.bootstrap.resamples
    );
    let _ = writeln!(o, "rule: {}", c.describe_rule());
    let _ = writeln!(
        o,
        "MDE: the smallest change (% of base) this run's spread reports as a verdict 4 times in 5; \
         a \"no change\" says nothing of changes below it"
    );
    let _ = writeln!(
        o,
        "{:<38} {:>7} {:>9} {:>9} {:>8} {:>22} {:>6}  verdict",
        "figure", "n b/h", "base", "head", "change", "interval of head−base", "MDE"
    );
    for f in &c.figures {
        let _ = writeln!(o, "{}", row(f, c.rule.min_relative_change));
    }
    for f in c
        .figures
        .iter()
        .filter(|f| f.verdict == Verdict::Regression)
    {
        let _ = writeln!(o, "regression {}: {}", f.spec.id, f.reason);
    }
    for f in c
        .figures
        .iter()
        .filter(|f| f.verdict == Verdict::Inconclusive)
    {
        let _ = writeln!(o, "inconclusive {}: {}", f.spec.id, f.reason);
    }
    for r in &c.rounds {
        if let Some(problem) = &r.problem {
            let _ = writeln!(
                o,
                "round {} ({}) is no clean evidence: {problem}",
                r.round.index,
                r.round.build.as_str()
            );
        }
    }
    if c.figures.is_empty() {
        let _ = writeln!(
            o,
            "no figures: the rounds recorded none of the figures compared"
        );
    }
    if let Some(caution) = c.caution() {
        let _ = writeln!(o, "caution: {caution}");
    }
    let k = c.counts();
    let gate = c.gate();
    let without = c.without_verdict().len();
    let conclusion = match without {
        0 => format!("{} (exit {})", gate.as_str(), gate.exit_code()),
        n => format!(
            "{} (exit {}); {n} thing(s) without a verdict, listed above",
            gate.as_str(),
            gate.exit_code()
        ),
    };
    let _ = writeln!(
        o,
        "{} regression(s), {} improvement(s), {} no change detected, {} interval too wide, \
         {} missing, {} inconclusive: {conclusion}",
        k.regression, k.improvement, k.no_change, k.too_wide, k.missing, k.inconclusive
    );
    o
}

#[cfg(test)]
mod tests {
    use super::mde_text;

    #[test]
    fn an_mde_prints_as_a_percentage_and_none_as_a_dash() {
        assert_eq!(mde_text(Some(0.0621)), "6.2%");
        assert_eq!(mde_text(Some(1.5)), "150.0%");
        assert_eq!(mde_text(None), "–");
        assert_eq!(mde_text(Some(f64::INFINITY)), "–");
    }
}
