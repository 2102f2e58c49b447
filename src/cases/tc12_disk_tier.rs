//! TC-12 the disk tier (G3).
//!
//! A stack whose workers each have a G3 file (the `g3_capacity_blocks`
//! knob; `<run dir>/g3/<slot>.bin`, on the filesystem the run directory is
//! on) beside a Guard pool (8 blocks on `phase2_g3`, 256 on the production-size
//! pools of `phase3_scale`). Commit one prompt more than the pool holds (three
//! prompts of 4 blocks for a pool of 8), and one more for each further
//! read-back below, on worker A: the oldest blocks spill
//! from the pool to disk, by KVCR's own
//! inventory events (`stored` in `G3`), and KVCR holds them there
//! (`FETCHABLE, G3`), its `g3_store` counting them. The spilled prompts'
//! prefixes on A come back from disk, oldest first (`perf_repeats` of
//! them, as many as the disk tier holds with room to spare): each
//! delivered `from=g3`, `g3_deliver` counting its blocks, the reference
//! tokens. Each read-back is a measured stream: its TTFT and KVCR's own
//! operations over its telemetry window (`g3_deliver`, the read from disk)
//! go into results.json's requests, where `compare` judges them as the
//! disk-tier figures. Then SIGKILL A: the Guard
//! promotes (it serves the pool's DRAM half only) and the replacement A'
//! finds the disk half again: the spilled blocks are `FETCHABLE, G3` on A',
//! and a prefix of them comes back from disk with the reference tokens.
//!
//! **G3 read bench** (CPU engine; its own trial, before the one above):
//! KVCR's read from disk timed apart from any request. One prompt more
//! than the pool holds is committed on A, so the first prompt's prefix
//! spills to disk; a request for that prefix reads it back into A's
//! device cache. KVCR delivers a block it holds on disk only straight
//! from its G3 slot (`g3_deliver`) without filling its pool, so the block
//! stays on disk only and every later deliver reads the disk again: A
//! delivers the prefix from disk into its own device slots
//! `perf_kvcr_bench_ops` times in a row (`POST /kvcr/bench/g3_read`, each
//! op timed by the worker), after a warm-up. KVCR's own `g3_deliver`
//! histogram over the bench must count every read, all successful.
//! Hundreds of reads a round resolve a change of KVCR's read from disk
//! that the read-backs' ten requests cannot.

use crate::engine::Need;
use crate::evidence::{KvcrBench, KvcrOps, DISK_TIER_CASE};
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult, KvcrBenchKind};
use crate::telemetry::engine_kvcr_log;
use crate::telemetry::names::engine_kvcr_log::TIER_G3;
use crate::telemetry::{Counter, Scope};
use crate::verdict::disk::{expect_g3_survives, expect_served_from_disk, expect_spilled, Spill};
use crate::verdict::g3_read_bench::expect_g3_reads_timed;
use serde_json::json;

