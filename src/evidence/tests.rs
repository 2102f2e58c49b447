//! Tests of the evidence writers over sample records.

use std::time::Duration;

use super::sample;
use super::*;

#[test]
fn percentiles_nearest_rank() {
    let p = percentiles(&[15.0, 20.0, 35.0, 40.0, 50.0]);
    assert_eq!(p.n, 5);
    assert_eq!(p.mean, Some(32.0));
    assert_eq!(p.p50, Some(35.0)); // rank ceil(2.5) = 3
    assert_eq!(p.p90, Some(50.0)); // rank ceil(4.5) = 5
    assert_eq!(p.p99, Some(50.0));
    let hundred: Vec<f64> = (1..=100).rev().map(f64::from).collect();
    let p = percentiles(&hundred);
    assert_eq!((p.p50, p.p90, p.p99), (Some(50.0), Some(90.0), Some(99.0)));
    let one = percentiles(&[7.0]);
    assert_eq!(
        (one.p50, one.p99, one.mean),
        (Some(7.0), Some(7.0), Some(7.0))
    );
}

fn pair(id: &str, client: Option<u64>, engine: Option<u64>) -> FirstTokenPair {
    FirstTokenPair {
        request_id: id.into(),
        client_ns: client,
        engine_ns: engine,
    }
}

#[test]
fn ttft_offsets_are_client_minus_engine_in_ms() {
    // 1.5 ms, 0.25 ms, 3 ms and a client stamp before the engine's (-0.5 ms:
    // kept signed, never clamped).
    let pairs = [
        pair("a", Some(10_001_500_000), Some(10_000_000_000)),
        pair("b", Some(20_000_250_000), Some(20_000_000_000)),
        pair("c", Some(30_003_000_000), Some(30_000_000_000)),
        pair("d", Some(40_000_000_000), Some(40_000_500_000)),
    ];
    let (offsets, stats) = ttft_offsets(&pairs).unwrap();
    assert_eq!(offsets, vec![1.5, 0.25, 3.0, -0.5]);
    assert_eq!(stats.n, 4);
    assert_eq!(stats.min, -0.5);
    assert_eq!(stats.p50, 0.25); // nearest rank ceil(2) = 2 of [-0.5, 0.25, 1.5, 3]
    assert_eq!(stats.p99, 3.0);
    assert_eq!(stats.max, 3.0);
}

#[test]
fn a_missing_stamp_is_an_error_naming_the_request_not_a_zero() {
    let err = ttft_offsets(&[
        pair("a", Some(2_000_000), Some(1_000_000)),
        pair("b", Some(2_000_000), None),
    ])
    .unwrap_err();
    assert!(err.contains("request b"), "{err}");
    assert!(err.contains("no first-token stamp"), "{err}");
    let err = ttft_offsets(&[pair("c", None, Some(1))]).unwrap_err();
    assert!(err.contains("request c") && err.contains("client"), "{err}");
    assert!(ttft_offsets(&[]).is_err());
}

#[test]
fn percentiles_of_nothing_and_non_finite() {
    let p = percentiles(&[]);
    assert_eq!(p, Percentiles::default());
    assert_eq!(p.p50, None);
    let p = percentiles(&[f64::NAN, 3.0, f64::INFINITY]);
    assert_eq!((p.n, p.p50), (1, Some(3.0)));
    assert_eq!(
        serde_json::to_value(percentiles(&[])).unwrap()["p50"],
        serde_json::Value::Null
    );
}

proptest::proptest! {
    #[test]
    fn percentiles_are_ordered_observed_values(v in proptest::collection::vec(-1e6f64..1e6, 1..200)) {
        let p = percentiles(&v);
        let (p50, p90, p99) = (p.p50.unwrap(), p.p90.unwrap(), p.p99.unwrap());
        proptest::prop_assert!(p50 <= p90 && p90 <= p99);
        proptest::prop_assert!(v.contains(&p50) && v.contains(&p99));
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = p.mean.unwrap();
        proptest::prop_assert!(mean >= min - 1e-6 && mean <= max + 1e-6);
    }
}

