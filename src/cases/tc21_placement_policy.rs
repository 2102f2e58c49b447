//! TC-21 custom and hostile placement policy, on the `phase2` stack (its
//! workers hand KVCR the engine's own placement policy,
//! `cpu_engine.counting_policy`: KVCR's default answers, every call
//! counted). Worker B commits prompts past its Guard pool's size. Expect:
//! reference tokens; KVCR called the policy's hooks as often as its own
//! counters say it acted (`on_ingest` once per stored block, `on_remove`
//! once per evicted one, `decide_ingest` and `eviction_score` before each
//! admission, `decide_eviction` before each eviction), and told it truly
//! where each block is held: the engine lends KVCR none of its memory on
//! this stack (no host tier, no framework regions, no pin over the phase),
//! so no block is in FW_G2, and each block `on_ingest` is told of is in
//! KVCR's pool (LOCAL_G2) alone. Then the policy turns
//! hostile (the `hostile_policy` switch: every other `decide_ingest` raises
//! or answers MOVE_TO, every other `eviction_score` raises or is NaN, every
//! other `decide_eviction` raises or answers no decision, every other
//! `on_ingest` and `on_remove` raises) and B commits as many prompts
//! more, serves one of them from its pool, and commits one more pinned
//! (`no_evict`, work KVCR must keep local), which the policy asks to drop
//! every other time. Expect: reference tokens;
//! each misbehaviour happened and KVCR logged one warning for each; KVCR
//! still told the policy truly where each block is held; KVCR
//! kept every block it asked about (stored each one `decide_ingest` was
//! asked of, evicted none whose `decide_eviction` misbehaved), failed and
//! dropped no deposit, still
//! evicted and still delivered from its pool; no bad KVCR line but the
//! tracebacks of its `... failed` warnings. Then the policy behaves again
//! and B commits one more prompt into its full pool: KVCR scores the blocks
//! the hostile scores left unscored, so the suite's at-rest audit after the
//! case finds every slot evictable.

use serde_json::json;

use crate::engine::Need;
use crate::prompts::Family;
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult, EngineFault};
use crate::telemetry::{Counter, Delta, OpResult, Scope};
use crate::verdict::log_scan::BadLine;
use crate::verdict::policy::{
    expect_block_tiers_told, expect_hostile_policy_answered, expect_policy_consulted, Answered,
    BlockTiersTold, FrameworkMemory, KvcrActivity, Misbehaviour, PolicyCalls, ANSWERED,
};

