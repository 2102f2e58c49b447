//! After a destructive case (or one that timed out): the stack made whole
//! again, and every replacement proven reachable by its peers before the
//! next case starts.

use serde_json::{json, Value};

use crate::engine::topology::WorkerRole;
use crate::engine::PrefillToDecode;
use crate::prompts::Prompt;
use crate::stack::{Stack, Worker};

use super::{readings, CaseCtx, CaseError, CaseResult};

/// Every dead worker replaced (and a dead frontend restarted), and every
/// replacement proven reachable by its peers. A live worker replaced
/// because it dropped out of discovery or its KVCR source latched off is
/// named in this case's record ([`crate::evidence::LEFT_BROKEN`]): it broke
/// during the case or its restore.
pub(super) fn restore(stack: &Stack, ctx: &CaseCtx, pids_before: &[u32]) -> Result<(), String> {
    let replaced = restore_whole(stack, ctx, pids_before)?;
    for line in replaced {
        ctx.evidence.note(
            crate::evidence::LEFT_BROKEN,
            &format!("{line} (the restore after the case replaced it)"),
        );
    }
    Ok(())
}

/// [`restore`], returning the live workers it replaced (dropped out,
/// latched) instead of naming them in the case's record.
pub(super) fn restore_whole(
    stack: &Stack,
    ctx: &CaseCtx,
    pids_before: &[u32],
) -> Result<Vec<String>, String> {
    let replaced = stack
        .ensure_whole()
        .map_err(|e| format!("the stack could not be restored after the case: {e}"))?;
    for worker in stack.workers() {
        if !pids_before.contains(&worker.process.pid()) {
            relink(ctx, &worker).map_err(|e| e.to_string())?;
        }
    }
    Ok(replaced)
}

/// Proves peers can pull from a replacement: KVCR 0.1.1 peers remember
/// that an endpoint already has their transfer metadata, so the first
/// pull from a new process at the same control endpoint is refused
/// (`missing target agent metadata`) and only the next one succeeds.
/// Each other worker pulls fresh prefixes from `replacement` until one
/// transfer succeeds, within a few attempts, on the path it pulls on:
/// KVCR's REMOTE path, or, for a decode worker of an engine whose P→D
/// path is vLLM's NixlConnector, a NIXL read. A decode worker is no
/// peer's source: a decode replacement is proven the other way round, by
/// pulling from each prefill worker.
fn relink(ctx: &CaseCtx, replacement: &Worker) -> CaseResult {
    const ATTEMPTS: usize = 3;
    for peer in ctx
        .stack
        .workers()
        .iter()
        .filter(|w| w.name() != replacement.name())
    {
        let (source, target): (&Worker, &Worker) = if replacement.role() == WorkerRole::Decode {
            (peer, replacement)
        } else {
            (replacement, peer)
        };
        let nixl = target.role() == WorkerRole::Decode
            && ctx.engine().prefill_to_decode() == PrefillToDecode::NixlConnector;
        let mut tries = Vec::new();
        let mut linked = false;
        for family in ctx.families(ATTEMPTS)? {
            ctx.doing(format!(
                "proving worker {} can pull from worker {} (replacement {})",
                target.name(),
                source.name(),
                replacement.name()
            ))?;
            let (pulled, observed) = if nixl {
                pulled_over_nixl(ctx, source, target, family.variant(0))?
            } else {
                pulled_over_kvcr(ctx, source, target, family.variant(0), family.variant(1))?
            };
            tries.push(observed);
            if pulled {
                linked = true;
                break;
            }
        }
        let path = ctx.record(
            &format!("relink-{}-{}.json", replacement.name(), peer.name()),
            &tries,
        );
        if !linked {
            return Err(CaseError::new(format!(
                "the stack is not whole: worker {} could not pull from worker {} (replacement {}) in {ATTEMPTS} attempts",
                target.name(),
                source.name(),
                replacement.name()
            ))
            .with_evidence(path));
        }
    }
    Ok(())
}

/// `committed` committed on `source`, then `fresh` (its prefix) asked
/// of `target`: whether `target`'s KVCR delivered from the source.
fn pulled_over_kvcr(
    ctx: &CaseCtx,
    source: &Worker,
    target: &Worker,
    committed: &Prompt,
    fresh: &Prompt,
) -> Result<(bool, Value), CaseError> {
    // Before the commit: a decode target pulls from a prefill source
    // during the commit itself (its P→D transfer).
    let (src_before, dst_before) = (ctx.snapshot(source)?, ctx.snapshot(target)?);
    ctx.commit(source, committed)?;
    let answer = ctx.complete_on(target, fresh)?;
    ctx.expect_reference(fresh, &answer.tokens)?;
    let observed = ctx
        .observe()
        .peer_transfer(source, &src_before, target, &dst_before)?;
    let pulled = observed.transfer.remote_deliver_success_ops > 0;
    Ok((pulled, json!(observed)))
}

/// `committed` committed on the prefill `source`: whether the decode
/// `target` read it over NIXL (its P→D pull of the commit), nothing failed.
fn pulled_over_nixl(
    ctx: &CaseCtx,
    source: &Worker,
    target: &Worker,
    committed: &Prompt,
) -> Result<(bool, Value), CaseError> {
    let before = ctx.snapshot(target)?;
    ctx.commit(source, committed)?;
    let delta = ctx.delta_since(target, &before)?;
    let pull = readings::nixl_pull(None, &delta)?;
    let pulled = pull.decode_transfers > 0 && pull.decode_failed == 0;
    Ok((
        pulled,
        json!({"path": PrefillToDecode::NixlConnector, "observed": pull, "decode_delta": delta}),
    ))
}
