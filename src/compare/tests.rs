//! Tests of the comparison as a whole: the writers over a fixed comparison
//! (snapshots), and the verdict rule's error rates on simulated rounds.

use super::*;
use crate::stats::{Bootstrap, SplitMix64, Statistic};

fn spec(id: &str, label: &str, unit: &str, statistic: Statistic, better: Better) -> FigureSpec {
    FigureSpec {
        id: id.into(),
        label: label.into(),
        unit: unit.into(),
        statistic,
        better,
        judged: Judged::Interval,
        family: Family::Other,
    }
}

/// Twelve rounds (6 pairs), seven figures: one of each verdict (a tight
/// and a too-wide no change), and a count of wrong-token requests.
fn sample_comparison() -> Comparison {
    let local = spec(
        "TC-05::local_hit::ttft_p50",
        "local_hit TTFT p50",
        "ms",
        Statistic::P50,
        Better::Lower,
    );
    let wrong = FigureSpec {
        judged: Judged::AnyIncrease,
        ..spec(
            "TC-05::dram_hit::wrong_tokens",
            "dram_hit wrong tokens",
            "requests",
            Statistic::Mean,
            Better::Lower,
        )
    };
    let cold = spec(
        "TC-05::cold::ttft_p50",
        "cold TTFT p50",
        "ms",
        Statistic::P50,
        Better::Lower,
    );
    let dram = spec(
        "TC-05::dram_hit::ttft_p50",
        "dram_hit TTFT p50",
        "ms",
        Statistic::P50,
        Better::Lower,
    );
    let tput = spec(
        "TC-05::concurrency_sweep::c4::throughput",
        "sweep c=4 throughput",
        "req/s",
        Statistic::Mean,
        Better::Higher,
    );
    let t1 = spec(
        "TC-06::guard_recovery_timing::t1",
        "TC-06 t1 (Guard serves)",
        "ms",
        Statistic::P50,
        Better::Lower,
    );
    let t2 = spec(
        "TC-06::guard_recovery_timing::t2",
        "TC-06 t2 (first hit)",
        "ms",
        Statistic::P50,
        Better::Lower,
    );
    let plan = RoundPlan::abba(12).unwrap();
    let mut c = Collector::default();
    for round in plan.rounds() {
        let head = round.build == Build::Head;
        let k = f64::from(round.index);
        let ramp = |from: f64, step: f64| -> Vec<f64> {
            (0..6).map(|i| from + step * f64::from(i) + k).collect()
        };
        // Cold: no change overall, but each pair's head 6 ms off its
        // base, up in one pair and down in the next: too wide.
        let swing = match (head, round.pair() % 2) {
            (false, _) => 0.0,
            (true, 0) => 6.0,
            (true, _) => -6.0,
        };
        c.add_samples(*round, &cold, &ramp(60.0 + swing, 3.0));
        c.add_samples(*round, &local, &[40.0 + k / 20.0, 41.0, 40.5]);
        c.add_samples(*round, &dram, &ramp(if head { 90.0 } else { 50.0 }, 2.0));
        c.add_samples(*round, &tput, &[if head { 31.0 } else { 24.0 } + k / 4.0]);
        if !head {
            c.add_samples(*round, &t1, &[800.0 + k]);
        }
        // Only the first two pairs recorded t2: a tight but too-short run.
        if round.pair() < 2 {
            c.add_samples(*round, &t2, &[if head { 440.0 } else { 499.0 } + k / 10.0]);
        }
        c.add_samples(*round, &wrong, &[if round.index == 5 { 1.0 } else { 0.0 }]);
    }
    c.compare(&Rule::default(), &Bootstrap::default())
}

