//! TC-10 heartbeat promotion.
//!
//! The stack's Guard service runs with `--heartbeat-timeout-ms` (the
//! `guard_heartbeat_timeout_ms` knob). Commit prompts on worker A. A stop of
//! A shorter than the timeout (a fifth of it, SIGSTOP then SIGCONT) promotes
//! nothing. Then SIGSTOP A for good (state `T` verified): the Guard fences
//! it (SIGKILL: A's pid is gone), logs `KVCR Guard N promoted after
//! heartbeat timeout` and `guard_promoted`, and serves A's pool on A's
//! control endpoint to the peer B (a Guard-served answer with the reference
//! tokens). t from the stop to the promotion is recorded next to TC-06's
//! t1, and lies between the timeout (less one 50 ms beat) and the timeout
//! plus the slack of a loaded machine. The replacement A' reclaims the pool:
//! the ledger classifies every block A committed, none lost, and the Guard
//! recovered the whole pool. KVCR 0.1.1's order of the promotion's stages
//! is this case's expected failure (docs/kvcr-findings.md 8,
//! `verdict::findings`): the Guard logs `serving` with no `death_observed`
//! before it (`promotion-stages.json`); a KVCR that sees the death first
//! fails the case as an unexpected pass.
//!
//! On vLLM the KVCR tier, and so the Guard lease, lives in the EngineCore
//! child of the worker's process: the stop is of the whole process group,
//! the fence is that child SIGKILLed while the group is stopped
//! (`fence.json`), and the worker's own process stays stopped through the
//! takeover (a dead worker's would not leave Dynamo's discovery either),
//! then is killed before A' starts. The ledger is recorded as not checked.

use std::time::Duration;

use crate::engine::Need;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::telemetry::guard_log::GuardEvent;
use crate::verdict::guard::expect_promoted;
use crate::verdict::log_scan::BadLine;
use crate::verdict::restart::{expect_heartbeat_promotion, heartbeat_serving_order};
use serde_json::json;

use super::production_common::{ms, reclaim, takeover_served, LedgerWatch};

pub const CASE: Case = Case {
    id: "TC-10",
    name: "heartbeat_promotion",
    destructive: true,
    needs: &[Need::ProductionConditions, Need::Guard],
    optional: &[Need::BlockLedger],
    run,
};

