//! JUnit XML over the case records: one testsuite `phase1`, one testcase per
//! trial; ignored trials are skipped with their reason, expected failures
//! skipped with their findings (`expected failure (finding 17)`); failures
//! carry their message and evidence paths. A trace replay's case carries
//! its figures as properties (`workload.on.hit_rate.total_pct`, ...). The
//! run's events ([`crate::events`]) go to `system-out`: a trial's in its
//! testcase (after its evidence), the rest in the suite's.

use std::path::Path;

use quick_junit::{
    NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use super::errors::EvidenceError;
use super::record::{CaseRecord, Outcome, RunRecord};
use super::workload::{WorkloadSummary, WORKLOAD_MEASUREMENT};

/// The testsuite name.
pub const SUITE: &str = "phase1";

/// The JUnit report of a run.
pub fn junit_report(run: &RunRecord) -> Report {
    let mut suite = TestSuite::new(SUITE);
    suite.add_property(Property::new("run_id", run.run_id.as_str()));
    suite.add_property(Property::new("run_dir", run.run_dir.display().to_string()));
    suite.add_property(Property::new(
        "settings_digest",
        run.settings_digest.as_str(),
    ));
    suite.add_property(Property::new("label", run.label.as_str()));
    suite.add_property(Property::new("started_at", run.started_at.rfc3339()));
    for (key, value) in &run.environment {
        suite.add_property(Property::new(key.as_str(), value.as_str()));
    }
    let total = run.cases.iter().map(|c| c.duration).sum();
    suite.set_time(total);
    let events = crate::events::by_trial(&run.events);
    suite.add_test_cases(
        run.cases
            .iter()
            .map(|c| test_case(c, events.trials.get(&c.name).map(Vec::as_slice))),
    );
    if !events.run.is_empty() {
        suite.set_system_out(events_text(&events.run));
    }
    let mut report = Report::new("kvcr-e2e");
    report.set_time(total);
    report.add_test_suite(suite);
    report
}

/// `events:` and one line per event, `<UTC time> <text>`; a trial's start
/// and end are left out (the testcase says both).
fn events_text(events: &[crate::events::Event]) -> String {
    use crate::events::RunEvent;
    let mut out = String::from("events:\n");
    for e in events {
        if matches!(
            e.kind,
            RunEvent::TrialStarted { .. } | RunEvent::TrialFinished { .. }
        ) {
            continue;
        }
        let text = crate::events::console::text(&e.kind).replace('\n', "\n    ");
        out.push_str(&format!("{} {text}\n", e.at.rfc3339()));
    }
    out
}

fn test_case(c: &CaseRecord, events: Option<&[crate::events::Event]>) -> TestCase {
    let evidence: Vec<String> = c.evidence.iter().map(|p| p.display().to_string()).collect();
    let status = match &c.outcome {
        Outcome::Passed => TestCaseStatus::success(),
        Outcome::Failed { message } => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(message.lines().next().unwrap_or_default());
            let mut description = message.clone();
            if !evidence.is_empty() {
                description.push_str("\n\nevidence:\n");
                for e in &evidence {
                    description.push_str(&format!("  {e}\n"));
                }
            }
            s.set_description(description);
            s
        }
        // Green, but not a pass: skipped, naming the findings that showed.
        Outcome::ExpectedFailure { message, .. } => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(c.outcome.words());
            s.set_type("expected failure");
            s.set_description(message.as_str());
            s
        }
        Outcome::Ignored { reason, because } => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(reason.as_str());
            s.set_type(because.words());
            s
        }
    };
    let mut status = status;
    // Attempts run again after a clock event: flakyFailure before a pass,
    // rerunFailure before a failure.
    status.add_reruns(c.retried.iter().map(|attempt| {
        let mut rerun = TestRerun::new(NonSuccessKind::Failure);
        rerun.set_message(attempt.why());
        rerun.set_description(attempt.message.as_str());
        rerun
    }));
    let mut tc = TestCase::new(c.name.as_str(), status);
    tc.set_classname(SUITE);
    tc.set_time(c.duration);
    tc.add_property(Property::new("case_id", c.id.as_str()));
    tc.add_property(Property::new("started_at", c.started_at.rfc3339()));
    for e in &evidence {
        tc.add_property(Property::new("evidence", e.as_str()));
    }
    for (k, v) in &c.measurements {
        match workload_of(k, v) {
            Some(w) => {
                for (key, value) in workload_properties(&w) {
                    tc.add_property(Property::new(key, value));
                }
            }
            None => {
                tc.add_property(Property::new(format!("measurement.{k}"), v.to_string()));
            }
        }
    }
    let mut out = String::new();
    if !evidence.is_empty() {
        out.push_str(&format!("evidence:\n{}\n", evidence.join("\n")));
    }
    let shown = events.map(events_text).filter(|t| t != "events:\n");
    if let Some(events) = shown {
        out.push_str(&events);
    }
    if !out.is_empty() {
        tc.set_system_out(out);
    }
    tc
}

