//! TC-24 deadline storm: KVCR's operations outlast its operation timeout
//! while the pool is full.
//!
//! Runs on a stack of its own whose workers hand KVCR an operation timeout
//! of [`OPERATION_TIMEOUTS_MS`]' first (and an abandon timeout of twice that,
//! the least KVCR takes), through the launch switch `kvcr_override`: shorter
//! than a spill to disk, a copy and a fill take together on this machine,
//! as on an overloaded host or a slow disk. The override is verified from
//! each worker's start-up line before anything relies on it. On a host so
//! loaded that even the one-block deposits of the workers' readiness pass
//! that timeout, the stack does not come up; the case then starts it once
//! more with the next timeout (a loaded host slows the spills the storm
//! waits on as much), and records the timeout it ran with.
//!
//! On worker B (the disk-tier stack: a Guard pool of 8 blocks, a G3 file of
//! 64) it commits six prompts more than the pool holds. Each deposit into
//! the full pool waits for its victims' spills to disk, one at a time, and
//! the later blocks of a deposit pass their deadline while they wait: KVCR
//! must fail them (its pending deposit's capacity waiters), and a spill or
//! a copy submitted past its deadline ends failed. The newest prompts are
//! read back (deliveries from the pool and from disk that may time out),
//! and the blocks KVCR holds on disk are fetched into the full pool
//! (`KVCR.fetch`, through the engine's `POST /kvcr/fetch`).
//!
//! Before the storm, a deliver waits on blocks KVCR is still filling: the
//! engine's probe (`POST /kvcr/probe/deliver_while_filling`) deposits a new
//! prompt's blocks on B and, before KVCR's progress thread has run, delivers
//! them back as a second request for the prefix would, then holds the
//! interpreter for three operation timeouts (the copy cannot end, as on a host too
//! busy to schedule KVCR's thread). KVCR must answer the deliver at its
//! first poll past the deadline, every block failed (its sweep of expired
//! delivers), and the prompt is then answered with the reference tokens.
//!
//! Verdicts: the deliver that waited on filling blocks ended failed at its
//! deadline; every request is answered within its budget with the
//! reference tokens (what KVCR failed is computed again); the storm
//! happened (KVCR attempted spills, so deposits waited for room, and
//! deposit blocks ended failed; the failed operations of every scope are
//! recorded); once KVCR is idle nothing is held (every allocated slot of
//! both tiers evictable, no spill pending, no operation in flight, every
//! deposit answered, no device page pinned, every fetched claim given
//! back); and afterwards the stack serves and KVCR admits a new deposit.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::engine::{kvcr_override, Need};
use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult, LogMark};
use crate::telemetry::names::engine_kvcr_log::CONFIG_OVERRIDDEN;
use crate::telemetry::{Counter, Delta, OpResult, Scope, Snapshot};
use crate::verdict::deadline_storm::{
    expect_answered_through_storm, expect_deliver_expired_while_filling, expect_nothing_left,
    expect_still_admits, expect_storm, Admission, AfterStorm, ScopeOps, StormOps, StormRequest,
};
use crate::verdict::full_tiers::Staged;
use crate::verdict::log_scan::BadLine;
use crate::wait::{self, Poll};

use super::tc20_full_tiers::slots;

pub const CASE: Case = Case {
    id: "TC-24",
    name: "deadline_storm",
    destructive: false,
    needs: &[
        Need::DiskTierReports,
        Need::ProductionConditions,
        Need::Guard,
    ],
    optional: &[],
    run,
};

/// The operation timeout of the storm's workers. A deposit into the free
/// slots of an idle worker's pool (one copy, as the worker's readiness
/// makes) takes 1-3 ms on this machine; a deposit into the full pool waits
/// for one spill to disk per block, one after another (7-9 ms each on
/// average in the disk-tier lane, `g3_store`), so the later blocks of a
/// four-block deposit wait 20-30 ms. 10 ms lets the workers start and the
/// pool fill, and fails the waits. Under a load of 8 and more on 2 cores, a
/// one-block deposit of the workers' readiness has taken 30 ms, and the
/// stack did not come up: the storm then runs once more at 20 ms.
pub const OPERATION_TIMEOUTS_MS: [u64; 2] = [10, 20];

