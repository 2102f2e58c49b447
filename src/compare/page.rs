//! `compare.html`: one self-contained page (inline CSS and SVG, no network):
//! the rule and rounds, a table of every figure, and per figure its base and
//! head samples side by side with the interval of head − base drawn against
//! zero and the rule's threshold.

use std::fmt::Write;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::comparison::{Comparison, FigureResult, Verdict};
use super::errors::CompareError;
use super::figures::Better;

const CSS: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f4f6f8;color:#1d2530}
header{background:#1d2530;color:#fff;padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px}
header .meta{color:#b8c2cc;font-size:13px}
main{padding:8px 32px 40px;max-width:1200px}
section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.08);padding:16px 20px;margin:18px 0}
h2{font-size:17px;margin:0 0 12px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e5e8eb;vertical-align:top}
th{color:#5b6b7f;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.pill{display:inline-block;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:600}
.regression,.missing{background:#fbdada;color:#a11d1d}.improvement{background:#d8f3ee;color:#1b6f65}.nochange{background:#eceff2;color:#5b6b7f}.inconclusive{background:#fdf0d2;color:#7a5200}.wide{background:#f3ecdf;color:#6b5a3a}
.fig svg{max-width:100%;height:auto;border:1px solid #eef0f2;border-radius:6px}
.reason{font-size:13px;color:#3a4552}
"#;

const W: u32 = 760;
const H: u32 = 230;
const FONT: &str = "sans-serif";
const BASE: RGBColor = RGBColor(0x5b, 0x6b, 0x7f);
const HEAD: RGBColor = RGBColor(0xf7, 0x7f, 0x00);
const BAD: RGBColor = RGBColor(0xd6, 0x28, 0x28);
const GOOD: RGBColor = RGBColor(0x2a, 0x9d, 0x8f);
const NEUTRAL: RGBColor = RGBColor(0x26, 0x6d, 0xd3);

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn class(v: Verdict) -> &'static str {
    match v {
        Verdict::Regression => "regression",
        Verdict::Improvement => "improvement",
        Verdict::NoChange => "nochange",
        Verdict::Missing => "missing",
        Verdict::Inconclusive => "inconclusive",
        Verdict::NoChangeTooWide => "wide",
    }
}

/// Renders the comparison page.
pub fn render_page(c: &Comparison) -> Result<String, CompareError> {
    let mut o = String::new();
    let k = c.counts();
    let (r, i, n, m, u, w) = (
        k.regression,
        k.improvement,
        k.no_change,
        k.missing,
        k.inconclusive,
        k.too_wide,
    );
    let gate = c.gate();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>kvcr-e2e compare</title><style>{CSS}</style></head><body>\n\
         <header><h1>kvcr-e2e compare · head against base</h1><div class=\"meta\">{rounds} rounds \
         {letters} · {resamples} bootstrap resamples (seed {seed}) · verdict rule: {rule}</div></header>\n<main>\n\
         <section><h2>Figures</h2><p><strong>{gate} (exit {exit})</strong> \
         <span class=\"pill regression\">{r} regression(s)</span> \
         <span class=\"pill improvement\">{i} improvement(s)</span> <span class=\"pill nochange\">{n} no change \
         detected</span> <span class=\"pill wide\">{w} interval too wide</span> \
         <span class=\"pill missing\">{m} missing</span> <span class=\"pill inconclusive\">{u} \
         inconclusive</span></p>\n",
        gate = gate.as_str(),
        exit = gate.exit_code(),
        rounds = c.rounds.len(),
        letters = c.letters(),
        resamples = c.bootstrap.resamples,
        seed = c.bootstrap.seed,
        rule = esc(&c.describe_rule()),
    );
    let without = c.without_verdict();
    if !without.is_empty() {
        o.push_str("<p><strong>No verdict:</strong></p><ul>");
        for why in &without {
            let _ = write!(o, "<li>{}</li>", esc(why));
        }
        o.push_str("</ul>\n");
    }
    if let Some(caution) = c.caution() {
        let _ = writeln!(o, "<p><strong>Caution:</strong> {}</p>", esc(&caution));
    }
    o.push_str(&figures_table(c));
    o.push_str("</section>\n");
    for f in &c.figures {
        let _ = writeln!(
            o,
            "<section class=\"fig\" id=\"{id}\"><h2>{label} <span class=\"pill {cls}\">{verdict}</span></h2>\
             <p class=\"reason\"><code>{id}</code>: {reason}</p>",
            id = esc(&f.spec.id),
            label = esc(&f.spec.label),
            cls = class(f.verdict),
            verdict = f.verdict.as_str(),
            reason = esc(&f.reason),
        );
        if f.difference.is_some() {
            o.push_str(&figure_chart(f, c.rule.min_relative_change)?);
        }
        o.push_str("</section>\n");
    }
    o.push_str(&rounds_table(c));
    o.push_str("</main></body></html>\n");
    Ok(o)
}

fn figures_table(c: &Comparison) -> String {
    let mut o = String::from(
        "<table><tr><th>figure</th><th>n base/head</th><th class=\"num\">base</th>\
         <th class=\"num\">head</th><th class=\"num\">change</th><th class=\"num\">interval of head − base</th>\
         <th class=\"num\" title=\"minimum detectable effect: the smallest change, as % of base, this run's \
         spread reports as a verdict 4 times in 5\">MDE</th><th>verdict</th></tr>\n",
    );
    for f in &c.figures {
        let cells = match &f.difference {
            Some(d) => [
                format!("{:.2}", d.base),
                format!("{:.2}", d.head),
                d.relative
                    .map(|r| format!("{:+.1} %", r * 100.0))
                    .unwrap_or_else(|| "–".into()),
                format!("[{:+.2}, {:+.2}]", d.interval.lo, d.interval.hi),
            ],
            None => ["–".into(), "–".into(), "–".into(), "–".into()],
        };
        let _ = writeln!(
            o,
            "<tr><td><a href=\"#{id}\">{label}</a> ({unit}, {stat})</td><td>{nb}/{nh}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{mde}</td><td><span class=\"pill {cls}\">{verdict}</span></td></tr>",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            id = esc(&f.spec.id),
            label = esc(&f.spec.label),
            unit = esc(&f.spec.unit),
            stat = f.spec.statistic.as_str(),
            nb = f.base.len(),
            nh = f.head.len(),
            mde = super::summary::mde_text(f.mde),
            cls = class(f.verdict),
            verdict = f.verdict.as_str(),
        );
    }
    o.push_str("</table>\n");
    o
}

fn rounds_table(c: &Comparison) -> String {
    let mut o = String::from(
        "<section><h2>Rounds</h2><table><tr><th>round</th><th>pair</th><th>build</th>\
         <th>run</th><th>results</th><th>problem</th></tr>\n",
    );
    for r in &c.rounds {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.round.index,
            r.round.pair(),
            r.round.build.as_str(),
            esc(&r.run_id),
            esc(&r.source),
            esc(r.problem.as_deref().unwrap_or("")),
        );
    }
    o.push_str("</table></section>\n");
    o
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// The most samples of one build a chart draws.
const MAX_DRAWN: usize = 1000;

/// A deterministic spread of the i-th of n points across a strip.
fn jitter(i: usize, n: usize) -> f64 {
    if n <= 1 {
        0.0
    } else {
        // Golden-ratio sequence: even coverage, no two points on top.
        ((i as f64 * 0.618_034) % 1.0 - 0.5) * 0.5
    }
}

fn figure_chart(f: &FigureResult, min_rel: f64) -> Result<String, CompareError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let drawn: DrawResult = (|| {
            root.fill(&WHITE)?;
            let (left, right) = root.split_horizontally(W * 11 / 20);
            samples_panel(&left, f)?;
            interval_panel(&right, f, min_rel)?;
            root.present()?;
            Ok(())
        })();
        drawn.map_err(|e| CompareError::Chart {
            figure: f.spec.id.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(svg)
}

/// Base and head samples as two strips, each build's statistic as a bar.
fn samples_panel(area: &Area<'_>, f: &FigureResult) -> DrawResult {
    let all = f.base.iter().chain(&f.head).map(|s| s.value);
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.02).max(1e-6);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "samples ({}), {} marked",
                f.spec.unit,
                f.spec.statistic.as_str()
            ),
            (FONT, 14),
        )
        .margin(10)
        .x_label_area_size(22)
        .y_label_area_size(52)
        .build_cartesian_2d(0.0..2.0, (lo - pad)..(hi + pad))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .label_style((FONT, 12))
        .draw()?;
    let d = f.difference.as_ref();
    for (x, samples, color, name, stat) in [
        (0.5, &f.base, BASE, "base", d.map(|d| d.base)),
        (1.5, &f.head, HEAD, "head", d.map(|d| d.head)),
    ] {
        let n = samples.len();
        // A trace replay has thousands of samples a build: every k-th
        // is drawn (the statistic and the range are of them all).
        let every = n.div_ceil(MAX_DRAWN).max(1);
        chart.draw_series(
            samples
                .iter()
                .step_by(every)
                .enumerate()
                .map(|(i, s)| Circle::new((x + jitter(i, n), s.value), 3, color.mix(0.7).filled())),
        )?;
        if let Some(v) = stat {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x - 0.35, v), (x + 0.35, v)],
                BLACK.stroke_width(2),
            )))?;
        }
        let drawn = match every {
            1 => String::new(),
            k => format!(", every {k}th drawn"),
        };
        chart.draw_series(std::iter::once(Text::new(
            format!("{name} (n={n}{drawn})"),
            (x - 0.2, lo - pad * 0.6),
            (FONT, 12).into_font().color(&color),
        )))?;
    }
    Ok(())
}

