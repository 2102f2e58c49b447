//! Measured streaming requests and per-arm summaries (TC-05, TC-06).
//!
//! A case streams a prompt, checks the tokens, and gets a [`RequestRecord`]
//! with the client-side timings. Summaries go into the case's measurements
//! (keys in `suite::records`), from which results.json, the report and the
//! summary are written.

use std::time::Instant;

use futures_util::stream::{self, StreamExt};

use crate::client::StreamOutcome;
use crate::evidence::{Arm, ArmSummary, RequestRecord, SweepLevel};
use crate::prompts::Prompt;
use crate::stack::Worker;

use super::records::{ARM, RECOVERY, REQUESTS, SWEEP};
use super::{CaseCtx, CaseError};

/// A measured request and what the server said about its cache use.
pub struct Measured {
    pub record: RequestRecord,
    pub cached_tokens: Option<u64>,
}

impl CaseCtx<'_> {
    /// Streams `prompt` (pinned to `worker`, or routed), checks the tokens
    /// against the reference, and returns the request's record.
    pub fn stream_measured(
        &self,
        worker: Option<&Worker>,
        prompt: &Prompt,
        arm: Arm,
    ) -> Result<Measured, CaseError> {
        let outcome = self.stream(worker, prompt)?;
        let tokens = outcome.token_ids.clone().unwrap_or_default();
        self.expect_reference(prompt, &tokens)?;
        Ok(Measured {
            cached_tokens: outcome
                .usage
                .as_ref()
                .and_then(|u| u.cached_tokens)
                .map(u64::from),
            record: request_record(self.id, Some(arm), None, prompt, &outcome),
        })
    }

    /// Summarises an arm against the KVCR-disabled baselines and records it.
    pub fn report_arm(&self, arm: Arm, requests: Vec<RequestRecord>) -> ArmSummary {
        let summary = ArmSummary::from_requests(arm, &requests, Some(&self.references.baseline));
        self.measure(ARM, &summary);
        self.measure(REQUESTS, &requests);
        summary
    }

    /// Records the concurrency sweep.
    pub fn report_sweep(&self, levels: Vec<SweepLevel>, requests: Vec<RequestRecord>) {
        self.measure(SWEEP, &levels);
        self.measure(REQUESTS, &requests);
    }

    /// Records the recovery timeline of TC-06.
    pub fn report_recovery(&self, timeline: &crate::evidence::RecoveryTimeline) {
        self.measure(RECOVERY, timeline);
    }

    /// Streams `prompts` through the router with `level` requests in flight,
    /// checks every stream's tokens, and summarises the level.
    pub fn run_concurrent(
        &self,
        level: u32,
        prompts: &[Prompt],
    ) -> Result<(SweepLevel, Vec<RequestRecord>), CaseError> {
        let started = Instant::now();
        let outcomes: Vec<_> = crate::rt::block_on(
            stream::iter(prompts.iter().map(|prompt| async move {
                let request = self.request(prompt, None);
                (prompt, self.client.stream(&request).await)
            }))
            .buffer_unordered(level.max(1) as usize)
            .collect(),
        );
        let duration_s = started.elapsed().as_secs_f64();
        let mut records = Vec::new();
        for (prompt, outcome) in outcomes {
            let outcome = outcome.map_err(|e| {
                CaseError::new(format!(
                    "concurrency {level}: stream of {} failed: {e}",
                    prompt.key()
                ))
            })?;
            self.expect_reference(prompt, &outcome.token_ids.clone().unwrap_or_default())?;
            records.push(request_record(self.id, None, Some(level), prompt, &outcome));
        }
        Ok((
            SweepLevel::from_requests(level, &records, duration_s),
            records,
        ))
    }
}

/// One streamed request as results.json records it (vLLM bench field names).
pub fn request_record(
    case: &str,
    arm: Option<Arm>,
    concurrency: Option<u32>,
    prompt: &Prompt,
    outcome: &StreamOutcome,
) -> RequestRecord {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let timings = outcome.timings.as_ref();
    RequestRecord {
        case: case.to_string(),
        arm,
        concurrency,
        ttft_ms: timings.map(|t| ms(t.ttft)),
        tpot_ms: timings.and_then(|t| t.tpot).map(ms),
        itl_ms: timings
            .map(|t| t.itl.iter().map(|d| ms(*d)).collect())
            .unwrap_or_default(),
        e2el_ms: timings.map(|t| ms(t.latency)),
        prompt_tokens: prompt.tokens.len() as u32,
        output_tokens: outcome.token_ids.as_ref().map_or(0, |t| t.len() as u32),
        worker_id: outcome.worker_id,
        ok: true,
        error: None,
    }
}
