//! A stack another process owns (`kvcr-e2e stack up`), attached to: the
//! owner tears it down; this run kills and replaces workers through the
//! stack description's hooks where it names them, and, in the stack's own
//! PID namespace, by signals and replacements of its own otherwise.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::proc::{StopReport, Supervised};
use crate::stack::{replace_by_hook, KillReport, Stack, StackError, Worker};

use super::{kill_by, Control, KillRoute, ReplaceRoute};

/// How an attached run reaches the stack's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// In this PID namespace: its processes are signalled and watched from
    /// here, and a replacement started here outlives this run.
    Processes,
    /// Where this run sees no process of it (another PID namespace,
    /// container or host): every component through its URL, kills and
    /// replacements through the hooks, its logs mirrored into `mirror_dir`
    /// from the URL its owner serves them at.
    Urls { mirror_dir: PathBuf },
}

impl Reach {
    /// The reach of a stack whose description names PID namespace
    /// `described` (none in descriptions before it was kept), from a run in
    /// namespace `ours`: pids mean something here only in the same one.
    pub fn of(described: Option<&str>, ours: Option<&str>, mirror_dir: &Path) -> Self {
        match described {
            Some(ns) if Some(ns) != ours => Reach::Urls {
                mirror_dir: mirror_dir.to_path_buf(),
            },
            _ => Reach::Processes,
        }
    }
}

/// Control of a stack another process owns.
#[derive(Debug, Clone)]
pub struct ByHooks {
    reach: Reach,
}

impl ByHooks {
    pub fn new(reach: Reach) -> Self {
        Self { reach }
    }

    /// A worker seen only through its URLs (every one, seen so; or one a
    /// replace hook started) is killed by the hook.
    pub(crate) fn kill_route(&self, remote: bool) -> KillRoute {
        match (&self.reach, remote) {
            (Reach::Processes, false) => KillRoute::Signal,
            _ => KillRoute::Hook,
        }
    }

    /// The replace hook where the description names one; else a
    /// replacement of this run's that outlives it, where it can start one.
    pub(crate) fn replace_route(&self, name: &str, hook: Option<Vec<String>>) -> ReplaceRoute {
        match (hook, &self.reach) {
            (Some(template), _) => ReplaceRoute::Hook(template),
            (None, Reach::Processes) => ReplaceRoute::Here { outlives_run: true },
            (None, Reach::Urls { .. }) => ReplaceRoute::Refused(format!(
                "worker {name} runs where this harness cannot start processes (it sees the stack only through URLs); the stack description must name hooks.replace_worker"
            )),
        }
    }
}

impl Control for ByHooks {
    fn owns(&self) -> bool {
        false
    }

    fn sees_processes(&self) -> bool {
        self.reach == Reach::Processes
    }

    fn mirror_dir(&self) -> Option<&Path> {
        match &self.reach {
            Reach::Urls { mirror_dir } => Some(mirror_dir),
            Reach::Processes => None,
        }
    }

    fn kill_worker(&self, stack: &Stack, worker: &Worker) -> Result<KillReport, StackError> {
        kill_by(stack, worker, self.kill_route(worker.process.is_remote()))
    }

    fn killed_worker_gone(&self, stack: &Stack, kill: &KillReport) -> bool {
        super::killed_worker_gone(stack, kill, |w| self.kill_route(w.process.is_remote()))
    }

    fn control_port_listening(&self, worker: &Worker) -> bool {
        if self.sees_processes() {
            return crate::proc::procfs::is_listening(worker.slot.control_port);
        }
        let address = worker
            .control_endpoint()
            .map(|e| e.trim_start_matches("tcp://").to_string())
            .unwrap_or_default();
        crate::proc::accepts(&address)
    }

    fn replace_worker(&self, stack: &Stack, name: &str) -> Result<Arc<Worker>, StackError> {
        let hook = stack.hooks().and_then(|h| h.replace_worker);
        match self.replace_route(name, hook) {
            ReplaceRoute::Hook(template) => {
                let (fresh, run) = stack.replace_with(name, |slot| {
                    replace_by_hook::replace(stack, &template, slot)
                })?;
                stack.note_replace_hook_run(run);
                // The deployer's tooling keeps the description; not this run.
                Ok(fresh)
            }
            ReplaceRoute::Here { outlives_run } => stack.start_here(name, outlives_run),
            ReplaceRoute::Refused(why) => Err(StackError::ReplacementNotStarted(why)),
        }
    }

    fn start_replacement(&self, stack: &Stack, name: &str) -> Result<Arc<Worker>, StackError> {
        // The owner stops it, not this run.
        stack.start_here(name, true)
    }

    fn restartable_guard(
        &self,
        _stack: &Stack,
        _service: &str,
    ) -> Result<Arc<Supervised>, StackError> {
        Err(StackError::FaultNotApplied(
            "restarting a Guard service needs a stack this run started".into(),
        ))
    }

    fn lower_priority(&self, _stack: &Stack, _process: &Supervised) {
        // The owner's processes keep the priority the owner gave them.
    }

    fn teardown(&self, _stack: &Stack) -> Vec<StopReport> {
        // The owner stops everything (`kvcr-e2e stack down`).
        Vec::new()
    }
}
