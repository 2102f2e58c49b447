//! Checks a case could not make on this stack (an engine that stamps no
//! first token, one that counts no pages per kind, telemetry sources that
//! are not independent). The case stays green, but its summary line and the
//! report say what was not checked and why, so a green case never claims
//! more than it checked. They travel in the case's measurements, under
//! [`NOT_CHECKED`].

use serde::{Deserialize, Serialize};

use super::record::CaseRecord;

/// The measurement key of a case's unchecked clauses.
pub const NOT_CHECKED: &str = "not_checked";

/// One clause a case did not check, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotChecked {
    /// The clause, in the words of the case (`TTFT accuracy`).
    pub check: String,
    /// Why it could not be checked here.
    pub why: String,
}

impl NotChecked {
    pub fn new(check: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            check: check.into(),
            why: why.into(),
        }
    }
}

/// The clauses `case` did not check (none when it recorded none).
pub fn of(case: &CaseRecord) -> Vec<NotChecked> {
    case.measurements
        .get(NOT_CHECKED)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// `not checked: TTFT accuracy (why); …`, or nothing (the report's words).
pub fn line(case: &CaseRecord) -> Option<String> {
    words(case, usize::MAX)
}

/// The same for the summary: each reason cut to a few words (the report
/// and results.json have it whole).
pub fn short_line(case: &CaseRecord) -> Option<String> {
    words(case, SHORT_WHY)
}

/// Characters of a reason the summary shows.
const SHORT_WHY: usize = 60;

fn words(case: &CaseRecord, max_why: usize) -> Option<String> {
    let list = of(case);
    if list.is_empty() {
        return None;
    }
    let cut = |why: &str| match why.char_indices().nth(max_why) {
        Some((at, _)) => format!("{}…", why[..at].trim_end()),
        None => why.to_string(),
    };
    Some(format!(
        "not checked: {}",
        list.iter()
            .map(|n| format!("{} ({})", n.check, cut(&n.why)))
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_names_what_it_did_not_check() {
        let mut c = CaseRecord::start("TC-05", "TC-05::cold");
        assert_eq!(line(&c), None);
        c.measure(
            NOT_CHECKED,
            vec![
                NotChecked::new("TTFT accuracy", "vllm stamps no first token"),
                NotChecked::new("pages per kind", "the engine counts none"),
            ],
        );
        assert_eq!(
            line(&c).unwrap(),
            "not checked: TTFT accuracy (vllm stamps no first token); pages per kind (the engine counts none)"
        );
        c.measure(
            NOT_CHECKED,
            vec![NotChecked::new("TTFT accuracy", "x".repeat(100))],
        );
        assert_eq!(
            short_line(&c).unwrap(),
            format!("not checked: TTFT accuracy ({}…)", "x".repeat(60))
        );
    }
}
