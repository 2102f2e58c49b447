//! TC-05 performance arms. A streaming client measures TTFT, TPOT and ITL
//! per request; each arm runs over R fresh prompts, every stream must
//! reproduce the reference tokens, and each request's telemetry must show
//! the tier the arm is about:
//! - **cold**: a fresh prompt, every block computed;
//! - **local hit**: the prefix again on the same worker, from the device cache;
//! - **DRAM hit**: the prefix again after evicting the device cache, from host memory;
//! - **remote hit**: the prefix on the other worker, through a hinted peer transfer;
//! - **concurrency sweep**: throughput (with its interval) and TTFT/TPOT
//!   percentiles per level; a closed loop per concurrency level by default,
//!   or an open loop of Poisson arrivals per rate (`perf_sweep_mode`), whose
//!   requests record their schedule delay;
//! - **KVCR deliver bench** (CPU engine): KVCR's host-tier deliver timed
//!   apart from any request: worker A delivers one committed prompt's
//!   blocks from KVCR's pool into their own device slots
//!   `perf_kvcr_bench_ops` times in a row, after a warm-up; KVCR's own
//!   `local_deliver` histogram over the bench must count every deliver, all
//!   successful. Hundreds of delivers a round resolve a change of KVCR's
//!   deliver that the arms' ten requests cannot;
//! - **KVCR pull bench** (CPU engine): KVCR's peer pull timed the same way:
//!   a prompt committed on worker A is sent to worker B through the router,
//!   whose hint names A; B keeps that hint and pulls the prompt's blocks
//!   from A with it `perf_kvcr_bench_ops` times in a row, each a hinted
//!   remote deliver into device slots of its own, after a warm-up. B's
//!   `remote_deliver` histogram must count every pull, all successful, and
//!   A's `source_write` count must rise (the source's write is on the
//!   timed path).
//!
//! Each arm reports n and its TTFT p50's order-statistic interval. Each
//! request records KVCR's own operations over its telemetry window (count
//! and summed duration per worker, scope and result), which `compare`
//! judges apart from the client's TTFT.
//!
//! No latency thresholds: deltas against the KVCR-disabled baselines of the
//! reference phase are recorded and plotted.

use crate::config::SweepMode;
use crate::engine::Need;
use crate::evidence::{Arm, KvcrBench, KvcrOps};
use crate::prompts::Prompt;
use crate::stats::OpenLoop;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult, KvcrBenchKind};
use crate::verdict::kvcr_bench::expect_bench_delivered;
use crate::verdict::kvcr_pull_bench::expect_bench_pulled;
use crate::verdict::local::{expect_computed, expect_device_hit, expect_host_tier_hit};
use crate::verdict::transfer::expect_peer_transfer;

pub const COLD: Case = Case {
    id: "TC-05",
    name: "cold",
    destructive: false,
    needs: &[Need::PerformanceArms],
    optional: &[Need::FirstTokenStamps],
    run: cold,
};
pub const LOCAL_HIT: Case = Case {
    id: "TC-05",
    name: "local_hit",
    destructive: false,
    needs: &[Need::PerformanceArms],
    optional: &[Need::FirstTokenStamps],
    run: local_hit,
};
pub const DRAM_HIT: Case = Case {
    id: "TC-05",
    name: "dram_hit",
    destructive: false,
    needs: &[Need::PerformanceArms],
    optional: &[Need::FirstTokenStamps],
    run: dram_hit,
};
pub const REMOTE_HIT: Case = Case {
    id: "TC-05",
    name: "remote_hit",
    destructive: false,
    needs: &[Need::PerformanceArms],
    optional: &[Need::FirstTokenStamps],
    run: remote_hit,
};
pub const SWEEP: Case = Case {
    id: "TC-05",
    name: "concurrency_sweep",
    destructive: false,
    needs: &[Need::PerformanceArms],
    optional: &[Need::FirstTokenStamps],
    run: sweep,
};

pub const DELIVER_BENCH: Case = Case {
    id: "TC-05",
    name: "kvcr_deliver_bench",
    destructive: false,
    needs: &[Need::PerformanceArms, Need::DeliverBench],
    optional: &[],
    run: deliver_bench,
};

