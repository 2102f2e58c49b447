//! The rest of `ctx.pressure()`: every component log scanned for KVCR's bad
//! lines past a mark, what a new claimant of a Guard group gets, and a
//! worker's engine stopped with SIGSTOP.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::stack::{Stack, Worker};
use crate::verdict::log_scan::{self, BadLine, Found};
use crate::wait::{self, Poll};

use super::pressure::{LogMarks, Pressure};
use super::{CaseError, CaseResult};

impl Pressure<'_> {
    /// Every component log's length now.
    pub fn log_marks(&self) -> LogMarks {
        LogMarks(
            log_files(self.ctx.logs_dir())
                .unwrap_or_default()
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
    /// to `bad-lines.json`. A scan that read no log, or could not read one,
    /// fails: it saw nothing, which is no evidence of no bad line.
    pub fn expect_no_bad_lines_since(&self, marks: &LogMarks, expected: &[BadLine]) -> CaseResult {
        let found = scan_since(self.ctx.logs_dir(), marks).map_err(CaseError::new)?;
        self.ctx.log_audit.expect(expected);
        self.ctx.check(
            "bad-lines.json",
            &json!({"expected": expected, "found": found}),
            log_scan::expect_no_bad_lines(&found, expected),
        )
    }
}

/// The component logs (`*.log`) in `dir`, sorted.
fn log_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "bad-line scan: cannot read the logs directory {}: {e}",
            dir.display()
        )
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("bad-line scan: cannot list {}: {e}", dir.display()))?
            .path();
        if path.extension().is_some_and(|x| x == "log") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The bad lines of every log in `dir` past its mark. Fails when `dir`
/// holds no log or a log cannot be read: a scan that read nothing proves
/// nothing.
pub fn scan_since(dir: &Path, marks: &LogMarks) -> Result<Vec<Found>, String> {
    let logs = log_files(dir)?;
    if logs.is_empty() {
        return Err(format!(
            "bad-line scan: no component log (*.log) in {}, so no line was scanned",
            dir.display()
        ));
    }
    scan_files_between(&logs, marks, &LogMarks::default())
}

/// The bad lines of each of `logs` past its mark in `from` (a log without
/// one from its start) up to its mark in `to` (a log without one to its
/// end). Fails when a log cannot be read.
pub fn scan_files_between(
    logs: &[PathBuf],
    from: &LogMarks,
    to: &LogMarks,
) -> Result<Vec<Found>, String> {
    let mut found = Vec::new();
    for path in logs {
        let bytes = std::fs::read(path).map_err(|e| {
            format!(
                "bad-line scan: cannot read {}: {e}; its bad lines would go unseen",
                path.display()
            )
        })?;
        let at = |marks: &LogMarks, default: usize| {
            marks
                .0
                .get(path)
                .map_or(default, |m| usize::try_from(*m).unwrap_or(usize::MAX))
                .min(bytes.len())
        };
        let end = at(to, bytes.len());
        let start = at(from, 0).min(end);
        let first_line = bytes[..start].iter().filter(|b| **b == b'\n').count() + 1;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        found.extend(log_scan::scan(
            &name,
            &String::from_utf8_lossy(&bytes[start..end]),
            first_line,
        ));
    }
    Ok(found)
}

