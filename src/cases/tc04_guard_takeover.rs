//! TC-04 Guard protection, takeover, replacement.
//!
//! Precondition: the Guard service runs and every worker holds its Guard
//! group. Commit prompts on A (into the Guard-backed pool). SIGKILL A's
//! engine process and verify the fault: the pid is gone, the Guard logged
//! `guard_promoted` for A's index (its `recovered_blocks`, the whole pool,
//! is recorded), A's control port still listens, and `recovered_blocks` is at
//! least the blocks this case committed on A (a lower bound: the Guard
//! reports its whole pool). Takeover: A's prefix pinned to B is served
//! through a `remote_deliver` from A's endpoint (now the Guard), exactly the
//! committed blocks' pages, with reference tokens; then the oldest family
//! committed on A is Guard-served too (a Guard that kept only its newest
//! records fails there). Replacement: A' starts with A's Guard index and
//! control port; after handback A's prefix on A' is a local hit from the
//! reclaimed pool, with reference tokens. Nothing lost, block by block:
//! every block A committed in the case (KVCR's inventory events on A) is
//! classified after the takeover (each block B got from A's endpoint was
//! committed) and after the reclaim (each is held by A'), and the Guard
//! recovered the whole pool (`ledger.json`); on an engine that reports no
//! per-block events the summary says the ledger was not checked. The suite
//! restores the stack afterwards, pass or fail.

use std::time::Duration;

use crate::engine::Need;
use crate::suite::{clause, Case, CaseCtx, CaseError, CaseResult};
use crate::verdict::guard::{expect_promoted, expect_recovered_covers, AttemptOutcome};
use crate::verdict::local::expect_host_tier_hit;
use crate::verdict::transfer::expect_peer_transfer;

use super::production_common::LedgerWatch;

pub const CASE: Case = Case {
    id: "TC-04",
    name: "guard_takeover_and_replacement",
    destructive: true,
    needs: &[Need::Guard],
    optional: &[Need::BlockLedger],
    run,
};

