//! TC-03 hinted peer transfer: commit P on worker A, then send P's prefix
//! with a new suffix pinned to worker B, which has never seen it. The router
//! hints B with A's control endpoint. Pass: reference tokens on B; A's
//! `source_write` blocks = B's `remote_deliver` blocks = the shared full
//! blocks; B's read bytes = A's `source_write` bytes = blocks × the page
//! sizes of the geometry (dense or hybrid); no partial or failed delivery.
//! When A and B run on different nodes, B's reads went over TCP through its
//! node's veth (UCX's own report), not shared memory.
//! Hint membership: a second family is committed on A, and its extended
//! prompt (the prefix plus one full block no one holds) is sent to B: B
//! pulls exactly the hinted prefix blocks from A, nothing partial or failed,
//! and computes the one block past them (on vLLM, derived from its
//! prefix-cache counters; "not checked" where it reports none).
//! Both workers' `KV Transfer metrics` log lines report the same transfer as
//! their Prometheus counters.

use crate::engine::{Need, Support};
use crate::suite::{Case, CaseCtx, CaseResult};
use crate::telemetry::{Counter, OpResult, Scope};
use crate::verdict::peer_metadata::expect_metadata_acknowledged_once;
use crate::verdict::transfer::{
    expect_exact_pages, expect_hint_membership, expect_peer_transfer, ComputedReading,
};

pub const CASE: Case = Case {
    id: "TC-03",
    name: "hinted_peer_transfer",
    destructive: false,
    needs: &[Need::RouterHints],
    optional: &[
        Need::PagesPerKind,
        Need::ExactHintMembership,
        Need::IndependentIntervalLog,
    ],
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
    let per_kind = ctx.supports(Need::PagesPerKind);
    if let Some(why) = per_kind
        .reason()
        .filter(|_| geometry.pool_kinds().len() > 1)
    {
        ctx.not_checked("exact pages per kind", why);
    }
    if geometry.pool_kinds().len() > 1 && per_kind.is_yes() {
        let read: Vec<(String, u64)> = geometry
            .pool_kinds()
            .into_iter()
            .map(|kind| {
                let n = observed
                    .target
                    .required_count(&Counter::KvcrReadPages(kind.clone()))?;
                Ok((kind, n))
            })
            .collect::<Result<_, crate::telemetry::Unreadable>>()?;
        ctx.check(
            "pages.json",
            &serde_json::json!({"geometry": geometry, "blocks": family.shared_blocks(), "read_pages": read}),
            expect_exact_pages(&read, family.shared_blocks(), &geometry),
        )?;
    }
    expect_hint_membership_on(ctx, &a, &b)?;
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

/// A hinted request with one full block past the hinted prefix, on B, of a
/// family only A has committed.
fn expect_hint_membership_on(
    ctx: &CaseCtx,
    a: &crate::stack::Worker,
    b: &crate::stack::Worker,
) -> CaseResult {
    // Where the engine's KVCR tier queries opportunistically, recorded as
    // "not checked" rather than passed.
    if let Support::No(why) = ctx.supports(Need::ExactHintMembership) {
        ctx.not_checked("hint membership", &why);
        return Ok(());
    }
    let family = ctx.family()?;
    let geometry = ctx.geometry();
    ctx.commit(a, family.variant(0))?;
    let prompt = &family.extended;
    let (a_before, b_before) = (ctx.snapshot(a)?, ctx.snapshot(b)?);
    let answer = ctx.complete_on(b, prompt)?;
    ctx.expect_reference(prompt, &answer.tokens)?;
    let observed = ctx.observe().peer_transfer(a, &a_before, b, &b_before)?;
    let computed = ctx.observe().computed_reading(&observed.target)?;
    let prompt_blocks = geometry.full_blocks(prompt.tokens.len() as u64);
    ctx.measure(
        "membership_computed_blocks",
        match &computed {
            ComputedReading::Read(n) => serde_json::json!(n),
            ComputedReading::NotChecked(why) => serde_json::json!(why),
        },
    );
    ctx.check(
        "membership.json",
        &serde_json::json!({
            "prompt": prompt.key(), "hinted_blocks": family.shared_blocks(), "prompt_blocks": prompt_blocks,
            "computed": computed, "source_A": observed.source, "target_B": observed.target,
            "observed": observed.transfer, "answer": answer,
        }),
        expect_hint_membership(
            &observed.transfer,
            &computed,
            family.shared_blocks(),
            prompt_blocks,
            geometry.bytes_per_block(),
        ),
    )?;
    // B pulled from A before (the transfer above), so A has acknowledged
    // B's NIXL metadata: this pull carried none, and B handled no
    // acknowledgement. An absent series fails: B has handled one by now.
    let acks = observed.target.required_count(&Counter::OpCount(
        Scope::ControlTargetMetadataAck,
        OpResult::Handled,
    ))?;
    ctx.check(
        "metadata.json",
        &serde_json::json!({"target": b.name(), "source": a.name(), "target_metadata_acks_handled": acks}),
        expect_metadata_acknowledged_once(b.name(), a.name(), acks),
    )
}

#[cfg(test)]
mod tests {
    use crate::engine::{Kind, Need, Support, Topology};

    /// The vLLM lanes record the membership check "not checked" (their
    /// KVCR tier queries opportunistically); the CPU engine runs it.
    #[test]
    fn hint_membership_runs_on_the_cpu_engine_and_is_not_checked_on_vllm() {
        let membership = |k: Kind| k.supports(Need::ExactHintMembership, Topology::Agg);
        assert_eq!(membership(Kind::Cpu), Support::Yes);
        let why = membership(Kind::Vllm);
        assert!(
            why.reason().is_some_and(|r| r.starts_with("this engine's KVCR tier queries opportunistically")),
            "{why:?}"
        );
    }
}
