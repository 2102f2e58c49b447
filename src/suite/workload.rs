//! A workload trace replayed through the stack (WL-01), through
//! `ctx.workload()`: the open-loop replay, its requests checked against the
//! reference replay's tokens, the hit rate per tier from every worker's
//! counters over the replay, and the KVCR-off baseline from the reference
//! phase.

use std::time::Duration;

use crate::evidence::workload::{ReplaySummary, Slo, TierRates, TierTokens, WORKLOAD_CASE};
use crate::evidence::RequestRecord;
use crate::reference::{workload as reference_workload, WorkloadReference};
use crate::telemetry::names::{Counter, Scope};
use crate::telemetry::{Delta, Snapshot};
use crate::verdict::workload::{Answered, TierReadings};
use crate::wait::{self, Poll};
use crate::workload::{plan, replay, Returned};

use super::{CaseCtx, CaseError};

/// How long the workers' counters may take to count the replay's last
/// requests (KVCR's counters arrive once per stats interval).
const SETTLE_DEADLINE: Duration = Duration::from_secs(10);
const SETTLE_POLL: Duration = Duration::from_millis(250);

/// One KVCR replay of the trace, as measured.
pub struct Replayed {
    pub summary: ReplaySummary,
    pub records: Vec<RequestRecord>,
    pub readings: TierReadings,
    /// The first request that failed or got other tokens, named.
    pub first_bad: Option<String>,
}

/// WL-01's helpers (`ctx.workload()`).
pub struct Workload<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> Workload<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// The targets of the settings.
    pub fn slo(&self) -> Slo {
        let w = &self.ctx.settings.workload;
        Slo {
            ttft_ms: w.slo_ttft_ms,
            tpot_ms: w.slo_tpot_ms,
            attainment: w.slo_attainment,
        }
    }

    /// The reference replay of the reference phase, or why there is none.
    pub fn reference(&self) -> Result<&'c WorkloadReference, CaseError> {
        self.ctx.references.workload.as_ref().ok_or_else(|| {
            CaseError::new(
                "the reference phase replayed no workload trace (workload_trace unset, or the trial was not planned when the stack started)",
            )
        })
    }

    /// The KVCR-off baseline: the reference replay summarised with the
    /// settings' targets; its cached tokens are all the device's.
    pub fn baseline(&self, reference: &WorkloadReference) -> ReplaySummary {
        let mut off = ReplaySummary::of(
            false,
            reference.rate_factor,
            &self.slo(),
            &reference.requests,
        );
        off.tiers = TierTokens {
            device: off.cached_tokens_reported,
            ..TierTokens::default()
        };
        off.hit_rate = TierRates::of(&off.tiers, off.prompt_tokens);
        off
    }

    /// Replays the trace through the router at `rate_factor` with the
    /// token salt `salt`, judging tokens by `reference` (the reference
    /// replay's, for the settings' salt and rate), and reads every
    /// worker's counters over the replay.
    pub fn replay(
        &self,
        rate_factor: f64,
        salt: u64,
        reference: Option<&WorkloadReference>,
    ) -> Result<Replayed, CaseError> {
        let ctx = self.ctx;
        let settings = &ctx.settings.workload;
        let (trace, _) = reference_workload::trace_of(
            settings,
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        )
        .map_err(CaseError::new)?
        .ok_or_else(|| CaseError::new("workload_trace is unset"))?;
        let space = crate::workload::TokenSpace::new(
            settings.block_size,
            ctx.engine().prompt_vocab(),
            salt,
        );
        let planned = plan(&trace, rate_factor, &space, &ctx.engine().model());
        ctx.doing(format!(
            "replaying {} requests at rate ×{rate_factor} (salt {salt})",
            planned.len()
        ))?;
        let workers = ctx.stack.workers();
        let before: Vec<Snapshot> = workers
            .iter()
            .map(|w| ctx.snapshot(w))
            .collect::<Result<_, _>>()?;
        let returned = super::ask::block_on(ctx, replay(&ctx.client, planned))?;
        let tokens_of = |r: &Returned| {
            reference
                .and_then(|w| w.tokens.get(r.index))
                .map(Vec::as_slice)
        };
        let requests: Vec<_> = returned.iter().map(|r| r.replayed(tokens_of(r))).collect();
        let slo = self.slo();
        let mut summary = ReplaySummary::of(true, rate_factor, &slo, &requests);
        let cached: u64 = summary.cached_tokens_reported;
        let (readings, unsuccessful) = self.settled_readings(&workers, &before, cached)?;
        summary.tiers = TierTokens {
            device: readings.device_hit_tokens,
            dram: readings.local_deliver_blocks * readings.block_size,
            peer: readings.remote_deliver_blocks * readings.block_size,
            disk: readings.g3_deliver_blocks * readings.block_size,
        };
        summary.hit_rate = TierRates::of(&summary.tiers, summary.prompt_tokens);
        summary.delivered_unused_tokens = readings
            .kvcr_tokens()
            .saturating_sub(readings.external_hit_tokens);
        summary.unsuccessful_deliveries = unsuccessful;
        let first_bad =
            returned
                .iter()
                .zip(&requests)
                .find_map(|(r, q)| match (&r.outcome, q.answer) {
                    (Err(e), _) => Some(format!(
                        "request {} (x-request-id {}): {e}",
                        r.index, r.request_id
                    )),
                    (Ok(_), Some(a)) if !a.reference_tokens && reference.is_some() => {
                        Some(format!(
                            "request {} (x-request-id {}): tokens other than the reference's",
                            r.index, r.request_id
                        ))
                    }
                    _ => None,
                });
        let records = returned
            .iter()
            .zip(&requests)
            .map(|(r, q)| record(r, q))
            .collect();
        Ok(Replayed {
            summary,
            records,
            readings,
            first_bad,
        })
    }

    /// Records the summary (results.json's `perf.workload`) and the KVCR
    /// replay's requests (its `requests`).
    pub fn report(&self, summary: &crate::evidence::WorkloadSummary, records: Vec<RequestRecord>) {
        self.ctx.measure(super::records::WORKLOAD, summary);
        self.ctx.measure(super::records::REQUESTS, &records);
    }

    /// The replay's requests and how they ended, for the verdict.
    pub fn answered(summary: &ReplaySummary) -> Answered {
        Answered {
            requests: summary.requests,
            failed: summary.failed,
            wrong_tokens: summary.wrong_tokens,
        }
    }

    /// Every worker's counters since `before`, summed, polled until the
    /// engines have counted the cached tokens the answers reported and
    /// KVCR's deliveries match the external hits (or the deadline: the
    /// last reading is returned for the verdict to judge).
    fn settled_readings(
        &self,
        workers: &[std::sync::Arc<crate::stack::Worker>],
        before: &[Snapshot],
        answered_cached_tokens: u64,
    ) -> Result<(TierReadings, std::collections::BTreeMap<String, u64>), CaseError> {
        let ctx = self.ctx;
        ctx.doing("waiting for the workers' counters to count the replay")?;
        let block_size = u64::from(ctx.engine().geometry().block_size_tokens);
        let read =
            || -> Result<(TierReadings, std::collections::BTreeMap<String, u64>), CaseError> {
                let mut r = TierReadings {
                    block_size,
                    answered_cached_tokens,
                    ..TierReadings::default()
                };
                let mut unsuccessful = std::collections::BTreeMap::new();
                for (w, b) in workers.iter().zip(before) {
                    let d = ctx.delta_since(w, b)?;
                    add(&mut r, &mut unsuccessful, &d).map_err(|e| {
                        CaseError::new(format!("telemetry of worker {}: {e}", w.name()))
                    })?;
                }
                Ok((r, unsuccessful))
            };
        let settled = wait::until(
            "the workers' counters to count every replayed request",
            SETTLE_DEADLINE,
            SETTLE_POLL,
            || match read() {
                Ok((r, u))
                    if r.device_hit_tokens + r.external_hit_tokens == answered_cached_tokens
                        && r.external_hit_tokens <= r.kvcr_tokens() =>
                {
                    Poll::Ready((r, u))
                }
                Ok((r, _)) => Poll::Pending(format!(
                    "device {} + external {} of {} cached tokens answered; KVCR delivered {}",
                    r.device_hit_tokens,
                    r.external_hit_tokens,
                    answered_cached_tokens,
                    r.kvcr_tokens()
                )),
                Err(e) => Poll::Abort(e.message),
            },
        );
        match settled {
            Ok(r) => Ok(r),
            // Not settled: the verdict judges the last reading.
            Err(_) => read(),
        }
    }
}

