//! The stack under test: provisioned once per run, shared by every case,
//! torn down after the run (or by the reaper if the harness dies).
//!
//! ```text
//! Stack::provision(engine, options)   Guard → workers → frontend, in parallel,
//!                                     each awaited with its own readiness check
//! stack.worker("A")                   a live worker: pid, instance id, URLs
//! stack.kill_worker("A")              SIGKILL its engine process (verified),
//!                                     or the description's kill hook
//! stack.replace_worker("A")           start A' in A's slot and wait for it,
//!                                     or the replace hook, A' found by URLs
//! attach(engine, stack.json, mirror)  a stack another process owns; by
//!                                     URLs only from another PID namespace
//! stack.teardown()                    SIGTERM, grace, SIGKILL every group
//! ```

mod attach;
mod discovery;
mod exit_cause;
mod guard_service;
mod hooks;
mod layout;
mod log_url;
mod nodes;
mod ports;
mod probe;
mod provision;
mod registration;
mod replace_by_hook;
mod worker;

pub use attach::{attach, attach_to_repair, AttachError};
pub use guard_service::{GuardServiceKill, PoolFile};
pub use hooks::{described_pid, hooks, run_hook, HookRun, Hooks};
pub use layout::Layout;
pub use nodes::{Crossing, Placement, Side};
pub use provision::{
    provision, ProvisionError, StackOptions, StartupTimings, DIGEST_MISMATCH,
    NODE_WITHOUT_PID_NAMESPACE,
};
pub use registration::Registration;
pub use worker::Worker;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engine::{Engine, LaunchContext, ReferenceVariant};
use crate::proc::{procfs, StopReport, Supervised};

/// A component that exited on its own while the stack was in use.
#[derive(Debug, Clone, Serialize)]
pub struct Crash {
    pub name: String,
    pub status: String,
    /// The last exceptions of its log (`exit_cause`), when it has any.
    pub cause: Option<String>,
    pub log: std::path::PathBuf,
}

impl std::fmt::Display for Crash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} exited on its own ({})", self.name, self.status)?;
        if let Some(cause) = &self.cause {
            write!(f, ": {cause}")?;
        }
        write!(f, " (log: {})", self.log.display())
    }
}

/// A running stack.
pub struct Stack {
    pub engine: Arc<dyn Engine>,
    pub ctx: LaunchContext,
    pub layout: Layout,
    frontend: Mutex<Arc<Supervised>>,
    /// The first Guard service (the only one unless each slot has its own).
    pub guard: Option<Arc<Supervised>>,
    /// Every Guard service, named `guard` or `guard-<slot>`.
    pub guards: Vec<Arc<Supervised>>,
    /// Guard services started again after the first died (TC-08), in order.
    restarted_guards: Mutex<Vec<Arc<Supervised>>>,
    workers: Mutex<Vec<Arc<Worker>>>,
    /// The worker slots, planned before any worker starts.
    slots: Vec<crate::engine::WorkerSlot>,
    references: Mutex<Vec<(ReferenceVariant, Arc<Worker>)>>,
    retired: Mutex<Vec<Arc<Worker>>>,
    /// Frontends that were stopped or killed and replaced, kept for teardown.
    retired_frontends: Mutex<Vec<Arc<Supervised>>>,
    /// The frontend was SIGKILLed by a case: the restore step replaces it
    /// even while the dying process is still seen running.
    frontend_killed: std::sync::atomic::AtomicBool,
    /// Launch-time fault switches for the next replacement worker only.
    replacement_faults: Mutex<Vec<String>>,
    /// What the replace hook did for each replacement it started.
    replace_hook_runs: Mutex<Vec<HookRun>>,
    /// Where the stack's logs are served over HTTP (`stack up` serves
    /// them), and, attached through URLs, where this run mirrors them.
    logs: Mutex<LogSource>,
    timings: Mutex<StartupTimings>,
    options: StackOptions,
    /// The `stack.json` kept up to date with the running processes.
    manifest: Mutex<Option<std::path::PathBuf>>,
    /// Attached to a stack another process owns: no teardown here.
    pub attached: bool,
    /// Attached to a stack whose processes this harness cannot see (another
    /// PID namespace, container or host): every component is reached
    /// through its URL, faults and replacements through the hooks.
    pub by_urls: bool,
    /// The process that provisioned the stack and tears it down.
    pub owner_pid: u32,
    /// The port a bare engine (no Dynamo, no KVCR) listens on for the
    /// reference phase's determinism probes.
    pub bare_port: u16,
    /// When provisioning began.
    started: Instant,
    /// Which node each slot runs on, and node 1 when there is one.
    placement: nodes::Placement,
}

