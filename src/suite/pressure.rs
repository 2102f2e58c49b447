//! What the production-conditions cases (TC-07..TC-12) ask of a worker and
//! of the logs: a prompt's block hashes, where KVCR holds blocks now, the
//! engine's KVCR lines in a window, the Guard pools' size in blocks, the
//! engine's state (`ctx.pressure()`); the scan of every component log for
//! KVCR's bad lines, claim probes and a stopped worker are in
//! `pressure_probes.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::engine::Need;
use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::telemetry::engine_kvcr_log::{self, EngineKvcrLine, Located};
use crate::telemetry::guard_log::{GuardEvent, GuardLogReader};
use crate::wait::{self, Poll};

use super::ask::block_on;
use super::{CaseCtx, CaseError};

const HTTP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a `POST /kvcr/fetch` may take: KVCR answers a fetch by its
/// operation timeout (5 s by default), and then some.
const FETCH_HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a deposit's outcome may take to reach the worker's log.
const DEPOSIT_LOG_DEADLINE: Duration = Duration::from_secs(15);
const LOG_POLL: Duration = Duration::from_millis(25);

/// KVCR's own reports of a case's workers (`ctx.pressure()`).
pub struct Pressure<'c> {
    pub(super) ctx: &'c CaseCtx<'c>,
}

impl<'c> Pressure<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// This case's evidence directory (where `ctx.record` writes).
    pub fn case_dir(&self) -> PathBuf {
        self.ctx.evidence.dir()
    }
}

/// A point in a worker's log: the engine's KVCR lines after it are a window.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LogMark(pub u64);

/// Every component log's length at a moment (files created later start at 0).
#[derive(Debug, Clone, Default, Serialize)]
pub struct LogMarks(pub(super) BTreeMap<PathBuf, u64>);

async fn post_json(url: &str, body: &Value) -> Result<Value, String> {
    post_json_within(url, body, HTTP_TIMEOUT).await
}