pub const CASE: Case = Case {
    id: "TC-21",
    name: "custom_and_hostile_placement_policy",
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

/// The misbehaviours the hostile phase turns on.
const HOSTILE: [Misbehaviour; 9] = [
    Misbehaviour::RaiseIngest,
    Misbehaviour::InvalidIngest,
    Misbehaviour::DropRequired,
    Misbehaviour::NanScore,
    Misbehaviour::RaiseScore,
    Misbehaviour::InvalidEviction,
    Misbehaviour::RaiseEviction,
    Misbehaviour::RaiseOnIngest,
    Misbehaviour::RaiseOnRemove,
];
/// The `hostile_policy` switch's value for [`HOSTILE`].
const HOSTILE_SWITCH: &str = "raise_ingest,invalid_ingest,drop_required,nan_score,raise_score,\
                              invalid_eviction,raise_eviction,raise_on_ingest,raise_on_remove";
/// Prompts committed beyond those the pool holds, in each phase: each
/// evicts a prompt's worth of blocks.
const OVERFLOW_PROMPTS: u64 = 2;

pub fn run(ctx: &CaseCtx) -> CaseResult {
    if !ctx.settings().cpu_engine.counting_policy {
        return Err(CaseError::new(
            "TC-21 needs the engine's own placement policy in KVCR \
             (cpu_engine.counting_policy: the phase2 profile, `cargo test --test phase2`)",
        ));
    }
    let marks = ctx.pressure().log_marks();
    let b = ctx.worker("B")?;
    let pool = u64::from(ctx.settings().cpu_engine.guard_pool_blocks.ok_or_else(|| {
        CaseError::new("TC-21 needs pools sized in blocks (cpu_engine.guard_pool_blocks)")
    })?);
    let per_prompt = u64::from(ctx.settings().prompts.prefix_blocks).max(1);
    let prompts = (pool / per_prompt + OVERFLOW_PROMPTS) as usize;
    let families = ctx.families(2 * prompts + 2)?;
    let (calm, rest) = families.split_at(prompts);
    let (hostile, rest) = rest.split_at(prompts);
    let (pinned, calm_again) = rest.split_at(1);

    // A well-behaved policy: consulted as KVCR acted.
    let before = ctx.snapshot(&b)?;
    for f in calm {
        ctx.commit(&b, f.variant(0))?;
    }
    let delta = ctx.observe().await_deposits_answered(&b, &before)?;
    let (calls, kvcr) = (policy_calls(&delta)?, kvcr_activity(&delta)?);
    ctx.check(
        "consulted.json",
        &json!({"policy_calls": calls, "kvcr": kvcr, "delta": delta}),
        expect_policy_consulted(&calls, &kvcr),
    )?;
    check_block_tiers(ctx, "block_tiers.json", &delta, &calls)?;

    // The same policy, hostile: KVCR answers each misbehaviour and serves on.
    let switch = ctx
        .faults()
        .engine_added("B", EngineFault::HostilePolicy(HOSTILE_SWITCH))?;
    let mark = ctx.pressure().log_mark(&b);
    let before = ctx.snapshot(&b)?;
    for f in hostile {
        ctx.commit(&b, f.variant(0))?;
    }
    let served = held_prompt(ctx, &b, hostile)?;
    let answer = ctx.complete_on(&b, served.variant(1))?;
    ctx.expect_reference(served.variant(1), &answer.tokens)?;
    // Work KVCR must keep local: a deposit pinned (no_evict), which the
    // policy asks to drop.
    let pins = ctx.faults().engine_added("B", EngineFault::PinDeposits)?;
    ctx.commit(&b, pinned[0].variant(0))?;
    let delta = ctx.observe().await_deposits_answered(&b, &before)?;
    let (calls, kvcr) = (policy_calls(&delta)?, kvcr_activity(&delta)?);
    let mut answered = Vec::new();
    let mut warnings = Vec::new();
    for m in HOSTILE {
        let lines = ctx.pressure().log_lines_since(&b, mark, m.warning())?;
        answered.push(Answered {
            misbehaviour: m,
            calls: calls.get(m.hook(), m.name()),
            warnings: lines.len() as u64,
        });
        warnings.extend(lines.into_iter().take(3));
    }
    // Both switches off (each guard clears them all): the pins are released.
    drop(pins);
    drop(switch);
    ctx.check(
        "hostile.json",
        &json!({"answered": answered, "policy_calls": calls, "kvcr": kvcr,
                "served_from_pool": served.variant(1).key(), "warnings": warnings,
                "delta": delta}),
        expect_hostile_policy_answered(&answered, &calls, &kvcr),
    )?;
    check_block_tiers(ctx, "hostile_block_tiers.json", &delta, &calls)?;
    // The policy behaves again: a deposit into the full pool makes KVCR
    // score the blocks the hostile scores left unscored, so the at-rest
    // audit after the case finds every pool slot evictable again.
    ctx.commit(&b, calm_again[0].variant(0))?;
    // The raising hooks' tracebacks are KVCR's warnings; any other bad line fails.
    ctx.pressure()
        .expect_no_bad_lines_since(&marks, &[BadLine::Traceback])
}

/// The engine's counts of its policy's calls in `delta`; the family must be
/// reported (an engine without the counter gives no evidence).
fn policy_calls(delta: &Delta) -> Result<PolicyCalls, CaseError> {
    delta.required_count(&Counter::KvcrPolicyCalls(
        "decide_ingest".into(),
        ANSWERED.into(),
    ))?;
    let mut calls = PolicyCalls::default();
    for (c, v) in delta.nonzero() {
        if let Counter::KvcrPolicyCalls(hook, answer) = c {
            calls
                .0
                .entry(hook.clone())
                .or_default()
                .insert(answer.clone(), v.round() as u64);
        }
    }
    Ok(calls)
}

/// What KVCR told the policy of each block's tiers over `delta`'s phase,
/// checked against what the engine lent KVCR of its own memory.
fn check_block_tiers(
    ctx: &CaseCtx,
    evidence: &str,
    delta: &Delta,
    calls: &PolicyCalls,
) -> CaseResult {
    let told = block_tiers_told(delta)?;
    let engine = &ctx.settings().cpu_engine;
    let framework = FrameworkMemory {
        offered: engine.host_tier_blocks > 0 || engine.framework_regions,
        pinned: framework_pins(delta)?,
    };
    let disk_tier = engine.g3_capacity_blocks.is_some();
    ctx.check(
        evidence,
        &json!({"block_tiers": told, "framework_memory": framework, "disk_tier": disk_tier,
                "host_tier_blocks": engine.host_tier_blocks,
                "framework_regions": engine.framework_regions, "policy_calls": calls}),
        expect_block_tiers_told(&told, calls, &framework, disk_tier),
    )
}

/// The engine's counts of the block metas KVCR handed its policy in
/// `delta`; the family must be reported.
fn block_tiers_told(delta: &Delta) -> Result<BlockTiersTold, CaseError> {
    delta.required_count(&Counter::KvcrPolicyBlockTiers(
        "on_ingest".into(),
        "LOCAL_G2".into(),
    ))?;
    let mut told = BlockTiersTold::default();
    for (c, v) in delta.nonzero() {
        if let Counter::KvcrPolicyBlockTiers(hook, tiers) = c {
            told.0
                .entry(hook.clone())
                .or_default()
                .insert(tiers.clone(), v.round() as u64);
        }
    }
    Ok(told)
}

/// Blocks of its own memory the engine pinned for KVCR in `delta`, in any
/// tier; the family must be reported.
fn framework_pins(delta: &Delta) -> Result<u64, CaseError> {
    delta.required_count(&Counter::KvcrFrameworkPinBlocks(
        "host".into(),
        "pinned".into(),
    ))?;
    let pinned = delta
        .sum_where(|c| matches!(c, Counter::KvcrFrameworkPinBlocks(_, event) if event == "pinned"));
    Ok(pinned.round().max(0.0) as u64)
}

/// What KVCR reported of the worker in `delta`.
fn kvcr_activity(delta: &Delta) -> Result<KvcrActivity, CaseError> {
    let deposit = |o: &str| delta.required_count(&Counter::KvcrDepositBlocks(o.into()));
    let inventory =
        |e: &str| delta.required_count(&Counter::KvcrInventoryBlocks("LOCAL_G2".into(), e.into()));
    Ok(KvcrActivity {
        deposit_success: deposit("success")?,
        deposit_failed: deposit("failed")?,
        deposit_dropped: deposit("dropped")?,
        stored: inventory("stored")?,
        removed: inventory("removed")?,
        local_delivers: delta
            .required_count(&Counter::OpCount(Scope::LocalDeliver, OpResult::Success))?,
    })
}

/// The newest committed prompt, other than the last (still in the device
/// cache), whose shared prefix KVCR's pool holds whole: a request for it is
/// served from the pool.
fn held_prompt<'f>(
    ctx: &CaseCtx,
    worker: &Worker,
    committed: &'f [Family],
) -> Result<&'f Family, CaseError> {
    let candidates = &committed[..committed.len().saturating_sub(1)];
    for f in candidates.iter().rev() {
        let prefix: Vec<u64> = ctx
            .pressure()
            .block_hashes(worker, f.variant(1))?
            .into_iter()
            .take(f.shared_blocks() as usize)
            .collect();
        if ctx.pressure().held_in(worker, &prefix, "local")?.len() == prefix.len() {
            return Ok(f);
        }
    }
    Err(CaseError::new(format!(
        "worker {}'s pool holds the whole prefix of none of the {} prompts committed before \
         the last: KVCR kept nothing to serve from its pool",
        worker.name(),
        candidates.len()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The switch turns on exactly the misbehaviours the case checks.
    #[test]
    fn the_switch_names_the_checked_misbehaviours() {
        let names: Vec<&str> = HOSTILE.iter().map(|m| m.name()).collect();
        assert_eq!(HOSTILE_SWITCH, names.join(","));
    }
}
