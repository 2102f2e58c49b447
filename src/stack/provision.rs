//! Bringing a stack up: Guard services, frontend, reference workers and
//! workers as supervised process groups, each awaited by a real readiness
//! check, failing fast (with the log tail) when a component dies during
//! startup.
//!
//! Readiness is the same for every engine and reads nothing an engine writes
//! for the harness's sake: a worker is ready when Dynamo's discovery lists an
//! instance on a port the worker's process listens on, its `/metrics`
//! answers, the router's `/health` lists the instance, and a completion
//! pinned to it comes back through the router. Every wait's budget is the
//! user's `startup_timeout_s`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engine::{Engine, LaunchContext, ReferenceVariant, WorkerSlot};
use crate::proc::{procfs, ProcError, ProcessSpec, Supervised};
use crate::wait::{self, Poll, WaitError};

use super::nodes::{self, Placement};
use super::{discovery, ports, probe, Layout, Registration, Stack, Worker};

const POLL_EVERY: Duration = Duration::from_millis(50);
const LOG_TAIL_LINES: usize = 25;

/// What the runner decides about a stack (everything else is the engine's).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct StackOptions {
    pub python: PathBuf,
    pub repo_root: PathBuf,
    pub logs_dir: PathBuf,
    pub run_id: String,
    pub host: String,
    pub startup_timeout: Duration,
    /// Start the KVCR-disabled reference workers first and leave the KVCR
    /// workers to [`Stack::start_workers`], once the reference phase is done
    /// and the references are stopped: references always run alone.
    pub with_reference: bool,
    /// Launch-time fault switches (`--fault NAME[=ARG]`) for every KVCR
    /// worker; empty for a healthy stack. Used by the fault matrix.
    pub worker_faults: Vec<String>,
    /// How long a SIGKILLed component may take to be gone before the kill
    /// counts as not applied: the run's request timeout. A process of
    /// several GB on a busy machine takes seconds to exit.
    #[serde(default = "default_kill_timeout")]
    pub kill_timeout: Duration,
    /// The KVCR build every KVCR process of the stack imports (`python`
    /// runs it); recorded in `stack.json` for runs that attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvcr: Option<crate::evidence::KvcrBuild>,
}

fn default_kill_timeout() -> Duration {
    Duration::from_secs(30)
}

/// How long each part of startup took, recorded in the evidence.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct StartupTimings {
    pub guard_ready_ms: Option<u128>,
    pub workers_ready_ms: u128,
    pub frontend_ready_ms: u128,
    pub first_completion_ms: u128,
    pub total_ms: u128,
    /// Each worker and reference worker: spawn to serving, in ms.
    #[serde(default)]
    pub per_component_ms: Vec<(String, u128)>,
    /// Workers started a second time because the first start never became
    /// ready, and why (recorded, never hidden: see [`KVCR_DEPOSIT`]).
    #[serde(default)]
    pub restarts: Vec<String>,
}

/// What a KVCR worker's readiness includes beyond serving: a deposit into
/// its KVCR pool. On a loaded 2-core machine, vLLM's CPU offloading has been
/// seen to come up serving yet never store a block (its primary tier stays
/// empty, nothing reaches KVCR, nothing is logged); every case would then
/// fail on a stack that is not what it tests. Such a worker is not ready: it
/// is restarted once, and the restart is recorded in `stack.json`.
pub const KVCR_DEPOSIT: &str = "a deposit into its KVCR pool (local_fill)";

#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("cannot prepare the run's directories or ports: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Spawn(#[from] ProcError),
    #[error(transparent)]
    NotReady(Box<NotReady>),
    #[error(transparent)]
    Node(#[from] crate::proc::netns::NodeError),
    /// A KVCR worker that serves but never deposits (see [`KVCR_DEPOSIT`]).
    #[error("{} is not ready: {}", .0.process.name(), .0.wait)]
    NoDeposit(Box<NoDeposit>),
}

/// A started worker whose KVCR pool received nothing.
#[derive(Debug)]
pub struct NoDeposit {
    pub process: Supervised,
    pub wait: WaitError,
}

