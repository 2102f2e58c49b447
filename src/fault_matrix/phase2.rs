//! The production cases' fault matrix (`cargo test --test
//! fault_matrix_phase2`, on the `phase2` stack): each row turns one
//! CPU-engine switch on worker A and runs the production case that must
//! catch it. The planted KVCR bugs that turn these cases red are in
//! `fixtures/kvcr-mutants/` (`p2-*`). Three rows start a second stack
//! whose workers' KVCR claims their Guard service refuses: its start must
//! fail at once, quoting KVCR, before any case could run on it.

use serde_json::json;

use crate::cases::{
    tc07_pool_pressure as tc07, tc09_clean_restart as tc09, tc11_source_stall_latch as tc11,
};
use crate::engine::Need;
use crate::stack::{ProvisionError, RefusalKind, DUPLICATE_GUARD_INDEX};
use crate::suite::claim::Startup;
use crate::suite::{
    CaseCtx, CaseError, CaseResult, Claim, EngineFault, Expect, Fault, FaultRow, RowDoc, Workers,
};
use crate::verdict::{pressure, restart, stall};

const A: Workers = Workers::Slots(&["A"]);

pub static ROWS: &[FaultRow] = &[
    // The engine reports every deposited block a success, whatever KVCR said.
    FaultRow {
        case: tc07::CASE,
        name: "hidden_failed_deposit_is_caught",
        fault: Fault::Engine(A, EngineFault::HideFailedDeposits),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(pressure::FULL_POOL, "0 reported failed, at least 4 must be"),
        doc: RowDoc {
            fault: "`hide_failed_deposits`: the engine reports every deposited block a success, whatever KVCR answered",
            caught_by: "TC-07 (the full pool)",
            message: "`a deposit into a full pool is reported failed, not lost: 4 blocks deposited into a pool with room for 0: 0 reported failed, at least 4 must be`",
        },
    },
    // The engine never tells the router that a block left KVCR's pool.
    FaultRow {
        case: tc07::CASE,
        name: "evicted_block_still_published_is_caught",
        fault: Fault::Engine(A, EngineFault::DropRemovedInventory),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(pressure::EVICTED_NOT_HINTED, "the router still hinted them"),
        doc: RowDoc {
            fault: "`drop_removed_inventory`: KVCR's `removed` inventory events are logged but never reach the router",
            caught_by: "TC-07 (the evicted prefix)",
            message: "`an evicted prefix is no longer hinted: the peer attempted 1 remote deliveries of blocks its source had evicted: the router still hinted them`",
        },
    },
    // On SIGTERM the engine exits without closing KVCR: a death, not a release.
    FaultRow {
        case: tc09::CASE,
        name: "exit_without_handback_is_caught",
        fault: Fault::Engine(A, EngineFault::NoHandback),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(restart::CLEAN_STOP, "it saw a death, not a release"),
        doc: RowDoc {
            fault: "`no_handback`: on SIGTERM the engine exits 0 without closing KVCR",
            caught_by: "TC-09 (the clean stop)",
            message: "`a clean stop hands the pool back without a promotion: the worker logged no \\`KVCR closed: Guard group N handed back\\`; the Guard promoted 1 times for the stopped worker's group: it saw a death, not a release`",
        },
    },
    // The engine drops KVCR's source-stall latch on the floor.
    FaultRow {
        case: tc11::CASE,
        name: "hidden_stall_latch_is_caught",
        fault: Fault::Engine(A, EngineFault::HideSourceStall),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(stall::LATCH_REPORTED, "reported no source-stall latch after a stop longer than operation_timeout_ms"),
        doc: RowDoc {
            fault: "`hide_source_stall`: the engine drops KVCR's source-stall event (no line, no counter, `/state` false)",
            caught_by: "TC-11 (the long stop)",
            message: "`the source-stall latch is reported as a fact: worker-A reported no source-stall latch after a stop longer than operation_timeout_ms`",
        },
    },
    // Both workers of a second stack claim Guard group 0: B's claim meets
    // A's lease.
    FaultRow {
        case: tc09::CASE,
        name: "duplicate_guard_index_fails_startup_fast",
        fault: Fault::Arranged(duplicate_guard_index),
        needs: &[],
        expect: Expect::with(Claim::Startup(Startup::Refused(RefusalKind::HeldByAnother)), "KVCRServiceError: KVCR Guard 0 is held by another worker"),
        doc: RowDoc {
            fault: "harness launch fault `duplicate_guard_index` on a second stack: every worker claims the first slot's Guard group (its guard_index and socket), the workers started one at a time so B's claim meets A's lease, not a claim in progress",
            caught_by: "the stack start (no case runs on it)",
            message: "`worker-B's KVCR claim was refused by its Guard service … s after it started: \\`kvcr.control_channels.KVCRServiceError: KVCR Guard 0 is held by another worker\\` (HeldByAnother: another live worker holds this Guard group: two workers were given the same guard_index); its log: …`, well before `startup_timeout_s`",
        },
    },
    // The workers of a second stack claim one pool more than their Guard
    // service was started with, on groups never claimed.
    FaultRow {
        case: tc09::CASE,
        name: "pool_count_mismatch_fails_startup_fast",
        fault: Fault::Arranged(pool_count_mismatch),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::Startup(Startup::Refused(RefusalKind::PoolCountMismatch)), "KVCRServiceError: pool layout must match the number of pools in the Guard"),
        doc: RowDoc {
            fault: "launch switch `extra_kvcr_pool` on every worker of a second stack: each claims its group, never claimed since that stack's Guard service started, with one pool more than the service's `--pool-size` list",
            caught_by: "the stack start (no case runs on it)",
            message: "`worker-A's KVCR claim was refused by its Guard service … s after it started: \\`kvcr.control_channels.KVCRServiceError: pool layout must match the number of pools in the Guard\\` (PoolCountMismatch: …); its log: …`, well before `startup_timeout_s`",
        },
    },
    // Each group of a second stack was claimed once with another layout
    // before its worker's own claim.
    FaultRow {
        case: tc09::CASE,
        name: "other_tier_configuration_fails_startup_fast",
        fault: Fault::Arranged(other_tier_configuration),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::Startup(Startup::Refused(RefusalKind::OtherTierConfig)), "KVCRServiceError: KVCR pool was claimed with another tier configuration"),
        doc: RowDoc {
            fault: "launch switch `prior_claim_other_layout` on every worker of a second stack: before its own claim, each worker claims its group once with every page's bytes halved, on its own control port, and hands it back unserved (a Guard service that outlived a deployment of another KV layout)",
            caught_by: "the stack start (no case runs on it)",
            message: "`worker-A's KVCR claim was refused by its Guard service … s after it started: \\`kvcr.control_channels.KVCRServiceError: KVCR pool was claimed with another tier configuration\\` (OtherTierConfig: …); its log: …`, well before `startup_timeout_s`",
        },
    },
];

