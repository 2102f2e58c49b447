//! TC-02 local DRAM flow: commit P on worker A, evict A's device prefix
//! cache with filler prompts and prove the eviction, then send P's prefix
//! with a new suffix to A: reference tokens, a host-memory hit for the
//! shared full blocks served by KVCR's local pool (the tier that served is
//! recorded; the engine's own host tier does not count), block-aligned
//! `cached_tokens`, no remote transfer.

use crate::suite::{Case, CaseCtx, CaseResult};
use crate::verdict::local::expect_host_tier_hit;

pub const CASE: Case = Case {
    id: "TC-02",
    name: "local_dram_flow",
    destructive: false,
    needs: &[],
    optional: &[],
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    let family = ctx.family()?;
    let geometry = ctx.geometry();

    ctx.commit(&a, family.variant(0))?;
    let eviction = ctx.evict_device_cache(&a)?;
    ctx.measure("eviction", &eviction);

    let before = ctx.snapshot(&a)?;
    let answer = ctx.complete_on(&a, family.variant(1))?;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let delta = ctx.delta_since(&a, &before)?;

    let hit = ctx.observe().host_tier_hit(&delta, answer.cached_tokens)?;
    ctx.measure("shared_blocks", family.shared_blocks());
    ctx.measure("local_deliver_blocks", hit.local_deliver_blocks);
    ctx.measure("served_by", hit.served_by(geometry.bytes_per_block()));
    ctx.check(
        "telemetry.json",
        &serde_json::json!({"worker": "A", "delta": delta, "observed": hit, "answer": answer}),
        expect_host_tier_hit(
            &hit,
            family.shared_blocks(),
            u64::from(geometry.block_size_tokens),
            geometry.bytes_per_block(),
        ),
    )
}
