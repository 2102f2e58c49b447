//! The phase 3 cases' fault matrix (`cargo test --test
//! fault_matrix_phase3`, on the `phase3` stack). The planted KVCR bugs that
//! turn TC-17's other verdicts red are in `fixtures/kvcr-mutants/`
//! (`p3-*`).

use crate::cases::tc15_peer_pause as tc15;
use crate::cases::tc17_concurrent_same_prefix as tc17;
use crate::engine::Need;
use crate::suite::{EngineFault, Expect, Fault, FaultRow, RowDoc, Workers};
use crate::verdict::{concurrent, stall};

const A: Workers = Workers::Slots(&["A"]);

pub static ROWS: &[FaultRow] = &[
    // The requests' deposits never overlap: TC-17 would prove nothing.
    FaultRow {
        case: tc17::CASE,
        name: "deposits_that_never_overlap_are_caught",
        needs: &[Need::FaultSwitches],
        fault: Fault::Engine(A, EngineFault::HitsDuringPrefill),
        expect: Expect::clause(concurrent::DEPOSITS_OVERLAPPED, "no deposit met a filling block"),
        doc: RowDoc {
            fault: "`hits_during_prefill`: a block a prefill in flight computes is a device hit for the other requests at once, so only the first request computes and deposits the prefix",
            caught_by: "TC-17 (the overlap)",
            message: "`a deposit met blocks KVCR was still filling: no deposit met a filling block: 8 requests for one 5-block prefix computed 5 blocks and deposited 5, never while KVCR was still copying another's`",
        },
    },
    // The engine drops KVCR's source-stall latch: the pause leaves no trace.
    FaultRow {
        case: tc15::CASE,
        name: "hidden_latch_after_a_pause_is_caught",
        needs: &[Need::FaultSwitches],
        fault: Fault::Engine(A, EngineFault::HideSourceStall),
        expect: Expect::clause(
            stall::LATCH_REPORTED,
            "reported no source-stall latch after a stop longer than operation_timeout_ms",
        ),
        doc: RowDoc {
            fault: "`hide_source_stall`: the engine drops KVCR's source-stall event (no line, no counter, `/state` false)",
            caught_by: "TC-15 (after the pause)",
            message: "`the source-stall latch is reported as a fact: worker-A reported no source-stall latch after a stop longer than operation_timeout_ms`",
        },
    },
];
