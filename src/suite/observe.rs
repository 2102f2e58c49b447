//! What a case observes beyond one snapshot: a count it waits for, both
//! sides of a peer transfer, one request's host-tier loads, the transport a
//! transfer between nodes took (UCX's own report), the second telemetry
//! source of a vLLM-style worker (its interval log), and the component log
//! lines of one request. Every counter read is required: one a worker does
//! not report fails, never reads as 0.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::telemetry::{self, Counter, Delta, IntervalLogReader, Snapshot, Unreadable};
use crate::verdict::local::HostTierHit;
use crate::verdict::transfer::PeerTransfer;
use crate::verdict::Violation;
use crate::wait::{self, Poll};

use super::claim::clause;
use super::readings::{self, PrefillAccounting};
use super::{CaseCtx, CaseError, CaseResult};
use crate::engine::{Need, Support};
use crate::stack::Worker;

/// How often telemetry is polled while a case waits for a count.
const TELEMETRY_POLL: Duration = Duration::from_millis(50);
/// How long a case waits for asynchronous telemetry (deposits, the source
/// side of a transfer, a UCX table) to show up.
const TELEMETRY_DEADLINE: Duration = Duration::from_secs(15);
/// How long a deposit's byte counter may lag its block counter (KVCR raises
/// them one after the other; a scrape can fall between).
const FILL_BYTES_DEADLINE: Duration = Duration::from_secs(1);
/// Three stats intervals of vLLM: an interval line is logged every 10 s.
const INTERVAL_LOG_DEADLINE: Duration = Duration::from_secs(35);
const INTERVAL_LOG_POLL: Duration = Duration::from_millis(250);

/// A peer transfer's numbers and the deltas they came from.
#[derive(Debug, Clone, Serialize)]
pub struct PeerTransferDeltas {
    pub transfer: PeerTransfer,
    pub source: Delta,
    pub target: Delta,
}

