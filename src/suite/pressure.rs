//! What the production-conditions cases (TC-07..TC-12) ask of a worker and
//! of the logs: a prompt's block hashes, where KVCR holds blocks now, the
//! engine's KVCR lines in a window, the Guard pools' size in blocks, the
//! engine's state, and the scan of every component log for KVCR's bad lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::telemetry::engine_kvcr_log::{self, EngineKvcrLine, Located};
use crate::telemetry::guard_log::{GuardEvent, GuardLogReader};
use crate::verdict::log_scan::{self, BadLine, Found};
use crate::wait::{self, Poll};

use super::{CaseCtx, CaseError, CaseResult};

const HTTP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a deposit's outcome may take to reach the worker's log.
const DEPOSIT_LOG_DEADLINE: Duration = Duration::from_secs(15);
const LOG_POLL: Duration = Duration::from_millis(25);

/// A point in a worker's log: the engine's KVCR lines after it are a window.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LogMark(pub u64);

/// Every component log's length at a moment (files created later start at 0).
#[derive(Debug, Clone, Default, Serialize)]
pub struct LogMarks(BTreeMap<PathBuf, u64>);

async fn post_json(url: &str, body: &Value) -> Result<Value, String> {
    let client = reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
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

impl CaseCtx<'_> {
    /// The router's hashes of `prompt`'s full blocks, as `worker`'s engine
    /// computes them (`POST /blocks`).
    pub fn block_hashes(&self, worker: &Worker, prompt: &Prompt) -> Result<Vec<u64>, CaseError> {
        let url = format!("{}/blocks", worker.admin_url());
        let answer = self
            .block_on(post_json(&url, &json!({"token_ids": prompt.tokens})))?
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
        let url = format!("{}/kvcr/holding", worker.admin_url());
        let answer = self
            .block_on(post_json(&url, &json!({"hashes": hashes})))?
            .map_err(CaseError::new)?;
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
        self.block_on(get_json(&url))?.map_err(CaseError::new)
    }

    /// Where `worker`'s log ends now.
    pub fn log_mark(&self, worker: &Worker) -> LogMark {
        LogMark(
            std::fs::metadata(worker.process.log_path())
                .map(|m| m.len())
                .unwrap_or(0),
        )
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
        self.doing(format!("waiting for {what}"))?;
        wait::until(what, DEPOSIT_LOG_DEADLINE, LOG_POLL, || {
            if let Err(cancelled) = self.activity.check() {
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
            &self.geometry(),
            &sizes,
        ))
    }

    /// Every component log's length now.
    pub fn log_marks(&self) -> LogMarks {
        LogMarks(
            log_files(&self.stack.layout.logs_dir)
                .into_iter()
                .map(|p| {
                    let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                    (p, len)
                })
                .collect(),
        )
    }

    /// Scans every component log from `marks` on (files created since, from
    /// their start) for KVCR's bad lines; fails on the first one of a kind
    /// the case did not expect, naming its file and line. The lines found go
    /// to `bad-lines.json`.
    pub fn expect_no_bad_lines_since(&self, marks: &LogMarks, expected: &[BadLine]) -> CaseResult {
        let found = scan_since(&self.stack.layout.logs_dir, marks);
        self.check(
            "bad-lines.json",
            &json!({"expected": expected, "found": found}),
            log_scan::expect_no_bad_lines(&found, expected),
        )
    }
}

fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The bad lines of every log in `dir` past its mark.
pub fn scan_since(dir: &Path, marks: &LogMarks) -> Vec<Found> {
    let mut found = Vec::new();
    for path in log_files(dir) {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let from = marks.0.get(&path).copied().unwrap_or(0);
        let start = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
        let first_line = bytes[..start].iter().filter(|b| **b == b'\n').count() + 1;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        found.extend(log_scan::scan(
            &name,
            &String::from_utf8_lossy(&bytes[start..]),
            first_line,
        ));
    }
    found
}

pub use crate::verdict::stall::Latch;

impl CaseCtx<'_> {
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
        let snapshot = self.snapshot(worker)?;
        let pages = self.geometry().pages_per_block().max(1);
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

    /// The source-stall latch `worker` reported since `mark`, if any.
    pub fn latch_since(&self, worker: &Worker, mark: LogMark) -> Result<Option<Latch>, CaseError> {
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
            state_stalled: state["kvcr_source_stalled"].as_bool().unwrap_or(false),
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
        self.doing(&what)?;
        wait::until(what, budget, LOG_POLL, || {
            if let Err(cancelled) = self.activity.check() {
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

    /// What a new claimant of group `guard_index` gets from the stack's
    /// Guard service now (`python -m cpu_engine.claim_probe`).
    pub fn claim_probe(&self, guard_index: u32) -> Result<ClaimProbe, CaseError> {
        self.claim_probe_with(guard_index, &self.claim_pools(), None)
    }

    /// The pools a worker of this stack claims with: (name, bytes per page).
    pub fn claim_pools(&self) -> Vec<(String, u64)> {
        let geometry = self.geometry();
        let kinds = geometry.pool_kinds();
        kinds
            .iter()
            .map(|kind| {
                let bytes = geometry
                    .pages
                    .iter()
                    .find(|(label, _)| label.split(':').next() == Some(kind.as_str()))
                    .map_or(0, |(_, b)| *b);
                // The CPU engine names its one dense pool `kv`.
                let name = if kinds.len() == 1 {
                    "kv".to_string()
                } else {
                    kind.clone()
                };
                (name, bytes)
            })
            .collect()
    }

    /// A claim of `guard_index` with these pools (a wrong layout on purpose)
    /// and this control port (a group answers on its first holder's port
    /// only; `None`: a free one).
    pub fn claim_probe_with(
        &self,
        guard_index: u32,
        pools: &[(String, u64)],
        port: Option<u16>,
    ) -> Result<ClaimProbe, CaseError> {
        let ctx = &self.stack.ctx;
        let mut cmd = std::process::Command::new(&ctx.python);
        cmd.args(["-m", "cpu_engine.claim_probe", "--socket"])
            .arg(&ctx.guard_socket)
            .args(["--guard-index", &guard_index.to_string()])
            .args(["--digest", &ctx.compatibility_digest]);
        for (name, bytes) in pools {
            cmd.args(["--pool", &format!("{name}:{bytes}")]);
        }
        if let Some(port) = port {
            cmd.args(["--port", &port.to_string()]);
        }
        cmd.env("PYTHONPATH", ctx.repo_root.join("fixtures/cpu-engine"))
            .current_dir(&ctx.repo_root);
        let started = std::time::Instant::now();
        let out = cmd
            .output()
            .map_err(|e| CaseError::new(format!("cannot run the claim probe: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut probe: ClaimProbe = serde_json::from_str(text.trim()).map_err(|e| {
            CaseError::new(format!(
                "the claim probe answered `{}` ({e}); stderr: {}",
                text.trim(),
                String::from_utf8_lossy(&out.stderr)
            ))
        })?;
        probe.wall_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(probe)
    }
}

pub use crate::verdict::service::ClaimProbe;

/// A worker's engine stopped with SIGSTOP (state `T` verified); continued on
/// drop, unless it died meanwhile (a Guard's heartbeat fence SIGKILLs it).
pub struct StoppedWorker<'a> {
    worker: &'a Worker,
    /// When the stop was verified.
    pub at: std::time::Instant,
}

impl CaseCtx<'_> {
    /// SIGSTOPs `worker`'s engine process and verifies its state is `T`.
    pub fn stop_worker_process<'w>(
        &self,
        worker: &'w Worker,
    ) -> Result<StoppedWorker<'w>, CaseError> {
        let pid = worker.process.pid();
        worker
            .process
            .signal(nix::sys::signal::Signal::SIGSTOP)
            .map_err(|e| {
                CaseError::new(format!(
                    "fault not applied: SIGSTOP of worker {}: {e}",
                    worker.name()
                ))
            })?;
        let stopped = StoppedWorker {
            worker,
            at: std::time::Instant::now(),
        };
        wait::until(
            format!(
                "worker {}'s pid {pid} to be stopped (state T)",
                worker.name()
            ),
            Duration::from_secs(2),
            Duration::from_millis(5),
            || match crate::proc::procfs::state(pid) {
                Some('T') => Poll::Ready(()),
                other => Poll::Pending(format!("state {other:?}")),
            },
        )
        .map_err(|e| CaseError::new(format!("fault not applied: {e}")))?;
        Ok(stopped)
    }
}

impl Drop for StoppedWorker<'_> {
    fn drop(&mut self) {
        if self.worker.process.is_running() {
            if let Err(e) = self
                .worker
                .process
                .signal(nix::sys::signal::Signal::SIGCONT)
            {
                tracing::warn!("could not continue worker {}: {e}", self.worker.name());
            }
        }
    }
}

