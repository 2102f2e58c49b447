//! The stack under test: provisioned once per run, shared by every case,
//! torn down after the run (or by the reaper if the harness dies); or
//! attached to, when another process owns it. Both are one [`Stack`]: its
//! [`StackPlan`] (what it is, fixed), its [`Control`] (how this run kills,
//! replaces and tears down: [`Local`] or [`ByHooks`], chosen once at
//! provision or attach) and its components as they are now.
//!
//! ```text
//! provision(engine, options)          Guard → workers → frontend, in parallel,
//!                                     each awaited with its own readiness check
//! attach(engine, stack.json, mirror)  a stack another process owns; by
//!                                     URLs only from another PID namespace
//! stack.worker("A")                   a live worker: pid, instance id, URLs
//! stack.kill_worker("A")              SIGKILL its engine process (verified),
//!                                     or the description's kill hook
//! stack.replace_worker("A")           start A' in A's slot and wait for it,
//!                                     or the replace hook, A' found by URLs
//! stack.teardown()                    SIGTERM, grace, SIGKILL every group
//! ```

mod attach;
mod claim_refusal;
mod control;
mod crash;
mod description;
mod discovery;
mod dropout;
mod exit_cause;
pub use exit_cause::final_cause;
pub mod guard_journal;
mod guard_service;
mod hooks;
mod hostile_start;
mod kill;
mod latch;
mod layout;
mod log_url;
mod nodes;
mod plan;
mod ports;
mod probe;
mod provision;
mod readiness;
mod refused_config;
mod registration;
mod replace;
mod replace_by_hook;
mod worker;

pub use attach::{attach, attach_to_repair, AttachError};
pub use claim_refusal::{ClaimRefused, RefusalKind};
pub use control::{ByHooks, Control, Local, Reach};
pub use crash::Crash;
pub use dropout::Dropout;
pub use guard_service::{GuardServiceKill, PoolFile};
pub use hooks::{described_pid, hooks, run_hook, HookRun, Hooks};
pub use hostile_start::{Hostility, Sabotage};
pub use kill::KillReport;
pub use latch::Latched;
pub use layout::{Layout, POOL_FILES_AFTER_SHUTDOWN};
pub use nodes::{Crossing, Placement, Side};
pub use plan::StackPlan;
pub use provision::{
    provision, ProvisionError, StackOptions, StartupTimings, DIGEST_MISMATCH,
    DUPLICATE_GUARD_INDEX, NODE_WITHOUT_PID_NAMESPACE,
};
pub use refused_config::{ConfigRow, REFUSED_CONFIGS};
pub use registration::Registration;
pub use worker::Worker;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::engine::{LaunchContext, ReferenceVariant};
use crate::proc::{StopReport, Supervised};

/// A running stack: its [`StackPlan`] (fixed), its [`Control`] (how this
/// run kills, replaces and tears down, chosen at provision or attach), and
/// its components as they are now.
pub struct Stack {
    pub plan: StackPlan,
    control: Box<dyn Control>,
    frontend: Mutex<Arc<Supervised>>,
    /// The first Guard service (the only one unless each slot has its own).
    pub guard: Option<Arc<Supervised>>,
    /// Every Guard service, named `guard` or `guard-<slot>`.
    pub guards: Vec<Arc<Supervised>>,
    /// Guard services started again after one died (TC-08), in order, each
    /// with the service it stands in for (`guard`, `guard-<slot>`).
    restarted_guards: Mutex<Vec<(String, Arc<Supervised>)>>,
    workers: Mutex<Vec<Arc<Worker>>>,
    references: Mutex<Vec<(ReferenceVariant, Arc<Worker>)>>,
    retired: Mutex<Vec<Arc<Worker>>>,
    /// Frontends that were stopped or killed and replaced, kept for teardown.
    retired_frontends: Mutex<Vec<Arc<Supervised>>>,
    /// The frontend was SIGKILLed by a case: the restore step replaces it
    /// even while the dying process is still seen running.
    frontend_killed: AtomicBool,
    /// Launch-time fault switches for the next replacement worker only.
    replacement_faults: Mutex<Vec<String>>,
    /// What the replace hook did for each replacement it started.
    replace_hook_runs: Mutex<Vec<HookRun>>,
    /// Where the stack's logs are served over HTTP (`stack up` serves
    /// them; an attached run reads the owner's from its description).
    logs_url: Mutex<Option<String>>,
    timings: Mutex<StartupTimings>,
    /// The `stack.json` kept up to date with the running processes.
    manifest: Mutex<Option<PathBuf>>,
}

