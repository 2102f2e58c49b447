//! What a case or a fault row can need from a stack ([`Need`]), and an
//! engine's answer on a topology ([`Support`]). A case lists what it must
//! have (else its trial is ignored with the engine's reason) and what it
//! checks only where given (else that check is recorded "not checked" with
//! the reason); each engine answers `supports(need, topology)` in its own
//! room ([`super::Engine::supports`]). [`super::applicability`] turns the
//! answers into a trial's applicability.

/// Something a stack can give a case. Each engine answers for every need
/// on every topology ([`super::Engine::supports`]), `No` with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Need {
    /// The engine runs the topology at all: its workers in the topology's
    /// roles. Every trial needs it; it is asked after the trial's own needs,
    /// and no case lists it.
    Topology,
    /// KVCR's Guard service holds each worker's pool, so a dead worker's
    /// blocks are served and reclaimed.
    Guard,
    /// Dynamo's router hints a peer that holds a request's prefix
    /// (`router_hint`), so a hinted peer transfer can happen.
    RouterHints,
    /// The stack the performance arms and their KVCR-disabled baselines are
    /// defined on: two peers that each serve a prompt whole, on one node.
    PerformanceArms,
    /// The production-conditions stack: Guard pools the working set
    /// overflows, heartbeat promotion, KVCR's operation timeout, read from
    /// the Guard's log, KVCR's own log lines and the engine's counters.
    ProductionConditions,
    /// Which blocks leave KVCR's pool, block by block (KVCR's inventory
    /// events in the worker's log, where each block is held), in a pool the
    /// harness fills itself (pinned deposits).
    PoolEvictionReports,
    /// KVCR's disk tier (G3) reported block by block: `stored` events in G3,
    /// holdings in `g3`, deliveries `from=g3`.
    DiskTierReports,
    /// The CPU engine's fault switches (`GET/POST /faults`, `--fault` at
    /// launch), which a fault row turns on.
    FaultSwitches,
    /// The engine counts the KVCR pages it read per page kind
    /// (`Counter::KvcrReadPages`), so a hybrid geometry's exact pages per
    /// kind can be checked.
    PagesPerKind,
    /// The engine's KVCR tier answers a hinted query by the hint's block
    /// list (KVCR's `opportunistic_query` off), so hint membership is
    /// KVCR's behaviour there.
    ExactHintMembership,
    /// A ledger of every block, kept through a death or a restart: the
    /// workers log KVCR's per-block inventory events and deliveries and
    /// answer where KVCR holds a block (`/kvcr/holding`).
    BlockLedger,
    /// The workers relay KVCR's resilience events and its close to their
    /// log as the engine's own lines (`KVCR resilience event
    /// kind=source_stalled`, `KVCR closed: Guard group N handed back`) and
    /// answer `GET /state`.
    RelayedKvcrEvents,
    /// The `KV Transfer metrics` log line and `/metrics` are independent
    /// sources, so their agreement means something.
    IndependentIntervalLog,
    /// The worker logs the instant it sent each request's first token
    /// (`request <dynamo id>: first token sent monotonic_ns=N
    /// realtime_ns=M`, written right after the token left, CLOCK_MONOTONIC
    /// read before the send), for TC-05's TTFT accuracy.
    FirstTokenStamps,
    /// The engine counts each deposit's outcome per block
    /// (`cpu_engine_kvcr_deposit_blocks`) and the blocks a deposit found
    /// KVCR still filling from another (`cpu_engine_kvcr_deposit_met_filling_blocks`),
    /// so concurrent deposits of one prefix can be judged (TC-17).
    DepositReports,
    /// The engine counts the blocks of its own memory KVCR pinned and
    /// released for peers' reads (`cpu_engine_kvcr_framework_pin_blocks`)
    /// and the blocks it staged with `KVCR.fetch`
    /// (`cpu_engine_kvcr_fetch_blocks`), so reads served from engine memory
    /// and fetches can be judged (TC-18).
    EngineMemoryReports,
    /// A link between two nodes that the run created and may cut: the
    /// two-node topology's veth (TC-13).
    NodeLink,
    /// The worker runs KVCR operations on request, timed apart from any
    /// request: delivers of blocks it holds (`POST /kvcr/bench/deliver`;
    /// from KVCR's disk tier, `POST /kvcr/bench/g3_read`) and hinted pulls
    /// from a peer (`POST /kvcr/bench/pull`), so TC-05 can time hundreds of
    /// host-tier delivers and peer pulls a round, and TC-12 hundreds of
    /// reads from disk.
    DeliverBench,
    /// A third aggregated worker, C, beside A and B: one prefix can be
    /// hinted to two targets at once, or a third peer speak on a worker's
    /// channel (TC-17's fan-out, TC-22).
    ThirdAggregatedWorker,
}

impl Need {
    /// Every need, in the order the docs list them.
    pub const ALL: [Need; 19] = [
        Need::Topology,
        Need::Guard,
        Need::RouterHints,
        Need::PerformanceArms,
        Need::ProductionConditions,
        Need::PoolEvictionReports,
        Need::DiskTierReports,
        Need::FaultSwitches,
        Need::PagesPerKind,
        Need::ExactHintMembership,
        Need::BlockLedger,
        Need::RelayedKvcrEvents,
        Need::IndependentIntervalLog,
        Need::FirstTokenStamps,
        Need::DepositReports,
        Need::EngineMemoryReports,
        Need::NodeLink,
        Need::DeliverBench,
        Need::ThirdAggregatedWorker,
    ];

