//! The report's "Workload" section: a trace replayed through the stack,
//! KVCR on against KVCR off (`perf.workload`), with its charts.

use std::fmt::Write;

use super::charts;
use super::errors::EvidenceError;
use super::perf::Percentiles;
use super::report::{esc, ms};
use super::workload::{ReplaySummary, WorkloadSummary};

/// The section; none without a replay (a run of other cases).
pub(super) fn section(workload: Option<&WorkloadSummary>) -> Result<String, EvidenceError> {
    let Some(w) = workload else {
        return Ok(String::new());
    };
    let mut o = String::from("<section><h2>Workload: a trace replayed (WL-01)</h2>");
    let t = &w.trace;
    let _ = write!(
        o,
        "<p>trace <b>{}</b> (sha256 <code>{}</code>) · {} requests over {:.1} s · {} tokens per block<br>\
         targets: TTFT ≤ <b>{} ms</b> and TPOT ≤ <b>{} ms</b>; a rate is sustained when at least \
         <b>{:.0} %</b> of its requests meet them, none failed and none had wrong tokens</p>",
        esc(&t.name),
        esc(t.sha256.get(..12).unwrap_or(&t.sha256)),
        t.requests,
        t.duration_s,
        t.block_size,
        w.slo.ttft_ms,
        w.slo.tpot_ms,
        w.slo.attainment * 100.0,
    );
    let off = w.off.as_ref();
    let charts: Vec<String> = [
        charts::workload_hit_rate(&w.on, off)?,
        charts::workload_ttft_cdf(&w.on, off)?,
        charts::workload_goodput(&w.sweep, w.max_sustained_rate_per_s)?,
    ]
    .into_iter()
    .flatten()
    .collect();
    let _ = write!(o, "<div class=\"charts\">{}</div>", charts.concat());
    o.push_str(&on_off_table(&w.on, off));
    o.push_str(&sweep_table(w));
    o.push_str(
        "<p><small>Hit rate per tier: the prompt tokens served from the engine's own prefix \
         cache (device), KVCR's host DRAM pool, a peer's pool (through a router hint) and \
         KVCR's disk tier, from the engines' and KVCR's counters, as a share of the replay's \
         prompt tokens; KVCR off has the device tier alone. Cached tokens reported: the sum of \
         the answers' <code>cached_tokens</code>, which the counters must reconcile with. \
         Goodput: requests meeting both targets per second of the replay. TTFT and TPOT are \
         of the requests answered with the reference tokens; schedule delay = actual − \
         intended send. The TTFT chart ends at 1.25 × the larger p99. All times in ms.</small></p>",
    );
    o.push_str("</section>\n");
    Ok(o)
}