pub const PULL_BENCH: Case = Case {
    id: "TC-05",
    name: "kvcr_pull_bench",
    destructive: false,
    needs: &[Need::PerformanceArms, Need::DeliverBench],
    optional: &[],
    run: pull_bench,
};

fn repeats(ctx: &CaseCtx) -> usize {
    ctx.settings().perf_repeats as usize
}

fn cold(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    let mut records = Vec::new();
    for family in ctx.families(repeats(ctx))? {
        let prompt = family.variant(0);
        let before = ctx.snapshot(&a)?;
        let mut record = ctx
            .perf()
            .stream_measured(Some(&a), prompt, Arm::Cold)?
            .record;
        let delta = ctx.delta_since(&a, &before)?;
        record.kvcr_ops = KvcrOps::from_delta(a.name(), &delta);
        records.push(record);
        let observed = ctx.observe().host_tier_hit(&delta, None)?;
        let blocks = ctx.geometry().full_blocks(prompt.tokens.len() as u64);
        ctx.check(
            &format!("{}.json", prompt.key()),
            &observed,
            expect_computed(&observed, blocks),
        )?;
    }
    ctx.perf().report_arm(Arm::Cold, records)?;
    Ok(())
}

fn local_hit(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    let bs = u64::from(ctx.geometry().block_size_tokens);
    let mut records = Vec::new();
    for family in ctx.families(repeats(ctx))? {
        ctx.commit(&a, family.variant(0))?;
        let before = ctx.snapshot(&a)?;
        let mut record = ctx
            .perf()
            .stream_measured(Some(&a), family.variant(1), Arm::LocalHit)?
            .record;
        let delta = ctx.delta_since(&a, &before)?;
        record.kvcr_ops = KvcrOps::from_delta(a.name(), &delta);
        records.push(record);
        let observed = ctx.observe().host_tier_hit(&delta, None)?;
        ctx.check(
            &format!("{}.json", family.variant(1).key()),
            &observed,
            expect_device_hit(&observed, family.shared_blocks(), bs),
        )?;
    }
    ctx.perf().report_arm(Arm::LocalHit, records)?;
    Ok(())
}

fn dram_hit(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    let geometry = ctx.geometry();
    let families = ctx.families(repeats(ctx))?;
    for family in &families {
        ctx.commit(&a, family.variant(0))?;
    }
    let eviction = ctx.evict_device_cache(&a)?;
    ctx.measure("eviction", &eviction);
    let mut records = Vec::new();
    for family in &families {
        let before = ctx.snapshot(&a)?;
        let measured = ctx
            .perf()
            .stream_measured(Some(&a), family.variant(1), Arm::DramHit)?;
        let delta = ctx.delta_since(&a, &before)?;
        let observed = ctx
            .observe()
            .host_tier_hit(&delta, measured.cached_tokens)?;
        ctx.check(
            &format!("{}.json", family.variant(1).key()),
            &observed,
            expect_host_tier_hit(
                &observed,
                family.shared_blocks(),
                u64::from(geometry.block_size_tokens),
                geometry.bytes_per_block(),
            ),
        )?;
        let mut record = measured.record;
        record.kvcr_ops = KvcrOps::from_delta(a.name(), &delta);
        records.push(record);
    }
    ctx.perf().report_arm(Arm::DramHit, records)?;
    Ok(())
}

fn remote_hit(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let geometry = ctx.geometry();
    let mut records = Vec::new();
    for family in ctx.families(repeats(ctx))? {
        ctx.commit(&a, family.variant(0))?;
        let (a_before, b_before) = (ctx.snapshot(&a)?, ctx.snapshot(&b)?);
        let mut record = ctx
            .perf()
            .stream_measured(Some(&b), family.variant(1), Arm::RemoteHit)?
            .record;
        let observed = ctx.observe().peer_transfer(&a, &a_before, &b, &b_before)?;
        record.kvcr_ops = KvcrOps::from_delta(a.name(), &observed.source);
        record
            .kvcr_ops
            .extend(KvcrOps::from_delta(b.name(), &observed.target));
        records.push(record);
        ctx.check(
            &format!("{}.json", family.variant(1).key()),
            &observed,
            expect_peer_transfer(
                &observed.transfer,
                family.shared_blocks(),
                geometry.bytes_per_block(),
            ),
        )?;
    }
    ctx.perf().report_arm(Arm::RemoteHit, records)?;
    Ok(())
}