/// `POST url` with a JSON body, answered within `timeout`; a status other
/// than 2xx is an error carrying the answer's text.
pub(super) async fn post_json_within(
    url: &str,
    body: &Value,
    timeout: Duration,
) -> Result<Value, String> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let response = client
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(format!("POST {url}: HTTP {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("POST {url}: {e}: {text}"))
}

async fn get_json(url: &str) -> Result<Value, String> {
    let client = reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    response.json().await.map_err(|e| format!("GET {url}: {e}"))
}

impl Pressure<'_> {
    /// The router's hashes of `prompt`'s full blocks, as `worker`'s engine
    /// computes them (`POST /blocks`).
    pub fn block_hashes(&self, worker: &Worker, prompt: &Prompt) -> Result<Vec<u64>, CaseError> {
        let url = format!("{}/blocks", worker.admin_url());
        let answer = block_on(
            self.ctx,
            post_json(&url, &json!({"token_ids": prompt.tokens})),
        )?
        .map_err(CaseError::new)?;
        answer["hashes"]
            .as_array()
            .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
            .ok_or_else(|| CaseError::new(format!("{url} answered {answer}, not a hash list")))
    }

    /// Where `worker`'s KVCR holds each of `hashes` now: `local`, `g3` or
    /// `miss` (`POST /kvcr/holding`; a query with no hint, not an access).
    pub fn holding(
        &self,
        worker: &Worker,
        hashes: &[u64],
    ) -> Result<BTreeMap<u64, String>, CaseError> {
        self.holding_for(worker, hashes, None)
    }

    /// As [`Self::holding`], the query made under `request_id` when given
    /// (KVCR numbers each request's queries in its query decisions); an
    /// engine that does not say it queried under that id fails.
    pub fn holding_for(
        &self,
        worker: &Worker,
        hashes: &[u64],
        request_id: Option<&str>,
    ) -> Result<BTreeMap<u64, String>, CaseError> {
        let url = format!("{}/kvcr/holding", worker.admin_url());
        let body = json!({"hashes": hashes, "request_id": request_id});
        let answer = block_on(self.ctx, post_json(&url, &body))?.map_err(CaseError::new)?;
        if request_id.is_some() && answer["request_id"].as_str() != request_id {
            return Err(CaseError::new(format!(
                "{url} answered {answer}: not a query under request id {}",
                request_id.unwrap_or_default()
            )));
        }
        let held = answer["holding"]
            .as_object()
            .ok_or_else(|| CaseError::new(format!("{url} answered {answer}")))?;
        hashes
            .iter()
            .map(|h| {
                held.get(&h.to_string())
                    .and_then(Value::as_str)
                    .map(|w| (*h, w.to_string()))
                    .ok_or_else(|| CaseError::new(format!("{url} said nothing of block {h}")))
            })
            .collect()
    }

    /// Stages `hashes` into `worker`'s KVCR pool with `KVCR.fetch` (from its
    /// disk tier, or a hinted peer) and gives the fetch's claims back at
    /// once (`POST /kvcr/fetch`; CPU engine): which blocks arrived.
    pub fn stage(&self, worker: &Worker, hashes: &[u64]) -> Result<Staged, CaseError> {
        let url = format!("{}/kvcr/fetch", worker.admin_url());
        let answer = block_on(
            self.ctx,
            post_json_within(&url, &json!({"hashes": hashes}), FETCH_HTTP_TIMEOUT),
        )?
        .map_err(CaseError::new)?;
        let fetched = answer["fetched"]
            .as_object()
            .ok_or_else(|| CaseError::new(format!("{url} answered {answer}")))?;
        let fetched = hashes
            .iter()
            .map(|h| {
                fetched
                    .get(&h.to_string())
                    .and_then(Value::as_bool)
                    .map(|ok| (*h, ok))
                    .ok_or_else(|| CaseError::new(format!("{url} said nothing of block {h}")))
            })
            .collect::<Result<_, _>>()?;
        let released = answer["released"]
            .as_u64()
            .ok_or_else(|| CaseError::new(format!("{url} answered {answer}, no `released`")))?;
        Ok(Staged { fetched, released })
    }

    /// Has `worker`'s engine make the calls KVCR must refuse on its own
    /// KVCR (`POST /kvcr/probe/api_misuse`, `cpu_engine.api_misuse_probe`):
    /// `resident` is a block its KVCR holds in its pool. What KVCR did with
    /// each, and its state before and after.
    pub fn api_misuse(
        &self,
        worker: &Worker,
        resident: Option<u64>,
    ) -> Result<MisuseReport, CaseError> {
        let url = format!("{}/kvcr/probe/api_misuse", worker.admin_url());
        let answer = block_on(
            self.ctx,
            post_json_within(&url, &json!({ "resident": resident }), FETCH_HTTP_TIMEOUT),
        )?
        .map_err(CaseError::new)?;
        serde_json::from_value(answer.clone()).map_err(|e| {
            CaseError::new(format!(
                "{url} answered {answer}, not the probe's report: {e}"
            ))
        })
    }

    /// Has `worker`'s engine deposit `hashes` (blocks KVCR does not hold)
    /// and deliver them back while KVCR is still filling them, holding the
    /// fill for `hold_ms` (`POST /kvcr/probe/deliver_while_filling`; CPU
    /// engine): what KVCR answered the deliver and the deposit.
    pub fn deliver_while_filling(
        &self,
        worker: &Worker,
        hashes: &[u64],
        hold_ms: u64,
    ) -> Result<FillingProbe, CaseError> {
        let url = format!("{}/kvcr/probe/deliver_while_filling", worker.admin_url());
        let body = json!({"hashes": hashes, "hold_ms": hold_ms});
        let answer = block_on(self.ctx, post_json_within(&url, &body, FETCH_HTTP_TIMEOUT))?
            .map_err(CaseError::new)?;
        serde_json::from_value(answer.clone()).map_err(|e| {
            CaseError::new(format!(
                "{url} answered {answer}, not the probe's report: {e}"
            ))
        })
    }

    /// The blocks of `hashes` that `worker`'s KVCR holds in `tier` (`local`, `g3`).
    pub fn held_in(
        &self,
        worker: &Worker,
        hashes: &[u64],
        tier: &str,
    ) -> Result<BTreeSet<u64>, CaseError> {
        Ok(self
            .holding(worker, hashes)?
            .into_iter()
            .filter(|(_, w)| w == tier)
            .map(|(h, _)| h)
            .collect())
    }

    /// `worker`'s `GET /state` (CPU engine).
    pub fn engine_state(&self, worker: &Worker) -> Result<Value, CaseError> {
        let url = format!("{}/state", worker.admin_url());
        block_on(self.ctx, get_json(&url))?.map_err(CaseError::new)
    }

    /// Where `worker`'s log ends now.
    pub fn log_mark(&self, worker: &Worker) -> LogMark {
        LogMark(
            std::fs::metadata(worker.process.log_path())
                .map(|m| m.len())
                .unwrap_or(0),
        )
    }

    /// The lines of `worker`'s log since `mark` that contain `needle`.
    pub fn log_lines_since(
        &self,
        worker: &Worker,
        mark: LogMark,
        needle: &str,
    ) -> Result<Vec<String>, CaseError> {
        let (bytes, start) = read_log_from(worker, mark)?;
        Ok(String::from_utf8_lossy(&bytes[start..])
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect())
    }

    /// The engine's KVCR lines `worker` logged since `mark`.
    pub fn kvcr_lines_since(
        &self,
        worker: &Worker,
        mark: LogMark,
    ) -> Result<Vec<Located>, CaseError> {
        let log = worker.process.log_path();
        engine_kvcr_log::read_since(log, mark.0)
            .map(|(lines, _)| lines)
            .map_err(|e| {
                CaseError::new(format!("cannot read {}: {e}", log.display())).with_evidence(log)
            })
    }

    /// Waits until `worker` logged the outcome of a deposit since `mark`
    /// and returns its lines from `mark` on.
    pub fn await_deposit_results(
        &self,
        worker: &Worker,
        mark: LogMark,
        what: &str,
    ) -> Result<Vec<Located>, CaseError> {
        self.ctx.doing(format!("waiting for {what}"))?;
        wait::until(what, DEPOSIT_LOG_DEADLINE, LOG_POLL, || {
            if let Err(cancelled) = self.ctx.activity.check() {
                return Poll::Abort(cancelled.to_string());
            }
            match self.kvcr_lines_since(worker, mark) {
                Ok(lines)
                    if lines
                        .iter()
                        .any(|l| matches!(l.event, EngineKvcrLine::Deposit { .. })) =>
                {
                    Poll::Ready(lines)
                }
                Ok(_) => Poll::Pending("no `KVCR deposit results` line yet".into()),
                Err(e) => Poll::Abort(e.message),
            }
        })
        .map_err(CaseError::from)
    }

    /// Blocks of the geometry each Guard pool holds, from the `pool_sizes_bytes`
    /// of the `KVCR service ready` line of the Guard service holding `worker`'s pool.
    pub fn guard_pool_blocks(&self, worker: &Worker) -> Result<Vec<u64>, CaseError> {
        let guard = self
            .ctx
            .stack
            .guard_of(worker)
            .ok_or_else(|| CaseError::new("this stack runs no KVCR Guard service"))?;
        let mut reader = GuardLogReader::from_offset(guard.log_path(), 0);
        reader.poll().map_err(|e| {
            CaseError::new(format!("cannot read {}: {e}", guard.log_path().display()))
        })?;
        let sizes = reader
            .events()
            .iter()
            .rev()
            .find_map(|e| match &e.event {
                GuardEvent::ServiceReady(ready) => Some(ready.pool_sizes_bytes.clone()),
                _ => None,
            })
            .ok_or_else(|| {
                CaseError::new("the Guard service logged no `KVCR service ready` line")
                    .with_evidence(guard.log_path())
            })?;
        Ok(crate::engine::pool_size::blocks_in_pools(
            &self.ctx.geometry(),
            &sizes,
        ))
    }
}