/// What a stack is made of, provisioned here or attached to: everything
/// but the state its cases change.
pub(crate) struct Parts {
    pub plan: StackPlan,
    pub control: Box<dyn Control>,
    pub frontend: Supervised,
    /// Every Guard service; the first is [`Stack::guard`].
    pub guards: Vec<Arc<Supervised>>,
    /// The workers serving already (attached); none while provisioning.
    pub workers: Vec<Arc<Worker>>,
    pub timings: StartupTimings,
    pub manifest: Option<PathBuf>,
    pub logs_url: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StackError {
    #[error("no worker named {0} in the stack")]
    NoSuchWorker(String),
    #[error("fault not applied: {0}")]
    FaultNotApplied(String),
    #[error("replacement not started: {0}")]
    ReplacementNotStarted(String),
    #[error(transparent)]
    Provision(#[from] ProvisionError),
}

impl Stack {
    /// The one way a stack comes to be, provisioned or attached.
    pub(crate) fn new(parts: Parts) -> Self {
        Self {
            plan: parts.plan,
            control: parts.control,
            frontend: Mutex::new(Arc::new(parts.frontend)),
            guard: parts.guards.first().cloned(),
            guards: parts.guards,
            workers: Mutex::new(parts.workers),
            references: Mutex::new(Vec::new()),
            retired: Mutex::new(Vec::new()),
            retired_frontends: Mutex::new(Vec::new()),
            frontend_killed: AtomicBool::new(false),
            replacement_faults: Mutex::new(Vec::new()),
            replace_hook_runs: Mutex::new(Vec::new()),
            restarted_guards: Mutex::new(Vec::new()),
            logs_url: Mutex::new(parts.logs_url),
            timings: Mutex::new(parts.timings),
            manifest: Mutex::new(parts.manifest),
        }
    }

    /// How this run controls the stack: whether it owns it, whether it sees
    /// its processes.
    pub fn control(&self) -> &dyn Control {
        self.control.as_ref()
    }

    /// How long each part of startup took (so far).
    pub fn timings(&self) -> StartupTimings {
        self.timings.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Starts the KVCR workers of a stack provisioned with its references
    /// (after the reference phase stopped them) and waits until they serve.
    pub fn start_workers(&self) -> Result<(), StackError> {
        provision::start_workers(self)?;
        self.write_manifest();
        Ok(())
    }

    /// The node (index into the topology's nodes) `slot` runs on; 0 for a
    /// slot the topology does not name (the reference workers).
    pub fn node_of(&self, slot: &str) -> usize {
        self.plan.node_of(slot)
    }

    /// The launch context of a component on `node`: its address.
    pub fn ctx_on(&self, node: usize) -> LaunchContext {
        self.plan.ctx_on(node)
    }

    /// The namespace node (node 1) of a two-node stack, when there is one.
    pub fn namespace_node(&self) -> Option<&crate::proc::netns::NamespaceNode> {
        self.plan.placement.namespace_node()
    }

    /// Why `worker` cannot be reached, when it runs on node 1 and node 1's
    /// link is not up (both ends of its veth as the kernel reports them);
    /// `None` otherwise. Appended to errors of requests and scrapes, so a
    /// timeout towards a cut-off node says so.
    pub fn unreachable_node(&self, worker: &Worker) -> Option<String> {
        let node = self.plan.placement.namespace_node()?;
        if self.node_of(worker.name()) != 1 {
            return None;
        }
        let link = node.link_state();
        (!link.is_up()).then(|| {
            format!(
                "worker {} runs on node 1, which is cut off the network: {link}",
                worker.name()
            )
        })
    }

    /// When `source` and `reader` run on different nodes: the interface
    /// `reader` reaches `source` through and the addresses of both, for
    /// checking that a transfer between them crossed the network.
    pub fn crossing(&self, source: &Worker, reader: &Worker) -> Option<nodes::Crossing> {
        let side = |worker: &Worker| {
            let node = self.node_of(worker.name());
            nodes::Side {
                worker: worker.name().to_string(),
                address: self.plan.placement.address_of(node, &self.plan.ctx.host),
                interface: self.plan.placement.interface_of(node).unwrap_or_default(),
                log: worker.process.log_path().to_path_buf(),
            }
        };
        (self.node_of(source.name()) != self.node_of(reader.name())).then(|| nodes::Crossing {
            source: side(source),
            reader: side(reader),
        })
    }

    /// The frontend's base URL, e.g. `http://127.0.0.1:8123`.
    pub fn frontend_url(&self) -> String {
        self.plan.frontend_url()
    }

    /// The frontend process (the router), as it is now.
    pub fn frontend(&self) -> Arc<Supervised> {
        match self.frontend.lock() {
            Ok(f) => f.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The live worker in slot `name`.
    pub fn worker(&self, name: &str) -> Result<Arc<Worker>, StackError> {
        self.workers
            .lock()
            .map_err(|_| StackError::NoSuchWorker(name.into()))?
            .iter()
            .find(|w| w.slot.name == name)
            .cloned()
            .ok_or_else(|| StackError::NoSuchWorker(name.into()))
    }

    /// The log of every component of the stack as it is now: the
    /// frontend, each Guard service (and each started again after one
    /// died) and each worker.
    pub fn component_logs(&self) -> Vec<PathBuf> {
        let mut logs = vec![self.frontend().log_path().to_path_buf()];
        logs.extend(self.guards.iter().map(|g| g.log_path().to_path_buf()));
        if let Ok(restarted) = self.restarted_guards.lock() {
            logs.extend(restarted.iter().map(|(_, g)| g.log_path().to_path_buf()));
        }
        logs.extend(
            self.workers()
                .iter()
                .map(|w| w.process.log_path().to_path_buf()),
        );
        logs
    }

    pub fn workers(&self) -> Vec<Arc<Worker>> {
        self.workers.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// The reference worker of `variant`, when the reference phase needs it.
    pub fn reference(&self, variant: ReferenceVariant) -> Option<Arc<Worker>> {
        self.references
            .lock()
            .ok()?
            .iter()
            .find(|(v, _)| *v == variant)
            .map(|(_, w)| w.clone())
    }

    /// Stops the reference workers once their tokens are recorded.
    pub fn stop_references(&self) -> Vec<StopReport> {
        let refs = self
            .references
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default();
        // Independent processes: stopped together, not one grace after another.
        std::thread::scope(|scope| {
            let stops: Vec<_> = refs
                .iter()
                .map(|(_, w)| scope.spawn(|| w.process.stop(Duration::from_secs(5))))
                .collect();
            stops.into_iter().filter_map(|s| s.join().ok()).collect()
        })
    }

    /// Restarts a dead frontend, replaces every worker whose process is
    /// gone, that the router no longer lists ([`Dropout`]) or whose KVCR
    /// source is latched off ([`Latched`]), and waits until the router lists
    /// no dead instance, so the next case finds the stack whole. Returns
    /// each live worker it replaced for being dropped out or latched, in
    /// words (a dead one is the case's own to report).
    pub fn ensure_whole(&self) -> Result<Vec<String>, StackError> {
        let killed = self.frontend_killed.swap(false, Ordering::SeqCst);
        if killed || !self.frontend().is_running() {
            tracing::debug!("restarting the frontend after a destructive case");
            self.restart_frontend()?;
        }
        for worker in self.workers() {
            if !worker.process.is_running() {
                tracing::info!(
                    "restoring worker {} after a destructive case",
                    worker.name()
                );
                self.replace_worker(worker.name())?;
            }
        }
        // A dead worker's instance stays registered until its discovery lease
        // lapses; until then the router may pick it and answer 503.
        let retired = self.retired.lock().map(|r| r.clone()).unwrap_or_default();
        for old in retired.iter().filter(|w| !w.process.is_running()) {
            readiness::await_instance_gone(self, old.instance_id())?;
        }
        // A live worker the router no longer lists serves nothing through it
        // and never registers again by itself: it is replaced like a dead one.
        let dropouts = self.dropped_out_workers().map_err(|e| {
            StackError::ReplacementNotStarted(format!(
                "could not tell whether every live worker is still listed by the router: {e}"
            ))
        })?;
        let mut replaced = Vec::new();
        for dropout in dropouts {
            crate::events::emit(crate::events::RunEvent::WorkerReplaced {
                worker: dropout.worker.to_string(),
                reason: dropout.to_string(),
            });
            self.kill_worker(&dropout.worker)?;
            self.replace_worker(&dropout.worker)?;
            replaced.push(dropout.to_string());
        }
        // So is one whose KVCR latched its source writes off for its life.
        for latched in self.latched_workers() {
            crate::events::emit(crate::events::RunEvent::WorkerReplaced {
                worker: latched.worker.to_string(),
                reason: latched.to_string(),
            });
            self.kill_worker(&latched.worker)?;
            self.replace_worker(&latched.worker)?;
            replaced.push(latched.to_string());
        }
        Ok(replaced)
    }

    /// Stops every component this run owns (none of a stack it attached
    /// to). Returns what each stop did.
    pub fn teardown(&self) -> Vec<StopReport> {
        self.control.teardown(self)
    }

    /// Stops every component: frontend first (no new requests), then
    /// workers, then the Guard. Returns what each stop did.
    pub(super) fn stop_everything(&self) -> Vec<StopReport> {
        let grace = Duration::from_secs(5);
        // The frontend gets its SIGTERM first (no new requests) and its grace
        // runs while the workers and Guards stop: Dynamo's frontend (1.6.1)
        // finishes its shutdown in a fraction of a second, then its
        // interpreter hangs at exit until the SIGKILL.
        let frontends: Vec<Arc<Supervised>> = std::iter::once(self.frontend())
            .chain(
                self.retired_frontends
                    .lock()
                    .map(|r| r.clone())
                    .unwrap_or_default(),
            )
            .collect();
        std::thread::scope(|scope| {
            let frontend_stops: Vec<_> = frontends
                .iter()
                .map(|f| {
                    f.signal_term();
                    scope.spawn(move || f.stop(grace))
                })
                .collect();
            let mut reports = self.teardown_after_frontend(grace);
            let mut stops: Vec<StopReport> = frontend_stops
                .into_iter()
                .filter_map(|s| s.join().ok())
                .collect();
            stops.append(&mut reports);
            stops
        })
    }

    /// [`Stack::teardown`] once the frontends have their SIGTERM: reference
    /// workers, workers, then the Guards.
    fn teardown_after_frontend(&self, grace: Duration) -> Vec<StopReport> {
        let mut reports = self.stop_references();
        for worker in self.workers().iter().chain(
            self.retired
                .lock()
                .map(|r| r.clone())
                .unwrap_or_default()
                .iter(),
        ) {
            reports.push(worker.process.stop(grace));
        }
        // Replacements that attached runs started in this stack: they are in
        // the stack description, not in this process's lists.
        let known: Vec<u32> = self.workers().iter().map(|w| w.process.pid()).collect();
        if let Some(path) = self.manifest_path() {
            for process in attach::manifest_worker_processes(&path) {
                if !known.contains(&process.pid()) && process.is_running() {
                    reports.push(process.stop(grace));
                }
            }
        }
        // Workers go before the Guards: they hand their groups back.
        let restarted = self
            .restarted_guards
            .lock()
            .map(|g| g.clone())
            .unwrap_or_default();
        for guard in restarted.iter().rev().map(|(_, g)| g).chain(&self.guards) {
            reports.push(guard.stop(grace));
        }
        self.plan.placement.stop();
        // What the Guard services' shutdown left in their pool directories,
        // before the scratch directory goes.
        self.plan.layout.record_pool_files_after_shutdown();
        self.plan.layout.remove_scratch();
        reports
    }

    /// What the stack was provisioned with (an attached stack: what its
    /// owner provisioned it with).
    pub fn options(&self) -> &StackOptions {
        &self.plan.options
    }
}