/// A component that did not become ready, with the end of its log.
#[derive(Debug, thiserror::Error)]
#[error("{component} {wait}\n--- last lines of {log} ---\n{tail}", log = .log.display())]
pub struct NotReady {
    pub component: String,
    pub wait: WaitError,
    pub log: PathBuf,
    pub tail: String,
}

/// Starts the stack: Guard services, frontend, then either the KVCR workers
/// or (with `options.with_reference`) the reference workers, whose caller
/// runs the reference phase, stops them and calls [`Stack::start_workers`].
pub fn provision(engine: Arc<dyn Engine>, options: StackOptions) -> Result<Stack, ProvisionError> {
    let started = Instant::now();
    let layout = Layout::create(&options.logs_dir, &options.run_id)?;
    let plans = engine.worker_plans();
    // Node placement: node 1 (a namespace node) when the plans use one; node
    // 0's components listen on and advertise the address node 1 reaches.
    let node_count = plans.iter().map(|p| p.node + 1).max().unwrap_or(1);
    let placement = Placement::create_with(
        node_count,
        &options.run_id,
        &layout.logs_dir,
        options.startup_timeout,
        !options
            .worker_faults
            .iter()
            .any(|f| f == NODE_WITHOUT_PID_NAMESPACE),
    )?;
    let host = placement.host_address(&options.host);
    // Per worker: control, metrics, KV events, side channel; plus the
    // frontend, the bare engine and the reference workers' ports.
    let system_ports = plans.len() + 3;
    let mut free = ports::free_ports_in(
        &host,
        2 + 4 * plans.len() + 2 * 3 + system_ports,
        ports::STACK_PORT_RANGE,
    )?;
    let mut system = free.split_off(free.len() - system_ports).into_iter();
    let mut free = free.into_iter();
    let mut next_port = move || free.next().unwrap_or(0);
    let mut next_system_port = move || system.next().unwrap_or(0);
    let guard_count = if engine.guard_per_slot() {
        1
    } else {
        plans.len() as u32
    };
    let ctx = LaunchContext {
        python: options.python.clone(),
        repo_root: options.repo_root.clone(),
        logs_dir: layout.logs_dir.clone(),
        work_dir: placement.work_dir(&layout.scratch_dir),
        host,
        frontend_port: next_port(),
        guard_socket: layout.guard_socket(),
        pool_dir: layout.pool_dir(),
        compatibility_digest: format!("kvcr-e2e-{}-{}", engine.geometry().name, options.run_id),
        guard_count,
    };
    let bare_port = next_port();
    let slots: Vec<WorkerSlot> = plans
        .iter()
        .enumerate()
        .map(|(i, plan)| {
            let (guard_service, guard_socket, guard_index) = if engine.guard_per_slot() {
                let service = format!("guard-{}", plan.slot);
                (service.clone(), layout.guard_socket_of(&service), 0)
            } else {
                ("guard".to_string(), layout.guard_socket(), i as u32)
            };
            let mut slot = WorkerSlot {
                ready_file: layout.ready_file(&format!("worker-{}", plan.slot)),
                name: plan.slot.clone(),
                guard_index,
                guard_service,
                guard_socket,
                control_port: next_port(),
                metrics_port: next_system_port(),
                kv_events_port: next_port(),
                side_channel_port: next_port(),
                generation: 0,
            };
            placement.place_slot(&mut slot, plan.node);
            slot
        })
        .collect();
    let reference_slots: Vec<(ReferenceVariant, WorkerSlot)> = if options.with_reference {
        engine
            .reference_variants()
            .into_iter()
            .map(|v| {
                let slot = WorkerSlot {
                    name: v.label().into(),
                    guard_index: 0,
                    guard_service: String::new(),
                    guard_socket: PathBuf::new(),
                    control_port: 0,
                    metrics_port: next_system_port(),
                    kv_events_port: next_port(),
                    side_channel_port: next_port(),
                    ready_file: layout.ready_file(v.label()),
                    generation: 0,
                };
                (v, slot)
            })
            .collect()
    } else {
        Vec::new()
    };

    // Everything started so far is stopped if a later step fails.
    let started_so_far = Partial::default();
    let result = (|| {
        // The Guards, the frontend and the reference workers need nothing
        // from each other: they start together. The KVCR workers need the
        // Guards (and start after the reference phase when there is one).
        let spawned_guards = spawn_guards(
            engine.as_ref(),
            &ctx,
            (&layout, &placement),
            &slots,
            &started_so_far,
        )?;
        let guards: Vec<Arc<Supervised>> = spawned_guards.iter().map(|(g, _)| g.clone()).collect();
        let frontend = Arc::new(Supervised::spawn(&engine.frontend(&ctx))?);
        started_so_far.add(frontend.pid());

        let stack = Stack {
            timings: Mutex::new(StartupTimings::default()),
            engine: engine.clone(),
            ctx: ctx.clone(),
            layout: layout.clone(),
            frontend: Mutex::new(frontend),
            guard: guards.first().cloned(),
            guards,
            workers: Mutex::new(Vec::new()),
            slots: slots.clone(),
            references: Mutex::new(Vec::new()),
            retired: Mutex::new(Vec::new()),
            retired_frontends: Mutex::new(Vec::new()),
            frontend_killed: Default::default(),
            replacement_faults: Mutex::new(Vec::new()),
            replace_hook_runs: Mutex::new(Vec::new()),
            restarted_guards: Mutex::new(Vec::new()),
            logs: Mutex::new(Default::default()),
            options: options.clone(),
            manifest: Mutex::new(None),
            attached: false,
            by_urls: false,
            owner_pid: std::process::id(),
            bare_port,
            started,
            placement,
        };
        let refs: Vec<(ReferenceVariant, ProcessSpec, WorkerSlot)> = reference_slots
            .iter()
            .map(|(v, slot)| (*v, engine.reference_worker(&ctx, *v, slot), slot.clone()))
            .collect();
        let specs: Vec<(ProcessSpec, WorkerSlot)> = refs
            .iter()
            .map(|(_, spec, slot)| (spec.clone(), slot.clone()))
            .collect();
        let (guards_ready, ready) = std::thread::scope(|scope| {
            let guards_ready =
                scope.spawn(|| await_guards(&spawned_guards, options.startup_timeout, started));
            let ready = start_ready(&stack, specs, &started_so_far, false);
            (guards_ready.join(), ready)
        });
        let guards_ready = guards_ready.map_err(|_| {
            ProvisionError::Io(std::io::Error::other("the Guard readiness thread panicked"))
        })??;
        let ready = ready?;
        if let Ok(mut t) = stack.timings.lock() {
            t.guard_ready_ms = (!spawned_guards.is_empty()).then_some(guards_ready);
        }
        if let Ok(mut r) = stack.references.lock() {
            *r = refs
                .iter()
                .map(|(v, _, _)| *v)
                .zip(ready.into_iter().map(Arc::new))
                .collect();
        }
        if !options.with_reference {
            start_workers_of(&stack, &started_so_far)?;
        }
        Ok(stack)
    })();
    if result.is_err() {
        started_so_far.stop_all();
        layout.remove_scratch();
    }
    result
}