impl Pressure<'_> {
    /// What a new claimant of `worker`'s group gets now from the Guard
    /// service holding `worker`'s pool (`python -m cpu_engine.claim_probe`),
    /// claiming with this stack's pools on `port` (`None`: a free one; a
    /// group answers on its first holder's port only).
    pub fn claim_probe_of(
        &self,
        worker: &Worker,
        port: Option<u16>,
    ) -> Result<ClaimProbe, CaseError> {
        self.claim_probe_at(
            &worker.slot.guard_socket,
            worker.slot.guard_index,
            &self.claim_pools(),
            port,
        )
    }

    /// The pools a worker of this stack claims with: (name, bytes per page).
    pub fn claim_pools(&self) -> Vec<(String, u64)> {
        let geometry = self.ctx.geometry();
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

    /// How many groups the stack's launch context gives its Guard
    /// (`guard_count`: one per worker where one service is shared).
    pub fn guard_count(&self) -> u32 {
        self.ctx.stack.plan.ctx.guard_count
    }

    /// A claim of `guard_index` on the Guard service at `socket` with these
    /// pools (a wrong layout on purpose) and this control port (`None`: a
    /// free one).
    pub fn claim_probe_at(
        &self,
        socket: &Path,
        guard_index: u32,
        pools: &[(String, u64)],
        port: Option<u16>,
    ) -> Result<ClaimProbe, CaseError> {
        let ctx = &self.ctx.stack.plan.ctx;
        let mut cmd = std::process::Command::new(&ctx.python);
        cmd.args(["-m", "cpu_engine.claim_probe", "--socket"])
            .arg(socket)
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

    /// What the Guard service at `socket` answers a stranger (`python -m
    /// cpu_engine.stranger_probe`): garbage, truncated and foreign frames,
    /// and claims of `held` (a group a live worker holds) and
    /// `out_of_range`, one connection each, in
    /// [`crate::verdict::stranger::ATTEMPTS`]' order.
    pub fn stranger_probe_at(
        &self,
        socket: &Path,
        held: u32,
        out_of_range: u32,
    ) -> Result<Vec<StrangerAnswer>, CaseError> {
        let ctx = &self.ctx.stack.plan.ctx;
        let mut cmd = std::process::Command::new(&ctx.python);
        cmd.args(["-m", "cpu_engine.stranger_probe", "--socket"])
            .arg(socket)
            .args(["--held-index", &held.to_string()])
            .args(["--out-of-range-index", &out_of_range.to_string()])
            .args(["--digest", &ctx.compatibility_digest]);
        for (name, bytes) in self.claim_pools() {
            cmd.args(["--pool", &format!("{name}:{bytes}")]);
        }
        cmd.env("PYTHONPATH", ctx.repo_root.join("fixtures/cpu-engine"))
            .current_dir(&ctx.repo_root);
        let out = cmd
            .output()
            .map_err(|e| CaseError::new(format!("cannot run the stranger probe: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.trim()).map_err(|e| {
            CaseError::new(format!(
                "the stranger probe answered `{}` ({e}); stderr: {}",
                text.trim(),
                String::from_utf8_lossy(&out.stderr)
            ))
        })
    }
}

pub use crate::verdict::service::ClaimProbe;
pub use crate::verdict::stranger::StrangerAnswer;

/// A worker's engine stopped with SIGSTOP (state `T` verified); continued on
/// drop, unless it died meanwhile (a Guard's heartbeat fence SIGKILLs it).
pub struct StoppedWorker<'a> {
    worker: &'a Worker,
    /// When the stop was verified.
    pub at: std::time::Instant,
    /// The processes stopped: the worker's own pid, or, where KVCR runs in
    /// a child of it (vLLM), every process of its group.
    pub pids: Vec<u32>,
    group: bool,
}

impl StoppedWorker<'_> {
    /// The stopped processes that died since the stop. A stopped process
    /// dies only of SIGKILL: on an engine whose KVCR runs in a child process,
    /// the Guard's heartbeat fence kills that child while the worker's own
    /// process stays stopped.
    pub fn killed_since(&self) -> Vec<u32> {
        self.pids
            .iter()
            .copied()
            .filter(|pid| !crate::proc::procfs::is_alive(*pid))
            .collect()
    }

    /// Waits up to `budget` for a stopped process to be killed.
    pub fn await_killed(&self, budget: Duration) -> Vec<u32> {
        let deadline = std::time::Instant::now() + budget;
        loop {
            let killed = self.killed_since();
            if !killed.is_empty() || std::time::Instant::now() >= deadline {
                return killed;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Pressure<'_> {
    /// SIGSTOPs `worker`'s engine process (its whole process group where
    /// KVCR runs in a child process: [`crate::engine::Engine::kvcr_in_child_process`])
    /// and verifies its state is `T`.
    pub fn stop_worker_process<'w>(
        &self,
        worker: &'w Worker,
    ) -> Result<StoppedWorker<'w>, CaseError> {
        stop_worker_process(self.ctx.stack, worker)
    }
}

/// [`Pressure::stop_worker_process`] from any thread: it needs only the
/// stack.
pub fn stop_worker_process<'w>(
    stack: &Stack,
    worker: &'w Worker,
) -> Result<StoppedWorker<'w>, CaseError> {
    let pid = worker.process.pid();
    let group = stack.plan.engine.kvcr_in_child_process();
    let pids = if group {
        crate::proc::procfs::group_members(pid)
    } else {
        vec![pid]
    };
    let signal = nix::sys::signal::Signal::SIGSTOP;
    let sent = if group {
        worker.process.signal_whole_group(signal)
    } else {
        worker.process.signal(signal)
    };
    sent.map_err(|e| {
        CaseError::new(format!(
            "fault not applied: SIGSTOP of worker {}: {e}",
            worker.name()
        ))
    })?;
    let stopped = StoppedWorker {
        worker,
        at: std::time::Instant::now(),
        pids,
        group,
    };
    let watched = stopped.pids.clone();
    wait::until(
        format!(
            "worker {}'s pids {watched:?} to be stopped (state T)",
            worker.name()
        ),
        Duration::from_secs(2),
        Duration::from_millis(5),
        || {
            let states: Vec<Option<char>> = watched
                .iter()
                .map(|p| crate::proc::procfs::state(*p))
                .collect();
            if states.iter().all(|s| *s == Some('T')) {
                Poll::Ready(())
            } else {
                Poll::Pending(format!("states {states:?}"))
            }
        },
    )
    .map_err(|e| CaseError::new(format!("fault not applied: {e}")))?;
    Ok(stopped)
}

