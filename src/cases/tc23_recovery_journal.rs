//! TC-23 the recovery journal under faults.
//!
//! A worker publishes every block it holds into the recovery journal at the
//! head of its Guard pool (a one-producer, one-consumer ring), which its
//! Guard mirrors to promote from. Runs on a stack of its own whose Guard
//! service has a two-page journal (a ring of 4096 bytes) and no heartbeat
//! promotion (`stack::guard_journal::SMALL_GUARD_JOURNAL` says why).
//!
//! 1. A stalled Guard: SIGSTOP the Guard service (state `T` verified), and
//!    have worker A answer new prefixes until it has published more frames
//!    than the ring holds. Every request is answered within the budget
//!    with the reference tokens, some after A logged `KVCR recovery journal
//!    invalidated: ring is full`. After SIGCONT the Guard logs `KVCR pool
//!    recovery disabled; ...: recovery journal is invalid`. SIGKILL A: the
//!    Guard promotes with 0 blocks recovered and logs `KVCR pool has no
//!    recovered state to promote`; B's requests for A's prefixes are
//!    answered with the reference tokens, recomputed (nothing delivered
//!    from A's endpoint); A' claims the group and serves.
//! 2. A torn ring: with a frame of A' pending (the Guard stopped for one
//!    request), the harness overwrites that frame's header in A's pool file
//!    (inside the ring only, verified by reading it back), then continues
//!    the Guard. The Guard logs `KVCR pool recovery disabled; ...: journal
//!    frame ...`, A' and B go on serving reference tokens, and a SIGKILL of
//!    A' is taken over cold as above; A'' claims the group and serves.
//! 3. A handback region cut short: A'' commits two prefixes and stops
//!    cleanly, so its Guard writes the group's handback region past the
//!    pool (`snapshot_written`, with its size). The harness cuts the
//!    region's last byte off (the file verified to end in that region,
//!    its header declaring the rest), as a host that lost the region's
//!    tail would leave it. A''' claims the group: KVCR logs `KVCR
//!    discarding a handback region that was never finished`, gives the
//!    region back (the file ends at the pool again), starts cold (a prefix
//!    A'' committed is computed again, nothing delivered from the pool)
//!    and answers the reference tokens.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::engine::Need;
use crate::stack::guard_journal::{JOURNAL_HEADER_BYTES, SMALL_GUARD_JOURNAL, SMALL_JOURNAL_BYTES};
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult, GuardFollower, GuardView};
use crate::telemetry::guard_log::GuardEvent;
use crate::telemetry::names::kvcr_service_log::SNAPSHOT_WRITTEN;
use crate::verdict::journal::{
    expect_answered, expect_cold_takeover, expect_handback_discarded, expect_recovery_dropped,
    expect_ring_full, expect_worker_kept_serving, ColdTakeover, StalledRequest, TornHandbackClaim,
    BAD_FRAME, HANDBACK_DISCARDED, JOURNAL_INVALID, NO_RECOVERED_STATE, RECOVERY_DISABLED,
    RING_FULL,
};
use crate::verdict::log_scan::BadLine;
use crate::wait::{self, Poll};

use super::production_common::{ms, stop_grace};

pub const CASE: Case = Case {
    id: "TC-23",
    name: "recovery_journal_faults",
    destructive: false,
    needs: &[Need::ProductionConditions, Need::Guard],
    optional: &[],
    run,
};

/// How long one request may take while the Guard is stopped: a CPU-engine
/// request takes well under a second; a publish blocked on the full ring
/// would never answer.
const REQUEST_BUDGET: Duration = Duration::from_secs(10);
/// Requests answered after the worker reported its ring full.
const AFTER_FULL: usize = 2;
/// The smallest ring slot a deposited block's READY frame takes: a 6-byte
/// frame header, the CPU engine's 8-byte key and its msgpack record (at
/// least 11 bytes with one page), padded to 8 bytes. Evictions add frames
/// of their own, so this bounds the bytes published from below.
const MIN_FRAME_BYTES: u64 = 32;
/// How long the Guard may take to read the journal once continued (it
/// polls every millisecond).
const GUARD_READS: Duration = Duration::from_secs(10);
/// Requests for the dead worker's prefixes pinned to its peer.
const TAKEOVER_ATTEMPTS: usize = 2;