/// Starts the stack's KVCR workers (one at a time when the engine asks for
/// it) and waits until each serves.
pub(super) fn start_workers(stack: &Stack) -> Result<(), ProvisionError> {
    let started_so_far = Partial::default();
    let result = start_workers_of(stack, &started_so_far);
    if result.is_err() {
        started_so_far.stop_all();
    }
    result
}

fn start_workers_of(stack: &Stack, started_so_far: &Partial) -> Result<(), ProvisionError> {
    let specs: Vec<(ProcessSpec, WorkerSlot)> = stack
        .slots
        .iter()
        .map(|slot| {
            (
                placed_worker(stack, slot, &stack.options.worker_faults),
                slot.clone(),
            )
        })
        .collect();
    let ready = start_ready(stack, specs, started_so_far, true)?;
    if let Ok(mut workers) = stack.workers.lock() {
        *workers = ready.into_iter().map(Arc::new).collect();
    }
    if let Ok(mut t) = stack.timings.lock() {
        let now = stack.started.elapsed().as_millis();
        t.workers_ready_ms = now;
        t.frontend_ready_ms = now;
        t.first_completion_ms = now;
        t.total_ms = now;
    }
    Ok(())
}

/// Spawns `specs` (serially when the engine asks for it) and waits until
/// each serves a real completion through the router.
fn start_ready(
    stack: &Stack,
    specs: Vec<(ProcessSpec, WorkerSlot)>,
    started_so_far: &Partial,
    kvcr: bool,
) -> Result<Vec<Worker>, ProvisionError> {
    let serial = stack.engine.start_serially();
    let await_one = |(process, spec, slot, at): (Supervised, ProcessSpec, WorkerSlot, Instant)| {
        await_or_restart(stack, process, &spec, slot, at, kvcr, started_so_far)
    };
    let mut pending = Vec::new();
    let mut ready = Vec::new();
    for (spec, slot) in &specs {
        let spawned_at = Instant::now();
        let process = Supervised::spawn(spec)?;
        started_so_far.add(process.pid());
        pending.push((process, spec.clone(), slot.clone(), spawned_at));
        if serial {
            ready.push(await_one(pending.remove(0))?);
        }
    }
    for started in pending {
        ready.push(await_one(started)?);
    }
    Ok(ready)
}