#[test]
fn arm_summary_and_deltas() {
    let perf = sample::perf();
    let cold = &perf.arms[0];
    assert_eq!(cold.arm, Arm::Cold);
    assert_eq!(cold.n, 3);
    assert_eq!(cold.ttft_ms.p50, Some(24.7));
    let d = cold.delta_vs_baseline_ms;
    assert!(
        (d.cold.unwrap() - 1.7).abs() < 1e-9 && (d.warm.unwrap() - 21.5).abs() < 1e-9,
        "{d:?}"
    );
    let none = ArmSummary::from_requests(Arm::RemoteHit, &[], None);
    assert_eq!((none.n, none.delta_vs_baseline_ms.cold), (0, None));
}

#[test]
fn sweep_level_throughput() {
    let reqs = sample::requests();
    let level: Vec<RequestRecord> = reqs
        .into_iter()
        .filter(|r| r.concurrency == Some(2))
        .collect();
    let l = SweepLevel::from_requests(2, &level, 2.0);
    assert_eq!(l.requests, 4);
    assert_eq!(l.request_throughput_per_s, 2.0);
    assert_eq!(l.output_throughput_tok_per_s, 32.0);
    assert_eq!(
        SweepLevel::from_requests(1, &level, 0.0).request_throughput_per_s,
        0.0
    );
}

#[test]
fn case_record_json_has_units_and_outcome() {
    let run = sample::run_record();
    let v = serde_json::to_value(&run.cases[3]).unwrap();
    assert_eq!(v["outcome"], "failed");
    assert!(v["message"].as_str().unwrap().contains("guard_promoted"));
    assert_eq!(v["duration_ms"], 10400.0);
    assert_eq!(v["started_at"], "2025-11-29T17:41:25Z");
    assert_eq!(
        serde_json::to_value(&run.cases[5]).unwrap()["outcome"],
        "ignored"
    );
    let mut rec = CaseRecord::start("TC-01", "x");
    rec.measure("t1_ms", 12.5);
    assert_eq!(rec.measurements["t1_ms"], 12.5);
    let rec = CaseRecord::ignored("TC-06", "TC-06::x", "why");
    assert_eq!(
        rec.outcome,
        Outcome::Ignored {
            reason: "why".into(),
            because: crate::evidence::IgnoredBecause::NotApplicable,
        }
    );
    assert_eq!(settings_digest(&serde_json::json!({"a": 1})).len(), 64);
}

#[test]
fn results_json_shape() {
    let v = serde_json::to_value(sample::results()).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["run"]["stack"]["startup"][0]["ready_ms"], 850.0);
    assert_eq!(v["run"]["stack"]["total_startup_ms"], 6900.0);
    let r0 = &v["requests"][0];
    for k in [
        "ttft_ms",
        "tpot_ms",
        "itl_ms",
        "e2el_ms",
        "prompt_tokens",
        "output_tokens",
        "worker_id",
        "arm",
        "ok",
    ] {
        assert!(!r0[k].is_null(), "{k}");
    }
    assert_eq!(v["perf"]["arms"][1]["arm"], "local_hit");
    assert_eq!(v["perf"]["recovery"]["t1_ms"], 1412.0);
    assert_eq!(v["perf"]["sweep"][0]["concurrency"], 1);
    let back: RequestRecord = serde_json::from_value(r0.clone()).unwrap();
    assert_eq!(back, sample::requests()[0]);
}

