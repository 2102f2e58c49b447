//! What a case asks a disaggregated stack (`ctx.disagg()`): its decode
//! worker, its prefill workers, and whether a P→D transfer reconciles, read
//! from the path the engine moves it on (KVCR's REMOTE path, or vLLM's
//! NixlConnector). On a stack without a decode worker (agg, two-node) there
//! is nothing to ask.

use std::sync::Arc;

use serde_json::json;

use crate::engine::topology::WorkerRole;
use crate::engine::PrefillToDecode;
use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::telemetry::{Counter, OpResult, Scope};
use crate::verdict::disagg::{expect_nixl_prefill_to_decode, expect_prefill_to_decode};
use crate::verdict::Violation;

use super::{readings, CaseCtx, CaseError, CaseResult};

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

    /// Sends `prompt` (which no worker has seen) with its prefill pinned to
    /// `prefill` (`nvext.prefill_worker_id`; the router picks the decode),
    /// checks the reference tokens and that `prefill` served it, and checks
    /// that `decode` pulled the prompt from `prefill`, read from the
    /// telemetry of the engine's P→D path ([`PrefillToDecode`]).
    pub fn expect_prefill_to_decode(
        &self,
        decode: &Worker,
        prefill: &Worker,
        prompt: &Prompt,
    ) -> CaseResult {
        match self.ctx.engine().prefill_to_decode() {
            PrefillToDecode::KvcrRemote => self.expect_kvcr_pull(decode, prefill, prompt),
            PrefillToDecode::NixlConnector => self.expect_nixl_pull(decode, prefill, prompt),
        }
    }

    /// KVCR's REMOTE path: `decode` pulled exactly the prompt's full blocks
    /// from `prefill`, and both sides' KVCR counters agree.
    fn expect_kvcr_pull(&self, decode: &Worker, prefill: &Worker, prompt: &Prompt) -> CaseResult {
        let ctx = self.ctx;
        let prefill_before = ctx.snapshot(prefill)?;
        let decode_before = ctx.snapshot(decode)?;
        let answer = ctx.complete_on(prefill, prompt)?;
        ctx.expect_reference(prompt, &answer.tokens)?;
        let observed =
            match ctx
                .observe()
                .peer_transfer(prefill, &prefill_before, decode, &decode_before)
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
        ctx.measure(
            &format!("p2d_blocks_{}", prefill.name()),
            observed.transfer.remote_deliver_blocks,
        );
        ctx.measure(
            &format!("p2d_bytes_{}", prefill.name()),
            observed.transfer.source_write_bytes,
        );
        ctx.check(
            &format!("p2d-{}.json", prefill.name()),
            &json!({
                "prefill": prefill.name(), "decode": decode.name(), "full_blocks": full_blocks,
                "geometry": geometry, "observed": observed, "answer": answer,
            }),
            expect_prefill_to_decode(&observed.transfer, full_blocks, geometry.bytes_per_block())
                .map_err(|v| Violation {
                    detail: format!("through prefill {}: {}", prefill.name(), v.detail),
                    ..v
                }),
        )
    }

    /// vLLM's NixlConnector: `decode` read every block holding the prompt
    /// over NIXL, nothing failed, and `prefill` scheduled the prompt. A
    /// prefill whose telemetry cannot be read (it died) leaves the decode's
    /// side to judge alone; the message says so.
    fn expect_nixl_pull(&self, decode: &Worker, prefill: &Worker, prompt: &Prompt) -> CaseResult {
        let ctx = self.ctx;
        let prefill_before = ctx.snapshot(prefill)?;
        let decode_before = ctx.snapshot(decode)?;
        let answer = ctx.complete_on(prefill, prompt)?;
        ctx.expect_reference(prompt, &answer.tokens)?;
        let decode_delta = ctx.delta_since(decode, &decode_before)?;
        let prefill_delta = ctx.delta_since(prefill, &prefill_before);
        let pull = readings::nixl_pull(prefill_delta.as_ref().ok(), &decode_delta)?;
        let unreadable = prefill_delta.err().map(|e| e.message);
        let geometry = ctx.geometry();
        let tokens = prompt.tokens.len() as u64;
        let blocks = geometry.blocks_holding(tokens);
        ctx.measure(
            &format!("p2d_nixl_bytes_{}", prefill.name()),
            pull.decode_bytes,
        );
        ctx.check(
            &format!("p2d-{}.json", prefill.name()),
            &json!({
                "path": PrefillToDecode::NixlConnector, "prefill": prefill.name(),
                "decode": decode.name(), "prompt_tokens": tokens, "blocks_holding_the_prompt": blocks,
                "geometry": geometry, "observed": pull, "prefill_unreadable": unreadable,
                "decode_delta": decode_delta, "answer": answer,
            }),
            expect_nixl_prefill_to_decode(&pull, tokens, blocks, geometry.bytes_per_block()).map_err(
                |v| Violation {
                    detail: match &unreadable {
                        None => format!("through prefill {}: {}", prefill.name(), v.detail),
                        Some(why) => format!(
                            "through prefill {}: {}; prefill {}'s side cannot be read: {why}",
                            prefill.name(),
                            v.detail,
                            prefill.name()
                        ),
                    },
                    ..v
                },
            ),
        )
    }

    /// The P→D check through every prefill worker in turn, each with a
    /// fresh prompt of `prompts`: a decode that pulls from one prefill but
    /// not from another fails whichever the router would have picked.
    pub fn expect_prefill_to_decode_each(
        &self,
        decode: &Worker,
        prompts: &[&Prompt],
    ) -> CaseResult {
        let prefills = self.prefill_workers();
        if prefills.is_empty() {
            return Err(CaseError::new(
                "P→D transfer reconciles: the stack has a decode worker but no prefill worker",
            ));
        }
        if prompts.len() < prefills.len() {
            return Err(CaseError::new(format!(
                "P→D transfer reconciles: {} prompts for {} prefill workers",
                prompts.len(),
                prefills.len()
            )));
        }
        for (prefill, prompt) in prefills.iter().zip(prompts) {
            self.expect_prefill_to_decode(decode, prefill, prompt)?;
        }
        Ok(())
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
        CaseError::clause(
            crate::verdict::disagg::CLAIM,
            format!(
                "{decode_side}; prefill {}'s side cannot be read: {}",
                prefill.name(),
                unreadable.message
            ),
        )
        .with_evidence(path)
    }
}