pub const CASE: Case = Case {
    id: DISK_TIER_CASE,
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
    let Some(g3_blocks) = ctx.settings().cpu_engine.g3_capacity_blocks else {
        return Err(CaseError::new(
            "TC-12 needs KVCR's disk tier (cpu_engine.g3_capacity_blocks; the phase2-g3 profile)",
        ));
    };
    let a = ctx.worker("A")?;
    let guard = ctx.guard().of(&a)?;
    let pool_blocks = ctx.pressure().guard_pool_blocks(&a)?;
    let per_prompt = u64::from(ctx.settings().prompts.prefix_blocks);
    let read_backs = read_backs(ctx.settings().perf_repeats, g3_blocks, per_prompt);
    // The pool's worth of prompts stays in DRAM; the `read_backs` before
    // them spill to disk.
    let families = ctx.families(prompts_to_spill(&pool_blocks, per_prompt) + read_backs - 1)?;
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

    // Served from disk, on A: each spilled prefix, oldest first, a measured
    // G3 hit.
    let mut hits = Vec::with_capacity(read_backs);
    for family in &families[..read_backs] {
        let (prompt, blocks) = (
            family.variant(1),
            ctx.pressure().block_hashes(&a, family.variant(0))?,
        );
        let mark = ctx.pressure().log_mark(&a);
        let before = ctx.snapshot(&a)?;
        let mut hit = ctx.perf().stream_timed(Some(&a), prompt)?.record;
        let delta = ctx.delta_since(&a, &before)?;
        let from_disk = ctx.pressure().delivered_since(&a, mark, "g3")?;
        let delivered = delta.required_count(&Counter::TransferBlocks(Scope::G3Deliver))?;
        ctx.check(
            &format!("from-disk-{}.json", prompt.key()),
            &json!({"delivered_from_g3": from_disk, "g3_deliver_blocks": delivered}),
            expect_served_from_disk(&blocks, &from_disk, delivered),
        )?;
        hit.kvcr_ops = KvcrOps::from_delta(a.name(), &delta);
        hits.push(hit);
    }
    ctx.perf().report_requests(G3_HIT, hits);

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

pub const G3_READ_BENCH: Case = Case {
    id: DISK_TIER_CASE,
    name: "g3_read_bench",
    destructive: false,
    needs: &[
        Need::DiskTierReports,
        Need::ProductionConditions,
        Need::Guard,
        Need::DeliverBench,
    ],
    optional: &[],
    run: g3_read_bench,
};

fn g3_read_bench(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    let hashes = read_back_from_disk(ctx, &a)?;
    let timed = ctx
        .perf()
        .time_kvcr_bench(KvcrBenchKind::G3Read, &a, None, &hashes)?;
    let counts = timed.counts(KvcrBench::G3_READ_SCOPE);
    ctx.perf().judge_kvcr_bench(
        KvcrBenchKind::G3Read,
        &timed.bench,
        &counts,
        expect_g3_reads_timed(&counts),
    )
}

/// Spills a fresh prompt's prefix to `worker`'s disk tier and reads it
/// back once through a request, so the device cache holds the prefix
/// while KVCR holds it on disk only: the blocks the G3 read bench
/// delivers again. Returns their hashes.
fn read_back_from_disk(ctx: &CaseCtx, worker: &Worker) -> Result<Vec<u64>, CaseError> {
    let pool_blocks = ctx.pressure().guard_pool_blocks(worker)?;
    let per_prompt = u64::from(ctx.settings().prompts.prefix_blocks);
    let families = ctx.families(prompts_to_spill(&pool_blocks, per_prompt))?;
    for family in &families {
        ctx.commit(worker, family.variant(0))?;
    }
    let hashes = ctx
        .pressure()
        .block_hashes(worker, families[0].variant(0))?;
    let read_back = families[0].variant(1);
    let answer = ctx.complete_on(worker, read_back)?;
    ctx.expect_reference(read_back, &answer.tokens)?;
    let holding = ctx.pressure().holding(worker, &hashes)?;
    if holding.values().any(|w| w != "g3") {
        let path = ctx.record("holding.json", &holding);
        return Err(CaseError::new(format!(
            "after reading {} back, worker {}'s KVCR does not hold all its {} prefix blocks on disk only: {holding:?}",
            read_back.key(),
            worker.name(),
            hashes.len()
        ))
        .with_evidence(path));
    }
    Ok(hashes)
}

/// The measurement of the read-backs' TTFT percentiles (ms).
const G3_HIT: &str = "g3_hit_ttft_ms";

/// Spilled prefixes read back from disk: `repeats` (the requests of a
/// performance arm), but no more than the disk tier holds with two
/// prompts' room to spare (older blocks spill with them), and at least one.
fn read_backs(repeats: u32, g3_blocks: u32, per_prompt: u64) -> usize {
    let room = (u64::from(g3_blocks) / per_prompt.max(1)).saturating_sub(2);
    u64::from(repeats).min(room).max(1) as usize
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
    use super::{prompts_to_spill, read_backs};

    #[test]
    fn as_many_read_backs_as_an_arm_has_requests_while_the_disk_has_room() {
        // phase2_g3: 64 blocks on disk, prompts of 4, 10 requests an arm.
        assert_eq!(read_backs(10, 64, 4), 10);
        // The production-size pools' 32 blocks hold 6 prompts and the spare.
        assert_eq!(read_backs(10, 32, 4), 6);
        // The ci profile's 2 requests an arm; a disk of one prompt still
        // reads one back.
        assert_eq!(read_backs(2, 64, 4), 2);
        assert_eq!(read_backs(10, 4, 4), 1);
        assert_eq!(read_backs(0, 64, 4), 1);
    }

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