/// The trace replay's summary, when `key` is its measurement and it reads
/// as one.
fn workload_of(key: &str, value: &serde_json::Value) -> Option<WorkloadSummary> {
    match key == WORKLOAD_MEASUREMENT {
        true => serde_json::from_value(value.clone()).ok(),
        false => None,
    }
}

/// A trace replay's figures as properties (`workload.on.hit_rate.total_pct`,
/// `workload.off.goodput_per_s`, ...): the trace, the targets, each replay's
/// counts, hit rate per tier, goodput, latency and reconciliation, and the
/// sweep's highest sustained rate. The TTFT samples and the timeline stay
/// in results.json.
pub fn workload_properties(w: &WorkloadSummary) -> Vec<(String, String)> {
    let mut out = vec![
        ("workload.trace".to_string(), w.trace.name.clone()),
        ("workload.trace_sha256".to_string(), w.trace.sha256.clone()),
        (
            "workload.trace_requests".to_string(),
            w.trace.requests.to_string(),
        ),
        (
            "workload.slo.ttft_ms".to_string(),
            w.slo.ttft_ms.to_string(),
        ),
        (
            "workload.slo.tpot_ms".to_string(),
            w.slo.tpot_ms.to_string(),
        ),
        (
            "workload.slo.attainment".to_string(),
            w.slo.attainment.to_string(),
        ),
    ];
    let replays = std::iter::once(("on", &w.on)).chain(w.off.as_ref().map(|off| ("off", off)));
    for (side, r) in replays {
        let mut add = |name: &str, value: String| {
            out.push((format!("workload.{side}.{name}"), value));
        };
        add("rate_factor", r.rate_factor.to_string());
        add("offered_rate_per_s", format!("{:.3}", r.offered_rate_per_s));
        add("requests", r.requests.to_string());
        add("ok", r.ok.to_string());
        add("failed", r.failed.to_string());
        add("wrong_tokens", r.wrong_tokens.to_string());
        for (tier, rate) in r.hit_rate.named() {
            add(
                &format!("hit_rate.{tier}_pct"),
                format!("{:.2}", rate * 100.0),
            );
        }
        add(
            "cached_tokens_reported",
            r.cached_tokens_reported.to_string(),
        );
        add("goodput_per_s", format!("{:.3}", r.goodput_per_s));
        add(
            "slo_attainment_pct",
            format!("{:.1}", r.slo_attainment * 100.0),
        );
        for (name, value) in [
            ("ttft_p50_ms", r.ttft_ms.p50),
            ("ttft_p90_ms", r.ttft_ms.p90),
            ("ttft_p99_ms", r.ttft_ms.p99),
            ("tpot_p50_ms", r.tpot_ms.p50),
            ("schedule_delay_p99_ms", r.schedule_delay_ms.p99),
        ] {
            if let Some(v) = value {
                add(name, format!("{v:.1}"));
            }
        }
        add("reconciled", r.reconciliation.is_empty().to_string());
        for finding in &r.reconciliation {
            add("reconciliation", finding.clone());
        }
    }
    if let Some(rate) = w.max_sustained_rate_per_s {
        out.push((
            "workload.max_sustained_rate_per_s".to_string(),
            format!("{rate:.3}"),
        ));
    }
    out
}

/// Puts `w`'s figures on the suite's trace-replay testcase, or on the
/// suite when it has none; nothing where they already are.
fn add_workload(suite: &mut TestSuite, w: &WorkloadSummary) {
    let prefix = format!("{}::", super::workload::WORKLOAD_CASE);
    let has = |props: &[Property]| props.iter().any(|p| p.name.as_str() == "workload.trace");
    let properties = workload_properties(w)
        .into_iter()
        .map(|(key, value)| Property::new(key, value));
    match suite
        .test_cases
        .iter_mut()
        .find(|tc| tc.name.as_str().starts_with(&prefix))
    {
        Some(tc) if has(&tc.properties) => {}
        Some(tc) => tc.properties.extend(properties),
        None if has(&suite.properties) => {}
        None => suite.properties.extend(properties),
    }
}

/// The JUnit XML text of a run.
pub fn junit_xml(run: &RunRecord) -> Result<String, EvidenceError> {
    Ok(junit_report(run).to_string()?)
}

/// Writes the JUnit XML to `path` (atomically) and returns it.
pub fn write_junit(
    run: &RunRecord,
    path: &Path,
    redactor: &crate::config::Redactor,
) -> Result<std::path::PathBuf, EvidenceError> {
    // JUnit may live outside the run directory, so it is scrubbed here.
    let xml = redactor.scrub(&junit_xml(run)?);
    super::run_dir::write_atomic(path, xml.as_bytes())?;
    Ok(path.to_path_buf())
}

/// [`write_junit`] plus the GPU model, driver and figures as suite
/// properties (`gpu.model`, `gpu.driver`, ...), when the run had NVML.
pub fn write_junit_with_gpu(
    run: &RunRecord,
    gpu: Option<&crate::gpu::run::GpuRun>,
    path: &Path,
    redactor: &crate::config::Redactor,
) -> Result<std::path::PathBuf, EvidenceError> {
    write_junit_with(run, gpu, None, path, redactor)
}

