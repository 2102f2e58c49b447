//! TC-08 the Guard service crashes and restarts.
//!
//! SIGKILL the `kvcr_service` process holding worker A's pool while the
//! workers serve (its pid verified gone): the stack's one shared service,
//! or A's own where each worker has one (vLLM). What KVCR promises,
//! checked: the workers keep serving their own requests and each other's
//! peer reads (reference tokens); a new claim of A's group gets a clear
//! refusal, not a hang (`KVCR-Service is unreachable`, within seconds); a
//! restarted service on the same socket and pool directory removes the
//! stale socket (`Removing stale KVCR service socket`) and serves again:
//! the workers whose pools it holds, restarted cleanly, claim their groups
//! on it; and a worker SIGKILL is then protected again (promotion, a
//! Guard-served answer to the peer, a replacement that reclaims the pool,
//! nothing lost where the engine reports per-block events). What KVCR
//! 0.1.1 does that a user would not expect is measured and named
//! (docs/kvcr-findings.md 1-2): the restarted service leaves the pools the
//! live workers still map and allocates new ones, so the pool directory
//! holds both until those workers exit; and the restarted service does not
//! know the live workers: a claim of A's group on A's own control port is
//! refused only because A still has the port (finding 2,
//! `live-holder-claim.json`).

use std::time::Instant;

use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::telemetry::names::kvcr_service_log::{
    HELD_BY_ANOTHER, LISTENER_UNAVAILABLE, POOL_STILL_IN_USE, STALE_SOCKET_REMOVED, UNREACHABLE,
};
use crate::verdict::guard::expect_promoted;
use crate::verdict::log_scan::BadLine;
use crate::verdict::service::{expect_service_restart, live_holder_claim, ServiceRestart};
use serde_json::json;

use super::production_common::{ms, stop_grace, takeover_and_reclaim, LedgerWatch};

pub const CASE: Case = Case {
    id: "TC-08",
    name: "guard_service_crash_and_restart",
    destructive: true,
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let marks = ctx.pressure().log_marks();
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    ctx.guard().expect_attached(&[&a, &b])?;
    let families = ctx.families(6)?;
    ctx.commit(&a, families[0].variant(0))?;
    let pools_before = ctx.stack.pool_files_of(&a);

    // The crash of the service holding A's pool, verified.
    let kill = ctx.stack.kill_guard_service_of(&a)?;
    ctx.record("kill.json", &kill);

    // The workers keep serving, their own requests and each other's reads.
    let own = ctx.complete_on(&a, families[0].variant(1))?;
    ctx.expect_reference(families[0].variant(1), &own.tokens)?;
    let peer = ctx.complete_on(&b, families[0].variant(2))?;
    ctx.expect_reference(families[0].variant(2), &peer.tokens)?;
    // A new claim of A's group: a clear refusal, fast.
    let refused = ctx.pressure().claim_probe_of(&a, None)?;

    // The service again, on the same socket and pool directory.
    let started = Instant::now();
    let restarted = ctx.stack.restart_guard_service_of(&a)?;
    let restart_ms = ms(started.elapsed());
    let log = std::fs::read_to_string(restarted.log_path()).unwrap_or_default();
    let pools_after = ctx.stack.pool_files_of(&a);
    // Finding 2: A still holds group N of the dead service; the new one
    // does not know it. A claim of A's group on A's own control port.
    let live_holder = ctx
        .pressure()
        .claim_probe_of(&a, Some(a.slot.control_port))?;
    let expectation = live_holder_claim(&live_holder, HELD_BY_ANOTHER, LISTENER_UNAVAILABLE);
    ctx.record(
        "live-holder-claim.json",
        &json!({"probe": live_holder, "finding_2": expectation.as_ref().ok()}),
    );
    let finding = expectation.map_err(CaseError::from)?;
    ctx.measure("finding_2_shown", finding.is_some());
    if let Some(finding) = finding {
        ctx.finding(2, &finding);
    }
    // The workers whose pools it holds claim their groups on it: restarted
    // cleanly, one by one.
    let mut stops = Vec::new();
    for name in ctx.stack.slots_guarded_with(&a) {
        let worker = ctx.worker(&name)?;
        stops.push(worker.process.stop(stop_grace(ctx)));
        ctx.stack.replace_worker(&name)?;
    }
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    ctx.guard().expect_attached(&[&a, &b])?;
    let observed = ServiceRestart {
        killed_pid_gone: !crate::proc::procfs::is_alive(kill.pid),
        socket_left: kill.socket_left,
        claim_while_down: refused.clone(),
        stale_socket_removed: log.contains(STALE_SOCKET_REMOVED),
        pools_left_in_use: log
            .lines()
            .filter(|l| l.contains(POOL_STILL_IN_USE))
            .count(),
        pool_bytes_before: pools_before.iter().map(|p| p.bytes).sum(),
        pool_bytes_after_restart: pools_after.iter().map(|p| p.bytes).sum(),
        restart_ms,
    };
    ctx.measure("claim_refused_ms", refused.ms);
    ctx.measure("pool_bytes_before", observed.pool_bytes_before);
    ctx.measure(
        "pool_bytes_after_restart",
        observed.pool_bytes_after_restart,
    );
    ctx.check(
        "restart.json",
        &json!({"observed": observed, "service": kill.service, "pools_before": pools_before,
                "pools_after": pools_after, "worker_stops": stops,
                "restarted_log": restarted.log_path()}),
        expect_service_restart(&observed, UNREACHABLE),
    )?;

    // Protected again: SIGKILL A, the restarted Guard promotes and serves B.
    let guard = ctx.guard().of(&a)?;
    let watch = LedgerWatch::where_kept(ctx, &a);
    for family in &families[1..] {
        ctx.commit(&a, family.variant(0))?;
    }
    let at_kill = watch.map(|w| w.at_kill(ctx, &a, &b)).transpose()?;
    let mut events = guard.follow()?;
    let kill = ctx.stack.kill_worker("A")?;
    let promotion = events.await_promotion(a.slot.guard_index)?;
    ctx.check(
        "protected-again.json",
        &json!({"kill": kill, "promotion": promotion}),
        expect_promoted(
            promotion.as_ref(),
            a.slot.guard_index,
            ctx.stack.killed_worker_gone(&kill),
            ctx.stack.control_port_listening(&a),
        ),
    )?;
    takeover_and_reclaim(
        ctx,
        "A",
        &b,
        &families[1..],
        &mut events,
        kill.sent_at,
        at_kill,
        promotion.as_ref().map(|p| p.recovered_blocks),
        "takeover through the Guard after the Guard service restarted",
    )?;
    ctx.measure("pool_files_at_end", ctx.stack.pool_files_of(&a).len());
    ctx.pressure()
        .expect_no_bad_lines_since(&marks, &[BadLine::StartWriteRefused])
}
