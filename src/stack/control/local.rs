//! A stack this run provisioned: its processes are this run's children.

use std::sync::Arc;

use crate::proc::{procfs, StopReport, Supervised};

use super::{kill_by, Control, KillRoute};
use crate::stack::{KillReport, Stack, StackError, Worker};

/// Control of a stack this run started and tears down.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Local {
    /// A worker a replace hook started is seen through its URLs only;
    /// every other one is this run's to signal.
    pub(crate) fn kill_route(&self, remote: bool) -> KillRoute {
        if remote {
            KillRoute::Hook
        } else {
            KillRoute::Signal
        }
    }
}

impl Control for Local {
    fn owns(&self) -> bool {
        true
    }

    fn sees_processes(&self) -> bool {
        true
    }

    fn mirror_dir(&self) -> Option<&std::path::Path> {
        None
    }

    fn kill_worker(&self, stack: &Stack, worker: &Worker) -> Result<KillReport, StackError> {
        kill_by(stack, worker, self.kill_route(worker.process.is_remote()))
    }

    fn killed_worker_gone(&self, stack: &Stack, kill: &KillReport) -> bool {
        super::killed_worker_gone(stack, kill, |w| self.kill_route(w.process.is_remote()))
    }

    fn control_port_listening(&self, worker: &Worker) -> bool {
        procfs::is_listening(worker.slot.control_port)
    }

    fn replace_worker(&self, stack: &Stack, name: &str) -> Result<Arc<Worker>, StackError> {
        self.start_replacement(stack, name)
    }

    fn start_replacement(&self, stack: &Stack, name: &str) -> Result<Arc<Worker>, StackError> {
        // This run's child, stopped at its teardown.
        stack.start_here(name, false)
    }

    fn restartable_guard(
        &self,
        stack: &Stack,
        service: &str,
    ) -> Result<Arc<Supervised>, StackError> {
        stack.guard_service(service).ok_or_else(|| {
            StackError::FaultNotApplied(format!("this stack runs no Guard service {service}"))
        })
    }

    fn lower_priority(&self, stack: &Stack, process: &Supervised) {
        crate::stack::provision::renice(stack, process);
    }

    fn teardown(&self, stack: &Stack) -> Vec<StopReport> {
        stack.stop_everything()
    }
}
