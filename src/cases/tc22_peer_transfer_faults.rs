//! TC-22 peer transfers that go wrong, on the `phase3_api` stack (engines
//! keep computed blocks in their own memory, so a peer's read of them waits
//! for the source engine's framework pins; a third worker, C).
//!
//! Two reads meet a pending pin: worker A answers a prompt (the prefix's
//! blocks in A's engine memory only); A's engine is told to hold KVCR's pin
//! requests back (the `withhold_pins` switch), and B and C are asked at
//! once for the prefix with a new suffix, both hinted to A. Once A's KVCR
//! has taken both reads, the switch goes off and A's engine answers, well
//! within the operation timeout. Expect: reference tokens on B and C; A's
//! engine was asked to pin the prefix once, KVCR waited on that one request
//! and wrote the prefix to each reader, then released every pin; B and C
//! each fetched the prefix whole into their pools and delivered it from
//! there.
//!
//! A foreign peer: the harness connects to A's KVCR control channel as a
//! peer would and sends what no KVCR 0.1.1 peer sends (bytes that are not
//! msgpack, an unknown message type, KVCR's own types with fields missing
//! or of the wrong kind), as a peer of another KVCR version or a stray
//! client would. Expect: A's KVCR reads every message of its own types
//! and drops it, starting no write and pinning nothing, and refuses each
//! malformed start_write that names an operation in its own words
//! (`KVCR malformed start_write op=<handle>`); then B's read of a
//! new prefix from A is pinned, written and released, and B fetches it
//! whole (as TC-18), with reference tokens.
//!
//! A spoofed peer: the foreign peer sends A a `target_metadata` that names
//! B's NIXL agent (from B's `/state`) with metadata that is not NIXL's.
//! Expect: A's KVCR reads it; B's next read from A is served whole or
//! fails whole (B computes the prefix; reference tokens either way), and
//! the read after that is served whole.
//!
//! Refused hints: B's engine rewrites the router's hint naming A into one
//! KVCR must refuse (unsupported fields, malformed ones; a table of rows).
//! Expect: reference tokens, B computes the prefix, A is asked for
//! nothing, KVCR's words for each are logged. The table's last row is a
//! hint KVCR must accept (one more hash that uses all 64 bits): B reads
//! the prefix from A. Then, where KVCR's own diagnostics are on (the
//! phase3-api profile): each worker's key history is gap-free and agrees
//! with its engine's inventory, KVCR logged a query decision for each
//! rewritten-hint request, with a hint present only for the accepted one,
//! and a request queried six times on B logged its first four queries
//! only, numbered 1 to 4 (`tc22_refused_hints`).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::engine::Need;
use crate::stack::Worker;
use crate::suite::foreign_peer;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult, EngineFault, Sending};
use crate::telemetry::names::kvcr_log::MALFORMED_START_WRITE_OP;
use crate::telemetry::{scrape, Counter, Delta, OpResult, Scope, Snapshot, Unreadable};
use crate::verdict::engine_memory::{expect_engine_memory_source, expect_fetched_read};
use crate::verdict::foreign_control::{
    expect_foreign_messages_dropped, expect_spoofed_route_contained, ForeignControl,
    ReadAfterSpoof, SpoofedRoute,
};
use crate::verdict::log_scan::BadLine;
use crate::verdict::shared_pin::{expect_one_pin_for_two_reads, SharedPin};
use crate::wait::{self, Poll};

pub const CASE: Case = Case {
    id: "TC-22",
    name: "peer_transfer_faults",
    destructive: false,
    needs: &[
        Need::RouterHints,
        Need::EngineMemoryReports,
        Need::FaultSwitches,
        Need::ThirdAggregatedWorker,
    ],
    optional: &[],
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    super::tc18_engine_memory_peer_read::require_engine_memory(ctx, "TC-22")?;
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let c = ctx.worker("C").map_err(|e| {
        CaseError::new(format!(
            "TC-22 needs a third aggregated worker, C (cpu_engine.agg_workers = 3, as the \
             phase3-api profile sets): {}",
            e.message
        ))
    })?;
    let marks = ctx.pressure().log_marks();
    two_reads_meet_a_pending_pin(ctx, &a, &b, &c)?;
    foreign_messages_then_a_read(ctx, &a, &b)?;
    spoofed_metadata_then_two_reads(ctx, &a, &b)?;
    let decided = super::tc22_refused_hints::rewritten_hints(ctx, &a, &b)?;
    super::tc22_refused_hints::kvcr_diagnostics_agree(ctx, &[&a, &b, &c], &b, &decided)?;
    // The foreign peer's start_write, whose metadata A could not load, is
    // refused with KVCR's traceback (`KVCR start_write setup failed`); any
    // other bad line fails.
    ctx.pressure()
        .expect_no_bad_lines_since(&marks, &[BadLine::StartWriteRefused])
}

