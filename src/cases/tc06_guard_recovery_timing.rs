//! TC-06 Guard recovery timing.
//!
//! t0 is the harness's monotonic clock when it sends SIGKILL to A's engine.
//! Attempts follow at a fixed cadence, each pinned to the live worker B with
//! a prompt whose prefix A committed and which B has never seen (rotating, so
//! a local recompute cannot pass). t1 is the first attempt that returns the
//! reference tokens AND is covered by a `remote_deliver` on B sourced from
//! the Guard at A's endpoint; a token mismatch fails at once. t2 is the first
//! correct response served by the replacement A', which must show hits from
//! the reclaimed pool. Records t1−t0, t2−t0 and the Guard's `promotion_ms`;
//! the promotion's `recovered_blocks` must be at least the blocks this case
//! committed on A (a lower bound: the Guard reports its whole pool).
//! t1 and t2 are stamped when the response arrives; the harness's own
//! telemetry scrapes and Guard-log reads around an attempt are not in them.
//! Nothing lost, block by block: the ledger of A's pool (as in TC-04)
//! classifies every block A committed after the takeover and, once t2 is
//! stamped, after the reclaim. What the pool cost at its size, from KVCR's
//! own lines: A' registering the pool with NIXL as it started (its startup
//! stages), the promotion, and the Guard's handback to A' (`handback_start`
//! → `handback_done`); each must finish within KVCR's own deadline (the
//! progress thread's startup timeout, the workers' operation timeout, its
//! join timeout), and the figures carry the pool's size (`compare` judges
//! them per size).
//! A block the Guard serves stays in the pool it hands back, however many
//! handbacks it has been through: where A reclaimed its pool from a Guard
//! that had served it (TC-04 ran before on this stack), a prefix A holds
//! only from that reclaim is read by B from the Guard after t1, and the
//! replacement must hold it after the reclaim.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::engine::Need;
use crate::evidence::{PromotionStages, RecoveryAttempt, RecoveryTimeline};
use crate::prompts::Family;
use crate::stack::Worker;
use crate::suite::{clause, Case, CaseCtx, CaseError, CaseResult, Claim, GuardFollower};
use crate::telemetry::guard_log::GuardEvent;
use crate::verdict::guard::{expect_recovered_covers, AttemptOutcome};
use crate::verdict::ledger::{expect_carried_blocks_kept, CarriedBlocks};
use crate::verdict::local::expect_host_tier_hit;
use crate::verdict::scale::{expect_steps_within_deadlines, KvcrDeadlines, StepCosts};

use super::production_common::{evicted_after_reclaim, stored_by, LedgerWatch};

pub const CASE: Case = Case {
    id: "TC-06",
    name: "guard_recovery_timing",
    destructive: true,
    needs: &[Need::Guard],
    optional: &[Need::BlockLedger],
    run,
};

