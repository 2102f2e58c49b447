//! The known findings a case checked (docs/kvcr-findings.md): for each,
//! whether it showed, whether it is declared to show there, and what was
//! seen. They travel in the case's measurements, under [`KVCR_FINDINGS`];
//! the case's outcome follows from them ([`super::Outcome::ExpectedFailure`],
//! or a failure when a declared finding no longer shows).

use serde::{Deserialize, Serialize};

use super::record::CaseRecord;

/// The measurement key of a case's finding checks.
pub const KVCR_FINDINGS: &str = "kvcr_findings";

/// One check of a known finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingCheck {
    /// Its number in docs/kvcr-findings.md.
    pub finding: u32,
    /// Its title there.
    pub title: String,
    /// Whether it showed.
    pub shows: bool,
    /// Whether it is declared to show in this case on this engine.
    pub expected: bool,
    /// What the check saw, in words.
    pub seen: String,
}

impl FindingCheck {
    /// It showed where it is declared: the case's expected failure.
    pub fn is_expected_failure(&self) -> bool {
        self.shows && self.expected
    }

    /// It is declared here and did not show: fixed, to be retired.
    pub fn is_unexpected_pass(&self) -> bool {
        self.expected && !self.shows
    }

    /// It showed where it is not declared.
    pub fn is_undeclared(&self) -> bool {
        self.shows && !self.expected
    }

    /// `finding 17: <title>`.
    pub fn headline(&self) -> String {
        format!("finding {}: {}", self.finding, self.title)
    }
}

/// The finding checks `case` recorded (none when it recorded none).
pub fn of(case: &CaseRecord) -> Vec<FindingCheck> {
    from_measurement(case.measurements.get(KVCR_FINDINGS))
}

/// The finding checks in the measurement [`KVCR_FINDINGS`], if there is one.
pub fn from_measurement(value: Option<&serde_json::Value>) -> Vec<FindingCheck> {
    value
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// `finding 17` or `findings 2, 3`.
pub fn numbers_words(numbers: &[u32]) -> String {
    let list: Vec<String> = numbers.iter().map(u32::to_string).collect();
    match list.len() {
        1 => format!("finding {}", list[0]),
        _ => format!("findings {}", list.join(", ")),
    }
}

/// A run of the production lane on vLLM for the writers' tests: TC-09 an
/// expected failure of finding 17, TC-10 failed on an unexpected pass of
/// finding 8, TC-11 passed.
#[cfg(test)]
pub(crate) fn sample_run() -> super::RunRecord {
    use super::Outcome;
    let mut run = super::sample::run_record();
    run.label = "phase2_vllm vllm/agg/dense".into();
    let case = |id: &str, name: &str, outcome: Outcome, ms: u64, check: Option<FindingCheck>| {
        let mut c = CaseRecord::start(id, name);
        c.started_at = super::sample::at(0);
        c.outcome = outcome;
        c.duration = std::time::Duration::from_millis(ms);
        c.evidence = vec![format!("cases/{id}/stop.json").into()];
        if let Some(check) = check {
            c.measure(KVCR_FINDINGS, vec![check]);
        }
        c
    };
    let f17 = FindingCheck {
        finding: 17,
        title: "vLLM's KVCR tier keeps a SIGTERMed engine core from ever finishing its shutdown, so a clean stop looks like a crash".into(),
        shows: true,
        expected: true,
        seen: "the engine's process manager force-killed the engine core that holds KVCR before KVCR closed: `force killing remaining processes count=1`".into(),
    };
    let f8 = FindingCheck {
        finding: 8,
        title: "a heartbeat promotion serves before the holder's death is seen".into(),
        shows: false,
        expected: true,
        seen: "the Guard saw the stalled worker die before it served: stages death_observed → records_recovered → records_adopted → serving".into(),
    };
    run.cases = vec![
        case(
            "TC-09",
            "TC-09::clean_restart",
            Outcome::ExpectedFailure {
                findings: vec![17],
                message: format!("expected failure ({}; seen: {})", f17.headline(), f17.seen),
            },
            270_000,
            Some(f17),
        ),
        case(
            "TC-10",
            "TC-10::heartbeat_promotion",
            Outcome::Failed {
                message: format!(
                    "unexpected pass: finding 8 no longer shows: retire it ({}; seen: {})",
                    f8.title, f8.seen
                ),
            },
            95_000,
            Some(f8),
        ),
        case(
            "TC-11",
            "TC-11::source_stall_latch",
            Outcome::Passed,
            80_000,
            None,
        ),
    ];
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_reads_back_its_finding_checks() {
        let mut c = CaseRecord::start("TC-10", "TC-10::heartbeat_promotion");
        assert!(of(&c).is_empty());
        let check = FindingCheck {
            finding: 8,
            title: "served first".into(),
            shows: true,
            expected: true,
            seen: "stages serving".into(),
        };
        c.measure(KVCR_FINDINGS, vec![check.clone()]);
        assert_eq!(of(&c), vec![check.clone()]);
        assert!(check.is_expected_failure() && !check.is_unexpected_pass());
        assert_eq!(numbers_words(&[17]), "finding 17");
        assert_eq!(numbers_words(&[2, 3]), "findings 2, 3");
    }

    #[test]
    fn the_report_shows_an_expected_failure_and_an_unexpected_pass() {
        let results = crate::evidence::Results::new(
            sample_run(),
            Vec::new(),
            crate::evidence::PerfSummary::default(),
        );
        let html = crate::evidence::render_report(&results).unwrap();
        assert!(
            html.contains("<span class=\"pill expected\">expected failure (finding 17)</span>"),
            "{html}"
        );
        assert!(
            html.contains("1 expected failures (known findings)"),
            "{html}"
        );
        assert!(
            html.contains("unexpected pass: finding 8 no longer shows: retire it"),
            "{html}"
        );
    }
}