fn deliver_bench(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    let family = ctx.family()?;
    let prompt = family.variant(0);
    ctx.commit(&a, prompt)?;
    let pressure = ctx.pressure();
    let hashes = pressure.block_hashes(&a, prompt)?;
    let holding = pressure.holding(&a, &hashes)?;
    if holding.values().any(|w| w != "local") {
        let path = ctx.record("holding.json", &holding);
        return Err(CaseError::new(format!(
            "after committing {}, worker {}'s KVCR does not hold all its {} blocks in its pool: {holding:?}",
            prompt.key(),
            a.name(),
            hashes.len()
        ))
        .with_evidence(path));
    }
    let timed = ctx
        .perf()
        .time_kvcr_bench(KvcrBenchKind::Deliver, &a, None, &hashes)?;
    let counts = timed.counts(KvcrBench::SCOPE);
    ctx.perf().judge_kvcr_bench(
        KvcrBenchKind::Deliver,
        &timed.bench,
        &counts,
        expect_bench_delivered(&counts),
    )
}

fn pull_bench(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let family = ctx.family()?;
    let prompt = family.variant(0);
    ctx.commit(&a, prompt)?;
    // B serves the prompt through the router, whose hint names A: B pulls
    // it from A and keeps the hint, which every bench pull submits again.
    let answer = ctx.complete_on(&b, prompt)?;
    ctx.expect_reference(prompt, &answer.tokens)?;
    let hashes = ctx.pressure().block_hashes(&b, prompt)?;
    let timed = ctx
        .perf()
        .time_kvcr_bench(KvcrBenchKind::Pull, &b, Some(&a), &hashes)?;
    let counts = timed.pull_counts(a.name());
    ctx.perf().judge_kvcr_bench(
        KvcrBenchKind::Pull,
        &timed.bench,
        &counts,
        expect_bench_pulled(&counts),
    )
}

fn sweep(ctx: &CaseCtx) -> CaseResult {
    let settings = ctx.settings();
    let (mut results, mut requests) = (Vec::new(), Vec::new());
    match settings.perf_sweep_mode {
        SweepMode::Closed => {
            for &level in &settings.perf_concurrency_levels {
                // Each request a fresh prompt, the router picks the worker.
                let count = closed_loop_requests(
                    settings.perf_sweep_requests,
                    settings.perf_sweep_waves,
                    level,
                );
                let prompts = fresh_prompts(ctx, count)?;
                let (summary, records) = ctx.perf().run_concurrent(level, &prompts)?;
                results.push(summary);
                requests.extend(records);
            }
        }
        SweepMode::Open => {
            for (i, &rate) in settings.perf_sweep_rates.iter().enumerate() {
                let seed = settings.perf_arrival_seed.wrapping_add(i as u64);
                let plan = OpenLoop::new(f64::from(rate), seed)
                    .map_err(|e| CaseError::new(e.to_string()))?;
                let prompts = fresh_prompts(ctx, settings.perf_sweep_requests as usize)?;
                let (summary, records) = ctx.perf().run_open_loop(plan, rate, &prompts)?;
                results.push(summary);
                requests.extend(records);
            }
        }
    }
    ctx.perf().report_sweep(results, requests)
}

/// Requests of a closed-loop level: the setting, but at least `waves`
/// waves of the level's concurrency.
fn closed_loop_requests(setting: u32, waves: u32, level: u32) -> usize {
    setting.max(level.saturating_mul(waves)) as usize
}

fn fresh_prompts(ctx: &CaseCtx, count: usize) -> Result<Vec<Prompt>, CaseError> {
    Ok(ctx
        .families(count)?
        .iter()
        .map(|f| f.variant(0).clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::closed_loop_requests;

    #[test]
    fn a_closed_loop_level_runs_at_least_its_waves() {
        assert_eq!(closed_loop_requests(24, 6, 1), 24);
        assert_eq!(closed_loop_requests(24, 6, 4), 24);
        assert_eq!(closed_loop_requests(24, 6, 8), 48);
        assert_eq!(closed_loop_requests(24, 2, 8), 24);
        assert_eq!(closed_loop_requests(1, 2, 4), 8);
    }
}