/// B and C read the prefix from A while A's engine holds the pin back.
fn two_reads_meet_a_pending_pin(ctx: &CaseCtx, a: &Worker, b: &Worker, c: &Worker) -> CaseResult {
    let family = ctx.family()?;
    let shared = family.shared_blocks();
    let bytes_per_block = ctx.geometry().bytes_per_block();
    let prefix = super::tc19_interrupted_source_write::held_by_a_only(ctx, a, &family)?;
    let in_a_pool = ctx.pressure().held_in(a, &prefix, "local")?.len() as u64;
    let withheld = ctx.faults().engine_added("A", EngineFault::WithholdPins)?;
    let (a_before, b_before, c_before) = (ctx.snapshot(a)?, ctx.snapshot(b)?, ctx.snapshot(c)?);
    let sent = Instant::now();
    let a_since = &a_before;
    let (answers, met) = std::thread::scope(|scope| {
        // Both reads taken by A's KVCR while its engine holds the request;
        // then the engine answers the request it kept.
        let releaser = scope.spawn(move || {
            let met = reads_taken(a, a_since, 2);
            drop(withheld);
            met
        });
        let prompt = family.variant(1);
        let answers = ctx
            .shared_prefix()
            .fan_out(prompt, &[b, c], Sending::AtOnce);
        let met = releaser
            .join()
            .unwrap_or_else(|_| Err("the thread releasing A's pins panicked".into()));
        (answers, met)
    });
    let answer_ms = sent.elapsed().as_millis() as u64;
    let met = met.map_err(|e| {
        CaseError::fault_not_applied(format!(
            "B's and C's reads did not both reach A while its pin was pending: {e}"
        ))
    })?;
    let answers = answers?;
    for answer in &answers {
        ctx.expect_reference(family.variant(1), &answer.tokens)?;
    }
    ctx.measure("shared_pin_answer_ms", answer_ms);

    let a_delta = source_after_writes(ctx, a, &a_before, 2, shared)?;
    let source = SharedPin {
        reads_taken: met.required_count(&start_writes_handled())?,
        asked_blocks: a_delta.required_count(&Counter::KvcrFrameworkPinBlocks(
            "engine".into(),
            "withheld".into(),
        ))?,
        source: ctx.observe().engine_memory_source(&a_delta, in_a_pool)?,
    };
    let target_b = fetched(ctx, b, &b_before, &prefix)?;
    let target_c = fetched(ctx, c, &c_before, &prefix)?;
    let evidence = json!({
        "prefix": prefix, "source_A": source, "target_B": target_b, "target_C": target_c,
        "delta_A": a_delta, "answers": answers,
    });
    ctx.check(
        "shared-pin.json",
        &evidence,
        expect_one_pin_for_two_reads(&source, shared, bytes_per_block),
    )?;
    let written = shared * bytes_per_block;
    ctx.check(
        "shared-pin.json",
        &evidence,
        expect_fetched_read(&target_b, shared, written, shared),
    )?;
    ctx.check(
        "shared-pin.json",
        &evidence,
        expect_fetched_read(&target_c, shared, written, shared),
    )
}

