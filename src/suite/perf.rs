//! Measured streaming requests and per-arm summaries (TC-05, TC-06), through
//! `ctx.perf()` (the KVCR benches: `suite::kvcr_benches`).
//!
//! A case streams a prompt, checks the tokens, and gets a [`RequestRecord`]
//! with the client-side timings. Summaries go into the case's measurements
//! (keys in `suite::records`), from which results.json, the report and the
//! summary are written.

use std::time::Duration;

use futures_util::stream::{self, StreamExt};

use crate::client::StreamOutcome;
use crate::engine::{Need, Support};
use crate::evidence::{
    percentiles, ttft_offsets, Arm, ArmSummary, FirstTokenPair, RequestRecord, SweepLevel,
    TtftAccuracy,
};
use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::stats::{OpenLoop, ScheduledSend};

use super::ask;
use super::claim::clause;
use super::records::{ARM, RECOVERY, REQUESTS, SWEEP, TTFT_ACCURACY};
use super::{CaseCtx, CaseError};

/// A measured request and what the server said about its cache use.
pub struct Measured {
    pub record: RequestRecord,
    pub cached_tokens: Option<u64>,
}

/// Measured streams of one case (`ctx.perf()`).
pub struct Perf<'c> {
    pub(super) ctx: &'c CaseCtx<'c>,
}

