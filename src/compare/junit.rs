//! JUnit XML of a comparison: one testsuite `compare`, one testcase per
//! figure; a regression or a missing figure is a failure, so CI can gate
//! on it. Improvements and "no change detected" pass; an inconclusive
//! figure (too few round pairs) is skipped, with the reason.

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::comparison::{Comparison, FigureResult, Verdict};

/// The testsuite name.
pub const SUITE: &str = "compare";

/// The JUnit report of a comparison.
pub fn junit_report(c: &Comparison) -> Report {
    let mut suite = TestSuite::new(SUITE);
    suite.add_property(Property::new("rule", c.describe_rule()));
    suite.add_property(Property::new("rounds", c.letters()));
    suite.add_property(Property::new(
        "bootstrap.resamples",
        c.bootstrap.resamples.to_string(),
    ));
    suite.add_property(Property::new(
        "bootstrap.seed",
        c.bootstrap.seed.to_string(),
    ));
    for r in c.rounds.iter().filter(|r| !r.run_id.is_empty()) {
        suite.add_property(Property::new(
            format!("round.{}.{}", r.round.index, r.round.build.as_str()),
            r.run_id.as_str(),
        ));
    }
    suite.add_test_cases(c.figures.iter().map(test_case));
    let mut report = Report::new("kvcr-e2e");
    report.add_test_suite(suite);
    report
}

fn test_case(f: &FigureResult) -> TestCase {
    let status = if f.verdict.fails() {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(format!("{}: {}", f.verdict.as_str(), f.spec.label));
        s.set_description(f.reason.clone());
        s
    } else if f.verdict == Verdict::Inconclusive {
        // Skipped, not passed: CI does not fail on it, but shows it.
        let mut s = TestCaseStatus::skipped();
        s.set_message(format!("inconclusive: {}", f.reason));
        s
    } else {
        TestCaseStatus::success()
    };
    let mut tc = TestCase::new(f.spec.id.as_str(), status);
    tc.set_classname(SUITE);
    tc.add_property(Property::new("verdict", f.verdict.as_str()));
    tc.add_property(Property::new("unit", f.spec.unit.as_str()));
    tc.add_property(Property::new("statistic", f.spec.statistic.as_str()));
    tc.add_property(Property::new("n.base", f.base.len().to_string()));
    tc.add_property(Property::new("n.head", f.head.len().to_string()));
    tc.add_property(Property::new("pairs", f.pairs.to_string()));
    if let Some(d) = &f.difference {
        for (key, value) in [
            ("base", d.base),
            ("head", d.head),
            ("delta", d.delta),
            ("interval.lo", d.interval.lo),
            ("interval.hi", d.interval.hi),
        ] {
            tc.add_property(Property::new(key, format!("{value:.3}")));
        }
    }
    if f.verdict != Verdict::Missing {
        tc.set_system_out(format!("{}\n", f.reason));
    }
    tc
}

/// The JUnit XML text of a comparison.
pub fn junit_xml(c: &Comparison) -> Result<String, quick_junit::SerializeError> {
    junit_report(c).to_string()
}