/// The harness's `duplicate_guard_index`: every worker claims the first
/// slot's group, one worker at a time; B is refused while A holds it.
fn duplicate_guard_index(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let refused = refused_at_startup(ctx, row, "duplicate-guard-index", &[DUPLICATE_GUARD_INDEX])?;
    if !refused.contains("worker-B's KVCR claim was refused by its Guard service") {
        return Err(CaseError::new(format!(
            "refused, but not as worker B's claim: {refused}"
        )));
    }
    Ok(())
}

/// The CPU engine's `extra_kvcr_pool` on every worker of a fresh stack.
fn pool_count_mismatch(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let refused = refused_at_startup(
        ctx,
        row,
        "pool-count-mismatch",
        &[&EngineFault::ExtraKvcrPool.to_string()],
    )?;
    if !refused.contains("KVCR claim was refused by its Guard service") {
        return Err(CaseError::new(format!(
            "refused, but the message does not say so: {refused}"
        )));
    }
    Ok(())
}

/// The CPU engine's `prior_claim_other_layout` on every worker of a fresh
/// stack: a Guard service that outlived a deployment of another KV layout.
fn other_tier_configuration(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let refused = refused_at_startup(
        ctx,
        row,
        "other-tier-configuration",
        &[&EngineFault::PriorClaimOtherLayout.to_string()],
    )?;
    if !refused.contains("KVCR claim was refused by its Guard service") {
        return Err(CaseError::new(format!(
            "refused, but the message does not say so: {refused}"
        )));
    }
    Ok(())
}

/// Provisions a second stack with `faults` under the user's startup
/// timeout; passes when its start failed on the claim refusal the row
/// expects (its kind, and the detail it names), before the timeout (the
/// time is recorded, not judged finer). Returns the message.
fn refused_at_startup(
    ctx: &CaseCtx,
    row: &FaultRow,
    name: &str,
    faults: &[&str],
) -> Result<String, CaseError> {
    let timeout = ctx.settings().startup_timeout;
    let faults: Vec<String> = faults.iter().map(|f| f.to_string()).collect();
    let (result, took) = ctx.faults().provision_faulty(name, &faults, timeout);
    ctx.measure("failed_after_s", took.as_secs_f64());
    let refused = match result {
        Ok(()) => {
            return Err(CaseError::new(format!(
                "a stack with {faults:?} came up: no KVCR claim was refused"
            )))
        }
        Err(ProvisionError::ClaimRefused(refused)) => refused,
        Err(e) => {
            return Err(CaseError::new(format!(
                "the start failed, but not on a KVCR claim refusal: {e}"
            )))
        }
    };
    let message = refused.to_string();
    ctx.measure("refused_after_spawn_s", refused.after_spawn.as_secs_f64());
    ctx.record(
        "caught.json",
        &json!({
            "message": message,
            "refusal": *refused,
            "failed_after_s": took.as_secs_f64(),
            "startup_timeout_s": timeout.as_secs_f64(),
        }),
    );
    let failure = CaseError::startup(&ProvisionError::ClaimRefused(refused));
    if !row.expect.is_met_by(&failure) {
        return Err(CaseError::new(format!(
            "the start failed on another refusal than expected (a failure of {}): {message}",
            row.expect
        )));
    }
    if took >= timeout {
        return Err(CaseError::new(format!(
            "the refusal was reported after {:.1} s, not before the startup timeout ({:.0} s): {message}",
            took.as_secs_f64(),
            timeout.as_secs_f64()
        )));
    }
    Ok(message)
}