/// [`await_worker`], starting the worker once more if it served but never
/// deposited into its KVCR pool (see [`KVCR_DEPOSIT`]).
fn await_or_restart(
    stack: &Stack,
    process: Supervised,
    spec: &ProcessSpec,
    slot: WorkerSlot,
    spawned_at: Instant,
    kvcr: bool,
    started_so_far: &Partial,
) -> Result<Worker, ProvisionError> {
    match await_worker(stack, process, slot.clone(), spawned_at, kvcr) {
        Err(ProvisionError::NoDeposit(failed)) => {
            let reason = format!(
                "{}: served, but no {KVCR_DEPOSIT} after {}; restarted once (log: {})",
                failed.process.name(),
                failed.wait,
                failed.process.log_path().display()
            );
            eprintln!("[kvcr-e2e] {reason}");
            failed.process.stop(Duration::from_secs(5));
            if let Ok(mut t) = stack.timings.lock() {
                t.restarts.push(reason);
            }
            let again = Supervised::spawn(spec)?;
            started_so_far.add(again.pid());
            await_worker(stack, again, slot, Instant::now(), kvcr).map_err(|e| match e {
                ProvisionError::NoDeposit(failed) => not_ready(&failed.process, failed.wait),
                other => other,
            })
        }
        other => other,
    }
}

/// Starts a worker in `slot` on a running stack (with extra launch-time
/// fault switches) and waits until it serves.
pub(super) fn start_worker(
    stack: &Stack,
    slot: WorkerSlot,
    faults: &[String],
) -> Result<Arc<Worker>, ProvisionError> {
    let mut spec = placed_worker(stack, &slot, faults);
    // On an attached stack the replacement must outlive this run.
    spec.outlive_harness = stack.attached;
    let spawned_at = Instant::now();
    let process = Supervised::spawn(&spec)?;
    let pid = process.pid();
    match await_worker(stack, process, slot, spawned_at, true) {
        Ok(worker) => Ok(Arc::new(worker)),
        Err(err) => {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            Err(err)
        }
    }
}