#[test]
fn sample_comparison_has_one_figure_of_each_verdict() {
    let c = sample_comparison();
    let verdicts: Vec<Verdict> = c.figures.iter().map(|f| f.verdict).collect();
    assert_eq!(
        verdicts,
        vec![
            Verdict::NoChangeTooWide,
            Verdict::NoChange,
            Verdict::Regression,
            Verdict::Improvement,
            Verdict::Missing,
            Verdict::Inconclusive,
            Verdict::Regression,
        ]
    );
    assert_eq!(c.gate(), Gate::Regression);
}

#[test]
fn summary_snapshot() {
    insta::assert_snapshot!(render_summary(&sample_comparison()));
}

#[test]
fn junit_snapshot() {
    insta::assert_snapshot!(junit_xml(&sample_comparison()).unwrap());
}

#[test]
fn compare_json_round_trips_and_names_the_rule() {
    let c = sample_comparison();
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["rule"]["min_relative_change"], 0.05);
    assert_eq!(json["rule"]["method"], "paired");
    assert_eq!(json["bootstrap"]["resamples"], 10_000);
    assert_eq!(json["rule"]["familywise"], true);
    let dram = &json["figures"][2];
    assert_eq!(dram["id"], "TC-05::dram_hit::ttft_p50");
    assert_eq!(dram["verdict"], "regression");
    assert_eq!(dram["base"][0]["round"], 0);
    assert!(dram["difference"]["interval"]["lo"].as_f64().unwrap() > 0.0);
    assert_eq!(
        json["figures"][0]["verdict"],
        "no change detected, interval too wide"
    );
    assert!(json["figures"][0]["cannot_exclude"].as_f64().unwrap() > 0.1);
    assert_eq!(json["figures"][1]["verdict"], "no change detected");
    assert!(json["figures"][1]["cannot_exclude"].as_f64().unwrap() <= 0.1);
    assert_eq!(json["figures"][6]["judged"], "any_increase");
    assert!(json["figures"][6].get("cannot_exclude").is_none());
    // Every judged figure carries its minimum detectable effect; a count
    // has none.
    let mde = json["figures"][0]["mde"].as_f64().unwrap();
    assert!(mde > json["figures"][1]["mde"].as_f64().unwrap(), "{mde}");
    assert!(json["figures"][6].get("mde").is_none());
    assert!(json["figures"][1].get("judged").is_none());
    let back: Comparison = serde_json::from_value(json).unwrap();
    assert_eq!(back, c);
}

#[test]
fn a_compare_json_without_the_scope_reads_as_per_figure() {
    let mut json = serde_json::to_value(sample_comparison()).unwrap();
    json["rule"].as_object_mut().unwrap().remove("familywise");
    json.as_object_mut().unwrap().remove("figure_confidence");
    let old: Comparison = serde_json::from_value(json).unwrap();
    assert!(!old.rule.familywise);
    assert_eq!(old.figure_confidence, None);
    assert_eq!(old.describe_rule(), old.rule.describe());
}

#[test]
fn the_page_draws_every_compared_figure() {
    let c = sample_comparison();
    let html = render_page(&c).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        html.matches("<svg").count(),
        6,
        "the missing figure has no chart"
    );
    assert!(html.contains("id=\"TC-05::dram_hit::ttft_p50\""));
    assert!(html.contains("no head round has samples"));
    assert!(html.contains("pill inconclusive\">inconclusive"));
    assert!(html.contains("fewer than the 6 a verdict needs"));
    assert!(html.contains("pill wide\">no change detected, interval too wide"));
    assert!(html.contains("FAIL (exit 1)"));
    assert!(!html.contains("<script"), "self-contained, no scripts");
}

