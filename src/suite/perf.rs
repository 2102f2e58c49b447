//! Measured streaming requests and per-arm summaries (TC-05, TC-06).
//!
//! A case streams a prompt, checks the tokens, and gets a [`RequestRecord`]
//! with the client-side timings. Arm summaries go into the case's
//! measurements (`arm`, `requests`, `sweep`, `recovery`), from which
//! results.json and the report are written.

use crate::evidence::perf::{percentiles, ArmSummary, RequestRecord};
use crate::prompts::Prompt;
use crate::stack::Worker;

use super::{CaseCtx, CaseError};

impl CaseCtx<'_> {
    /// Streams `prompt` (pinned to `worker`, or routed), checks the tokens
    /// against the reference, and returns the request's record.
    pub fn stream_measured(&self, worker: Option<&Worker>, prompt: &Prompt, arm: &str) -> Result<RequestRecord, CaseError> {
        let outcome = self.stream(worker, prompt)?;
        self.expect_reference(prompt, &outcome.token_ids)?;
        Ok(request_record(arm, prompt, &outcome))
    }

    /// Summarises an arm against the KVCR-disabled baselines and records it.
    pub fn report_arm(&self, arm: &str, requests: Vec<RequestRecord>) -> ArmSummary {
        let baseline = &self.references.baseline;
        let ttft: Vec<f64> = requests.iter().map(|r| r.ttft_ms).collect();
        let summary = ArmSummary {
            arm: arm.to_string(),
            n: requests.len(),
            ttft_ms: percentiles(&ttft),
            tpot_ms: percentiles(&requests.iter().filter_map(|r| r.tpot_ms).collect::<Vec<_>>()),
            itl_ms: percentiles(&requests.iter().flat_map(|r| r.itl_ms.iter().copied()).collect::<Vec<_>>()),
            baseline_cold_ttft_ms: baseline.cold_ttft_ms.p50,
            baseline_warm_ttft_ms: baseline.warm_ttft_ms.p50,
            delta_vs_cold_baseline_ms: percentiles(&ttft).p50 - baseline.cold_ttft_ms.p50,
            delta_vs_warm_baseline_ms: percentiles(&ttft).p50 - baseline.warm_ttft_ms.p50,
        };
        self.measure("arm", &summary);
        self.measure("requests", &requests);
        self.measure("metric_definitions", crate::client::timing::DEFINITIONS);
        summary
    }
}

/// One streamed request as results.json records it.
pub fn request_record(arm: &str, prompt: &Prompt, outcome: &crate::client::StreamOutcome) -> RequestRecord {
    let t = &outcome.timings;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    RequestRecord {
        arm: arm.to_string(),
        prompt: prompt.key(),
        ttft_ms: ms(t.ttft),
        tpot_ms: t.tpot.map(ms),
        itl_ms: t.itl.iter().map(|d| ms(*d)).collect(),
        e2el_ms: ms(t.latency),
        prompt_tokens: prompt.tokens.len() as u64,
        output_tokens: outcome.token_ids.len() as u64,
        worker_id: outcome.worker_id,
        ok: true,
    }
}

impl CaseCtx<'_> {
    /// Streams `prompts` through the router with `level` requests in flight,
    /// checks every stream's tokens, and summarises the level.
    pub fn run_concurrent(&self, level: u32, prompts: &[Prompt]) -> Result<crate::evidence::perf::SweepLevel, CaseError> {
        use futures_util::stream::{self, StreamExt};

        let started = std::time::Instant::now();
        let outcomes: Vec<_> = crate::rt::block_on(
            stream::iter(prompts.iter().map(|prompt| async move {
                let request = self.request(prompt, crate::client::Pin::None);
                (prompt, self.client.stream(&request).await)
            }))
            .buffer_unordered(level.max(1) as usize)
            .collect(),
        );
        let duration = started.elapsed();
        let mut records = Vec::new();
        for (prompt, outcome) in outcomes {
            let outcome = outcome.map_err(|e| CaseError::new(format!("concurrency {level}: stream of {} failed: {e}", prompt.key())))?;
            self.expect_reference(prompt, &outcome.token_ids)?;
            records.push(request_record(&format!("sweep_c{level}"), prompt, &outcome));
        }
        let output_tokens: u64 = records.iter().map(|r| r.output_tokens).sum();
        let ttft: Vec<f64> = records.iter().map(|r| r.ttft_ms).collect();
        let tpot: Vec<f64> = records.iter().filter_map(|r| r.tpot_ms).collect();
        Ok(crate::evidence::perf::SweepLevel {
            concurrency: level,
            requests: records.len(),
            duration_s: duration.as_secs_f64(),
            request_throughput_per_s: records.len() as f64 / duration.as_secs_f64().max(1e-9),
            output_throughput_tok_per_s: output_tokens as f64 / duration.as_secs_f64().max(1e-9),
            ttft_ms: percentiles(&ttft),
            tpot_ms: percentiles(&tpot),
        })
    }
}
