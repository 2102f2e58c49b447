//! After a destructive case (or one that timed out): the stack made whole
//! again, and every replacement proven reachable by its peers before the
//! next case starts.

use crate::stack::{Stack, Worker};

use super::{CaseCtx, CaseError, CaseResult};

/// Every dead worker replaced (and a dead frontend restarted), and every
/// replacement proven reachable by its peers.
pub(super) fn restore(stack: &Stack, ctx: &CaseCtx, pids_before: &[u32]) -> Result<(), String> {
    stack
        .ensure_whole()
        .map_err(|e| format!("the stack could not be restored after the case: {e}"))?;
    for worker in stack.workers() {
        if !pids_before.contains(&worker.process.pid()) {
            relink(ctx, &worker).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Proves peers can pull from a replacement: KVCR 0.1.1 peers remember
/// that an endpoint already has their transfer metadata, so the first
/// pull from a new process at the same control endpoint is refused
/// (`missing target agent metadata`) and only the next one succeeds.
/// Each other worker pulls fresh prefixes from `replacement` until one
/// transfer succeeds, within a few attempts.
fn relink(ctx: &CaseCtx, replacement: &Worker) -> CaseResult {
    const ATTEMPTS: usize = 3;
    for peer in ctx
        .stack
        .workers()
        .iter()
        .filter(|w| w.name() != replacement.name())
    {
        let mut tries = Vec::new();
        for family in ctx.families(ATTEMPTS)? {
            ctx.doing(format!(
                "proving worker {} can pull from the replacement {}",
                peer.name(),
                replacement.name()
            ))?;
            // Before the commit: a decode peer pulls from a prefill
            // replacement during the commit itself (its P→D transfer).
            let (src_before, dst_before) = (ctx.snapshot(replacement)?, ctx.snapshot(peer)?);
            ctx.commit(replacement, family.variant(0))?;
            let answer = ctx.complete_on(peer, family.variant(1))?;
            ctx.expect_reference(family.variant(1), &answer.tokens)?;
            let observed =
                ctx.observe()
                    .peer_transfer(replacement, &src_before, peer, &dst_before)?;
            let linked = observed.transfer.remote_deliver_success_ops > 0;
            tries.push(observed);
            if linked {
                break;
            }
        }
        let path = ctx.record(
            &format!("relink-{}-{}.json", replacement.name(), peer.name()),
            &tries,
        );
        if !tries
            .last()
            .is_some_and(|t| t.transfer.remote_deliver_success_ops > 0)
        {
            return Err(CaseError::new(format!(
                "the stack is not whole: worker {} could not pull from the replacement {} in {ATTEMPTS} attempts",
                peer.name(),
                replacement.name()
            ))
            .with_evidence(path));
        }
    }
    Ok(())
}