    /// How the docs name it.
    pub fn label(self) -> &'static str {
        match self {
            Need::Topology => "the topology",
            Need::Guard => "a Guard",
            Need::RouterHints => "router hints",
            Need::PerformanceArms => "the performance arms' stack",
            Need::ProductionConditions => "production conditions",
            Need::PoolEvictionReports => "pool eviction reports",
            Need::DiskTierReports => "disk-tier reports",
            Need::FaultSwitches => "fault switches",
            Need::PagesPerKind => "pages per kind",
            Need::ExactHintMembership => "exact hint membership",
            Need::BlockLedger => "a block ledger",
            Need::RelayedKvcrEvents => "relayed KVCR events",
            Need::IndependentIntervalLog => "an independent interval log",
            Need::FirstTokenStamps => "first-token stamps",
            Need::DepositReports => "deposit reports",
            Need::EngineMemoryReports => "engine-memory reports",
            Need::NodeLink => "a link between nodes",
            Need::DeliverBench => "a KVCR bench",
            Need::ThirdAggregatedWorker => "a third aggregated worker",
        }
    }
}

/// An engine's answer about a need on a topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    Yes,
    /// Not given, and why (the words a user reads after `<case> on
    /// <engine>/<topology>: `, or in a "not checked" record).
    No(String),
}

impl Support {
    /// Not given because of `why`.
    pub fn no(why: impl Into<String>) -> Self {
        Support::No(why.into())
    }

    /// `Yes` when `given`, else `No(why)`.
    pub fn given(given: bool, why: impl Into<String>) -> Self {
        if given {
            Support::Yes
        } else {
            Support::no(why)
        }
    }

    pub fn is_yes(&self) -> bool {
        matches!(self, Support::Yes)
    }

    /// Why not, when not given.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Support::Yes => None,
            Support::No(why) => Some(why),
        }
    }
}

/// Why a case that cuts the link between nodes does not run on `topology`.
pub fn node_link(topology: super::Topology) -> Support {
    Support::given(
        topology == super::Topology::TwoNode,
        "it cuts the link between two nodes, which only the two-node topology has (its veth)",
    )
}

/// Why a case that needs a third aggregated worker does not run on
/// `topology`: only the agg topology starts one (profile key
/// `cpu_engine.agg_workers = 3`).
pub fn third_aggregated_worker(topology: super::Topology) -> Support {
    Support::given(
        topology == super::Topology::Agg,
        "it needs a third aggregated worker, C, which only the agg topology starts (profile key `cpu_engine.agg_workers = 3`)",
    )
}

/// The answer of an engine (`engine`, its registry word) that does not give
/// `need` and has nothing to add: for the optional needs, the words the
/// "not checked" record has always given.
pub fn without(need: Need, engine: &str) -> Support {
    Support::No(match need {
        Need::PagesPerKind => format!(
            "the {engine} engine counts no pages per kind; only the total bytes were checked"
        ),
        Need::ExactHintMembership => "this engine's KVCR tier queries opportunistically (opportunistic_query on, vLLM's default), so a hinted request may pull blocks the hint does not name by design".into(),
        Need::BlockLedger => format!(
            "{engine} workers log no KVCR inventory events per block and answer no per-block holding query"
        ),
        Need::RelayedKvcrEvents => "this engine does not relay KVCR's close to its log; the handback is the Guard's `snapshot_written`".into(),
        Need::IndependentIntervalLog => {
            format!("the {engine} engine writes both from one; checked as its consistency")
        }
        Need::FirstTokenStamps => format!(
            "{engine} records no per-request first-token instant the harness can read"
        ),
        Need::ThirdAggregatedWorker => format!(
            "the {engine} lanes start two aggregated workers; only the CPU engine starts a third (profile key `cpu_engine.agg_workers = 3`)"
        ),
        Need::DeliverBench => "only the CPU engine runs KVCR delivers and pulls on request (POST /kvcr/bench/deliver, /kvcr/bench/pull); on this engine KVCR's deliver and pull times are read from TC-05's arms".into(),
        Need::FaultSwitches => format!(
            "the {engine} engine has no fault switches (the fault rows that turn one on run on the CPU engine)"
        ),
        other => format!("the {engine} engine does not give {}", other.label()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_need_is_listed_once_with_its_own_label() {
        let mut labels: Vec<&str> = Need::ALL.iter().map(|n| n.label()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), Need::ALL.len());
        let mut sorted = Need::ALL;
        sorted.sort();
        assert_eq!(sorted, Need::ALL, "ALL is in declaration order");
    }

    #[test]
    fn a_support_says_why_not() {
        assert_eq!(Support::given(true, "x"), Support::Yes);
        let no = Support::given(false, "no Guard");
        assert!(!no.is_yes());
        assert_eq!(no.reason(), Some("no Guard"));
        assert_eq!(Support::Yes.reason(), None);
    }
}