pub use crate::verdict::api_misuse::MisuseReport;
pub use crate::verdict::deadline_storm::FillingProbe;
pub use crate::verdict::full_tiers::Staged;
pub use crate::verdict::stall::Latch;

impl Pressure<'_> {
    /// The blocks `worker` committed to its KVCR pool since `mark` and
    /// still holds there (stored minus removed, by KVCR's inventory events).
    pub fn committed_since(
        &self,
        worker: &Worker,
        mark: LogMark,
    ) -> Result<BTreeSet<u64>, CaseError> {
        let lines = self.kvcr_lines_since(worker, mark)?;
        Ok(engine_kvcr_log::resident(
            &lines,
            crate::telemetry::names::engine_kvcr_log::TIER_LOCAL_G2,
        ))
    }

    /// Blocks `worker`'s pool holds now (KVCR's allocated slots over the
    /// pages of a block); `None` when KVCR does not report the gauge.
    pub fn pool_blocks_now(&self, worker: &Worker) -> Result<Option<u64>, CaseError> {
        let snapshot = self.ctx.snapshot(worker)?;
        let pages = self.ctx.geometry().pages_per_block().max(1);
        Ok(snapshot
            .gauge(&crate::telemetry::Gauge::State(
                crate::telemetry::Resource::LocalG2AllocatedSlots,
            ))
            .map(|slots| slots as u64 / pages))
    }

    /// The blocks `peer` received from `source` (a control endpoint,
    /// `local` or `g3`) since `mark`.
    pub fn delivered_since(
        &self,
        peer: &Worker,
        mark: LogMark,
        source: &str,
    ) -> Result<BTreeSet<u64>, CaseError> {
        let lines = self.kvcr_lines_since(peer, mark)?;
        Ok(engine_kvcr_log::delivered_from(&lines, source))
    }

    /// The source-stall latch `worker` reported since `mark`, if any: the
    /// engine's relayed event and its `/state`, or, on an engine that relays
    /// none (vLLM), KVCR's own `KVCR source progress stalled` line.
    pub fn latch_since(&self, worker: &Worker, mark: LogMark) -> Result<Option<Latch>, CaseError> {
        if !self.ctx.supports(Need::RelayedKvcrEvents).is_yes() {
            return self.kvcr_latch_line_since(worker, mark);
        }
        let lines = self.kvcr_lines_since(worker, mark)?;
        let Some(line) = lines.into_iter().find(|l| {
            matches!(&l.event, EngineKvcrLine::Resilience { kind, .. }
                if kind == crate::telemetry::names::engine_kvcr_log::KIND_SOURCE_STALLED)
        }) else {
            return Ok(None);
        };
        let state = self.engine_state(worker)?;
        let EngineKvcrLine::Resilience { message, .. } = &line.event else {
            return Ok(None);
        };
        Ok(Some(Latch {
            component: worker.process.name().to_string(),
            log: worker.process.log_path().to_path_buf(),
            line_no: line.line_no,
            at: line
                .text
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" "),
            message: message.clone(),
            state_stalled: Some(state["kvcr_source_stalled"].as_bool().unwrap_or(false)),
        }))
    }

    /// KVCR's own latch line in `worker`'s log since `mark`. It carries no
    /// timestamp (KVCR's logger has no handler in vLLM: Python's last-resort
    /// handler prints it), so `at` is when the harness read it.
    fn kvcr_latch_line_since(
        &self,
        worker: &Worker,
        mark: LogMark,
    ) -> Result<Option<Latch>, CaseError> {
        let (bytes, start) = read_log_from(worker, mark)?;
        let first_line = bytes[..start].iter().filter(|b| **b == b'\n').count() + 1;
        let Some((line_no, message)) =
            kvcr_latch_line(&String::from_utf8_lossy(&bytes[start..]), first_line)
        else {
            return Ok(None);
        };
        Ok(Some(Latch {
            component: worker.process.name().to_string(),
            log: worker.process.log_path().to_path_buf(),
            line_no,
            at: format!("read at {}", crate::evidence::UtcTime::now().rfc3339()),
            message,
            state_stalled: None,
        }))
    }

    /// Waits (up to `budget`) for `worker` to report the source-stall latch.
    pub fn await_latch(
        &self,
        worker: &Worker,
        mark: LogMark,
        budget: Duration,
    ) -> Result<Latch, CaseError> {
        let what = format!(
            "worker {} to report KVCR's source-stall latch",
            worker.name()
        );
        self.ctx.doing(&what)?;
        wait::until(what, budget, LOG_POLL, || {
            if let Err(cancelled) = self.ctx.activity.check() {
                return Poll::Abort(cancelled.to_string());
            }
            match self.latch_since(worker, mark) {
                Ok(Some(latch)) => Poll::Ready(latch),
                Ok(None) => {
                    Poll::Pending("no `KVCR resilience event kind=source_stalled` line".into())
                }
                Err(e) => Poll::Abort(e.message),
            }
        })
        .map_err(CaseError::from)
    }
}

