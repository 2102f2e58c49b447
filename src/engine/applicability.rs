//! Whether a trial runs on a stack, computed from what it needs
//! ([`super::Need`]) and what the engine supports on the topology
//! ([`super::Engine::supports`]): the first need the engine does not give,
//! in the order the trial lists them and then the topology itself, makes
//! the trial ignored with the engine's reason ([`applicability`]). The
//! same answers make a case's optional checks "not checked"
//! (`CaseCtx::supports`), and docs/test-plan.md's table of which case runs
//! where is generated from them (`cases::table`).

use serde::Serialize;

use super::needs::{Need, Support};
use super::Topology;

/// The case ids `--cases` accepts: phase 1's TC-01..TC-06, then the
/// production-conditions cases TC-07..TC-12 (a unit test of `cases` keeps
/// it equal to the registered cases' ids).
pub const KNOWN_CASES: &[&str] = &[
    "TC-01", "TC-02", "TC-03", "TC-04", "TC-05", "TC-06", "TC-07", "TC-08", "TC-09", "TC-10",
    "TC-11", "TC-12", "TC-13", "TC-14", "TC-15", "TC-16", "TC-17", "TC-18", "TC-19", "TC-20",
    "TC-21", "TC-22", "TC-23", "TC-24",
];

/// Why a production-conditions case does not run off the aggregated
/// topology (the CPU engine's and vLLM's answer for
/// [`Need::ProductionConditions`]).
pub const PRODUCTION_ON_AGG: &str =
    "the production-conditions cases are defined on the agg topology";

/// Why TC-05 does not run off the aggregated topology (an answer for
/// [`Need::PerformanceArms`]).
pub const PERFORMANCE_ON_AGG: &str =
    "the performance arms and their KVCR-disabled baselines are defined on the agg topology";

/// Whether a case runs on a stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "applicability", content = "reason", rename_all = "snake_case")]
pub enum Applicability {
    /// The case runs.
    Applies,
    /// The case is reported ignored, with the reason.
    Ignored(String),
}

impl Applicability {
    /// Whether the case runs.
    pub fn applies(&self) -> bool {
        matches!(self, Applicability::Applies)
    }

    /// Ignored because of `why`.
    pub fn ignored(why: impl Into<String>) -> Self {
        Applicability::Ignored(why.into())
    }
}

/// Whether trial `case_id` (`TC-04`), which needs `needs`, runs on
/// `engine` (its registry word) on `topology`, where `supports` is that
/// engine's answer: the first need it does not give (the trial's in their
/// order, then [`Need::Topology`]) makes it ignored, the reason saying
/// which case, engine and topology it is about.
pub fn applicability(
    case_id: &str,
    needs: &[Need],
    engine: &str,
    topology: Topology,
    supports: impl Fn(Need, Topology) -> Support,
) -> Applicability {
    let missing = needs
        .iter()
        .chain([Need::Topology].iter())
        .find_map(|need| match supports(*need, topology) {
            Support::Yes => None,
            Support::No(why) => Some(why),
        });
    match missing {
        None => Applicability::Applies,
        Some(why) => Applicability::Ignored(format!("{case_id} on {engine}/{topology}: {why}")),
    }
}

/// `TC-05/cold`, `tc-05::sweep` → `TC-05`.
pub fn base_case_id(case_id: &str) -> String {
    let upper = case_id.trim().to_ascii_uppercase();
    upper.chars().take(5).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that gives a Guard on agg only, and nothing else but the
    /// topology.
    fn guard_on_agg(need: Need, topology: Topology) -> Support {
        match need {
            Need::Topology => Support::given(topology != Topology::TwoP1D, "no 2p1d here"),
            Need::Guard => Support::given(topology == Topology::Agg, "a Guard on agg only"),
            _ => Support::no(format!("no {}", need.label())),
        }
    }

    #[test]
    fn the_first_need_not_given_says_why_in_context() {
        let of = |needs: &[Need], t| applicability("TC-04", needs, "demo", t, guard_on_agg);
        assert_eq!(of(&[Need::Guard], Topology::Agg), Applicability::Applies);
        assert_eq!(of(&[], Topology::TwoNode), Applicability::Applies);
        assert_eq!(
            of(&[Need::Guard], Topology::TwoNode),
            Applicability::Ignored("TC-04 on demo/two-node: a Guard on agg only".into())
        );
        // The trial's own needs come first, in their order...
        assert_eq!(
            of(&[Need::RouterHints, Need::Guard], Topology::TwoNode),
            Applicability::Ignored("TC-04 on demo/two-node: no router hints".into())
        );
        assert_eq!(
            of(&[Need::Guard, Need::RouterHints], Topology::TwoNode),
            Applicability::Ignored("TC-04 on demo/two-node: a Guard on agg only".into())
        );
        // ... then the topology itself, which a trial without needs needs too.
        assert_eq!(
            of(&[], Topology::TwoP1D),
            Applicability::Ignored("TC-04 on demo/2p1d: no 2p1d here".into())
        );
        assert_eq!(
            of(&[Need::Guard], Topology::TwoP1D),
            Applicability::Ignored("TC-04 on demo/2p1d: a Guard on agg only".into())
        );
    }

    #[test]
    fn base_case_ids_are_read_from_their_arms() {
        assert_eq!(base_case_id("tc-05::sweep"), "TC-05");
        assert_eq!(base_case_id(" TC-05/cold"), "TC-05");
    }
}