/// Telemetry waits and observations of one case (`ctx.observe()`).
pub struct Observe<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> Observe<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// Polls `worker`'s telemetry until `counter` rose by at least `at_least`
    /// since `before`, and returns the delta at that moment.
    pub fn await_count(
        &self,
        worker: &Worker,
        before: &Snapshot,
        counter: &Counter,
        at_least: u64,
        what: &str,
    ) -> Result<Delta, CaseError> {
        let ctx = self.ctx;
        ctx.doing(format!("waiting for {what}"))?;
        wait::until(what, TELEMETRY_DEADLINE, TELEMETRY_POLL, || {
            if let Err(cancelled) = ctx.activity.check() {
                return Poll::Abort(cancelled.to_string());
            }
            match ctx.delta_since(worker, before) {
                Ok(delta) => match delta.required_count(counter) {
                    Ok(n) if n >= at_least => Poll::Ready(delta),
                    Ok(n) => Poll::Pending(format!("{counter} rose by {n}")),
                    Err(absent) => Poll::Pending(absent.to_string()),
                },
                Err(e) => Poll::Abort(e.message),
            }
        })
        .map_err(CaseError::from)
    }

    /// Polls `worker`'s telemetry until KVCR answered the deposit of every
    /// block the engine computed since `before` (success, failed or
    /// dropped), and returns the delta at that moment: everything KVCR did
    /// for those deposits (admissions, evictions) is then in it.
    pub fn await_deposits_answered(
        &self,
        worker: &Worker,
        before: &Snapshot,
    ) -> Result<Delta, CaseError> {
        let ctx = self.ctx;
        let what = format!("worker {} to have every deposit answered", worker.name());
        ctx.doing(format!("waiting for {what}"))?;
        wait::until(what, TELEMETRY_DEADLINE, TELEMETRY_POLL, || {
            if let Err(cancelled) = ctx.activity.check() {
                return Poll::Abort(cancelled.to_string());
            }
            let delta = match ctx.delta_since(worker, before) {
                Ok(delta) => delta,
                Err(e) => return Poll::Abort(e.message),
            };
            let computed = delta.count(&Counter::ComputedBlocks);
            let answered: u64 = ["success", "failed", "dropped"]
                .iter()
                .map(|o| delta.count(&Counter::KvcrDepositBlocks((*o).into())))
                .sum();
            if computed > 0 && answered >= computed {
                Poll::Ready(delta)
            } else {
                Poll::Pending(format!(
                    "{answered} of {computed} computed blocks' deposits answered"
                ))
            }
        })
        .map_err(CaseError::from)
    }

    /// KVCR's `local_fill` bytes since `before` equal its `local_fill`
    /// blocks × the bytes of a block (a deposit the case just waited for).
    /// Polled briefly, so a scrape between the two counters' increments
    /// does not read as a mismatch; an absent counter fails.
    pub fn expect_fill_bytes(&self, worker: &Worker, before: &Snapshot) -> CaseResult {
        let ctx = self.ctx;
        let bytes_per_block = ctx.geometry().bytes_per_block();
        let judge = |delta: &Delta| -> Result<Result<(), Violation>, Unreadable> {
            let blocks =
                delta.required_count(&Counter::TransferBlocks(telemetry::Scope::LocalFill))?;
            let bytes =
                delta.required_count(&Counter::TransferBytes(telemetry::Scope::LocalFill))?;
            Ok(crate::verdict::local::expect_fill_bytes(
                blocks,
                bytes,
                bytes_per_block,
            ))
        };
        let mut last = None;
        let outcome = wait::until(
            format!(
                "worker {}'s local_fill bytes to match its blocks",
                worker.name()
            ),
            FILL_BYTES_DEADLINE,
            TELEMETRY_POLL,
            || {
                let delta = match ctx.delta_since(worker, before) {
                    Ok(d) => d,
                    Err(e) => return Poll::Abort(e.message),
                };
                match judge(&delta) {
                    Ok(Ok(())) => Poll::Ready(()),
                    Ok(Err(v)) => {
                        let text = v.to_string();
                        last = Some((v, delta));
                        Poll::Pending(text)
                    }
                    Err(absent) => Poll::Abort(absent.to_string()),
                }
            },
        );
        match (outcome, last) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some((violation, delta))) => ctx.check(
                "deposit-bytes.json",
                &json!({"worker": worker.name(), "delta": delta, "bytes_per_block": bytes_per_block}),
                Err(violation),
            ),
            (Err(e), None) => Err(CaseError::new(format!(
                "KVCR deposit bytes: {}",
                if e.aborted { e.last_seen.clone() } else { e.to_string() }
            ))),
        }
    }

    /// Both sides of a peer transfer since `source_before` / `target_before`.
    /// The source reports its `source_write` asynchronously, so when the
    /// target delivered remotely this waits for the source to say so.
    pub fn peer_transfer(
        &self,
        source: &Worker,
        source_before: &Snapshot,
        target: &Worker,
        target_before: &Snapshot,
    ) -> Result<PeerTransferDeltas, CaseError> {
        let target_delta = self.ctx.delta_since(target, target_before)?;
        let delivered = target_delta.required_count(&Counter::OpCount(
            telemetry::Scope::RemoteDeliver,
            telemetry::OpResult::Success,
        ))?;
        let source_delta = if delivered > 0 {
            self.await_count(
                source,
                source_before,
                &Counter::OpCount(telemetry::Scope::SourceWrite, telemetry::OpResult::Success),
                1,
                &format!(
                    "worker {} to report the source_write of the transfer to {}",
                    source.name(),
                    target.name()
                ),
            )
            // The target delivered, so a source that never says so is its
            // own failure (a lost or unreported write), not a silent 0.
            .map_err(|e| CaseError {
                message: format!(
                    "the target {} delivered remotely, but the source did not report it: {}",
                    target.name(),
                    e.message
                ),
                ..e
            })?
        } else {
            self.ctx.delta_since(source, source_before)?
        };
        Ok(PeerTransferDeltas {
            transfer: readings::peer_transfer(&source_delta, &target_delta)?,
            source: source_delta,
            target: target_delta,
        })
    }

    /// The source side of a peer read served from engine memory (TC-18),
    /// with what its KVCR pool held of the prefix before.
    pub fn engine_memory_source(
        &self,
        source: &Delta,
        pool_blocks_before: u64,
    ) -> Result<crate::verdict::engine_memory::EngineMemorySource, Unreadable> {
        readings::engine_memory_source(source, pool_blocks_before)
    }

    /// The target side of a read it staged with `KVCR.fetch` (TC-18), with
    /// what its KVCR pool holds of the prefix after.
    pub fn fetched_read(
        &self,
        target: &Delta,
        pool_blocks_after: u64,
    ) -> Result<crate::verdict::engine_memory::FetchedRead, Unreadable> {
        readings::fetched_read(target, pool_blocks_after)
    }

    /// How this stack's engine tells the prompt blocks it computed.
    pub fn prefill_accounting(&self) -> PrefillAccounting {
        if self.ctx.engine().counts_blocks() {
            PrefillAccounting::Counted
        } else {
            PrefillAccounting::FromPrefixCache {
                block_size: u64::from(self.ctx.geometry().block_size_tokens),
            }
        }
    }

    /// The prompt blocks computed in `delta`'s window, or "not checked"
    /// where the engine reports nothing to derive them from
    /// ([`readings::computed_reading`]).
    pub fn computed_reading(
        &self,
        delta: &Delta,
    ) -> Result<crate::verdict::transfer::ComputedReading, Unreadable> {
        readings::computed_reading(delta, self.prefill_accounting())
    }

    /// The prompt blocks computed in `delta`'s window: the engine's count,
    /// or (vLLM) derived from its prefix-cache counters; absent fails.
    pub fn computed_blocks(&self, delta: &Delta) -> Result<u64, Unreadable> {
        readings::computed_blocks(delta, self.prefill_accounting())
    }

    /// One request's host-tier loads on `delta`'s worker.
    pub fn host_tier_hit(
        &self,
        delta: &Delta,
        cached_tokens: Option<u64>,
    ) -> Result<HostTierHit, Unreadable> {
        readings::host_tier_hit(delta, cached_tokens, self.prefill_accounting())
    }

    /// `worker`'s whole log so far (empty when it cannot be read).
    pub fn worker_log(&self, worker: &Worker) -> String {
        std::fs::read(worker.process.log_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The component log lines of one request (its `x-request-id`, and the
    /// Dynamo request id the frontend logged beside it).
    pub fn log_lines_of(&self, request_id: &str) -> Vec<String> {
        super::requests::log_lines(self.ctx.logs_dir(), &[request_id])
    }

    /// When `source` and `reader` run on different nodes: the transfer
    /// between them went over TCP through the nodes' veth, as UCX itself
    /// reports (`UCX_PROTO_INFO=y`) in the log of the side that moved the
    /// data; a peer reached over shared memory (`cma`, `posix`, `sysv`)
    /// fails. On one node there is nothing to check.
    pub fn expect_crossed_network(&self, source: &Worker, reader: &Worker) -> CaseResult {
        let Some(crossing) = self.ctx.stack.crossing(source, reader) else {
            return Ok(());
        };
        let judge = |side: &crate::stack::Side| {
            let log = std::fs::read_to_string(&side.log).unwrap_or_default();
            crate::proc::ucx::expect_network_transfer(&log, &side.interface)
        };
        // UCX prints a protocol's table when it first selects it: wait (with
        // a deadline) until one side's log shows the transfer.
        let _ = wait::until(
            format!(
                "a UCX remote memory table in {} or {}",
                crossing.source.log.display(),
                crossing.reader.log.display()
            ),
            TELEMETRY_DEADLINE,
            TELEMETRY_POLL,
            || match (judge(&crossing.source), judge(&crossing.reader)) {
                (Err(a), Err(b)) => Poll::Pending(format!("{a}; {b}")),
                _ => Poll::Ready(()),
            },
        );
        let (at_source, at_reader) = (judge(&crossing.source), judge(&crossing.reader));
        let verdict = match (&at_source, &at_reader) {
            (Ok(t), _) | (_, Ok(t)) => {
                self.ctx.measure("ucx_transports", t);
                Ok(())
            }
            (Err(s), Err(r)) => Err(Violation {
                claim: clause::CROSSED_THE_NETWORK,
                detail: format!(
                    "{} ({}) -> {} ({}): at {}: {s}; at {}: {r} (UCX reports: {}, {})",
                    crossing.source.worker,
                    crossing.source.address,
                    crossing.reader.worker,
                    crossing.reader.address,
                    crossing.source.worker,
                    crossing.reader.worker,
                    crossing.source.log.display(),
                    crossing.reader.log.display()
                ),
            }),
        };
        self.ctx.check(
            "transport.json",
            &json!({ "crossing": crossing, "at_source": at_source, "at_reader": at_reader }),
            verdict,
        )
    }

    /// Every `KV Transfer metrics:` line `worker` logged (the line a
    /// vLLM-style engine logs once per stats interval) adds up to its
    /// `/metrics` total for each of `counters`, which `/metrics` must report
    /// non-zero ([`crate::verdict::interval`]). Meaningful where the two
    /// sources are independent (vLLM); on an engine that writes both from
    /// one source (the CPU engine) it is a consistency check of that source,
    /// and the case says the independent comparison was not checked.
    ///
    /// Both are compared as totals since the worker started: a window would
    /// cut an interval in two, since a line also carries what happened just
    /// before the window opened. The line comes at the end of an interval,
    /// so this polls, with a deadline, until the log has caught up.
    pub fn expect_interval_log_agrees(&self, worker: &Worker, counters: &[Counter]) -> CaseResult {
        use crate::verdict::interval::{self, Agreement, LoggedVsExported};
        let engine = self.ctx.engine().name();
        let independent = self.ctx.supports(Need::IndependentIntervalLog);
        let meaning = interval::meaning(independent.is_yes(), engine);
        if let Support::No(why) = &independent {
            self.ctx
                .not_checked("interval log vs /metrics as two sources", why);
        }
        let log = worker.process.log_path().to_path_buf();
        let mut reader = IntervalLogReader::from_offset(&log, 0).with_worker(worker.name());
        let what = format!(
            "worker {}'s `KV Transfer metrics` lines to add up to its /metrics for {}",
            worker.name(),
            counters
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut last: Vec<LoggedVsExported> = Vec::new();
        let outcome = wait::until(what, INTERVAL_LOG_DEADLINE, INTERVAL_LOG_POLL, || {
            if let Err(e) = reader.poll() {
                return Poll::Abort(format!("cannot read {}: {e}", log.display()));
            }
            let exported = match self.ctx.snapshot(worker) {
                Ok(s) => s,
                Err(e) => return Poll::Abort(e.message),
            };
            let logged = reader.snapshot();
            let whole = |v: Option<f64>| v.map(|v| v.round().max(0.0) as u64);
            last = counters
                .iter()
                .map(|c| LoggedVsExported {
                    counter: c.to_string(),
                    logged: whole(logged.counter(c)),
                    metrics: whole(exported.counter(c)),
                })
                .collect();
            match interval::judge(worker.name(), &last) {
                Agreement::Agree => Poll::Ready(()),
                Agreement::Pending(so_far) => Poll::Pending(so_far),
                Agreement::Disagree(why) => Poll::Abort(why),
            }
        });
        let path = self.ctx.record(
            &format!("interval-log-{}.json", worker.name()),
            &json!({
                "log": log,
                "meaning": meaning,
                "independent_sources": independent.is_yes(),
                "lines": reader.accumulator().lines(),
                "counters": last,
            }),
        );
        outcome.map_err(|e| {
            // A mismatch is the verdict itself; a timeout says what it awaited.
            let why = if e.aborted {
                e.last_seen.clone()
            } else {
                e.to_string()
            };
            CaseError::clause(
                clause::INTERVAL_LOG,
                format!("{why} (the comparison here is {meaning})"),
            )
            .with_evidence(path)
        })
    }
}