#[test]
fn results_and_report_are_written_into_the_run_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path(), crate::config::Redactor::none()).unwrap();
    let results = sample::results();
    let p = results.write(&dir).unwrap();
    assert_eq!(p, dir.root().join("results.json"));
    let r = write_report(&dir, &results).unwrap();
    assert!(std::fs::read_to_string(r).unwrap().contains("<svg"));
    let j = write_junit(
        &results.run,
        &dir.root().join("junit.xml"),
        &crate::config::Redactor::none(),
    )
    .unwrap();
    assert!(std::fs::read_to_string(j)
        .unwrap()
        .contains("<testsuite name=\"phase1\""));
}

#[test]
fn junit_snapshot() {
    let xml = junit_xml(&sample::run_record()).unwrap();
    // Timestamps are fixed in the sample; normalize anyway so a change of
    // sample time does not churn the snapshot.
    let xml = xml.replace("2025-11-29T17:41", "<DATE>T<HH:MM>");
    insta::assert_snapshot!(xml);
}

#[test]
fn junit_counts_and_skips() {
    let xml = junit_xml(&sample::run_record()).unwrap();
    assert!(xml.contains("tests=\"7\""), "{xml}");
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(xml.contains("disabled=\"1\""), "{xml}");
    assert!(
        xml.contains("<skipped message=\"SGLang has no Guard"),
        "{xml}"
    );
    assert!(xml.contains("cases/TC-04/guard-log-tail.txt"), "{xml}");
}

#[test]
fn report_contains_charts_and_tables() {
    let html = render_report(&sample::results()).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        html.matches("<svg").count(),
        7,
        "workload hit rate, TTFT CDF and goodput; arms, throughput, TTFT sweep, recovery"
    );
    assert!(html.contains("<h2>Workload: a trace replayed (WL-01)</h2>"));
    assert!(html.contains("<rect") && html.contains("<polyline") && html.contains("<circle"));
    assert!(html.contains("href=\"cases/TC-04/guard-log-tail.txt\""));
    assert!(html.contains("TC-04::guard_takeover_replacement"));
    // A green case says what it did not check, in full.
    assert!(html.contains(
        "not checked: interval log vs /metrics as two sources (the cpu engine writes both from one; checked as its consistency)"
    ));
    assert!(html.contains("worker killed at <b>300 ms</b>") && html.contains("stream cut"));
    assert!(
        html.contains("<td>start</td><td>2025-11-29T17:41:00Z</td><td>load 3.52 2.10 1.05</td><td>pid 5151 fault_matrix (own stack)")
            && html.contains("<td>end</td><td>2025-11-29T17:42:10Z</td><td>load 1.20 1.80 1.00</td><td>none</td>"),
        "the other live runs and the load at start and end"
    );
    assert!(!html.contains("not run"));
    assert!(!html.contains("http://") || html.contains("http://www.w3.org/2000/svg"));
    assert!(!html.contains("<script"));
    if let Ok(out) = std::env::var("KVCR_E2E_REPORT_SAMPLE") {
        std::fs::write(out, &html).unwrap();
    }
}

#[test]
fn report_says_not_run_for_missing_data() {
    let mut results = sample::results();
    results.perf = PerfSummary::default();
    results.run.stack = None;
    results.run.reference = None;
    results.run.neighbours = None;
    let html = render_report(&results).unwrap();
    assert_eq!(html.matches("<svg").count(), 0);
    for s in [
        "no registry of live runs could be read",
        "TC-05 recorded no arm",
        "TC-05 recorded no sweep level",
        "TC-06 recorded no timeline",
        "reference phase",
    ] {
        assert!(html.contains(s), "{s}");
    }
    // A timeline with no t1 says why.
    results.perf.recovery = Some(RecoveryTimeline {
        attempts: vec![RecoveryAttempt {
            at_ms: 100.0,
            target: "B".into(),
            outcome: "error: 503".into(),
        }],
        no_t1_reason: Some("no remote_deliver success sourced from A".into()),
        ..Default::default()
    });
    let html = render_report(&results).unwrap();
    assert!(html.contains("no remote_deliver success sourced from A"));
    assert_eq!(html.matches("<svg").count(), 1);
}

