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
use crate::stack::{ProvisionError, RefusalKind, DUPLICATE_GUARD_INDEX};
use crate::suite::{CaseCtx, CaseError, CaseResult, EngineFault, Fault, FaultRow, Workers};

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
    // Both workers of a second stack claim Guard group 0: B's claim meets
    // A's lease.
    FaultRow {
        case: tc09::CASE,
        name: "duplicate_guard_index_fails_startup_fast",
        fault: Fault::Arranged(duplicate_guard_index),
        claim: "KVCRServiceError: KVCR Guard 0 is held by another worker",
    },
    // The workers of a second stack claim one pool more than their Guard
    // service was started with, on groups never claimed.
    FaultRow {
        case: tc09::CASE,
        name: "pool_count_mismatch_fails_startup_fast",
        fault: Fault::Arranged(pool_count_mismatch),
        claim: "KVCRServiceError: pool layout must match the number of pools in the Guard",
    },
    // Each group of a second stack was claimed once with another layout
    // before its worker's own claim.
    FaultRow {
        case: tc09::CASE,
        name: "other_tier_configuration_fails_startup_fast",
        fault: Fault::Arranged(other_tier_configuration),
        claim: "KVCRServiceError: KVCR pool was claimed with another tier configuration",
    },
];

/// The harness's `duplicate_guard_index`: every worker claims the first
/// slot's group, one worker at a time; B is refused while A holds it.
fn duplicate_guard_index(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let refused = refused_at_startup(
        ctx,
        row,
        "duplicate-guard-index",
        &[DUPLICATE_GUARD_INDEX],
        RefusalKind::HeldByAnother,
    )?;
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
        RefusalKind::PoolCountMismatch,
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
        RefusalKind::OtherTierConfig,
    )?;
    if !refused.contains("KVCR claim was refused by its Guard service") {
        return Err(CaseError::new(format!(
            "refused, but the message does not say so: {refused}"
        )));
    }
    Ok(())
}

/// Provisions a second stack with `faults` under the user's startup
/// timeout; passes when its start failed on a claim refusal of `kind`
/// whose message holds the row's claim, before the timeout (the time is
/// recorded, not judged finer). Returns the message.
fn refused_at_startup(
    ctx: &CaseCtx,
    row: &FaultRow,
    name: &str,
    faults: &[&str],
    kind: RefusalKind,
) -> Result<String, CaseError> {
    let timeout = ctx.settings.startup_timeout;
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
    if refused.kind != kind || !message.contains(row.claim) {
        return Err(CaseError::new(format!(
            "the start failed on another refusal than {kind:?} (`{}`): {message}",
            row.claim
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