/// How far past the timeout a promotion may come on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(3);
/// Prefixes committed on A: one per takeover attempt.
const COMMITTED: usize = 3;

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let marks = ctx.pressure().log_marks();
    let timeout_ms = ctx.engine().guard_heartbeat_timeout_ms().ok_or_else(|| {
        CaseError::new(
            "TC-10 needs the Guard's heartbeat timeout (cpu_engine.guard_heartbeat_timeout_ms; on vLLM the engine profile's guard_heartbeat_timeout_ms)",
        )
    })?;
    let timeout = Duration::from_millis(timeout_ms);
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    ctx.guard().expect_attached(&[&a, &b])?;
    let guard = ctx.guard().of(&a)?;
    let families = ctx.families(COMMITTED)?;
    let watch = LedgerWatch::where_kept(ctx, &a);
    for family in &families {
        ctx.commit(&a, family.variant(0))?;
    }

    // A short stop: no promotion.
    let mut events = guard.follow()?;
    {
        let _stopped = ctx.pressure().stop_worker_process(&a)?;
        std::thread::sleep(timeout / 5);
    }
    // Past the timeout since the stop began: a wrong watchdog would have fired.
    std::thread::sleep(timeout + Duration::from_secs(1));
    events.poll()?;
    let short_stop_promotions = events
        .events()
        .iter()
        .filter(|e| matches!(&e.event, GuardEvent::Promoted(p) if p.guard == a.slot.guard_index))
        .count();

    // For good: fenced, killed, promoted.
    let at_stop = watch.map(|w| w.at_kill(ctx, &a, &b)).transpose()?;
    let mut events = guard.follow()?;
    let stopped = ctx.pressure().stop_worker_process(&a)?;
    let t0 = stopped.at;
    let promotion = events.await_promotion(a.slot.guard_index)?;
    let stop_to_promotion = promotion.as_ref().map(|_| t0.elapsed());
    let heartbeat_line = events.events().iter().any(|e| {
        matches!(&e.event, GuardEvent::PromotedAfterHeartbeatTimeout { guard } if *guard == a.slot.guard_index)
    });
    // The fence: the Guard SIGKILLs the lease holder. Where KVCR runs in a
    // child of the worker (vLLM's EngineCore) that child dies while the
    // worker's own process stays stopped.
    let in_child = ctx.engine().kvcr_in_child_process();
    let gone = if in_child {
        let killed = stopped.await_killed(Duration::from_secs(5));
        ctx.record(
            "fence.json",
            &json!({"stopped_pids": stopped.pids, "killed_while_stopped": killed}),
        );
        !killed.is_empty()
    } else {
        a.process.wait_exit(Duration::from_secs(5)).is_some()
    };
    // The worker's own process (vLLM) stays stopped through the takeover,
    // as a dead worker's does: continued, it would see its EngineCore gone
    // and leave Dynamo's discovery, and the router would stop hinting A's
    // blocks before the Guard could serve them.
    let still_stopped = if in_child {
        Some(stopped)
    } else {
        drop(stopped);
        None
    };
    // Finding 8: the order of the promotion's stages, read once A is gone.
    events.poll()?;
    let stages: Vec<String> = events
        .events()
        .iter()
        .filter_map(|e| match &e.event {
            GuardEvent::PromotionStage(s) if s.guard == a.slot.guard_index => Some(s.stage.clone()),
            _ => None,
        })
        .collect();
    let order = heartbeat_serving_order(&stages);
    let path = ctx.record(
        "promotion-stages.json",
        &json!({"stages": stages, "finding": order.as_ref().ok()}),
    );
    ctx.known_finding(&order.map_err(|v| CaseError::from(v).with_evidence(path))?);
    ctx.measure("stop_to_promotion_ms", stop_to_promotion.map(ms));
    ctx.measure("promotion_ms", promotion.as_ref().map(|p| p.promotion_ms));
    ctx.check(
        "heartbeat.json",
        &json!({"timeout_ms": timeout_ms, "short_stop_promotions": short_stop_promotions,
                "stop_to_promotion_ms": stop_to_promotion.map(ms), "promotion": promotion,
                "heartbeat_line": heartbeat_line, "killed_by_the_guard": gone}),
        expect_heartbeat_promotion(
            timeout_ms as f64,
            short_stop_promotions,
            stop_to_promotion.map(ms),
            ms(SLACK),
        ),
    )?;
    ctx.check(
        "fault.json",
        &json!({"promotion": promotion, "heartbeat_line": heartbeat_line}),
        expect_promoted(
            promotion.as_ref(),
            a.slot.guard_index,
            gone && heartbeat_line,
            ctx.guard().control_port_listening(&a),
        ),
    )?;

    // The Guard serves A's pool to B; A' reclaims it, nothing lost.
    let mut at_stop = at_stop;
    takeover_served(
        ctx,
        "A",
        &b,
        &families,
        &mut events,
        t0,
        &mut at_stop,
        "takeover through the Guard after the heartbeat promotion",
    )?;
    if let Some(stopped) = still_stopped {
        // What is left of A (its own process, its engine fenced) ends as a
        // crash ends it, before A' takes its ports.
        let ended = a.process.kill_group();
        ctx.record(
            "fenced-worker-ended.json",
            &json!({"kill": ended.map_err(|e| e.to_string()), "stop": a.process.stop(Duration::from_secs(1))}),
        );
        drop(stopped);
    }
    reclaim(
        ctx,
        "A",
        at_stop,
        promotion.as_ref().map(|p| p.recovered_blocks),
    )?;
    ctx.pressure()
        .expect_no_bad_lines_since(&marks, &[BadLine::StartWriteRefused])
}