/// The first `KVCR source progress stalled` line of `text` (a log window
/// whose first line is `first_line`): its line number and text.
fn kvcr_latch_line(text: &str, first_line: usize) -> Option<(usize, String)> {
    text.lines()
        .enumerate()
        .find(|(_, l)| l.contains(crate::telemetry::names::kvcr_bad_lines::SOURCE_STALLED))
        .map(|(i, l)| (first_line + i, l.trim().to_string()))
}

/// `worker`'s whole log and the offset of `mark` in it (its end when the log
/// is shorter).
fn read_log_from(worker: &Worker, mark: LogMark) -> Result<(Vec<u8>, usize), CaseError> {
    let log = worker.process.log_path();
    let bytes = std::fs::read(log).map_err(|e| {
        CaseError::new(format!("cannot read {}: {e}", log.display())).with_evidence(log)
    })?;
    let start = usize::try_from(mark.0)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    Ok((bytes, start))
}

#[cfg(test)]
mod latch_line_tests {
    use super::kvcr_latch_line;

    /// As vLLM's worker log shows it (Python's last-resort handler: no
    /// timestamp, no logger name), among the engine's own lines.
    #[test]
    fn finds_kvcr_s_own_latch_line_and_its_number() {
        let text = "(EngineCore pid=7) INFO 12-02 01:30:47 [spec.py:377] Created secondary tier #0 (kvcr)\n\
                    KVCR source progress stalled for 3012.4 ms (timeout: 2000 ms); new source writes disabled until restart\n";
        assert_eq!(
            kvcr_latch_line(text, 40),
            Some((
                41,
                "KVCR source progress stalled for 3012.4 ms (timeout: 2000 ms); new source writes disabled until restart".into()
            ))
        );
        assert_eq!(kvcr_latch_line("KVCR closed\nsource writes on\n", 1), None);
    }
}
