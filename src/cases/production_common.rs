//! What several production cases do the same way: a Guard takeover tried
//! prompt after prompt while the router still hints the dead worker's
//! blocks, and the ledger of the dead worker's pool.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::engine::{Need, Support};
use crate::prompts::Family;
use crate::stack::Worker;
use crate::suite::LogMark;
use crate::suite::{CaseCtx, CaseError, CaseResult};
use crate::suite::{GuardAttempt, GuardFollower};
use crate::telemetry::engine_kvcr_log;
use crate::telemetry::names::engine_kvcr_log::TIER_LOCAL_G2;
use crate::verdict::guard::AttemptOutcome;
use crate::verdict::ledger::{
    classify, expect_nothing_lost, expect_served_committed, Ledger, LedgerInput,
};

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

/// The dead worker's pool watched for the ledger, from before its commits.
pub struct LedgerWatch {
    dead_mark: LogMark,
}

/// What the ledger noted at the kill: the blocks the dead worker had
/// committed since the watch began and still held, its pool's size, and
/// where the peer's log stood.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PoolAtKill {
    pub committed: BTreeSet<u64>,
    pub pool_blocks: Option<u64>,
    #[serde(skip)]
    peer_mark: LogMark,
    dead_endpoint: Option<String>,
    /// What the peer got from the dead worker's endpoint, once read after
    /// the takeover.
    pub served_by_guard: BTreeSet<u64>,
}

impl LedgerWatch {
    /// Starts watching `dead`'s pool (before the commits the ledger counts).
    pub fn start(ctx: &CaseCtx, dead: &Worker) -> Self {
        Self {
            dead_mark: ctx.pressure().log_mark(dead),
        }
    }

    /// Where the engine can keep a ledger, a watch of `dead`; elsewhere
    /// `None`, and the case's summary says the ledger was not checked, and why.
    pub fn where_kept(ctx: &CaseCtx, dead: &Worker) -> Option<Self> {
        match ctx.supports(Need::BlockLedger) {
            Support::Yes => Some(Self::start(ctx, dead)),
            Support::No(why) => {
                ctx.not_checked("nothing lost, block by block (the recovery ledger)", &why);
                None
            }
        }
    }

    /// Right before the kill: what `dead` committed and holds, and the mark
    /// from which `peer`'s Guard-served blocks are read.
    pub fn at_kill(
        self,
        ctx: &CaseCtx,
        dead: &Worker,
        peer: &Worker,
    ) -> Result<PoolAtKill, CaseError> {
        Ok(PoolAtKill {
            committed: ctx.pressure().committed_since(dead, self.dead_mark)?,
            pool_blocks: ctx.pressure().pool_blocks_now(dead)?,
            peer_mark: ctx.pressure().log_mark(peer),
            dead_endpoint: dead.control_endpoint().map(str::to_string),
            served_by_guard: BTreeSet::new(),
        })
    }
}

impl PoolAtKill {
    /// After the takeover: the blocks `peer` received from the dead
    /// worker's endpoint since the kill, each one committed; one that was
    /// never committed fails now, named (`ledger-takeover.json`).
    pub fn after_takeover(&mut self, ctx: &CaseCtx, peer: &Worker) -> Result<(), CaseError> {
        let served = match &self.dead_endpoint {
            Some(endpoint) => ctx
                .pressure()
                .delivered_since(peer, self.peer_mark, endpoint)?,
            None => BTreeSet::new(),
        };
        self.served_by_guard = served;
        let ledger = classify(&LedgerInput {
            committed: self.committed.clone(),
            served_by_guard: self.served_by_guard.clone(),
            ..Default::default()
        });
        let path = ctx.record(
            "ledger-takeover.json",
            &serde_json::json!({"at_kill": self, "unexpected": ledger.unexpected}),
        );
        ctx.measure("ledger_served_by_guard", self.served_by_guard.len());
        expect_served_committed(&ledger).map_err(|v| CaseError::from(v).with_evidence(path))
    }