pub fn run(ctx: &CaseCtx) -> CaseResult {
    ctx.faults()
        .on_faulty_stack("small-journal", &[SMALL_GUARD_JOURNAL.to_string()], |ctx| {
            let marks = ctx.pressure().log_marks();
            stalled_guard(ctx)?;
            torn_ring(ctx)?;
            torn_handback(ctx)?;
            // The dropped recoveries and the discarded region are this
            // case's; a promoted Guard's refused first write is KVCR
            // 0.1.1's known one (TC-04).
            ctx.pressure().expect_no_bad_lines_since(
                &marks,
                &[
                    BadLine::PoolRecoveryDisabled,
                    BadLine::StartWriteRefused,
                    BadLine::HandbackDiscarded,
                ],
            )
        })?
}

/// The journal's size, from the Guard's ready line: the launch fault
/// verified before anything relies on it.
fn journal_bytes(guard: &GuardView) -> Result<u64, CaseError> {
    match guard.journal_bytes()? {
        Some(bytes) if bytes == SMALL_JOURNAL_BYTES => Ok(bytes),
        other => Err(CaseError::fault_not_applied(format!(
            "the Guard service runs with journal_bytes={other:?}, not {SMALL_JOURNAL_BYTES}"
        ))),
    }
}

/// One request pinned to `worker` within the budget, judged for the verdict.
fn stalled_request(
    ctx: &CaseCtx,
    worker: &Worker,
    prompt: &crate::prompts::Prompt,
    after_ring_full: bool,
) -> Result<StalledRequest, CaseError> {
    let answer = ctx.complete_on_within(worker, prompt, REQUEST_BUDGET)?;
    let wrong_tokens = match &answer {
        Some(a) => ctx
            .expect_reference(prompt, &a.tokens)
            .err()
            .map(|e| e.message),
        None => None,
    };
    Ok(StalledRequest {
        prompt: prompt.key(),
        latency_ms: answer.map(|a| a.latency_ms),
        wrong_tokens,
        after_ring_full,
    })
}

/// Waits until the Guard logs `RECOVERY_DISABLED` for `cause`; the lines it
/// logged of it either way.
fn await_recovery_dropped(events: &GuardFollower, cause: &str) -> Result<Vec<String>, CaseError> {
    let mut lines = Vec::new();
    let mut read_error = None;
    let _ = wait::until(
        "the Guard to drop its recovery state",
        GUARD_READS,
        Duration::from_millis(20),
        || match events.lines_with(RECOVERY_DISABLED) {
            Ok(found) if found.iter().any(|l| l.contains(cause)) => {
                lines = found;
                Poll::Ready(())
            }
            Ok(found) => {
                lines = found;
                Poll::Pending(format!("{} recovery-disabled line(s)", lines.len()))
            }
            Err(e) => {
                read_error = Some(e);
                Poll::Abort("the Guard log is unreadable".into())
            }
        },
    );
    match read_error {
        Some(e) => Err(e),
        None => Ok(lines),
    }
}

/// SIGKILL `dead` and judge the takeover: cold, nothing stale served; then
/// its replacement claims the group and serves.
fn cold_takeover(
    ctx: &CaseCtx,
    dead: &Worker,
    peer: &Worker,
    prefixes: &[crate::prompts::Family],
    evidence: &str,
) -> CaseResult {
    let guard = ctx.guard().of(dead)?;
    let mut events = guard.follow()?;
    let kill = ctx.faults().kill(dead)?;
    let promotion = events.await_promotion(dead.slot.guard_index)?;
    let no_state_logged = !events.lines_with(NO_RECOVERED_STATE)?.is_empty();
    let mut transfers = guard.follow()?;
    let mut attempts = Vec::new();
    for family in prefixes.iter().rev().take(TAKEOVER_ATTEMPTS) {
        attempts.push(
            ctx.guard()
                .attempt(peer, family.variant(1), &mut transfers)?,
        );
    }
    let takeover = ColdTakeover {
        promotion,
        no_state_logged,
        attempts: attempts.iter().map(|a| a.outcome.clone()).collect(),
    };
    ctx.check(
        evidence,
        &json!({"kill": kill, "takeover": takeover, "attempts": attempts}),
        expect_cold_takeover(&takeover, dead.slot.guard_index),
    )?;
    let replacement = ctx.faults().replace(dead.name())?;
    ctx.guard().expect_attached(&[&replacement])?;
    let family = ctx.family()?;
    let answer = ctx.complete_on(&replacement, family.variant(0))?;
    ctx.expect_reference(family.variant(0), &answer.tokens)
}