#[test]
fn outputs_are_written_and_runs_are_paired() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_outputs(&sample_comparison(), dir.path()).unwrap();
    for path in [&written.json, &written.junit, &written.page] {
        assert!(path.is_file(), "{}", path.display());
    }
    let (base, head) = abba_copies(dir.path(), 8);
    let same = compare_runs(&base, &head, &Rule::default(), &Bootstrap::default()).unwrap();
    assert_eq!(same.letters(), "ABBAABBAABBAABBA");
    assert!(same.figures.len() >= 10, "{}", same.figures.len());
    assert!(
        same.figures
            .iter()
            .all(|f| matches!(f.verdict, Verdict::NoChange | Verdict::NoChangeTooWide)),
        "a run against itself: {}",
        render_summary(&same)
    );
    assert_eq!(same.gate(), Gate::Pass);
    assert!(same
        .figures
        .iter()
        .any(|f| f.spec.id == "TC-05::dram_hit::wrong_tokens"));
    let run = base[0].clone();
    let err = compare_runs(
        std::slice::from_ref(&run),
        &[],
        &Rule::default(),
        &Bootstrap::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("as many head runs"), "{err}");
    let err = compare_runs(
        &[dir.path().join("nowhere")],
        &[run],
        &Rule::default(),
        &Bootstrap::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot read"), "{err}");
}

/// The testdata run copied once per round of a `pairs`-pair ABBA plan,
/// each copy started a minute after the one before in plan order; the
/// base copies and the head copies, in pair order.
fn abba_copies(
    dir: &std::path::Path,
    pairs: u32,
) -> (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    let text = include_str!("testdata/results-tc05-tc06.json");
    let (mut base, mut head) = (Vec::new(), Vec::new());
    for round in RoundPlan::abba(2 * pairs).unwrap().rounds() {
        let run = dir.join(format!("{:02}-{}", round.index, round.build.as_str()));
        std::fs::create_dir_all(&run).unwrap();
        let started = format!(
            "\"started_at\": \"2026-12-01T{:02}:{:02}:16.739922711Z\"",
            13 + round.index / 60,
            round.index % 60
        );
        let copy = text.replacen(
            "\"started_at\": \"2026-12-01T12:47:16.739922711Z\"",
            &started,
            1,
        );
        assert_ne!(copy, text, "the run's started_at was replaced");
        std::fs::write(run.join("results.json"), copy).unwrap();
        match round.build {
            Build::Base => base.push(run),
            Build::Head => head.push(run),
        }
    }
    (base, head)
}

#[test]
fn compare_results_with_too_few_pairs_has_no_verdict_and_names_the_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (base, head) = abba_copies(dir.path(), 2);
    let c = compare_runs(&base, &head, &Rule::default(), &Bootstrap::default()).unwrap();
    assert_eq!(c.gate(), Gate::NoVerdict);
    assert_eq!(c.gate().exit_code(), 3);
    let without = c.without_verdict();
    assert_eq!(without.len(), c.figures.len(), "{without:?}");
    assert!(without
        .iter()
        .any(|w| w.starts_with("TC-05::cold::ttft_p50: only 2 round pair(s)")));
    let summary = render_summary(&c);
    assert!(
        summary.contains("inconclusive TC-06::guard_recovery_timing::t1: "),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "NO VERDICT (exit 3); {} thing(s) without a verdict, listed above",
            c.figures.len()
        )),
        "{summary}"
    );
    let xml = junit_xml(&c).unwrap();
    assert!(
        !xml.contains("<skipped"),
        "inconclusive is a failure, not a skip"
    );
    assert_eq!(
        xml.matches("<failure message=\"inconclusive").count(),
        c.figures.len()
    );
}