/// Prefixes committed on A: one per attempt, plus one for A'.
const COMMITTED: usize = 16;
/// Attempts stop here: Dynamo's file discovery drops a dead worker (and the
/// router forgets its blocks) about 11 s after its death.
const ATTEMPT_WINDOW: Duration = Duration::from_secs(9);
/// The families committed before this case searched, newest first, for a
/// prefix A holds only from reclaiming its pool (TC-04's come first).
const CARRIED_SEARCH: usize = 16;
/// The carried read is sent only this soon after the kill: the router may
/// drop the dead worker's blocks from 6.7 s on.
const CARRIED_HINT_WINDOW: Duration = Duration::from_secs(6);
const CARRIED_CHECK: &str = "a block the Guard serves stays in the pool it hands back";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    ctx.guard().expect_attached(&[&a, &b])?;
    // The Guard holding A's pool: it serves it after A dies.
    let guard = ctx.guard().of(&a)?;
    let families = ctx.families(COMMITTED)?;
    // The ledger of A's pool: what A commits from here on, block by block.
    let watch = LedgerWatch::where_kept(ctx, &a);
    for family in &families {
        ctx.commit(&a, family.variant(0))?;
    }
    // Where the ledger is kept, so are the block reports the carried read needs.
    let carried = match &watch {
        Some(_) => carried_prefix(ctx, &a, &b, families[0].index)?,
        None => None,
    };
    let mut ledger = watch.map(|w| w.at_kill(ctx, &a, &b)).transpose()?;
    let cadence = ctx.settings().tc06_cadence;

    let mut guard_events = guard.follow()?;
    let kill = ctx.faults().kill(&a)?;
    let t0 = kill.sent_at;
    let mut timeline = RecoveryTimeline::default();
    let (attempt_families, spare) = families.split_at(families.len() - 1);

    for (i, family) in attempt_families.iter().enumerate() {
        // Fixed cadence: attempt i is sent at t0 + i × cadence.
        let due = t0 + cadence * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if t0.elapsed() > ATTEMPT_WINDOW {
            break;
        }
        let attempt = ctx
            .guard()
            .attempt(&b, family.variant(1), &mut guard_events)?;
        // Stamped at the request and at the response, not after the
        // attempt's telemetry and Guard-log bookkeeping.
        let sent = attempt.sent_at.saturating_duration_since(t0);
        let outcome = attempt.outcome.clone();
        timeline.attempts.push(RecoveryAttempt {
            at_ms: ms(sent),
            target: "B".into(),
            outcome: format!("{}: {outcome:?}", attempt.prompt),
        });
        match outcome {
            AttemptOutcome::GuardServed => {
                timeline.t1_ms = Some(ms(attempt.answered_at.saturating_duration_since(t0)));
                timeline.t1_kvcr_ops = attempt.kvcr_ops.clone();
                break;
            }
            AttemptOutcome::WrongTokens(mismatch) => {
                let path = ctx.record("timeline.json", &timeline);
                // The mismatch is the reference-tokens verdict's own text.
                let message = format!(
                    "attempt {i} at {:.0} ms returned wrong tokens: {mismatch}",
                    ms(sent)
                );
                let claim = Claim::Clause(crate::verdict::tokens::CLAIM);
                return Err(CaseError::claimed(claim, mismatch, message).with_evidence(path));
            }
            _ => {}
        }
    }
    guard_events.poll()?;
    let promotion = guard_events.events().iter().find_map(|e| match &e.event {
        GuardEvent::Promoted(p) if p.guard == a.slot.guard_index => Some(p.clone()),
        _ => None,
    });
    timeline.promotion_ms = promotion.as_ref().map(|p| p.promotion_ms);
    timeline.promotion_stages = promotion.as_ref().map(|p| PromotionStages {
        recovery_ms: p.recovery_ms,
        setup_ms: p.setup_ms,
        start_ms: p.start_ms,
    });
    if timeline.t1_ms.is_none() {
        let reason = format!(
            "{} attempts in {:.1} s, none served by the Guard ({}); Guard promotion_ms {:?}",
            timeline.attempts.len(),
            t0.elapsed().as_secs_f64(),
            summarize(&timeline),
            timeline.promotion_ms
        );
        timeline.no_t1_reason = Some(reason.clone());
        let path = ctx.record("timeline.json", &timeline);
        ctx.perf().report_recovery(&timeline);
        return Err(CaseError::clause(clause::NO_T1, reason).with_evidence(path));
    }

    // The Guard that served t1 promoted A's group: it recovered at least
    // what this case committed there.
    let committed_blocks: u64 = families.iter().map(|f| f.shared_blocks()).sum();
    ctx.measure(
        "recovered_blocks",
        promotion.as_ref().map(|p| p.recovered_blocks),
    );
    let Some(promotion) = &promotion else {
        let path = ctx.record("timeline.json", &timeline);
        return Err(CaseError::new(format!(
            "t1 was served by the Guard, but its log has no `guard_promoted` event for guard {}",
            a.slot.guard_index
        ))
        .with_evidence(path));
    };
    ctx.check(
        "promotion.json",
        &serde_json::json!({"promotion": promotion, "committed_blocks": committed_blocks}),
        expect_recovered_covers(promotion, committed_blocks, a.name()),
    )?;
    if let Some(ledger) = &mut ledger {
        ledger.after_takeover(ctx, &b)?;
    }
    // After the ledger's takeover reading: these blocks were committed before this case.
    let carried_served = match &carried {
        Some(carried) => read_carried(ctx, carried, &a, &b, t0, &mut guard_events)?,
        None => None,
    };

    // t2: the replacement serves a prefix A committed, from the reclaimed pool.
    let replacement = ctx.faults().replace("A")?;
    let prompt = spare[0].variant(1);
    let before = ctx.snapshot(&replacement)?;
    let answer = ctx.complete_on(&replacement, prompt)?;
    let answered = t0.elapsed();
    ctx.expect_reference(prompt, &answer.tokens)?;
    timeline.t2_ms = Some(ms(answered));
    let hit = ctx.observe().host_tier_hit(
        &ctx.delta_since(&replacement, &before)?,
        answer.cached_tokens,
    )?;
    // After t2: the Guard handed A's pool back to A'; what each step cost.
    let handed_back = guard_events.await_handback(a.slot.guard_index)?;
    let costs = guard.costs()?;
    timeline.guard_pool_bytes = Some(costs.pool_bytes());
    ctx.perf().report_recovery(&timeline);
    ctx.record("timeline.json", &timeline);
    let guard_index = a.slot.guard_index.to_string();
    let steps = StepCosts {
        registration_ms: ctx
            .guard()
            .registrations(&replacement)
            .iter()
            .map(|s| s.ms)
            .collect(),
        promotion_ms: vec![promotion.promotion_ms],
        handback_ms: costs
            .handbacks
            .iter()
            .filter(|s| s.who == guard_index)
            .map(|s| s.ms)
            .collect(),
    };
    let deadlines = KvcrDeadlines::kvcr_0_1_1(
        super::unreachable_source::operation_timeout(ctx).as_millis() as u64,
    );
    let registration_logged = ctx.engine().logs_kvcr_startup_stages();
    if !registration_logged {
        ctx.not_checked(
            "A' registering the pool with NIXL within KVCR's startup timeout",
            "this engine's log has no KVCR startup stages (kvcr.progress at DEBUG)",
        );
    }
    ctx.measure("pool_bytes", costs.pool_bytes());
    ctx.measure("registration_ms", steps.registration_ms.first().copied());
    ctx.measure("handback_ms", steps.handback_ms.last().copied());
    // After t2 (its queries would delay it): every block A committed is
    // held by A', nothing lost.
    if let Some(ledger) = ledger {
        ledger.after_reclaim(ctx, Some(promotion.recovered_blocks), &replacement)?;
    }
    if let Some(served) = carried_served {
        expect_carried_handed_back(ctx, served, &replacement)?;
    }
    let geometry = ctx.geometry();
    ctx.check(
        "replacement.json",
        &hit,
        expect_host_tier_hit(
            &hit,
            spare[0].shared_blocks(),
            u64::from(geometry.block_size_tokens),
            geometry.bytes_per_block(),
        ),
    )
    .map_err(|e| CaseError {
        message: format!("t2: replacement A' did not reclaim the pool: {}", e.message),
        ..e
    })?;
    ctx.check(
        "pool-costs.json",
        &serde_json::json!({
            "pool_bytes": costs.pool_bytes(),
            "steps": steps,
            "deadlines": deadlines,
            "handed_back": handed_back,
            "guard_log": costs,
        }),
        expect_steps_within_deadlines(&steps, &deadlines, registration_logged),
    )
}