impl<'c> Perf<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// A streaming completion pinned to `worker` (or routed when `None`).
    pub fn stream(
        &self,
        worker: Option<&Worker>,
        prompt: &Prompt,
    ) -> Result<StreamOutcome, CaseError> {
        let ctx = self.ctx;
        ctx.doing(format!(
            "streaming {}{}",
            prompt.key(),
            ask::on_worker(worker)
        ))?;
        let request = ctx.requests.request(prompt, worker);
        let outcome = ask::block_on(ctx, ctx.client.stream(&request))?.map_err(|e| {
            CaseError::request(&e, format_args!("stream of {} failed", prompt.key()))
        })?;
        if let Some(w) = worker {
            ask::expect_served_by(w, outcome.generated.worker.as_ref(), &prompt.key())?;
        }
        Ok(outcome)
    }

    /// Streams `prompt` (pinned to `worker`, or routed), checks the tokens
    /// against the reference, and returns the request's record.
    pub fn stream_measured(
        &self,
        worker: Option<&Worker>,
        prompt: &Prompt,
        arm: Arm,
    ) -> Result<Measured, CaseError> {
        let mut measured = self.stream_timed(worker, prompt)?;
        measured.record.arm = Some(arm);
        Ok(measured)
    }

    /// [`Perf::stream_measured`] for a request of no TC-05 arm (its record
    /// has none): TC-12's read-backs from the disk tier.
    pub fn stream_timed(
        &self,
        worker: Option<&Worker>,
        prompt: &Prompt,
    ) -> Result<Measured, CaseError> {
        let outcome = self.stream(worker, prompt)?;
        let tokens = outcome.generated.token_ids.clone().unwrap_or_default();
        self.ctx.expect_reference(prompt, &tokens)?;
        let mut record = request_record(self.ctx.id, None, None, prompt, &outcome);
        record.request_id = self.ctx.requests.id_of(&prompt.key());
        Ok(Measured {
            cached_tokens: outcome.generated.cached_tokens(),
            record,
        })
    }

    /// Records measured requests of no arm into results.json's `requests`
    /// (where `compare` reads them), and their TTFT percentiles as the
    /// case's measurement `key`.
    pub fn report_requests(&self, key: &str, requests: Vec<RequestRecord>) {
        let ttft: Vec<f64> = requests.iter().filter_map(|r| r.ttft_ms).collect();
        self.ctx.measure(key, percentiles(&ttft));
        self.ctx.measure(REQUESTS, &requests);
    }

    /// Summarises an arm against the KVCR-disabled baselines and records
    /// it, with its TTFT accuracy ([`Perf::ttft_accuracy`]).
    pub fn report_arm(
        &self,
        arm: Arm,
        mut requests: Vec<RequestRecord>,
    ) -> Result<ArmSummary, CaseError> {
        let accuracy = self.ttft_accuracy(&mut requests);
        let summary =
            ArmSummary::from_requests(arm, &requests, Some(&self.ctx.references.baseline));
        self.ctx.measure(ARM, &summary);
        self.ctx.measure(REQUESTS, &requests);
        accuracy?;
        Ok(summary)
    }

    /// Records the concurrency sweep, with its TTFT accuracy.
    pub fn report_sweep(
        &self,
        levels: Vec<SweepLevel>,
        mut requests: Vec<RequestRecord>,
    ) -> Result<(), CaseError> {
        let accuracy = self.ttft_accuracy(&mut requests);
        self.ctx.measure(SWEEP, &levels);
        self.ctx.measure(REQUESTS, &requests);
        accuracy
    }

    /// TTFT accuracy: each request's first-chunk arrival against the
    /// engine's own first-token stamp (both CLOCK_MONOTONIC), into each
    /// record's `first_token_offset_ms` and the case's `ttft_accuracy`
    /// measurement. An engine that stamps nothing gets a figure saying so,
    /// with the reason; on one that stamps (the CPU engine), a request
    /// without a stamp fails the case, naming it: never a zero.
    pub fn ttft_accuracy(&self, requests: &mut [RequestRecord]) -> Result<(), CaseError> {
        let ctx = self.ctx;
        let mut figure = TtftAccuracy {
            case: ctx.evidence.case_name(ctx.id),
            engine: ctx.engine().name().to_string(),
            source: "none".into(),
            offset_ms: None,
            unavailable: None,
        };
        match ctx.supports(Need::FirstTokenStamps) {
            Support::No(why) => {
                ctx.not_checked("TTFT accuracy", &why);
                figure.unavailable = Some(why);
                ctx.measure(TTFT_ACCURACY, &figure);
                Ok(())
            }
            Support::Yes => {
                figure.source =
                    "the worker's log: `first token sent monotonic_ns=` (read before the send)"
                        .into();
                let ids: Vec<String> = requests
                    .iter()
                    .filter_map(|r| r.request_id.clone())
                    .collect();
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                // The stamp is logged right after the first token left; the
                // whole stream has arrived since, so the line is normally
                // there already. A short poll covers a slow log write.
                let logs = ctx.logs_dir().to_path_buf();
                let stamps = crate::wait::until(
                    "the engine's first-token stamps of the case's streams",
                    std::time::Duration::from_secs(3),
                    std::time::Duration::from_millis(50),
                    || {
                        let found = super::requests::first_token_stamps(&logs, &ids);
                        if found.len() >= ids.len() {
                            crate::wait::Poll::Ready(found)
                        } else {
                            crate::wait::Poll::Pending(format!(
                                "{} of {} found",
                                found.len(),
                                ids.len()
                            ))
                        }
                    },
                )
                .unwrap_or_else(|_| super::requests::first_token_stamps(&logs, &ids));
                let pairs: Vec<FirstTokenPair> = requests
                    .iter()
                    .map(|r| FirstTokenPair {
                        request_id: r
                            .request_id
                            .clone()
                            .unwrap_or_else(|| "(no x-request-id)".into()),
                        client_ns: r.first_token_monotonic_ns,
                        engine_ns: r.request_id.as_ref().and_then(|id| stamps.get(id).copied()),
                    })
                    .collect();
                match ttft_offsets(&pairs) {
                    Ok((offsets, stats)) => {
                        for (r, o) in requests.iter_mut().zip(offsets) {
                            r.first_token_offset_ms = Some(o);
                        }
                        figure.offset_ms = Some(stats);
                        ctx.measure(TTFT_ACCURACY, &figure);
                        Ok(())
                    }
                    Err(why) => {
                        figure.unavailable = Some(format!("failed: {why}"));
                        ctx.measure(TTFT_ACCURACY, &figure);
                        Err(CaseError::clause(
                            clause::TTFT_ACCURACY,
                            format!(
                                "{why} (the {} engine stamps every first token it sends; see the case's log-lines.txt)",
                                figure.engine
                            ),
                        ))
                    }
                }
            }
        }
    }

    /// Records the recovery timeline of TC-06.
    pub fn report_recovery(&self, timeline: &crate::evidence::RecoveryTimeline) {
        self.ctx.measure(RECOVERY, timeline);
    }

    /// Streams `prompts` through the router with `level` requests in flight,
    /// checks every stream's tokens, and summarises the level.
    pub fn run_concurrent(
        &self,
        level: u32,
        prompts: &[Prompt],
    ) -> Result<(SweepLevel, Vec<RequestRecord>), CaseError> {
        let ctx = self.ctx;
        ctx.doing(format!(
            "sweep: {} requests, {level} in flight",
            prompts.len()
        ))?;
        let started = tokio::time::Instant::now();
        let outcomes: Vec<_> = crate::rt::block_on(
            stream::iter(
                prompts
                    .iter()
                    .map(|prompt| Sent::stream(ctx, prompt, started, None)),
            )
            .buffer_unordered(level.max(1) as usize)
            .collect(),
        );
        let duration_s = started.elapsed().as_secs_f64();
        let what = format!("concurrency {level}");
        let records = self.sweep_records(&what, outcomes, |r| r.concurrency = Some(level))?;
        Ok((
            SweepLevel::from_requests(level, &records, duration_s),
            records,
        ))
    }

    /// Streams `prompts` through the router in an open loop: request i is
    /// sent at its instant of the Poisson schedule `plan` (whatever is
    /// still in flight), and records its schedule delay. Checks every
    /// stream's tokens and summarises the level.
    pub fn run_open_loop(
        &self,
        plan: OpenLoop,
        rate_per_s: u32,
        prompts: &[Prompt],
    ) -> Result<(SweepLevel, Vec<RequestRecord>), CaseError> {
        let ctx = self.ctx;
        ctx.doing(format!(
            "open-loop sweep: {} requests at {rate_per_s}/s (seed {})",
            prompts.len(),
            plan.seed
        ))?;
        let intended = plan.first(prompts.len());
        let started = tokio::time::Instant::now();
        let outcomes: Vec<_> = crate::rt::block_on(futures_util::future::join_all(
            prompts
                .iter()
                .zip(intended)
                .map(|(prompt, at)| Sent::stream(ctx, prompt, started, Some(at))),
        ));
        let duration_s = started.elapsed().as_secs_f64();
        let what = format!("open loop at {rate_per_s}/s");
        let records = self.sweep_records(&what, outcomes, |r| r.rate_per_s = Some(rate_per_s))?;
        Ok((
            SweepLevel::open_loop(rate_per_s, plan.seed, &records, duration_s),
            records,
        ))
    }

    /// The records of a sweep level's streams, in send order; fails on the
    /// first failed stream or wrong tokens.
    fn sweep_records(
        &self,
        level: &str,
        mut sent: Vec<Sent<'_>>,
        mark: impl Fn(&mut RequestRecord),
    ) -> Result<Vec<RequestRecord>, CaseError> {
        sent.sort_by_key(|s| s.sent);
        let mut records = Vec::with_capacity(sent.len());
        for s in sent {
            let outcome = s.outcome.map_err(|e| {
                CaseError::request(
                    &e,
                    format_args!("{level}: stream of {} failed", s.prompt.key()),
                )
            })?;
            self.ctx.expect_reference(
                s.prompt,
                &outcome.generated.token_ids.clone().unwrap_or_default(),
            )?;
            let mut record = request_record(self.ctx.id, None, None, s.prompt, &outcome);
            record.request_id = Some(s.request_id);
            record.sent_at_ms = Some(s.sent.as_secs_f64() * 1000.0);
            record.schedule = s.intended.map(|at| ScheduledSend::new(at, s.sent));
            mark(&mut record);
            records.push(record);
        }
        Ok(records)
    }
}