#[test]
fn compare_results_refuses_rounds_that_do_not_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let (base, head) = abba_copies(dir.path(), 6);
    let rule = Rule::default();
    let boot = Bootstrap::default();
    assert!(compare_runs(&base, &head, &rule, &boot).is_ok());
    // All head runs first, as if run as two blocks: given as pairs, head
    // 0 must not come before base 0.
    let err = compare_runs(&head, &base, &rule, &boot).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("the runs do not interleave: round 1 (head, "),
        "{text}"
    );
    assert!(text.contains("not after round 0 (base, "), "{text}");
    assert!(
        text.contains("01-head/results.json") || text.contains("00-base/results.json"),
        "{text}"
    );
    // Pairs given in the wrong order.
    let (mut b2, h2) = (base.clone(), head.clone());
    b2.swap(1, 2);
    let err = compare_runs(&b2, &h2, &rule, &boot)
        .unwrap_err()
        .to_string();
    assert!(err.contains("round 3 (base, "), "{err}");
    // The same run as base and head has no place in time of its own.
    let err = compare_runs(&base[..1], &base[..1], &rule, &boot)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not after round 0"), "{err}");
    // A run without a start time cannot be placed.
    let text = std::fs::read_to_string(base[0].join("results.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut v = v;
    v["run"].as_object_mut().unwrap().remove("started_at");
    std::fs::write(base[0].join("results.json"), v.to_string()).unwrap();
    let err = compare_runs(&base, &head, &rule, &boot)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("round 0 (base, ") && err.contains("no readable run.started_at"),
        "{err}"
    );
}

#[test]
fn a_failed_trial_in_a_round_gives_no_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let (base, head) = abba_copies(dir.path(), 8);
    let file = head[3].join("results.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let cases = v["run"]["cases"].as_array_mut().unwrap();
    let dram = cases
        .iter_mut()
        .find(|c| c["name"] == "TC-05::dram_hit")
        .unwrap();
    dram["outcome"] = "failed".into();
    dram["message"] = "stream of f003v1 failed: timed out after 30 s\nevidence: x".into();
    std::fs::write(&file, v.to_string()).unwrap();
    let c = compare_runs(&base, &head, &Rule::default(), &Bootstrap::default()).unwrap();
    let round = c.rounds.iter().find(|r| r.problem.is_some()).unwrap();
    assert_eq!((round.round.index, round.round.build), (6, Build::Head));
    assert_eq!(
        round.problem.as_deref(),
        Some("1 trial(s) failed: TC-05::dram_hit: stream of f003v1 failed: timed out after 30 s")
    );
    // The failed stream is a failed request of that arm: a regression.
    let failed = c
        .figures
        .iter()
        .find(|f| f.spec.id == "TC-05::dram_hit::failed_requests")
        .unwrap();
    assert_eq!(failed.verdict, Verdict::Regression, "{}", failed.reason);
    assert_eq!(c.gate(), Gate::Regression);
    let xml = junit_xml(&c).unwrap();
    assert!(xml.contains("testcase name=\"round::06-head\""), "{xml}");
}

/// One round of the workload lane: the testdata run with the sample
/// trace replay, its DRAM hit rate times `dram` (a KVCR policy bug that
/// loses host hits: below 1), and a jitter of up to ±2 % from round to
/// round on the device and DRAM hit rates, goodput and TTFT.
fn workload_round(index: u32, dram: f64) -> RunResults {
    let mut run = RunResults::parse(include_str!("testdata/results-tc05-tc06.json")).unwrap();
    let mut w = crate::evidence::sample::workload();
    let jitter = 1.0 + 0.01 * (f64::from(index * 7 % 5) - 2.0);
    let on = &mut w.on;
    on.hit_rate.dram *= dram * jitter;
    on.hit_rate.device *= jitter;
    let r = on.hit_rate;
    on.hit_rate.total = r.device + r.dram + r.peer + r.disk;
    on.goodput_per_s *= jitter;
    for t in &mut on.ttft_samples_ms {
        *t *= jitter;
    }
    run.perf.workload = Some(w);
    run
}

/// Few resamples: a round has 400 TTFT samples, and a debug build
/// resamples slowly.
const QUICK_BOOTSTRAP: Bootstrap = Bootstrap {
    resamples: 400,
    seed: 7,
};

/// Sixteen workload rounds, ABBA, head's DRAM hit rate times `dram`.
fn workload_comparison(dram: f64) -> Comparison {
    let mut c = Collector::default();
    for round in RoundPlan::abba(16).unwrap().rounds() {
        let scale = match round.build {
            Build::Base => 1.0,
            Build::Head => dram,
        };
        c.add_round(*round, &workload_round(round.index, scale), "round");
    }
    c.compare(&Rule::default(), &QUICK_BOOTSTRAP)
}