/// A foreign peer writes to A's control channel; then B reads a new
/// prefix from A.
fn foreign_messages_then_a_read(ctx: &CaseCtx, a: &Worker, b: &Worker) -> CaseResult {
    let endpoint = a
        .control_endpoint()
        .ok_or_else(|| CaseError::new("worker A reported no KVCR control endpoint"))?;
    let messages = foreign_peer::foreign_messages();
    let mut types: Vec<&str> = messages.iter().filter_map(|m| m.typed).collect();
    let typed_sent = types.len() as u64;
    types.sort_unstable();
    types.dedup();
    let before = ctx.snapshot(a)?;
    let log_from = ctx.pressure().log_mark(a);
    foreign_peer::send(endpoint, &messages).map_err(|e| {
        CaseError::fault_not_applied(format!(
            "the foreign peer could not talk to A's KVCR control channel: {e}"
        ))
    })?;
    // KVCR reads them on its progress thread; a KVCR that stopped reading
    // is judged on what it handled by the deadline.
    let delta = match await_handled(a, &before, &types, typed_sent, FOREIGN_WITHIN) {
        Ok(delta) => delta,
        Err(_) => ctx.delta_since(a, &before)?,
    };
    // KVCR logs its refusal as it handles the message, before the count.
    let refusals = ctx
        .pressure()
        .log_lines_since(a, log_from, MALFORMED_START_WRITE_OP)?;
    let writes = delta.ops_by_result(&Scope::SourceWrite)?;
    let pinned = |tier: &str| {
        delta.required_count(&Counter::KvcrFrameworkPinBlocks(
            tier.into(),
            "pinned".into(),
        ))
    };
    let foreign = ForeignControl {
        typed_sent,
        handled: handled(&delta, &types)?,
        source_write_ops: writes.success + writes.unsuccessful.values().sum::<u64>(),
        pinned_blocks: pinned("device")? + pinned("host")?,
        not_refused_as_malformed: foreign_peer::not_refused_as_malformed(&messages, &refusals),
    };
    ctx.check(
        "foreign-peer.json",
        &json!({
            "endpoint": endpoint, "messages": messages, "refusals_A": refusals,
            "source_A": foreign, "delta_A": delta,
        }),
        expect_foreign_messages_dropped(&foreign),
    )?;

    // A still serves its real peers: B's read of a new prefix.
    let family = ctx.family()?;
    let shared = family.shared_blocks();
    let bytes_per_block = ctx.geometry().bytes_per_block();
    let prefix = super::tc19_interrupted_source_write::held_by_a_only(ctx, a, &family)?;
    let in_a_pool = ctx.pressure().held_in(a, &prefix, "local")?.len() as u64;
    let (a_before, b_before) = (ctx.snapshot(a)?, ctx.snapshot(b)?);
    let answer = ctx.complete_on(b, family.variant(1))?;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let target = fetched(ctx, b, &b_before, &prefix)?;
    let a_delta = source_after_writes(ctx, a, &a_before, 1, shared)?;
    let source = ctx.observe().engine_memory_source(&a_delta, in_a_pool)?;
    let evidence = json!({
        "prefix": prefix, "source_A": source, "target_B": target, "delta_A": a_delta,
        "answer": answer,
    });
    ctx.check(
        "after-foreign-peer.json",
        &evidence,
        expect_engine_memory_source(&source, shared, bytes_per_block),
    )?;
    ctx.check(
        "after-foreign-peer.json",
        &evidence,
        expect_fetched_read(&target, shared, shared * bytes_per_block, shared),
    )
}

/// A foreign peer spoofs B's metadata to A; then B reads from A twice.
fn spoofed_metadata_then_two_reads(ctx: &CaseCtx, a: &Worker, b: &Worker) -> CaseResult {
    let endpoint = a
        .control_endpoint()
        .ok_or_else(|| CaseError::new("worker A reported no KVCR control endpoint"))?;
    let state = ctx.pressure().engine_state(b)?;
    let agent = state["kvcr_agent"].as_str().ok_or_else(|| {
        CaseError::new(format!(
            "worker B's /state names no KVCR agent (kvcr_agent): {state}"
        ))
    })?;
    let spoof = foreign_peer::spoofed_metadata(agent);
    let before = ctx.snapshot(a)?;
    foreign_peer::send(endpoint, std::slice::from_ref(&spoof)).map_err(|e| {
        CaseError::fault_not_applied(format!(
            "the foreign peer could not talk to A's KVCR control channel: {e}"
        ))
    })?;
    let delta = match await_handled(a, &before, &["target_metadata"], 1, FOREIGN_WITHIN) {
        Ok(delta) => delta,
        Err(_) => ctx.delta_since(a, &before)?,
    };
    let metadata_handled = handled(&delta, &["target_metadata"])?;
    let peer_setup_failed =
        delta.required_count(&Counter::OpCount(Scope::PeerSetup, OpResult::Failed))?;
    let (first, shared) = read_from_a(ctx, a, b)?;
    let (second, _) = read_from_a(ctx, a, b)?;
    let spoofed = SpoofedRoute {
        metadata_handled,
        peer_setup_failed,
        first,
        second,
    };
    ctx.measure(
        "spoof_cost_a_read",
        spoofed.first.read.remote_fetch_success_ops == 0,
    );
    ctx.check(
        "spoofed-peer.json",
        &json!({"agent": agent, "message": spoof, "spoofed": spoofed, "delta_A": delta}),
        expect_spoofed_route_contained(&spoofed, shared),
    )
}

