//! TC-09 clean restart (a rolling upgrade).
//!
//! Commit two prompts on worker A. SIGTERM A: it exits 0 after closing its
//! KVCR, which hands its Guard group back (the engine logs `KVCR closed:
//! Guard group N handed back`, the Guard writes the handback region,
//! `snapshot_written`) and the Guard promotes nothing. The replacement A'
//! claims the group warm: every block A committed is held by A' (the
//! ledger: none lost), and A's prefix on A' is a local hit from the reclaimed
//! pool with the reference tokens, still without a promotion. Then
//! replacements whose configuration no longer matches the group's (another
//! KV layout, one pool more, G3 switched on or off: [`MISMATCHES`]) are each
//! refused at startup, fast, quoting KVCR: `claimed with another tier
//! configuration`. A normal replacement after them still finds the pool
//! warm and serves the reference tokens. While A holds its group, a
//! stranger on the Guard service's socket (garbage, truncated and foreign
//! frames, stray descriptors, hang-ups, claims no worker makes) gets KVCR's
//! error for each and no group, and A still serves. Three wrong claims are refused fast
//! with KVCR's own words: while A holds its group, the held index (`is held
//! by another worker`) and an index past the service's groups (`is out of
//! range`); once A has stopped, one pool too many for its free group
//! (`claimed with another tier configuration`: the group's first claim fixed
//! its configuration), which must leave the handback to the replacement.
//!
//! On vLLM (`phase2_vllm`) the stop, the refusals (on A's own Guard
//! service) and the warm replacement are checked the same way; the handback
//! is the Guard's `snapshot_written` (vLLM logs no close line of KVCR's),
//! and the ledger and the changed-layout replacement are recorded as not
//! checked: vLLM reports no per-block events and has no launch switch that
//! changes its KV layout. vLLM 0.32.0's process manager force-kills the
//! engine core that holds KVCR on every clean stop (docs/kvcr-findings.md
//! 17), so KVCR never closes: while that shows, the stop is checked as a
//! death its Guard takes over (exit 0, a promotion), the rest of the case
//! as above, and the case is reported as finding 17's expected failure; a
//! vLLM whose stop closes KVCR fails it as an unexpected pass.

use std::time::{Duration, Instant};

use crate::engine::{Need, Support};
use crate::prompts::Family;
use crate::stack::Worker;
use crate::suite::EngineFault;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::telemetry::engine_kvcr_log::EngineKvcrLine;
use crate::telemetry::guard_log::GuardEvent;
use crate::telemetry::names::kvcr_service_log::{
    HELD_BY_ANOTHER, OTHER_TIER_CONFIG, OUT_OF_RANGE, SNAPSHOT_WRITTEN,
};
use crate::telemetry::names::vllm_log::FORCE_KILLED_ENGINE;
use crate::verdict::ledger::LedgerInput;
use crate::verdict::local::expect_host_tier_hit;
use crate::verdict::log_scan::BadLine;
use crate::verdict::restart::{
    expect_clean_stop, expect_forced_stop_taken_over, expect_refused, forced_engine_stop, CleanStop,
};
use crate::verdict::service::{expect_claims_refused, Refusal};
use crate::verdict::stranger::{
    expect_descriptors_closed, expect_strangers_turned_away, Descriptors, ATTEMPTS,
    DESCRIPTOR_SLACK,
};
use serde_json::json;

use super::production_common::{evicted_after_reclaim, ms, stop_grace, stored_by};