#[test]
fn report_escapes_text() {
    let mut results = sample::results();
    results.run.cases[0].outcome = Outcome::Failed {
        message: "<script>alert(1)</script> & more".into(),
    };
    results.run.cases[0].duration = Duration::from_millis(1);
    let html = render_report(&results).unwrap();
    assert!(!html.contains("<script>alert"));
    assert!(html.contains("&lt;script&gt;"));
}

#[test]
fn report_with_a_single_arm_and_level() {
    let mut results = sample::results();
    results.perf.arms.truncate(1);
    results.perf.sweep.truncate(1);
    results.perf.baseline = None;
    results.perf.workload = None;
    let html = render_report(&results).unwrap();
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(!html.contains("Workload"), "no section without a replay");
}

#[test]
fn junit_never_carries_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = sample::run_record();
    run.cases[0].outcome = Outcome::Failed {
        message: "HTTP 401 with token sk-live-0123456789abcdef".into(),
    };
    let redactor = crate::config::Redactor::from_values(["sk-live-0123456789abcdef".to_string()]);
    let path = write_junit(&run, &dir.path().join("junit.xml"), &redactor).unwrap();
    let xml = std::fs::read_to_string(path).unwrap();
    assert!(!xml.contains("sk-live-0123456789abcdef"), "{xml}");
    assert!(xml.contains("HTTP 401 with token"), "{xml}");
}

/// The summary, the report and JUnit all say which KVCR ran, and the
/// summary flags a process that reported another build.
#[test]
fn every_writer_names_the_build() {
    let b = crate::pyenv::provenance::sample_build();
    let import = |component: &str, files: &str| crate::pyenv::ComponentImport {
        component: component.into(),
        pid: 7,
        version: b.version.clone(),
        location: b.location.clone(),
        files_sha256: files.into(),
    };
    let mut run = crate::evidence::sample::run_record();
    run.kvcr = Some(crate::pyenv::KvcrProvenance {
        build: b.clone(),
        imports: vec![
            import("guard", &b.files_sha256),
            import("worker-A", &b.files_sha256),
        ],
    });
    run.environment.extend(b.properties());
    let perf = crate::evidence::sample::perf();
    let summary = crate::evidence::render_summary(&run, &perf);
    assert!(
        summary.contains("kvcr: kvcr 0.1.1 (source dir: /src/kvcr)"),
        "{summary}"
    );
    assert!(
        summary.contains("imported by 2 processes (guard, worker-A): all the same build"),
        "{summary}"
    );
    if let Some(k) = run.kvcr.as_mut() {
        k.imports.push(import("worker-B", &"00".repeat(32)));
    }
    let summary = crate::evidence::render_summary(&run, &perf);
    assert!(summary.contains("ANOTHER BUILD in worker-B"), "{summary}");
    let results = crate::evidence::Results::new(run.clone(), Vec::new(), perf);
    let html = crate::evidence::render_report(&results).expect("renders");
    assert!(
        html.contains("KVCR under test") && html.contains("source dir"),
        "report"
    );
    assert!(
        html.contains("0123456789abcdef0123456789abcdef01234567 (dirty)"),
        "report"
    );
    let xml = crate::evidence::junit_xml(&run).expect("junit");
    assert!(
        xml.contains("name=\"kvcr.source\" value=\"source-dir\""),
        "{xml}"
    );
    assert!(
        xml.contains("name=\"kvcr.git_dirty\" value=\"true\""),
        "{xml}"
    );
}