/// The KVCR timeouts of one attempt of the storm's stack.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    operation_ms: u64,
}

impl Timeouts {
    /// KVCR refuses an abandon timeout under twice the operation timeout.
    fn abandon_ms(self) -> u64 {
        2 * self.operation_ms
    }

    /// How long the deliver-while-filling probe holds the fill: past the
    /// deliver's deadline with room to spare.
    fn filling_hold_ms(self) -> u64 {
        3 * self.operation_ms
    }

    fn worker_faults(self) -> [String; 2] {
        [
            kvcr_override(&format!(
                "config.operation_timeout_ms={}",
                self.operation_ms
            )),
            kvcr_override(&format!("config.abandon_timeout_ms={}", self.abandon_ms())),
        ]
    }
}
/// How long one request may take: a CPU-engine request with every block
/// computed takes well under a second; one waiting on KVCR past its
/// timeout would not answer.
const REQUEST_BUDGET: Duration = Duration::from_secs(10);
/// Prompts committed beyond what the pool holds.
const OVERFLOW_PROMPTS: usize = 6;
/// The newest prompts read back (a variant sharing their prefix).
const READ_BACKS: usize = 4;
/// How long KVCR may take to go idle after the storm: every operation has
/// long passed its deadline by then.
const IDLE_WITHIN: Duration = Duration::from_secs(10);