pub const CASE: Case = Case {
    id: "TC-09",
    name: "clean_restart",
    destructive: true,
    needs: &[Need::ProductionConditions, Need::Guard],
    optional: &[Need::BlockLedger, Need::RelayedKvcrEvents],
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let marks = ctx.pressure().log_marks();
    let a = ctx.worker("A")?;
    let geometry = ctx.geometry();
    ctx.guard().expect_attached(&[&a])?;
    let guard = ctx.guard().of(&a)?;
    let families = ctx.families(2)?;
    let mark = ctx.pressure().log_mark(&a);
    for family in &families {
        ctx.commit(&a, family.variant(0))?;
    }
    let committed = ctx.pressure().committed_since(&a, mark)?;
    // The ledger needs KVCR's per-block events (not on vLLM): else the
    // summary says it was not checked, and why.
    let ledger_kept = ctx.supports(Need::BlockLedger);
    if let Support::No(why) = &ledger_kept {
        ctx.not_checked("nothing lost, block by block (the reclaim ledger)", why);
    }

    // Wrong claims while A holds its group: refused, fast, quoting KVCR.
    let mut refused = held_refusals(ctx, &a)?;
    // A stranger on the service's socket while A holds its group: each
    // message answered with KVCR's error, no group handed out, A serving.
    strangers(ctx, &a, &families[0])?;

    // SIGTERM: close, hand back, no promotion.
    let mut events = guard.follow()?;
    let stop = clean_stop(ctx, &a, &mut events)?;
    // The group is free now: a claim with one pool too many is refused too
    // (and must leave the handback to the replacement).
    refused.push(pool_count_refusal(ctx, &a)?);
    ctx.check("refusals.json", &refused, expect_claims_refused(&refused))?;
    let replacement = ctx.faults().replace("A")?;
    events.poll()?;
    let promotions = promotions_of(events.events(), a.slot.guard_index);
    let stopped = CleanStop { promotions, ..stop };
    // While vLLM force-kills the engine core that holds KVCR (finding 17),
    // no stop is clean: the case checks that the Guard took the pool over
    // instead, and is reported as that finding's expected failure.
    let verdict = match ctx.known_finding(&forced_engine_stop(&stopped)) {
        true => expect_forced_stop_taken_over(&stopped),
        false => expect_clean_stop(&stopped),
    };
    ctx.check("stop.json", &stopped, verdict)?;

    // A' is warm: every committed block held, A's prefix a local hit.
    if ledger_kept.is_yes() {
        let ledger = reclaimed(ctx, &committed, &replacement)?;
        ctx.check(
            "ledger.json",
            &ledger,
            crate::verdict::ledger::expect_reclaimed(&ledger).map(drop),
        )?;
    }
    let warm = &families[0];
    let before = ctx.snapshot(&replacement)?;
    let answer = ctx.complete_on(&replacement, warm.variant(1))?;
    ctx.expect_reference(warm.variant(1), &answer.tokens)?;
    let delta = ctx.delta_since(&replacement, &before)?;
    let hit = ctx.observe().host_tier_hit(&delta, answer.cached_tokens)?;
    ctx.check(
        "warm.json",
        &json!({"delta": delta, "observed": hit}),
        expect_host_tier_hit(
            &hit,
            warm.shared_blocks(),
            u64::from(geometry.block_size_tokens),
            geometry.bytes_per_block(),
        ),
    )?;

    // Replacements whose configuration does not match the group's (the
    // table below): each refused at startup, fast, quoting KVCR. Each needs
    // a launch switch of the engine that changes its claim.
    let (usable, unusable): (Vec<&Mismatch>, Vec<&Mismatch>) = MISMATCHES
        .iter()
        .partition(|m| launch_switch(ctx, m.switch).is_ok());
    for m in &unusable {
        let why = launch_switch(ctx, m.switch).err().unwrap_or_default();
        ctx.not_checked(
            &format!(
                "a replacement with {} is refused (`{}`)",
                m.what, m.expected
            ),
            &why,
        );
    }
    if usable.is_empty() {
        ctx.not_checked(
            "a normal replacement after the mismatched ones is warm and serves",
            "the engine has no launch switch that changes its claim (above)",
        );
        return ctx
            .pressure()
            .expect_no_bad_lines_since(&marks, &[BadLine::Traceback]);
    }
    let mut events = guard.follow()?;
    let restop = clean_stop(ctx, &replacement, &mut events)?;
    ctx.record("second-stop.json", &restop);
    for m in usable {
        ctx.faults()
            .on_next_replacement(&[m.switch.name().to_string()]);
        let started = Instant::now();
        let refused = ctx
            .faults()
            .replace("A")
            .map(drop)
            .map_err(|e| e.to_string());
        let key = match m.switch {
            EngineFault::ChangedLayout => "refusal_ms".to_string(),
            other => format!("refusal_ms_{}", other.name()),
        };
        ctx.measure(&key, ms(started.elapsed()));
        // Judged by what ended the replacement (its log's last exception),
        // not by a refusal an earlier row left in the same log.
        let log = refused_log(ctx);
        ctx.check(
            &format!("refusal-{}.json", m.switch.name()),
            &json!({"mismatch": m.what, "switch": m.switch.name(), "result": refused, "worker_log_ended_with": log}),
            expect_refused(
                refused.clone().map_err(|e| match log.is_empty() {
                    true => e,
                    false => log.clone(),
                }),
                m.expected,
            ),
        )?;
    }

    // A normal replacement after the refusals: the group kept every block,
    // and it serves the reference tokens from it.
    let again = ctx.faults().replace("A")?;
    if ledger_kept.is_yes() {
        let after_refusal = reclaimed(ctx, &committed, &again)?;
        ctx.check(
            "ledger-after-refusal.json",
            &after_refusal,
            crate::verdict::ledger::expect_reclaimed(&after_refusal).map(drop),
        )?;
    }
    let prompt = families[1].variant(1);
    let answer = ctx.complete_on(&again, prompt)?;
    ctx.expect_reference(prompt, &answer.tokens)?;
    // The refused replacements' tracebacks are the refusals themselves.
    ctx.pressure()
        .expect_no_bad_lines_since(&marks, &[BadLine::Traceback])
}

