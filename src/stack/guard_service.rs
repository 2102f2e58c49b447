//! The Guard services as processes a case can kill and start again (TC-08).
//! Whichever layout the engine uses (one service shared by every worker, or
//! one per worker), the service killed is the one holding a given worker's
//! pool; its restart takes the same socket and pool directory, logs to
//! `<service>.<n>.log`, and is the one [`Stack::guard_of`] names for the
//! workers it holds from then on.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::proc::{procfs, Supervised};
use crate::pyenv::coverage::{self, Checkpoint};

use super::provision::{self, GuardPlan};
use super::{readiness, Stack, StackError, Worker};

/// What a SIGKILL of a Guard service did, checked from outside.
#[derive(Debug, Clone, Serialize)]
pub struct GuardServiceKill {
    /// The service killed: `guard`, or `guard-<slot>` where each worker has one.
    pub service: String,
    pub pid: u32,
    pub gone_after_ms: u128,
    /// The socket file the dead service left behind.
    pub socket_left: bool,
    /// Under `--kvcr-coverage`: the service asked to save what it ran
    /// before the SIGKILL, which would lose it (none in other runs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub coverage_saved: Vec<Checkpoint>,
    #[serde(skip)]
    pub sent_at: Instant,
}

/// One file in a Guard service's pool directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolFile {
    pub name: String,
    pub bytes: u64,
}

impl Stack {
    /// The Guard service holding `worker`'s pool: the last one
    /// [`Stack::restart_guard_service_of`] started for it, else the first.
    pub fn guard_of(&self, worker: &Worker) -> Option<Arc<Supervised>> {
        self.guard_service(&worker.slot.guard_service)
    }

    /// SIGKILLs the whole process group of the Guard service holding
    /// `worker`'s pool and verifies it is gone (a crash: no handback, no
    /// cleanup).
    pub fn kill_guard_service_of(&self, worker: &Worker) -> Result<GuardServiceKill, StackError> {
        let service = &worker.slot.guard_service;
        let guard = self.restartable_guard(service)?;
        let pid = guard.pid();
        // Its Guards' whole history (every case before this one) would go
        // with the SIGKILL; saved now, the crash itself is unchanged.
        let coverage_saved =
            coverage::checkpoint(&procfs::group_members(pid), coverage::CHECKPOINT_BUDGET);
        let sent_at = Instant::now();
        guard.kill_group().map_err(|e| {
            StackError::FaultNotApplied(format!("SIGKILL of the Guard service {service}: {e}"))
        })?;
        let budget = self.plan.options.kill_timeout;
        if guard.wait_exit(budget).is_none() || procfs::is_alive(pid) {
            return Err(StackError::FaultNotApplied(format!(
                "the Guard service {service} (pid {pid}) is still alive {} s after SIGKILL",
                budget.as_secs()
            )));
        }
        let (_, socket) = self.guard_plan(service)?;
        Ok(GuardServiceKill {
            service: service.clone(),
            pid,
            gone_after_ms: sent_at.elapsed().as_millis(),
            socket_left: socket.exists(),
            coverage_saved,
            sent_at,
        })
    }

    /// Starts the Guard service holding `worker`'s pool again (after it
    /// died) on the same socket and pool directory, on the same node, and
    /// waits for its `ready` line.
    pub fn restart_guard_service_of(&self, worker: &Worker) -> Result<Arc<Supervised>, StackError> {
        let service = &worker.slot.guard_service;
        let old = self.restartable_guard(service)?;
        if old.is_running() {
            return Err(StackError::ReplacementNotStarted(format!(
                "the Guard service {service} (pid {}) is still running; a second one on its socket would be refused",
                old.pid()
            )));
        }
        let generation = self
            .restarted_guards
            .lock()
            .map(|g| g.iter().filter(|(s, _)| s == service).count())
            .unwrap_or(0)
            + 2;
        let (plan, socket) = self.guard_plan(service)?;
        let mut spec = self.plan.engine.guard(&plan.ctx).ok_or_else(|| {
            StackError::ReplacementNotStarted("this engine runs no Guard service".into())
        })?;
        spec.name = format!("{service}.{generation}");
        spec.log = self
            .plan
            .ctx
            .logs_dir
            .join(format!("{service}.{generation}.log"));
        let spec = self.plan.placement.wrap(plan.node, spec);
        let fresh = Arc::new(Supervised::spawn(&spec).map_err(provision::ProvisionError::from)?);
        if let Ok(mut restarted) = self.restarted_guards.lock() {
            restarted.push((service.clone(), fresh.clone()));
        }
        readiness::await_guard(&fresh, &socket, self.plan.options.startup_timeout)?;
        provision::lower_priority(self, &fresh);
        Ok(fresh)
    }

    /// The files in the pool directory of the Guard service holding
    /// `worker`'s pool, by name.
    pub fn pool_files_of(&self, worker: &Worker) -> Vec<PoolFile> {
        let Ok((plan, _)) = self.guard_plan(&worker.slot.guard_service) else {
            return Vec::new();
        };
        let dir = self.plan.placement.host_view(plan.node, &plan.ctx.pool_dir);
        let mut files: Vec<PoolFile> = std::fs::read_dir(dir)
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

    /// The pool file of `worker`'s Guard group (KVCR names it
    /// `kvcr-pool_<guard index>-<generation>`), where this host sees it.
    pub fn pool_file_path_of(&self, worker: &Worker) -> Option<std::path::PathBuf> {
        let (plan, _) = self.guard_plan(&worker.slot.guard_service).ok()?;
        let dir = self.plan.placement.host_view(plan.node, &plan.ctx.pool_dir);
        let prefix = format!("kvcr-pool_{}-", worker.slot.guard_index);
        std::fs::read_dir(&dir)
            .ok()?
            .filter_map(Result::ok)
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
    }

    /// Guard service `service` now: the last one restarted, else the one
    /// provisioning started (the first where the stack names none so).
    pub(super) fn guard_service(&self, service: &str) -> Option<Arc<Supervised>> {
        let restarted = self.restarted_guards.lock().ok().and_then(|g| {
            g.iter()
                .rev()
                .find(|(s, _)| s == service)
                .map(|(_, guard)| guard.clone())
        });
        restarted.or_else(|| {
            self.guards
                .iter()
                .find(|g| g.name() == service)
                .or(self.guard.as_ref())
                .cloned()
        })
    }

    /// How provisioning started Guard service `service`, and its socket as
    /// this host sees it.
    fn guard_plan(&self, service: &str) -> Result<(GuardPlan, PathBuf), StackError> {
        let plans = provision::guard_plans(
            self.plan.engine.as_ref(),
            &self.plan.ctx,
            (&self.plan.layout, &self.plan.placement),
            &self.plan.slots,
        )?;
        let plan = plans
            .into_iter()
            .find(|p| p.name == service)
            .ok_or_else(|| {
                StackError::FaultNotApplied(format!("this stack plans no Guard service {service}"))
            })?;
        let socket = self
            .plan
            .placement
            .host_view(plan.node, &plan.ctx.guard_socket);
        Ok((plan, socket))
    }

    /// The Guard service `service`, when this run may kill and restart it
    /// ([`super::Control`] decides).
    fn restartable_guard(&self, service: &str) -> Result<Arc<Supervised>, StackError> {
        self.control.restartable_guard(self, service)
    }
}