/// The interval of head − base against 0 and the ±threshold band.
fn interval_panel(area: &Area<'_>, f: &FigureResult, min_rel: f64) -> DrawResult {
    let Some(d) = &f.difference else {
        return Ok(());
    };
    let threshold = min_rel * d.base.abs();
    let reach = [d.interval.lo, d.interval.hi, d.delta, threshold, -threshold]
        .iter()
        .fold(0.0_f64, |m, v| m.max(v.abs()))
        * 1.2;
    let reach = if reach > 0.0 { reach } else { 1.0 };
    let color = match f.verdict {
        Verdict::Regression => BAD,
        Verdict::Improvement => GOOD,
        _ => NEUTRAL,
    };
    let worse = match f.spec.better {
        Better::Lower => "head slower →",
        Better::Higher => "← head slower",
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("head − base ({}), interval; {worse}", f.spec.unit),
            (FONT, 14),
        )
        .margin(10)
        .x_label_area_size(28)
        .y_label_area_size(6)
        .build_cartesian_2d(-reach..reach, 0.0..1.0)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .label_style((FONT, 12))
        .draw()?;
    chart.draw_series(std::iter::once(Rectangle::new(
        [(-threshold, 0.15), (threshold, 0.85)],
        BLACK.mix(0.06).filled(),
    )))?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 0.1), (0.0, 0.9)],
        BLACK.stroke_width(1),
    )))?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(d.interval.lo, 0.5), (d.interval.hi, 0.5)],
        color.stroke_width(4),
    )))?;
    for x in [d.interval.lo, d.interval.hi] {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, 0.4), (x, 0.6)],
            color.stroke_width(2),
        )))?;
    }
    chart.draw_series(std::iter::once(Circle::new(
        (d.delta, 0.5),
        5,
        color.filled(),
    )))?;
    chart.draw_series(std::iter::once(Text::new(
        format!("shaded: ±{:.0} % of base", min_rel * 100.0),
        (-reach * 0.95, 0.95),
        (FONT, 11).into_font().color(&BLACK.mix(0.6)),
    )))?;
    Ok(())
}
