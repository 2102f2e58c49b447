//! TC-20 full tiers: a DRAM pool and a disk tier both full.
//!
//! On the disk-tier stack (`phase2_g3`: a Guard pool of 8 blocks and a G3
//! file of 64 per worker), worker B commits two prompts more than its pool
//! and its disk tier hold together (20 prompts of 4 blocks). Each deposit
//! meets a full pool: KVCR spills the pool's least recently used block to
//! disk and the deposit waits for that room; once the disk is full, each
//! spill evicts the disk's least recently used block. Then KVCR holds the
//! two oldest prompts nowhere (each removal published as a `removed` event
//! in G3), the next sixteen on disk and the newest two in the pool; every
//! deposit succeeded; `g3_store` counts what the inventory stored, and the
//! disk's allocated slots moved by what it stored less what it removed.
//! Once KVCR is idle every slot of both tiers is evictable again: no claim,
//! fill or spill left behind. The oldest prefix still on disk comes back
//! from it with the reference tokens. The next one is fetched into the full
//! pool (`KVCR.fetch` through the engine's `POST /kvcr/fetch`): every block
//! arrives, `g3_fill` counts it, its claims are given back. The evicted
//! prefixes are computed again, nothing of them delivered from disk, with
//! the reference tokens; their deposits push the fetched blocks out of the
//! pool, and KVCR holds them on disk again without storing them twice.
//! After those read-backs the slots are back again. KVCR asked the engine
//! for capacity (its `capacity_needed_callback`, with the profile's low
//! watermark) while the deposits met the full pool, and not during the
//! read from disk.

use std::time::Duration;

use crate::engine::Need;
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::telemetry::engine_kvcr_log;
use crate::telemetry::names::engine_kvcr_log::TIER_G3;
use crate::telemetry::{Counter, Gauge, OpResult, Resource, Scope, Snapshot};
use crate::verdict::disk::expect_served_from_disk;
use crate::verdict::full_tiers::{
    expect_back_on_disk, expect_capacity_asked, expect_fetched_from_disk, expect_full_tiers_evict,
    expect_recomputed, expect_slots_back, FromDisk, FullTiers, Layout, Slots,
};
use crate::wait;
use serde_json::json;

pub const CASE: Case = Case {
    id: "TC-20",
    name: "full_tiers",
    destructive: false,
    needs: &[
        Need::DiskTierReports,
        Need::ProductionConditions,
        Need::Guard,
    ],
    optional: &[],
    run,
};

/// Prompts committed beyond what both tiers hold: the oldest ones, which the
/// full disk tier must evict.
const EVICTED_PROMPTS: usize = 2;

/// The pool of the dense geometry (the only one the disk tier takes), as
/// the engine counts KVCR's capacity requests
/// (`cpu_engine_kvcr_capacity_needed{pool}`).
const POOL: &str = "kv";

