//! JUnit XML over the case records: one testsuite `phase1`, one testcase per
//! trial; ignored trials are skipped with their reason, expected failures
//! skipped with their findings (`expected failure (finding 17)`); failures
//! carry their message and evidence paths.

use std::path::Path;

use quick_junit::{
    NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use super::errors::EvidenceError;
use super::record::{CaseRecord, Outcome, RunRecord};

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
    suite.add_test_cases(run.cases.iter().map(test_case));
    let mut report = Report::new("kvcr-e2e");
    report.set_time(total);
    report.add_test_suite(suite);
    report
}

fn test_case(c: &CaseRecord) -> TestCase {
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
        tc.add_property(Property::new(format!("measurement.{k}"), v.to_string()));
    }
    if !evidence.is_empty() {
        tc.set_system_out(format!("evidence:\n{}\n", evidence.join("\n")));
    }
    tc
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
    let mut report = junit_report(run);
    if let (Some(gpu), Some(suite)) = (gpu, report.test_suites.first_mut()) {
        for (key, value) in super::gpu::properties(gpu) {
            suite.add_property(Property::new(key, value));
        }
    }
    let xml = redactor.scrub(&report.to_string()?);
    super::run_dir::write_atomic(path, xml.as_bytes())?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

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
