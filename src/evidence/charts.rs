//! The report's charts, drawn with plotters' SVG backend into strings.
//! Each function returns `None` when there is nothing to plot, so the report
//! can say "not run" instead of showing an empty frame.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::errors::EvidenceError;
use super::perf::{ArmSummary, Baseline, RecoveryTimeline, SweepLevel};

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), Box<dyn std::error::Error>>;

const W: u32 = 720;
const H: u32 = 340;
const FONT: &str = "sans-serif";

const ARM_COLORS: [RGBColor; 4] = [
    RGBColor(0x5b, 0x6b, 0x7f),
    RGBColor(0x2a, 0x9d, 0x8f),
    RGBColor(0x26, 0x6d, 0xd3),
    RGBColor(0x8e, 0x44, 0xad),
];
const COLD: RGBColor = RGBColor(0xd6, 0x28, 0x28);
const WARM: RGBColor = RGBColor(0xf7, 0x7f, 0x00);
const P50: RGBColor = RGBColor(0x26, 0x6d, 0xd3);
const P90: RGBColor = RGBColor(0xf7, 0x7f, 0x00);
const P99: RGBColor = RGBColor(0xd6, 0x28, 0x28);
const OK: RGBColor = RGBColor(0x2a, 0x9d, 0x8f);
const REPL: RGBColor = RGBColor(0x26, 0x6d, 0xd3);
const FAIL: RGBColor = RGBColor(0xd6, 0x28, 0x28);
const OTHER: RGBColor = RGBColor(0x88, 0x88, 0x88);

pub(super) fn draw(
    chart: &'static str,
    f: impl FnOnce(&Area<'_>) -> DrawResult,
) -> Result<String, EvidenceError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let result = root
            .fill(&WHITE)
            .map_err(|e| -> Box<dyn std::error::Error> { Box::new(e) })
            .and_then(|()| f(&root))
            .and_then(|()| {
                root.present()
                    .map_err(|e| -> Box<dyn std::error::Error> { Box::new(e) })
            });
        result.map_err(|e| EvidenceError::Chart {
            chart,
            message: e.to_string(),
        })?;
    }
    Ok(svg)
}

pub(super) fn top(values: impl IntoIterator<Item = f64>) -> f64 {
    let m = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    if m > 0.0 {
        m * 1.15
    } else {
        1.0
    }
}

/// Bar chart: TTFT p50 per arm, with the KVCR-disabled cold and warm baselines as lines.
pub(crate) fn ttft_by_arm(
    arms: &[ArmSummary],
    baseline: Option<&Baseline>,
) -> Result<Option<String>, EvidenceError> {
    let bars: Vec<(String, f64, RGBColor)> = arms
        .iter()
        .filter_map(|a| {
            let color = ARM_COLORS[super::perf::Arm::ALL
                .iter()
                .position(|x| *x == a.arm)
                .unwrap_or(0)];
            Some((a.arm.as_str().to_string(), a.ttft_ms.p50?, color))
        })
        .collect();
    if bars.is_empty() {
        return Ok(None);
    }
    let cold = baseline.and_then(|b| b.cold_ttft_ms.p50);
    let warm = baseline.and_then(|b| b.warm_ttft_ms.p50);
    let ymax = top(bars.iter().map(|b| b.1).chain(cold).chain(warm));
    let n = bars.len();
    draw("TTFT per arm", |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("TTFT p50 per arm (ms)", (FONT, 18))
            .margin(14)
            .x_label_area_size(34)
            .y_label_area_size(54)
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..ymax)?;
        let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("ms")
            .label_style((FONT, 13))
            .draw()?;
        let colors: Vec<RGBColor> = bars.iter().map(|b| b.2).collect();
        chart.draw_series(
            Histogram::vertical(&chart)
                .margin(18)
                .style_func(move |x, _| match x {
                    SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => {
                        colors.get(*i).copied().unwrap_or(OTHER).filled()
                    }
                    SegmentValue::Last => OTHER.filled(),
                })
                .data(bars.iter().enumerate().map(|(i, b)| (i, b.1))),
        )?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            Text::new(
                format!("{:.1}", b.1),
                (SegmentValue::CenterOf(i), b.1 + ymax * 0.02),
                (FONT, 12).into_font(),
            )
        }))?;
        let mut legend = false;
        for (label, value, color) in [
            ("baseline cold (no KVCR)", cold, COLD),
            ("baseline warm (no KVCR)", warm, WARM),
        ] {
            if let Some(v) = value {
                legend = true;
                chart
                    .draw_series(LineSeries::new(
                        vec![(SegmentValue::Exact(0), v), (SegmentValue::Last, v)],
                        color.stroke_width(2),
                    ))?
                    .label(format!("{label}: {v:.1} ms"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
            }
        }
        if legend {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.3))
                .label_font((FONT, 12))
                .draw()?;
        }
        Ok(())
    })
    .map(Some)
}

