//! Concurrent requests for one prompt pinned to one worker, and what that
//! worker's counters say about the deposits they made (`ctx.shared_prefix()`,
//! TC-17).

use std::time::{Duration, Instant};

use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::telemetry::{Counter, Delta, Scope, Snapshot, Unreadable};
use crate::verdict::concurrent::SharedPrefixDeposits;
use crate::wait::{self, Poll};

use super::ask::{self, Answer};
use super::{CaseCtx, CaseError};

const POLL: Duration = Duration::from_millis(50);
/// Every deposit is answered within KVCR's operation timeout (5 s unless
/// the profile says less); the margin covers a scrape interval.
const SETTLE_DEADLINE: Duration = Duration::from_secs(15);

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
}