/// Starts a frontend on the stack's port and waits until it routes a real
/// completion to every live worker (a dead one is replaced after, through
/// this frontend).
pub(super) fn start_frontend(stack: &Stack) -> Result<Supervised, ProvisionError> {
    let mut spec = stack.engine.frontend(&stack.ctx);
    spec.name = format!("{}.{}", spec.name, stack.retired_frontend_count() + 1);
    spec.log = stack.ctx.logs_dir.join(format!("{}.log", spec.name));
    let frontend = Supervised::spawn(&spec)?;
    let timeout = stack.options.startup_timeout;
    let result = (|| {
        let mut workers = stack.workers();
        workers.retain(|w| w.process.is_running());
        let ids: Vec<u64> = workers.iter().map(|w| w.instance_id()).collect();
        await_health_lists(&frontend, &stack.ctx, &ids, timeout)?;
        for worker in &workers {
            await_completion(&frontend, &stack.ctx, &worker.ready.model, worker, timeout)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(frontend),
        Err(e) => {
            frontend.stop(Duration::from_secs(3));
            Err(e)
        }
    }
}

/// Spawns the Guard services the engine runs (one shared by every slot, or
/// one per slot) without waiting: they need nothing from each other, and
/// [`await_guards`] waits for them while the frontend and the reference
/// workers start. Returns each with its socket as this host sees it.
fn spawn_guards(
    engine: &dyn Engine,
    ctx: &LaunchContext,
    (layout, placement): (&Layout, &Placement),
    slots: &[WorkerSlot],
    started_so_far: &Partial,
) -> Result<Vec<(Arc<Supervised>, PathBuf)>, ProvisionError> {
    let mut services: Vec<(String, LaunchContext, usize)> = Vec::new();
    if engine.guard_per_slot() {
        let plans = engine.worker_plans();
        for slot in slots {
            let node = nodes::node_of(&plans, &slot.name);
            let pool_dir = match placement.pool_dir(node, &slot.guard_service)? {
                Some(dir) => dir,
                None => layout.pool_dir_of(&slot.guard_service)?,
            };
            services.push((
                slot.guard_service.clone(),
                ctx.for_guard(slot.guard_socket.clone(), pool_dir, 1),
                node,
            ));
        }
    } else {
        services.push(("guard".to_string(), ctx.clone(), 0));
    }
    let mut guards = Vec::new();
    for (name, guard_ctx, node) in services {
        let Some(mut spec) = engine.guard(&guard_ctx) else {
            continue;
        };
        spec.log = ctx.logs_dir.join(format!("{name}.log"));
        spec.name = name;
        let guard = Supervised::spawn(&placement.wrap(node, spec))?;
        started_so_far.add(guard.pid());
        let socket = placement.host_view(node, &guard_ctx.guard_socket);
        guards.push((Arc::new(guard), socket));
    }
    Ok(guards)
}

/// Waits until every Guard of [`spawn_guards`] is ready; returns when the
/// last one was, in ms since `started`.
fn await_guards(
    guards: &[(Arc<Supervised>, PathBuf)],
    timeout: Duration,
    started: Instant,
) -> Result<u128, ProvisionError> {
    for (guard, socket) in guards {
        await_guard(guard, socket, timeout)?;
    }
    Ok(started.elapsed().as_millis())
}

/// Node placement: `slot`'s worker as its engine plans it on its node's
/// address, with `faults`, run on that node.
fn placed_worker(stack: &Stack, slot: &WorkerSlot, faults: &[String]) -> ProcessSpec {
    let node = stack.node_of(&slot.name);
    let mut ctx = stack.ctx_on(node);
    let (launch, engine): (Vec<&String>, Vec<&String>) = faults
        .iter()
        .filter(|f| f.as_str() != NODE_WITHOUT_PID_NAMESPACE)
        .partition(|f| f.as_str() == DIGEST_MISMATCH);
    if !launch.is_empty() {
        ctx.compatibility_digest.push_str("-mismatch");
    }
    let spec = with_faults(stack.engine.worker(&ctx, slot), &engine);
    stack.placement.wrap(node, spec)
}

/// A launch fault the harness applies itself, for every engine: the worker
/// presents a KVCR compatibility digest its Guard service was not started
/// with (an engine build or config that differs from its peer's).
pub const DIGEST_MISMATCH: &str = "compatibility_digest_mismatch";

/// A launch fault the harness applies itself, on two nodes: node 1 gets
/// its own network and mount namespaces but shares this host's PID
/// namespace, so UCX sees its peers as same-host processes and reads them
/// through `cma` (shared memory), not the veth.
pub const NODE_WITHOUT_PID_NAMESPACE: &str = "node_without_pid_namespace";

/// `spec` with `--fault` switches (the CPU engine's) appended.
fn with_faults(spec: ProcessSpec, faults: &[&String]) -> ProcessSpec {
    faults
        .iter()
        .fold(spec, |spec, fault| spec.args(["--fault", fault.as_str()]))
}

/// Process groups started by a provisioning attempt that has not finished.
#[derive(Default)]
struct Partial {
    processes: Mutex<Vec<u32>>,
}

impl Partial {
    fn add(&self, pid: u32) {
        if let Ok(mut p) = self.processes.lock() {
            p.push(pid);
        }
    }

    fn stop_all(&self) {
        let pids = self.processes.lock().map(|p| p.clone()).unwrap_or_default();
        for pid in pids {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            crate::proc::reaper::forget_group(pid);
        }
    }
}

pub(super) fn not_ready(process: &Supervised, wait: WaitError) -> ProvisionError {
    ProvisionError::NotReady(Box::new(NotReady {
        component: process.name().to_string(),
        wait,
        log: process.log_path().to_path_buf(),
        tail: process.log_tail(LOG_TAIL_LINES),
    }))
}

/// `Abort` with the exit status and the log file when `process` has exited.
pub(super) fn died<T>(process: &Supervised) -> Option<Poll<T>> {
    process.exit_status().map(|status| {
        let tail = process.log_tail(super::exit_cause::LINES_SCANNED);
        let cause = super::exit_cause::startup_cause(&tail)
            .map(|line| format!(": {line}"))
            .unwrap_or_default();
        Poll::Abort(format!(
            "{} exited during startup ({status}){cause}; its log: {}",
            process.name(),
            process.log_path().display()
        ))
    })
}

/// `socket` is the Guard's socket as this host sees it.
pub(super) fn await_guard(
    guard: &Supervised,
    socket: &std::path::Path,
    timeout: Duration,
) -> Result<(), ProvisionError> {
    let what = format!(
        "the Guard service's socket {} and its `KVCR service ready` line",
        socket.display()
    );
    wait::until(what, timeout, POLL_EVERY, || {
        if let Some(dead) = died(guard) {
            return dead;
        }
        if socket.exists() && guard.log_tail(400).contains("KVCR service ready") {
            Poll::Ready(())
        } else {
            Poll::Pending(format!("socket exists: {}", socket.exists()))
        }
    })
    .map_err(|e| not_ready(guard, e))
}

/// Waits until `process` serves in `slot`: registered in discovery on a port
/// it listens on, `/metrics` answering, listed by the router, and a pinned
/// completion back through the router.
fn await_worker(
    stack: &Stack,
    process: Supervised,
    slot: WorkerSlot,
    spawned_at: Instant,
    kvcr: bool,
) -> Result<Worker, ProvisionError> {
    let timeout = stack.options.startup_timeout;
    let frontend = stack.frontend();
    let ctx = &stack.ctx;
    // The address of the worker's node (node placement).
    let address = stack.ctx_on(stack.node_of(&slot.name)).host;
    let metrics_url = format!("http://{address}:{}", slot.metrics_port);
    let discovery_dir = ctx.discovery_dir();
    let what = format!(
        "{} to register in Dynamo's discovery ({}) on a port it listens on, with /metrics answering at {metrics_url}",
        process.name(),
        discovery_dir.display()
    );
    let instance = wait::until(what, timeout, Duration::from_millis(200), || {
        if let Some(dead) = died(&process).or_else(|| died(&frontend)) {
            return dead;
        }
        // Shared-memory files appear during startup; a process killed before
        // it is ready (a failed startup, a harness that dies) leaves them.
        process.note_shm();
        let members = procfs::group_members(process.pid());
        let listening = procfs::listening_ports_of(&members);
        let instances = match discovery::serving_instances(&discovery_dir) {
            Ok(i) => i,
            Err(e) => return Poll::Abort(e),
        };
        let Some(instance) = discovery::instance_listening_on(&instances, &listening) else {
            return Poll::Pending(format!(
                "{} instance(s) registered, none on the process's listening ports {listening:?}",
                instances.len()
            ));
        };
        match probe::metrics(&metrics_url) {
            Ok(()) => Poll::Ready(instance),
            Err(e) => Poll::Pending(format!(
                "instance {} registered; /metrics: {e}",
                instance.instance_id
            )),
        }
    })
    .map_err(|e| not_ready(&process, e))?;
    await_health_lists(&frontend, ctx, &[instance.instance_id], timeout)?;
    let found = Found {
        instance_id: instance.instance_id,
        metrics_url,
        address,
        probe_salt: 0,
    };
    finish_worker(stack, process, slot, found, spawned_at, kvcr)
}

/// A registered worker the router lists: its instance id, its metrics URL
/// (answering) and its node's address.
pub(super) struct Found {
    pub instance_id: u64,
    pub metrics_url: String,
    pub address: String,
    /// Varies the deposit probe's prompt: a worker another process already
    /// probed (a replace hook's `stack replace-worker`) holds the default
    /// one, and a second deposit of it would never come.
    pub probe_salt: u64,
}

/// A worker the router lists becomes ready: it serves a completion pinned
/// to it through the router and (a KVCR worker in an aggregated stack)
/// deposits into its pool.
pub(super) fn finish_worker(
    stack: &Stack,
    process: Supervised,
    slot: WorkerSlot,
    found: Found,
    spawned_at: Instant,
    kvcr: bool,
) -> Result<Worker, ProvisionError> {
    let timeout = stack.options.startup_timeout;
    let frontend = stack.frontend();
    let ctx = &stack.ctx;
    let Found {
        instance_id,
        metrics_url,
        address,
        probe_salt,
    } = found;
    let model = if kvcr {
        stack.engine.model()
    } else {
        stack
            .engine
            .reference_variants()
            .into_iter()
            .find(|v| v.label() == slot.name)
            .map(|v| stack.engine.reference_model(v))
            .unwrap_or_else(|| stack.engine.model())
    };
    let ready = Registration {
        name: slot.name.clone(),
        pid: process.pid(),
        instance_id,
        model: model.clone(),
        control_endpoint: kvcr.then(|| format!("tcp://{address}:{}", slot.control_port)),
        metrics_url,
        guard_index: kvcr.then_some(slot.guard_index),
        kvcr,
        role: stack
            .engine
            .worker_plans()
            .into_iter()
            .find(|p| kvcr && p.slot == slot.name)
            .map(|p| p.role)
            .unwrap_or_default(),
        ready_ms: 0,
    };
    let mut worker = Worker {
        slot,
        process,
        ready,
    };
    await_completion(&frontend, ctx, &model, &worker, timeout)?;
    if kvcr && worker.role() == crate::engine::topology::WorkerRole::Aggregated {
        if let Err(wait) = await_deposit(stack, &worker, probe_salt, timeout) {
            return Err(ProvisionError::NoDeposit(Box::new(NoDeposit {
                process: worker.process,
                wait,
            })));
        }
    }
    worker.ready.ready_ms = spawned_at.elapsed().as_millis();
    worker.process.note_shm();
    if let Ok(mut t) = stack.timings.lock() {
        t.per_component_ms
            .push((worker.process.name().to_string(), worker.ready.ready_ms));
    }
    Ok(worker)
}

pub(super) fn await_health_lists(
    frontend: &Supervised,
    ctx: &LaunchContext,
    ids: &[u64],
    timeout: Duration,
) -> Result<(), ProvisionError> {
    let what = format!("{}/health to list instances {ids:?}", ctx.frontend_url());
    await_health(frontend, ctx, what, timeout, |seen| {
        ids.iter().all(|id| seen.contains(id))
    })
}

/// Waits until the frontend's `/health` no longer lists `id`: the instance
/// of a dead worker stays registered until its discovery lease lapses, and
/// until then the router may still pick it (the client sees a 503).
pub(super) fn await_instance_gone(stack: &Stack, id: u64) -> Result<(), ProvisionError> {
    let frontend = stack.frontend();
    let what = format!(
        "{}/health to drop the dead instance {id}",
        stack.ctx.frontend_url()
    );
    let timeout = stack.options.startup_timeout;
    await_health(&frontend, &stack.ctx, what, timeout, |seen| {
        !seen.contains(&id)
    })
}

/// Polls the frontend's `/health` until the instance ids it lists satisfy
/// `wanted`, failing at once if the frontend dies.
fn await_health(
    frontend: &Supervised,
    ctx: &LaunchContext,
    what: String,
    timeout: Duration,
    wanted: impl Fn(&[u64]) -> bool,
) -> Result<(), ProvisionError> {
    let url = ctx.frontend_url();
    wait::until(what, timeout, POLL_EVERY, || {
        if let Some(dead) = died(frontend) {
            return dead;
        }
        match probe::health_instance_ids(&url) {
            Ok(seen) if wanted(&seen) => Poll::Ready(()),
            Ok(seen) => Poll::Pending(format!("instances {seen:?}")),
            Err(e) => Poll::Pending(e),
        }
    })
    .map_err(|e| not_ready(frontend, e))
}

fn await_completion(
    frontend: &Supervised,
    ctx: &LaunchContext,
    model: &str,
    worker: &Worker,
    timeout: Duration,
) -> Result<(), ProvisionError> {
    let url = ctx.frontend_url();
    let what = format!(
        "a completion of model {model} through the router from worker {}",
        worker.name()
    );
    wait::until(what, timeout, Duration::from_millis(200), || {
        if let Some(dead) = died(frontend).or_else(|| died(&worker.process)) {
            return dead;
        }
        match probe::completion(&url, model, worker) {
            Ok(()) => Poll::Ready(()),
            Err(e) => Poll::Pending(e),
        }
    })
    .map_err(|e| not_ready(&worker.process, e))
}

/// Sends a prompt of one full block and a few tokens pinned to `worker` and
/// waits until its KVCR pool took the block. Budget: a fifth of the startup
/// timeout (a deposit takes well under a second on a healthy worker).
fn await_deposit(
    stack: &Stack,
    worker: &Worker,
    salt: u64,
    timeout: Duration,
) -> Result<(), WaitError> {
    use crate::telemetry::{Counter, Scope};
    let fill = Counter::TransferBlocks(Scope::LocalFill);
    let vocab = stack.engine.prompt_vocab();
    let span = vocab.end.saturating_sub(vocab.start).max(1);
    let block = stack.engine.geometry().block_size_tokens;
    // A prefix of the worker's own (its instance id seeds it): no prompt
    // family of the suite shares it.
    let seed = worker
        .instance_id()
        .wrapping_add(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // Every token mixes the whole seed (splitmix64): with `seed × 31 + i ×
    // 7919 mod span` all of a prompt followed from `seed × 31 mod span`, so
    // two workers' deposit prompts were the same one time in `span` (426
    // tokens on the CPU stack), and a replacement whose prompt the router
    // hinted from a peer took it over the network: no local_fill, "never
    // deposited" (seen on two nodes at load 34).
    let mix = |i: u32| {
        let mut z = seed ^ u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let tokens: Vec<u32> = (0..block + 3)
        .map(|i| vocab.start + (mix(i) % u64::from(span)) as u32)
        .collect();
    let url = worker.admin_url().to_string();
    let what = format!("worker {} to make {KVCR_DEPOSIT}", worker.name());
    let budget = timeout / 5;
    let before = probe::counter(&url, &fill).unwrap_or(0.0);
    let mut sent = false;
    wait::until(what, budget, Duration::from_millis(250), || {
        if let Some(dead) = died(&worker.process) {
            return dead;
        }
        if !sent {
            match probe::completion_of(
                &stack.ctx.frontend_url(),
                &worker.ready.model,
                worker,
                tokens.clone(),
            ) {
                Ok(()) => sent = true,
                Err(e) => return Poll::Pending(format!("the deposit prompt: {e}")),
            }
        }
        match probe::counter(&url, &fill) {
            Ok(now) if now > before => Poll::Ready(()),
            Ok(now) => Poll::Pending(format!("{fill} = {now}")),
            Err(e) => Poll::Pending(e),
        }
    })
}
