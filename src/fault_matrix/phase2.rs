//! The production cases' fault matrix (`cargo test --test
//! fault_matrix_phase2`, on the `phase2` stack): each row turns one
//! CPU-engine switch on worker A and runs the production case that must
//! catch it. The planted KVCR bugs that turn these cases red are in
//! `fixtures/kvcr-mutants/` (`p2-*`).

use crate::cases::{
    tc07_pool_pressure as tc07, tc09_clean_restart as tc09, tc11_source_stall_latch as tc11,
};
use crate::suite::{EngineFault, Fault, FaultRow, Workers};

const A: Workers = Workers::Slots(&["A"]);

pub static ROWS: &[FaultRow] = &[
    // The engine reports every deposited block a success, whatever KVCR said.
    FaultRow {
        case: tc07::CASE,
        name: "hidden_failed_deposit_is_caught",
        fault: Fault::Engine(A, EngineFault::HideFailedDeposits),
        claim: "a deposit into a full pool is reported failed",
    },
    // The engine never tells the router that a block left KVCR's pool.
    FaultRow {
        case: tc07::CASE,
        name: "evicted_block_still_published_is_caught",
        fault: Fault::Engine(A, EngineFault::DropRemovedInventory),
        claim: "an evicted prefix is no longer hinted",
    },
    // On SIGTERM the engine exits without closing KVCR: a death, not a release.
    FaultRow {
        case: tc09::CASE,
        name: "exit_without_handback_is_caught",
        fault: Fault::Engine(A, EngineFault::NoHandback),
        claim: "a clean stop hands the pool back without a promotion",
    },
    // The engine drops KVCR's source-stall latch on the floor.
    FaultRow {
        case: tc11::CASE,
        name: "hidden_stall_latch_is_caught",
        fault: Fault::Engine(A, EngineFault::HideSourceStall),
        claim: "the source-stall latch is reported as a fact",
    },
];
