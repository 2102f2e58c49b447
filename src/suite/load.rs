//! A bounded streaming load through the router while a fault is injected
//! (`ctx.load()`), as Dynamo's fault-tolerance tests do: every request of the window is
//! recorded (sent, done, outcome, serving worker) and every answer's tokens
//! are checked against the reference.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::client::{ClientError, StreamOutcome};
use crate::prompts::Prompt;
use crate::verdict::load::LoadOutcome;
use crate::verdict::tokens::expect_reference_tokens;
use crate::wait::{self, Poll};

use super::{CaseCtx, CaseError};

/// How often the harness looks at the load's progress before the fault.
const PROGRESS_POLL: Duration = Duration::from_millis(20);

/// One request of the load.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRequest {
    /// Which client sent it (0-based) and its place in that client's order.
    pub client: usize,
    pub seq: usize,
    pub prompt: String,
    /// Milliseconds since the load started.
    pub sent_ms: f64,
    pub done_ms: f64,
    pub outcome: LoadOutcome,
    /// Its `x-request-id`.
    pub request_id: String,
    /// The worker that served it, when the response said.
    pub worker_id: Option<u64>,
    /// For a failed request: the worker whose stream the router saw cut
    /// (its log's [`STREAM_CUT_ON_WORKER`](super::requests::STREAM_CUT_ON_WORKER)),
    /// the only record of where a request in flight at a kill was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_on_worker: Option<u64>,
    /// The prefill worker of a disaggregated stack, when the response said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_worker_id: Option<u64>,
    /// The error, or the token mismatch.
    pub detail: Option<String>,
}

/// The load's requests and the fault injected in its middle.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRun<T> {
    pub requests: Vec<LoadRequest>,
    /// When the fault was injected, ms since the load started.
    pub fault_at_ms: f64,
    pub fault: T,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A case's streaming load (`ctx.load()`).
pub struct Load<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> Load<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// Runs one streaming client per entry of `per_client` through the
    /// router (or, with `pin`, all pinned to that worker), each sending its
    /// prompts one after another; once `fault_after` requests have
    /// finished, injects `fault` on this thread and lets the load run to its
    /// end. No request is retried.
    pub fn with_fault<T>(
        &self,
        per_client: Vec<Vec<Prompt>>,
        pin: Option<&crate::stack::Worker>,
        fault_after: usize,
        fault: impl FnOnce() -> Result<T, CaseError>,
    ) -> Result<LoadRun<T>, CaseError> {
        let ctx = self.ctx;
        let started = Instant::now();
        let finished = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for (client, prompts) in per_client.iter().enumerate() {
            let jobs: Vec<_> = prompts
                .iter()
                .map(|p| {
                    let reference = ctx.references.tokens(p).map(<[u32]>::to_vec);
                    let request = ctx.requests.request(p, pin);
                    (p.key(), request, reference)
                })
                .collect();
            let http = ctx.client.clone();
            let finished = finished.clone();
            tasks.push(crate::rt::handle().spawn(async move {
                let mut done = Vec::new();
                for (seq, (prompt, request, reference)) in jobs.into_iter().enumerate() {
                    let sent_ms = ms(started.elapsed());
                    let request_id = request.request_id.clone();
                    let result = http.stream(&request).await;
                    let done_ms = ms(started.elapsed());
                    let prefill_worker_id = result
                        .as_ref()
                        .ok()
                        .and_then(|o| o.generated.worker.as_ref())
                        .and_then(|w| w.prefill);
                    let (outcome, worker_id, detail) = judge(result, reference.as_deref());
                    done.push(LoadRequest {
                        client,
                        seq,
                        prompt,
                        sent_ms,
                        done_ms,
                        outcome,
                        request_id,
                        worker_id,
                        cut_on_worker: None,
                        prefill_worker_id,
                        detail,
                    });
                    finished.fetch_add(1, Ordering::SeqCst);
                }
                done
            }));
        }
        let budget = ctx
            .settings
            .request_timeout
            .saturating_mul(fault_after.max(1) as u32);
        let ready = wait::until(
            format!("{fault_after} load requests to finish before the fault"),
            budget,
            PROGRESS_POLL,
            || match finished.load(Ordering::SeqCst) {
                n if n >= fault_after => Poll::Ready(()),
                n => Poll::Pending(format!("{n} finished")),
            },
        );
        let fault_at_ms = ms(started.elapsed());
        let fault = ready.map_err(CaseError::from).and_then(|()| fault());
        // The load is bounded: every client ends, with or without the fault.
        let mut requests = Vec::new();
        for task in tasks {
            let done = crate::rt::block_on(task)
                .map_err(|e| CaseError::new(format!("a load client stopped abnormally: {e}")))?;
            requests.extend(done);
        }
        requests.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
        attribute_cut_streams(ctx.logs_dir(), &mut requests);
        Ok(LoadRun {
            requests,
            fault_at_ms,
            fault: fault?,
        })
    }

    /// Puts the load's timeline into results.json and the report.
    pub fn report<T>(&self, load: &LoadRun<T>) {
        self.ctx.measure(
            crate::evidence::LOAD_TIMELINE,
            serde_json::json!({"fault_at_ms": load.fault_at_ms, "requests": load.requests}),
        );
    }
}

/// Sets [`LoadRequest::cut_on_worker`] of each failed request that names
/// no worker, from the router's log. Every client has ended, so the
/// frontend logged the cut before the client saw the error.
fn attribute_cut_streams(logs_dir: &std::path::Path, requests: &mut [LoadRequest]) {
    let unnamed: Vec<&str> = requests
        .iter()
        .filter(|r| r.outcome == LoadOutcome::Failed && r.worker_id.is_none())
        .map(|r| r.request_id.as_str())
        .collect();
    if unnamed.is_empty() {
        return;
    }
    let cut = super::requests::streams_cut_on_worker(logs_dir, &unnamed);
    for r in requests.iter_mut() {
        r.cut_on_worker = cut.get(&r.request_id).copied();
    }
}

fn judge(
    result: Result<StreamOutcome, ClientError>,
    reference: Option<&[u32]>,
) -> (LoadOutcome, Option<u64>, Option<String>) {
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => return (LoadOutcome::Failed, None, Some(e.to_string())),
    };
    let worker = outcome.generated.worker_id;
    match (outcome.generated.token_ids.as_deref(), reference) {
        (_, None) => (
            LoadOutcome::Failed,
            worker,
            Some("no reference tokens for this prompt".into()),
        ),
        (None, _) => (
            LoadOutcome::Failed,
            worker,
            Some("the stream carried no token ids".into()),
        ),
        (Some(tokens), Some(reference)) => match expect_reference_tokens(reference, tokens) {
            Ok(()) => (LoadOutcome::Ok, worker, None),
            Err(v) => (LoadOutcome::WrongTokens, worker, Some(v.to_string())),
        },
    }
}
