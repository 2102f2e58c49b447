//! The second telemetry source of a vLLM-style worker: the `KV Transfer
//! metrics:` line its engine logs once per stats interval (10 s in vLLM),
//! which must agree with its Prometheus counters where the two overlap.
//!
//! Both are compared as totals since the worker started (every interval
//! line of its log, summed, against its `/metrics`): a window would cut an
//! interval in two, since a line also carries what happened just before the
//! window opened. The line comes at the end of an interval, so the check
//! polls, with a deadline, until the log has caught up.

use std::time::Duration;

use crate::stack::Worker;
use crate::telemetry::{Counter, IntervalLogReader};
use crate::wait::{self, Poll};

use super::{CaseCtx, CaseError, CaseResult};

/// Three stats intervals of vLLM: a line is logged every 10 s.
const LOG_DEADLINE: Duration = Duration::from_secs(35);
const LOG_POLL: Duration = Duration::from_millis(250);

impl CaseCtx<'_> {
    /// Every interval line `worker` logged adds up to its `/metrics` total
    /// for each of `counters`.
    pub fn expect_interval_log_agrees(&self, worker: &Worker, counters: &[Counter]) -> CaseResult {
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
        let mut last: Vec<(String, u64, u64)> = Vec::new();
        let outcome = wait::until(what, LOG_DEADLINE, LOG_POLL, || {
            if let Err(e) = reader.poll() {
                return Poll::Abort(format!("cannot read {}: {e}", log.display()));
            }
            let exported = match self.snapshot(worker) {
                Ok(s) => s,
                Err(e) => return Poll::Abort(e.message),
            };
            let logged = reader.snapshot();
            last = counters
                .iter()
                .map(|c| {
                    let whole = |v: Option<f64>| v.map_or(0, |v| v.round().max(0.0) as u64);
                    (
                        c.to_string(),
                        whole(logged.counter(c)),
                        whole(exported.counter(c)),
                    )
                })
                .collect();
            if let Some((c, got, want)) = last.iter().find(|(_, got, want)| got > want) {
                return Poll::Abort(format!(
                    "worker {} logged {c} = {got}, its /metrics says {want}",
                    worker.name()
                ));
            }
            if last.iter().all(|(_, got, want)| got == want) {
                Poll::Ready(())
            } else {
                Poll::Pending(format!("logged vs /metrics so far: {last:?}"))
            }
        });
        let path = self.record(
            &format!("interval-log-{}.json", worker.name()),
            &serde_json::json!({
                "log": log,
                "lines": reader.accumulator().lines(),
                "counters": last.iter().map(|(c, logged, exported)| {
                    serde_json::json!({"counter": c, "logged": logged, "metrics": exported})
                }).collect::<Vec<_>>(),
            }),
        );
        outcome.map_err(|e| {
            // A mismatch is the verdict itself; a timeout says what it awaited.
            let why = if e.aborted {
                e.last_seen.clone()
            } else {
                e.to_string()
            };
            CaseError::new(format!("interval log agrees with /metrics: {why}")).with_evidence(path)
        })
    }
}