fn verdict_of(c: &Comparison, id: &str) -> Verdict {
    let f = c.figures.iter().find(|f| f.spec.id == id).unwrap();
    f.verdict
}

#[test]
fn a_lower_hit_rate_on_a_trace_is_a_regression_and_a_against_a_is_quiet() {
    let same = workload_comparison(1.0);
    assert_eq!(same.gate(), Gate::Pass, "{}", render_summary(&same));
    assert!(
        same.figures.iter().any(|f| f.spec.id == "WL-01::goodput"),
        "{}",
        render_summary(&same)
    );
    // The disk tier is 0 everywhere: no change, said as such.
    let disk = same
        .figures
        .iter()
        .find(|f| f.spec.id == "WL-01::hit_rate::disk")
        .unwrap();
    assert_eq!(disk.verdict, Verdict::NoChange, "{}", disk.reason);
    assert!(disk.reason.contains("in every round of both builds"));

    let lost = workload_comparison(0.6);
    for id in ["WL-01::hit_rate::dram", "WL-01::hit_rate::total"] {
        assert_eq!(verdict_of(&lost, id), Verdict::Regression, "{id}");
    }
    assert_eq!(
        verdict_of(&lost, "WL-01::hit_rate::disk"),
        Verdict::NoChange
    );
    assert_eq!(lost.gate(), Gate::Regression);
    let summary = render_summary(&lost);
    assert!(summary.contains("WL-01::hit_rate::dram"), "{summary}");
    // 3,200 TTFTs a build: the page draws a share of them.
    let page = render_page(&lost).unwrap();
    assert!(page.contains("base (n=3200, every 4th drawn)"));
    assert!(page.matches("<circle").count() < 20_000);

    let gained = workload_comparison(1.4);
    assert_eq!(
        verdict_of(&gained, "WL-01::hit_rate::total"),
        Verdict::Improvement
    );
    assert_eq!(gained.gate(), Gate::Pass);
}

#[test]
fn a_failed_replay_request_in_head_is_a_regression() {
    let mut c = Collector::default();
    for round in RoundPlan::abba(16).unwrap().rounds() {
        let mut run = workload_round(round.index, 1.0);
        if round.index == 5 {
            run.perf.workload.as_mut().unwrap().on.failed = 1;
        }
        c.add_round(*round, &run, "round");
    }
    let c = c.compare(&Rule::default(), &QUICK_BOOTSTRAP);
    assert_eq!(
        verdict_of(&c, "WL-01::failed_requests"),
        Verdict::Regression
    );
    assert_eq!(verdict_of(&c, "WL-01::wrong_tokens"), Verdict::NoChange);
}

// ---- error rates of the default rule on simulated rounds ----

/// A simulated TC-05 arm: per-request TTFT log-normal around `median_ms`
/// with log-sd `sigma`, a share `outliers` of requests slowed 1.2–3× (the
/// slow tail a shared machine gives), each round slowed by its own machine
/// factor (log-sd `round_sigma`) and by a drift of `drift` per round. Head
/// is multiplied by `1 + shift`.
#[derive(Clone, Copy)]
struct Arm {
    median_ms: f64,
    sigma: f64,
    outliers: f64,
    round_sigma: f64,
    drift: f64,
}

/// Shaped like TC-05's arms measured with 20 requests each on a loaded
/// 2-core machine (load average 10): the bulk within ±7 % (log-sd 0.05–0.08),
/// 1–3 of 20 requests 1.2–3.5× slower; rounds 5 % apart, 1 % drift per round.
const NOISY: Arm = Arm {
    median_ms: 50.0,
    sigma: 0.08,
    outliers: 0.10,
    round_sigma: 0.05,
    drift: 0.01,
};

