//! TC-07 pool pressure and eviction.
//!
//! The stack's Guard pools hold 12 blocks (the `guard_pool_blocks` knob;
//! checked against the service's `ready` line), three prompts' worth. Commit
//! A, B, C on worker A: the pool holds exactly them. Touch A: the peer B
//! reads A's prefix from worker A's pool (a source write is an access).
//! Overflow: commit D. KVCR's own inventory events on A say what left the
//! pool: B's blocks, not A's (least recently used); A and C are still held.
//! B's prefix, evicted, is no longer hinted: sent to the peer, it is
//! computed there, with no remote delivery attempted, and its tokens are the
//! reference's. Then a pool with nothing evictable: A pins its deposits
//! (KVCR's `no_evict`), E, F, G fill the pool with claimed blocks, and H's
//! deposit finds no slot: KVCR answers FAILED for its blocks and the engine
//! reports them failed, not lost silently; H's tokens are the reference's.

use crate::engine::Need;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::telemetry::engine_kvcr_log;
use crate::telemetry::names::engine_kvcr_log::TIER_LOCAL_G2;
use crate::telemetry::{Counter, OpResult, Scope};
use crate::verdict::pressure::{
    expect_failed_reported, expect_lru, expect_not_hinted, expect_pool_blocks, EvictionOrder,
};
use serde_json::json;

pub const CASE: Case = Case {
    id: "TC-07",
    name: "pool_pressure_and_eviction",
    destructive: false,
    needs: &[
        Need::PoolEvictionReports,
        Need::ProductionConditions,
        Need::Guard,
        Need::FaultSwitches,
    ],
    optional: &[],
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let marks = ctx.pressure().log_marks();
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let want = u64::from(ctx.settings().cpu_engine.guard_pool_blocks.ok_or_else(|| {
        CaseError::new("TC-07 needs pools sized in blocks (cpu_engine.guard_pool_blocks)")
    })?);
    let pool = ctx.pressure().guard_pool_blocks(&a)?;
    ctx.check(
        "pool.json",
        &json!({"guard_pool_blocks": want, "ready_line_blocks": pool}),
        expect_pool_blocks(want, &pool),
    )?;
    let families = ctx.families(8)?;
    let [fa, fb, fc, fd, fe, ff, fg, fh] = &families[..] else {
        return Err(CaseError::new("expected 8 prompt families"));
    };
    let blocks_per_prompt = fa.shared_blocks();
    if blocks_per_prompt * 3 != want {
        return Err(CaseError::new(format!(
            "TC-07 is shaped for a pool of three prompts: {want} blocks, prompts of {blocks_per_prompt}"
        )));
    }
    let hashes = |f: &crate::prompts::Family| ctx.pressure().block_hashes(&a, f.variant(0));
    let (ha, hb, hc, hd) = (hashes(fa)?, hashes(fb)?, hashes(fc)?, hashes(fd)?);

    // Commit A, B, C: the pool holds exactly them (older blocks are older).
    for f in [fa, fb, fc] {
        ctx.commit(&a, f.variant(0))?;
    }
    let abc: Vec<u64> = [&ha, &hb, &hc].into_iter().flatten().copied().collect();
    let held = ctx.pressure().held_in(&a, &abc, "local")?;
    if held.len() != abc.len() {
        let path = ctx.record("committed.json", &json!({"committed": abc, "held": held}));
        return Err(CaseError::new(format!(
            "after committing A, B, C worker A's pool holds {} of their {} blocks",
            held.len(),
            abc.len()
        ))
        .with_evidence(path));
    }

    // Touch A: the peer reads A's prefix from A's pool.
    let (a_before, b_before) = (ctx.snapshot(&a)?, ctx.snapshot(&b)?);
    let touch = ctx.complete_on(&b, fa.variant(1))?;
    ctx.expect_reference(fa.variant(1), &touch.tokens)?;
    let touched = ctx.observe().peer_transfer(&a, &a_before, &b, &b_before)?;
    if touched.transfer.remote_deliver_blocks < blocks_per_prompt {
        let path = ctx.record("touch.json", &touched);
        return Err(CaseError::new(format!(
            "touching A: the peer read {} of A's {blocks_per_prompt} blocks from worker A's pool",
            touched.transfer.remote_deliver_blocks
        ))
        .with_evidence(path));
    }

    // Overflow: D needs room; what left the pool, by KVCR's own events.
    let overflow = ctx.pressure().log_mark(&a);
    ctx.commit(&a, fd.variant(0))?;
    let lines = ctx.pressure().kvcr_lines_since(&a, overflow)?;
    let order = EvictionOrder {
        touched: ha.clone(),
        untouched_older: hb.clone(),
        removed: engine_kvcr_log::removed(&lines, TIER_LOCAL_G2),
        resident_after: ctx.pressure().held_in(
            &a,
            &[&ha, &hb, &hc, &hd]
                .into_iter()
                .flatten()
                .copied()
                .collect::<Vec<_>>(),
            "local",
        )?,
    };
    ctx.measure("evicted_on_overflow", order.removed.len());
    ctx.check(
        "eviction.json",
        &json!({"order": order, "lines": lines}),
        expect_lru(&order),
    )?;

    // B's prefix, evicted: not hinted to the peer, computed, reference tokens.
    let before = ctx.snapshot(&b)?;
    let answer = ctx.complete_on(&b, fb.variant(1))?;
    ctx.expect_reference(fb.variant(1), &answer.tokens)?;
    let delta = ctx.delta_since(&b, &before)?;
    let attempts = delta
        .required_count(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Success))?
        + delta.required_count(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Failed))?;
    let computed = delta.required_count(&Counter::ComputedBlocks)?;
    ctx.check(
        "not-hinted.json",
        &json!({"remote_deliver_attempts": attempts, "computed_blocks": computed, "delta": delta}),
        expect_not_hinted(attempts, computed, blocks_per_prompt),
    )?;

    // Nothing evictable: pinned deposits fill the pool, H's deposit fails.
    let pinned = ctx
        .faults()
        .engine_added("A", crate::suite::EngineFault::PinDeposits)?;
    for f in [fe, ff, fg] {
        ctx.commit(&a, f.variant(0))?;
    }
    let full = ctx.pressure().log_mark(&a);
    let answer = ctx.complete_on(&a, fh.variant(0))?;
    ctx.expect_reference(fh.variant(0), &answer.tokens)?;
    let lines = ctx.pressure().await_deposit_results(
        &a,
        full,
        "worker A to report the outcome of H's deposit",
    )?;
    drop(pinned);
    let (success, failed, dropped, which) = engine_kvcr_log::deposits(&lines);
    ctx.measure("failed_deposit_blocks", failed);
    ctx.check(
        "full-pool.json",
        &json!({"success": success, "failed": failed, "dropped": dropped, "failed_blocks": which, "lines": lines}),
        expect_failed_reported(blocks_per_prompt, 0, success, failed, dropped),
    )?;
    ctx.pressure().expect_no_bad_lines_since(&marks, &[])
}
