//! Which cases apply to which engine and topology. Each engine's room
//! answers for itself ([`super::Engine::applies`]); [`super::Kind::applies`]
//! asks the chosen one and says where the answer came from.
//!
//! | engine  | agg            | 2p1d                      | two-node                  |
//! |---------|----------------|---------------------------|---------------------------|
//! | cpu     | TC-01..TC-06   | TC-01..TC-06              | TC-01..04, TC-06 (root)   |
//! | vllm    | TC-01..06, TC-08..11 | TC-01..04, TC-06    | TC-01..04, TC-06          |
//! | sglang  | TC-01, 02, 05  | none (no disaggregation)  | TC-01, 02                 |
//!
//! TC-05's arms and baselines are defined on the aggregated topology, so the
//! performance case is reported ignored on the others ([`off_agg`]).
//!
//! The production-conditions cases (TC-07..TC-12, `cargo test --test phase2`
//! and `phase2_g3`) run on the CPU engine on agg ([`production_on`]). On
//! vLLM (agg, `cargo test --test phase2_vllm`) TC-08, TC-09,
//! TC-10 and TC-11 run too, with the checks that need per-block reports
//! recorded as not checked; TC-07 and TC-12 are reported ignored, each with
//! its reason ([`production_on_vllm`]). SGLang runs none of them
//! ([`NEEDS_CPU_KVCR_REPORTS`]).

use serde::Serialize;

/// The case ids: phase 1's TC-01..TC-06, the production-conditions cases
/// TC-07..TC-12, then phase 3's (TC-17).
pub const KNOWN_CASES: &[&str] = &[
    "TC-01", "TC-02", "TC-03", "TC-04", "TC-05", "TC-06", "TC-07", "TC-08", "TC-09", "TC-10",
    "TC-11", "TC-12", "TC-17",
];

/// Why a production-conditions case does not run on an engine other than
/// the CPU engine.
pub const NEEDS_CPU_KVCR_REPORTS: &str = "needs the CPU engine's KVCR reports (per-block deposit outcomes, KVCR inventory events, deliveries by source, /kvcr/holding, the stall latch), which this engine does not expose";

/// Why TC-07 does not run on vLLM.
pub const TC07_ON_VLLM: &str = "TC-07 reads which blocks left KVCR's pool from KVCR's per-block inventory events and asks where each block is held (/kvcr/holding), and fills the pool with pinned deposits (the CPU engine's pin_deposits switch); vLLM's KVCR adapter sends its inventory events to the router only, answers no holding query, and vLLM's own primary host tier decides which blocks reach KVCR's pool";

/// Why TC-12 does not run on vLLM.
pub const TC12_ON_VLLM: &str = "TC-12 proves a spill to disk and a read from it block by block (KVCR's `stored` events in G3, /kvcr/holding answering `g3`, deliveries `from=g3`); vLLM's KVCR adapter accepts a `g3` tier but reports none of these per block";

/// Which production-conditions cases run on vLLM (agg only): TC-08,
/// TC-09, TC-10 and TC-11 need only what every engine shows (the Guard's
/// log, KVCR's own log lines, the engine's counters, signals to the
/// worker's process group, the Guard service holding a worker's pool, shared
/// or its own); the others need the CPU engine's per-block reports or
/// switches.
pub fn production_on_vllm(case: Case, topology: super::Topology) -> Applicability {
    match case.number() {
        7 => Applicability::ignored(TC07_ON_VLLM),
        12 => Applicability::ignored(TC12_ON_VLLM),
        17 => Applicability::ignored(NEEDS_CPU_KVCR_REPORTS),
        _ => production_on(topology),
    }
}

/// Why a production-conditions case does not run off the aggregated topology.
pub const PRODUCTION_ON_AGG: &str =
    "the production-conditions cases are defined on the agg topology";

/// Why TC-05 does not run off the aggregated topology.
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

/// A phase 1 case as an engine is asked about it: `TC-05/cold` and
/// `tc-05::sweep` are TC-05.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case(u8);

impl Case {
    /// The case of `case_id` (a case or one of its arms), if it is one of
    /// [`KNOWN_CASES`].
    pub fn of(case_id: &str) -> Option<Self> {
        match base_case_id(case_id)
            .strip_prefix("TC-")
            .and_then(|d| d.parse().ok())
        {
            Some(n @ (1..=12 | 17)) => Some(Case(n)),
            _ => None,
        }
    }

    /// The TC number: 5 for TC-05.
    pub fn number(self) -> u8 {
        self.0
    }

    /// Whether this is a production-conditions case (TC-07..TC-12) or a
    /// phase 3 case (TC-17): both run on agg only.
    pub fn is_production(self) -> bool {
        self.0 >= 7
    }

    /// `TC-05`.
    pub fn id(self) -> String {
        format!("TC-{:02}", self.0)
    }
}

/// The CPU engine's answer for a production-conditions case: it runs on
/// agg only ([`PRODUCTION_ON_AGG`]).
pub fn production_on(topology: super::Topology) -> Applicability {
    match topology {
        super::Topology::Agg => Applicability::Applies,
        _ => Applicability::ignored(PRODUCTION_ON_AGG),
    }
}

/// `TC-05/cold`, `tc-05::sweep` → `TC-05`.
pub fn base_case_id(case_id: &str) -> String {
    let upper = case_id.trim().to_ascii_uppercase();
    upper.chars().take(5).collect()
}

/// The answer for a case id that is no phase 1 case.
pub fn unknown_case(case_id: &str) -> Applicability {
    Applicability::Ignored(format!(
        "`{case_id}` is not a known case (known: {})",
        KNOWN_CASES.join(", ")
    ))
}