/// How long KVCR may take to go idle after a request (spills, deposits and
/// deliveries in flight finishing); KVCR's own operation timeout is far
/// below it.
const IDLE_WITHIN: Duration = Duration::from_secs(10);

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let marks = ctx.pressure().log_marks();
    let Some(g3_blocks) = ctx.settings().cpu_engine.g3_capacity_blocks else {
        return Err(CaseError::new(
            "TC-20 needs KVCR's disk tier (cpu_engine.g3_capacity_blocks; the phase2-g3 profile)",
        ));
    };
    if ctx
        .settings()
        .cpu_engine
        .capacity_low_watermark_percent
        .is_none()
    {
        return Err(CaseError::new(
            "TC-20 needs KVCR to ask for capacity (cpu_engine.capacity_low_watermark_percent; \
             the phase2-g3 profile)",
        ));
    }
    // Worker B: TC-12 spills and kills on worker A; B's tiers are its own.
    let b = ctx.worker("B")?;
    let pool_blocks = ctx.pressure().guard_pool_blocks(&b)?;
    let per_prompt = u64::from(ctx.settings().prompts.prefix_blocks);
    let pool = pool_blocks.iter().copied().min().unwrap_or(0);
    let layout = Layout::overflowing(pool, u64::from(g3_blocks), per_prompt, EVICTED_PROMPTS)
        .map_err(|shape| CaseError::new(format!("TC-20 is shaped for whole prompts: {shape}")))?;
    let families = ctx.families(layout.prompts())?;
    let mut prompts = Vec::with_capacity(families.len());
    for family in &families {
        let blocks = ctx.pressure().block_hashes(&b, family.variant(0))?;
        if blocks.len() as u64 != per_prompt {
            return Err(CaseError::new(format!(
                "TC-20 needs prompts of {per_prompt} full blocks; {} has {}",
                family.variant(0).key(),
                blocks.len()
            )));
        }
        prompts.push(blocks);
    }
    ctx.measure("layout", layout);

    // Overflow both tiers: every deposit waits for a spill, every spill
    // past the disk's capacity evicts from it.
    let mark = ctx.pressure().log_mark(&b);
    let before = ctx.snapshot(&b)?;
    let g3_before = slots(&before)?;
    for (i, family) in families.iter().enumerate() {
        ctx.doing(format!(
            "committing prompt {} of {} on worker B",
            i + 1,
            families.len()
        ))?;
        ctx.commit(&b, family.variant(0))?;
    }
    let idle = await_idle(ctx, &b, "after the commits")?;
    let lines = ctx.pressure().kvcr_lines_since(&b, mark)?;
    let fill_delta = ctx.delta_since(&b, &before)?;
    let all: Vec<u64> = prompts.iter().flatten().copied().collect();
    let (success, failed, dropped, _) = engine_kvcr_log::deposits(&lines);
    let removed_from_g3 = engine_kvcr_log::removed(&lines, TIER_G3);
    let fill = FullTiers {
        layout,
        prompts: prompts.clone(),
        holding: ctx.pressure().holding(&b, &all)?,
        deposits: (success, failed, dropped),
        stored_in_g3: stored_count(&lines),
        removed_from_g3,
        g3_store_blocks: fill_delta.required_count(&Counter::TransferBlocks(Scope::G3Store))?,
        g3_store_failed: fill_delta
            .required_count(&Counter::OpCount(Scope::G3Store, OpResult::Failed))?,
        g3_allocated_before: g3_before.g3_allocated,
        g3_allocated_after: idle.g3_allocated,
        g3_total: idle.g3_total,
    };
    ctx.measure("evicted_from_g3", fill.removed_from_g3.len());
    ctx.measure("stored_in_g3", fill.stored_in_g3);
    ctx.check(
        "full-tiers.json",
        &json!({"fill": fill, "slots_before": g3_before, "lines": lines, "delta": fill_delta}),
        expect_full_tiers_evict(&fill),
    )?;
    ctx.check("slots-after-fill.json", &idle, expect_slots_back(&idle))?;

    // The oldest prefix still on disk comes back from it.
    let kept = &families[layout.evicted];
    let (mark, before) = (ctx.pressure().log_mark(&b), ctx.snapshot(&b)?);
    let answer = ctx.complete_on(&b, kept.variant(1))?;
    ctx.expect_reference(kept.variant(1), &answer.tokens)?;
    let read = ctx.delta_since(&b, &before)?;
    let from_disk = ctx.pressure().delivered_since(&b, mark, "g3")?;
    let delivered = read.required_count(&Counter::TransferBlocks(Scope::G3Deliver))?;
    ctx.check(
        "kept-from-disk.json",
        &json!({"prompt": kept.variant(1).key(), "delivered_from_g3": from_disk, "g3_deliver_blocks": delivered}),
        expect_served_from_disk(&prompts[layout.evicted], &from_disk, delivered),
    )?;

    // KVCR asked for capacity while the deposits met the full pool, not
    // while the read from disk ran.
    let asked = Counter::KvcrCapacityNeeded(POOL.into());
    let (while_filling, while_reading) = (
        fill_delta.required_count(&asked)?,
        read.required_count(&asked)?,
    );
    ctx.measure("capacity_asked_while_filling", while_filling);
    ctx.check(
        "capacity-asked.json",
        &json!({
            "pool": POOL,
            "asked_while_filling": while_filling,
            "asked_while_reading": while_reading,
            "asked_by_pool_while_filling": fill_delta
                .nonzero()
                .filter(|(c, _)| matches!(c, Counter::KvcrCapacityNeeded(_)))
                .map(|(c, n)| (c.to_string(), n))
                .collect::<Vec<_>>(),
        }),
        expect_capacity_asked(families.len(), while_filling, while_reading),
    )?;

    // A prefix on disk is fetched into the full pool (KVCR.fetch through the
    // engine's probe): a spill makes room, the fill comes from disk.
    let fetched = &prompts[layout.evicted + 1];
    let before = ctx.snapshot(&b)?;
    let staged = ctx.pressure().stage(&b, fetched)?;
    let delta = ctx.delta_since(&b, &before)?;
    let from_disk = FromDisk {
        blocks: fetched.clone(),
        staged,
        g3_fill_blocks: delta.required_count(&Counter::TransferBlocks(Scope::G3Fill))?,
        g3_fill_failed: delta.required_count(&Counter::OpCount(Scope::G3Fill, OpResult::Failed))?,
        held_after: ctx.pressure().holding(&b, fetched)?,
    };
    ctx.check(
        "fetched-from-disk.json",
        &json!({"fetch": from_disk, "delta": delta}),
        expect_fetched_from_disk(&from_disk),
    )?;

    // The evicted prefixes are computed again; their deposits push the
    // fetched blocks out of the pool, back to their copy on disk.
    let mark = ctx.pressure().log_mark(&b);
    for (family, blocks) in families.iter().zip(&prompts).take(layout.evicted) {
        let (from, before) = (ctx.pressure().log_mark(&b), ctx.snapshot(&b)?);
        ctx.commit(&b, family.variant(1))?;
        let delta = ctx.delta_since(&b, &before)?;
        let from_disk = ctx.pressure().delivered_since(&b, from, "g3")?;
        let computed = delta.required_count(&Counter::ComputedBlocks)?;
        ctx.check(
            &format!("evicted-recomputed-{}.json", family.variant(1).key()),
            &json!({"delivered_from_g3": from_disk, "computed_blocks": computed}),
            expect_recomputed(blocks, &from_disk, computed),
        )?;
    }
    let idle = await_idle(ctx, &b, "after the read-backs")?;
    let lines = ctx.pressure().kvcr_lines_since(&b, mark)?;
    let stored_again = engine_kvcr_log::stored(&lines, TIER_G3);
    let held = ctx.pressure().holding(&b, fetched)?;
    ctx.check(
        "fetched-back-on-disk.json",
        &json!({"blocks": fetched, "holding": held, "stored_in_g3": stored_again, "lines": lines}),
        expect_back_on_disk(fetched, &held, &stored_again),
    )?;

    // Nothing the read-backs claimed or filled is left held.
    ctx.check(
        "slots-after-read-backs.json",
        &idle,
        expect_slots_back(&idle),
    )?;
    ctx.pressure().expect_no_bad_lines_since(&marks, &[])
}