fn percent(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

/// KVCR on and off side by side, one row per figure.
fn on_off_table(on: &ReplaySummary, off: Option<&ReplaySummary>) -> String {
    let mut o = String::from(
        "<table><thead><tr><th></th><th class=\"num\">KVCR on</th><th class=\"num\">KVCR off</th>\
         </tr></thead><tbody>",
    );
    let mut row = |name: &str, cell: &dyn Fn(&ReplaySummary) -> String| {
        let _ = write!(
            o,
            "<tr><th>{name}</th><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            cell(on),
            off.map_or_else(|| "not run".to_string(), cell)
        );
    };
    row("rate factor · offered rate", &|r| {
        format!("{}× · {:.2}/s", r.rate_factor, r.offered_rate_per_s)
    });
    row("requests", &|r| r.requests.to_string());
    row("ok · failed · wrong tokens", &|r| {
        format!("{} · {} · {}", r.ok, r.failed, r.wrong_tokens)
    });
    row("prompt tokens", &|r| r.prompt_tokens.to_string());
    for (tier, _) in on.hit_rate.named() {
        row(&format!("hit rate {tier}"), &|r| {
            let rate = r
                .hit_rate
                .named()
                .into_iter()
                .find(|(t, _)| *t == tier)
                .map_or(0.0, |(_, v)| v);
            let tokens = match tier {
                "device" => r.tiers.device,
                "dram" => r.tiers.dram,
                "peer" => r.tiers.peer,
                "disk" => r.tiers.disk,
                _ => r.tiers.total(),
            };
            format!("{} ({tokens} tokens)", percent(rate))
        });
    }
    row("cached tokens reported", &|r| {
        r.cached_tokens_reported.to_string()
    });
    let p = |get: fn(&ReplaySummary) -> &Percentiles| {
        move |r: &ReplaySummary| {
            let p = get(r);
            format!("{} / {} / {}", ms(p.p50), ms(p.p90), ms(p.p99))
        }
    };
    row("TTFT p50 / p90 / p99", &p(|r| &r.ttft_ms));
    row("TPOT p50", &|r| ms(r.tpot_ms.p50));
    row("E2EL p50 / p90 / p99", &p(|r| &r.e2el_ms));
    row("goodput", &|r| format!("{:.2}/s", r.goodput_per_s));
    row("within the targets", &|r| {
        format!("{} ({})", r.slo_met, percent(r.slo_attainment))
    });
    row("schedule delay p99", &|r| ms(r.schedule_delay_ms.p99));
    row("duration", &|r| format!("{:.1} s", r.duration_s));
    row(
        "counters and answers",
        &|r| match r.reconciliation.is_empty() {
            true => "reconciled".to_string(),
            false => format!(
                "<b>not reconciled:</b> {}",
                r.reconciliation
                    .iter()
                    .map(|f| esc(f))
                    .collect::<Vec<_>>()
                    .join("<br>")
            ),
        },
    );
    o.push_str("</tbody></table>");
    o
}

/// The rate sweep, one row per rate (empty without a sweep).
fn sweep_table(w: &WorkloadSummary) -> String {
    if w.sweep.is_empty() {
        return "<p class=\"notrun\">no rate sweep (<code>--sweep</code>)</p>".to_string();
    }
    let mut o = format!(
        "<h3>Rate sweep (KVCR on): highest sustained rate {}</h3><table><thead><tr>\
         <th class=\"num\">rate factor</th><th class=\"num\">offered /s</th>\
         <th class=\"num\">requests</th><th class=\"num\">ok</th><th class=\"num\">within targets</th>\
         <th class=\"num\">goodput /s</th><th class=\"num\">TTFT p50</th><th class=\"num\">p90</th>\
         <th>sustained</th></tr></thead><tbody>",
        w.max_sustained_rate_per_s
            .map_or_else(|| "none".to_string(), |r| format!("{r:.2}/s"))
    );
    for p in &w.sweep {
        let _ = write!(
            o,
            "<tr><td class=\"num\">{}×</td><td class=\"num\">{:.2}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{} ({})</td><td class=\"num\">{:.2}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            p.rate_factor,
            p.offered_rate_per_s,
            p.requests,
            p.ok,
            p.slo_met,
            percent(p.slo_attainment),
            p.goodput_per_s,
            ms(p.ttft_p50_ms),
            ms(p.ttft_p90_ms),
            match p.sustained {
                true => "<span class=\"pill passed\">yes</span>",
                false => "<span class=\"pill ignored\">no</span>",
            }
        );
    }
    o.push_str("</tbody></table>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::sample;

    #[test]
    fn the_section_shows_the_trace_targets_on_and_off_and_three_charts() {
        let w = sample::workload();
        let html = section(Some(&w)).unwrap();
        assert_eq!(html.matches("<svg").count(), 3, "{html}");
        for want in [
            "multi-turn-small.jsonl",
            "sha256 <code>9f86d081884c</code>",
            "400 requests over 119.7 s",
            "TTFT ≤ <b>180 ms</b> and TPOT ≤ <b>15 ms</b>",
            "Hit rate over time",
            "TTFT distribution, KVCR on vs off",
            "Goodput against offered rate",
            "max sustained",
            "<th>hit rate dram</th>",
            "<th>counters and answers</th><td class=\"num\">reconciled</td>",
            "highest sustained rate",
        ] {
            assert!(html.contains(want), "{want}");
        }
        let on = percent(w.on.hit_rate.total);
        let off = percent(w.off.as_ref().unwrap().hit_rate.total);
        assert_ne!(on, off);
        assert!(
            html.contains(&format!("<th>hit rate total</th><td class=\"num\">{on}")),
            "{on}"
        );
        assert!(html.contains(&format!("<td class=\"num\">{off}")), "{off}");
    }

    #[test]
    fn findings_are_listed_and_missing_parts_say_so() {
        let mut w = sample::workload();
        w.on.reconciliation = vec!["dram: counters 120 tokens, answers <100>".into()];
        w.off = None;
        w.sweep.clear();
        w.max_sustained_rate_per_s = None;
        let html = section(Some(&w)).unwrap();
        assert!(
            html.contains("<b>not reconciled:</b> dram: counters 120 tokens, answers &lt;100&gt;"),
            "{html}"
        );
        assert!(html.contains("<td class=\"num\">not run</td>"));
        assert!(html.contains("no rate sweep"));
        // Hit rate and TTFT of KVCR on alone; no goodput chart.
        assert_eq!(html.matches("<svg").count(), 2);
        assert_eq!(section(None).unwrap(), "");
    }

    #[test]
    fn the_cdf_has_a_point_per_step_up_to_every_sample() {
        let samples: Vec<f64> = (1..=1000).rev().map(f64::from).collect();
        let pts = charts::cdf_points(&samples, 200);
        assert_eq!(pts.len(), 201);
        assert_eq!(pts[0], (1.0, 0.0));
        assert_eq!(pts[100], (500.0, 50.0));
        assert_eq!(pts[200], (1000.0, 100.0));
        assert_eq!(
            charts::cdf_points(&[3.0, 1.0], 200),
            [(1.0, 0.0), (1.0, 50.0), (3.0, 100.0)]
        );
        assert!(charts::cdf_points(&[], 200).is_empty());
    }
}