/// An engine's answer about `case`, its reason saying which case, engine
/// and topology it is about.
pub fn in_context(
    answer: Applicability,
    case: Case,
    engine: &str,
    topology: super::Topology,
) -> Applicability {
    match answer {
        Applicability::Applies => Applicability::Applies,
        Applicability::Ignored(why) => {
            Applicability::Ignored(format!("{} on {engine}/{topology}: {why}", case.id()))
        }
    }
}

/// A case on a topology other than agg: every case applies but TC-05
/// ([`PERFORMANCE_ON_AGG`]).
pub fn off_agg(case: Case) -> Applicability {
    if case.number() == 5 {
        Applicability::ignored(PERFORMANCE_ON_AGG)
    } else {
        Applicability::Applies
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Kind, Topology};
    use super::*;

    #[test]
    fn applicability_table() {
        use Applicability::*;
        let applies = |e: Kind, t, c| e.applies(c, t).applies();
        for c in &KNOWN_CASES[..6] {
            assert!(applies(Kind::Cpu, Topology::Agg, c));
            assert!(applies(Kind::Vllm, Topology::Agg, c));
            assert!(applies(Kind::Cpu, Topology::TwoP1D, c));
            assert_eq!(
                applies(Kind::Cpu, Topology::TwoNode, c),
                !c.starts_with("TC-05"),
                "{c}"
            );
            assert!(!applies(Kind::Sglang, Topology::TwoP1D, c));
        }
        for c in ["TC-01", "TC-02", "TC-05/cold"] {
            assert!(applies(Kind::Sglang, Topology::Agg, c), "{c}");
        }
        for t in [Topology::Agg, Topology::TwoNode] {
            match Kind::Sglang.applies("TC-03", t) {
                Ignored(r) => assert!(
                    r.contains("no router_hint in Dynamo 1.6.1's SGLang worker"),
                    "{r}"
                ),
                Applies => panic!(
                    "TC-03 on sglang/{t} must be ignored until dynamo.sglang publishes router_hint"
                ),
            }
        }
        for c in ["TC-04", "TC-06"] {
            assert_eq!(
                Kind::Sglang.applies(c, Topology::Agg),
                Ignored(format!(
                    "{c} on sglang/agg: SGLang has no Guard and no disaggregation in KVCR 0.1.1"
                ))
            );
        }
        for t in [Topology::TwoP1D, Topology::TwoNode] {
            for c in ["TC-01", "TC-02", "TC-03", "TC-04", "TC-06"] {
                assert!(applies(Kind::Vllm, t, c), "{c} {t}");
            }
            assert!(!applies(Kind::Vllm, t, "TC-05"));
        }
        assert!(applies(Kind::Sglang, Topology::TwoNode, "TC-02"));
        assert!(!applies(Kind::Sglang, Topology::TwoNode, "TC-05"));
        assert!(applies(Kind::Cpu, Topology::TwoNode, "tc-02"));
        assert_eq!(
            Kind::Cpu.applies("TC-05/cold", Topology::TwoNode),
            Ignored(format!("TC-05 on cpu/two-node: {PERFORMANCE_ON_AGG}"))
        );
        assert_eq!(
            Kind::Cpu.applies("TC-13", Topology::Agg),
            Ignored(
                "`TC-13` is not a known case (known: TC-01, TC-02, TC-03, TC-04, TC-05, TC-06, TC-07, TC-08, TC-09, TC-10, TC-11, TC-12, TC-17)"
                    .into()
            )
        );
    }

    #[test]
    fn production_cases_run_on_vllm_where_they_need_no_cpu_engine_report() {
        for c in ["TC-08", "TC-09", "TC-10", "TC-11"] {
            assert!(Kind::Vllm.applies(c, Topology::Agg).applies(), "{c}");
            assert!(!Kind::Vllm.applies(c, Topology::TwoP1D).applies(), "{c}");
        }
        for (c, why) in [
            ("TC-07", TC07_ON_VLLM),
            ("TC-12", TC12_ON_VLLM),
            ("TC-17", NEEDS_CPU_KVCR_REPORTS),
        ] {
            assert_eq!(
                Kind::Vllm.applies(c, Topology::Agg),
                Applicability::Ignored(format!("{c} on vllm/agg: {why}"))
            );
        }
    }

    #[test]
    fn production_cases_run_on_the_cpu_engine_on_agg_only() {
        for c in &KNOWN_CASES[6..] {
            assert!(Kind::Cpu.applies(c, Topology::Agg).applies(), "{c}");
            for (e, t) in [
                (Kind::Cpu, Topology::TwoP1D),
                (Kind::Cpu, Topology::TwoNode),
                (Kind::Sglang, Topology::Agg),
            ] {
                let Applicability::Ignored(why) = e.applies(c, t) else {
                    panic!("{c} on {e:?}/{t} should be ignored");
                };
                assert!(why.contains(c), "{why}");
            }
        }
    }

    #[test]
    fn cases_are_read_from_their_arms() {
        assert_eq!(Case::of("tc-05::sweep").map(Case::number), Some(5));
        assert_eq!(
            Case::of("TC-05/cold").map(Case::id).as_deref(),
            Some("TC-05")
        );
        assert_eq!(Case::of("TC-07").map(Case::is_production), Some(true));
        assert_eq!(Case::of("TC-12").map(Case::id).as_deref(), Some("TC-12"));
        assert_eq!(Case::of("TC-13"), None);
        assert_eq!(Case::of("TC-00"), None);
    }
}