pub fn run(ctx: &CaseCtx) -> CaseResult {
    if ctx.settings().cpu_engine.g3_capacity_blocks.is_none() {
        return Err(CaseError::new(
            "TC-24 needs KVCR's disk tier (cpu_engine.g3_capacity_blocks; the phase2-g3 profile)",
        ));
    }
    let mut refused = Vec::new();
    for (attempt, operation_ms) in OPERATION_TIMEOUTS_MS.into_iter().enumerate() {
        let timeouts = Timeouts { operation_ms };
        let name = match attempt {
            0 => "deadline-storm".to_string(),
            n => format!("deadline-storm-{}", n + 1),
        };
        let started = ctx
            .faults()
            .on_faulty_stack(&name, &timeouts.worker_faults(), |ctx| {
                if !refused.is_empty() {
                    ctx.measure("stacks_not_up", &refused);
                }
                let marks = ctx.pressure().log_marks();
                storm(ctx, timeouts)?;
                // A spill that failed is KVCR's `placement failed` warning (the
                // victim is dropped); a progress loop late by the tiny timeout
                // latches the worker's source writes off (no peer reads here).
                ctx.pressure().expect_no_bad_lines_since(
                    &marks,
                    &[BadLine::PlacementFailed, BadLine::SourceStalled],
                )
            });
        match started {
            Ok(result) => return result,
            Err(e) => {
                let load = crate::proc::procfs::load_average();
                let loads = load.map_or("unknown".to_string(), |[one, five, _]| {
                    format!("{one:.1} (5 min: {five:.1})")
                });
                // The first line: the error's log tail is in the evidence.
                let why = e.message.lines().next().unwrap_or_default();
                eprintln!(
                    "[kvcr-e2e] TC-24: the storm's stack at an operation timeout of {operation_ms} ms did not come up at load {loads}: {why}"
                );
                refused.push(json!({
                    "operation_timeout_ms": operation_ms,
                    "load_average": load,
                    "error": e.message,
                }));
            }
        }
    }
    Err(CaseError::new(format!(
        "the storm's stack came up at none of the operation timeouts {OPERATION_TIMEOUTS_MS:?} ms: {}",
        refused
            .iter()
            .map(|r| r["error"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join("; ")
    )))
}

fn storm(ctx: &CaseCtx, timeouts: Timeouts) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    for worker in [&a, &b] {
        expect_timeout_applied(ctx, worker, timeouts)?;
    }
    let pool = ctx
        .pressure()
        .guard_pool_blocks(&b)?
        .into_iter()
        .min()
        .unwrap_or(0);
    let per_prompt = u64::from(ctx.settings().prompts.prefix_blocks);
    if per_prompt == 0 || pool < per_prompt {
        return Err(CaseError::new(format!(
            "TC-24 needs a pool of whole prompts: {pool} blocks, prompts of {per_prompt}"
        )));
    }
    let families = ctx.families((pool / per_prompt) as usize + OVERFLOW_PROMPTS)?;
    let mut blocks = Vec::new();
    for family in &families {
        blocks.extend(ctx.pressure().block_hashes(&b, family.variant(0))?);
    }
    ctx.measure("operation_timeout_ms", timeouts.operation_ms);
    ctx.measure("pool_blocks", pool);
    deliver_while_filling(ctx, &b, timeouts)?;

    // Overflow the pool: every deposit past the second waits for spills.
    let before = ctx.snapshot(&b)?;
    let mut requests = Vec::new();
    for (i, family) in families.iter().enumerate() {
        ctx.doing(format!(
            "prompt {} of {} on worker B, operation timeout {} ms",
            i + 1,
            families.len(),
            timeouts.operation_ms
        ))?;
        requests.push(request(ctx, &b, family.variant(0), "overflow")?);
    }
    // Read the newest back: deliveries from the pool and from disk.
    for family in families.iter().rev().take(READ_BACKS) {
        requests.push(request(ctx, &b, family.variant(1), "read-back")?);
    }
    // Fetch what KVCR holds on disk into the full pool.
    let on_disk: Vec<u64> = ctx
        .pressure()
        .held_in(&b, &blocks, "g3")?
        .into_iter()
        .take(pool as usize)
        .collect();
    let staged = if on_disk.is_empty() {
        ctx.measure("fetched_from_disk", "nothing on disk to fetch");
        None
    } else {
        let sent = Instant::now();
        let staged = ctx.pressure().stage(&b, &on_disk)?;
        requests.push(StormRequest {
            step: "fetch",
            prompt: format!("{} blocks on disk", on_disk.len()),
            latency_ms: Some(sent.elapsed().as_secs_f64() * 1000.0),
            wrong_tokens: None,
        });
        Some(staged)
    };
    ctx.check(
        "storm-requests.json",
        &json!({"requests": requests, "budget_ms": REQUEST_BUDGET.as_millis()}),
        expect_answered_through_storm(&requests, REQUEST_BUDGET.as_secs_f64() * 1000.0),
    )?;

    let (after, delta) = await_idle(ctx, &b, &before, staged.as_ref())?;
    let ops = storm_ops(&delta, staged.as_ref(), timeouts)?;
    for (scope, s) in [
        ("local_fill", ops.local_fill),
        ("local_deliver", ops.local_deliver),
        ("g3_store", ops.g3_store),
        ("g3_fill", ops.g3_fill),
        ("g3_deliver", ops.g3_deliver),
    ] {
        ctx.measure(&format!("{scope}_failed"), s.failed);
    }
    ctx.measure("deposit_blocks_failed", ops.deposit_failed);
    // A failed copy fails at most a prompt's blocks; failed blocks beyond
    // that never had a copy: capacity waiters that passed their deadline.
    ctx.measure(
        "waiters_failed_at_least",
        ops.deposit_failed
            .saturating_sub(per_prompt * ops.local_fill.failed),
    );
    ctx.measure("fetch_blocks_failed", ops.fetch_failed);
    ctx.check(
        "storm.json",
        &json!({"ops": ops, "staged": staged, "on_disk": on_disk, "delta": delta}),
        expect_storm(&ops),
    )?;
    ctx.check("after-storm.json", &after, expect_nothing_left(&after))?;

    // The stack still serves, and KVCR admits a new deposit.
    let fresh = ctx.families(2)?;
    let before = ctx.snapshot(&b)?;
    let served = vec![
        request(ctx, &b, fresh[0].variant(0), "after")?,
        request(ctx, &a, fresh[1].variant(0), "after")?,
    ];
    ctx.check(
        "serving-after.json",
        &served,
        expect_answered_through_storm(&served, REQUEST_BUDGET.as_secs_f64() * 1000.0),
    )?;
    let delta = ctx.observe().await_deposits_answered(&b, &before)?;
    let admitted = Admission {
        deposit_success: delta.required_count(&Counter::KvcrDepositBlocks("success".into()))?,
        local_fill: scope_ops(&delta, Scope::LocalFill)?,
        g3_store: scope_ops(&delta, Scope::G3Store)?,
    };
    ctx.check(
        "admitted-after.json",
        &json!({"admission": admitted, "delta": delta}),
        expect_still_admits(&admitted),
    )
}

/// A new prompt's blocks deposited on `worker` and delivered back while
/// KVCR still fills them, the fill held past the deliver's deadline (the
/// engine's probe); then the prompt itself, answered with the reference
/// tokens (the device cache holds the probe's computed blocks).
fn deliver_while_filling(ctx: &CaseCtx, worker: &Worker, timeouts: Timeouts) -> CaseResult {
    let family = ctx.family()?;
    let prompt = family.variant(0);
    let hashes = ctx.pressure().block_hashes(worker, prompt)?;
    ctx.doing(format!(
        "a deliver of {}'s {} blocks on worker {} while KVCR fills them, held {} ms",
        prompt.key(),
        hashes.len(),
        worker.name(),
        timeouts.filling_hold_ms()
    ))?;
    let probe =
        ctx.pressure()
            .deliver_while_filling(worker, &hashes, timeouts.filling_hold_ms())?;
    ctx.measure("filling_deliver_blocks_failed", probe.deliver_failed());
    ctx.check(
        "deliver-while-filling.json",
        &probe,
        expect_deliver_expired_while_filling(&probe, timeouts.operation_ms),
    )?;
    let served = vec![request(ctx, worker, prompt, "after-filling")?];
    ctx.check(
        "deliver-while-filling-request.json",
        &served,
        expect_answered_through_storm(&served, REQUEST_BUDGET.as_secs_f64() * 1000.0),
    )
}

/// The worker logged, at start, the operation timeout it hands KVCR: the
/// launch fault verified.
fn expect_timeout_applied(ctx: &CaseCtx, worker: &Worker, timeouts: Timeouts) -> CaseResult {
    let want = format!("config.operation_timeout_ms={}", timeouts.operation_ms);
    let lines = ctx
        .pressure()
        .log_lines_since(worker, LogMark(0), CONFIG_OVERRIDDEN)?;
    if lines.iter().any(|l| l.contains(&want)) {
        return Ok(());
    }
    Err(CaseError::fault_not_applied(format!(
        "worker {} logged no `{CONFIG_OVERRIDDEN}... {want}` line: {lines:?}",
        worker.name()
    )))
}

/// One request pinned to `worker` within the budget, judged for the verdict.
fn request(
    ctx: &CaseCtx,
    worker: &Worker,
    prompt: &Prompt,
    step: &'static str,
) -> Result<StormRequest, CaseError> {
    let answer = ctx.complete_on_within(worker, prompt, REQUEST_BUDGET)?;
    let wrong_tokens = answer.as_ref().and_then(|a| {
        ctx.expect_reference(prompt, &a.tokens)
            .err()
            .map(|e| e.message)
    });
    Ok(StormRequest {
        step,
        prompt: prompt.key(),
        latency_ms: answer.map(|a| a.latency_ms),
        wrong_tokens,
    })
}

fn scope_ops(delta: &Delta, scope: Scope) -> Result<ScopeOps, CaseError> {
    Ok(ScopeOps {
        success: delta.required_count(&Counter::OpCount(scope.clone(), OpResult::Success))?,
        failed: delta.required_count(&Counter::OpCount(scope, OpResult::Failed))?,
    })
}

/// What KVCR did in the storm's window, from its own counters and the
/// engine's deposit outcomes and fetch answers.
fn storm_ops(
    delta: &Delta,
    staged: Option<&Staged>,
    timeouts: Timeouts,
) -> Result<StormOps, CaseError> {
    let deposits =
        |outcome: &str| delta.required_count(&Counter::KvcrDepositBlocks(outcome.into()));
    let fetched = staged.map_or(0, |s| s.fetched.values().filter(|ok| **ok).count() as u64);
    let asked = staged.map_or(0, |s| s.fetched.len() as u64);
    Ok(StormOps {
        timeout_ms: timeouts.operation_ms,
        deposit_success: deposits("success")?,
        deposit_failed: deposits("failed")?,
        deposit_dropped: deposits("dropped")?,
        local_fill: scope_ops(delta, Scope::LocalFill)?,
        local_deliver: scope_ops(delta, Scope::LocalDeliver)?,
        g3_store: scope_ops(delta, Scope::G3Store)?,
        g3_fill: scope_ops(delta, Scope::G3Fill)?,
        g3_deliver: scope_ops(delta, Scope::G3Deliver)?,
        fetch_fetched: fetched,
        fetch_failed: asked - fetched,
    })
}

/// `worker` once KVCR holds nothing back and answered every deposit since
/// `before` (or as last seen, after [`IDLE_WITHIN`]: the verdict then
/// names what stayed held), with the window's delta.
fn await_idle(
    ctx: &CaseCtx,
    worker: &Worker,
    before: &Snapshot,
    staged: Option<&Staged>,
) -> Result<(AfterStorm, Delta), CaseError> {
    ctx.doing(format!(
        "waiting for worker {}'s KVCR to go idle after the storm",
        worker.name()
    ))?;
    let read = || -> Result<(AfterStorm, Delta), CaseError> {
        let now = ctx.snapshot(worker)?;
        let delta = now
            .since(before)
            .map_err(|e| CaseError::new(format!("telemetry of worker {}: {e}", worker.name())))?;
        let answered = ["success", "failed", "dropped"]
            .iter()
            .map(|o| delta.count(&Counter::KvcrDepositBlocks((*o).into())))
            .sum();
        let state = ctx.pressure().engine_state(worker)?;
        let pinned = state["device_pinned_blocks"].as_u64().ok_or_else(|| {
            CaseError::new(format!(
                "worker {}'s /state has no device_pinned_blocks: {state}",
                worker.name()
            ))
        })?;
        let pending = state["kvcr_pending_ops"].as_u64().ok_or_else(|| {
            CaseError::new(format!(
                "worker {}'s /state has no kvcr_pending_ops: {state}",
                worker.name()
            ))
        })?;
        let after = AfterStorm {
            slots: slots(&now)?,
            computed_blocks: delta.required_count(&Counter::ComputedBlocks)?,
            answered_blocks: answered,
            device_pinned_blocks: pinned,
            engine_pending_ops: pending,
            fetched_blocks: staged
                .map_or(0, |s| s.fetched.values().filter(|ok| **ok).count() as u64),
            released_claims: staged.map_or(0, |s| s.released),
        };
        Ok((after, delta))
    };
    let mut last = None;
    let idle = wait::until(
        format!("worker {}'s KVCR to go idle after the storm", worker.name()),
        IDLE_WITHIN,
        Duration::from_millis(50),
        || {
            let (after, delta) = match read() {
                Ok(seen) => seen,
                Err(e) => return Poll::Abort(e.message),
            };
            let mut held = after.slots.held_back();
            if after.answered_blocks < after.computed_blocks {
                held.push(format!(
                    "{} of {} deposits answered",
                    after.answered_blocks, after.computed_blocks
                ));
            }
            if after.engine_pending_ops > 0 {
                held.push(format!(
                    "{} engine operations pending",
                    after.engine_pending_ops
                ));
            }
            if after.device_pinned_blocks > 0 {
                held.push(format!(
                    "{} device blocks pinned",
                    after.device_pinned_blocks
                ));
            }
            let done = held.is_empty();
            last = Some((after, delta));
            if done {
                Poll::Ready(())
            } else {
                Poll::Pending(held.join("; "))
            }
        },
    );
    match (idle, last) {
        (_, Some(seen)) => Ok(seen),
        (Err(e), None) => Err(CaseError::new(e.to_string())),
        (Ok(()), None) => Err(CaseError::new("KVCR went idle unseen")),
    }
}