/// The stack's logs over HTTP: the owner's URL, and this run's mirror of
/// them when it reads them through that URL.
#[derive(Debug, Clone, Default)]
pub struct LogSource {
    pub url: Option<String>,
    pub mirror_dir: Option<std::path::PathBuf>,
}

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

    /// The Guard service holding `worker`'s pool.
    pub fn guard_of(&self, worker: &Worker) -> Option<Arc<Supervised>> {
        if let Some(restarted) = self
            .restarted_guards
            .lock()
            .ok()
            .and_then(|g| g.last().cloned())
        {
            return Some(restarted);
        }
        self.guards
            .iter()
            .find(|g| g.name() == worker.slot.guard_service)
            .or(self.guard.as_ref())
            .cloned()
    }

    /// The node (index into the topology's nodes) `slot` runs on; 0 for a
    /// slot the topology does not name (the reference workers).
    pub fn node_of(&self, slot: &str) -> usize {
        nodes::node_of(&self.engine.worker_plans(), slot)
    }

    /// The launch context of a component on `node`: its address.
    pub fn ctx_on(&self, node: usize) -> LaunchContext {
        LaunchContext {
            host: self.placement.address_of(node, &self.ctx.host),
            ..self.ctx.clone()
        }
    }

    /// The namespace node (node 1) of a two-node stack, when there is one.
    pub fn namespace_node(&self) -> Option<&crate::proc::netns::NamespaceNode> {
        self.placement.namespace_node()
    }

    /// Why `worker` cannot be reached, when it runs on node 1 and node 1's
    /// link is not up (both ends of its veth as the kernel reports them);
    /// `None` otherwise. Appended to errors of requests and scrapes, so a
    /// timeout towards a cut-off node says so.
    pub fn unreachable_node(&self, worker: &Worker) -> Option<String> {
        let node = self.placement.namespace_node()?;
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
                address: self.placement.address_of(node, &self.ctx.host),
                interface: self.placement.interface_of(node).unwrap_or_default(),
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
        self.ctx.frontend_url()
    }

    /// The frontend process (the router), as it is now.
    pub fn frontend(&self) -> Arc<Supervised> {
        match self.frontend.lock() {
            Ok(f) => f.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Starts a new frontend on the same port after the old one died or was
    /// stopped, and waits until it routes to every worker again.
    pub fn restart_frontend(&self) -> Result<(), StackError> {
        let old = self.frontend();
        old.stop(Duration::from_secs(3));
        // The new one binds the same port: the old one must be gone first.
        if old.wait_exit(self.options.kill_timeout).is_none() {
            return Err(StackError::FaultNotApplied(format!(
                "the old frontend (pid {}) is still alive {} s after SIGKILL; cannot start a new one on its port",
                old.pid(),
                self.options.kill_timeout.as_secs()
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

    /// How long a kill may take to show, from now on (an attached run
    /// follows its own request timeout, not the owner's).
    pub fn with_kill_timeout(mut self, timeout: Duration) -> Self {
        self.options.kill_timeout = timeout;
        self
    }

    /// SIGKILLs the frontend's whole process group and waits, up to the
    /// kill timeout, until it is gone. The restore step
    /// ([`Stack::ensure_whole`]) starts a new one.
    pub fn kill_frontend(&self) -> Result<u32, StackError> {
        let frontend = self.frontend();
        self.frontend_killed.store(true, Ordering::SeqCst);
        frontend
            .kill_group()
            .map_err(|e| StackError::FaultNotApplied(format!("SIGKILL of the frontend: {e}")))?;
        let budget = self.options.kill_timeout;
        if frontend.wait_exit(budget).is_none() {
            return Err(StackError::FaultNotApplied(format!(
                "the frontend (pid {}) is alive {} s after SIGKILL",
                frontend.pid(),
                budget.as_secs()
            )));
        }
        Ok(frontend.pid())
    }

    /// The next replacement worker starts with these fault switches
    /// (`--fault NAME[=ARG]`), e.g. `no_reclaim`.
    pub fn set_replacement_faults(&self, faults: Vec<String>) {
        if let Ok(mut f) = self.replacement_faults.lock() {
            *f = faults;
        }
    }

    fn retired_frontend_count(&self) -> usize {
        self.retired_frontends.lock().map(|r| r.len()).unwrap_or(0)
    }

    fn take_replacement_faults(&self) -> Vec<String> {
        self.replacement_faults
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default()
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

    /// SIGKILLs worker `name`'s engine (every process of its group, as a
    /// crash would) and verifies the pid and the whole group are gone.
    pub fn kill_worker(&self, name: &str) -> Result<KillReport, StackError> {
        let worker = self.worker(name)?;
        if worker.process.is_remote() {
            return self.kill_remote_worker(&worker);
        }
        let pid = worker.process.pid();
        worker.process.note_shm();
        let gpu_pids = crate::gpu::run::tree_before_kill(pid);
        let sent_at = Instant::now();
        let hook = match self.hooks().and_then(|h| h.kill_worker) {
            // A deployed stack: its own tooling delivers the kill.
            Some(template) => Some(self.run_kill_hook(&template, &worker, pid)?),
            None => {
                worker.process.kill_group().map_err(|e| {
                    StackError::FaultNotApplied(format!("SIGKILL of worker {name}: {e}"))
                })?;
                None
            }
        };
        crate::gpu::run::after_kill(worker.process.name(), gpu_pids, sent_at);
        // One budget for the process and the rest of its group.
        let budget = self.options.kill_timeout;
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
    fn kill_remote_worker(&self, worker: &Worker) -> Result<KillReport, StackError> {
        let name = worker.name();
        let pid = self
            .manifest_path()
            .and_then(|path| described_pid(&path, name))
            .unwrap_or(0);
        let Some(template) = self.hooks().and_then(|h| h.kill_worker) else {
            return Err(StackError::FaultNotApplied(format!(
                "worker {name} is seen only through {} (its processes are not visible here); the stack description must name hooks.kill_worker",
                worker.admin_url()
            )));
        };
        let sent_at = Instant::now();
        let run = self.run_kill_hook(&template, worker, pid)?;
        let budget = self.options.kill_timeout;
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
        run_hook(
            template,
            &[
                ("worker", name.to_string()),
                ("process", worker.process.name().to_string()),
                ("pid", pid.to_string()),
            ],
            self.options.startup_timeout,
        )
        .map_err(|e| StackError::FaultNotApplied(format!("kill hook for worker {name}: {e}")))
    }

    /// The stack description's hooks, when attached to a stack that names any.
    fn hooks(&self) -> Option<Hooks> {
        self.manifest_path().and_then(|path| hooks(&path))
    }

    /// Whether the worker `kill` killed is gone: its pid, or, for a worker
    /// seen only through its URLs, its metrics port.
    pub fn killed_worker_gone(&self, kill: &KillReport) -> bool {
        match self.worker(&kill.worker) {
            Ok(w) if w.process.is_remote() => !w.process.is_running(),
            _ => !procfs::is_alive(kill.pid),
        }
    }

    /// Whether something listens on `worker`'s control port (after its
    /// death: the Guard): through `/proc` here, through a TCP connect to
    /// its control endpoint for a stack seen only through URLs.
    pub fn control_port_listening(&self, worker: &Worker) -> bool {
        if !self.by_urls {
            return procfs::is_listening(worker.slot.control_port);
        }
        let address = worker
            .control_endpoint()
            .map(|e| e.trim_start_matches("tcp://").to_string())
            .unwrap_or_default();
        use std::net::ToSocketAddrs;
        address
            .to_socket_addrs()
            .ok()
            .into_iter()
            .flatten()
            .any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok())
    }

    /// Instance ids of every worker this stack has had.
    fn known_instance_ids(&self) -> Vec<u64> {
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
    /// description names `hooks.replace_worker`, the hook starts it.
    pub fn replace_worker(&self, name: &str) -> Result<Arc<Worker>, StackError> {
        match self.hooks().and_then(|h| h.replace_worker) {
            Some(template) if self.attached => {
                let (fresh, run) =
                    self.replace_with(name, |slot| replace_by_hook::replace(self, &template, slot))?;
                if let Ok(mut runs) = self.replace_hook_runs.lock() {
                    runs.push(run);
                }
                // The deployer's tooling keeps the description; not this run.
                Ok(fresh)
            }
            _ if self.by_urls => Err(StackError::ReplacementNotStarted(format!(
                "worker {name} runs where this harness cannot start processes (it sees the stack only through URLs); the stack description must name hooks.replace_worker"
            ))),
            _ => self.start_replacement(name),
        }
    }

    /// Starts the replacement in `name`'s slot from this process (what a
    /// replace hook such as `kvcr-e2e stack replace-worker` does) and
    /// records it in the stack description.
    pub fn start_replacement(&self, name: &str) -> Result<Arc<Worker>, StackError> {
        let (fresh, ()) = self.replace_with(name, |slot| {
            let fresh = provision::start_worker(self, slot, &self.take_replacement_faults())?;
            crate::gpu::run::watch(fresh.process.name(), fresh.process.pid());
            Ok((fresh, ()))
        })?;
        self.write_manifest();
        Ok(fresh)
    }

    /// Serves the stack's logs over HTTP on its host (for runs attached
    /// through URLs) and names the URL in the stack description.
    pub fn serve_logs(&self) -> std::io::Result<String> {
        let url = log_url::serve(self.ctx.logs_dir.clone(), &self.ctx.host)?;
        if let Ok(mut logs) = self.logs.lock() {
            logs.url = Some(url.clone());
        }
        self.try_write_manifest()?;
        Ok(url)
    }

    /// Where this run reads the log named `file` of the stack: the
    /// owner's file, or, attached through URLs, a local mirror of it kept
    /// up to date from the owner's log URL.
    fn log_of(&self, file: &str) -> std::path::PathBuf {
        let logs = self.logs.lock().map(|l| l.clone()).unwrap_or_default();
        match (&logs.url, &logs.mirror_dir) {
            (Some(url), Some(dir)) if self.by_urls => {
                let local = dir.join(file);
                if let Err(e) = log_url::mirror(url, file, &local) {
                    tracing::warn!("cannot mirror {url}/{file}: {e}");
                }
                local
            }
            _ => self.ctx.logs_dir.join(file),
        }
    }

    /// What the replace hook did, for each replacement it started.
    pub fn replace_hook_runs(&self) -> Vec<HookRun> {
        self.replace_hook_runs
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    fn replace_with<T>(
        &self,
        name: &str,
        start: impl FnOnce(crate::engine::WorkerSlot) -> Result<(Arc<Worker>, T), StackError>,
    ) -> Result<(Arc<Worker>, T), StackError> {
        let old = self.worker(name)?;
        let mut slot = old.slot.clone();
        slot.generation += 1;
        slot.ready_file = self.layout.ready_file(&slot.process_name());
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

    /// Keeps `path` (a `stack.json`) up to date with the running processes.
    pub fn set_manifest(&self, path: &std::path::Path) -> std::io::Result<()> {
        if let Ok(mut manifest) = self.manifest.lock() {
            *manifest = Some(path.to_path_buf());
        }
        self.try_write_manifest()
    }

    fn manifest_path(&self) -> Option<std::path::PathBuf> {
        self.manifest.lock().ok().and_then(|m| m.clone())
    }

    fn try_write_manifest(&self) -> std::io::Result<()> {
        let Some(path) = self.manifest_path() else {
            return Ok(());
        };
        let mut description = self.describe();
        // Hooks are written by whoever deployed the stack; keep them.
        if let (Some(hooks), Some(object)) = (hooks::hooks(&path), description.as_object_mut()) {
            object.insert(
                "hooks".into(),
                serde_json::to_value(hooks).map_err(std::io::Error::other)?,
            );
        }
        let text = serde_json::to_string_pretty(&description).map_err(std::io::Error::other)?;
        // Write then rename: an attaching run never reads half a file.
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)
    }

    fn write_manifest(&self) {
        if let Err(e) = self.try_write_manifest() {
            tracing::warn!("cannot update the stack description: {e}");
        }
    }

    /// Restarts a dead frontend, replaces every worker whose process is
    /// gone, and waits until the router lists no dead instance, so the next
    /// case finds the stack whole.
    pub fn ensure_whole(&self) -> Result<(), StackError> {
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
            provision::await_instance_gone(self, old.instance_id())?;
        }
        Ok(())
    }

    /// Stops every component: frontend first (no new requests), then
    /// workers, then the Guard. Returns what each stop did.
    pub fn teardown(&self) -> Vec<StopReport> {
        if self.attached {
            return Vec::new();
        }
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
        for guard in restarted.iter().rev().chain(&self.guards) {
            reports.push(guard.stop(grace));
        }
        self.placement.stop();
        self.layout.remove_scratch();
        reports
    }

    /// Whether the stack was provisioned with `options` (used by attach mode).
    pub fn options(&self) -> &StackOptions {
        &self.options
    }

    /// The stack as data, for `stack.json`.
    /// Every running component by name and pid (for the GPU sampler).
    pub fn components(&self) -> Vec<(String, u32)> {
        let mut out = vec![{
            let f = self.frontend();
            (f.name().to_string(), f.pid())
        }];
        out.extend(self.guard.iter().map(|g| (g.name().to_string(), g.pid())));
        out.extend(
            self.workers()
                .iter()
                .map(|w| (w.process.name().to_string(), w.process.pid())),
        );
        if let Ok(refs) = self.references.lock() {
            out.extend(
                refs.iter()
                    .map(|(_, w)| (w.process.name().to_string(), w.process.pid())),
            );
        }
        out
    }

    /// Every current component (frontend, Guard services, workers) that
    /// exited on its own: a crash, not a kill of this harness. Each names
    /// its exit status and the cause its log gives (its last exceptions).
    pub fn crashed_components(&self) -> Vec<Crash> {
        let frontend = self.frontend();
        let workers = self.workers();
        std::iter::once(frontend.as_ref())
            .chain(self.guards.iter().map(Arc::as_ref))
            .chain(workers.iter().map(|w| &w.process))
            .filter_map(|p| {
                let status = p.exited_on_its_own()?;
                let tail = p.log_tail(exit_cause::LINES_SCANNED);
                Some(Crash {
                    name: p.name().to_string(),
                    status: status.to_string(),
                    cause: exit_cause::startup_cause(&tail),
                    log: p.log_path().to_path_buf(),
                })
            })
            .collect()
    }

    pub fn describe(&self) -> serde_json::Value {
        let proc = |p: &Supervised| serde_json::json!({"name": p.name(), "pid": p.pid(), "log": p.log_path(), "rss_kib": procfs::rss_kib(p.pid()), "group_rss_kib": procfs::group_rss_kib(p.pid())});
        serde_json::json!({
            "owner_pid": self.owner_pid,
            "pid_namespace": procfs::pid_namespace(),
            "logs_url": self.logs.lock().ok().and_then(|l| l.url.clone()),
            "layout": self.layout,
            "options": self.options,
            "engine": self.engine.name(),
            "model": self.engine.model(),
            "geometry": self.engine.geometry(),
            "frontend": {"url": self.frontend_url(), "process": proc(&self.frontend())},
            "guard": self.guard.as_ref().map(|g| serde_json::json!({
                "process": proc(g), "socket": self.ctx.guard_socket, "pool_dir": self.ctx.pool_dir,
                "compatibility_digest": self.ctx.compatibility_digest})),
            "guards": self.guards.iter().map(|g| proc(g)).collect::<Vec<_>>(),
            "workers": self.workers().iter().map(|w| w.describe()).collect::<Vec<_>>(),
            "context": self.ctx,
            "startup": self.timings(),
        })
    }
}
