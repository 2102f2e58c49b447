//! The GPU telemetry's evidence: JUnit properties and the report section
//! (GPU memory over the run's timeline, with case boundaries and kills).

use std::fmt::Write;

use plotters::prelude::*;

use super::charts::{draw, top};
use super::errors::EvidenceError;
use crate::gpu::run::GpuRun;

const GIB: f64 = (1u64 << 30) as f64;
const FONT: &str = "sans-serif";
const LINE_COLORS: [RGBColor; 4] = [
    RGBColor(0x26, 0x6d, 0xd3),
    RGBColor(0x2a, 0x9d, 0x8f),
    RGBColor(0x8e, 0x44, 0xad),
    RGBColor(0xf7, 0x7f, 0x00),
];
const KILL: RGBColor = RGBColor(0xd6, 0x28, 0x28);
const CASE: RGBColor = RGBColor(0x88, 0x88, 0x88);

/// `gpu.*` suite properties: model, driver, count, samples, releases.
pub(crate) fn properties(gpu: &GpuRun) -> Vec<(String, String)> {
    let inv = &gpu.timeline.inventory;
    let mut out = vec![
        ("gpu.model".to_string(), inv.models()),
        ("gpu.driver".to_string(), inv.driver_version.clone()),
        ("gpu.count".to_string(), inv.devices.len().to_string()),
        (
            "gpu.samples".to_string(),
            gpu.timeline.samples.len().to_string(),
        ),
    ];
    for r in &gpu.releases {
        out.push((
            format!("gpu.release_ms.{}", r.component),
            r.release_ms.to_string(),
        ));
    }
    if !gpu.timeline.errors.is_empty() {
        out.push((
            "gpu.sampling_errors".to_string(),
            gpu.timeline.errors.len().to_string(),
        ));
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The report's GPU section; nothing without telemetry (the run's output
/// already said "GPU telemetry off").
pub(crate) fn section(gpu: Option<&GpuRun>) -> Result<String, EvidenceError> {
    let Some(gpu) = gpu else {
        return Ok(String::new());
    };
    let t = &gpu.timeline;
    let mut o = format!(
        "<section><h2>GPU</h2><p>{} · driver {} · {} GPU(s) · {} samples every {} ms</p>\n",
        esc(&t.inventory.models()),
        esc(&t.inventory.driver_version),
        t.inventory.devices.len(),
        t.samples.len(),
        t.interval_ms
    );
    if let Some(svg) = memory_chart(gpu)? {
        let _ = writeln!(o, "<div class=\"charts\">{svg}</div>");
    }
    if !gpu.releases.is_empty() || !gpu.release_failures.is_empty() {
        o.push_str("<table><tr><th>killed</th><th class=\"num\">GPU memory held</th><th class=\"num\">released after</th></tr>\n");
        for r in &gpu.releases {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"num\">{:.2} GiB</td><td class=\"num\">{} ms</td></tr>",
                esc(&r.component),
                r.held_bytes as f64 / GIB,
                r.release_ms
            );
        }
        for f in &gpu.release_failures {
            let _ = writeln!(o, "<tr><td colspan=\"3\">{}</td></tr>", esc(f));
        }
        o.push_str("</table>\n");
    }
    if !t.errors.is_empty() {
        let _ = writeln!(
            o,
            "<p>sampling errors (first {}):</p><pre>{}</pre>",
            t.errors.len(),
            esc(&t.errors.join("\n"))
        );
    }
    o.push_str("</section>\n");
    Ok(o)
}

/// GPU memory used per GPU over the run, case starts in grey, kills in red.
pub(crate) fn memory_chart(gpu: &GpuRun) -> Result<Option<String>, EvidenceError> {
    let t = &gpu.timeline;
    if t.samples.is_empty() {
        return Ok(None);
    }
    let secs = |ms: u64| ms as f64 / 1000.0;
    let xmax = top(t
        .samples
        .iter()
        .map(|s| secs(s.t_ms))
        .chain(t.marks.iter().map(|m| secs(m.t_ms))));
    let total_gib = t
        .inventory
        .devices
        .iter()
        .map(|d| d.memory_total_bytes as f64 / GIB)
        .fold(0.0, f64::max);
    let ymax = if total_gib > 0.0 { total_gib } else { 1.0 };
    draw("GPU memory over the run", |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("GPU memory used over the run", (FONT, 18))
            .margin(14)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax * 1.05)?;
        chart
            .configure_mesh()
            .x_desc("s since the GPU preflight")
            .y_desc("GiB")
            .label_style((FONT, 13))
            .draw()?;
        for m in &t.marks {
            let (color, width) = match m.kind.as_str() {
                "kill" => (KILL, 2),
                _ => (CASE, 1),
            };
            let x = secs(m.t_ms);
            chart.draw_series(LineSeries::new(
                vec![(x, 0.0), (x, ymax)],
                color.stroke_width(width),
            ))?;
            let label = match m.kind.as_str() {
                "case" => m.label.chars().take(5).collect(),
                kind => format!("{kind} {}", m.label),
            };
            chart.draw_series(std::iter::once(Text::new(
                label,
                (x, ymax * 1.02),
                (FONT, 11).into_font().color(&color),
            )))?;
        }
        for (i, d) in t.inventory.devices.iter().enumerate() {
            let color = LINE_COLORS[i % LINE_COLORS.len()];
            let points: Vec<(f64, f64)> = t
                .samples
                .iter()
                .filter_map(|s| {
                    s.devices
                        .iter()
                        .find(|r| r.index == d.index)
                        .map(|r| (secs(s.t_ms), r.memory_used_bytes as f64 / GIB))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(format!("GPU {}", d.index))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::fake::{FakeGpu, GIB as B};
    use crate::gpu::release::Release;
    use crate::gpu::sampler::{GpuMark, GpuSample};
    use crate::gpu::{DeviceReading, GpuSource, GpuTimeline};

    fn run() -> GpuRun {
        let inventory = FakeGpu::h200s(2).inventory().expect("fake inventory");
        let sample = |t_ms, used| GpuSample {
            t_ms,
            devices: vec![
                DeviceReading {
                    index: 0,
                    memory_used_bytes: used,
                    utilization_percent: Some(40),
                    temperature_c: Some(50),
                },
                DeviceReading {
                    index: 1,
                    memory_used_bytes: 110 * B,
                    utilization_percent: None,
                    temperature_c: None,
                },
            ],
            components: Vec::new(),
            unattributed: Vec::new(),
        };
        GpuRun {
            timeline: GpuTimeline {
                inventory,
                interval_ms: 500,
                samples: vec![sample(0, 0), sample(500, 110 * B), sample(1500, 2 * B)],
                marks: vec![
                    GpuMark {
                        t_ms: 400,
                        kind: "case".into(),
                        label: "TC-04::guard_takeover_and_replacement".into(),
                    },
                    GpuMark {
                        t_ms: 1000,
                        kind: "kill".into(),
                        label: "worker-A".into(),
                    },
                ],
                errors: Vec::new(),
            },
            releases: vec![Release {
                component: "worker-A".into(),
                held_bytes: 108 * B,
                release_ms: 412,
            }],
            release_failures: Vec::new(),
        }
    }

    #[test]
    fn junit_gets_model_driver_and_release_times() {
        let props = properties(&run());
        for (k, v) in [
            ("gpu.model", "NVIDIA H200"),
            ("gpu.driver", "570.124.06"),
            ("gpu.count", "2"),
            ("gpu.release_ms.worker-A", "412"),
        ] {
            assert!(
                props.iter().any(|(pk, pv)| pk == k && pv == v),
                "{k}={v} in {props:?}"
            );
        }
    }

    #[test]
    fn the_report_section_draws_memory_with_case_and_kill_marks() {
        let html = section(Some(&run())).expect("renders");
        assert!(html.contains("<svg"), "a chart");
        assert!(
            html.contains("kill worker-A\n</text>") && html.contains("TC-04\n</text>"),
            "marks are labelled"
        );
        assert!(html.contains("412 ms"), "the release time");
        assert_eq!(
            section(None).expect("renders"),
            "",
            "no NVML: the report is unchanged"
        );
    }

    #[test]
    fn results_json_carries_the_gpu_field_only_with_telemetry() {
        let mut results = crate::evidence::sample::results();
        let without = serde_json::to_value(&results).expect("serializes");
        assert!(without.get("gpu").is_none());
        results = results.with_gpu(Some(run()));
        let with = serde_json::to_value(&results).expect("serializes");
        assert_eq!(with["gpu"]["releases"][0]["release_ms"], 412);
        assert_eq!(
            with["gpu"]["timeline"]["inventory"]["driver_version"],
            "570.124.06"
        );
    }
}
