//! The report's charts, drawn with plotters' SVG backend into strings.
//! Each function returns `None` when there is nothing to plot, so the report
//! can say "not run" instead of showing an empty frame.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::errors::EvidenceError;
use super::perf::{ArmSummary, Baseline, RecoveryTimeline, SweepLevel};
use super::workload::{ReplaySummary, SweepPoint, HIT_WINDOW_S};

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

/// KVCR on and off in the workload charts.
const ON: RGBColor = RGBColor(0x26, 0x6d, 0xd3);
const OFF: RGBColor = RGBColor(0x88, 0x88, 0x88);

/// The replays to draw: KVCR on, then off when it ran.
fn on_off<'a>(
    on: &'a ReplaySummary,
    off: Option<&'a ReplaySummary>,
) -> Vec<(&'static str, &'a ReplaySummary, RGBColor)> {
    std::iter::once(("KVCR on", on, ON))
        .chain(off.map(|off| ("KVCR off", off, OFF)))
        .collect()
}

fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .label_font((FONT, 12))
        .draw()?;
    Ok(())
}

/// A chart of two linear axes from 0, with its caption and axis names.
type Plane<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn plane<'a, 'b>(
    root: &Area<'b>,
    caption: &str,
    (x_desc, xmax): (&str, f64),
    (y_desc, ymax): (&str, f64),
) -> Result<Plane<'a, 'b>, Box<dyn std::error::Error>>
where
    'b: 'a,
{
    let mut chart = ChartBuilder::on(root)
        .caption(caption, (FONT, 18))
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(54)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 13))
        .draw()?;
    Ok(chart)
}

/// Hit rate (the engines' `cached_tokens`, every tier) per window of the
/// replay, KVCR on and off.
pub(crate) fn workload_hit_rate(
    on: &ReplaySummary,
    off: Option<&ReplaySummary>,
) -> Result<Option<String>, EvidenceError> {
    let series: Vec<_> = on_off(on, off)
        .into_iter()
        .map(|(name, r, color)| {
            let pts: Vec<(f64, f64)> = r
                .timeline
                .iter()
                .filter(|w| w.requests > 0)
                .map(|w| (w.start_s + HIT_WINDOW_S / 2.0, w.hit_rate() * 100.0))
                .collect();
            (name, pts, color)
        })
        .filter(|(_, pts, _)| !pts.is_empty())
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let xmax = top(series.iter().flat_map(|s| s.1.iter().map(|p| p.0)));
    draw("hit rate over time", |root| {
        let mut chart = plane(
            root,
            &format!("Hit rate over time ({HIT_WINDOW_S:.0} s windows)"),
            ("s after the replay started", xmax),
            ("% of prompt tokens cached", 100.0),
        )?;
        for (name, pts, color) in &series {
            let c = *color;
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
    .map(Some)
}

/// Points of the empirical CDF of `samples`, as (value, % at or below):
/// (smallest, 0) and then at most `n` steps (nearest rank at each).
pub(super) fn cdf_points(samples: &[f64], n: usize) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let len = sorted.len();
    if len == 0 {
        return Vec::new();
    }
    let steps = n.min(len);
    (0..=steps)
        .map(|k| match (k * len).div_ceil(steps) {
            0 => (sorted[0], 0.0),
            rank => (sorted[rank - 1], rank as f64 / len as f64 * 100.0),
        })
        .collect()
}

/// TTFT distribution of the ok requests, KVCR on and off, as CDFs; the
/// x axis ends at 1.25 × the larger p99 so that a few stragglers do not
/// squash the rest.
pub(crate) fn workload_ttft_cdf(
    on: &ReplaySummary,
    off: Option<&ReplaySummary>,
) -> Result<Option<String>, EvidenceError> {
    let series: Vec<_> = on_off(on, off)
        .into_iter()
        .map(|(name, r, color)| (name, cdf_points(&r.ttft_samples_ms, 200), r, color))
        .filter(|s| !s.1.is_empty())
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let p99 = series
        .iter()
        .filter_map(|s| s.2.ttft_ms.p99)
        .fold(0.0, f64::max);
    let xmax = match p99 > 0.0 {
        true => p99 * 1.25,
        false => top(series.iter().flat_map(|s| s.1.iter().map(|p| p.0))),
    };
    draw("TTFT distribution", |root| {
        let mut chart = plane(
            root,
            "TTFT distribution, KVCR on vs off",
            ("TTFT ms", xmax),
            ("% of requests at or below", 100.0),
        )?;
        for (name, pts, r, color) in &series {
            let c = *color;
            let pts: Vec<(f64, f64)> = pts.iter().copied().filter(|p| p.0 <= xmax).collect();
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
                .label(format!("{name}: p50 {}", fmt(r.ttft_ms.p50)))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
    .map(Some)
}

/// Goodput against offered rate over the sweep (KVCR on), the offered
/// rate itself as the ceiling, each sustained point filled, and the
/// highest sustained rate marked.
pub(crate) fn workload_goodput(
    sweep: &[SweepPoint],
    max_sustained: Option<f64>,
) -> Result<Option<String>, EvidenceError> {
    if sweep.is_empty() {
        return Ok(None);
    }
    let xmax = top(sweep.iter().map(|p| p.offered_rate_per_s));
    let ymax = top(sweep
        .iter()
        .flat_map(|p| [p.goodput_per_s, p.offered_rate_per_s]));
    draw("goodput against rate", |root| {
        let mut chart = plane(
            root,
            "Goodput against offered rate (KVCR on)",
            ("offered requests/s", xmax),
            ("requests/s meeting the targets", ymax),
        )?;
        let ceiling = xmax.min(ymax);
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, 0.0), (ceiling, ceiling)],
                OTHER.mix(0.6).stroke_width(1),
            ))?
            .label("every request within the targets")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], OTHER.mix(0.6).stroke_width(1))
            });
        let pts: Vec<(f64, f64)> = sweep
            .iter()
            .map(|p| (p.offered_rate_per_s, p.goodput_per_s))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, ON.stroke_width(2)))?
            .label("goodput (filled: sustained)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], ON.stroke_width(2)));
        chart.draw_series(sweep.iter().map(|p| {
            let style = match p.sustained {
                true => ON.filled(),
                false => ON.stroke_width(2),
            };
            Circle::new((p.offered_rate_per_s, p.goodput_per_s), 5, style)
        }))?;
        if let Some(rate) = max_sustained {
            chart.draw_series(LineSeries::new(
                vec![(rate, 0.0), (rate, ymax * 0.92)],
                OK.stroke_width(2),
            ))?;
            chart.draw_series(std::iter::once(Text::new(
                format!(" max sustained {rate:.2}/s"),
                (rate, ymax * 0.96),
                (FONT, 13).into_font().color(&OK),
            )))?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
    .map(Some)
}

/// Guard pool cost against pool size: each step's slowest, one line per step.
pub(crate) fn guard_costs(
    rows: &[&super::guard_costs::PoolCostRow],
) -> Result<Option<String>, EvidenceError> {
    let series = super::guard_costs::series(rows);
    if series.is_empty() {
        return Ok(None);
    }
    let xmax = top(series.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x)));
    let ymax = top(series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)));
    draw("guard pool cost", |root| {
        let mut chart = plane(
            root,
            "Guard pool cost against pool size",
            ("pool per worker (GiB)", xmax),
            ("ms (slowest in the run)", ymax),
        )?;
        for ((name, points), color) in series.iter().zip(ARM_COLORS) {
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
    .map(Some)
}