/// Blocks KVCR's inventory events stored in G3 (a block stored twice counts twice).
fn stored_count(lines: &[engine_kvcr_log::Located]) -> u64 {
    lines
        .iter()
        .map(|l| match &l.event {
            engine_kvcr_log::EngineKvcrLine::Inventory {
                removed: false,
                tier,
                hashes,
            } if tier == TIER_G3 => hashes.len() as u64,
            _ => 0,
        })
        .sum()
}

/// KVCR's slot gauges of both tiers in `snapshot`.
pub(super) fn slots(snapshot: &Snapshot) -> Result<Slots, CaseError> {
    let gauge = |r: Resource| {
        let absent = format!("KVCR reports no kvcr_state{{resource={r}}}");
        snapshot
            .gauge(&Gauge::State(r))
            .map(|v| v as u64)
            .ok_or_else(|| CaseError::new(absent))
    };
    Ok(Slots {
        pool_total: gauge(Resource::LocalG2TotalSlots)?,
        pool_allocated: gauge(Resource::LocalG2AllocatedSlots)?,
        pool_evictable: gauge(Resource::LocalG2EvictableSlots)?,
        g3_total: gauge(Resource::G3TotalSlots)?,
        g3_allocated: gauge(Resource::G3AllocatedSlots)?,
        g3_evictable: gauge(Resource::G3EvictableSlots)?,
        g3_pending_stores: gauge(Resource::G3PendingStores)?,
        in_flight_ops: gauge(Resource::InFlightOps)?,
    })
}

/// `worker`'s slots once KVCR holds nothing back (or the last seen, after
/// [`IDLE_WITHIN`]: the verdict then names what stayed held).
fn await_idle(ctx: &CaseCtx, worker: &Worker, when: &str) -> Result<Slots, CaseError> {
    ctx.doing(format!(
        "waiting for worker {}'s KVCR to go idle {when}",
        worker.name()
    ))?;
    let settled = wait::settle(
        format!("worker {}'s KVCR to go idle {when}", worker.name()),
        IDLE_WITHIN,
        Duration::from_millis(50),
        || ctx.snapshot(worker).and_then(|s| slots(&s)),
        Slots::held_back,
    )?;
    Ok(settled.state)
}