/// [`write_junit_with_gpu`] plus a trace replay's figures
/// ([`workload_properties`]) on its testcase (`WL-01::...`; the suite's
/// own properties without one), for a run whose summary moved from the
/// case's measurements to `perf.workload`. A testcase that already
/// carries them from its measurement gets them once.
pub fn write_junit_with(
    run: &RunRecord,
    gpu: Option<&crate::gpu::run::GpuRun>,
    workload: Option<&WorkloadSummary>,
    path: &Path,
    redactor: &crate::config::Redactor,
) -> Result<std::path::PathBuf, EvidenceError> {
    let mut report = junit_report(run);
    if let (Some(gpu), Some(suite)) = (gpu, report.test_suites.first_mut()) {
        for (key, value) in super::gpu::properties(gpu) {
            suite.add_property(Property::new(key, value));
        }
    }
    if let (Some(w), Some(suite)) = (workload, report.test_suites.first_mut()) {
        add_workload(suite, w);
    }
    let xml = redactor.scrub(&report.to_string()?);
    super::run_dir::write_atomic(path, xml.as_bytes())?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_case_carries_its_figures_not_its_samples() {
        let w = crate::evidence::sample::workload();
        let mut run = crate::evidence::sample::run_record();
        let mut case = run.cases[0].clone();
        case.id = crate::evidence::WORKLOAD_CASE.into();
        case.name = "WL-01::trace_replay".into();
        case.measurements.clear();
        case.measure(WORKLOAD_MEASUREMENT, &w);
        case.measure("trace_file", "fixtures/traces/multi-turn-small.jsonl");
        run.cases = vec![case];
        let xml = junit_xml(&run).unwrap();
        let total = format!("{:.2}", w.on.hit_rate.total * 100.0);
        for want in [
            format!("name=\"workload.on.hit_rate.total_pct\" value=\"{total}\""),
            "name=\"workload.off.hit_rate.dram_pct\" value=\"0.00\"".to_string(),
            format!(
                "name=\"workload.on.goodput_per_s\" value=\"{:.3}\"",
                w.on.goodput_per_s
            ),
            "name=\"workload.on.failed\" value=\"0\"".to_string(),
            "name=\"workload.on.reconciled\" value=\"true\"".to_string(),
            "name=\"workload.trace\" value=\"multi-turn-small.jsonl\"".to_string(),
            "name=\"workload.max_sustained_rate_per_s\"".to_string(),
            "name=\"measurement.trace_file\"".to_string(),
        ] {
            assert!(xml.contains(&want), "{want}\n{xml}");
        }
        assert!(!xml.contains("measurement.workload"), "no raw summary");
        assert!(!xml.contains("ttft_samples_ms"), "no samples");
        // Something else under the key stays a plain measurement.
        run.cases[0].measurements.clear();
        run.cases[0].measure(WORKLOAD_MEASUREMENT, "not a summary");
        let xml = junit_xml(&run).unwrap();
        assert!(xml.contains("name=\"measurement.workload\""), "{xml}");
    }

    #[test]
    fn the_replay_figures_from_perf_go_on_its_testcase_once() {
        let w = crate::evidence::sample::workload();
        let mut run = crate::evidence::sample::run_record();
        run.cases[1].id = crate::evidence::WORKLOAD_CASE.into();
        run.cases[1].name = "WL-01::trace_replay".into();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junit.xml");
        let redactor = crate::config::Redactor::none();
        let read = |run: &RunRecord| {
            write_junit_with(run, None, Some(&w), &path, &redactor).unwrap();
            std::fs::read_to_string(&path).unwrap()
        };
        let xml = read(&run);
        let case = xml
            .split("<testcase")
            .find(|c| c.contains("WL-01::trace_replay"))
            .unwrap();
        assert!(
            case.contains("name=\"workload.on.hit_rate.total_pct\""),
            "{case}"
        );
        assert_eq!(xml.matches("name=\"workload.trace\"").count(), 1);
        // Also recorded as the case's measurement: still once.
        run.cases[1].measure(WORKLOAD_MEASUREMENT, &w);
        assert_eq!(read(&run).matches("name=\"workload.trace\"").count(), 1);
        // No replay testcase: on the suite.
        run.cases.remove(1);
        let xml = read(&run);
        let suite = xml.split("<testcase").next().unwrap();
        assert!(
            suite.contains("name=\"workload.off.goodput_per_s\""),
            "{suite}"
        );
    }

    /// An expected failure is skipped with its finding's id; an unexpected
    /// pass is a failure that says to retire the finding.
    #[test]
    fn junit_of_expected_failures_snapshot() {
        let xml = junit_xml(&super::super::expected::sample_run()).unwrap();
        assert!(
            xml.contains(
                "<skipped message=\"expected failure (finding 17)\" type=\"expected failure\">"
            ),
            "{xml}"
        );
        assert!(
            xml.contains(
                "<failure message=\"unexpected pass: finding 8 no longer shows: retire it"
            ),
            "{xml}"
        );
        let xml = xml.replace("2025-11-29T17:41", "<DATE>T<HH:MM>");
        insta::assert_snapshot!(xml);
    }
}
