//! JUnit XML of a comparison: one testsuite `compare`, one testcase per
//! figure; a regression, a missing figure and an inconclusive one (too few
//! round pairs) are failures, so CI can gate on them. Improvements and "no
//! change detected" pass (a too-wide interval says so in its verdict
//! property and output). A round that is no clean evidence adds a failing
//! testcase `round::<NN>-<build>`, and a comparison without figures a
//! failing testcase `figures`.

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
    for r in &c.rounds {
        if let Some(problem) = &r.problem {
            let name = format!("round::{:02}-{}", r.round.index, r.round.build.as_str());
            suite.add_test_case(failure(
                &name,
                format!("no evidence from round {}", r.round.index),
                problem.clone(),
            ));
        }
    }
    if c.figures.is_empty() {
        suite.add_test_case(failure(
            "figures",
            "no figures".to_string(),
            c.without_verdict().join("\n"),
        ));
    }
    let mut report = Report::new("kvcr-e2e");
    report.add_test_suite(suite);
    report
}

/// A failing testcase that is no figure.
fn failure(name: &str, message: String, description: String) -> TestCase {
    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
    s.set_message(message);
    s.set_description(description);
    let mut tc = TestCase::new(name, s);
    tc.set_classname(SUITE);
    tc
}

fn test_case(f: &FigureResult) -> TestCase {
    let status = if f.verdict.fails() || f.verdict == Verdict::Inconclusive {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(format!("{}: {}", f.verdict.as_str(), f.spec.label));
        s.set_description(f.reason.clone());
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
    if let Some(change) = f.cannot_exclude {
        tc.add_property(Property::new(
            "cannot_exclude.percent",
            format!("{:.1}", change * 100.0),
        ));
    }
    if let Some(mde) = f.mde {
        tc.add_property(Property::new("mde.percent", format!("{:.1}", mde * 100.0)));
    }
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