/// A replacement whose configuration does not match its group's: what
/// changed, the engine's launch switch that changes it, KVCR's refusal.
#[derive(Debug, Clone, Copy)]
struct Mismatch {
    what: &'static str,
    switch: EngineFault,
    expected: &'static str,
}

/// Every mismatch a worker's own configuration can make: the tier
/// configuration it claims with (`guard_protocol.py`'s `_TierConfig`: the
/// pools' layouts and the G3 tier). The group's first claim since the
/// service started fixed it, so KVCR 0.1.1 refuses each with the same words
/// (`guard.py`'s `_refuse_incompatible`). Pool sizes are the service's own
/// (`--pool-sizes-gb`), never a worker's; the claimant's own checks of the
/// grant (`claim pool count mismatch`, `claim pool sizes do not fill the
/// allocation`, ...) answer a service that granted something else.
const MISMATCHES: [Mismatch; 3] = [
    Mismatch {
        what: "another block layout (twice the pages of half the size)",
        switch: EngineFault::ChangedLayout,
        expected: OTHER_TIER_CONFIG,
    },
    Mismatch {
        what: "one pool more",
        switch: EngineFault::ExtraKvcrPool,
        expected: OTHER_TIER_CONFIG,
    },
    Mismatch {
        what: "the other tier set (G3 switched on or off)",
        switch: EngineFault::ToggledG3Tier,
        expected: OTHER_TIER_CONFIG,
    },
];

/// A stranger on the socket of the service holding `holder`'s group, while
/// it holds it: every message answered with KVCR's error, no group handed
/// out, and `holder` still serves `family`'s reference tokens.
fn strangers(ctx: &CaseCtx, holder: &Worker, family: &Family) -> CaseResult {
    let before = ctx.guard().open_descriptors(holder);
    let answers = ctx.pressure().stranger_probe_at(
        &holder.slot.guard_socket,
        holder.slot.guard_index,
        out_of_range(ctx),
    )?;
    // Still running, and every descriptor the stranger gave it closed.
    ctx.guard().of(holder)?;
    let descriptors = before.and_then(|before| {
        ctx.guard()
            .descriptors_settled(holder, before + DESCRIPTOR_SLACK, Duration::from_secs(3))
            .map(|after| Descriptors { before, after })
    });
    ctx.check(
        "strangers.json",
        &json!({"attempts": ATTEMPTS, "answers": answers, "descriptors": descriptors}),
        expect_strangers_turned_away(&answers),
    )?;
    match &descriptors {
        Some(d) => ctx.check(
            "strangers-descriptors.json",
            d,
            expect_descriptors_closed(d),
        )?,
        None => ctx.not_checked(
            "the Guard service keeps no descriptor of a stranger's",
            "its /proc/<pid>/fd cannot be read",
        ),
    }
    let prompt = family.variant(0);
    let answer = ctx.complete_on(holder, prompt)?;
    ctx.expect_reference(prompt, &answer.tokens)
}

/// The ledger of a reclaim: each block `committed` held by `replacement`.
fn reclaimed(
    ctx: &CaseCtx,
    committed: &std::collections::BTreeSet<u64>,
    replacement: &Worker,
) -> Result<LedgerInput, CaseError> {
    let held = ctx.pressure().held_in(
        replacement,
        &committed.iter().copied().collect::<Vec<_>>(),
        "local",
    )?;
    Ok(LedgerInput {
        committed: committed.clone(),
        held_by_replacement: held,
        evicted_by_replacement: evicted_after_reclaim(ctx, replacement)?,
        stored_by_replacement: stored_by(ctx, replacement)?,
        ..Default::default()
    })
}

/// Whether the engine can start a replacement with this launch switch;
/// the reason where it cannot.
fn launch_switch(ctx: &CaseCtx, switch: EngineFault) -> Result<(), String> {
    let probe = crate::proc::ProcessSpec::new("switch-probe", "true", "/dev/null");
    ctx.engine().with_faults(probe, &[switch.name()]).map(drop)
}

/// The first index past the groups of a worker's Guard service (one group
/// per service where each worker has its own).
fn out_of_range(ctx: &CaseCtx) -> u32 {
    if ctx.engine().guard_per_slot() {
        1
    } else {
        ctx.pressure().guard_count()
    }
}