    /// After the reclaim: the ledger of the dead worker's pool once
    /// `replacement` reclaimed it: every committed block recovered, none
    /// lost, nothing unexpected, and the Guard's `recovered_blocks` the
    /// pool's size at the kill. Recorded as `ledger.json`.
    pub fn after_reclaim(
        self,
        ctx: &CaseCtx,
        guard_recovered_blocks: Option<u64>,
        replacement: &Worker,
    ) -> Result<Ledger, CaseError> {
        let served = self.served_by_guard;
        let asked: Vec<u64> = self
            .committed
            .iter()
            .chain(served.iter())
            .copied()
            .collect();
        let held = ctx.pressure().held_in(replacement, &asked, "local")?;
        let input = LedgerInput {
            committed: self.committed,
            pool_blocks_at_kill: self.pool_blocks,
            guard_recovered_blocks,
            served_by_guard: served,
            held_by_replacement: held,
            evicted_by_replacement: evicted_after_reclaim(ctx, replacement)?,
            stored_by_replacement: stored_by(ctx, replacement)?,
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
}

/// The Guard serves the dead worker `dead`'s pool to `peer` (the ledger
/// classifies what it served), then the replacement reclaims it (the
/// ledger classifies every committed block). `after` names the fault in
/// the message when no attempt was Guard-served. With no ledger (`None`:
/// an engine that reports no per-block events, [`LedgerWatch::where_kept`])
/// the takeover and the replacement are still required.
#[allow(clippy::too_many_arguments)]
pub fn takeover_and_reclaim(
    ctx: &CaseCtx,
    dead: &str,
    peer: &Worker,
    families: &[Family],
    events: &mut GuardFollower,
    since: Instant,
    mut at_kill: Option<PoolAtKill>,
    guard_recovered_blocks: Option<u64>,
    after: &str,
) -> Result<Option<Ledger>, CaseError> {
    takeover_served(
        ctx,
        dead,
        peer,
        families,
        events,
        since,
        &mut at_kill,
        after,
    )?;
    reclaim(ctx, dead, at_kill, guard_recovered_blocks)
}

/// The first half of [`takeover_and_reclaim`]: some attempt pinned to
/// `peer` is served from `dead`'s endpoint, and (with a ledger) every block
/// the Guard served was committed.
#[allow(clippy::too_many_arguments)]
pub fn takeover_served(
    ctx: &CaseCtx,
    dead: &str,
    peer: &Worker,
    families: &[Family],
    events: &mut GuardFollower,
    since: Instant,
    at_kill: &mut Option<PoolAtKill>,
    after: &str,
) -> CaseResult {
    let (attempts, served) = takeover(ctx, peer, families, events, since)?;
    ctx.measure("takeover_attempts", attempts.len());
    if served.is_none() {
        return Err(CaseError::new(format!(
            "{after}: none of {} attempts pinned to {} was served from {dead}'s endpoint: {:?}",
            attempts.len(),
            peer.name(),
            attempts.iter().map(|a| &a.outcome).collect::<Vec<_>>()
        ))
        .with_evidence(ctx.pressure().case_dir().join("takeover.json")));
    }
    match at_kill {
        Some(at_kill) => at_kill.after_takeover(ctx, peer),
        None => Ok(()),
    }
}

/// The second half of [`takeover_and_reclaim`]: the replacement of `dead`
/// reclaims the pool, and (with a ledger) nothing is lost.
pub fn reclaim(
    ctx: &CaseCtx,
    dead: &str,
    at_kill: Option<PoolAtKill>,
    guard_recovered_blocks: Option<u64>,
) -> Result<Option<Ledger>, CaseError> {
    let replacement = ctx.faults().replace(dead)?;
    match at_kill {
        Some(at_kill) => at_kill
            .after_reclaim(ctx, guard_recovered_blocks, &replacement)
            .map(Some),
        None => Ok(None),
    }
}

/// The blocks `replacement`'s KVCR evicted since its start without having
/// stored them: reclaimed from its Guard pool, then evicted to make room
/// (its readiness requests deposit into a full pool).
pub fn evicted_after_reclaim(
    ctx: &CaseCtx,
    replacement: &Worker,
) -> Result<BTreeSet<u64>, CaseError> {
    let lines = ctx.pressure().kvcr_lines_since(replacement, LogMark(0))?;
    Ok(engine_kvcr_log::removed_unstored(&lines, TIER_LOCAL_G2))
}

/// The blocks `replacement`'s KVCR stored itself since its start (a
/// reclaim announces no inventory): computed again, not recovered.
pub fn stored_by(ctx: &CaseCtx, replacement: &Worker) -> Result<BTreeSet<u64>, CaseError> {
    let lines = ctx.pressure().kvcr_lines_since(replacement, LogMark(0))?;
    Ok(engine_kvcr_log::stored(&lines, TIER_LOCAL_G2))
}

/// How long a SIGTERMed worker may take to exit before SIGKILL: 15 s, or
/// 45 s where KVCR runs in a child process (vLLM's EngineCore shuts down
/// after the worker's own process, on a loaded 2-core machine).
pub fn stop_grace(ctx: &CaseCtx) -> Duration {
    if ctx.engine().kvcr_in_child_process() {
        Duration::from_secs(45)
    } else {
        Duration::from_secs(15)
    }
}

/// Milliseconds of a duration, for measurements.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