fn x_range(levels: &[SweepLevel]) -> std::ops::Range<f64> {
    let max = levels
        .iter()
        .map(|l| f64::from(l.concurrency))
        .fold(1.0, f64::max);
    0.0..max * 1.08
}

/// Throughput (output tokens/s, and requests/s on the right axis) vs concurrency.
pub(crate) fn sweep_throughput(levels: &[SweepLevel]) -> Result<Option<String>, EvidenceError> {
    if levels.is_empty() {
        return Ok(None);
    }
    let tok_max = top(levels.iter().map(|l| l.output_throughput_tok_per_s));
    let req_max = top(levels.iter().map(|l| l.request_throughput_per_s));
    draw("throughput", |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Throughput vs concurrency", (FONT, 18))
            .margin(14)
            .x_label_area_size(36)
            .y_label_area_size(58)
            .right_y_label_area_size(58)
            .build_cartesian_2d(x_range(levels), 0.0..tok_max)?
            .set_secondary_coord(x_range(levels), 0.0..req_max);
        chart
            .configure_mesh()
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .x_desc("concurrency")
            .y_desc("output tokens/s")
            .label_style((FONT, 13))
            .draw()?;
        chart
            .configure_secondary_axes()
            .y_desc("requests/s")
            .label_style((FONT, 13))
            .draw()?;
        let tok: Vec<(f64, f64)> = levels
            .iter()
            .map(|l| (f64::from(l.concurrency), l.output_throughput_tok_per_s))
            .collect();
        let req: Vec<(f64, f64)> = levels
            .iter()
            .map(|l| (f64::from(l.concurrency), l.request_throughput_per_s))
            .collect();
        chart
            .draw_series(LineSeries::new(tok.clone(), P50.stroke_width(2)))?
            .label("output tokens/s (left)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], P50.stroke_width(2)));
        chart.draw_series(tok.iter().map(|p| Circle::new(*p, 4, P50.filled())))?;
        chart
            .draw_secondary_series(LineSeries::new(req.clone(), P90.stroke_width(2)))?
            .label("requests/s (right)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], P90.stroke_width(2)));
        chart
            .draw_secondary_series(req.iter().map(|p| TriangleMarker::new(*p, 5, P90.filled())))?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .label_font((FONT, 12))
            .draw()?;
        Ok(())
    })
    .map(Some)
}

/// TTFT p50/p90/p99 vs concurrency.
pub(crate) fn sweep_ttft(levels: &[SweepLevel]) -> Result<Option<String>, EvidenceError> {
    type Get = fn(&SweepLevel) -> Option<f64>;
    let getters: [(&str, RGBColor, Get); 3] = [
        ("p50", P50, |l: &SweepLevel| l.ttft_ms.p50),
        ("p90", P90, |l: &SweepLevel| l.ttft_ms.p90),
        ("p99", P99, |l: &SweepLevel| l.ttft_ms.p99),
    ];
    type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);
    let series: Vec<Series<'_>> = getters
        .into_iter()
        .map(|(name, color, get)| {
            let pts = levels
                .iter()
                .filter_map(|l| Some((f64::from(l.concurrency), get(l)?)))
                .collect();
            (name, color, pts)
        })
        .collect();
    if series.iter().all(|s| s.2.is_empty()) {
        return Ok(None);
    }
    let ymax = top(series.iter().flat_map(|s| s.2.iter().map(|p| p.1)));
    draw("TTFT vs concurrency", |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("TTFT vs concurrency (ms)", (FONT, 18))
            .margin(14)
            .x_label_area_size(36)
            .y_label_area_size(58)
            .build_cartesian_2d(x_range(levels), 0.0..ymax)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .x_desc("concurrency")
            .y_desc("TTFT ms")
            .label_style((FONT, 13))
            .draw()?;
        for (name, color, pts) in &series {
            let c = *color;
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(format!("TTFT {name}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .label_font((FONT, 12))
            .draw()?;
        Ok(())
    })
    .map(Some)
}

fn outcome_class(outcome: &str) -> (&'static str, RGBColor) {
    let o = outcome.to_ascii_lowercase();
    if o.starts_with("error") || o.contains("mismatch") || o.contains("fail") {
        ("error / wrong", FAIL)
    } else if o.contains("replacement") {
        ("served by replacement", REPL)
    } else if o.contains("guard") {
        ("served through the Guard", OK)
    } else {
        ("other", OTHER)
    }
}

/// Recovery timeline: t0 = 0 (SIGKILL), attempt markers by outcome, t1, t2 and
/// the Guard's promotion time as vertical lines.
pub(crate) fn recovery(t: &RecoveryTimeline) -> Result<Option<String>, EvidenceError> {
    if t.attempts.is_empty() && t.t1_ms.is_none() && t.t2_ms.is_none() {
        return Ok(None);
    }
    let xmax = top(t
        .attempts
        .iter()
        .map(|a| a.at_ms)
        .chain(t.t1_ms)
        .chain(t.t2_ms)
        .chain(t.promotion_ms));
    draw("recovery timeline", |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Guard recovery after SIGKILL (t0 = 0)", (FONT, 18))
            .margin(14)
            .x_label_area_size(36)
            .y_label_area_size(20)
            .build_cartesian_2d(-xmax * 0.02..xmax, 0.0..4.0)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .x_desc("ms after SIGKILL")
            .label_style((FONT, 13))
            .draw()?;
        let marks: [(String, Option<f64>, RGBColor, f64); 4] = [
            ("t0 kill".to_string(), Some(0.0), BLACK, 3.6),
            (
                format!("promotion {}", fmt(t.promotion_ms)),
                t.promotion_ms,
                OTHER,
                3.2,
            ),
            (format!("t1 {}", fmt(t.t1_ms)), t.t1_ms, OK, 3.6),
            (format!("t2 {}", fmt(t.t2_ms)), t.t2_ms, REPL, 3.2),
        ];
        for (label, at, color, y) in marks {
            if let Some(x) = at {
                chart.draw_series(LineSeries::new(
                    vec![(x, 0.3), (x, 3.4)],
                    color.stroke_width(2),
                ))?;
                chart.draw_series(std::iter::once(Text::new(
                    label,
                    (x, y + 0.3),
                    (FONT, 13).into_font().color(&color),
                )))?;
            }
        }
        let mut seen: Vec<&'static str> = Vec::new();
        for a in &t.attempts {
            let (class, color) = outcome_class(&a.outcome);
            let s = chart.draw_series(std::iter::once(Circle::new(
                (a.at_ms, 1.5),
                4,
                color.filled(),
            )))?;
            if !seen.contains(&class) {
                seen.push(class);
                s.label(format!("attempt: {class}"))
                    .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
            }
        }
        if !seen.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.3))
                .label_font((FONT, 12))
                .draw()?;
        }
        Ok(())
    })
    .map(Some)
}

fn fmt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.0} ms")).unwrap_or_default()
}