/// A wider arm, like remote_hit in the same run (3 of 20 requests slow,
/// a wider bulk).
const WIDE: Arm = Arm {
    sigma: 0.25,
    outliers: 0.15,
    ..NOISY
};

impl Arm {
    fn draw(&self, rng: &mut SplitMix64) -> f64 {
        let slow = if rng.unit_open() < self.outliers {
            1.2 + 1.8 * rng.unit_open()
        } else {
            1.0
        };
        self.median_ms * slow * (self.sigma * rng.normal()).exp()
    }
}

/// Shares of verdicts over simulated comparisons.
struct Rates {
    regression: f64,
    improvement: f64,
}

/// How many comparisons, with how many resamples each.
#[derive(Clone, Copy)]
struct Trials {
    trials: u32,
    resamples: u32,
}

/// Quick enough for a debug `cargo test --lib`.
const QUICK: Trials = Trials {
    trials: 100,
    resamples: 500,
};

/// Comparisons of `stat` with `n` samples per round (TC-05's requests per
/// arm in one run) over `rounds` rounds, head slowed by `shift`.
fn rates(arm: Arm, n: usize, rounds: u32, shift: f64, stat: Statistic, t: Trials) -> Rates {
    let plan = RoundPlan::abba(rounds).unwrap();
    let figure = spec("sim", "sim", "ms", stat, Better::Lower);
    let mut rng = SplitMix64::new(0x5eed);
    let (mut regression, mut improvement) = (0, 0);
    for trial in 0..t.trials {
        let mut c = Collector::default();
        for round in plan.rounds() {
            let machine =
                (arm.round_sigma * rng.normal()).exp() * (1.0 + arm.drift * f64::from(round.index));
            let build = if round.build == Build::Head {
                1.0 + shift
            } else {
                1.0
            };
            let values: Vec<f64> = (0..n)
                .map(|_| machine * build * arm.draw(&mut rng))
                .collect();
            c.add_samples(*round, &figure, &values);
        }
        let boot = Bootstrap {
            resamples: t.resamples,
            seed: u64::from(trial),
        };
        match c.compare(&Rule::default(), &boot).figures[0].verdict {
            Verdict::Regression => regression += 1,
            Verdict::Improvement => improvement += 1,
            _ => {}
        }
    }
    let share = |k: u32| f64::from(k) / f64::from(t.trials);
    Rates {
        regression: share(regression),
        improvement: share(improvement),
    }
}

#[test]
fn same_build_is_rarely_called_a_regression() {
    // A against A, 20 requests per round, 4 rounds.
    for stat in [Statistic::P50, Statistic::P90] {
        let r = rates(NOISY, 20, 4, 0.0, stat, QUICK);
        assert!(
            r.regression <= 0.05 && r.improvement <= 0.05,
            "{}: false-positive rates {} (regression), {} (improvement)",
            stat.as_str(),
            r.regression,
            r.improvement
        );
    }
}

#[test]
fn a_twenty_percent_slowdown_is_detected() {
    // 20 requests per round, 12 rounds (6 pairs, the minimum).
    let r = rates(NOISY, 20, 12, 0.20, Statistic::P50, QUICK);
    assert!(r.regression >= 0.8, "detection rate {}", r.regression);
    assert_eq!(r.improvement, 0.0, "a slowdown called an improvement");
}

