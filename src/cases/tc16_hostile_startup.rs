//! TC-16 hostile start-up: a KVCR component started alone where it must
//! refuse. A Guard service whose pool directory is a tmpfs too small for
//! its pool group, one of two pool groups with room for the first only
//! (the first group's Guard, already started, must be closed and its pool
//! file removed), and one whose socket directory is a read-only mount; a
//! worker (the engine with KVCR) whose control port is already bound, whose
//! `UCX_TLS` names no transport it can use, and whose Guard's pool is
//! smaller than one block. Each must exit non-zero within the start-up
//! timeout with KVCR's own exception naming the cause, and leave no pool
//! file, socket or process. A Guard whose pool directory has room for its
//! pool group and not a page more must start: KVCR reserves the whole pool
//! at start (`posix_fallocate`), so no later deposit can find the directory
//! full; it must hold every byte of its pool from the start and stop
//! cleanly. A Guard started where a SIGKILLed one left its socket file and
//! its pool file, beside a live Guard on the same pool directory, must
//! start: remove the stale socket and serve on its path, reclaim the dead
//! Guard's pool file (the directory has no room for its own otherwise),
//! leave the live Guard's, and stop cleanly. Then every configuration of
//! `REFUSED_CONFIGS` an operator can get wrong (a worker's KVCR
//! configuration, its G3 tier and files, its placement policy, the pool
//! file its Guard made, tampered with before it claims, the Guard service's
//! command line and paths): refused at start in KVCR's own words, nothing
//! left, what was beside it untouched (a worker's own Guard still serving,
//! and exiting 0 when stopped). Every attempt runs in a mount namespace of its own, so nothing
//! reaches the machine's own `/dev/shm`. Then the stack still serves the
//! reference tokens on every worker.

use serde_json::json;

use crate::engine::Need;
use crate::stack::{Hostility, Sabotage, REFUSED_CONFIGS};
use crate::suite::{Case, CaseCtx, CaseResult};
use crate::verdict::hostile_start::{
    expect_nothing_left, expect_refused, expect_reserved_at_start,
};
use crate::verdict::refused_config::expect_beside_untouched;
use crate::verdict::start_leftovers::{
    expect_live_pool_kept, expect_orphans_reclaimed, expect_stale_socket_replaced,
};

pub const CASE: Case = Case {
    id: "TC-16",
    name: "hostile_startup",
    destructive: false,
    needs: &[Need::Guard],
    optional: &[],
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    run_with(ctx, Sabotage::None)
}

/// The attempts in a benign environment: a start that must be refused
/// succeeds (the fault row proving the refusal verdict can fail).
pub fn run_benign(ctx: &CaseCtx) -> CaseResult {
    run_with(ctx, Sabotage::Benign)
}

/// The harness plants a file in each attempt's pool directory after the
/// component exits (the fault row proving the leftover check can fail).
pub fn run_planting_a_file(ctx: &CaseCtx) -> CaseResult {
    run_with(ctx, Sabotage::PlantFile)
}

fn run_with(ctx: &CaseCtx, sabotage: Sabotage) -> CaseResult {
    // Each attempt judged in the order of the list once all ended (its
    // evidence is `hostile-<attempt>.json` either way).
    let attempts = ctx.hostile_start().attempts(&Hostility::ALL, sabotage)?;
    for (hostility, attempt) in Hostility::ALL.into_iter().zip(attempts) {
        let attempt = attempt?;
        let name = format!("{}.json", hostility.word());
        if hostility == Hostility::OverACrashedGuard {
            // Pools first: a Guard that cannot reclaim the orphan never
            // gets room to start, and the socket's claim would hide why.
            ctx.check(&name, &attempt, expect_orphans_reclaimed(&attempt))?;
            ctx.check(&name, &attempt, expect_live_pool_kept(&attempt))?;
            ctx.check(&name, &attempt, expect_stale_socket_replaced(&attempt))?;
        } else if hostility.must_start() {
            ctx.check(&name, &attempt, expect_reserved_at_start(&attempt))?;
        } else {
            ctx.check(&name, &attempt, expect_refused(&attempt))?;
        }
        ctx.check(&name, &attempt, expect_nothing_left(&attempt))?;
    }

    // Configurations an operator can get wrong, one row each: refused at
    // start in KVCR's own words, nothing left, what was beside untouched.
    let attempts = ctx
        .hostile_start()
        .refused_configs(REFUSED_CONFIGS, sabotage)?;
    for (row, attempt) in REFUSED_CONFIGS.iter().zip(attempts) {
        let attempt = attempt?;
        let name = format!("{}.json", row.name);
        ctx.check(&name, &attempt, expect_refused(&attempt.start))?;
        ctx.check(&name, &attempt, expect_nothing_left(&attempt.start))?;
        ctx.check(&name, &attempt, expect_beside_untouched(&attempt))?;
    }

    // The rest of the stack still serves.
    let family = ctx.family()?;
    for (i, worker) in ctx.workers().into_iter().enumerate() {
        let name = worker.name();
        let prompt = family.variant(i);
        let answer = ctx.complete_on(&worker, prompt)?;
        ctx.expect_reference(prompt, &answer.tokens)?;
        ctx.record(
            &format!("served-{name}.json"),
            &json!({"prompt": prompt.key(), "tokens": answer.tokens.len()}),
        );
    }
    Ok(())
}
