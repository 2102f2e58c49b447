//! TC-22's router hints KVCR must refuse, and one it must accept; then
//! KVCR's own diagnostics read back.
//!
//! Rewritten hints: for each row, worker A answers a prompt (the prefix's
//! blocks in A's engine memory only), then B is asked for the prefix with a
//! new suffix while B's engine rewrites the router's hint (which names A
//! and the prefix's blocks). Most rows make a hint KVCR 0.1.1 does not
//! support or cannot parse. Expect: reference tokens; B computes the
//! prefix; neither B nor A runs a peer operation; KVCR's refusal is logged
//! in its words (the schema-version row first: KVCR warns of each version
//! mismatch once per process). The last row adds a valid hash that uses
//! all 64 bits, which no CPU-engine hint names otherwise (its hashes are
//! 63-bit). Expect: reference tokens; B reads the prefix from A instead of
//! computing it, and the engine did not ignore the hint.
//!
//! KVCR's diagnostics (where `cpu_engine.kvcr_diagnostics` is on, as the
//! phase3-api profile sets it): each worker's log has KVCR's key history,
//! numbered without gaps per process, whose accepted inventory is exactly
//! the engine's logged and counted inventory; KVCR logged a query
//! decision for each rewritten-hint request, with a hint present exactly
//! for the hint it must accept; and its query decisions keep to the sample
//! of four per request their lines declare, tested by one request the case
//! queries six times.

use std::time::Duration;

use serde_json::json;

use crate::client::request_id::new_request_id;
use crate::stack::Worker;
use crate::suite::{CaseCtx, CaseError, CaseResult, EngineFault};
use crate::telemetry::{Counter, Delta, OpResult, Scope, Snapshot};
use crate::verdict::key_history::{
    disagreements, expect_key_history_reconciled, expect_query_decisions, parse_query_decision,
    DecidedRequest, KeyHistoryReading,
};
use crate::verdict::query_sampling::{
    expect_query_sampling, QuerySampling, SampledRequest, SAMPLE_CAP,
};
use crate::verdict::refused_hint::{
    expect_as_row_says, ignored_line, missing_words, Must, RewrittenHint, ROWS,
};
use crate::wait::{self, Poll};

/// Each row's request to B, with its hint rewritten; the requests sent.
pub(super) fn rewritten_hints(
    ctx: &CaseCtx,
    a: &Worker,
    b: &Worker,
) -> Result<Vec<DecidedRequest>, CaseError> {
    let mut rewritten = Vec::new();
    for row in ROWS {
        let family = ctx.family()?;
        let prefix = super::tc19_interrupted_source_write::held_by_a_only(ctx, a, &family)?;
        let (a_before, b_before) = (ctx.snapshot(a)?, ctx.snapshot(b)?);
        let rewriting = ctx
            .faults()
            .engine_added("B", EngineFault::RewriteKvHint(row.rewrite))?;
        let answer = ctx.complete_on(b, family.variant(1))?;
        drop(rewriting);
        ctx.expect_reference(family.variant(1), &answer.tokens)?;
        let b_delta = ctx.delta_since(b, &b_before)?;
        let read = ctx.observe().fetched_read(&b_delta, 0)?;
        let target_peer_ops = read.remote_fetch_success_ops
            + read.remote_fetch_unsuccessful.0.values().sum::<u64>()
            + read.remote_deliver_ops;
        let a_delta = if target_peer_ops > 0 {
            source_after_a_write(ctx, a, &a_before)?
        } else {
            ctx.delta_since(a, &a_before)?
        };
        let writes = a_delta.ops_by_result(&Scope::SourceWrite)?;
        let lines = ctx.observe().log_lines_of(&answer.request_id);
        let log = ctx.observe().worker_log(b);
        let mut missing = missing_words(row.words, lines.iter().map(String::as_str));
        missing.extend(missing_words(row.once_per_process, log.lines()));
        rewritten.push((
            answer,
            RewrittenHint {
                rewrite: row.rewrite.to_string(),
                must: row.must,
                x_request_id: String::new(),
                prefix_blocks: prefix.len() as u64,
                target_peer_ops,
                target_computed_blocks: ctx.observe().computed_blocks(&b_delta)?,
                peer_reads_taken: a_delta.required_count(&reads_taken())?,
                peer_source_writes: writes.success + writes.unsuccessful.values().sum::<u64>(),
                missing_words: missing,
                ignored_line: ignored_line(lines.iter().map(String::as_str)),
            },
            lines,
        ));
    }
    let mut decided = Vec::new();
    for (answer, mut row, lines) in rewritten {
        row.x_request_id = answer.request_id.clone();
        // One file per row (`hint-no_retain.json`), each with its log lines.
        ctx.check(
            &format!("hint-{}.json", row.rewrite),
            &json!({"row": row, "answer": answer, "log_lines": lines}),
            expect_as_row_says(&row),
        )?;
        decided.push(DecidedRequest {
            name: row.rewrite.clone(),
            x_request_id: answer.request_id.clone(),
            hint_expected: row.must == Must::Accept,
            decisions: lines
                .iter()
                .filter_map(|l| parse_query_decision(l))
                .collect(),
        });
    }
    Ok(decided)
}

/// A's counts since `before` once it reported the source write of the
/// read B ran (it may come after B's answer left); what it reported by
/// then if none comes.
fn source_after_a_write(ctx: &CaseCtx, a: &Worker, before: &Snapshot) -> Result<Delta, CaseError> {
    match ctx.observe().await_count(
        a,
        before,
        &Counter::OpCount(Scope::SourceWrite, OpResult::Success),
        1,
        "worker A to report the source write of B's read",
    ) {
        Ok(delta) => Ok(delta),
        Err(_) => ctx.delta_since(a, before),
    }
}

