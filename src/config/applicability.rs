//! Which cases apply to which engine and topology.
//!
//! | engine  | agg            | 2p1d                      | two-node                  |
//! |---------|----------------|---------------------------|---------------------------|
//! | cpu     | TC-01..TC-06   | TC-01..TC-06              | TC-01..04, TC-06 (root)   |
//! | vllm    | TC-01..TC-06   | TC-01..04, TC-06          | TC-01..04, TC-06          |
//! | sglang  | TC-01, 02, 05  | none (no disaggregation)  | TC-01, 02                 |
//!
//! TC-05's arms and baselines are defined on the aggregated topology, so the
//! performance case is reported ignored on the others.
//!
//! The production-conditions cases (TC-07..TC-12, `cargo test --test phase2`)
//! run on the CPU engine on agg: they read what only the CPU engine exposes
//! of its KVCR (per-block deposit outcomes, KVCR's inventory events,
//! deliveries by source, `/kvcr/holding`, the stall latch); dynamo.vllm
//! exposes none of these, so they are reported ignored there, with the reason.

use serde::Serialize;

use super::settings::{Engine, Topology};

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
}

const SGLANG: &str = "SGLang has no Guard and no disaggregation in KVCR 0.1.1";
/// Why TC-03 does not run on SGLang (yet).
pub const SGLANG_NO_ROUTER_HINT: &str =
    "no router_hint in Dynamo 1.6.1's SGLang worker (dynamo.sglang publishes no router_hint capability, so no hinted peer transfer can happen)";

/// `TC-05/cold`, `tc-05::sweep` → `TC-05`.
pub fn base_case_id(case_id: &str) -> String {
    let upper = case_id.trim().to_ascii_uppercase();
    upper.chars().take(5).collect()
}

/// Whether `case_id` (a case or one of its arms, e.g. `TC-05/cold`) applies
/// to `engine` on `topology`.
pub fn applicability(engine: Engine, topology: Topology, case_id: &str) -> Applicability {
    let id = base_case_id(case_id);
    if let Some(n @ 7..=12) = id.strip_prefix("TC-").and_then(|d| d.parse::<u8>().ok()) {
        return production_case(engine, topology, &id, n);
    }
    let n: u8 = match id.strip_prefix("TC-0").and_then(|d| d.parse().ok()) {
        Some(n @ 1..=6) => n,
        _ => {
            return Applicability::Ignored(format!(
                "`{case_id}` is not a phase 1 case (known: {})",
                super::KNOWN_CASES.join(", ")
            ))
        }
    };
    let ignored =
        |why: String| Applicability::Ignored(format!("{id} on {engine}/{topology}: {why}"));
    match (engine, topology) {
        (Engine::Cpu, Topology::Agg | Topology::TwoPrefillOneDecode)
        | (Engine::Vllm, Topology::Agg) => Applicability::Applies,
        (Engine::Cpu | Engine::Vllm, _) if n == 5 => ignored(
            "the performance arms and their KVCR-disabled baselines are defined on the agg topology"
                .to_string(),
        ),
        (Engine::Cpu | Engine::Vllm, _) => Applicability::Applies,
        (Engine::Sglang, Topology::TwoPrefillOneDecode) => ignored(SGLANG.to_string()),
        (Engine::Sglang, _) if n == 4 || n == 6 => ignored(SGLANG.to_string()),
        (Engine::Sglang, _) if n == 3 => ignored(SGLANG_NO_ROUTER_HINT.to_string()),
        (Engine::Sglang, Topology::TwoNode) if n == 5 => ignored(
            "the performance arms and their KVCR-disabled baselines are defined on the agg topology"
                .to_string(),
        ),
        (Engine::Sglang, _) => Applicability::Applies,
    }
}

/// TC-07..TC-12: the CPU engine on agg.
fn production_case(engine: Engine, topology: Topology, id: &str, _n: u8) -> Applicability {
    match (engine, topology) {
        (Engine::Cpu, Topology::Agg) => Applicability::Applies,
        (Engine::Cpu, _) => Applicability::Ignored(format!(
            "{id} on {engine}/{topology}: the production-conditions cases are defined on the agg topology"
        )),
        _ => Applicability::Ignored(format!(
            "{id} on {engine}/{topology}: needs the CPU engine's KVCR reports (per-block deposit outcomes, KVCR inventory events, deliveries by source, /kvcr/holding, the stall latch), which {engine} does not expose"
        )),
    }
}