/// One sweep stream as it came back.
struct Sent<'p> {
    prompt: &'p Prompt,
    request_id: String,
    /// Send instant, from the level's start.
    sent: Duration,
    /// Open loop: the intended send instant, from the level's start.
    intended: Option<Duration>,
    outcome: Result<StreamOutcome, crate::client::ClientError>,
}

impl<'p> Sent<'p> {
    /// Streams `prompt` through the router (its request made at once), sent
    /// at once or, in an open loop, at `intended` from `started`.
    async fn stream(
        ctx: &CaseCtx<'_>,
        prompt: &'p Prompt,
        started: tokio::time::Instant,
        intended: Option<Duration>,
    ) -> Sent<'p> {
        let request = ctx.requests.request(prompt, None);
        if let Some(at) = intended {
            tokio::time::sleep_until(started + at).await;
        }
        let sent = started.elapsed();
        let outcome = ctx.client.stream(&request).await;
        Sent {
            prompt,
            request_id: request.request_id.clone(),
            sent,
            intended,
            outcome,
        }
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
    RequestRecord {
        arm,
        concurrency,
        ..stream_record(case, prompt.tokens.len() as u32, outcome)
    }
}

/// A stream that came back, as an ok record of `case` with its timings
/// (no arm, level, id or schedule: the caller's to set).
pub fn stream_record(case: &str, prompt_tokens: u32, outcome: &StreamOutcome) -> RequestRecord {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let timings = outcome.timings.as_ref();
    RequestRecord {
        case: case.to_string(),
        arm: None,
        concurrency: None,
        ttft_ms: timings.map(|t| ms(t.ttft)),
        tpot_ms: timings.and_then(|t| t.tpot).map(ms),
        itl_ms: timings
            .map(|t| t.itl.iter().map(|d| ms(*d)).collect())
            .unwrap_or_default(),
        e2el_ms: timings.map(|t| ms(t.latency)),
        prompt_tokens,
        output_tokens: outcome
            .generated
            .token_ids
            .as_ref()
            .map_or(0, |t| t.len() as u32),
        worker_id: outcome.generated.worker_id,
        ok: true,
        error: None,
        request_id: None,
        first_token_monotonic_ns: outcome
            .sent_monotonic_ns
            .zip(timings)
            .map(|(sent, t)| sent + t.ttft.as_nanos() as u64),
        first_token_offset_ms: None,
        sent_at_ms: None,
        rate_per_s: None,
        schedule: None,
        kvcr_ops: Vec::new(),
    }
}
