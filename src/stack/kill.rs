//! Faults the stack delivers itself: a worker or the frontend SIGKILLed
//! (or, on a stack this run did not start, killed by the description's
//! hook), each verified from outside the process, and what the kill left.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::proc::procfs;
use crate::pyenv::coverage;

use super::hooks::{described_pid, run_hook, HookRun};
use super::{provision, Stack, StackError, Worker};

/// What a SIGKILL did, checked from outside the process.
#[derive(Debug, Clone, Serialize)]
pub struct KillReport {
    pub worker: String,
    pub pid: u32,
    #[serde(skip)]
    pub sent_at: Instant,
    pub pid_gone_after_ms: u128,
    /// The stack description's kill hook, when it was used instead of a
    /// signal from this process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookRun>,
}

impl Stack {
    /// Starts a new frontend on the same port after the old one died or was
    /// stopped, and waits until it routes to every worker again.
    pub fn restart_frontend(&self) -> Result<(), StackError> {
        self.control.restart_frontend(self)
    }

    /// [`Stack::restart_frontend`]'s mechanics.
    pub(super) fn start_new_frontend(&self) -> Result<(), StackError> {
        let old = self.frontend();
        old.stop(Duration::from_secs(3));
        // The new one binds the same port: the old one must be gone first.
        if old.wait_exit(self.plan.options.kill_timeout).is_none() {
            return Err(StackError::FaultNotApplied(format!(
                "the old frontend (pid {}) is still alive {} s after SIGKILL; cannot start a new one on its port",
                old.pid(),
                self.plan.options.kill_timeout.as_secs()
            )));
        }
        let fresh = Arc::new(provision::start_frontend(self)?);
        if let Ok(mut retired) = self.retired_frontends.lock() {
            retired.push(old);
        }
        if let Ok(mut frontend) = self.frontend.lock() {
            *frontend = fresh;
        }
        Ok(())
    }

    /// How long a kill may take to show and a probe to answer, from now
    /// on: a run attached to a stack follows its own settings, not the
    /// owner's.
    pub fn with_run_budgets(mut self, kill_timeout: Duration, probe_timeout: Duration) -> Self {
        self.plan.options.kill_timeout = kill_timeout;
        self.plan.options.probe_timeout = probe_timeout;
        self
    }

    /// SIGKILLs the frontend's whole process group and waits, up to the
    /// kill timeout, until it is gone. The restore step
    /// ([`Stack::ensure_whole`]) starts a new one.
    pub fn kill_frontend(&self) -> Result<u32, StackError> {
        self.control.kill_frontend(self)
    }

    /// [`Stack::kill_frontend`]'s mechanics.
    pub(super) fn kill_frontend_group(&self) -> Result<u32, StackError> {
        let frontend = self.frontend();
        self.frontend_killed.store(true, Ordering::SeqCst);
        frontend
            .kill_group()
            .map_err(|e| StackError::FaultNotApplied(format!("SIGKILL of the frontend: {e}")))?;
        let budget = self.plan.options.kill_timeout;
        if frontend.wait_exit(budget).is_none() {
            return Err(StackError::FaultNotApplied(format!(
                "the frontend (pid {}) is alive {} s after SIGKILL",
                frontend.pid(),
                budget.as_secs()
            )));
        }
        Ok(frontend.pid())
    }

    /// SIGKILLs worker `name`'s engine (every process of its group, as a
    /// crash would) and verifies the pid and the whole group are gone; on a
    /// stack this run did not start, the description's kill hook may kill
    /// it ([`super::Control`] decides).
    pub fn kill_worker(&self, name: &str) -> Result<KillReport, StackError> {
        let worker = self.worker(name)?;
        self.control.kill_worker(self, &worker)
    }

