//! TC-13 partition and heal (two nodes, root): worker B (node 1) holds a
//! prefix, worker A (node 0) is asked for it, hinted to B, and the link
//! between the nodes is cut (the run's own veth, both ends verified down).
//! Before the cut a hinted pull B → A crosses the link. During it A's pull
//! must give up within KVCR's abandon timeout (its write turns uncertain at
//! the operation timeout, and KVCR keeps the destination until the abandon
//! timeout) and A recompute, answering the reference tokens. The cut is held past UCX's keepalive (the lane
//! sets `cpu_engine.ucx_keepalive_s`), so UCX finds the peer unreachable;
//! then the link comes up again (verified). After the heal a hinted pull
//! B → A must move every shared block again within [`RESUME_WINDOW`], each
//! attempt a new prefix committed on B. A write A asked B for during the
//! cut waits in KVCR's control channel and reaches B once the link is back:
//! it must fail there (A gave its destination up), not land.
//!
//! The requests go to A, on the frontend's node: during the cut B cannot
//! be reached from it, so A is the target and B the source.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::engine::Need;
use crate::prompts::Family;
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::telemetry::Snapshot;
use crate::verdict::partition::{
    expect_fallback, expect_healed_transfer, expect_resumed, HealAttempt,
};
use crate::verdict::transfer::expect_peer_transfer;

pub const CASE: Case = Case {
    id: "TC-13",
    name: "partition_and_heal",
    destructive: true,
    needs: &[Need::NodeLink, Need::RouterHints],
    optional: &[],
    run,
};

/// How long after the heal a hinted pull must cross the link again.
const RESUME_WINDOW: Duration = Duration::from_secs(30);
/// Between two attempts after the heal.
const RESUME_POLL: Duration = Duration::from_millis(500);
/// How many UCX keepalive periods the cut lasts at least.
const KEEPALIVE_PERIODS: u32 = 4;

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let geometry = ctx.geometry();
    let op_timeout = super::unreachable_source::operation_timeout(ctx);
    let keepalive = ctx
        .settings()
        .cpu_engine
        .ucx_keepalive_s
        .map(Duration::from_secs);
    let hold =
        op_timeout.max(keepalive.unwrap_or_default() * KEEPALIVE_PERIODS) + Duration::from_secs(1);
    ctx.measure("ucx_keepalive_s", keepalive.map(|k| k.as_secs()));
    ctx.measure("operation_timeout_ms", op_timeout.as_millis() as u64);
    ctx.measure("cut_held_ms", hold.as_millis() as u64);

    // Before the cut: a hinted pull B → A crosses the link.
    let family = ctx.family()?;
    let (before, pulled) = pull_from(ctx, &b, &a, &family)?;
    ctx.check(
        "before-cut.json",
        &json!({"transfer": pulled.transfer, "answer": before}),
        expect_peer_transfer(
            &pulled.transfer,
            family.shared_blocks(),
            geometry.bytes_per_block(),
        ),
    )?;

    // The cut: A asks for a prefix only B holds.
    let family = ctx.family()?;
    ctx.commit(&b, family.variant(0))?;
    let faults = ctx.faults().for_thread();
    let cut = faults.cut_node_link()?;
    let cut_at = Instant::now();
    ctx.record("link-cut.json", &json!({"state": cut.state}));
    let (answer, fallback, delta) =
        super::unreachable_source::ask_without_source(ctx, &a, family.variant(1))?;
    ctx.check(
        "during-cut.json",
        &json!({"fallback": fallback, "delta": delta, "answer": answer}),
        expect_fallback(&fallback),
    )?;
    // Held past UCX's keepalive, so UCX finds the peer gone (a fault's
    // length, not a wait for state).
    if let Some(left) = hold.checked_sub(cut_at.elapsed()) {
        ctx.doing(format!("holding the cut {} ms more", left.as_millis()))?;
        std::thread::sleep(left);
    }
    ctx.measure("cut_ms", cut_at.elapsed().as_millis() as u64);
    drop(cut);
    let healed_at = Instant::now();
    let state = faults
        .node_link_state()
        .ok_or_else(|| CaseError::new("the stack lost its namespace node"))?;
    if !state.is_up() {
        return Err(CaseError::fault_not_applied(format!(
            "node 1's link is not up again after the cut: {state}"
        )));
    }

    // After the heal: new prefixes on B, each asked of A, until one crosses.
    let mut attempts: Vec<HealAttempt> = Vec::new();
    while healed_at.elapsed() < RESUME_WINDOW {
        let family = ctx.family()?;
        let sent_ms = healed_at.elapsed().as_millis() as u64;
        let (_, pulled) = pull_from(ctx, &b, &a, &family)?;
        let attempt = HealAttempt {
            sent_ms,
            prompt: family.variant(1).key(),
            remote_deliver_blocks: pulled.transfer.remote_deliver_blocks,
            shared_blocks: family.shared_blocks(),
            remote_deliver_unsuccessful: pulled
                .transfer
                .remote_deliver_unsuccessful
                .0
                .values()
                .sum(),
        };
        let resumed = attempt.resumed();
        attempts.push(attempt);
        if resumed {
            // Writes asked for in the cut reach the source only now; each
            // must fail there, not land.
            ctx.measure(
                "stale_writes_refused_after_heal",
                pulled
                    .transfer
                    .source_write_unsuccessful
                    .0
                    .values()
                    .sum::<u64>(),
            );
            ctx.check(
                "after-heal-transfer.json",
                &json!({"transfer": pulled.transfer}),
                expect_healed_transfer(
                    &pulled.transfer,
                    family.shared_blocks(),
                    geometry.bytes_per_block(),
                ),
            )?;
            break;
        }
        std::thread::sleep(RESUME_POLL);
    }
    ctx.measure(
        "resumed_after_ms",
        attempts.iter().find(|a| a.resumed()).map(|a| a.sent_ms),
    );
    ctx.check(
        "after-heal.json",
        &json!({"attempts": attempts, "window_ms": RESUME_WINDOW.as_millis() as u64}),
        expect_resumed(&attempts, RESUME_WINDOW.as_millis() as u64),
    )
}

/// Commits `family`'s first prompt on `source`, then asks `target` for its
/// second (hinted to `source`): the answer, checked against the reference,
/// and both sides' transfer counters.
fn pull_from(
    ctx: &CaseCtx,
    source: &Worker,
    target: &Worker,
    family: &Family,
) -> Result<(crate::suite::Answer, crate::suite::PeerTransferDeltas), CaseError> {
    ctx.commit(source, family.variant(0))?;
    let (source_before, target_before): (Snapshot, Snapshot) =
        (ctx.snapshot(source)?, ctx.snapshot(target)?);
    let answer = ctx.complete_on(target, family.variant(1))?;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let pulled = ctx
        .observe()
        .peer_transfer(source, &source_before, target, &target_before)?;
    Ok((answer, pulled))
}
