//! Replacing a dead worker in its slot (same Guard group, same control
//! port): started from this process, or, on a stack this run did not
//! start, by the description's replace hook.

use std::sync::Arc;

use crate::engine::WorkerSlot;

use super::hooks::HookRun;
use super::{provision, Stack, StackError, Worker};

impl Stack {
    /// The next replacement worker starts with these fault switches
    /// (`--fault NAME[=ARG]`), e.g. `no_reclaim`.
    pub fn set_replacement_faults(&self, faults: Vec<String>) {
        if let Ok(mut f) = self.replacement_faults.lock() {
            *f = faults;
        }
    }

    pub(super) fn take_replacement_faults(&self) -> Vec<String> {
        self.replacement_faults
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default()
    }

    pub(super) fn retired_frontend_count(&self) -> usize {
        self.retired_frontends.lock().map(|r| r.len()).unwrap_or(0)
    }

    /// Instance ids of every worker this stack has had.
    pub(super) fn known_instance_ids(&self) -> Vec<u64> {
        let retired = self.retired.lock().map(|r| r.clone()).unwrap_or_default();
        self.workers()
            .iter()
            .chain(retired.iter())
            .map(|w| w.instance_id())
            .collect()
    }

    /// Starts a replacement in `name`'s slot (same Guard index and control
    /// port) and waits until it is registered and serving. The dead worker is
    /// kept for teardown and evidence. On an attached stack whose
    /// description names `hooks.replace_worker`, the hook starts it
    /// ([`super::Control`] decides).
    pub fn replace_worker(&self, name: &str) -> Result<Arc<Worker>, StackError> {
        self.control.replace_worker(self, name)
    }

    /// Starts the replacement in `name`'s slot from this process (what a
    /// replace hook such as `kvcr-e2e stack replace-worker` does) and
    /// records it in the stack description.
    pub fn start_replacement(&self, name: &str) -> Result<Arc<Worker>, StackError> {
        self.control.start_replacement(self, name)
    }

    /// [`Stack::start_replacement`]'s mechanics: a replacement that
    /// `outlives_run` is left to the stack's owner to stop.
    pub(super) fn start_here(
        &self,
        name: &str,
        outlives_run: bool,
    ) -> Result<Arc<Worker>, StackError> {
        let (fresh, ()) = self.replace_with(name, |slot| {
            let faults = self.take_replacement_faults();
            let fresh = provision::start_worker(self, slot, &faults, outlives_run)?;
            crate::gpu::run::watch(fresh.process.name(), fresh.process.pid());
            Ok((fresh, ()))
        })?;
        self.write_manifest();
        Ok(fresh)
    }

    pub(super) fn note_replace_hook_run(&self, run: HookRun) {
        if let Ok(mut runs) = self.replace_hook_runs.lock() {
            runs.push(run);
        }
    }

    /// What the replace hook did, for each replacement it started.
    pub fn replace_hook_runs(&self) -> Vec<HookRun> {
        self.replace_hook_runs
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    pub(super) fn replace_with<T>(
        &self,
        name: &str,
        start: impl FnOnce(WorkerSlot) -> Result<(Arc<Worker>, T), StackError>,
    ) -> Result<(Arc<Worker>, T), StackError> {
        let old = self.worker(name)?;
        let mut slot = old.slot.clone();
        slot.generation += 1;
        slot.ready_file = self.plan.layout.ready_file(&slot.process_name());
        let (fresh, extra) = start(slot)?;
        if let Ok(mut workers) = self.workers.lock() {
            for w in workers.iter_mut() {
                if w.slot.name == name {
                    *w = fresh.clone();
                }
            }
        }
        if let Ok(mut retired) = self.retired.lock() {
            retired.push(old);
        }
        Ok((fresh, extra))
    }
}
