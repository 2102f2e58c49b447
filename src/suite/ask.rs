//! How a case's requests go out and come back: sent through the case's
//! client (cancelled with the case), recorded with their id, the serving
//! worker checked against the pin, the tokens compared with the reference.
//! [`CaseCtx`]'s request helpers and the typed helpers share these.

use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use crate::client::{CompletionOutcome, WorkerIdentity};
use crate::prompts::Prompt;
use crate::stack::{Stack, Worker};
use crate::verdict::{tokens::expect_reference_tokens, Violation};

use super::{CaseCtx, CaseError, CaseResult};

/// One completed request, as a case sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub prompt: String,
    pub tokens: Vec<u32>,
    pub worker_id: Option<u64>,
    /// Every worker the response names (prefill and decode when disaggregated).
    pub worker: Option<WorkerIdentity>,
    pub cached_tokens: Option<u64>,
    pub prompt_tokens: u64,
    pub latency_ms: f64,
    /// The `x-request-id` it was sent with.
    pub request_id: String,
}

/// Runs `future` unless the case is cancelled first (then it is dropped).
pub(super) fn block_on<F: std::future::Future>(
    ctx: &CaseCtx,
    future: F,
) -> Result<F::Output, CaseError> {
    ctx.activity.block_on(future).map_err(CaseError::new)
}

/// A non-streaming completion of `prompt`, pinned to `pin` when given.
pub(super) fn complete(
    ctx: &CaseCtx,
    prompt: &Prompt,
    pin: Option<&Worker>,
) -> Result<Answer, CaseError> {
    ctx.doing(format!("requesting {}{}", prompt.key(), on_worker(pin)))?;
    let started = Instant::now();
    let request = ctx.requests.request(prompt, pin);
    let outcome = block_on(ctx, ctx.client.complete(&request))?.map_err(|e| {
        CaseError::request_with(
            &e,
            format_args!("request {} failed", prompt.key()),
            &unreachable_node(ctx.stack, pin),
        )
    })?;
    answer(prompt, request.request_id, outcome, started)
}

/// [`complete`] pinned to `pin`, given `deadline` to be answered: `None`
/// when it was not (the request is dropped: its connection closes).
pub(super) fn complete_within(
    ctx: &CaseCtx,
    prompt: &Prompt,
    pin: &Worker,
    deadline: std::time::Duration,
) -> Result<Option<Answer>, CaseError> {
    ctx.doing(format!(
        "requesting {}{}, answered within {} ms or given up",
        prompt.key(),
        on_worker(Some(pin)),
        deadline.as_millis()
    ))?;
    let started = Instant::now();
    let request = ctx.requests.request(prompt, Some(pin));
    // The timer is made inside the runtime: built outside it, it panics.
    let within = async { tokio::time::timeout(deadline, ctx.client.complete(&request)).await };
    let Ok(outcome) = block_on(ctx, within)? else {
        return Ok(None);
    };
    let outcome = outcome.map_err(|e| {
        CaseError::request_with(
            &e,
            format_args!("request {} failed", prompt.key()),
            &unreachable_node(ctx.stack, Some(pin)),
        )
    })?;
    answer(prompt, request.request_id, outcome, started).map(Some)
}

/// The [`Answer`] to the request `request_id` for `prompt`, sent at `started`.
pub(super) fn answer(
    prompt: &Prompt,
    request_id: String,
    outcome: CompletionOutcome,
    started: Instant,
) -> Result<Answer, CaseError> {
    let generated = outcome.generated;
    let tokens = generated.token_ids.clone().ok_or_else(|| {
        CaseError::new(format!(
            "response to {} carried no token ids (asked for nvext.completion_token_ids); text was {:?}",
            prompt.key(),
            generated.text
        ))
    })?;
    Ok(Answer {
        prompt: prompt.key(),
        tokens,
        worker_id: generated.worker_id,
        worker: generated.worker,
        cached_tokens: generated.cached_tokens(),
        prompt_tokens: generated
            .usage
            .as_ref()
            .map_or(0, |u| u64::from(u.prompt_tokens)),
        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
        request_id,
    })
}

/// `prompt` (a key) pinned to `worker` was served by it.
pub(super) fn expect_served_by(
    worker: &Worker,
    served_by: Option<&WorkerIdentity>,
    prompt: &str,
) -> CaseResult {
    match served_by {
        Some(identity) if worker.served(identity) => Ok(()),
        Some(identity) => Err(CaseError::new(format!(
            "{prompt} was pinned to {:?} worker {} ({}) but served by {identity:?}",
            worker.role(),
            worker.name(),
            worker.instance_id()
        ))),
        None => Err(CaseError::new(format!(
            "{prompt}: the response does not say which worker served it (nvext.worker_id)"
        ))),
    }
}

/// Compares `tokens` with the reference and records the comparison in
/// `tokens.json`; the caller decides what a mismatch means.
pub(super) fn compare_to_reference(
    ctx: &CaseCtx,
    prompt: &Prompt,
    tokens: &[u32],
) -> Result<(), Violation> {
    let Some(reference) = ctx.references.tokens(prompt) else {
        return Err(Violation {
            claim: "reference tokens",
            detail: format!(
                "no reference tokens for {} (reference digest {})",
                prompt.key(),
                ctx.references.digest
            ),
        });
    };
    let verdict = expect_reference_tokens(reference, tokens);
    ctx.evidence.compared(json!({
        "prompt": prompt.key(), "request_id": ctx.requests.id_of(&prompt.key()), "reference": reference, "got": tokens, "equal": verdict.is_ok(),
    }));
    verdict
}

/// `; <why>` when `worker` runs on a node that is cut off the network
/// (two nodes only), else empty.
pub(super) fn unreachable_node(stack: &Stack, worker: Option<&Worker>) -> String {
    worker
        .and_then(|w| stack.unreachable_node(w))
        .map(|why| format!("; {why}"))
        .unwrap_or_default()
}

/// ` on worker A` for a pinned request, ` (routed)` otherwise.
pub(super) fn on_worker(pin: Option<&Worker>) -> String {
    match pin {
        Some(worker) => format!(" on worker {}", worker.name()),
        None => " (routed)".to_string(),
    }
}