impl Drop for StoppedWorker<'_> {
    fn drop(&mut self) {
        if self.worker.process.is_running() {
            let signal = nix::sys::signal::Signal::SIGCONT;
            let sent = if self.group {
                self.worker.process.signal_whole_group(signal)
            } else {
                self.worker.process.signal(signal)
            };
            if let Err(e) = sent {
                tracing::warn!("could not continue worker {}: {e}", self.worker.name());
            }
        }
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
        assert!(scan_since(dir.path(), &marks).unwrap().is_empty());
        std::fs::write(
            &a,
            "Traceback (most recent call last):\nKVCR pool recovery disabled; x\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("guard.2.log"), "KVCR Guard 0 failed\n").unwrap();
        let found = scan_since(dir.path(), &marks).unwrap();
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

    #[test]
    fn a_scan_of_named_logs_reads_only_those() {
        let dir = tempfile::tempdir().unwrap();
        let worker = dir.path().join("worker-A.log");
        let hostile = dir.path().join("hostile-port-taken.log");
        std::fs::write(&worker, "fine\n").unwrap();
        std::fs::write(&hostile, "Traceback (most recent call last):\n").unwrap();
        let none = LogMarks(Default::default());
        assert!(
            scan_files_between(std::slice::from_ref(&worker), &none, &none)
                .unwrap()
                .is_empty()
        );
        let tb = "Traceback (most recent call last):\n";
        std::fs::write(&worker, format!("fine\n{tb}")).unwrap();
        let found = scan_files_between(std::slice::from_ref(&worker), &none, &none).unwrap();
        assert_eq!((found.len(), found[0].line_no), (1, 2));
        assert_eq!(found[0].log, "worker-A.log");
        // Lines past the window's end are the next window's.
        let end = LogMarks([(worker.clone(), 5)].into_iter().collect());
        assert!(
            scan_files_between(std::slice::from_ref(&worker), &none, &end)
                .unwrap()
                .is_empty()
        );
        std::fs::write(&worker, format!("fine\n{tb}{tb}")).unwrap();
        let next = LogMarks(
            [(worker.clone(), 5 + tb.len() as u64)]
                .into_iter()
                .collect(),
        );
        let found = scan_files_between(&[worker], &next, &none).unwrap();
        assert_eq!((found.len(), found[0].line_no), (1, 3));
    }

    #[test]
    fn a_scan_that_read_no_log_fails() {
        let dir = tempfile::tempdir().unwrap();
        let marks = LogMarks(Default::default());
        let err = scan_since(dir.path(), &marks).unwrap_err();
        assert!(err.contains("no component log (*.log) in"), "{err}");
        std::fs::write(dir.path().join("notes.txt"), "not a log\n").unwrap();
        assert!(
            scan_since(dir.path(), &marks).is_err(),
            "only *.log files count"
        );
        let err = scan_since(&dir.path().join("missing"), &marks).unwrap_err();
        assert!(err.contains("cannot read the logs directory"), "{err}");
    }

    #[test]
    fn a_log_that_cannot_be_read_fails_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("worker-A.log"), "fine\n").unwrap();
        // A directory named like a log: listed, but not readable as a file.
        std::fs::create_dir(dir.path().join("worker-B.log")).unwrap();
        let err = scan_since(dir.path(), &LogMarks(Default::default())).unwrap_err();
        assert!(
            err.contains("cannot read") && err.contains("worker-B.log"),
            "{err}"
        );
    }
}