#[test]
fn results_json_lists_the_runs_events_in_order_with_their_time() {
    let v = serde_json::to_value(sample::results()).unwrap();
    let events = v["run"]["events"].as_array().expect("run.events");
    assert_eq!(events.len(), sample::events().len());
    assert_eq!(events[1]["event"], "stack_ready");
    assert_eq!(events[1]["at"], "2025-11-29T17:41:08Z");
    assert_eq!(events[1]["components"][0]["ready_ms"], 4100);
    let retry = events
        .iter()
        .find(|e| e["event"] == "retry")
        .expect("the retry");
    assert_eq!(retry["trial"], "TC-01::generation_correctness");
    assert_eq!(retry["attempt"], 2);
    let finished: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "trial_finished")
        .collect();
    assert_eq!(finished[1]["outcome"], "failed");
    assert_eq!(
        finished[1]["detail"],
        "Guard did not log guard_promoted for index 0 within 10 s"
    );
}

#[test]
fn junit_puts_each_trials_events_in_its_testcase_and_the_rest_in_the_suite() {
    let report = junit_report(&sample::run_record());
    let suite = &report.test_suites[0];
    let out = |name: &str| {
        suite
            .test_cases
            .iter()
            .find(|tc| tc.name.as_str() == name)
            .and_then(|tc| tc.system_out.as_ref())
            .map(|s| s.as_str().to_string())
            .unwrap_or_default()
    };
    let tc01 = out("TC-01::generation_correctness");
    assert!(tc01.contains("runs again: its attempt failed"), "{tc01}");
    assert!(!tc01.contains("replacing it"), "{tc01}");
    let tc04 = out("TC-04::guard_takeover_replacement");
    assert!(
        tc04.starts_with("evidence:\n")
            && tc04.contains("events:\n2025-11-29T17:41:34Z restoring the stack after TC-04::guard_takeover_replacement\n"),
        "{tc04}"
    );
    assert!(
        tc04.contains("latched its KVCR source off; replacing it"),
        "{tc04}"
    );
    // A trial's start and end are the testcase itself, not lines.
    assert!(
        !tc04.contains(" started") && !tc04.contains("FAILED in"),
        "{tc04}"
    );
    // A trial without events gets none.
    assert!(!out("TC-02::local_dram_flow").contains("events:"));
    let run = suite.system_out.as_ref().expect("the suite's events");
    assert!(run.as_str().contains("stack ready in 6.9 s"), "{run:?}");
    assert!(!run.as_str().contains("runs again"), "{run:?}");
}

#[test]
fn the_report_draws_the_timeline_of_the_runs_events() {
    let html = render_report(&sample::results()).unwrap();
    assert!(html.contains("<h2>Timeline</h2>"));
    assert!(html.contains(
        "<td class=\"num\">8.0</td><td>2025-11-29T17:41:08Z</td><td>stack_ready</td><td></td><td><pre>stack ready in 6.9 s</pre></td>"
    ), "{html}");
    assert!(html.contains(
        "<td>restore</td><td>TC-04::guard_takeover_replacement</td><td><pre>restoring the stack after TC-04::guard_takeover_replacement</pre></td>"
    ));
    // Text is escaped.
    assert!(html.contains("worker B &lt;pid 9&gt; latched"));
    let mut quiet = sample::results();
    quiet.run.events.clear();
    let html = render_report(&quiet).unwrap();
    assert!(html.contains("<h2>Timeline</h2><p class=\"notrun\">not run — no events recorded</p>"));
}

#[test]
fn a_records_end_is_its_trial_finished_event() {
    let mut record = CaseRecord::start("TC-04", "TC-04::x");
    record.duration = Duration::from_millis(1_250);
    record.outcome = Outcome::Failed {
        message: "first line\nsecond".into(),
    };
    assert_eq!(
        record.finished_event(),
        crate::events::RunEvent::TrialFinished {
            trial: "TC-04::x".into(),
            outcome: crate::events::TrialOutcome::Failed,
            duration_ms: 1_250,
            detail: Some("first line".into()),
        }
    );
    record.outcome = Outcome::Passed;
    assert!(matches!(
        record.finished_event(),
        crate::events::RunEvent::TrialFinished {
            outcome: crate::events::TrialOutcome::Passed,
            detail: None,
            ..
        }
    ));
}
