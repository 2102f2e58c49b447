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

fn row(f: &FigureResult) -> String {
    let label = format!("{} ({})", f.spec.label, f.spec.unit);
    let n = format!("{}/{}", f.base.len(), f.head.len());
    let verdict = match f.verdict {
        Verdict::Regression => "REGRESSION",
        Verdict::Missing => "MISSING",
        Verdict::Inconclusive => "inconclusive (too few pairs)",
        v => v.as_str(),
    };
    match &f.difference {
        Some(d) => format!(
            "{label:<38} {n:>7} {:>9} {:>9} {:>8} {:>22}  {verdict}",
            num(d.base),
            num(d.head),
            d.relative
                .map(|r| format!("{:+.1}%", r * 100.0))
                .unwrap_or_else(|| "–".into()),
            format!("[{}, {}]", signed(d.interval.lo), signed(d.interval.hi)),
        ),
        None => format!(
            "{label:<38} {n:>7} {:>9} {:>9} {:>8} {:>22}  {verdict}",
            "–", "–", "–", "–"
        ),
    }
}

/// Renders the summary: the rule, one line per figure, the regressions in
/// words, a caution when the rounds are too few, and the counts.
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
        "{:<38} {:>7} {:>9} {:>9} {:>8} {:>22}  verdict",
        "figure", "n b/h", "base", "head", "change", "interval of head−base"
    );
    for f in &c.figures {
        let _ = writeln!(o, "{}", row(f));
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
    if let Some(caution) = c.caution() {
        let _ = writeln!(o, "caution: {caution}");
    }
    let k = c.counts();
    let verdict = match (c.passed(), k.inconclusive) {
        (false, _) => "FAIL".to_string(),
        (true, 0) => "PASS".to_string(),
        (true, n) => format!("PASS, but {n} figure(s) had no verdict (inconclusive)"),
    };
    let _ = writeln!(
        o,
        "{} regression(s), {} improvement(s), {} no change detected, {} missing, \
         {} inconclusive: {verdict}",
        k.regression, k.improvement, k.no_change, k.missing, k.inconclusive
    );
    o
}