/// KVCR's key history on each of `workers` is complete and agrees with its
/// engine's inventory, its query decisions name `decided`, and they keep
/// to KVCR's sample of four per request, which a request `sampler` (one of
/// `workers`) queries past the cap puts to the test.
pub(super) fn kvcr_diagnostics_agree(
    ctx: &CaseCtx,
    workers: &[&Worker],
    sampler: &Worker,
    decided: &[DecidedRequest],
) -> CaseResult {
    if !ctx.settings().cpu_engine.kvcr_diagnostics {
        ctx.not_checked(
            "KVCR's key history and query decisions",
            "cpu_engine.kvcr_diagnostics is off (the phase3-api profile turns it on)",
        );
        return Ok(());
    }
    let readings = workers
        .iter()
        .map(|w| settled_reading(ctx, w))
        .collect::<Result<Vec<_>, _>>()?;
    let breaks: Vec<_> = readings.iter().map(|r| r.sequence_breaks()).collect();
    ctx.check(
        "kvcr-diagnostics.json",
        &json!({"readings": readings, "sequence_breaks": breaks}),
        expect_key_history_reconciled(&readings),
    )?;
    ctx.check(
        "kvcr-diagnostics.json",
        &json!({ "decided": decided }),
        expect_query_decisions(decided),
    )?;
    let sampled = queried_past_the_cap(ctx, sampler)?;
    let sampling: Vec<_> = workers
        .iter()
        .map(|w| QuerySampling::read(w.name(), &ctx.observe().worker_log(w)))
        .collect();
    ctx.check(
        "kvcr-query-sampling.json",
        &json!({"sampled": sampled, "sampling": sampling}),
        expect_query_sampling(&sampling, &sampled),
    )
}

/// How many times the sampled request queries KVCR: past the sample cap,
/// so a KVCR that logged a query beyond it would show it.
const SAMPLED_QUERIES: u32 = SAMPLE_CAP + 2;

/// A block no request computes ("qsample"): the sampled request's query.
const SAMPLED_BLOCK: u64 = 0x0071_7361_6d70_6c65;

/// Queries `worker`'s KVCR `SAMPLED_QUERIES` times under one fresh request
/// id (`POST /kvcr/holding`: no hint, not an access), then waits until its
/// log has the query decisions KVCR should have logged for it.
fn queried_past_the_cap(ctx: &CaseCtx, worker: &Worker) -> Result<SampledRequest, CaseError> {
    let request_id = format!("query-sample-{}", new_request_id());
    for _ in 0..SAMPLED_QUERIES {
        ctx.pressure()
            .holding_for(worker, &[SAMPLED_BLOCK], Some(&request_id))?;
    }
    let logged = SAMPLED_QUERIES.min(SAMPLE_CAP) as usize;
    // The engine logs a decision before it answers; the log file may lag.
    let _ = wait::until(
        format!(
            "worker {}'s query decisions for {request_id}",
            worker.name()
        ),
        SETTLE_WITHIN,
        Duration::from_millis(100),
        || {
            let r = QuerySampling::read(worker.name(), &ctx.observe().worker_log(worker));
            match r.ordinals_of(&request_id).len() {
                n if n >= logged => Poll::Ready(()),
                n => Poll::Pending(format!("{n} lines")),
            }
        },
    );
    Ok(SampledRequest {
        worker: worker.name().to_string(),
        request_id,
        queries: SAMPLED_QUERIES,
    })
}

/// `worker`'s key history once it agrees with the engine (the engine logs
/// an inventory event on its loop after KVCR's thread logged it), or as it
/// stands when `SETTLE_WITHIN` ran out.
fn settled_reading(ctx: &CaseCtx, worker: &Worker) -> Result<KeyHistoryReading, CaseError> {
    let read = || -> Result<KeyHistoryReading, CaseError> {
        let counted = inventory_counted(&ctx.snapshot(worker)?);
        Ok(KeyHistoryReading::read(
            worker.name(),
            &ctx.observe().worker_log(worker),
            counted,
        ))
    };
    let settled = wait::until(
        format!(
            "worker {}'s key history to agree with its engine",
            worker.name()
        ),
        SETTLE_WITHIN,
        Duration::from_millis(100),
        || match read() {
            Ok(r) if disagreements(&r).is_empty() => Poll::Ready(r),
            Ok(r) => Poll::Pending(format!("{} key-history lines", r.key_history_lines)),
            Err(e) => Poll::Pending(e.message),
        },
    );
    match settled {
        Ok(reading) => Ok(reading),
        Err(_) => read(),
    }
}

/// How long an inventory event may take from KVCR's log line to the
/// engine's.
const SETTLE_WITHIN: Duration = Duration::from_secs(5);

/// The engine's count of KVCR inventory blocks per `(tier, kind)`.
fn inventory_counted(snapshot: &Snapshot) -> std::collections::BTreeMap<(String, String), u64> {
    let mut counted = std::collections::BTreeMap::new();
    for tier in ["LOCAL_G2", "G3"] {
        for kind in ["stored", "removed"] {
            let c = Counter::KvcrInventoryBlocks(tier.into(), kind.into());
            if let Some(n) = snapshot.counter(&c) {
                counted.insert((tier.to_string(), kind.to_string()), n as u64);
            }
        }
    }
    counted
}

/// Reads (`start_write` control messages) a source's KVCR handled.
fn reads_taken() -> Counter {
    Counter::OpCount(Scope::from_label("control_start_write"), OpResult::Handled)
}
