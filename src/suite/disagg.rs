//! What a case asks a disaggregated stack (`ctx.disagg()`): its decode
//! worker, its prefill workers, and whether a P→D transfer reconciles. On a stack without a
//! decode worker (agg, two-node) there is nothing to ask.

use std::sync::Arc;

use serde_json::json;

use crate::engine::topology::WorkerRole;
use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::telemetry::{Counter, OpResult, Scope};
use crate::verdict::disagg::expect_prefill_to_decode;

use super::{CaseCtx, CaseError, CaseResult};

/// The disaggregated side of a case's stack (`ctx.disagg()`).
pub struct Disagg<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> Disagg<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// The decode worker, when the topology has one.
    pub fn decode_worker(&self) -> Option<Arc<Worker>> {
        self.ctx
            .stack
            .workers()
            .into_iter()
            .find(|w| w.role() == WorkerRole::Decode)
    }

    /// The prefill workers (empty unless the topology disaggregates).
    pub fn prefill_workers(&self) -> Vec<Arc<Worker>> {
        self.ctx
            .stack
            .workers()
            .into_iter()
            .filter(|w| w.role() == WorkerRole::Prefill)
            .collect()
    }

    /// Sends `prompt` (which no worker has seen) through the router, checks
    /// the reference tokens, and checks that `decode` pulled exactly the
    /// prompt's full blocks from the prefill worker that served it.
    pub fn expect_prefill_to_decode(&self, decode: &Worker, prompt: &Prompt) -> CaseResult {
        let ctx = self.ctx;
        let prefills = self.prefill_workers();
        let before = prefills
            .iter()
            .map(|p| ctx.snapshot(p))
            .collect::<Result<Vec<_>, _>>()?;
        let decode_before = ctx.snapshot(decode)?;
        let answer = ctx.complete_routed(prompt)?;
        ctx.expect_reference(prompt, &answer.tokens)?;
        let served_by = answer.worker.and_then(|w| w.prefill);
        let Some((prefill, prefill_before)) = prefills
            .iter()
            .zip(&before)
            .find(|(p, _)| Some(p.instance_id()) == served_by)
        else {
            let path = ctx.record("p2d.json", &json!({"answer": answer}));
            return Err(CaseError::new(format!(
                "{}: the response names prefill worker {served_by:?}, none of the stack's prefill workers {:?}",
                prompt.key(),
                prefills.iter().map(|p| (p.name(), p.instance_id())).collect::<Vec<_>>()
            ))
            .with_evidence(path));
        };
        let observed =
            match ctx
                .observe()
                .peer_transfer(prefill, prefill_before, decode, &decode_before)
            {
                Ok(observed) => observed,
                // The prefill's side cannot be read (e.g. it died): judge the
                // decode's side alone; an unread counter is never a zero.
                Err(unreadable) => {
                    return Err(self.decode_side_only(decode, &decode_before, prefill, unreadable))
                }
            };
        let geometry = ctx.geometry();
        let full_blocks = geometry.full_blocks(prompt.tokens.len() as u64);
        ctx.measure("p2d_blocks", observed.transfer.remote_deliver_blocks);
        ctx.measure("p2d_bytes", observed.transfer.source_write_bytes);
        ctx.check(
            "p2d.json",
            &json!({
                "prefill": prefill.name(), "decode": decode.name(), "full_blocks": full_blocks,
                "geometry": geometry, "observed": observed, "answer": answer,
            }),
            expect_prefill_to_decode(&observed.transfer, full_blocks, geometry.bytes_per_block()),
        )
    }

    fn decode_side_only(
        &self,
        decode: &Worker,
        decode_before: &crate::telemetry::Snapshot,
        prefill: &Worker,
        unreadable: CaseError,
    ) -> CaseError {
        let pulled = self
            .ctx
            .delta_since(decode, decode_before)
            .map(|d| d.count(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Success)));
        let decode_side = match &pulled {
            Ok(0) => {
                "the decode shows no remote_deliver success: it did not pull the prefill's pages"
                    .to_string()
            }
            Ok(n) => format!("the decode shows {n} remote_deliver successes"),
            Err(e) => format!(
                "the decode's telemetry cannot be read either: {}",
                e.message
            ),
        };
        let path = self.ctx.record(
            "p2d.json",
            &json!({"prefill": prefill.name(), "decode": decode.name(),
                    "decode_remote_deliver_success": pulled.as_ref().ok(),
                    "prefill_unreadable": unreadable.message}),
        );
        CaseError::new(format!(
            "P→D transfer reconciles: {decode_side}; prefill {}'s side cannot be read: {}",
            prefill.name(),
            unreadable.message
        ))
        .with_evidence(path)
    }
}
