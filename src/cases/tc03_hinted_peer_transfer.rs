//! TC-03 hinted peer transfer: commit P on worker A, then send P's prefix
//! with a new suffix pinned to worker B, which has never seen it. The router
//! hints B with A's control endpoint. Pass: reference tokens on B; A's
//! `source_write` blocks = B's `remote_deliver` blocks = the shared full
//! blocks; B's read bytes = A's `source_write` bytes = blocks × the page
//! sizes of the geometry (dense or hybrid); no partial or failed delivery.
//! When A and B run on different nodes, B's reads went over TCP through its
//! node's veth (UCX's own report), not shared memory.
//! Both workers' `KV Transfer metrics` log lines report the same transfer as
//! their Prometheus counters.

use crate::suite::{Case, CaseCtx, CaseResult};
use crate::telemetry::{Counter, OpResult, Scope};
use crate::verdict::transfer::{expect_exact_pages, expect_peer_transfer};

pub const CASE: Case = Case {
    id: "TC-03",
    name: "hinted_peer_transfer",
    destructive: false,
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let family = ctx.family()?;
    let geometry = ctx.geometry();

    ctx.commit(&a, family.variant(0))?;

    let (a_before, b_before) = (ctx.snapshot(&a)?, ctx.snapshot(&b)?);
    let answer = ctx.complete_on(&b, family.variant(1))?;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let observed = ctx.observe().peer_transfer(&a, &a_before, &b, &b_before)?;
    let transfer = &observed.transfer;
    ctx.measure("blocks", transfer.remote_deliver_blocks);
    ctx.measure("bytes", transfer.source_write_bytes);
    ctx.measure("pages_per_block", geometry.pages_per_block());
    // A peer on the other node: the read went over the network.
    ctx.observe().expect_crossed_network(&a, &b)?;
    ctx.check(
        "telemetry.json",
        &serde_json::json!({
            "geometry": geometry, "shared_blocks": family.shared_blocks(),
            "source_A": observed.source, "target_B": observed.target, "observed": transfer, "answer": answer,
        }),
        expect_peer_transfer(
            transfer,
            family.shared_blocks(),
            geometry.bytes_per_block(),
        ),
    )?;
    // Hybrid: exact pages per kind (attention pages, SSM parts), counted
    // by the target as it read them, not only the same total bytes.
    if geometry.pool_kinds().len() > 1 && !ctx.stack.engine.counts_pages_per_kind() {
        ctx.not_checked(
            "exact pages per kind",
            &format!(
                "the {} engine counts no pages per kind; only the total bytes were checked",
                ctx.stack.engine.name()
            ),
        );
    }
    if geometry.pool_kinds().len() > 1 && ctx.stack.engine.counts_pages_per_kind() {
        let read: Vec<(String, u64)> = geometry
            .pool_kinds()
            .into_iter()
            .map(|kind| {
                let n = observed
                    .target
                    .required_count(&Counter::KvcrReadPages(kind.clone()))?;
                Ok((kind, n))
            })
            .collect::<Result<_, crate::telemetry::NotReported>>()?;
        ctx.check(
            "pages.json",
            &serde_json::json!({"geometry": geometry, "blocks": family.shared_blocks(), "read_pages": read}),
            expect_exact_pages(&read, family.shared_blocks(), &geometry),
        )?;
    }
    ctx.observe().expect_interval_log_agrees(
        &a,
        &[
            Counter::TransferBlocks(Scope::SourceWrite),
            Counter::TransferBytes(Scope::SourceWrite),
        ],
    )?;
    ctx.observe().expect_interval_log_agrees(
        &b,
        &[
            Counter::TransferBlocks(Scope::RemoteDeliver),
            Counter::OpCount(Scope::RemoteDeliver, OpResult::Success),
        ],
    )
}
