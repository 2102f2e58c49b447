//! The fault matrix of the disaggregated paths (`cargo test --test
//! fault_matrix_2p1d`): on a 2P+1D stack, each row targets the P→D check of
//! TC-01 (a fresh prompt: the decode must pull exactly its full blocks from
//! the prefill that answered).

use crate::cases::tc01_generation_correctness as tc01;
use crate::suite::{EngineFault, Fault, FaultRow, Workers};

pub static ROWS: &[FaultRow] = &[
    // The decode's pulled pages are corrupted after delivery: wrong tokens.
    FaultRow {
        case: tc01::CASE,
        name: "decode_given_wrong_pages_is_caught",
        fault: Fault::Engine(Workers::Decode, EngineFault::CorruptDeliveredPages),
        claim: "reference tokens",
    },
    // The decode reports one page more than it read.
    FaultRow {
        case: tc01::CASE,
        name: "decode_misreporting_bytes_is_caught",
        fault: Fault::Engine(Workers::Decode, EngineFault::WrongTransferBytes),
        claim: "P→D transfer reconciles",
    },
    // The decode reports one block fewer than it pulled.
    FaultRow {
        case: tc01::CASE,
        name: "decode_underreporting_blocks_is_caught",
        fault: Fault::Engine(Workers::Decode, EngineFault::UnderreportBlocks),
        claim: "decode remote_deliver blocks 3 ≠ 4 full blocks of the prompt",
    },
    // The decode's KVCR progress loop fails and it exits: TC-01 names it.
    // The restore after it replaces the decode and proves the replacement
    // linked by pulling from each prefill (a decode is no peer's source), so
    // the row after it runs on that replacement.
    FaultRow {
        case: tc01::CASE,
        name: "decode_whose_kvcr_fails_is_reported_and_replaced",
        fault: Fault::Engine(Workers::Decode, EngineFault::KvcrProgressFails),
        claim: "worker-C exited on its own (exit status: 5): RuntimeError: fault kvcr_progress_fails: KVCR progress loop failed",
    },
    // Whichever prefill answers dies before the decode pulls (and deposited
    // nothing for its Guard): the decode recomputes.
    FaultRow {
        case: tc01::CASE,
        name: "prefill_killed_before_the_pull_is_caught",
        fault: Fault::Engine(Workers::Prefills, EngineFault::ExitAfterPrefill),
        claim: "did not pull the prefill's pages",
    },
];
