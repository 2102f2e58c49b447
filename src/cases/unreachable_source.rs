//! What the cases whose source cannot answer (a cut link, TC-13; a stopped
//! process, TC-15) do the same way: ask the target for a prefix only that
//! source holds, time the answer, and read how the target fell back; and,
//! where the source is back but latched (TC-11, TC-15), read how a pull it
//! refused fell back.

use std::time::{Duration, Instant};

use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::suite::{Answer, CaseCtx, CaseError};
use crate::telemetry::{Counter, Delta, OpResult, Scope};
use crate::verdict::partition::CutFallback;
use crate::verdict::stall::Fallback;

/// KVCR 0.1.1's `abandon_timeout_ms`, which the CPU engine leaves at its
/// default: a pull whose write turned uncertain at the operation timeout
/// fails by then.
pub const ABANDON_TIMEOUT: Duration = Duration::from_millis(5000);
/// What the answer may take beyond the abandon timeout: its own prefill and
/// decode.
pub const FALLBACK_MARGIN: Duration = Duration::from_secs(1);

/// KVCR's operation timeout in the workers (5 s, KVCR's engine-side default
/// the CPU engine passes, unless the profile sets it).
pub fn operation_timeout(ctx: &CaseCtx) -> Duration {
    Duration::from_millis(ctx.engine().kvcr_operation_timeout_ms().unwrap_or(5000))
}

/// `target` answers `prompt`, hinted to a source that cannot answer: the
/// answer (checked against the reference) and how the target fell back.
pub fn ask_without_source(
    ctx: &CaseCtx,
    target: &Worker,
    prompt: &Prompt,
) -> Result<(Answer, CutFallback, Delta), CaseError> {
    let before = ctx.snapshot(target)?;
    let sent = Instant::now();
    let answer = ctx.complete_on(target, prompt)?;
    let waited = sent.elapsed();
    ctx.expect_reference(prompt, &answer.tokens)?;
    let delta = ctx.delta_since(target, &before)?;
    let unsuccessful = |r| delta.required_count(&Counter::OpCount(Scope::RemoteDeliver, r));
    let fallback = CutFallback {
        waited_ms: waited.as_millis() as u64,
        operation_timeout_ms: operation_timeout(ctx).as_millis() as u64,
        abandon_timeout_ms: ABANDON_TIMEOUT.as_millis() as u64,
        margin_ms: FALLBACK_MARGIN.as_millis() as u64,
        remote_deliver_unsuccessful: unsuccessful(OpResult::Failed)?
            + unsuccessful(OpResult::Partial)?,
        remote_deliver_blocks: delta
            .required_count(&Counter::TransferBlocks(Scope::RemoteDeliver))?,
        computed_blocks: ctx.observe().computed_blocks(&delta)?,
        prompt_blocks: ctx.geometry().full_blocks(prompt.tokens.len() as u64),
    };
    ctx.measure("fallback_ms", fallback.waited_ms);
    Ok((answer, fallback, delta))
}

/// How a peer fell back in `delta` (its window) from a latched source that
/// refused the pull of a `prefix_blocks`-block prefix.
pub fn refused_fallback(
    ctx: &CaseCtx,
    delta: &Delta,
    prefix_blocks: u64,
) -> Result<Fallback, CaseError> {
    Ok(Fallback {
        remote_deliver_failed: delta
            .required_count(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Failed))?,
        remote_deliver_blocks: delta
            .required_count(&Counter::TransferBlocks(Scope::RemoteDeliver))?,
        computed_blocks: ctx.observe().computed_blocks(delta)?,
        prefix_blocks,
    })
}
