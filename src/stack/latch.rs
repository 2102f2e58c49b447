//! Workers whose KVCR source writes are off for the rest of their life:
//! KVCR 0.1.1 latches a process's source off once one of its progress
//! loops was late by `operation_timeout_ms` on the monotonic clock (a
//! stalled or overloaded machine is enough), and only a restart clears it.
//! A stack with such a worker cannot serve peers from it: it is not whole.

use serde::Serialize;

use super::Stack;
use crate::telemetry::names::kvcr_bad_lines::SOURCE_STALLED;

/// A running worker whose log, since its spawn, has KVCR's latch line.
#[derive(Debug, Clone, Serialize)]
pub struct Latched {
    pub worker: String,
    pub pid: u32,
    /// KVCR's line, as logged.
    pub line: String,
}

impl std::fmt::Display for Latched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "worker {} (pid {}) has its KVCR source writes latched off until it restarts: `{}`",
            self.worker, self.pid, self.line
        )
    }
}

impl Stack {
    /// Every running worker whose KVCR latched its source writes off.
    pub fn latched_workers(&self) -> Vec<Latched> {
        if !self.control.sees_processes() {
            return Vec::new();
        }
        self.workers()
            .iter()
            .filter(|w| w.process.is_running())
            .filter_map(|w| {
                let log = w.process.log_since_spawn(u64::MAX);
                let line = log.lines().find(|l| l.contains(SOURCE_STALLED))?;
                Some(Latched {
                    worker: w.name().to_string(),
                    pid: w.process.pid(),
                    line: crate::telemetry::strip_ansi(line.trim()),
                })
            })
            .collect()
    }
}