/// B's read from A of a new prefix A holds in engine memory only, with
/// reference tokens; and the prefix's blocks.
fn read_from_a(ctx: &CaseCtx, a: &Worker, b: &Worker) -> Result<(ReadAfterSpoof, u64), CaseError> {
    let family = ctx.family()?;
    let prefix = super::tc19_interrupted_source_write::held_by_a_only(ctx, a, &family)?;
    let before = ctx.snapshot(b)?;
    let answer = ctx.complete_on(b, family.variant(1))?;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let delta = ctx.delta_since(b, &before)?;
    let read = ReadAfterSpoof {
        read: fetched(ctx, b, &before, &prefix)?,
        computed_blocks: ctx.observe().computed_blocks(&delta)?,
    };
    Ok((read, family.shared_blocks()))
}

/// How long A's KVCR may take to read the foreign messages.
const FOREIGN_WITHIN: Duration = Duration::from_secs(5);

/// `source`'s counts since `before` once it reported `writes` source
/// writes and released the `blocks` pinned for them (both may come after
/// the answers left); what it reported by then if they never come.
fn source_after_writes(
    ctx: &CaseCtx,
    source: &Worker,
    before: &Snapshot,
    writes: u64,
    blocks: u64,
) -> Result<Delta, CaseError> {
    let _ = ctx.observe().await_count(
        source,
        before,
        &Counter::OpCount(Scope::SourceWrite, OpResult::Success),
        writes,
        &format!("worker {} to report {writes} source writes", source.name()),
    );
    match ctx.observe().await_count(
        source,
        before,
        &Counter::KvcrFrameworkPinBlocks("device".into(), "released".into()),
        blocks,
        &format!(
            "KVCR on worker {} to release the {blocks} pinned device-cache blocks",
            source.name()
        ),
    ) {
        Ok(delta) => Ok(delta),
        Err(_) => ctx.delta_since(source, before),
    }
}

/// The read `target` staged since `before`, with what its pool holds of
/// `prefix` after.
fn fetched(
    ctx: &CaseCtx,
    target: &Worker,
    before: &Snapshot,
    prefix: &[u64],
) -> Result<crate::verdict::engine_memory::FetchedRead, CaseError> {
    let delta = ctx.delta_since(target, before)?;
    let in_pool = ctx.pressure().held_in(target, prefix, "local")?.len() as u64;
    Ok(ctx.observe().fetched_read(&delta, in_pool)?)
}

/// How long B's and C's reads may take to reach A: within the operation
/// timeout (5 s), so both still succeed once the engine answers.
const READS_WITHIN: Duration = Duration::from_secs(4);

/// Waits until `source`'s KVCR has taken `reads` reads since `before`: the
/// counters then.
fn reads_taken(source: &Worker, before: &Snapshot, reads: u64) -> Result<Delta, String> {
    await_handled(source, before, &["start_write"], reads, READS_WITHIN)
}

/// Waits until `worker`'s KVCR has handled `at_least` control messages of
/// `types` since `before`, polling its metrics (from any thread): the
/// counters then.
fn await_handled(
    worker: &Worker,
    before: &Snapshot,
    types: &[&str],
    at_least: u64,
    within: Duration,
) -> Result<Delta, String> {
    wait::until(
        format!(
            "worker {}'s KVCR to handle {at_least} control messages ({})",
            worker.name(),
            types.join(", ")
        ),
        within,
        Duration::from_millis(20),
        || match crate::rt::block_on(scrape(&worker.metrics_url())) {
            Ok(now) => match now.since(before) {
                Ok(delta) => match handled(&delta, types) {
                    Ok(n) if n >= at_least => Poll::Ready(delta),
                    Ok(n) => Poll::Pending(format!("{n} handled")),
                    Err(absent) => Poll::Pending(absent.to_string()),
                },
                Err(e) => Poll::Abort(e.to_string()),
            },
            Err(e) => Poll::Pending(e.to_string()),
        },
    )
    .map_err(|e| e.to_string())
}

/// Control messages of `types` a KVCR handled in `delta`.
fn handled(delta: &Delta, types: &[&str]) -> Result<u64, Unreadable> {
    types
        .iter()
        .map(|t| delta.required_count(&handled_counter(t)))
        .sum()
}

/// A KVCR's count of control messages of `kind` it handled.
fn handled_counter(kind: &str) -> Counter {
    Counter::OpCount(
        Scope::from_label(&format!("control_{kind}")),
        OpResult::Handled,
    )
}

/// Reads (`start_write` control messages) a source's KVCR handled.
fn start_writes_handled() -> Counter {
    Counter::OpCount(Scope::from_label("control_start_write"), OpResult::Handled)
}
