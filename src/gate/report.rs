//! The writers over a [`GateReport`]: the console summary, `gate.json`,
//! one JUnit file (a testcase per lane trial, then compare's figures), and
//! a small `gate.html` linking each lane's report and `compare.html`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;

use super::outcome::{CompareOutcome, GateReport, LaneResult, LaneStatus};
use crate::drive::TrialOutcome;

/// `gate.json`'s schema version.
pub const GATE_SCHEMA_VERSION: u32 = 1;

/// The JUnit testsuite of the lanes.
pub const LANES_SUITE: &str = "gate.lanes";

/// The files [`write_outputs`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct GateWritten {
    pub json: PathBuf,
    pub junit: PathBuf,
    pub page: PathBuf,
}

#[derive(Serialize)]
struct GateJson<'a> {
    schema_version: u32,
    kvcr: &'a str,
    base: &'a str,
    verdict: super::GateVerdict,
    exit_code: u8,
    reasons: Vec<String>,
    lanes: &'a [LaneResult],
    compare: CompareJson,
}

#[derive(Serialize)]
struct CompareJson {
    /// `compared`, `not_compared` or `skipped`.
    status: &'static str,
    /// compare's own conclusion and exit code, when it ran.
    gate: Option<&'static str>,
    exit_code: Option<u8>,
    /// Its figures with a finding.
    findings: Vec<String>,
    /// Why it has no verdict, one line each.
    without_verdict: Vec<String>,
    /// Its compare.json, when it ran.
    compare_json: Option<PathBuf>,
    why: Option<String>,
}

fn compare_json(c: &CompareOutcome) -> CompareJson {
    let (status, why, compare_json, without_verdict) = match c {
        CompareOutcome::Compared {
            comparison,
            written,
        } => (
            "compared",
            None,
            Some(written.json.clone()),
            comparison.without_verdict(),
        ),
        CompareOutcome::NotCompared { why } => ("not_compared", Some(why.clone()), None, vec![]),
        CompareOutcome::Skipped { why } => ("skipped", Some(why.clone()), None, vec![]),
    };
    let gate = c.gate();
    CompareJson {
        status,
        gate: gate.map(|g| g.as_str()),
        exit_code: gate.map(|g| g.exit_code()),
        findings: c.findings(),
        without_verdict,
        compare_json,
        why,
    }
}

/// `gate.json`.
pub fn render_json(r: &GateReport) -> String {
    let verdict = r.verdict();
    let doc = GateJson {
        schema_version: GATE_SCHEMA_VERSION,
        kvcr: &r.kvcr,
        base: &r.base,
        verdict,
        exit_code: verdict.exit_code(),
        reasons: r.reasons(),
        lanes: &r.lanes,
        compare: compare_json(&r.compare),
    };
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The console summary: one line per lane, one for the comparison, the
/// reasons, and the conclusion with its exit code.
pub fn render_summary(r: &GateReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "gate: kvcr {} against {}", r.kvcr, r.base);
    for l in &r.lanes {
        let status = match l.status {
            LaneStatus::Passed => "passed",
            LaneStatus::Failed => "FAILED",
            LaneStatus::NoVerdict => "NO VERDICT",
        };
        let place = l
            .run_dir
            .as_ref()
            .map(|d| format!("  {}", d.display()))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  lane {:<20} {:<10} {} in {:.0} s{place}",
            l.target,
            status,
            l.counts(),
            l.wall_s
        );
    }
    let compare = match &r.compare {
        CompareOutcome::Compared {
            comparison,
            written,
        } => {
            let c = comparison.counts();
            format!(
                "{:<10} {} figures: {} regression(s), {} missing, {} inconclusive  {}",
                comparison.gate().as_str(),
                comparison.figures.len(),
                c.regression,
                c.missing,
                c.inconclusive,
                written.page.display()
            )
        }
        CompareOutcome::NotCompared { .. } => "NOT COMPARED".to_string(),
        CompareOutcome::Skipped { .. } => "not run".to_string(),
    };
    let _ = writeln!(o, "  compare {:<17} {compare}", "");
    for why in r.reasons() {
        let _ = writeln!(o, "  - {why}");
    }
    let verdict = r.verdict();
    let _ = writeln!(
        o,
        "gate: {} (exit {})",
        verdict.as_str(),
        verdict.exit_code()
    );
    o
}

fn failure(name: &str, classname: &str, message: &str, description: &str) -> TestCase {
    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
    s.set_message(message);
    s.set_description(description);
    let mut tc = TestCase::new(name, s);
    tc.set_classname(classname);
    tc
}

