//! Workers that dropped out of the router's discovery while their process
//! runs on. Dynamo 1.6.1's file discovery deletes any entry not refreshed
//! for 10 s of wall time, from whichever process sweeps first, and the
//! owner never writes it again: after a wall-clock step or a stall of the
//! machine, a worker can serve nothing through the router (a request pinned
//! to it gets HTTP 400 `Invalid request`) while it looks healthy
//! (docs/results.md, F16). A stack with such a worker is not whole.

use std::path::PathBuf;

use serde::Serialize;

use super::{probe, Stack};
use crate::telemetry::discovery_log;

/// A worker whose process runs but whose instance the router no longer lists.
#[derive(Debug, Clone, Serialize)]
pub struct Dropout {
    pub worker: String,
    pub pid: u32,
    pub instance_id: u64,
    /// The log line in which a process of the stack deleted its entry as
    /// expired, and that log.
    pub deleted_by: Option<(PathBuf, String)>,
}

impl std::fmt::Display for Dropout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "worker {} (pid {}) is running, but the router no longer lists its instance {}",
            self.worker, self.pid, self.instance_id
        )?;
        match &self.deleted_by {
            Some((log, line)) => write!(
                f,
                ": Dynamo's file discovery deleted its entry as not refreshed for 10 s of wall time ({}: `{line}`), and a worker never writes a deleted entry again",
                log.display()
            ),
            None => write!(
                f,
                ": its discovery entry is gone, and no log of the stack says who deleted it"
            ),
        }
    }
}

impl Stack {
    /// Every worker whose process runs but whose instance the frontend's
    /// `/health` does not list. Empty on a stack seen only through URLs
    /// (whether a worker runs is not known there); `Err` when `/health`
    /// does not answer.
    pub fn dropped_out_workers(&self) -> Result<Vec<Dropout>, String> {
        if !self.control.sees_processes() || !self.frontend().is_running() {
            return Ok(Vec::new());
        }
        let listed =
            probe::health_instance_ids(&self.frontend_url(), self.plan.options.probe_timeout)?;
        let dropped: Vec<_> = self
            .workers()
            .into_iter()
            .filter(|w| w.process.is_running() && !listed.contains(&w.instance_id()))
            .collect();
        if dropped.is_empty() {
            return Ok(Vec::new());
        }
        let logs = self.log_paths();
        Ok(dropped
            .iter()
            .map(|w| Dropout {
                worker: w.name().to_string(),
                pid: w.process.pid(),
                instance_id: w.instance_id(),
                deleted_by: logs.iter().find_map(|log| {
                    let text = String::from_utf8_lossy(&std::fs::read(log).ok()?).into_owned();
                    discovery_log::expiry_of(w.instance_id(), &text).map(|l| (log.clone(), l))
                }),
            })
            .collect())
    }

    /// The log of every process this stack has run: frontends, Guards,
    /// workers, retired ones included.
    fn log_paths(&self) -> Vec<PathBuf> {
        let retired_frontends = self
            .retired_frontends
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        let retired = self.retired.lock().map(|r| r.clone()).unwrap_or_default();
        let frontends = std::iter::once(self.frontend()).chain(retired_frontends);
        let mut paths: Vec<PathBuf> = frontends
            .map(|f| f.log_path().to_path_buf())
            .chain(self.guards.iter().map(|g| g.log_path().to_path_buf()))
            .chain(
                self.workers()
                    .iter()
                    .chain(retired.iter())
                    .map(|w| w.process.log_path().to_path_buf()),
            )
            .collect();
        paths.dedup();
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropout_says_who_deleted_its_entry_and_why_it_stays_gone() {
        let dropout = Dropout {
            worker: "B".into(),
            pid: 5725,
            instance_id: 3828628513612568100,
            deleted_by: Some((
                "logs/worker-A.log".into(),
                "2026-12-03T05:51:04Z INFO dynamo_runtime::storage::kv::file: Expired path=\"…%2F3522055922cf1624\"".into(),
            )),
        };
        assert_eq!(
            dropout.to_string(),
            "worker B (pid 5725) is running, but the router no longer lists its instance 3828628513612568100: Dynamo's file discovery deleted its entry as not refreshed for 10 s of wall time (logs/worker-A.log: `2026-12-03T05:51:04Z INFO dynamo_runtime::storage::kv::file: Expired path=\"…%2F3522055922cf1624\"`), and a worker never writes a deleted entry again"
        );
    }
}
