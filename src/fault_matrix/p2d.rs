//! The fault matrix of the disaggregated paths (`cargo test --test
//! fault_matrix_2p1d`): on a 2P+1D stack, each row targets the P→D check of
//! TC-01 (a fresh prompt: the decode must pull exactly its full blocks from
//! the prefill that answered).

use crate::cases::tc01_generation_correctness as tc01;
use crate::engine::Need;
use crate::suite::{Claim, EngineFault, Expect, Fault, FaultRow, RowDoc, Workers};
use crate::verdict::{disagg, tokens};

pub static ROWS: &[FaultRow] = &[
    // The decode's pulled pages are corrupted after delivery: wrong tokens.
    FaultRow {
        case: tc01::CASE,
        name: "decode_given_wrong_pages_is_caught",
        fault: Fault::Engine(Workers::Decode, EngineFault::CorruptDeliveredPages),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(tokens::CLAIM, "of 16 differs"),
        doc: RowDoc {
            fault: "`corrupt_delivered_pages` on the decode worker: the pages it pulled are not the prefill's",
            caught_by: "TC-01",
            message: "`reference tokens: token N of 16 differs`",
        },
    },
    // The decode reports one page more than it read.
    FaultRow {
        case: tc01::CASE,
        name: "decode_misreporting_bytes_is_caught",
        fault: Fault::Engine(Workers::Decode, EngineFault::WrongTransferBytes),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(disagg::CLAIM, "decode read bytes"),
        doc: RowDoc {
            fault: "`wrong_transfer_bytes` on the decode worker",
            caught_by: "TC-01 (P→D check)",
            message: "`P→D transfer reconciles: decode read bytes … ≠ prefill source_write bytes …`",
        },
    },
    // The decode reports one block fewer than it pulled.
    FaultRow {
        case: tc01::CASE,
        name: "decode_underreporting_blocks_is_caught",
        fault: Fault::Engine(Workers::Decode, EngineFault::UnderreportBlocks),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(disagg::CLAIM, "decode remote_deliver blocks 3 ≠ 4 full blocks of the prompt"),
        doc: RowDoc {
            fault: "`underreport_blocks` on the decode worker: it reports one block fewer than it pulled",
            caught_by: "TC-01 (P→D check)",
            message: "`P→D transfer reconciles: through prefill A: decode remote_deliver blocks 3 ≠ 4 full blocks of the prompt; prefill source_write blocks 4 ≠ decode remote_deliver blocks 3`",
        },
    },
    // The decode's KVCR progress loop fails and it exits: TC-01 names it.
    // The restore after it replaces the decode and proves the replacement
    // linked by pulling from each prefill (a decode is no peer's source), so
    // the row after it runs on that replacement.
    FaultRow {
        case: tc01::CASE,
        name: "decode_whose_kvcr_fails_is_reported_and_replaced",
        fault: Fault::Engine(Workers::Decode, EngineFault::KvcrProgressFails),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::Crashed, "worker-C exited on its own (exit status: 5): RuntimeError: fault kvcr_progress_fails: KVCR progress loop failed"),
        doc: RowDoc {
            fault: "`kvcr_progress_fails` on the decode worker: its KVCR poll raises and it exits (status 5). The restore after the row replaces the decode and proves the replacement linked by pulling from each prefill, so the next row runs on the replacement",
            caught_by: "TC-01",
            message: "`worker-C exited on its own (exit status: 5): RuntimeError: fault kvcr_progress_fails: KVCR progress loop failed`",
        },
    },
    // Whichever prefill answers dies before the decode pulls (and deposited
    // nothing for its Guard): the decode recomputes.
    FaultRow {
        case: tc01::CASE,
        name: "prefill_killed_before_the_pull_is_caught",
        fault: Fault::Engine(Workers::Prefills, EngineFault::ExitAfterPrefill),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(disagg::CLAIM, "did not pull the prefill's pages"),
        doc: RowDoc {
            fault: "`exit_after_prefill` on both prefill workers: the first one the P→D check pins (`nvext.prefill_worker_id`) exits before the decode pulls, without a deposit for its Guard",
            caught_by: "TC-01 (P→D check)",
            message: "`P→D transfer reconciles: the decode shows no remote_deliver success: it did not pull the prefill's pages`",
        },
    },
];