/// Attempts B always makes (unless one is Guard-served first).
const MIN_TAKEOVER_ATTEMPTS: usize = 3;
/// Prefixes committed on A before the kill that B may try in turn: up to
/// this many attempts while the router can still hint A's blocks.
const TAKEOVER_ATTEMPTS: usize = 6;
/// The oldest committed prefix (committed first, tried once the Guard has
/// served one attempt), the takeover's, and one more for the replacement.
const COMMITTED: usize = TAKEOVER_ATTEMPTS + 2;
/// Where each group sits in the committed families, oldest first.
const OLDEST: usize = 0;
const FIRST_ATTEMPT: usize = 1;
const REPLACEMENT: usize = FIRST_ATTEMPT + TAKEOVER_ATTEMPTS;
/// How long after the kill the router can still hint A's blocks: A's
/// instance (and its blocks in the router's index) stays in Dynamo's file
/// discovery until its files are 10 s old (`FileStore`'s fixed TTL in
/// Dynamo 1.6.1, no setting; A touched them every 3.3 s), i.e. 6.7-10 s
/// after the kill. An attempt sent later gets no hint and cannot be
/// Guard-served, so none is started after this.
const HINT_WINDOW: Duration = Duration::from_secs(10);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let geometry = ctx.geometry();
    ctx.guard().expect_attached(&[&a, &b])?;
    // The Guard holding A's pool: it serves it after A dies.
    let guard = ctx.guard().of(&a)?;

    let families = ctx.families(COMMITTED)?;
    // The ledger of A's pool: what A commits from here on, block by block.
    let watch = LedgerWatch::where_kept(ctx, &a);
    for family in &families {
        ctx.commit(&a, family.variant(0))?;
    }
    let mut ledger = watch.map(|w| w.at_kill(ctx, &a, &b)).transpose()?;
    let committed_blocks: u64 = families.iter().map(|f| f.shared_blocks()).sum();

    // Fault: SIGKILL A, then verify it took effect.
    let mut events = guard.follow()?;
    let kill = ctx.faults().kill(&a)?;
    let promotion = events.await_promotion(a.slot.guard_index)?;
    ctx.measure("promotion_ms", promotion.as_ref().map(|p| p.promotion_ms));
    ctx.measure(
        "recovered_blocks",
        promotion.as_ref().map(|p| p.recovered_blocks),
    );
    ctx.check(
        "fault.json",
        &serde_json::json!({"kill": kill, "promotion": promotion, "committed_blocks": committed_blocks}),
        expect_promoted(
            promotion.as_ref(),
            a.slot.guard_index,
            ctx.faults().killed_worker_gone(&kill),
            ctx.guard().control_port_listening(&a),
        ),
    )?;
    if let Some(p) = &promotion {
        ctx.check(
            "fault.json",
            &serde_json::json!({"kill": kill, "promotion": promotion, "committed_blocks": committed_blocks}),
            expect_recovered_covers(p, committed_blocks, a.name()),
        )?;
    }

    // Takeover: B pulls A's prefix from the Guard at A's endpoint. In-flight
    // operations fail while the Guard takes over (KVCR's contract: callers
    // retry), so each attempt uses a prefix B has never seen. The first one
    // is refused when B had talked to A before (KVCR caches "metadata
    // acked" per endpoint; docs/cpu-engine.md), and across nodes the
    // Guard's first write to B opens a UCX endpoint over TCP within the
    // Guard's own operation deadline (KVCR's default, 1 s: the service has
    // no setting), which a loaded machine can miss; the endpoint is reused
    // by the next attempt. So attempts follow back to back from the
    // verified kill, as many as fit in the hint window.
    let mut transfers = guard.follow()?;
    let mut attempts = Vec::new();
    let mut timeline = Vec::new();
    for (i, family) in families[FIRST_ATTEMPT..REPLACEMENT].iter().enumerate() {
        let since_kill = kill.sent_at.elapsed();
        if i >= MIN_TAKEOVER_ATTEMPTS && since_kill > HINT_WINDOW {
            break;
        }
        let attempt = ctx.guard().attempt(&b, family.variant(1), &mut transfers)?;
        let served = attempt.outcome == AttemptOutcome::GuardServed;
        timeline.push(serde_json::json!({
            "prompt": attempt.prompt,
            "sent_ms_after_kill": ms(attempt.sent_at.saturating_duration_since(kill.sent_at)),
            "took_ms": ms(attempt.answered_at.saturating_duration_since(attempt.sent_at)),
            "outcome": format!("{:?}", attempt.outcome),
        }));
        if let AttemptOutcome::WrongTokens(mismatch) = &attempt.outcome {
            let path = ctx.record("takeover.json", &attempts);
            return Err(
                CaseError::new(format!("takeover through the Guard: {mismatch}"))
                    .with_evidence(path),
            );
        }
        attempts.push(attempt);
        // The Guard latched its source writes off: no later attempt can be served.
        if served || events.source_stall().is_some() {
            break;
        }
    }
    let served_at = attempts
        .iter()
        .position(|a| a.outcome == AttemptOutcome::GuardServed);
    // The oldest family, once the Guard has served one attempt (its
    // endpoint to B is open): a Guard that lost its older records, and
    // served only the newest, fails here.
    let oldest = match served_at {
        Some(_) => {
            let family = &families[OLDEST];
            let attempt = ctx.guard().attempt(&b, family.variant(1), &mut transfers)?;
            timeline.push(serde_json::json!({
                "prompt": attempt.prompt,
                "oldest_committed": true,
                "sent_ms_after_kill": ms(attempt.sent_at.saturating_duration_since(kill.sent_at)),
                "took_ms": ms(attempt.answered_at.saturating_duration_since(attempt.sent_at)),
                "outcome": format!("{:?}", attempt.outcome),
            }));
            Some(attempt)
        }
        None => None,
    };
    ctx.record("takeover-timeline.json", &timeline);
    let evidence = ctx.record(
        "takeover.json",
        &serde_json::json!({"attempts": attempts, "oldest_committed": oldest}),
    );
    let Some(served) = served_at.map(|i| &attempts[i]) else {
        return Err(CaseError::clause(clause::TAKEOVER, format!(
            "none of {} attempts pinned to B was served from A's endpoint \
             (the last sent {:.1} s after the kill; the router hints A's blocks for 6.7-10 s): {:?}{}",
            attempts.len(),
            timeline
                .last()
                .and_then(|t| t["sent_ms_after_kill"].as_f64())
                .unwrap_or(0.0)
                / 1000.0,
            attempts.iter().map(|a| &a.outcome).collect::<Vec<_>>(),
            events
                .source_stall()
                .map(|line| format!("; the Guard stopped serving: `{line}`"))
                .unwrap_or_default()
        ))
        .with_evidence(evidence));
    };
    ctx.measure("takeover_attempts", attempts.len());
    ctx.measure("takeover_blocks", served.transfer.remote_deliver_blocks);
    ctx.measure("takeover_bytes", served.transfer.source_write_bytes);
    expect_peer_transfer(
        &served.transfer,
        families[0].shared_blocks(),
        geometry.bytes_per_block(),
    )
    .map_err(|v| {
        CaseError::new(format!("takeover through the Guard: {v}")).with_evidence(&evidence)
    })?;
    if let Some(oldest) = &oldest {
        ctx.measure("oldest_committed_outcome", format!("{:?}", oldest.outcome));
        if oldest.outcome != AttemptOutcome::GuardServed {
            return Err(CaseError::new(format!(
                "takeover through the Guard: the oldest family committed on A ({}, sent {:.1} s after the kill, after {} was served) was not served by the Guard: {:?}",
                oldest.prompt,
                oldest.sent_at.saturating_duration_since(kill.sent_at).as_secs_f64(),
                served.prompt,
                oldest.outcome
            ))
            .with_evidence(&evidence));
        }
        expect_peer_transfer(
            &oldest.transfer,
            families[OLDEST].shared_blocks(),
            geometry.bytes_per_block(),
        )
        .map_err(|v| {
            CaseError::new(format!(
                "takeover through the Guard: the oldest committed family {}: {v}",
                oldest.prompt
            ))
            .with_evidence(&evidence)
        })?;
    }
    if let Some(ledger) = &mut ledger {
        ledger.after_takeover(ctx, &b)?;
    }

    // Replacement: A' reclaims the pool (every block A committed, by the
    // ledger) and hits locally.
    let replacement = ctx.faults().replace("A")?;
    if let Some(ledger) = ledger {
        ledger.after_reclaim(
            ctx,
            promotion.as_ref().map(|p| p.recovered_blocks),
            &replacement,
        )?;
    }
    let reclaimed = &families[REPLACEMENT];
    let before = ctx.snapshot(&replacement)?;
    let answer = ctx.complete_on(&replacement, reclaimed.variant(1))?;
    ctx.expect_reference(reclaimed.variant(1), &answer.tokens)?;
    let delta = ctx.delta_since(&replacement, &before)?;
    let hit = ctx.observe().host_tier_hit(&delta, answer.cached_tokens)?;
    ctx.check(
        "replacement.json",
        &serde_json::json!({"worker": "A'", "pid": replacement.process.pid(), "hook": ctx.faults().replace_hook_runs().last(), "delta": delta, "observed": hit}),
        expect_host_tier_hit(
            &hit,
            reclaimed.shared_blocks(),
            u64::from(geometry.block_size_tokens),
            geometry.bytes_per_block(),
        ),
    )
    .map_err(|e| CaseError {
        message: format!("replacement A' did not reclaim the pool: {}", e.message),
        ..e
    })?;
    guard.expect_no_failures()
}