/// One JUnit report: the lanes' trials (`<lane>::<trial>`; a lane without
/// results one failing testcase `<lane>`), then compare's testsuite (a
/// testcase per figure), or a testcase `compare` saying why it did not run.
pub fn junit_report(r: &GateReport) -> Report {
    let mut lanes = TestSuite::new(LANES_SUITE);
    lanes.add_property(Property::new("kvcr", r.kvcr.as_str()));
    lanes.add_property(Property::new("base", r.base.as_str()));
    for l in &r.lanes {
        for t in &l.trials {
            let name = format!("{}::{}", l.target, t.name);
            let tc = match &t.outcome {
                TrialOutcome::Failed { message } => failure(&name, &l.target, "failed", message),
                TrialOutcome::Ignored { reason } => {
                    let mut s = TestCaseStatus::skipped();
                    s.set_message(reason.as_str());
                    let mut tc = TestCase::new(name, s);
                    tc.set_classname(&l.target);
                    tc
                }
                TrialOutcome::Passed | TrialOutcome::ExpectedFailure { .. } => {
                    let mut tc = TestCase::new(name, TestCaseStatus::success());
                    tc.set_classname(&l.target);
                    tc
                }
            };
            lanes.add_test_case(tc);
        }
        let unexplained = l.status != LaneStatus::Passed
            && !l
                .trials
                .iter()
                .any(|t| matches!(t.outcome, TrialOutcome::Failed { .. }));
        if unexplained {
            lanes.add_test_case(failure(
                &l.target,
                &l.target,
                "no evidence from this lane",
                l.problem.as_deref().unwrap_or(""),
            ));
        }
    }
    let mut report = Report::new("kvcr-e2e gate");
    report.add_test_suite(lanes);
    match &r.compare {
        CompareOutcome::Compared { comparison, .. } => {
            report.add_test_suites(crate::compare::junit_report(comparison).test_suites);
        }
        CompareOutcome::NotCompared { why } => {
            let mut suite = TestSuite::new(crate::compare::SUITE);
            suite.add_test_case(failure("compare", "compare", "not compared", why));
            report.add_test_suite(suite);
        }
        CompareOutcome::Skipped { why } => {
            let mut suite = TestSuite::new(crate::compare::SUITE);
            let mut s = TestCaseStatus::skipped();
            s.set_message(why.as_str());
            let mut tc = TestCase::new("compare", s);
            tc.set_classname("compare");
            suite.add_test_case(tc);
            report.add_test_suite(suite);
        }
    }
    report
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `gate.html`: the conclusion, a row per lane linking its report, and the
/// comparison linking `compare.html`.
pub fn render_page(r: &GateReport) -> String {
    let verdict = r.verdict();
    let link = |path: &Path, text: &str| {
        format!(
            "<a href=\"file://{}\">{}</a>",
            escape(&path.display().to_string()),
            escape(text)
        )
    };
    let mut rows = String::new();
    for l in &r.lanes {
        let report = l
            .run_dir
            .as_ref()
            .map(|d| link(&d.join("report.html"), "report"))
            .unwrap_or_default();
        let _ = writeln!(
            rows,
            "<tr><td>{}</td><td>{:?}</td><td>{}</td><td>{:.0} s</td><td>{}</td><td>{}</td></tr>",
            escape(&l.target),
            l.status,
            escape(&l.counts()),
            l.wall_s,
            escape(l.problem.as_deref().unwrap_or("")),
            report
        );
    }
    let compare = match &r.compare {
        CompareOutcome::Compared { written, .. } => link(&written.page, "compare.html"),
        CompareOutcome::NotCompared { why } => format!("not compared: {}", escape(why)),
        CompareOutcome::Skipped { why } => format!("not run: {}", escape(why)),
    };
    let reasons: String = r
        .reasons()
        .iter()
        .map(|w| format!("<li>{}</li>\n", escape(w)))
        .collect();
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kvcr-e2e gate</title></head>\n\
         <body>\n<h1>gate: {} (exit {})</h1>\n<p>kvcr {} against {}</p>\n<ul>\n{reasons}</ul>\n\
         <table border=\"1\">\n<tr><th>lane</th><th>status</th><th>trials</th><th>wall</th>\
         <th>problem</th><th></th></tr>\n{rows}</table>\n<p>compare: {compare}</p>\n</body></html>\n",
        verdict.as_str(),
        verdict.exit_code(),
        escape(&r.kvcr),
        escape(&r.base),
    )
}

/// Writes `gate.json`, `junit.xml` and `gate.html` into `dir`.
pub fn write_outputs(r: &GateReport, dir: &Path) -> Result<GateWritten, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let write = |name: &str, text: &str| -> Result<PathBuf, String> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    };
    let xml = junit_report(r)
        .to_string()
        .map_err(|e| format!("junit.xml: {e}"))?;
    Ok(GateWritten {
        json: write("gate.json", &render_json(r))?,
        junit: write("junit.xml", &xml)?,
        page: write("gate.html", &render_page(r))?,
    })
}
