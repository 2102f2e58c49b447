//! TC-18 engine-memory peer read: the KVCR calls a GPU engine makes, on
//! the `phase3_api` stack (its engines keep computed blocks in their own
//! memory instead of depositing them, stage a hinted peer's blocks with
//! `KVCR.fetch`, align each request's sequence and abort a cancelled
//! request's operation). Worker A answers a prompt: its blocks are in A's
//! device cache and host tier, none in its KVCR pool. Then B is asked for
//! the prompt's prefix with a new suffix, hinted to A. Expect: reference
//! tokens on both; A's KVCR asks A's engine to pin the prefix's blocks
//! (the framework-pin source write), the engine pins them in its device
//! cache, KVCR writes them and releases every pin; B's KVCR fetches
//! exactly those blocks into its pool (`remote_fetch`, no direct
//! `remote_deliver`), delivers them from there (`local_deliver`), reads the
//! bytes A wrote, gives the fetch's claims back, and keeps the blocks.
//! Then B's engine misuses KVCR's API on its own KVCR (where
//! `cpu_engine.api_misuse_probe` is on, as in the phase3-api profile): bad
//! descriptors and layouts, blocks KVCR cannot fetch, a held block
//! deposited from pages of another layout, a claim released twice,
//! handles KVCR never gave. Expect: each refused in KVCR's words (or its
//! block failed, or `false`), KVCR's state as it was, and B still
//! answering with reference tokens.

use serde_json::json;

use crate::engine::Need;
use crate::prompts::Family;
use crate::stack::Worker;
use crate::suite::{Case, CaseCtx, CaseError, CaseResult};
use crate::telemetry::{Counter, OpResult, Scope};
use crate::verdict::api_misuse::{expect_misuse_refused, expect_nothing_leaked};
use crate::verdict::engine_memory::{expect_engine_memory_source, expect_fetched_read};

pub const CASE: Case = Case {
    id: "TC-18",
    name: "engine_memory_peer_read",
    destructive: false,
    needs: &[Need::RouterHints, Need::EngineMemoryReports],
    optional: &[],
    run,
};

/// Fails unless the stack's engines keep their blocks in their own memory
/// and fetch a peer's (the phase3-api profile): what `case` (TC-18, TC-19,
/// TC-22) needs of the stack.
pub(super) fn require_engine_memory(ctx: &CaseCtx, case: &str) -> CaseResult {
    let knobs = &ctx.settings().cpu_engine;
    if knobs.framework_regions && knobs.kvcr_fetch {
        return Ok(());
    }
    Err(CaseError::new(format!(
        "{case} needs engines that keep their blocks in their own memory and fetch a peer's \
         (cpu_engine.framework_regions and cpu_engine.kvcr_fetch: the phase3-api profile, \
         `cargo test --test phase3_api`)"
    )))
}

pub fn run(ctx: &CaseCtx) -> CaseResult {
    require_engine_memory(ctx, "TC-18")?;
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let family = ctx.family()?;
    let geometry = ctx.geometry();
    let shared = family.shared_blocks();

    // A holds the prefix in its engine's memory only.
    let answer = ctx.complete_on(&a, family.variant(0))?;
    ctx.expect_reference(family.variant(0), &answer.tokens)?;
    let prefix: Vec<u64> = ctx
        .pressure()
        .block_hashes(&a, family.variant(1))?
        .into_iter()
        .take(shared as usize)
        .collect();
    let in_a_pool = ctx.pressure().held_in(&a, &prefix, "local")?.len() as u64;

    // B is hinted to A for it.
    let (a_before, b_before) = (ctx.snapshot(&a)?, ctx.snapshot(&b)?);
    let answer = ctx.complete_on(&b, family.variant(1))?;
    ctx.expect_reference(family.variant(1), &answer.tokens)?;
    let b_delta = ctx.delta_since(&b, &b_before)?;
    let in_b_pool = ctx.pressure().held_in(&b, &prefix, "local")?.len() as u64;
    let target = ctx.observe().fetched_read(&b_delta, in_b_pool)?;
    // A reports its source write and KVCR releases the pins once the write
    // is done, possibly after B's answer left: wait for both (or time out
    // and judge what A reported by then).
    let wrote = ctx.observe().await_count(
        &a,
        &a_before,
        &Counter::OpCount(Scope::SourceWrite, OpResult::Success),
        1,
        "worker A to report the source_write of B's fetch",
    );
    let released = ctx.observe().await_count(
        &a,
        &a_before,
        &Counter::KvcrFrameworkPinBlocks("device".into(), "released".into()),
        shared,
        &format!("KVCR on worker A to release the {shared} pinned device-cache blocks"),
    );
    let a_delta = match (released, wrote) {
        (Ok(delta), _) | (Err(_), Ok(delta)) => delta,
        (Err(_), Err(_)) => ctx.delta_since(&a, &a_before)?,
    };
    let source = ctx.observe().engine_memory_source(&a_delta, in_a_pool)?;
    ctx.measure("blocks", shared);
    ctx.measure("pinned_device_blocks", source.pinned_device_blocks);
    ctx.measure("fetched_blocks", target.fetched_blocks);
    let evidence = json!({
        "geometry": geometry, "prefix": prefix, "source_A": source, "target_B": target,
        "delta_A": a_delta, "delta_B": b_delta, "answer": answer,
    });
    ctx.check(
        "engine-memory.json",
        &evidence,
        expect_engine_memory_source(&source, shared, geometry.bytes_per_block()),
    )?;
    ctx.check(
        "engine-memory.json",
        &evidence,
        expect_fetched_read(
            &target,
            source.source_write_blocks,
            source.source_write_bytes,
            shared,
        ),
    )?;
    misuse_refused(ctx, &b, &prefix, &family)
}

/// B's engine misuses KVCR's API on its own KVCR, with one of the prefix's
/// blocks its pool holds as the resident block: every call refused, nothing
/// kept, and B still answers with reference tokens.
fn misuse_refused(ctx: &CaseCtx, b: &Worker, prefix: &[u64], family: &Family) -> CaseResult {
    if !ctx.settings().cpu_engine.api_misuse_probe {
        ctx.not_checked(
            "KVCR's refusals of an engine's API misuse",
            "cpu_engine.api_misuse_probe is off (the phase3-api profile turns it on)",
        );
        return Ok(());
    }
    let resident = ctx
        .pressure()
        .held_in(b, prefix, "local")?
        .into_iter()
        .next();
    let report = ctx.pressure().api_misuse(b, resident)?;
    ctx.measure("api_misuse_attempts", report.attempts.len() as u64);
    ctx.check("api-misuse.json", &report, expect_misuse_refused(&report))?;
    ctx.check("api-misuse.json", &report, expect_nothing_leaked(&report))?;
    let prompt = family.variant(2);
    let answer = ctx.complete_on(b, prompt)?;
    ctx.expect_reference(prompt, &answer.tokens)
}
