//! The one-screen text summary printed at the end of a run.

use std::fmt::Write;

use super::perf::{Percentiles, PerfSummary};
use super::record::{Outcome, RunRecord};

fn ms(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.1}"))
        .unwrap_or_else(|| "-".to_string())
}

fn signed(x: Option<f64>) -> String {
    x.map(|v| format!("{v:+.1}"))
        .unwrap_or_else(|| "-".to_string())
}

fn secs(d: std::time::Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The summary text (no colours; fits 100 columns).
pub fn render_summary(run: &RunRecord, perf: &PerfSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "kvcr-e2e phase1 · {} · run {}", run.label, run.run_id);
    let _ = writeln!(o, "run dir: {}", run.run_dir.display());
    if let Some(kvcr) = &run.kvcr {
        let _ = writeln!(o, "kvcr: {}", kvcr.build.one_line());
        if !kvcr.imports.is_empty() {
            let mut components: Vec<&str> =
                kvcr.imports.iter().map(|i| i.component.as_str()).collect();
            components.dedup();
            let odd: Vec<&str> = kvcr
                .imports
                .iter()
                .filter(|i| !kvcr.build.is_imported_by(i))
                .map(|i| i.component.as_str())
                .collect();
            let verdict = if odd.is_empty() {
                "all the same build".to_string()
            } else {
                format!("ANOTHER BUILD in {}", odd.join(", "))
            };
            let _ = writeln!(
                o,
                "      imported by {} processes ({}): {verdict}",
                kvcr.imports.len(),
                components.join(", ")
            );
        }
    }
    if let Some(stack) = &run.stack {
        let how = if stack.attached {
            "attached"
        } else {
            "provisioned"
        };
        let _ = writeln!(
            o,
            "stack: {how} {}× in {}{}",
            stack.provisioned,
            secs(stack.total_startup),
            if stack.startup.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    stack
                        .startup
                        .iter()
                        .map(|t| format!("{} {}", t.component, secs(t.ready)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    if let Some(r) = &run.reference {
        let probes_ok = r.probes.values().all(|p| *p);
        let _ = writeln!(
            o,
            "reference: {} prompts, {}, probes {}, {}",
            r.prompts,
            reference_origin(r),
            if probes_ok {
                "ok"
            } else {
                "FAILED (engine not deterministic)"
            },
            secs(r.duration)
        );
    }

    if let Some(n) = &run.neighbours {
        neighbour_lines(&mut o, n);
    }
    for event in &run.clock_events {
        let _ = writeln!(o, "clock: {event}");
    }

    let _ = writeln!(o, "\ncases");
    for c in &run.cases {
        let dur = match c.outcome {
            Outcome::Ignored { .. } => String::new(),
            _ => secs(c.duration),
        };
        let _ = writeln!(o, "  {:<40} {:<8} {:>8}", c.name, c.outcome.words(), dur);
        match &c.outcome {
            Outcome::Failed { message } => {
                for line in message.lines().take(3) {
                    let _ = writeln!(o, "      {line}");
                }
                if let Some(first) = c.evidence.first() {
                    let _ = writeln!(o, "      evidence: {}", run.run_dir.join(first).display());
                }
            }
            Outcome::Ignored { reason, because } => {
                let _ = writeln!(o, "      {reason} ({})", because.words());
            }
            Outcome::Passed | Outcome::ExpectedFailure { .. } => {}
        }
        for attempt in &c.retried {
            let _ = writeln!(o, "      ran again: {}", attempt.why());
        }
        for check in super::expected::of(c) {
            let what = match (check.shows, check.expected) {
                (true, true) => "shows, as expected",
                (false, true) => "NO LONGER SHOWS: retire it",
                (true, false) => "shows where it is not declared",
                (false, false) => "does not show",
            };
            let _ = writeln!(o, "      KVCR {} ({what})", check.headline());
            let _ = writeln!(o, "        seen: {}", check.seen);
        }
        for note in c.stack_notes() {
            let _ = writeln!(o, "      {note}");
        }
        if !matches!(c.outcome, Outcome::Ignored { .. }) {
            if let Some(line) = super::not_checked::short_line(c) {
                let _ = writeln!(o, "      {line}");
            }
        }
    }
    let (p, f, i) = run.counts();
    let expected = match run.expected_failures() {
        0 => String::new(),
        1 => ", 1 expected failure (a known finding)".to_string(),
        x => format!(", {x} expected failures (known findings)"),
    };
    let _ = writeln!(
        o,
        "  {} cases: {p} passed, {f} failed, {i} ignored{expected}",
        run.cases.len()
    );

    if !perf.arms.is_empty() {
        let _ = writeln!(
            o,
            "\n{:<25}{:>3} {:>7} {:>7} {:>7} {:>7} {:>7} {:>10}  p50 95% CI",
            "perf arms (TTFT ms)", "n", "p50", "p90", "p99", "Δcold", "Δwarm", "TPOT p50"
        );
        if let Some(b) = &perf.baseline {
            for (name, p) in [
                ("baseline cold (no KVCR)", &b.cold_ttft_ms),
                ("baseline warm (no KVCR)", &b.warm_ttft_ms),
            ] {
                let _ = writeln!(o, "  {name:<23}{}", ptriple(p));
            }
        }
        for a in &perf.arms {
            let _ = writeln!(
                o,
                "  {:<23}{} {:>7} {:>7} {:>10}  {}",
                a.arm.as_str(),
                ptriple(&a.ttft_ms),
                signed(a.delta_vs_baseline_ms.cold),
                signed(a.delta_vs_baseline_ms.warm),
                ms(a.tpot_ms.p50),
                median_interval(a.ttft_p50_interval_ms.as_ref(), a.n)
            );
        }
    }
    if !perf.sweep.is_empty() {
        let _ = writeln!(
            o,
            "\n{:<13}{:>4} {:>6} {:>15} {:>8} {:>9} {:>7} {:>7} {:>9}",
            "sweep (level)",
            "n",
            "req/s",
            "req/s 95% CI",
            "tok/s",
            "TTFT p50",
            "p90",
            "p99",
            "TPOT p50"
        );
        for l in &perf.sweep {
            let _ = writeln!(
                o,
                "  {:>10} {:>4} {:>6.2} {:>15} {:>8.1} {:>9} {:>7} {:>7} {:>9}",
                level_name(l),
                l.requests,
                l.request_throughput_per_s,
                l.request_throughput_interval_per_s
                    .map(|i| format!("[{:.2}, {:.2}]", i.lo, i.hi))
                    .unwrap_or_else(|| "-".into()),
                l.output_throughput_tok_per_s,
                ms(l.ttft_ms.p50),
                ms(l.ttft_ms.p90),
                ms(l.ttft_ms.p99),
                ms(l.tpot_ms.p50)
            );
        }
        let open: Vec<_> = perf
            .sweep
            .iter()
            .filter_map(|l| Some((l, l.open_loop.as_ref()?)))
            .collect();
        if !open.is_empty() {
            let _ = writeln!(
                o,
                "{:<13}{:>10} {:>10} {:>8} {:>8} {:>14} {:>7}",
                "open loop", "sent/s", "delay p50", "p99", "max", "TTFT* p50", "p90"
            );
            for (l, ol) in open {
                let d = ol.schedule_delay_ms.as_ref();
                let _ = writeln!(
                    o,
                    "  {:>10} {:>10} {:>10} {:>8} {:>8} {:>14} {:>7}",
                    level_name(l),
                    d.map_or("-".into(), |d| format!("{:.2}", d.achieved_rate_per_s)),
                    ms(d.map(|d| d.p50_ms)),
                    ms(d.map(|d| d.p99_ms)),
                    ms(d.map(|d| d.max_ms)),
                    ms(ol.ttft_from_intended_ms.p50),
                    ms(ol.ttft_from_intended_ms.p90)
                );
            }
            let _ = writeln!(
                o,
                "  (delay: actual − intended send, ms; TTFT*: from the intended send)"
            );
        }
    }
    if let Some(r) = &perf.recovery {
        let _ = writeln!(
            o,
            "\nrecovery (TC-06): t1 {} ms, t2 {} ms, Guard promotion {} ms, {} attempts",
            ms(r.t1_ms),
            ms(r.t2_ms),
            ms(r.promotion_ms),
            r.attempts.len()
        );
        if let Some(why) = &r.no_t1_reason {
            let _ = writeln!(o, "  no t1: {why}");
        }
    }
    if let Some(w) = &perf.workload {
        workload_lines(&mut o, w);
    }
    o.lines().map(str::trim_end).collect::<Vec<_>>().join("\n") + "\n"
}

/// A trace replayed: hit rate per tier, goodput and TTFT p50, KVCR on
/// against off, and the sweep's highest sustained rate.
fn workload_lines(o: &mut String, w: &super::workload::WorkloadSummary) {
    use super::workload::ReplaySummary;
    let _ = writeln!(
        o,
        "\nworkload ({}): {}, {} requests; targets TTFT <= {} ms, TPOT <= {} ms",
        super::workload::WORKLOAD_CASE,
        w.trace.name,
        w.trace.requests,
        w.slo.ttft_ms,
        w.slo.tpot_ms
    );
    let _ = writeln!(o, "  {:<22}{:>12} {:>12}", "", "KVCR on", "KVCR off");
    let off = w.off.as_ref();
    let mut line = |name: &str, cell: &dyn Fn(&ReplaySummary) -> String| {
        let off = off.map_or_else(|| "not run".to_string(), cell);
        let _ = writeln!(o, "  {name:<22}{:>12} {off:>12}", cell(&w.on));
    };
    let percent = |x: f64| format!("{:.1} %", x * 100.0);
    // The total first, then each tier.
    let tiers = w.on.hit_rate.named();
    for (tier, _) in tiers[4..].iter().chain(&tiers[..4]).copied() {
        let name = match tier {
            "total" => "hit rate total".to_string(),
            tier => format!("  {tier}"),
        };
        line(&name, &|r| {
            let rate = r.hit_rate.named().into_iter().find(|(t, _)| *t == tier);
            percent(rate.map_or(0.0, |(_, v)| v))
        });
    }
    line("goodput req/s", &|r| format!("{:.2}", r.goodput_per_s));
    line("TTFT p50 ms", &|r| ms(r.ttft_ms.p50));
    line("ok / failed / wrong", &|r| {
        format!("{} / {} / {}", r.ok, r.failed, r.wrong_tokens)
    });
    line("counters", &|r| match r.reconciliation.len() {
        0 => "reconciled".to_string(),
        n => format!("{n} NOT RECONCILED"),
    });
    if !w.sweep.is_empty() {
        let _ = writeln!(
            o,
            "  max sustained rate: {} (sweep of {} rates)",
            w.max_sustained_rate_per_s
                .map_or_else(|| "none".to_string(), |r| format!("{r:.2} req/s")),
            w.sweep.len()
        );
    }
}

/// `machine: load … at start, … at end; …` and one line per other live run.
fn neighbour_lines(o: &mut String, n: &super::record::Neighbourhood) {
    let others = |s: &crate::proc::live_runs::Surroundings| match s.neighbours.len() {
        1 => "1 other live kvcr-e2e run".to_string(),
        n => format!("{n} other live kvcr-e2e runs"),
    };
    let end = match &n.at_end {
        Some(end) => format!(", {} at end ({})", end.load_words(), others(end)),
        None => String::new(),
    };
    let waited = if n.exclusive {
        format!("; exclusive, waited {:.1} s", n.waited_s)
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "machine: {} at start ({}){end}{waited}",
        n.at_start.load_words(),
        others(&n.at_start)
    );
    let lists = [("start", Some(&n.at_start)), ("end", n.at_end.as_ref())];
    for (when, s) in lists {
        for b in s.into_iter().flat_map(|s| &s.neighbours) {
            let _ = writeln!(
                o,
                "  beside at {when}: {} ({})",
                b.run.describe(),
                b.relation.words()
            );
        }
    }
}

/// A median's interval as `[lo, hi]`, or why there is none.
fn median_interval(i: Option<&crate::stats::QuantileInterval>, n: usize) -> String {
    match i {
        Some(i) => format!("[{:.1}, {:.1}]", i.lo, i.hi),
        None if n < crate::stats::min_sample_for(0.5, super::INTERVAL_CONFIDENCE) => {
            format!(
                "- (n < {})",
                crate::stats::min_sample_for(0.5, super::INTERVAL_CONFIDENCE)
            )
        }
        None => "-".into(),
    }
}

/// A sweep level as the tables name it: its concurrency, or `N/s` for an
/// open-loop level.
fn level_name(l: &super::SweepLevel) -> String {
    match &l.open_loop {
        Some(o) => format!("{}/s", o.rate_per_s),
        None => l.concurrency.to_string(),
    }
}

fn ptriple(p: &Percentiles) -> String {
    format!(
        "{:>3} {:>7} {:>7} {:>7}",
        p.n,
        ms(p.p50),
        ms(p.p90),
        ms(p.p99)
    )
}

/// Where the reference came from, in words: computed in this run, or from
/// the cache with its age and origin (baselines from another time or
/// machine state compare poorly; `--recompute-reference` redoes them).
pub fn reference_origin(r: &super::record::ReferenceSummary) -> String {
    if !r.from_cache {
        return "computed in this run".into();
    }
    let age = match r.age_s {
        Some(s) if s >= 86_400 => format!("{:.1} days old", s as f64 / 86_400.0),
        Some(s) if s >= 3_600 => format!("{:.1} h old", s as f64 / 3_600.0),
        Some(s) => format!("{s} s old"),
        None => "age unknown".into(),
    };
    match r.computed_by.as_str() {
        "" => format!("from cache, {age}"),
        by => format!("from cache, {age}, computed on {by}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::sample;

    #[test]
    fn summary_snapshot() {
        insta::assert_snapshot!(render_summary(&sample::run_record(), &sample::perf()));
    }

    #[test]
    fn a_replay_that_did_not_reconcile_says_so_and_a_missing_off_says_not_run() {
        let mut perf = sample::perf();
        let w = perf.workload.as_mut().unwrap();
        w.on.reconciliation = vec!["dram: counters and answers differ".into()];
        w.on.failed = 3;
        w.off = None;
        w.sweep.clear();
        let text = render_summary(&sample::run_record(), &perf);
        let counters = text.lines().find(|l| l.starts_with("  counters")).unwrap();
        assert!(
            counters.contains(" 1 NOT RECONCILED ") && counters.ends_with(" not run"),
            "{counters}"
        );
        assert!(text.contains("400 / 3 / 0"), "{text}");
        assert!(!text.contains("max sustained"), "no sweep, no line");
        perf.workload = None;
        let text = render_summary(&sample::run_record(), &perf);
        assert!(!text.contains("workload"), "{text}");
    }

    #[test]
    fn summary_without_perf() {
        let s = render_summary(&sample::run_record(), &PerfSummary::default());
        assert!(
            !s.contains("perf arms")
                && !s.contains("sweep (conc)")
                && !s.contains("recovery (TC-06)")
        );
    }

    #[test]
    fn a_case_shows_the_kvcr_findings_it_recorded() {
        let mut run = sample::run_record();
        let passed = run
            .cases
            .iter_mut()
            .find(|c| c.outcome == Outcome::Passed)
            .unwrap();
        passed.measurements.insert(
            crate::evidence::NOT_CHECKED.into(),
            serde_json::json!([crate::evidence::NotChecked::new(
                "the recovery ledger",
                "no per-block events"
            )]),
        );
        passed.measure(
            crate::evidence::expected::KVCR_FINDINGS,
            vec![crate::evidence::expected::FindingCheck {
                finding: 8,
                title: "served first".into(),
                shows: true,
                expected: false,
                seen: "stages serving".into(),
            }],
        );
        let s = render_summary(&run, &PerfSummary::default());
        assert!(
            s.contains("      not checked: the recovery ledger (no per-block events)"),
            "{s}"
        );
        assert!(
            s.contains(
                "      KVCR finding 8: served first (shows where it is not declared)\n        seen: stages serving"
            ),
            "{s}"
        );
    }

    /// A worker found latched before a case is named in the record of the
    /// case that ran before it and in its own.
    #[test]
    fn a_latch_between_cases_is_named_in_both_cases() {
        let mut run = sample::run_record();
        let line = "worker B (pid 9) has its KVCR source writes latched off until it restarts: `KVCR source progress stalled`";
        run.cases[0].measure(
            crate::evidence::LEFT_BROKEN,
            vec![format!(
                "{line} (found before TC-02::local_dram_flow, which replaced it)"
            )],
        );
        run.cases[1].measure(crate::evidence::HEALED_BEFORE, vec![line]);
        let s = render_summary(&run, &PerfSummary::default());
        assert!(
            s.contains(&format!(
                "      left the stack broken: {line} (found before TC-02::local_dram_flow, which replaced it)"
            )),
            "{s}"
        );
        assert!(
            s.contains(&format!("      stack healed before the case: {line}")),
            "{s}"
        );
    }

    /// A run with an expected failure and an unexpected pass: what a KVCR
    /// developer reads at the end of a run.
    #[test]
    fn summary_of_expected_failures_snapshot() {
        insta::assert_snapshot!(render_summary(
            &crate::evidence::expected::sample_run(),
            &PerfSummary::default()
        ));
    }

    #[test]
    fn the_reference_origin_says_age_and_host() {
        let mut r = crate::evidence::sample::run_record().reference.unwrap();
        assert_eq!(reference_origin(&r), "computed in this run");
        r.from_cache = true;
        r.age_s = Some(2 * 86_400);
        assert_eq!(
            reference_origin(&r),
            "from cache, 2.0 days old, computed on ci-host (target/phase1/runs/phase1/sample)"
        );
        r.computed_by.clear();
        r.age_s = None;
        assert_eq!(reference_origin(&r), "from cache, age unknown");
    }
}
