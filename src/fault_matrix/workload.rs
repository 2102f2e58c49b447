//! WL-01's fault matrix (`cargo test --test fault_matrix_workload`, on the
//! `workload` stack): each row turns one CPU-engine switch on both workers
//! and replays the trace, which must fail on the clause the row names.
//! The planted KVCR policy bugs that only lower the hit rate are not here:
//! `kvcr-e2e compare` on the workload lane reports them
//! (`fixtures/kvcr-policy-bugs/`).

use crate::cases::wl01_trace_replay as wl01;
use crate::engine::Need;
use crate::suite::{EngineFault, Expect, Fault, FaultRow, RowDoc, Workers};
use crate::verdict::workload::{REPLAY_ANSWERED, TIERS_RECONCILE};

const A_AND_B: Workers = Workers::Slots(&["A", "B"]);

pub static ROWS: &[FaultRow] = &[
    // Every answer's fifth token is off by one: the replay's tokens are
    // checked against the KVCR-off reference replay, request by request.
    FaultRow {
        case: wl01::CASE,
        name: "wrong_tokens_in_a_replay_are_caught",
        fault: Fault::Engine(A_AND_B, EngineFault::WrongTokenAfter(4)),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(REPLAY_ANSWERED, "requests answered other tokens than the KVCR-off reference"),
        doc: RowDoc {
            fault: "`wrong_token_after=4` on A and B: every answer of five tokens or more has a wrong fifth token",
            caught_by: "WL-01",
            message: "`every request of the trace answered with the reference tokens: N of 200 requests answered other tokens than the KVCR-off reference (first: request …)`",
        },
    },
    // The answers say one block of a hit: the hit rate the answers report
    // no longer adds up to what the engines counted.
    FaultRow {
        case: wl01::CASE,
        name: "answers_understating_cached_tokens_are_caught",
        fault: Fault::Engine(A_AND_B, EngineFault::CachedTokensFirstBlock),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(TIERS_RECONCILE, "the answers' cached_tokens sum to"),
        doc: RowDoc {
            fault: "`cached_tokens_first_block` on A and B: an answer's `cached_tokens` says at most one block, though the engines counted every reused block",
            caught_by: "WL-01",
            message: "`hit rate per tier reconciles: the answers' cached_tokens sum to N, the engines counted M (device … + external …)`",
        },
    },
];
