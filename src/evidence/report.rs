//! `report.html`: one self-contained page (inline CSS and SVG, no network)
//! with the cases table, a workload trace replayed (when one was), the
//! perf arms, the concurrency sweep, the recovery timeline and the run's
//! events in order. A section without data says "not run".

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::charts;
use super::errors::EvidenceError;
use super::perf::{Percentiles, PerfSummary};
use super::record::{Outcome, RunRecord};
use super::results::Results;
use super::run_dir::RunDir;

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
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.pill{display:inline-block;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:600}
.passed{background:#d8f3ee;color:#1b6f65}.failed{background:#fbdada;color:#a11d1d}.ignored{background:#eceff2;color:#5b6b7f}.expected{background:#fdf0cf;color:#7a5300}
.counts span{margin-right:12px}
pre{white-space:pre-wrap;margin:0;font-size:12px;font-family:ui-monospace,Menlo,Consolas,monospace}
.notrun{color:#8895a3;font-style:italic}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.charts svg{max-width:100%;height:auto;border:1px solid #eef0f2;border-radius:6px}
a{color:#266dd3}
"#;

pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

pub(super) fn ms(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.1}"))
        .unwrap_or_else(|| "–".to_string())
}

fn signed(x: Option<f64>) -> String {
    x.map(|v| format!("{v:+.1}"))
        .unwrap_or_else(|| "–".to_string())
}

fn not_run(what: &str) -> String {
    format!("<p class=\"notrun\">not run — {}</p>", esc(what))
}

/// A link target for an evidence path, relative to the report (the run directory).
fn href(run_dir: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(run_dir)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}

/// Renders the report page.
pub fn render_report(results: &Results) -> Result<String, EvidenceError> {
    let run = &results.run;
    let perf = &results.perf;
    let mut o = String::new();
    let (p, f, i) = run.counts();
    let expected = match run.expected_failures() {
        0 => String::new(),
        x => format!("<span class=\"pill expected\">{x} expected failures (known findings)</span>"),
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>kvcr-e2e phase1 · {label} · {id}</title><style>{CSS}</style></head><body>\n\
         <header><h1>kvcr-e2e phase1 · {label}</h1><div class=\"meta\">run {id} · started {start} · \
         settings digest {digest}</div></header>\n<main>\n",
        label = esc(&run.label),
        id = esc(&run.run_id),
        start = esc(&run.started_at.rfc3339()),
        digest = esc(&run.settings_digest.chars().take(12).collect::<String>()),
    );
    let _ = write!(
        o,
        "<section><h2>Cases</h2><p class=\"counts\"><span class=\"pill passed\">{p} passed</span>\
         <span class=\"pill failed\">{f} failed</span>{expected}<span class=\"pill ignored\">{i} ignored</span></p>\n{}</section>\n",
        cases_table(run)
    );
    o.push_str(&kvcr_section(run));
    o.push_str(&super::kvcr_coverage::section(
        results.kvcr_coverage.as_ref(),
    ));
    o.push_str(&stack_section(run));
    o.push_str(&neighbours_section(run));
    o.push_str(&super::workload_report::section(perf.workload.as_ref())?);
    o.push_str(&arms_section(perf)?);
    o.push_str(&sweep_section(perf)?);
    o.push_str(&ttft_accuracy_section(perf));
    o.push_str(&recovery_section(perf)?);
    o.push_str(&super::guard_costs::section(results.guard_costs.as_ref())?);
    o.push_str(&load_section(run));
    o.push_str(&super::degraded_link_report::section(run));
    o.push_str(&super::gpu::section(results.gpu.as_ref())?);
    o.push_str(&super::timeline_report::section(run));
    if let Some(defs) = &perf.metric_definitions {
        let _ = writeln!(
            o,
            "<section><h2>Metric definitions</h2><pre>{}</pre></section>",
            esc(defs)
        );
    }
    o.push_str("</main></body></html>\n");
    Ok(o)
}

/// A report page of the same look around `sections` (each a `<section>`),
/// for a run that is not a phase1 run (the mutation lane).
pub fn render_page(title: &str, meta: &str, sections: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{title}</title><style>{CSS}</style></head><body>\n\
         <header><h1>{title}</h1><div class=\"meta\">{meta}</div></header>\n<main>\n{sections}</main></body></html>\n",
        title = esc(title),
        meta = esc(meta),
    )
}

/// Renders and writes `report.html` into the run directory; returns its path.
pub fn write_report(dir: &RunDir, results: &Results) -> Result<PathBuf, EvidenceError> {
    let html = render_report(results)?;
    dir.write_root_text("report.html", &html)
}

fn cases_table(run: &RunRecord) -> String {
    if run.cases.is_empty() {
        return not_run("no trials were registered");
    }
    let mut o = String::from(
        "<table><thead><tr><th>case</th><th>outcome</th><th class=\"num\">duration</th>\
         <th>message</th><th>evidence</th></tr></thead><tbody>\n",
    );
    for c in &run.cases {
        let (class, msg) = match &c.outcome {
            Outcome::Passed => ("passed", String::new()),
            Outcome::Failed { message } => ("failed", message.clone()),
            Outcome::ExpectedFailure { message, .. } => ("expected", message.clone()),
            Outcome::Ignored { reason, because } => {
                ("ignored", format!("{reason} ({})", because.words()))
            }
        };
        // Attempts run again after a clock event come first.
        let msg = c
            .retried
            .iter()
            .map(|a| format!("ran again: {}", a.why()))
            .chain((!msg.is_empty()).then_some(msg))
            .collect::<Vec<_>>()
            .join("\n");
        // A green case says what it could not check on this stack.
        let msg = match super::not_checked::line(c) {
            Some(line) if !matches!(c.outcome, Outcome::Ignored { .. }) && msg.is_empty() => line,
            Some(line) if !matches!(c.outcome, Outcome::Ignored { .. }) => format!("{msg}\n{line}"),
            _ => msg,
        };
        let msg = c
            .stack_notes()
            .into_iter()
            .fold(msg, |msg, line| match msg.is_empty() {
                true => line,
                false => format!("{msg}\n{line}"),
            });
        // Each known finding the case checked, and what was seen.
        let msg = super::expected::of(c)
            .iter()
            .filter(|check| !check.is_expected_failure())
            .map(|check| match check.shows {
                true => format!(
                    "KVCR {} (shows where it is not declared): {}",
                    check.headline(),
                    check.seen
                ),
                false => format!("KVCR {} (does not show): {}", check.headline(), check.seen),
            })
            .fold(msg, |msg, line| match msg.is_empty() {
                true => line,
                false => format!("{msg}\n{line}"),
            });
        let duration = match c.outcome {
            Outcome::Ignored { .. } => String::new(),
            _ => format!("{:.1} s", c.duration.as_secs_f64()),
        };
        let links: Vec<String> = c
            .evidence
            .iter()
            .map(|e| {
                let h = href(&run.run_dir, e);
                format!(
                    "<a href=\"{}\">{}</a>",
                    esc(&h.display().to_string()),
                    esc(&h.display().to_string())
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "<tr><td><b>{}</b><br><small>{}</small></td><td><span class=\"pill {class}\">{}</span></td>\
             <td class=\"num\">{duration}</td><td><pre>{}</pre></td><td>{}</td></tr>",
            esc(&c.id),
            esc(&c.name),
            esc(&c.outcome.words()),
            esc(&msg),
            links.join("<br>")
        );
    }
    o.push_str("</tbody></table>");
    o
}

/// Which KVCR ran, and what each KVCR process imported.
fn kvcr_section(run: &RunRecord) -> String {
    let Some(kvcr) = &run.kvcr else {
        return String::new();
    };
    let b = &kvcr.build;
    let mut o = String::from("<section><h2>KVCR under test</h2><table><tbody>");
    let mut row = |k: &str, v: &str| {
        let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    };
    row("spec", &b.spec);
    row("source", b.source_label());
    row("version", &b.version);
    row("files sha256", &b.files_sha256);
    row("imported from", &b.location.display().to_string());
    row(
        "env",
        &b.derived_env
            .as_ref()
            .map(|d| format!("derived env {d}"))
            .unwrap_or_else(|| "the base env as is".into()),
    );
    if let Some(sha) = &b.artifact_sha256 {
        row("artifact sha256", sha);
    }
    if let Some(git) = &b.git {
        let state = if git.dirty { " (dirty)" } else { "" };
        row("git commit", &format!("{}{state}", git.commit));
    }
    if let Some(p) = &b.patch {
        row(
            "patch",
            &format!(
                "{} (sha256 {}) over {}",
                p.file.display(),
                p.sha256,
                p.base_spec
            ),
        );
    }
    o.push_str("</tbody></table>");
    if !kvcr.imports.is_empty() {
        o.push_str(
            "<table><thead><tr><th>component</th><th class=\"num\">pid</th><th>version</th>\
             <th>from</th><th>files sha256</th></tr></thead><tbody>",
        );
        for i in &kvcr.imports {
            let _ = write!(
                o,
                "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&i.component),
                i.pid,
                esc(&i.version),
                esc(&i.location.display().to_string()),
                esc(i.files_sha256.get(..12).unwrap_or(&i.files_sha256)),
            );
        }
        o.push_str("</tbody></table>");
    }
    o.push_str("</section>\n");
    o
}

/// The other live runs beside this one, and the load, at start and end.
fn neighbours_section(run: &RunRecord) -> String {
    let mut o = String::from("<section><h2>Machine: other live runs and load</h2>");
    let Some(n) = &run.neighbours else {
        o.push_str(&not_run(
            "no stack was started or attached, or no registry of live runs could be read",
        ));
        o.push_str("</section>\n");
        return o;
    };
    let _ = write!(
        o,
        "<p>registry {}{}</p><table><thead><tr><th>when</th><th>at</th><th>load 1/5/15 min</th>\
         <th>other live runs</th></tr></thead><tbody>",
        esc(&n.registry.display().to_string()),
        if n.exclusive {
            format!(" · exclusive: waited {:.1} s for the others", n.waited_s)
        } else {
            String::new()
        }
    );
    for (when, s) in [("start", Some(&n.at_start)), ("end", n.at_end.as_ref())] {
        let Some(s) = s else { continue };
        let runs: Vec<String> = s
            .neighbours
            .iter()
            .map(|b| format!("{} ({})", esc(&b.run.describe()), b.relation.words()))
            .collect();
        let _ = write!(
            o,
            "<tr><td>{when}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.at),
            esc(&s.load_words()),
            if runs.is_empty() {
                "none".to_string()
            } else {
                runs.join("<br>")
            }
        );
    }
    o.push_str("</tbody></table>");
    if !run.clock_events.is_empty() {
        o.push_str("<p>the machine's clocks during the run:</p><ul>");
        for event in &run.clock_events {
            let _ = write!(o, "<li>{}</li>", esc(&event.to_string()));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>\n");
    o
}

fn stack_section(run: &RunRecord) -> String {
    let mut o = String::from("<section><h2>Stack and reference phase</h2>");
    match &run.stack {
        Some(s) => {
            let _ = write!(
                o,
                "<p>{} {}× · ready in {:.1} s</p><table><thead><tr><th>component</th><th class=\"num\">ready after</th></tr></thead><tbody>",
                if s.attached { "attached" } else { "provisioned" },
                s.provisioned,
                s.total_startup.as_secs_f64()
            );
            for t in &s.startup {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td class=\"num\">{:.1} s</td></tr>",
                    esc(&t.component),
                    t.ready.as_secs_f64()
                );
            }
            o.push_str("</tbody></table>");
        }
        None => o.push_str(&not_run("no case needed the stack")),
    }
    match &run.reference {
        Some(r) => {
            let probes: Vec<String> = r
                .probes
                .iter()
                .map(|(k, ok)| {
                    format!(
                        "{} {}",
                        esc(k),
                        if *ok {
                            "✓"
                        } else {
                            "✗ (engine not deterministic)"
                        }
                    )
                })
                .collect();
            let _ = write!(
                o,
                "<p>reference: {} prompts, {}, {:.1} s, digest <code>{}</code><br>probes: {}<br>batching (reference phase and TC-01): {}</p>",
                r.prompts,
                esc(&super::summary::reference_origin(r)),
                r.duration.as_secs_f64(),
                esc(&r.digest),
                probes.join(", "),
                esc(r.batching.as_deref().unwrap_or("not recorded"))
            );
        }
        None => o.push_str(&not_run("reference phase")),
    }
    o.push_str("</section>\n");
    o
}

fn pcells(p: &Percentiles) -> String {
    format!(
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
        p.n,
        ms(p.p50),
        ms(p.p90),
        ms(p.p99)
    )
}

fn arms_section(perf: &PerfSummary) -> Result<String, EvidenceError> {
    let mut o = String::from("<section><h2>Performance arms (TC-05)</h2>");
    let Some(svg) = charts::ttft_by_arm(&perf.arms, perf.baseline.as_ref())? else {
        o.push_str(&not_run("TC-05 recorded no arm"));
        o.push_str("</section>\n");
        return Ok(o);
    };
    let _ = write!(o, "<div class=\"charts\">{svg}</div>");
    o.push_str(
        "<table><thead><tr><th>arm</th><th class=\"num\">n</th><th class=\"num\">TTFT p50</th>\
         <th class=\"num\">p90</th><th class=\"num\">p99</th><th class=\"num\">Δ cold</th>\
         <th class=\"num\">Δ warm</th><th class=\"num\">TPOT p50</th><th class=\"num\">ITL p50</th>\
         <th class=\"num\">TTFT p50 95% CI</th></tr></thead><tbody>",
    );
    if let Some(b) = &perf.baseline {
        for (name, p) in [
            ("baseline cold (no KVCR)", &b.cold_ttft_ms),
            ("baseline warm (no KVCR)", &b.warm_ttft_ms),
        ] {
            let _ = write!(
                o,
                "<tr><td><i>{name}</i></td>{}<td></td><td></td><td></td><td></td><td></td></tr>",
                pcells(p)
            );
        }
    }
    for a in &perf.arms {
        let _ = write!(
            o,
            "<tr><td><b>{}</b></td>{}<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            a.arm,
            pcells(&a.ttft_ms),
            signed(a.delta_vs_baseline_ms.cold),
            signed(a.delta_vs_baseline_ms.warm),
            ms(a.tpot_ms.p50),
            ms(a.itl_ms.p50),
            quantile_cell(a.ttft_p50_interval_ms.as_ref(), 0.5)
        );
    }
    o.push_str(
        "</tbody></table><p><small>All times in ms. Δ = arm TTFT p50 − baseline TTFT p50 (negative is faster). \
         Percentiles are nearest-rank. The p50's interval is distribution-free (order statistics: \
         [x<sub>(l)</sub>, x<sub>(u)</sub>] of the sorted TTFTs, its exact coverage in the cell's title); \
         it needs n ≥ 6, a p90 interval n ≥ 36 (results.json: <code>ttft_p90_interval_ms</code>). \
         n is <code>perf_repeats</code>.</small></p></section>\n",
    );
    Ok(o)
}

fn sweep_section(perf: &PerfSummary) -> Result<String, EvidenceError> {
    let mut o = String::from("<section><h2>Concurrency sweep (TC-05)</h2>");
    let (Some(tp), ttft) = (
        charts::sweep_throughput(&perf.sweep)?,
        charts::sweep_ttft(&perf.sweep)?,
    ) else {
        o.push_str(&not_run("TC-05 recorded no sweep level"));
        o.push_str("</section>\n");
        return Ok(o);
    };
    let _ = write!(
        o,
        "<div class=\"charts\">{tp}{}</div>",
        ttft.unwrap_or_default()
    );
    o.push_str(
        "<table><thead><tr><th class=\"num\">concurrency</th><th class=\"num\">requests</th>\
         <th class=\"num\">duration s</th><th class=\"num\">req/s</th><th class=\"num\">output tok/s</th>\
         <th class=\"num\">TTFT p50</th><th class=\"num\">p90</th><th class=\"num\">p99</th>\
         <th class=\"num\">TPOT p50</th><th class=\"num\">req/s 95% CI</th>\
         <th class=\"num\">TTFT p50 95% CI</th></tr></thead><tbody>",
    );
    for l in &perf.sweep {
        let level = match &l.open_loop {
            Some(ol) => format!("{}/s (open loop)", ol.rate_per_s),
            None => l.concurrency.to_string(),
        };
        let _ = write!(
            o,
            "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.2}</td><td class=\"num\">{:.2}</td>\
             <td class=\"num\">{:.1}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&level),
            l.requests,
            l.duration_s,
            l.request_throughput_per_s,
            l.output_throughput_tok_per_s,
            ms(l.ttft_ms.p50),
            ms(l.ttft_ms.p90),
            ms(l.ttft_ms.p99),
            ms(l.tpot_ms.p50),
            l.request_throughput_interval_per_s
                .map_or("–".into(), |i| format!("[{:.2}, {:.2}]", i.lo, i.hi)),
            quantile_cell(l.ttft_p50_interval_ms.as_ref(), 0.5)
        );
    }
    o.push_str(
        "</tbody></table><p><small>The throughput interval: the level's wall time cut into 6 equal \
         windows, completions per second in each, a bootstrap of their mean widened for 6 units. \
         An open-loop level's concurrency column is the most requests that were in flight at once.</small></p>",
    );
    o.push_str(&open_loop_table(&perf.sweep));
    o.push_str("</section>\n");
    Ok(o)
}

/// The open-loop levels' schedule keeping (empty without one).
fn open_loop_table(levels: &[crate::evidence::SweepLevel]) -> String {
    let open: Vec<_> = levels.iter().filter_map(|l| l.open_loop.as_ref()).collect();
    if open.is_empty() {
        return String::new();
    }
    let mut o = String::from(
        "<h3>Open loop: schedule delay</h3><table><thead><tr><th class=\"num\">rate /s</th>\
         <th class=\"num\">seed</th><th class=\"num\">n</th><th class=\"num\">sent /s</th>\
         <th class=\"num\">delay p50</th><th class=\"num\">p99</th><th class=\"num\">max</th>\
         <th class=\"num\">TTFT from intended p50</th><th class=\"num\">p90</th><th class=\"num\">p99</th>\
         </tr></thead><tbody>",
    );
    for ol in open {
        let d = ol.schedule_delay_ms.as_ref();
        let _ = write!(
            o,
            "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            ol.rate_per_s,
            ol.seed,
            d.map_or(0, |d| d.n),
            d.map_or("–".into(), |d| format!("{:.2}", d.achieved_rate_per_s)),
            ms(d.map(|d| d.p50_ms)),
            ms(d.map(|d| d.p99_ms)),
            ms(d.map(|d| d.max_ms)),
            ms(ol.ttft_from_intended_ms.p50),
            ms(ol.ttft_from_intended_ms.p90),
            ms(ol.ttft_from_intended_ms.p99)
        );
    }
    o.push_str(
        "</tbody></table><p><small>Schedule delay = actual − intended send, ms (Poisson arrivals \
         drawn from the seed). TTFT from intended = delay + TTFT: what a request arriving on \
         schedule waited, free of coordinated omission.</small></p>",
    );
    o
}

/// A quantile's interval as a table cell's text, its coverage in the title.
fn quantile_cell(i: Option<&crate::stats::QuantileInterval>, q: f64) -> String {
    match i {
        Some(i) => format!(
            "<span title=\"ranks {} and {} of {}, coverage {:.1} %\">[{:.1}, {:.1}]</span>",
            i.lo_rank,
            i.hi_rank,
            i.n,
            i.coverage * 100.0,
            i.lo,
            i.hi
        ),
        None => format!(
            "– (n &lt; {})",
            crate::stats::min_sample_for(q, crate::evidence::INTERVAL_CONFIDENCE)
        ),
    }
}

fn ttft_accuracy_section(perf: &PerfSummary) -> String {
    let mut o = String::from("<section><h2>TTFT accuracy (TC-05)</h2>");
    if perf.ttft_accuracy.is_empty() {
        o.push_str(&not_run("TC-05 recorded no TTFT accuracy"));
        o.push_str("</section>\n");
        return o;
    }
    o.push_str(
        "<p>Per request: the client's first-chunk arrival minus the engine's own stamp of sending \
         its first token, both on CLOCK_MONOTONIC. It is what the client's TTFT holds beyond the \
         engine's (frontend, HTTP, client decode): a TTFT delta within its spread (p99 − p50) is \
         not a difference the engine made.</p>\
         <table><thead><tr><th>case</th><th>engine</th><th class=\"num\">n</th>\
         <th class=\"num\">min</th><th class=\"num\">p50</th><th class=\"num\">p99</th>\
         <th class=\"num\">max</th><th>engine stamp</th></tr></thead><tbody>",
    );
    for a in &perf.ttft_accuracy {
        match (&a.offset_ms, &a.unavailable) {
            (Some(s), _) => {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.3}</td>\
                     <td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td>{}</td></tr>",
                    esc(&a.case),
                    esc(&a.engine),
                    s.n,
                    s.min,
                    s.p50,
                    s.p99,
                    s.max,
                    esc(&a.source)
                );
            }
            (None, why) => {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td colspan=\"5\"><b>not available:</b> {}</td><td>{}</td></tr>",
                    esc(&a.case),
                    esc(&a.engine),
                    esc(why.as_deref().unwrap_or("no figure")),
                    esc(&a.source)
                );
            }
        }
    }
    o.push_str("</tbody></table><p><small>All offsets in ms.</small></p></section>\n");
    o
}

fn recovery_section(perf: &PerfSummary) -> Result<String, EvidenceError> {
    let mut o = String::from("<section><h2>Guard recovery timeline (TC-06)</h2>");
    let Some(t) = &perf.recovery else {
        o.push_str(&not_run("TC-06 recorded no timeline"));
        o.push_str("</section>\n");
        return Ok(o);
    };
    let _ = write!(
        o,
        "<p>t1 (first Guard-served correct response) <b>{} ms</b> · t2 (first response from the replacement) \
         <b>{} ms</b> · Guard promotion <b>{} ms</b> · {} attempts</p>",
        ms(t.t1_ms),
        ms(t.t2_ms),
        ms(t.promotion_ms),
        t.attempts.len()
    );
    if let Some(why) = &t.no_t1_reason {
        let _ = write!(o, "<p><b>no t1:</b> {}</p>", esc(why));
    }
    match charts::recovery(t)? {
        Some(svg) => {
            let _ = write!(o, "<div class=\"charts\">{svg}</div>");
        }
        None => o.push_str(&not_run("no attempt was made")),
    }
    o.push_str("</section>\n");
    Ok(o)
}

/// The measurement key under which a fault-under-load case leaves its timeline.
pub const LOAD_TIMELINE: &str = "load_timeline";

/// Faults under load: every request of the window against the kill, as a
/// table (one row per request, in send order).
fn load_section(run: &super::record::RunRecord) -> String {
    let mut o = String::from("<section><h2>Fault under load (TC-04)</h2>");
    let timelines: Vec<_> = run
        .cases
        .iter()
        .filter_map(|c| c.measurements.get(LOAD_TIMELINE).map(|t| (c, t)))
        .collect();
    if timelines.is_empty() {
        o.push_str(&not_run("no fault-under-load case ran"));
    }
    for (case, t) in timelines {
        let kill = t["fault_at_ms"].as_f64().unwrap_or(f64::NAN);
        let _ = write!(
            o,
            "<p>{}: worker killed at <b>{kill:.0} ms</b> (rows from then on are marked)</p><table><tr><th>client</th><th>#</th>\
             <th>prompt</th><th>sent ms</th><th>done ms</th><th>outcome</th><th>worker</th><th>detail</th></tr>",
            esc(&case.name)
        );
        for r in t["requests"].as_array().into_iter().flatten() {
            let sent = r["sent_ms"].as_f64().unwrap_or(f64::NAN);
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{sent:.0}{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                r["client"],
                r["seq"],
                esc(r["prompt"].as_str().unwrap_or("")),
                if sent >= kill { " (after kill)" } else { "" },
                r["done_ms"].as_f64().unwrap_or(f64::NAN),
                esc(r["outcome"].as_str().unwrap_or("")),
                r["worker_id"],
                esc(r["detail"].as_str().unwrap_or("")),
            );
        }
        o.push_str("</table>");
    }
    o.push_str("</section>\n");
    o
}
