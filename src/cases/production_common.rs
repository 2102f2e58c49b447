//! What several production cases do the same way: a Guard takeover tried
//! prompt after prompt while the router still hints the dead worker's
//! blocks, and the ledger of the dead worker's pool.

use std::time::{Duration, Instant};

use crate::prompts::Family;
use crate::stack::Worker;
use crate::suite::LogMark;
use crate::suite::{CaseCtx, CaseError};
use crate::suite::{GuardAttempt, GuardFollower};
use crate::telemetry::engine_kvcr_log;
use crate::telemetry::names::engine_kvcr_log::TIER_LOCAL_G2;
use crate::verdict::guard::AttemptOutcome;
use crate::verdict::ledger::{expect_nothing_lost, Ledger, LedgerInput};

/// Attempts always made (the first can be refused: KVCR caches "metadata
/// acked" per endpoint, docs/cpu-engine.md), then more while the router can
/// still hint the dead worker's blocks (Dynamo's file discovery lists it for
/// 6.7-10 s after its death).
const MIN_ATTEMPTS: usize = 3;
const HINT_WINDOW: Duration = Duration::from_secs(10);

/// B asks for each family's prefix in turn (variant 1) until one is served
/// from the Guard at the dead worker's endpoint; a wrong answer fails at once.
pub fn takeover(
    ctx: &CaseCtx,
    peer: &Worker,
    families: &[Family],
    guard: &mut GuardFollower,
    since: Instant,
) -> Result<(Vec<GuardAttempt>, Option<usize>), CaseError> {
    let mut attempts = Vec::new();
    for (i, family) in families.iter().enumerate() {
        if i >= MIN_ATTEMPTS && since.elapsed() > HINT_WINDOW {
            break;
        }
        let attempt = ctx.guard().attempt(peer, family.variant(1), guard)?;
        if let AttemptOutcome::WrongTokens(mismatch) = &attempt.outcome {
            let path = ctx.record("takeover.json", &attempts);
            return Err(
                CaseError::new(format!("takeover through the Guard: {mismatch}"))
                    .with_evidence(path),
            );
        }
        let served = attempt.outcome == AttemptOutcome::GuardServed;
        attempts.push(attempt);
        if served {
            ctx.record("takeover.json", &attempts);
            return Ok((attempts, Some(i)));
        }
    }
    ctx.record("takeover.json", &attempts);
    Ok((attempts, None))
}

/// The ledger of `dead`'s pool once `replacement` reclaimed it: every block
/// `dead` committed since `mark` (`committed`), the pool's size at the kill,
/// the Guard's `recovered_blocks`, what `peer` got from `dead`'s endpoint
/// since `peer_mark`, what `replacement` holds. Recorded as `ledger.json`.
#[allow(clippy::too_many_arguments)]
pub fn ledger(
    ctx: &CaseCtx,
    committed: std::collections::BTreeSet<u64>,
    pool_blocks_at_kill: Option<u64>,
    guard_recovered_blocks: Option<u64>,
    dead_endpoint: Option<&str>,
    peer: &Worker,
    peer_mark: LogMark,
    replacement: &Worker,
) -> Result<Ledger, CaseError> {
    let served = match dead_endpoint {
        Some(endpoint) => ctx.pressure().delivered_since(peer, peer_mark, endpoint)?,
        None => Default::default(),
    };
    let asked: Vec<u64> = committed.iter().chain(served.iter()).copied().collect();
    let held = ctx.pressure().held_in(replacement, &asked, "local")?;
    let input = LedgerInput {
        committed,
        pool_blocks_at_kill,
        guard_recovered_blocks,
        served_by_guard: served,
        held_by_replacement: held,
        evicted_by_replacement: evicted_after_reclaim(ctx, replacement)?,
    };
    let verdict = expect_nothing_lost(&input);
    let path = ctx.record(
        "ledger.json",
        &serde_json::json!({"input": input, "ledger": verdict.as_ref().ok()}),
    );
    let ledger = verdict.map_err(|v| CaseError::from(v).with_evidence(path))?;
    ctx.measure("ledger_committed", ledger.committed);
    ctx.measure("ledger_recovered", ledger.recovered.len());
    ctx.measure("ledger_lost", ledger.lost.len());
    Ok(ledger)
}

/// The blocks `replacement`'s KVCR evicted since its start without having
/// stored them: reclaimed from its Guard pool, then evicted to make room
/// (its readiness requests deposit into a full pool).
pub fn evicted_after_reclaim(
    ctx: &CaseCtx,
    replacement: &Worker,
) -> Result<std::collections::BTreeSet<u64>, CaseError> {
    let lines = ctx.pressure().kvcr_lines_since(replacement, LogMark(0))?;
    Ok(engine_kvcr_log::removed_unstored(&lines, TIER_LOCAL_G2))
}

/// Milliseconds of a duration, for measurements.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