/// A claim of the index `holder` holds and of an index past its Guard
/// service's groups (KVCR checks the holder before the layout, so a layout
/// refusal needs a free group: [`pool_count_refusal`]). Each on the
/// holder's own service (one per worker on vLLM, of one group).
fn held_refusals(ctx: &CaseCtx, holder: &Worker) -> Result<Vec<Refusal>, CaseError> {
    let held = holder.slot.guard_index;
    let socket = &holder.slot.guard_socket;
    let pools = ctx.pressure().claim_pools();
    let out_of_range = out_of_range(ctx);
    Ok(vec![
        Refusal {
            what: format!("a second claim of group {held}, held by worker A"),
            expected: HELD_BY_ANOTHER.into(),
            probe: ctx.pressure().claim_probe_at(socket, held, &pools, None)?,
        },
        Refusal {
            what: format!("a claim of group {out_of_range} (the service has {out_of_range})"),
            expected: OUT_OF_RANGE.into(),
            probe: ctx
                .pressure()
                .claim_probe_at(socket, out_of_range, &pools, None)?,
        },
    ])
}

/// A claim of stopped `worker`'s free group, on its control port, with one
/// pool more than the service has. The group's first claim fixed its tier
/// configuration (docs/kvcr-findings.md 13), so KVCR 0.1.1 answers with that
/// refusal, not `pool layout must match the number of pools in the Guard`
/// (which only a group never claimed since the service started gives).
fn pool_count_refusal(ctx: &CaseCtx, worker: &Worker) -> Result<Refusal, CaseError> {
    let free = worker.slot.guard_index;
    let mut pools = ctx.pressure().claim_pools();
    pools.push(("extra".into(), pools.first().map_or(4096, |p| p.1)));
    Ok(Refusal {
        what: format!("a claim of group {free} with {} pools", pools.len()),
        expected: OTHER_TIER_CONFIG.into(),
        probe: ctx.pressure().claim_probe_at(
            &worker.slot.guard_socket,
            free,
            &pools,
            Some(worker.slot.control_port),
        )?,
    })
}

/// SIGTERMs `worker` and reads what its stop showed (promotions are counted
/// by the caller once the replacement claimed).
fn clean_stop(
    ctx: &CaseCtx,
    worker: &Worker,
    events: &mut crate::suite::GuardFollower,
) -> Result<CleanStop, CaseError> {
    let mark = ctx.pressure().log_mark(worker);
    let report = worker.process.stop(stop_grace(ctx));
    let lines = ctx.pressure().kvcr_lines_since(worker, mark)?;
    let forced_engine_stop = ctx
        .pressure()
        .log_lines_since(worker, mark, FORCE_KILLED_ENGINE)?
        .into_iter()
        .next();
    events.poll()?;
    let snapshot_written = events
        .events()
        .iter()
        .any(|e| matches!(&e.event, GuardEvent::Other { name, .. } if name == SNAPSHOT_WRITTEN));
    // The engine's own line where it relays KVCR's close; elsewhere (vLLM)
    // the Guard's handback region is the only record of the handback.
    let handed_back = match ctx.supports(Need::RelayedKvcrEvents) {
        Support::Yes => Some(
            lines
                .iter()
                .any(|l| matches!(l.event, EngineKvcrLine::HandedBack { .. })),
        ),
        Support::No(why) => {
            ctx.not_checked(
                "the engine logs `KVCR closed: Guard group N handed back`",
                &why,
            );
            None
        }
    };
    Ok(CleanStop {
        exit: report.exit,
        needed_sigkill: report.needed_sigkill,
        handed_back,
        forced_engine_stop,
        promotions: promotions_of(events.events(), worker.slot.guard_index),
        snapshot_written,
    })
}

fn promotions_of(events: &[crate::telemetry::GuardLogEntry], guard: u32) -> usize {
    events
        .iter()
        .filter(|e| matches!(&e.event, GuardEvent::Promoted(p) if p.guard == guard))
        .count()
}

/// The exception that ended the latest `worker-A` log (the refused
/// replacement's KVCR refusal), or empty when it logged none.
fn refused_log(ctx: &CaseCtx) -> String {
    let dir = &ctx.logs_dir();
    let mut logs: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map(|e| e.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    logs.retain(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("worker-A"))
    });
    logs.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    logs.last()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| crate::stack::final_cause(&t).map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mismatch_is_a_distinct_launch_switch_refused_in_kvcrs_words() {
        for (i, m) in MISMATCHES.iter().enumerate() {
            assert!(
                m.switch.launch_only(),
                "{} is not a launch switch",
                m.switch
            );
            assert!(
                MISMATCHES[..i].iter().all(|n| n.switch != m.switch),
                "{} twice",
                m.switch
            );
            assert_eq!(m.expected, OTHER_TIER_CONFIG);
        }
    }
}