/// The table for docs/benchmarks.md: `cargo test --release --lib
/// compare::tests::error_rate_table -- --ignored --nocapture`.
#[test]
#[ignore = "prints the error-rate table (minutes; run it in release)"]
fn error_rate_table() {
    let t = Trials {
        trials: 400,
        resamples: 2000,
    };
    println!(
        "{} trials of {} resamples per cell; regression rate at shift 0 / +10 % / +20 % / +40 %",
        t.trials, t.resamples
    );
    for (name, arm, stats) in [
        ("noisy", NOISY, &[Statistic::P50, Statistic::P90][..]),
        ("wide", WIDE, &[Statistic::P50][..]),
    ] {
        println!(
            "{name} arm: TTFT log-sd {}, {} % outliers 1.2-3x, round log-sd {}, drift {}/round",
            arm.sigma,
            arm.outliers * 100.0,
            arm.round_sigma,
            arm.drift
        );
        for &stat in stats {
            for rounds in [12, 16, 20] {
                for n in [10, 20, 40] {
                    let r: Vec<String> = [0.0, 0.10, 0.20, 0.40]
                        .iter()
                        .map(|&s| {
                            format!(
                                "{:5.1} %",
                                rates(arm, n, rounds, s, stat, t).regression * 100.0
                            )
                        })
                        .collect();
                    println!(
                        "  {} rounds={rounds} n/round={n:3}  {}",
                        stat.as_str(),
                        r.join("  ")
                    );
                }
            }
        }
    }
}

/// A phase2_g3 round of TC-12 (the read-backs of `testdata/results-tc12.json`),
/// its timings moved by the round's own drift (±2 %), each read from disk
/// (`g3_deliver`) `g3_scale` times as long.
fn tc12_round(round: &Round, g3_scale: f64) -> RunResults {
    let mut run = RunResults::parse(include_str!("testdata/results-tc12.json")).unwrap();
    let drift = 1.0 + 0.01 * f64::from(round.index * 7 % 5) - 0.02;
    for r in &mut run.requests {
        r.ttft_ms = r.ttft_ms.map(|t| t * drift);
        for op in &mut r.kvcr_ops {
            op.seconds *= drift;
            if op.scope == "g3_deliver" {
                op.seconds *= g3_scale;
            }
        }
    }
    run
}

fn tc12_comparison(head: impl Fn(&Round) -> RunResults) -> Comparison {
    let mut c = Collector::default();
    for round in RoundPlan::abba(12).unwrap().rounds() {
        let run = match round.build {
            Build::Base => tc12_round(round, 1.0),
            Build::Head => head(round),
        };
        c.add_round(*round, &run, format!("round-{}", round.index));
    }
    c.compare(&Rule::default(), &QUICK_BOOTSTRAP)
}

#[test]
fn a_slower_read_from_disk_is_a_regression_of_its_kvcr_figure() {
    let c = tc12_comparison(|round| tc12_round(round, 1.10));
    assert_eq!(
        verdict_of(&c, "TC-12::disk_tier::kvcr::g3_deliver"),
        Verdict::Regression
    );
    assert_ne!(
        verdict_of(&c, "TC-12::disk_tier::g3_hit"),
        Verdict::Regression
    );
    assert_eq!(c.gate(), Gate::Regression);
    // The same build against itself: no verdict against it.
    let same = tc12_comparison(|round| tc12_round(round, 1.0));
    assert!(
        same.figures.iter().all(|f| f.verdict == Verdict::NoChange),
        "{:?}",
        same.figures.iter().map(|f| f.verdict).collect::<Vec<_>>()
    );
    assert_eq!(same.gate(), Gate::Pass);
}

#[test]
fn a_build_without_g3_read_durations_is_missing_them() {
    let c = tc12_comparison(|round| {
        let mut run = tc12_round(round, 1.0);
        run.requests.iter_mut().for_each(|r| r.kvcr_ops.clear());
        run
    });
    let read = c
        .figures
        .iter()
        .find(|f| f.spec.id == "TC-12::disk_tier::kvcr::g3_deliver")
        .unwrap();
    assert_eq!(read.verdict, Verdict::Missing);
    assert!(read.head.is_empty() && read.difference.is_none());
    assert_eq!(read.reason, "no head round has samples of this figure");
    assert_eq!(
        verdict_of(&c, "TC-12::disk_tier::g3_hit"),
        Verdict::NoChange
    );
    assert_eq!(c.gate(), Gate::Regression, "missing fails the comparison");
}