/// Attempt 1: the Guard stopped while A publishes past the ring.
fn stalled_guard(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    ctx.guard().expect_attached(&[&a, &b])?;
    let guard = ctx.guard().of(&a)?;
    let capacity = journal_bytes(&guard)? - JOURNAL_HEADER_BYTES;
    // Each prefix deposits at least its shared blocks, each publishing at
    // least MIN_FRAME_BYTES: this many prefixes publish more than the ring
    // holds (with phase2's 4-block prefixes, 33 for a ring of 4096 bytes;
    // with the pool's evictions publishing too, about half that fills it).
    // They bound the attempt, with the requests after the ring is full.
    let blocks = ctx.family()?.shared_blocks().max(1);
    let to_fill = capacity.div_ceil(MIN_FRAME_BYTES * blocks) + 1;
    let most = to_fill as usize + AFTER_FULL;
    ctx.measure("ring_capacity_bytes", capacity);
    ctx.measure("prefixes_to_fill", to_fill);

    let mark = ctx.pressure().log_mark(&a);
    let mut requests = Vec::new();
    let mut prefixes = Vec::new();
    let events = guard.follow()?;
    let stalled_at = Instant::now();
    {
        let _stopped = ctx.faults().stop_guard(&a)?;
        let mut after_full = 0;
        while requests.len() < most && after_full < AFTER_FULL {
            let full = !ctx
                .pressure()
                .log_lines_since(&a, mark, RING_FULL)?
                .is_empty();
            let family = ctx.family()?;
            let request = stalled_request(ctx, &a, family.variant(0), full)?;
            let answered = request.latency_ms.is_some();
            requests.push(request);
            prefixes.push(family);
            if full {
                after_full += 1;
            }
            if !answered {
                break;
            }
        }
        ctx.measure("guard_stopped_ms", ms(stalled_at.elapsed()));
    }
    let worker_lines = ctx.pressure().log_lines_since(&a, mark, "KVCR recovery")?;
    let published_bound = MIN_FRAME_BYTES * blocks * requests.len() as u64;
    ctx.check(
        "stalled-guard.json",
        &json!({"requests": requests, "budget_ms": ms(REQUEST_BUDGET),
                "worker_lines": worker_lines, "capacity": capacity}),
        expect_worker_kept_serving(&requests, ms(REQUEST_BUDGET)),
    )?;
    ctx.check(
        "ring-full.json",
        &json!({"worker_lines": worker_lines, "published_bytes_at_least": published_bound}),
        expect_ring_full(&worker_lines, published_bound, capacity),
    )?;
    // Continued: the Guard reads what fit, then finds the journal given up.
    let dropped = await_recovery_dropped(&events, JOURNAL_INVALID)?;
    ctx.check(
        "guard-dropped.json",
        &json!({"guard_lines": dropped}),
        expect_recovery_dropped(&dropped, JOURNAL_INVALID),
    )?;
    cold_takeover(ctx, &a, &b, &prefixes, "stalled-takeover.json")
}

/// Attempt 2: a frame header the Guard is about to read overwritten.
fn torn_ring(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    ctx.guard().expect_attached(&[&a, &b])?;
    let guard = ctx.guard().of(&a)?;
    let journal = journal_bytes(&guard)?;
    let events = guard.follow()?;
    // With the Guard reading, the ring's unread part is empty: the frame it
    // will read next is the one the worker has not written yet, and garbage
    // there (or anywhere else) is overwritten or never read. So the Guard is
    // stopped for one deposit, and the header of the frame it will read
    // first is torn.
    let family = ctx.family()?;
    let torn = {
        let _stopped = ctx.faults().stop_guard(&a)?;
        let request = stalled_request(ctx, &a, family.variant(0), false)?;
        ctx.check(
            "torn-deposit.json",
            &request,
            expect_answered(&request, ms(REQUEST_BUDGET)),
        )?;
        wait::until(
            "a frame of A pending in the journal",
            GUARD_READS,
            Duration::from_millis(20),
            || match ctx.faults().journal_cursors(&a) {
                Ok(c) if c.pending() > 0 => Poll::Ready(()),
                Ok(c) => Poll::Pending(format!("{c:?}")),
                Err(e) => Poll::Abort(e.message),
            },
        )
        .map_err(|e| CaseError::fault_not_applied(e.to_string()))?;
        ctx.faults().tear_journal(&a, journal)?
    };
    ctx.record("torn-frame.json", &torn);
    let dropped = await_recovery_dropped(&events, BAD_FRAME)?;
    ctx.check(
        "torn-dropped.json",
        &json!({"torn": torn, "guard_lines": dropped}),
        expect_recovery_dropped(&dropped, BAD_FRAME),
    )?;
    // The stack keeps serving.
    let more = ctx.families(2)?;
    for (worker, family) in [(&a, &more[0]), (&b, &more[1])] {
        let answer = ctx.complete_on(worker, family.variant(0))?;
        ctx.expect_reference(family.variant(0), &answer.tokens)?;
    }
    cold_takeover(
        ctx,
        &a,
        &b,
        &[family, more[0].clone()],
        "torn-takeover.json",
    )
}