    /// A worker whose pid this run sees: SIGKILL of its group, or the
    /// description's kill hook when it names one, verified through `/proc`.
    pub(super) fn kill_visible_worker(&self, worker: &Worker) -> Result<KillReport, StackError> {
        let name = worker.name();
        let pid = worker.process.pid();
        worker.process.note_shm();
        let gpu_pids = crate::gpu::run::tree_before_kill(pid);
        // Under --kvcr-coverage, what the worker ran would go with the
        // SIGKILL (a replacement's claim, its handback read); saved now,
        // the crash itself is unchanged. An unmeasured worker is not asked.
        for saved in coverage::checkpoint(&procfs::group_members(pid), coverage::CHECKPOINT_BUDGET)
        {
            tracing::info!(
                "kvcr coverage of worker {name} (pid {}) before its SIGKILL: {} ({} ms)",
                saved.pid,
                saved.outcome,
                saved.after_ms
            );
        }
        let sent_at = Instant::now();
        let hook = match self.hooks().and_then(|h| h.kill_worker) {
            // A deployed stack: its own tooling delivers the kill.
            Some(template) => Some(self.run_kill_hook(&template, worker, pid)?),
            None => {
                worker.process.kill_group().map_err(|e| {
                    StackError::FaultNotApplied(format!("SIGKILL of worker {name}: {e}"))
                })?;
                None
            }
        };
        crate::gpu::run::after_kill(worker.process.name(), gpu_pids, sent_at);
        // One budget for the process and the rest of its group.
        let budget = self.plan.options.kill_timeout;
        let gone = worker.process.wait_exit(budget);
        let group_gone = crate::wait::until(
            format!("every process of worker {name}'s group (pgid {pid}) to exit"),
            budget.saturating_sub(sent_at.elapsed()),
            Duration::from_millis(20),
            || match procfs::group_members(pid).as_slice() {
                [] => crate::wait::Poll::Ready(()),
                left => crate::wait::Poll::Pending(format!("still alive: {left:?}")),
            },
        );
        if gone.is_none() || procfs::is_alive(pid) {
            let how = match &hook {
                Some(run) => format!("the kill hook `{}`", run.argv.join(" ")),
                None => "SIGKILL".to_string(),
            };
            return Err(StackError::FaultNotApplied(format!(
                "worker {name} (pid {pid}) is still alive {} s after {how}",
                budget.as_secs()
            )));
        }
        if let Err(e) = group_gone {
            return Err(StackError::FaultNotApplied(e.to_string()));
        }
        // What the dead engine left in /dev/shm goes now, not at teardown.
        worker.process.remove_shm();
        Ok(KillReport {
            worker: name.into(),
            pid,
            sent_at,
            pid_gone_after_ms: sent_at.elapsed().as_millis(),
            hook,
        })
    }

    /// A worker seen only through its URLs: the kill hook kills it (there
    /// is no pid here to signal), and it is gone once its metrics port
    /// refuses connections. `pid` in the report is the one the stack's
    /// description lists, in the stack's own PID namespace.
    pub(super) fn kill_remote_worker(&self, worker: &Worker) -> Result<KillReport, StackError> {
        let name = worker.name();
        let Some(template) = self.hooks().and_then(|h| h.kill_worker) else {
            return Err(StackError::FaultNotApplied(format!(
                "worker {name} is seen only through {} (its processes are not visible here); the stack description must name hooks.kill_worker",
                worker.admin_url()
            )));
        };
        let described = self
            .manifest_path()
            .and_then(|path| described_pid(&path, name));
        // Never a pid of 0: `kill -KILL 0` would kill the caller's own group.
        let pid = match described {
            Some(pid) if pid > 1 => pid,
            _ if template.iter().any(|a| a.contains("{pid}")) => {
                return Err(StackError::FaultNotApplied(format!(
                    "the kill hook `{}` needs worker {name}'s {{pid}}, and the stack description lists none for it",
                    template.join(" ")
                )))
            }
            _ => 0,
        };
        let sent_at = Instant::now();
        let run = self.run_kill_hook(&template, worker, pid)?;
        let budget = self.plan.options.kill_timeout;
        if worker.process.wait_exit(budget).is_none() {
            return Err(StackError::FaultNotApplied(format!(
                "worker {name} still answers at {} {} s after the kill hook `{}`",
                worker.admin_url(),
                budget.as_secs(),
                run.argv.join(" ")
            )));
        }
        Ok(KillReport {
            worker: name.into(),
            pid,
            sent_at,
            pid_gone_after_ms: sent_at.elapsed().as_millis(),
            hook: Some(run),
        })
    }

    fn run_kill_hook(
        &self,
        template: &[String],
        worker: &Worker,
        pid: u32,
    ) -> Result<HookRun, StackError> {
        let name = worker.name();
        if pid <= 1 && template.iter().any(|a| a.contains("{pid}")) {
            return Err(StackError::FaultNotApplied(format!(
                "the kill hook for worker {name} would get pid {pid}: refused (a signal to 0 reaches the harness's own group)"
            )));
        }
        run_hook(
            template,
            &[
                ("worker", name.to_string()),
                ("process", worker.process.name().to_string()),
                ("pid", pid.to_string()),
            ],
            self.plan.options.startup_timeout,
        )
        .map_err(|e| StackError::FaultNotApplied(format!("kill hook for worker {name}: {e}")))
    }

    /// Whether the worker `kill` killed is gone: its pid, or, for a worker
    /// seen only through its URLs, its metrics port.
    pub fn killed_worker_gone(&self, kill: &KillReport) -> bool {
        self.control.killed_worker_gone(self, kill)
    }

    /// Whether something listens on `worker`'s control port (after its
    /// death: the Guard): through `/proc` here, through a TCP connect to
    /// its control endpoint for a stack seen only through URLs.
    pub fn control_port_listening(&self, worker: &Worker) -> bool {
        self.control.control_port_listening(worker)
    }
}
