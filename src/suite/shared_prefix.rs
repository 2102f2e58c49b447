//! Concurrent requests for one prompt pinned to one worker, and what that
//! worker's counters say about the deposits they made; one prompt sent to
//! two hinted targets at once, and what the source's and the targets'
//! counters and logs say about their pulls (`ctx.shared_prefix()`, TC-17).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::telemetry::engine_kvcr_log;
use crate::telemetry::{Counter, Delta, OpResult, Scope, Snapshot, Unreadable};
use crate::verdict::concurrent::SharedPrefixDeposits;
use crate::verdict::fan_out::{overlap_ms, PullWindow, SourceWrites, TargetPull, TargetWindow};
use crate::wait::{self, Poll};

use super::ask::{self, Answer};
use super::pressure::LogMark;
use super::readings;
use super::{CaseCtx, CaseError};

const POLL: Duration = Duration::from_millis(50);
/// Every deposit is answered within KVCR's operation timeout (5 s unless
/// the profile says less); the margin covers a scrape interval.
const SETTLE_DEADLINE: Duration = Duration::from_secs(15);

/// How the requests of a fan-out are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sending {
    /// All at once: the case.
    AtOnce,
    /// Each once the one before it was answered (the fault row proving
    /// that the overlap check fails on pulls that never overlapped).
    OneAfterAnother,
}

/// One target of a fan-out: the worker, its telemetry and log position
/// before the requests.
pub struct FanOutTarget {
    pub worker: std::sync::Arc<Worker>,
    pub before: Snapshot,
    pub mark: LogMark,
}

/// What the source's and the targets' counters and logs said about a
/// fan-out, as the verdicts take it, with the deltas they came from.
#[derive(Debug, Clone, Serialize)]
pub struct FanOutReading {
    pub source: SourceWrites,
    pub targets: Vec<TargetPull>,
    pub windows: Vec<TargetWindow>,
    pub source_delta: Delta,
    pub target_deltas: Vec<Delta>,
}