/// The size of the handback region the Guard of group `guard` (pool
/// `pool_<guard>`) logged writing, awaited in `events`.
fn await_snapshot_written(events: &mut GuardFollower, guard: u32) -> Result<u64, CaseError> {
    let pool = format!("pool_{guard}");
    let mut read_error = None;
    let mut bytes = None;
    let _ = wait::until(
        "the Guard to write the group's handback region",
        GUARD_READS,
        Duration::from_millis(20),
        || {
            if let Err(e) = events.poll() {
                read_error = Some(e);
                return Poll::Abort("the Guard log is unreadable".into());
            }
            bytes = events.events().iter().rev().find_map(|e| match &e.event {
                GuardEvent::Other { name, fields }
                    if name == SNAPSHOT_WRITTEN && fields.get("pool") == Some(&pool) =>
                {
                    fields.get("bytes").and_then(|b| b.parse::<u64>().ok())
                }
                _ => None,
            });
            match bytes {
                Some(_) => Poll::Ready(()),
                None => Poll::Pending(format!("no `{SNAPSHOT_WRITTEN} pool={pool}` yet")),
            }
        },
    );
    if let Some(e) = read_error {
        return Err(e);
    }
    bytes.ok_or_else(|| {
        CaseError::fault_not_applied(format!(
            "the Guard logged no `{SNAPSHOT_WRITTEN} pool={pool} bytes=N` after a clean stop: no handback region to cut"
        ))
    })
}

/// Attempt 3: the handback region of a clean stop cut short before the
/// next claim.
fn torn_handback(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    ctx.guard().expect_attached(&[&a])?;
    let guard = ctx.guard().of(&a)?;
    let families = ctx.families(2)?;
    for family in &families {
        ctx.commit(&a, family.variant(0))?;
    }
    let mut events = guard.follow()?;
    let stop = a.process.stop(stop_grace(ctx));
    ctx.record("handback-stop.json", &stop);
    let region_bytes = await_snapshot_written(&mut events, a.slot.guard_index)?;
    let torn = ctx.faults().tear_handback(&a, region_bytes)?;
    ctx.record("torn-handback.json", &torn);
    let replacement = ctx.faults().replace("A")?;
    ctx.guard().expect_attached(&[&replacement])?;
    let discarded_lines = events.lines_with(HANDBACK_DISCARDED)?;
    let file_bytes_after_claim = ctx.faults().pool_file_bytes(&replacement)?;
    let prompt = families[0].variant(1);
    let before = ctx.snapshot(&replacement)?;
    let answer = ctx.complete_on(&replacement, prompt)?;
    let delta = ctx.delta_since(&replacement, &before)?;
    let hit = ctx.observe().host_tier_hit(&delta, answer.cached_tokens)?;
    let claim = TornHandbackClaim {
        discarded_lines,
        region_offset: torn.region_offset,
        file_bytes_after_claim,
        delivered_blocks: hit.local_deliver_blocks,
        computed_blocks: hit.computed_blocks,
        wrong_tokens: ctx
            .expect_reference(prompt, &answer.tokens)
            .err()
            .map(|e| e.message),
    };
    ctx.check(
        "torn-handback-claim.json",
        &json!({"torn": torn, "claim": claim, "observed": hit}),
        expect_handback_discarded(&claim),
    )
}
