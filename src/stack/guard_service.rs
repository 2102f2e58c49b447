//! The Guard service as a process a case can kill and start again (TC-08):
//! the restarted service takes the same socket and pool directory, logs to
//! `guard.<n>.log`, and is the one [`Stack::guard_of`] names from then on.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::proc::{procfs, Supervised};

use super::{provision, readiness, Stack, StackError};

/// What a SIGKILL of the Guard service did, checked from outside.
#[derive(Debug, Clone, Serialize)]
pub struct GuardServiceKill {
    pub pid: u32,
    pub gone_after_ms: u128,
    /// The socket file the dead service left behind.
    pub socket_left: bool,
    #[serde(skip)]
    pub sent_at: Instant,
}

/// One file in the Guard service's pool directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolFile {
    pub name: String,
    pub bytes: u64,
}

impl Stack {
    /// The Guard service now serving the stack's single shared socket: the
    /// last one [`Stack::restart_guard_service`] started, else the first.
    pub fn current_guard(&self) -> Option<Arc<Supervised>> {
        self.restarted_guards
            .lock()
            .ok()
            .and_then(|g| g.last().cloned())
            .or_else(|| self.guard.clone())
    }

    /// SIGKILLs the Guard service's whole process group and verifies it is
    /// gone (a crash: no handback, no cleanup).
    pub fn kill_guard_service(&self) -> Result<GuardServiceKill, StackError> {
        let guard = self.restartable_guard()?;
        let pid = guard.pid();
        let sent_at = Instant::now();
        guard.kill_group().map_err(|e| {
            StackError::FaultNotApplied(format!("SIGKILL of the Guard service: {e}"))
        })?;
        let budget = self.options.kill_timeout;
        if guard.wait_exit(budget).is_none() || procfs::is_alive(pid) {
            return Err(StackError::FaultNotApplied(format!(
                "the Guard service (pid {pid}) is still alive {} s after SIGKILL",
                budget.as_secs()
            )));
        }
        Ok(GuardServiceKill {
            pid,
            gone_after_ms: sent_at.elapsed().as_millis(),
            socket_left: self.ctx.guard_socket.exists(),
            sent_at,
        })
    }

    /// Starts the Guard service again on the same socket and pool directory
    /// (after it died) and waits for its `ready` line.
    pub fn restart_guard_service(&self) -> Result<Arc<Supervised>, StackError> {
        let old = self.restartable_guard()?;
        if old.is_running() {
            return Err(StackError::ReplacementNotStarted(format!(
                "the Guard service (pid {}) is still running; a second one on its socket would be refused",
                old.pid()
            )));
        }
        let generation = self.restarted_guards.lock().map(|g| g.len()).unwrap_or(0) + 2;
        let mut spec = self.engine.guard(&self.ctx).ok_or_else(|| {
            StackError::ReplacementNotStarted("this engine runs no Guard service".into())
        })?;
        spec.name = format!("guard.{generation}");
        spec.log = self.ctx.logs_dir.join(format!("guard.{generation}.log"));
        let fresh = Arc::new(Supervised::spawn(&spec).map_err(provision::ProvisionError::from)?);
        if let Ok(mut restarted) = self.restarted_guards.lock() {
            restarted.push(fresh.clone());
        }
        readiness::await_guard(&fresh, &self.ctx.guard_socket, self.options.startup_timeout)?;
        Ok(fresh)
    }

    /// The files in the Guard service's pool directory, by name.
    pub fn pool_files(&self) -> Vec<PoolFile> {
        let mut files: Vec<PoolFile> = std::fs::read_dir(&self.ctx.pool_dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| {
                        Some(PoolFile {
                            name: e.file_name().to_string_lossy().into_owned(),
                            bytes: e.metadata().ok()?.len(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort_by(|a, b| a.name.cmp(&b.name));
        files
    }

    fn restartable_guard(&self) -> Result<Arc<Supervised>, StackError> {
        if !self.mode.owns() || self.engine.guard_per_slot() {
            return Err(StackError::FaultNotApplied(
                "restarting the Guard service needs a stack this run started, with one shared service"
                    .into(),
            ));
        }
        self.current_guard()
            .ok_or_else(|| StackError::FaultNotApplied("this stack runs no Guard service".into()))
    }
}