/// A prefix A holds only because it reclaimed its pool (held, and never
/// stored by this A itself) and B does not hold. Where the Guard it
/// reclaimed from had been serving the pool, the Guard still holds these
/// records: its own, taken back at the handback, not ones A journaled.
struct CarriedPrefix {
    family: Family,
    hashes: Vec<u64>,
}

/// The newest family committed before this case (`first_of_case` is this
/// case's first) whose prefix A carries over from its reclaim; A serves it
/// once more, so the router lists it on A when A dies. `None` (recorded as
/// not checked) where A holds none: no earlier case on this stack took A's
/// pool over and gave it back.
fn carried_prefix(
    ctx: &CaseCtx,
    a: &Worker,
    b: &Worker,
    first_of_case: usize,
) -> Result<Option<CarriedPrefix>, CaseError> {
    let stored_by_a = stored_by(ctx, a)?;
    let book = ctx.prompts.all();
    let earlier = &book[..first_of_case.min(book.len())];
    for family in earlier.iter().rev().take(CARRIED_SEARCH) {
        let prompt = family.variant(0);
        let hashes = ctx.pressure().block_hashes(a, prompt)?;
        let carried = !hashes.is_empty()
            && hashes.iter().all(|h| !stored_by_a.contains(h))
            && ctx.pressure().held_in(a, &hashes, "local")?.len() == hashes.len()
            && ctx.pressure().held_in(b, &hashes, "miss")?.len() == hashes.len();
        if carried {
            let answer = ctx.complete_on(a, prompt)?;
            ctx.expect_reference(prompt, &answer.tokens)?;
            ctx.measure("carried_prompt", prompt.key());
            return Ok(Some(CarriedPrefix {
                family: family.clone(),
                hashes,
            }));
        }
    }
    ctx.not_checked(
        CARRIED_CHECK,
        &format!(
            "none of the {CARRIED_SEARCH} families committed before this case is held by {} \
             only from a reclaim (no earlier case on this stack took its pool over and gave it \
             back) and not by {}",
            a.name(),
            b.name()
        ),
    );
    Ok(None)
}

