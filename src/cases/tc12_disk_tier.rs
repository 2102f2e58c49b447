//! TC-12 the disk tier (G3).
//!
//! A stack whose workers each have a G3 file (the `g3_capacity_blocks`
//! knob; `<run dir>/g3/<slot>.bin`, on the filesystem the run directory is
//! on) beside a Guard pool (8 blocks on `phase2_g3`, 256 on the production-size
//! pools of `phase3_scale`). Commit one prompt more than the pool holds (three
//! prompts of 4 blocks for a pool of 8) on worker A: the oldest blocks spill
//! from the pool to disk, by KVCR's own
//! inventory events (`stored` in `G3`), and KVCR holds them there
//! (`FETCHABLE, G3`), its `g3_store` counting them. The first prompt's
//! prefix on A comes back from disk: delivered `from=g3`, `g3_deliver`
//! counting its blocks, the reference tokens. Then SIGKILL A: the Guard
//! promotes (it serves the pool's DRAM half only) and the replacement A'
//! finds the disk half again: the spilled blocks are `FETCHABLE, G3` on A',
//! and a prefix of them comes back from disk with the reference tokens.

use crate::engine::Need;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::telemetry::engine_kvcr_log;
use crate::telemetry::names::engine_kvcr_log::TIER_G3;
use crate::telemetry::{Counter, Scope};
use crate::verdict::disk::{expect_g3_survives, expect_served_from_disk, expect_spilled, Spill};
use serde_json::json;

pub const CASE: Case = Case {
    id: "TC-12",
    name: "disk_tier",
    destructive: true,
    needs: &[
        Need::DiskTierReports,
        Need::ProductionConditions,
        Need::Guard,
    ],
    optional: &[],
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let marks = ctx.pressure().log_marks();
    if ctx.settings().cpu_engine.g3_capacity_blocks.is_none() {
        return Err(CaseError::new(
            "TC-12 needs KVCR's disk tier (cpu_engine.g3_capacity_blocks; the phase2-g3 profile)",
        ));
    }
    let a = ctx.worker("A")?;
    let guard = ctx.guard().of(&a)?;
    let pool_blocks = ctx.pressure().guard_pool_blocks(&a)?;
    let per_prompt = u64::from(ctx.settings().prompts.prefix_blocks);
    let families = ctx.families(prompts_to_spill(&pool_blocks, per_prompt))?;
    ctx.measure("pool_blocks", pool_blocks.iter().min().copied());
    let first = ctx.pressure().block_hashes(&a, families[0].variant(0))?;

    // Pressure: the oldest blocks spill to disk.
    let mark = ctx.pressure().log_mark(&a);
    let before = ctx.snapshot(&a)?;
    for family in &families {
        ctx.commit(&a, family.variant(0))?;
    }
    let lines = ctx.pressure().kvcr_lines_since(&a, mark)?;
    let delta = ctx.delta_since(&a, &before)?;
    let spill = Spill {
        blocks: first.clone(),
        stored_in_g3: engine_kvcr_log::resident(&lines, TIER_G3),
        held_in_g3: ctx.pressure().held_in(&a, &first, "g3")?,
        g3_store_blocks: delta.required_count(&Counter::TransferBlocks(Scope::G3Store))?,
    };
    ctx.measure("spilled_blocks", spill.stored_in_g3.len());
    ctx.check(
        "spill.json",
        &json!({"spill": spill, "lines": lines, "delta": delta}),
        expect_spilled(&spill),
    )?;

    // Served from disk, on A.
    let mark = ctx.pressure().log_mark(&a);
    let before = ctx.snapshot(&a)?;
    let answer = ctx.complete_on(&a, families[0].variant(1))?;
    ctx.expect_reference(families[0].variant(1), &answer.tokens)?;
    let from_disk = ctx.pressure().delivered_since(&a, mark, "g3")?;
    let delivered = ctx
        .delta_since(&a, &before)?
        .required_count(&Counter::TransferBlocks(Scope::G3Deliver))?;
    ctx.check(
        "from-disk.json",
        &json!({"delivered_from_g3": from_disk, "g3_deliver_blocks": delivered}),
        expect_served_from_disk(&first, &from_disk, delivered),
    )?;

    // The disk half survives a Guard handback to the replacement.
    let mut events = guard.follow()?;
    let kill = ctx.faults().kill(&a)?;
    let promotion = events.await_promotion(a.slot.guard_index)?;
    ctx.record("kill.json", &json!({"kill": kill, "promotion": promotion}));
    let replacement = ctx.faults().replace("A")?;
    let held = ctx.pressure().held_in(&replacement, &first, "g3")?;
    let mark = ctx.pressure().log_mark(&replacement);
    let answer = ctx.complete_on(&replacement, families[0].variant(2))?;
    ctx.expect_reference(families[0].variant(2), &answer.tokens)?;
    let from_disk = ctx.pressure().delivered_since(&replacement, mark, "g3")?;
    ctx.check(
        "handback.json",
        &json!({"promotion": promotion, "held_in_g3_by_replacement": held, "delivered_from_g3": from_disk}),
        expect_g3_survives(&first, &held, &from_disk),
    )?;
    ctx.pressure().expect_no_bad_lines_since(&marks, &[])
}

/// Prompts of `per_prompt` blocks that overflow the smallest of the pools by
/// at least one prompt's blocks: the first prompt's blocks are then the
/// oldest the pool had to drop (any block an earlier case left is older).
fn prompts_to_spill(pool_blocks: &[u64], per_prompt: u64) -> usize {
    let pool = pool_blocks.iter().min().copied().unwrap_or(0);
    (pool.div_ceil(per_prompt.max(1)) + 1) as usize
}

#[cfg(test)]
mod tests {
    use super::prompts_to_spill;

    #[test]
    fn one_prompt_more_than_the_pool_holds() {
        // phase2_g3: a pool of 8 blocks, prompts of 4: three prompts.
        assert_eq!(prompts_to_spill(&[8], 4), 3);
        // The production-size pools: 256 blocks.
        assert_eq!(prompts_to_spill(&[256], 4), 65);
        // A pool that is not a whole number of prompts, several pools.
        assert_eq!(prompts_to_spill(&[10, 30], 4), 4);
        assert!(prompts_to_spill(&[256], 4) as u64 * 4 > 256 + 3);
    }
}