/// Bursts of one prompt on one worker (`ctx.shared_prefix()`).
pub struct SharedPrefix<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> SharedPrefix<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// Sends `n` completions of `prompt` pinned to `worker` at once (each
    /// with its own `x-request-id`) and returns the answers, each checked
    /// served by `worker`.
    pub fn burst_on(
        &self,
        worker: &Worker,
        prompt: &Prompt,
        n: usize,
    ) -> Result<Vec<Answer>, CaseError> {
        let ctx = self.ctx;
        ctx.doing(format!(
            "sending {n} requests for {} to {} at once",
            prompt.key(),
            worker.name()
        ))?;
        let requests: Vec<_> = (0..n)
            .map(|_| ctx.requests.request(prompt, Some(worker)))
            .collect();
        let started = Instant::now();
        let outcomes = ask::block_on(
            ctx,
            futures_util::future::join_all(requests.iter().map(|r| ctx.client.complete(r))),
        )?;
        let mut answers = Vec::with_capacity(n);
        for (request, outcome) in requests.into_iter().zip(outcomes) {
            let outcome = outcome.map_err(|e| {
                CaseError::request(
                    &e,
                    format_args!("request {} of the burst failed", request.request_id),
                )
            })?;
            let answer = ask::answer(prompt, request.request_id, outcome, started)?;
            ask::expect_served_by(worker, answer.worker.as_ref(), &prompt.key())?;
            answers.push(answer);
        }
        Ok(answers)
    }

    /// `worker`'s deposits since `before`, once every block it computed has
    /// its deposit answered (polled with a deadline; an absent counter fails).
    pub fn settled_deposits(
        &self,
        worker: &Worker,
        before: &Snapshot,
        requests: u64,
        prefix_blocks: u64,
    ) -> Result<SharedPrefixDeposits, CaseError> {
        let ctx = self.ctx;
        let what = format!(
            "worker {} to answer every deposit of the burst",
            worker.name()
        );
        ctx.doing(format!("waiting for {what}"))?;
        let read = |delta: &Delta| -> Result<SharedPrefixDeposits, Unreadable> {
            let outcome = |o: &str| delta.required_count(&Counter::KvcrDepositBlocks(o.into()));
            Ok(SharedPrefixDeposits {
                requests,
                prefix_blocks,
                computed_blocks: delta.required_count(&Counter::ComputedBlocks)?,
                deposited_success: outcome("success")?,
                deposited_failed: outcome("failed")?,
                deposited_dropped: outcome("dropped")?,
                copied_blocks: delta.required_count(&Counter::TransferBlocks(Scope::LocalFill))?,
                met_filling_blocks: delta.required_count(&Counter::KvcrDepositMetFillingBlocks)?,
            })
        };
        wait::until(what, SETTLE_DEADLINE, POLL, || {
            if let Err(cancelled) = ctx.activity.check() {
                return Poll::Abort(cancelled.to_string());
            }
            let delta = match ctx.delta_since(worker, before) {
                Ok(delta) => delta,
                Err(e) => return Poll::Abort(e.message),
            };
            match read(&delta) {
                Ok(d) if d.answered() >= d.computed_blocks && d.computed_blocks > 0 => {
                    Poll::Ready(d)
                }
                Ok(d) => Poll::Pending(format!(
                    "{} of {} computed blocks' deposits answered",
                    d.answered(),
                    d.computed_blocks
                )),
                Err(absent) => Poll::Pending(absent.to_string()),
            }
        })
        .map_err(CaseError::from)
    }

    /// Sends `prompt` to each of `targets`, pinned, `sending` at once or
    /// one after the other, and returns the answers in the targets' order,
    /// each checked served by its target.
    pub fn fan_out(
        &self,
        prompt: &Prompt,
        targets: &[&Worker],
        sending: Sending,
    ) -> Result<Vec<Answer>, CaseError> {
        let ctx = self.ctx;
        let names: Vec<&str> = targets.iter().map(|w| w.name()).collect();
        ctx.doing(format!(
            "sending {} to {} {}",
            prompt.key(),
            names.join(" and "),
            match sending {
                Sending::AtOnce => "at once",
                Sending::OneAfterAnother => "one after the other",
            }
        ))?;
        let requests: Vec<_> = targets
            .iter()
            .map(|w| ctx.requests.request(prompt, Some(w)))
            .collect();
        let started = Instant::now();
        let outcomes = match sending {
            Sending::AtOnce => ask::block_on(
                ctx,
                futures_util::future::join_all(requests.iter().map(|r| ctx.client.complete(r))),
            )?,
            Sending::OneAfterAnother => {
                let mut outcomes = Vec::with_capacity(requests.len());
                for r in &requests {
                    outcomes.push(ask::block_on(ctx, ctx.client.complete(r))?);
                }
                outcomes
            }
        };
        let mut answers = Vec::with_capacity(requests.len());
        for ((request, outcome), worker) in requests.into_iter().zip(outcomes).zip(targets) {
            let outcome = outcome.map_err(|e| {
                CaseError::request(
                    &e,
                    format_args!("request {} to {} failed", request.request_id, worker.name()),
                )
            })?;
            let answer = ask::answer(prompt, request.request_id, outcome, started)?;
            ask::expect_served_by(worker, answer.worker.as_ref(), &prompt.key())?;
            answers.push(answer);
        }
        Ok(answers)
    }

    /// The fan-out as the verdicts take it: each target's `remote_deliver`
    /// counters, the blocks its engine logged as delivered into its request
    /// and when that delivery was in flight (since its mark), and the
    /// source's `source_write` counters, once it reported as many writes as
    /// the targets delivered (it reports them asynchronously; past the
    /// deadline its counters are read as they are, and the verdict names
    /// the shortfall). When the pulls did not overlap the source is read as
    /// it stands: such a fan-out is not reconciled, and the second target
    /// may have pulled from the first.
    pub fn fan_out_reading(
        &self,
        source: &Worker,
        source_before: &Snapshot,
        targets: &[FanOutTarget],
        answers: &[Answer],
    ) -> Result<FanOutReading, CaseError> {
        let ctx = self.ctx;
        let mut target_deltas = Vec::with_capacity(targets.len());
        let mut windows = Vec::with_capacity(targets.len());
        let mut delivered = Vec::with_capacity(targets.len());
        for (t, answer) in targets.iter().zip(answers) {
            target_deltas.push(ctx.delta_since(&t.worker, &t.before)?);
            let lines = ctx.pressure().kvcr_lines_since(&t.worker, t.mark)?;
            let engine_id = engine_request_id(ctx, &lines, &answer.request_id);
            windows.push(TargetWindow {
                target: t.worker.name().to_string(),
                request_id: answer.request_id.clone(),
                window: engine_kvcr_log::deliver_window(&lines, &engine_id).map(
                    |(started_ns, ended_ns)| PullWindow {
                        started_ns,
                        ended_ns,
                    },
                ),
            });
            delivered.push(engine_kvcr_log::delivered_to(&lines, &engine_id));
        }
        let success = Counter::OpCount(Scope::RemoteDeliver, OpResult::Success);
        let mut writes = 0;
        for delta in &target_deltas {
            writes += delta.required_count(&success)?;
        }
        let overlapped = match windows.as_slice() {
            [first, second] => overlap_ms(first, second).is_some_and(|ms| ms > 0.0),
            _ => false,
        };
        let source_delta = if writes > 0 && overlapped {
            self.ctx
                .observe()
                .await_count(
                    source,
                    source_before,
                    &Counter::OpCount(Scope::SourceWrite, OpResult::Success),
                    writes,
                    &format!(
                        "worker {} to report the {writes} source writes of the fan-out",
                        source.name()
                    ),
                )
                .or_else(|_| ctx.delta_since(source, source_before))?
        } else {
            ctx.delta_since(source, source_before)?
        };
        let mut pulls = Vec::with_capacity(targets.len());
        let mut source_writes = SourceWrites::default();
        for ((t, delta), hashes) in targets.iter().zip(&target_deltas).zip(delivered) {
            let transfer = readings::peer_transfer(&source_delta, delta)?;
            source_writes = SourceWrites {
                success_ops: transfer.source_write_success_ops,
                unsuccessful: transfer.source_write_unsuccessful.clone(),
                blocks: transfer.source_write_blocks,
                bytes: transfer.source_write_bytes,
            };
            pulls.push(TargetPull {
                target: t.worker.name().to_string(),
                success_ops: transfer.remote_deliver_success_ops,
                unsuccessful: transfer.remote_deliver_unsuccessful,
                blocks: transfer.remote_deliver_blocks,
                read_bytes: transfer.target_read_bytes,
                delivered_hashes: hashes,
            });
        }
        Ok(FanOutReading {
            source: source_writes,
            targets: pulls,
            windows,
            source_delta,
            target_deltas,
        })
    }
}

/// The id under which an engine logged a request we sent with
/// `x_request_id`: Dynamo gives each request its own id, which the worker's
/// lines name, and the frontend logs it beside ours. Among the engine's
/// delivery windows, the one whose id a line of our request names (ours
/// itself where an engine logs that); ours when none does.
fn engine_request_id(
    ctx: &CaseCtx,
    lines: &[engine_kvcr_log::Located],
    x_request_id: &str,
) -> String {
    let linked = ctx.observe().log_lines_of(x_request_id);
    lines
        .iter()
        .find_map(|l| match &l.event {
            engine_kvcr_log::EngineKvcrLine::DeliverWindow { request_id, .. }
                if request_id == x_request_id
                    || linked.iter().any(|t| t.contains(request_id.as_str())) =>
            {
                Some(request_id.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| x_request_id.to_string())
}