/// The first use of the carried prefix after the kill: B reads it from the
/// Guard at A's endpoint (`carried-read.json`). Returns the prompt and the
/// blocks of the prefix B received from there; `None` (not checked) when t1
/// came too late for the router to still hint A's blocks.
fn read_carried(
    ctx: &CaseCtx,
    carried: &CarriedPrefix,
    a: &Worker,
    b: &Worker,
    t0: Instant,
    guard_events: &mut GuardFollower,
) -> Result<Option<CarriedBlocks>, CaseError> {
    let Some(endpoint) = a.control_endpoint() else {
        let why = format!(
            "{} reported no control endpoint to read B's deliveries by",
            a.name()
        );
        ctx.not_checked(CARRIED_CHECK, &why);
        return Ok(None);
    };
    let late = t0.elapsed();
    if late > CARRIED_HINT_WINDOW {
        let why = format!(
            "t1 and its checks ended {:.1} s after the kill: the router may no longer hint {}'s blocks",
            late.as_secs_f64(),
            a.name()
        );
        ctx.not_checked(CARRIED_CHECK, &why);
        return Ok(None);
    }
    let mark = ctx.pressure().log_mark(b);
    let prompt = carried.family.variant(1);
    let attempt = ctx.guard().attempt(b, prompt, guard_events)?;
    let path = ctx.record("carried-read.json", &attempt);
    match &attempt.outcome {
        AttemptOutcome::GuardServed => {}
        AttemptOutcome::WrongTokens(mismatch) => {
            let claim = Claim::Clause(crate::verdict::tokens::CLAIM);
            let message = format!("carried read {}: {mismatch}", attempt.prompt);
            return Err(CaseError::claimed(claim, mismatch, message).with_evidence(path));
        }
        other => {
            return Err(CaseError::new(format!(
                "carried read: {} (a prefix {} held only from its reclaim), pinned to {} \
                 {:.1} s after the kill, was not served by the Guard: {other:?}",
                attempt.prompt,
                a.name(),
                b.name(),
                attempt.sent_at.saturating_duration_since(t0).as_secs_f64()
            ))
            .with_evidence(path))
        }
    }
    let delivered = ctx.pressure().delivered_since(b, mark, endpoint)?;
    Ok(Some(CarriedBlocks {
        prompt: attempt.prompt,
        served_by_guard: carried
            .hashes
            .iter()
            .filter(|h| delivered.contains(h))
            .copied()
            .collect(),
        ..Default::default()
    }))
}

/// The second use: the carried blocks the Guard served are in the pool it
/// handed back to `replacement` (`carried-blocks.json`).
fn expect_carried_handed_back(
    ctx: &CaseCtx,
    served: CarriedBlocks,
    replacement: &Worker,
) -> CaseResult {
    let asked: Vec<u64> = served.served_by_guard.iter().copied().collect();
    let only_served = |blocks: BTreeSet<u64>| -> BTreeSet<u64> {
        blocks
            .intersection(&served.served_by_guard)
            .copied()
            .collect()
    };
    let carried = CarriedBlocks {
        held_by_replacement: ctx.pressure().held_in(replacement, &asked, "local")?,
        evicted_by_replacement: only_served(evicted_after_reclaim(ctx, replacement)?),
        stored_by_replacement: only_served(stored_by(ctx, replacement)?),
        ..served
    };
    ctx.check(
        "carried-blocks.json",
        &carried,
        expect_carried_blocks_kept(&carried),
    )
}

fn summarize(timeline: &RecoveryTimeline) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for attempt in &timeline.attempts {
        let outcome = attempt
            .outcome
            .split_once(": ")
            .map_or(attempt.outcome.as_str(), |(_, o)| o);
        let kind = outcome.split(['(', ' ']).next().unwrap_or("").to_string();
        *counts.entry(kind).or_default() += 1;
    }
    counts
        .iter()
        .map(|(k, n)| format!("{n}× {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}
