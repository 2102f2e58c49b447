//! Bringing a stack up: Guard services, frontend, reference workers and
//! workers as supervised process groups, each awaited by a real readiness
//! check ([`super::readiness`]), failing fast (with the log tail) when a
//! component dies during startup. Everything started by an attempt that
//! fails is stopped.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engine::slots;
use crate::engine::topology::WorkerPlan;
use crate::engine::{Engine, LaunchContext, ReferenceVariant, WorkerSlot};
use crate::proc::{ProcError, ProcessSpec, Supervised};

use super::guard_journal::SMALL_GUARD_JOURNAL;
use super::nodes::{self, Placement};
use super::ports::StackPorts;
use super::readiness::{
    self, await_completion, await_guards, await_health_lists, await_worker, not_ready, KVCR_DEPOSIT,
};
use super::{Layout, Local, Parts, Stack, StackPlan, Worker};

/// What the runner decides about a stack (everything else is the engine's).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct StackOptions {
    pub python: PathBuf,
    pub repo_root: PathBuf,
    pub logs_dir: PathBuf,
    pub run_id: String,
    pub host: String,
    /// How long the stack, and each of its components, may take to become
    /// ready (`startup_timeout_s`).
    pub startup_timeout: Duration,
    /// Start the KVCR-disabled reference workers first and leave the KVCR
    /// workers to [`Stack::start_workers`], once the reference phase is done
    /// and the references are stopped: references always run alone.
    pub with_reference: bool,
    /// Launch-time fault switches for every KVCR worker (the engine's, see
    /// [`crate::engine::Engine::with_faults`], and the harness's own:
    /// [`DIGEST_MISMATCH`], [`NODE_WITHOUT_PID_NAMESPACE`]); empty for a
    /// healthy stack. Used by the fault matrix.
    pub worker_faults: Vec<String>,
    /// How long a SIGKILLed component may take to be gone before the kill
    /// counts as not applied (`kill_timeout_s`). A process of several GB
    /// on a busy machine takes seconds to exit. A run attached to the
    /// stack follows its own ([`Stack::with_run_budgets`]).
    #[serde(default)]
    pub kill_timeout: Duration,
    /// How long one readiness or health probe may take (`probe_timeout_s`);
    /// an attached run's own, as the kill timeout.
    #[serde(default)]
    pub probe_timeout: Duration,
    /// The KVCR build every KVCR process of the stack imports (`python`
    /// runs it); recorded in `stack.json` for runs that attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvcr: Option<crate::evidence::KvcrBuild>,
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
    /// Each worker and reference worker: spawn to registered (in Dynamo's
    /// discovery, `/metrics` answering, listed by the router), in ms: its
    /// own startup, before any completion through it.
    #[serde(default)]
    pub per_component_registered_ms: Vec<(String, u128)>,
    /// Workers started a second time because the first start never became
    /// ready, and why (recorded, never hidden: see [`KVCR_DEPOSIT`]).
    #[serde(default)]
    pub restarts: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("cannot prepare the run's directories or ports: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Spawn(#[from] ProcError),
    #[error(transparent)]
    NotReady(Box<readiness::NotReady>),
    #[error(transparent)]
    Node(#[from] crate::proc::netns::NodeError),
    /// A plan the engine cannot make (e.g. a fault switch it does not have).
    #[error("cannot plan the stack: {0}")]
    Plan(String),
    /// A KVCR worker that serves but never deposits (see
    /// [`readiness::KVCR_DEPOSIT`]).
    #[error("{} is not ready: {}", .0.process.name(), .0.wait)]
    NoDeposit(Box<readiness::NoDeposit>),
    /// A worker whose KVCR claim its Guard service refused, seen in its log
    /// during startup (see [`super::claim_refusal`]).
    #[error(transparent)]
    ClaimRefused(Box<super::claim_refusal::ClaimRefused>),
}

/// Starts the stack: Guard services, frontend, then either the KVCR workers
/// or (with `options.with_reference`) the reference workers, whose caller
/// runs the reference phase, stops them and calls [`Stack::start_workers`].
pub fn provision(engine: Arc<dyn Engine>, options: StackOptions) -> Result<Stack, ProvisionError> {
    let started = Instant::now();
    let layout = Layout::create(&options.logs_dir, &options.run_id)?;
    let plans = engine.worker_plans();
    let placement = place_nodes(engine.as_ref(), &plans, &options, &layout)?;
    let host = placement.host_address(&options.host);
    let mut ports = StackPorts::probe(&host, plans.len())?;
    let ctx = launch_context(
        engine.as_ref(),
        &options,
        (&layout, &placement),
        host,
        &mut ports,
    );
    let bare_port = ports.next();
    let slots = allot_slots(engine.as_ref(), &plans, (&layout, &placement), &mut ports);
    let reference_slots = if options.with_reference {
        allot_reference_slots(engine.as_ref(), &layout, &mut ports)
    } else {
        Vec::new()
    };

    // Everything started so far is stopped if a later step fails.
    let started_so_far = Partial::default();
    let result = (|| {
        // The Guards, the frontend and the reference workers need nothing
        // from each other: they start together. The KVCR workers need the
        // Guards (and start after the reference phase when there is one).
        let guards = spawn_guards(
            engine.as_ref(),
            &ctx,
            (&layout, &placement),
            &slots,
            &started_so_far,
            &options.worker_faults,
        )?;
        let frontend = Supervised::spawn(&engine.frontend(&ctx))?;
        started_so_far.add(frontend.pid());
        let stack = Stack::new(Parts {
            plan: StackPlan {
                engine: engine.clone(),
                ctx: ctx.clone(),
                layout: layout.clone(),
                slots,
                placement,
                options: options.clone(),
                owner_pid: std::process::id(),
                bare_port,
                started,
            },
            control: Box::new(Local),
            frontend,
            guards: guards.iter().map(|(g, _)| g.clone()).collect(),
            workers: Vec::new(),
            timings: StartupTimings::default(),
            manifest: None,
            logs_url: None,
        });
        start_references(&stack, &guards, &reference_slots, &started_so_far)?;
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

/// Node placement: node 1 (a namespace node) when the plans use one and
/// the engine's profile names no hosts of its own (a profile's hosts are
/// reached through their launchers, `srun` say); node 0's components listen
/// on and advertise the address node 1 reaches.
fn place_nodes(
    engine: &dyn Engine,
    plans: &[WorkerPlan],
    options: &StackOptions,
    layout: &Layout,
) -> Result<Placement, ProvisionError> {
    let node_count = if engine.hosts().is_empty() {
        plans.iter().map(|p| p.node + 1).max().unwrap_or(1)
    } else {
        1
    };
    let pid_namespace = !options
        .worker_faults
        .iter()
        .any(|f| f == NODE_WITHOUT_PID_NAMESPACE);
    Ok(Placement::create_with(
        node_count,
        &options.run_id,
        &layout.logs_dir,
        options.startup_timeout,
        pid_namespace,
    )?)
}

/// The stack's launch context: its paths, the frontend's port on `host`,
/// its Guard (one group per slot, or one service per slot) and the KVCR
/// compatibility digest of this run.
fn launch_context(
    engine: &dyn Engine,
    options: &StackOptions,
    (layout, placement): (&Layout, &Placement),
    host: String,
    ports: &mut StackPorts,
) -> LaunchContext {
    let guard_count = if engine.guard_per_slot() {
        1
    } else {
        engine.worker_plans().len() as u32
    };
    LaunchContext {
        python: options.python.clone(),
        repo_root: options.repo_root.clone(),
        logs_dir: layout.logs_dir.clone(),
        work_dir: placement.work_dir(&layout.scratch_dir),
        host,
        frontend_port: ports.next(),
        guard_socket: layout.guard_socket(),
        pool_dir: layout.pool_dir(),
        compatibility_digest: format!("kvcr-e2e-{}-{}", engine.geometry().name, options.run_id),
        guard_count,
    }
}

/// One slot per plan, from free ports, its node-local files on its node.
fn allot_slots(
    engine: &dyn Engine,
    plans: &[WorkerPlan],
    (layout, placement): (&Layout, &Placement),
    ports: &mut StackPorts,
) -> Vec<WorkerSlot> {
    let slots = slots::allot(
        plans,
        engine.guard_per_slot(),
        &layout.scratch_dir,
        |port, _| ports.for_slot(port),
    );
    slots
        .into_iter()
        .zip(plans)
        .map(|(mut slot, plan)| {
            placement.place_slot(&mut slot, plan.node);
            slot
        })
        .collect()
}

/// One slot per reference variant of the engine, from free ports.
fn allot_reference_slots(
    engine: &dyn Engine,
    layout: &Layout,
    ports: &mut StackPorts,
) -> Vec<(ReferenceVariant, WorkerSlot)> {
    engine
        .reference_variants()
        .into_iter()
        .map(|v| {
            let slot = slots::reference_slot(v, &layout.scratch_dir, |port| ports.for_slot(port));
            (v, slot)
        })
        .collect()
}

/// Starts the reference workers (none without a reference phase) while
/// the Guards come up, and waits for both.
fn start_references(
    stack: &Stack,
    guards: &[(Arc<Supervised>, PathBuf)],
    reference_slots: &[(ReferenceVariant, WorkerSlot)],
    started_so_far: &Partial,
) -> Result<(), ProvisionError> {
    let specs: Vec<(ProcessSpec, WorkerSlot)> = reference_slots
        .iter()
        .map(|(v, slot)| {
            (
                stack
                    .plan
                    .engine
                    .reference_worker(&stack.plan.ctx, *v, slot),
                slot.clone(),
            )
        })
        .collect();
    let timeout = stack.plan.options.startup_timeout;
    let (guards_ready, ready) = std::thread::scope(|scope| {
        let guards_ready = scope.spawn(|| await_guards(guards, timeout, stack.plan.started));
        let ready = start_ready(stack, specs, started_so_far, false);
        (guards_ready.join(), ready)
    });
    let guards_ready = guards_ready.map_err(|_| {
        ProvisionError::Io(std::io::Error::other("the Guard readiness thread panicked"))
    })??;
    for (guard, _) in guards {
        lower_priority(stack, guard);
    }
    let ready = ready?;
    if let Ok(mut t) = stack.timings.lock() {
        t.guard_ready_ms = (!guards.is_empty()).then_some(guards_ready);
    }
    if let Ok(mut r) = stack.references.lock() {
        *r = reference_slots
            .iter()
            .map(|(v, _)| *v)
            .zip(ready.into_iter().map(Arc::new))
            .collect();
    }
    Ok(())
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
    let specs = stack
        .plan
        .slots
        .iter()
        .map(|slot| {
            let spec = placed_worker(stack, slot, &stack.plan.options.worker_faults)?;
            Ok((spec, slot.clone()))
        })
        .collect::<Result<Vec<(ProcessSpec, WorkerSlot)>, ProvisionError>>()?;
    let ready = start_ready(stack, specs, started_so_far, true)?;
    if let Ok(mut workers) = stack.workers.lock() {
        *workers = ready.into_iter().map(Arc::new).collect();
    }
    if let Ok(mut t) = stack.timings.lock() {
        let now = stack.plan.started.elapsed().as_millis();
        t.workers_ready_ms = now;
        t.frontend_ready_ms = now;
        t.first_completion_ms = now;
        t.total_ms = now;
    }
    Ok(())
}

/// Spawns `specs` (serially when the engine asks for it) and waits until
/// each serves a real completion through the router. Serially, the next
/// worker starts once the one before is registered (its startup, the heavy
/// part, is over); the completions follow once all are, since a prefill
/// worker serves only through a decode worker started after it.
fn start_ready(
    stack: &Stack,
    specs: Vec<(ProcessSpec, WorkerSlot)>,
    started_so_far: &Partial,
    kvcr: bool,
) -> Result<Vec<Worker>, ProvisionError> {
    // Together unless a launch fault needs each claim to meet the lease of
    // the one before.
    let serial = kvcr
        && stack
            .plan
            .options
            .worker_faults
            .iter()
            .any(|f| f == DUPLICATE_GUARD_INDEX);
    let mut started = Vec::new();
    for (spec, slot) in &specs {
        let spawned_at = Instant::now();
        let process = Supervised::spawn(spec)?;
        started_so_far.add(process.pid());
        let registered = if serial {
            let found = readiness::await_registered(stack, &process, slot, spawned_at)?;
            lower_priority(stack, &process);
            Some(found)
        } else {
            None
        };
        started.push(Started {
            process,
            spec,
            slot: slot.clone(),
            spawned_at,
            registered,
        });
    }
    started
        .into_iter()
        .map(|s| {
            let worker = await_or_restart(stack, s, kvcr, started_so_far)?;
            lower_priority(stack, &worker.process);
            Ok(worker)
        })
        .collect()
}

/// Gives a ready worker's or Guard service's process group the engine's
/// lower priority, where this run's control does ([`renice`]).
pub(super) fn lower_priority(stack: &Stack, process: &Supervised) {
    stack.control.lower_priority(stack, process);
}

/// Gives `process`'s group the engine's
/// [`Engine::ready_nice`](crate::engine::Engine::ready_nice), so that
/// workers still starting get the cores first. Only processes this run
/// started ([`super::Local`]); a failure is logged and the process runs as
/// it is.
pub(super) fn renice(stack: &Stack, process: &Supervised) {
    let Some(nice) = stack.plan.engine.ready_nice() else {
        return;
    };
    match process.lower_group_priority(nice) {
        Ok(()) => tracing::debug!(name = process.name(), nice, "ready: priority lowered"),
        Err(e) => tracing::warn!(
            name = process.name(),
            "cannot lower the priority of ready {} to nice {nice}: {e}",
            process.name()
        ),
    }
}

/// A spawned worker, and what its serial start already saw of it.
struct Started<'s> {
    process: Supervised,
    spec: &'s ProcessSpec,
    slot: WorkerSlot,
    spawned_at: Instant,
    /// Registered already (a serial start waits for it).
    registered: Option<readiness::Found>,
}

/// [`await_worker`], starting the worker once more if it served but never
/// deposited into its KVCR pool (see [`KVCR_DEPOSIT`]).
fn await_or_restart(
    stack: &Stack,
    started: Started<'_>,
    kvcr: bool,
    started_so_far: &Partial,
) -> Result<Worker, ProvisionError> {
    let Started {
        process,
        spec,
        slot,
        spawned_at,
        registered,
    } = started;
    let first = match registered {
        Some(found) => {
            readiness::finish_worker(stack, process, slot.clone(), found, spawned_at, kvcr)
        }
        None => await_worker(stack, process, slot.clone(), spawned_at, kvcr),
    };
    match first {
        Err(ProvisionError::NoDeposit(failed)) => {
            let reason = format!(
                "{}: served, but {KVCR_DEPOSIT} never came: {}; restarted once (log: {})",
                failed.process.name(),
                failed.wait,
                failed.process.log_path().display()
            );
            crate::events::emit(crate::events::RunEvent::WorkerRestarted {
                worker: failed.process.name().to_string(),
                reason: reason.clone(),
            });
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
/// fault switches) and waits until it serves; one that `outlives_run` (on
/// an attached stack) is left to the stack's owner to stop.
pub(super) fn start_worker(
    stack: &Stack,
    slot: WorkerSlot,
    faults: &[String],
    outlives_run: bool,
) -> Result<Arc<Worker>, ProvisionError> {
    let mut spec = placed_worker(stack, &slot, faults)?;
    spec.outlive_harness = outlives_run;
    let spawned_at = Instant::now();
    let process = Supervised::spawn(&spec)?;
    let pid = process.pid();
    match await_worker(stack, process, slot, spawned_at, true) {
        Ok(worker) => {
            lower_priority(stack, &worker.process);
            Ok(Arc::new(worker))
        }
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
    let mut spec = stack.plan.engine.frontend(&stack.plan.ctx);
    spec.name = format!("{}.{}", spec.name, stack.retired_frontend_count() + 1);
    spec.log = stack.plan.ctx.logs_dir.join(format!("{}.log", spec.name));
    let frontend = Supervised::spawn(&spec)?;
    let timeout = stack.plan.options.startup_timeout;
    let result = (|| {
        let mut workers = stack.workers();
        workers.retain(|w| w.process.is_running());
        let ids: Vec<u64> = workers.iter().map(|w| w.instance_id()).collect();
        await_health_lists(stack, &frontend, &ids, timeout)?;
        for worker in &workers {
            await_completion(stack, &frontend, &worker.ready.model, worker, timeout)?;
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

/// One Guard service the engine runs: its process name (`guard`, or
/// `guard-<slot>` where each slot has its own), its launch context (socket,
/// pool directory, groups) and the node it runs on.
pub(super) struct GuardPlan {
    pub name: String,
    pub ctx: LaunchContext,
    pub node: usize,
}

/// The Guard services the engine runs for `slots`: one shared by every
/// slot, or one per slot (its pool directory on its slot's node).
pub(super) fn guard_plans(
    engine: &dyn Engine,
    ctx: &LaunchContext,
    (layout, placement): (&Layout, &Placement),
    slots: &[WorkerSlot],
) -> Result<Vec<GuardPlan>, ProvisionError> {
    if !engine.guard_per_slot() {
        return Ok(vec![GuardPlan {
            name: "guard".to_string(),
            ctx: ctx.clone(),
            node: 0,
        }]);
    }
    let plans = engine.worker_plans();
    let mut services = Vec::new();
    for slot in slots {
        let node = nodes::node_of(&plans, &slot.name);
        let pool_dir = match placement.pool_dir(node, &slot.guard_service)? {
            Some(dir) => dir,
            None => layout.pool_dir_of(&slot.guard_service)?,
        };
        services.push(GuardPlan {
            name: slot.guard_service.clone(),
            ctx: ctx.for_guard(slot.guard_socket.clone(), pool_dir, 1),
            node,
        });
    }
    Ok(services)
}

/// Spawns the Guard services the engine runs ([`guard_plans`]) without
/// waiting: they need nothing from each other, and [`await_guards`] waits
/// for them while the frontend and the reference workers start. Returns
/// each with its socket as this host sees it.
fn spawn_guards(
    engine: &dyn Engine,
    ctx: &LaunchContext,
    (layout, placement): (&Layout, &Placement),
    slots: &[WorkerSlot],
    started_so_far: &Partial,
    faults: &[String],
) -> Result<Vec<(Arc<Supervised>, PathBuf)>, ProvisionError> {
    let small_journal = faults.iter().any(|f| f == SMALL_GUARD_JOURNAL);
    let mut guards = Vec::new();
    for plan in guard_plans(engine, ctx, (layout, placement), slots)? {
        let Some(mut spec) = engine.guard(&plan.ctx) else {
            continue;
        };
        if small_journal {
            spec = super::guard_journal::with_small_journal(spec);
        }
        spec.log = ctx.logs_dir.join(format!("{}.log", plan.name));
        spec.name = plan.name;
        let guard = Supervised::spawn(&placement.wrap(plan.node, spec))?;
        started_so_far.add(guard.pid());
        let socket = placement.host_view(plan.node, &plan.ctx.guard_socket);
        guards.push((Arc::new(guard), socket));
    }
    Ok(guards)
}

/// Node placement: `slot`'s worker as its engine plans it on its node's
/// address, with `faults` (the harness applies its own, the engine the
/// rest), run on that node.
fn placed_worker(
    stack: &Stack,
    slot: &WorkerSlot,
    faults: &[String],
) -> Result<ProcessSpec, ProvisionError> {
    let node = stack.node_of(&slot.name);
    let mut ctx = stack.ctx_on(node);
    let engine: Vec<&str> = faults
        .iter()
        .map(String::as_str)
        .filter(|f| {
            ![
                NODE_WITHOUT_PID_NAMESPACE,
                DIGEST_MISMATCH,
                DUPLICATE_GUARD_INDEX,
                SMALL_GUARD_JOURNAL,
            ]
            .contains(f)
        })
        .collect();
    let has = |fault: &str| faults.iter().any(|f| f == fault);
    if has(DIGEST_MISMATCH) {
        ctx.compatibility_digest.push_str("-mismatch");
    }
    let mut slot = slot.clone();
    if has(DUPLICATE_GUARD_INDEX) {
        let first = stack.plan.slots.first().ok_or_else(|| {
            ProvisionError::Plan(format!("{DUPLICATE_GUARD_INDEX} needs a worker slot"))
        })?;
        slot.guard_index = first.guard_index;
        slot.guard_socket = first.guard_socket.clone();
    }
    let spec = stack
        .plan
        .engine
        .with_faults(stack.plan.engine.worker(&ctx, &slot), &engine)
        .map_err(ProvisionError::Plan)?;
    Ok(stack.plan.placement.wrap(node, spec))
}

/// A launch fault the harness applies itself, for every engine: the worker
/// presents a KVCR compatibility digest its Guard service was not started
/// with (an engine build or config that differs from its peer's).
pub const DIGEST_MISMATCH: &str = "compatibility_digest_mismatch";

/// A launch fault the harness applies itself, for every engine: every
/// worker claims the first slot's Guard group (its guard_index and Guard
/// socket), as a deployment that gave two workers the same guard_index.
/// The workers then start one at a time, so the second claim meets a group
/// held, not one mid-claim (KVCR answers that with `is busy`).
pub const DUPLICATE_GUARD_INDEX: &str = "duplicate_guard_index";

/// A launch fault the harness applies itself, on two nodes: node 1 gets
/// its own network and mount namespaces but shares this host's PID
/// namespace, so UCX sees its peers as same-host processes and reads them
/// through `cma` (shared memory), not the veth.
pub const NODE_WITHOUT_PID_NAMESPACE: &str = "node_without_pid_namespace";

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

    /// SIGKILLs every group started. Under `--kvcr-coverage` the measured
    /// processes among them (the Guard service that refused a claim, say)
    /// save what they ran first: the refusals these starts exist to see
    /// are run by them alone.
    fn stop_all(&self) {
        let pids = self.processes.lock().map(|p| p.clone()).unwrap_or_default();
        let members: Vec<u32> = pids
            .iter()
            .flat_map(|pid| crate::proc::procfs::group_members(*pid))
            .collect();
        for saved in
            crate::pyenv::coverage::checkpoint(&members, crate::pyenv::coverage::CHECKPOINT_BUDGET)
        {
            tracing::info!(
                "kvcr coverage of pid {} before the failed start's SIGKILL: {} ({} ms)",
                saved.pid,
                saved.outcome,
                saved.after_ms
            );
        }
        for pid in pids {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            crate::proc::reaper::forget_group(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyenv::coverage::tests::started_under_hook;

    /// A failed start's measured processes save before its SIGKILL; the
    /// kill still comes (and would, with nothing measured).
    #[test]
    fn a_failed_start_saves_its_measured_processes_then_kills_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let code = "import kvcr, time\nprint('ready', flush=True)\ntime.sleep(60)";
        let mut child = started_under_hook(dir.path(), code, &data);
        let started = Partial::default();
        started.add(child.id());
        started.stop_all();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().expect("reaped").signal(), Some(9));
        let calls = std::fs::read_to_string(dir.path().join("calls")).expect("calls");
        assert_eq!(
            calls.lines().skip(1).collect::<Vec<_>>(),
            ["start", "save"],
            "saved once, by the checkpoint: {calls}"
        );
    }
}
