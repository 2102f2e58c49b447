//! Bringing a stack up: Guard, workers and frontend as supervised process
//! groups, each awaited by a real readiness check, failing fast (with the log
//! tail) when a component dies during startup.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engine::{Engine, LaunchContext, ReferenceVariant, WorkerSlot};
use crate::proc::{ProcError, Supervised};
use crate::wait::{self, Poll, WaitError};

use super::{ports, probe, Layout, ReadyFile, Stack, Worker};

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
    /// Start the KVCR-disabled reference workers too.
    pub with_reference: bool,
    /// Launch-time fault switches (`--fault NAME[=ARG]`) for every KVCR
    /// worker; empty for a healthy stack. Used by the fault matrix.
    pub worker_faults: Vec<String>,
}

/// How long each part of startup took, recorded in the evidence.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct StartupTimings {
    pub guard_ready_ms: Option<u128>,
    pub workers_ready_ms: u128,
    pub frontend_ready_ms: u128,
    pub first_completion_ms: u128,
    pub total_ms: u128,
}

#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("cannot prepare the run's directories or ports: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Spawn(#[from] ProcError),
    #[error(transparent)]
    NotReady(Box<NotReady>),
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

/// Starts the whole stack and waits until it serves a real completion.
pub fn provision(engine: Arc<dyn Engine>, options: StackOptions) -> Result<Stack, ProvisionError> {
    let started = Instant::now();
    let layout = Layout::create(&options.logs_dir, &options.run_id)?;
    let plans = engine.worker_plans();
    let workers = plans.len() as u32;
    // Per worker: control, metrics, KV events, side channel; plus the
    // frontend and two reference workers' metrics ports.
    let mut free = ports::free_ports(&options.host, 1 + 4 * plans.len() + 2 * 3)?.into_iter();
    let mut next_port = move || free.next().unwrap_or(0);
    let ctx = LaunchContext {
        python: options.python.clone(),
        repo_root: options.repo_root.clone(),
        logs_dir: layout.logs_dir.clone(),
        work_dir: layout.scratch_dir.clone(),
        host: options.host.clone(),
        frontend_port: next_port(),
        guard_socket: layout.guard_socket(),
        pool_dir: layout.pool_dir(),
        compatibility_digest: format!("kvcr-e2e-{}-{}", engine.geometry().name, options.run_id),
        guard_count: workers,
    };
    let slots: Vec<WorkerSlot> = plans
        .iter()
        .enumerate()
        .map(|(i, plan)| WorkerSlot {
            ready_file: layout.ready_file(&format!("worker-{}", plan.slot)),
            name: plan.slot.clone(),
            guard_index: i as u32,
            control_port: next_port(),
            metrics_port: next_port(),
            kv_events_port: next_port(),
            side_channel_port: next_port(),
            generation: 0,
        })
        .collect();
    let reference_slots: Vec<(ReferenceVariant, WorkerSlot)> = if options.with_reference {
        [ReferenceVariant::Cached, ReferenceVariant::Uncached]
            .into_iter()
            .map(|v| {
                let slot = WorkerSlot {
                    name: v.label().into(),
                    guard_index: 0,
                    control_port: 0,
                    metrics_port: next_port(),
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
    let mut started_so_far = Partial::default();
    let result = (|| {
        let guard = engine
            .guard(&ctx)
            .map(|spec| Supervised::spawn(&spec).map(Arc::new))
            .transpose()?;
        let guard_ready_ms = match &guard {
            Some(g) => {
                started_so_far.processes.push(g.pid());
                await_guard(g, &ctx)?;
                Some(started.elapsed().as_millis())
            }
            None => None,
        };
        let frontend = Supervised::spawn(&engine.frontend(&ctx))?;
        let references = reference_slots
            .iter()
            .map(|(v, slot)| {
                Ok((
                    *v,
                    Supervised::spawn(&engine.reference_worker(&ctx, *v, slot))?,
                    slot.clone(),
                ))
            })
            .collect::<Result<Vec<_>, ProvisionError>>()?;
        let spawned_workers = slots
            .iter()
            .map(|slot| {
                Ok((
                    Supervised::spawn(&with_faults(
                        engine.worker(&ctx, slot),
                        &options.worker_faults,
                    ))?,
                    slot.clone(),
                ))
            })
            .collect::<Result<Vec<_>, ProvisionError>>()?;
        let all_pids = || {
            let mut pids = vec![frontend.pid()];
            pids.extend(references.iter().map(|(_, p, _)| p.pid()));
            pids.extend(spawned_workers.iter().map(|(p, _)| p.pid()));
            pids
        };
        started_so_far.processes.extend(all_pids());

        let mut ready_workers = Vec::new();
        for (process, slot) in spawned_workers {
            let ready = await_ready_file(&process, &slot, options.startup_timeout, &[&frontend])?;
            ready_workers.push(Arc::new(Worker {
                slot,
                process,
                ready,
            }));
        }
        let mut ready_refs = Vec::new();
        for (variant, process, slot) in references {
            let ready = await_ready_file(&process, &slot, options.startup_timeout, &[&frontend])?;
            ready_refs.push((
                variant,
                Arc::new(Worker {
                    slot,
                    process,
                    ready,
                }),
            ));
        }
        let workers_ready_ms = started.elapsed().as_millis();

        let mut ids: Vec<u64> = ready_workers.iter().map(|w| w.instance_id()).collect();
        ids.extend(ready_refs.iter().map(|(_, w)| w.instance_id()));
        await_registered(&frontend, &ctx, &ids, options.startup_timeout)?;
        let frontend_ready_ms = started.elapsed().as_millis();

        let mut models: Vec<(String, &Worker)> = ready_workers
            .iter()
            .map(|w| (engine.model(), w.as_ref()))
            .collect();
        models.extend(
            ready_refs
                .iter()
                .map(|(v, w)| (engine.reference_model(*v), w.as_ref())),
        );
        for (model, worker) in models {
            await_completion(&frontend, &ctx, &model, worker, options.startup_timeout)?;
        }
        let first_completion_ms = started.elapsed().as_millis();

        Ok(Stack {
            timings: StartupTimings {
                guard_ready_ms,
                workers_ready_ms,
                frontend_ready_ms,
                first_completion_ms,
                total_ms: started.elapsed().as_millis(),
            },
            engine: engine.clone(),
            ctx: ctx.clone(),
            layout: layout.clone(),
            frontend: Mutex::new(Arc::new(frontend)),
            guard,
            workers: Mutex::new(ready_workers),
            references: Mutex::new(ready_refs),
            retired: Mutex::new(Vec::new()),
            retired_frontends: Mutex::new(Vec::new()),
            replacement_faults: Mutex::new(Vec::new()),
            options: options.clone(),
            manifest: Mutex::new(None),
            attached: false,
            owner_pid: std::process::id(),
        })
    })();
    if result.is_err() {
        started_so_far.stop_all();
        layout.remove_scratch();
    }
    result
}

/// Starts a worker in `slot` on a running stack (with extra launch-time
/// fault switches) and waits until it serves.
pub(super) fn start_worker(
    stack: &Stack,
    slot: WorkerSlot,
    faults: &[String],
) -> Result<Arc<Worker>, ProvisionError> {
    let mut spec = with_faults(stack.engine.worker(&stack.ctx, &slot), faults);
    // On an attached stack the replacement must outlive this run.
    spec.outlive_harness = stack.attached;
    let process = Supervised::spawn(&spec)?;
    let timeout = stack.options.startup_timeout;
    let frontend = stack.frontend();
    let result = (|| {
        let ready = await_ready_file(&process, &slot, timeout, &[&frontend])?;
        await_registered(&frontend, &stack.ctx, &[ready.instance_id], timeout)?;
        Ok(ready)
    })();
    match result {
        Ok(ready) => {
            let worker = Arc::new(Worker {
                slot,
                process,
                ready,
            });
            await_completion(
                &frontend,
                &stack.ctx,
                &stack.engine.model(),
                &worker,
                timeout,
            )?;
            Ok(worker)
        }
        Err(err) => {
            process.stop(Duration::from_secs(3));
            Err(err)
        }
    }
}

/// Starts a frontend on the stack's port and waits until it routes a real
/// completion to every worker.
pub(super) fn start_frontend(stack: &Stack) -> Result<Supervised, ProvisionError> {
    let mut spec = stack.engine.frontend(&stack.ctx);
    spec.name = format!("{}.{}", spec.name, stack.retired_frontend_count() + 1);
    spec.log = stack.ctx.logs_dir.join(format!("{}.log", spec.name));
    let frontend = Supervised::spawn(&spec)?;
    let timeout = stack.options.startup_timeout;
    let result = (|| {
        let workers = stack.workers();
        let ids: Vec<u64> = workers.iter().map(|w| w.instance_id()).collect();
        await_registered(&frontend, &stack.ctx, &ids, timeout)?;
        for worker in &workers {
            await_completion(
                &frontend,
                &stack.ctx,
                &stack.engine.model(),
                worker,
                timeout,
            )?;
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

/// `spec` with `--fault` switches appended.
fn with_faults(spec: crate::proc::ProcessSpec, faults: &[String]) -> crate::proc::ProcessSpec {
    faults
        .iter()
        .fold(spec, |spec, fault| spec.args(["--fault", fault]))
}

/// Process groups started by a provisioning attempt that has not finished.
#[derive(Default)]
struct Partial {
    processes: Vec<u32>,
}

impl Partial {
    fn stop_all(&self) {
        for pid in &self.processes {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(*pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            crate::proc::reaper::forget_group(*pid);
        }
    }
}

fn not_ready(process: &Supervised, wait: WaitError) -> ProvisionError {
    ProvisionError::NotReady(Box::new(NotReady {
        component: process.name().to_string(),
        wait,
        log: process.log_path().to_path_buf(),
        tail: process.log_tail(LOG_TAIL_LINES),
    }))
}

/// `Abort` with the exit status and the log file when `process` has exited.
fn died<T>(process: &Supervised) -> Option<Poll<T>> {
    process.exit_status().map(|status| {
        Poll::Abort(format!(
            "{} exited during startup ({status}); its log: {}",
            process.name(),
            process.log_path().display()
        ))
    })
}

fn await_guard(guard: &Supervised, ctx: &LaunchContext) -> Result<(), ProvisionError> {
    let what = format!(
        "the Guard service's socket {} and its `KVCR service ready` line",
        ctx.guard_socket.display()
    );
    wait::until(what, Duration::from_secs(30), POLL_EVERY, || {
        if let Some(dead) = died(guard) {
            return dead;
        }
        if ctx.guard_socket.exists() && guard.log_tail(400).contains("KVCR service ready") {
            Poll::Ready(())
        } else {
            Poll::Pending(format!("socket exists: {}", ctx.guard_socket.exists()))
        }
    })
    .map_err(|e| not_ready(guard, e))
}

fn await_ready_file(
    process: &Supervised,
    slot: &WorkerSlot,
    timeout: Duration,
    others: &[&Supervised],
) -> Result<ReadyFile, ProvisionError> {
    let what = format!(
        "{} to register and write {}",
        process.name(),
        slot.ready_file.display()
    );
    wait::until(what, timeout, POLL_EVERY, || {
        if let Some(dead) = died(process).or_else(|| others.iter().find_map(|o| died(o))) {
            return dead;
        }
        match ReadyFile::read(&slot.ready_file) {
            Ok(Some(ready)) => Poll::Ready(ready),
            Ok(None) => Poll::Pending("no ready file yet".into()),
            Err(e) => Poll::Abort(e),
        }
    })
    .map_err(|e| not_ready(process, e))
}

fn await_registered(
    frontend: &Supervised,
    ctx: &LaunchContext,
    ids: &[u64],
    timeout: Duration,
) -> Result<(), ProvisionError> {
    let url = ctx.frontend_url();
    let what = format!("{url}/health to list instances {ids:?}");
    wait::until(what, timeout, POLL_EVERY, || {
        if let Some(dead) = died(frontend) {
            return dead;
        }
        match probe::health_instance_ids(&url) {
            Ok(seen) if ids.iter().all(|id| seen.contains(id)) => Poll::Ready(()),
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