/// Adds one worker's delta to the sums.
fn add(
    r: &mut TierReadings,
    unsuccessful: &mut std::collections::BTreeMap<String, u64>,
    d: &Delta,
) -> Result<(), crate::telemetry::Unreadable> {
    r.device_hit_tokens += d.required_count(&Counter::PrefixCacheHits)?;
    r.external_hit_tokens += d.required_count(&Counter::ExternalPrefixCacheHits)?;
    r.local_deliver_blocks += d.required_count(&Counter::TransferBlocks(Scope::LocalDeliver))?;
    r.remote_deliver_blocks += d.required_count(&Counter::TransferBlocks(Scope::RemoteDeliver))?;
    // Only a stack with a disk tier reports it.
    r.g3_deliver_blocks += d.count(&Counter::TransferBlocks(Scope::G3Deliver));
    for scope in [Scope::LocalDeliver, Scope::RemoteDeliver] {
        let ops = d.ops_by_result(&scope)?;
        r.unsuccessful_delivers += ops.unsuccessful.values().sum::<u64>();
        for (result, n) in ops.unsuccessful {
            *unsuccessful.entry(format!("{scope} {result}")).or_default() += n;
        }
    }
    Ok(())
}

/// A replayed request as results.json records it.
fn record(r: &Returned, q: &crate::evidence::workload::ReplayedRequest) -> RequestRecord {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let ok = q.answer.is_some_and(|a| a.reference_tokens);
    let base = match &r.outcome {
        Ok(outcome) => super::perf::stream_record(WORKLOAD_CASE, r.prompt_tokens, outcome),
        Err(_) => RequestRecord {
            case: WORKLOAD_CASE.to_string(),
            prompt_tokens: r.prompt_tokens,
            ..RequestRecord::default()
        },
    };
    RequestRecord {
        ok,
        error: match (&r.outcome, ok) {
            (Err(e), _) => Some(e.to_string()),
            (Ok(_), false) => Some(format!(
                "{}: tokens other than the KVCR-off reference's",
                crate::verdict::tokens::CLAIM
            )),
            (Ok(_), true) => None,
        },
        request_id: Some(r.request_id.clone()),
        sent_at_ms: Some(ms(r.sent)),
        schedule: Some(crate::stats::ScheduledSend::new(r.intended, r.sent)),
        kvcr_ops: Vec::new(),
        ..base
    }
}