impl CaseCtx<'_> {
    /// Turns `switches` on on `worker` in addition to those already on
    /// (a fault row's), verified as [`CaseCtx::engine_faults`]; every
    /// switch is cleared on drop.
    pub fn engine_faults_added(
        &self,
        worker: &str,
        switches: Value,
    ) -> Result<super::EngineFaults, CaseError> {
        let url = format!("{}/faults", self.worker(worker)?.admin_url());
        let mut active = self.block_on(get_json(&url))?.map_err(CaseError::new)?;
        if let (Some(active), Some(more)) = (active.as_object_mut(), switches.as_object()) {
            active.extend(more.clone());
        }
        self.engine_faults(&[worker], active)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_only_past_each_mark_and_new_files_whole() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("worker-A.log");
        std::fs::write(&a, "Traceback (most recent call last):\n").unwrap();
        let marks = LogMarks(
            [(a.clone(), std::fs::metadata(&a).unwrap().len())]
                .into_iter()
                .collect(),
        );
        assert!(scan_since(dir.path(), &marks).is_empty());
        std::fs::write(
            &a,
            "Traceback (most recent call last):\nKVCR pool recovery disabled; x\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("guard.2.log"), "KVCR Guard 0 failed\n").unwrap();
        let found = scan_since(dir.path(), &marks);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].log.as_str(), found[0].line_no),
            ("guard.2.log", 1)
        );
        assert_eq!(
            (found[1].log.as_str(), found[1].line_no),
            ("worker-A.log", 2)
        );
    }
}
