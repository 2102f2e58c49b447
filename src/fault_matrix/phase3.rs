//! The phase 3 cases' fault matrix (`cargo test --test
//! fault_matrix_phase3`, on the `phase3` stack). The planted KVCR bugs that
//! turn TC-17's other verdicts red are in `fixtures/kvcr-mutants/`
//! (`p3-*`).

use crate::cases::tc15_peer_pause as tc15;
use crate::cases::tc16_hostile_startup as tc16;
use crate::cases::tc17_concurrent_same_prefix as tc17;
use crate::engine::Need;
use crate::suite::{
    expect_red, CaseCtx, CaseResult, EngineFault, Expect, Fault, FaultRow, RowDoc, Workers,
};
use crate::verdict::{concurrent, fan_out, hostile_start, stall};

const A: Workers = Workers::Slots(&["A"]);
const C: Workers = Workers::Slots(&["C"]);

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
            message: "`a deposit met blocks KVCR was still filling: no deposit met a filling block: 8 requests for one 5-block prefix computed 5 blocks and deposited 5, never while KVCR was still copying another's (3 bursts of a new prompt, none met one)`",
        },
    },
    // One target reads more bytes than KVCR delivered: the fan-out's
    // reconciliation must name it. Before the row below, so that B and C
    // pull from A for the first time here, as in the case.
    FaultRow {
        case: tc17::CASE,
        name: "fan_out_target_misreading_bytes_is_caught",
        needs: &[Need::FaultSwitches],
        fault: Fault::Engine(C, EngineFault::WrongTransferBytes),
        expect: Expect::clause(fan_out::FAN_OUT_RECONCILED, "target C read"),
        doc: RowDoc {
            fault: "`wrong_transfer_bytes` on C: its engine counts one page more than KVCR wrote into the blocks it delivered",
            caught_by: "TC-17 (the fan-out's reconciliation)",
            message: "`a prefix pulled by two targets at once reconciles: target C read 36864 bytes ≠ 4 blocks × 8192 bytes`",
        },
    },
    // The fan-out's two requests go one after the other: the pulls never
    // overlap, and TC-17 must not pass them as concurrent.
    FaultRow {
        case: tc17::CASE,
        name: "fan_out_pulls_one_after_another_are_caught",
        needs: &[],
        fault: Fault::Arranged(fan_out_one_after_another),
        expect: Expect::clause(fan_out::PULLS_OVERLAPPED, "not in flight at once"),
        doc: RowDoc {
            fault: "the harness sends each fan-out's request to C only once B's was answered, so B's and C's pulls of the prefix from A run one after the other, in each of TC-17's three fan-outs",
            caught_by: "TC-17 (the fan-out's overlap)",
            message: "`the two targets' pulls of one prefix were in flight at once: not in flight at once: B's pull ran 0.0–… ms and C's …–… ms (from the first start): one after the other, … ms apart (the last of 3 fan-outs, none in flight at once)`",
        },
    },
    // The first attempt runs without its hostile condition: the Guard that
    // must refuse starts.
    FaultRow {
        case: tc16::CASE,
        name: "start_that_is_not_refused_is_caught",
        needs: &[],
        fault: Fault::Arranged(benign_start),
        expect: Expect::clause(hostile_start::REFUSED, "started and logged its ready line"),
        doc: RowDoc {
            fault: "the harness leaves the hostile condition out: the Guard's pool directory has room, so the start that must be refused succeeds",
            caught_by: "TC-16 (the refusal)",
            message: "`a KVCR component refuses a hostile start with its own exception: the guard (its pool directory is a tmpfs of 52428800 bytes; its pool group needs …) started and logged its ready line although it must refuse; log …/hostile-pool_dir_too_small.log`",
        },
    },
    // The harness writes a file into the pool directory after the refused
    // Guard exited: the leftover check must see it.
    FaultRow {
        case: tc16::CASE,
        name: "file_left_in_the_pool_directory_is_caught",
        needs: &[],
        fault: Fault::Arranged(planted_file),
        expect: Expect::clause(hostile_start::NOTHING_LEFT, "kvcr-planted-by-the-harness"),
        doc: RowDoc {
            fault: "the harness writes `kvcr-planted-by-the-harness` into the attempt's pool directory after the component exited, before the listing",
            caught_by: "TC-16 (what is left)",
            message: "`a refused start leaves no pool file, socket or process: the guard (…) left /dev/shm/hostile/pool_dir_too_small/pools/kvcr-planted-by-the-harness`",
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

fn fan_out_one_after_another(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    expect_red(ctx, tc17::run_fan_out_one_after_another, &row.expect)
}

fn benign_start(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    expect_red(ctx, tc16::run_benign, &row.expect)
}

fn planted_file(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    expect_red(ctx, tc16::run_planting_a_file, &row.expect)
}
