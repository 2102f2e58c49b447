//! Faults a case injects (`ctx.faults()`), each verified before the case
//! relies on it: a fault that did not take effect fails with "fault not
//! applied", never a pass. Every fault is undone when its guard is dropped
//! (a killed component is replaced by the suite's restore step).

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::proc::{procfs, Supervised};
use crate::stack::guard_journal::{self, RingCursors, TornFrame};
use crate::stack::{GuardServiceKill, KillReport, ProvisionError, Stack, StackOptions, Worker};
use crate::wait::{self, Poll};

use super::claim::Claim;
use super::engine_fault::EngineFault;
use super::{CaseCtx, CaseError, CaseResult};

/// CPU-engine fault switches set on some workers; cleared on drop.
pub struct EngineFaults {
    workers: Vec<Arc<Worker>>,
}

/// A process stopped with SIGSTOP; continued on drop.
pub struct Stopped {
    process: Arc<Supervised>,
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap_or_default()
}

async fn put_faults(worker: &Worker, switches: &Value) -> Result<Value, String> {
    let url = format!("{}/faults", worker.admin_url());
    let response = http()
        .put(&url)
        .json(switches)
        .send()
        .await
        .map_err(|e| format!("PUT {url}: {e}"))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(format!("PUT {url} {switches}: HTTP {status}: {body}"));
    }
    let check = http()
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    check
        .json::<Value>()
        .await
        .map_err(|e| format!("GET {url}: {e}"))
}

/// The faults a case can inject (`ctx.faults()`).
pub struct Faults<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> Faults<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// Turns a CPU-engine fault switch on (`WrongTokenAfter(2)`) on the
    /// named workers and checks each reports it active; cleared on drop.
    pub fn engine(&self, workers: &[&str], fault: EngineFault) -> Result<EngineFaults, CaseError> {
        let switches = fault.switches();
        let workers = workers
            .iter()
            .map(|w| self.ctx.worker(w))
            .collect::<Result<Vec<_>, _>>()?;
        let guard = EngineFaults { workers };
        // A fault that ends the worker's own process: its exit is the fault.
        if fault == EngineFault::ExitAfterPrefill {
            for worker in &guard.workers {
                self.ctx.crashes.expect_exit(worker.process.name());
            }
        }
        for worker in &guard.workers {
            put_verified(worker, &switches)?;
        }
        Ok(guard)
    }

    /// Turns `fault` on on `worker` beside the switches already on there (a
    /// fault row's), each verified as [`Faults::engine`]; every switch is
    /// cleared on drop.
    pub fn engine_added(
        &self,
        worker: &str,
        fault: EngineFault,
    ) -> Result<EngineFaults, CaseError> {
        let worker = self.ctx.worker(worker)?;
        let url = format!("{}/faults", worker.admin_url());
        let mut switches = crate::rt::block_on(async {
            let answer = http().get(&url).send().await.map_err(|e| e.to_string())?;
            answer.json::<Value>().await.map_err(|e| e.to_string())
        })
        .map_err(|e| CaseError::fault_not_applied(format!("GET {url}: {e}")))?;
        if let (Some(active), Some(more)) = (switches.as_object_mut(), fault.switches().as_object())
        {
            active.extend(more.clone());
        }
        let guard = EngineFaults {
            workers: vec![worker],
        };
        put_verified(&guard.workers[0], &switches)?;
        Ok(guard)
    }

    /// Clears every CPU-engine fault switch on the running workers among
    /// `workers` (a replacement that carries a launch switch).
    pub fn clear_engine(&self, workers: &[&str]) {
        let workers = workers
            .iter()
            .filter_map(|w| self.ctx.worker(w).ok())
            .collect();
        drop(EngineFaults { workers });
    }

    /// SIGKILLs `worker`'s engine and verifies the pid is gone (the whole
    /// group, within the kill timeout); on a stack this run attached to,
    /// the description's kill hook may deliver it. The one way a case
    /// kills a worker.
    pub fn kill(&self, worker: &Worker) -> Result<KillReport, CaseError> {
        self.for_thread().kill(worker)
    }

    /// The faults a thread timing a fault can deliver beside the case.
    pub fn for_thread(&self) -> ThreadFaults<'c> {
        ThreadFaults {
            stack: self.ctx.stack,
        }
    }

    /// Whether the worker `kill` killed is still gone: its pid, or, seen
    /// only through URLs, its metrics port.
    pub fn killed_worker_gone(&self, kill: &KillReport) -> bool {
        self.ctx.stack.killed_worker_gone(kill)
    }

    /// Starts a replacement in the dead worker `name`'s slot (or has the
    /// stack description's replace hook start it) and waits until it
    /// serves.
    pub fn replace(&self, name: &str) -> Result<Arc<Worker>, CaseError> {
        Ok(self.ctx.stack.replace_worker(name)?)
    }

    /// What the replace hook did, for each replacement it started.
    pub fn replace_hook_runs(&self) -> Vec<crate::stack::HookRun> {
        self.ctx.stack.replace_hook_runs()
    }

    /// SIGKILLs the Guard service holding `worker`'s pool and verifies it is
    /// gone (a crash: no handback, no cleanup).
    pub fn kill_guard_service(&self, worker: &Worker) -> Result<GuardServiceKill, CaseError> {
        Ok(self.ctx.stack.kill_guard_service_of(worker)?)
    }

    /// Starts the Guard service holding `worker`'s pool again, on the same
    /// socket and pool directory, and waits for it to be ready.
    pub fn restart_guard_service(&self, worker: &Worker) -> Result<Arc<Supervised>, CaseError> {
        Ok(self.ctx.stack.restart_guard_service_of(worker)?)
    }

    /// SIGSTOPs the Guard service holding `worker`'s pool and verifies its
    /// state is `T`; continued on drop.
    pub fn stop_guard(&self, worker: &Worker) -> Result<Stopped, CaseError> {
        let guard = self
            .ctx
            .stack
            .guard_of(worker)
            .ok_or_else(|| CaseError::new("this stack runs no Guard service"))?;
        stop(guard)
    }

    /// The recovery journal of `worker`'s Guard group as its pool file
    /// holds it now.
    pub fn journal_cursors(&self, worker: &Worker) -> Result<RingCursors, CaseError> {
        let pool = self.pool_file(worker)?;
        guard_journal::read_cursors(&pool)
            .map_err(|e| CaseError::new(format!("cannot read {}: {e}", pool.display())))
    }

    /// Overwrites the header of the next frame the Guard of `worker`'s
    /// group will read, in its pool file's journal of `journal_bytes`, and
    /// verifies the write ([`guard_journal::tear_next_frame`]: a frame must
    /// be pending, so the Guard must be stopped).
    pub fn tear_journal(
        &self,
        worker: &Worker,
        journal_bytes: u64,
    ) -> Result<TornFrame, CaseError> {
        let pool = self.pool_file(worker)?;
        guard_journal::tear_next_frame(&pool, journal_bytes).map_err(CaseError::fault_not_applied)
    }

    /// Cuts the last byte off the handback region of `region_bytes` that
    /// a clean release of `worker` left at the end of its Guard pool file
    /// ([`guard_journal::tear_handback`]: refused unless the file ends in
    /// that region).
    pub fn tear_handback(
        &self,
        worker: &Worker,
        region_bytes: u64,
    ) -> Result<guard_journal::TornHandback, CaseError> {
        let pool = self.pool_file(worker)?;
        guard_journal::tear_handback(&pool, region_bytes).map_err(CaseError::fault_not_applied)
    }

    /// The size of `worker`'s Guard pool file now.
    pub fn pool_file_bytes(&self, worker: &Worker) -> Result<u64, CaseError> {
        let pool = self.pool_file(worker)?;
        std::fs::metadata(&pool)
            .map(|m| m.len())
            .map_err(|e| CaseError::new(format!("{}: {e}", pool.display())))
    }

    fn pool_file(&self, worker: &Worker) -> Result<std::path::PathBuf, CaseError> {
        self.ctx.stack.pool_file_path_of(worker).ok_or_else(|| {
            CaseError::new(format!(
                "worker {}'s Guard pool file is not in its Guard's pool directory",
                worker.name()
            ))
        })
    }

    /// SIGKILLs the frontend (the router) and verifies it is gone; the
    /// suite's restore step starts a new one.
    pub fn kill_frontend(&self) -> Result<u32, CaseError> {
        Ok(self.ctx.stack.kill_frontend()?)
    }

    /// The next replacement worker starts with these launch faults
    /// (`--fault NAME[=ARG]` of the CPU engine, or a harness launch fault
    /// such as [`crate::stack::DIGEST_MISMATCH`]).
    pub fn on_next_replacement(&self, faults: &[String]) {
        self.ctx.stack.set_replacement_faults(faults.to_vec());
    }

    /// Provisions a second, separate stack like this one, with launch-time
    /// fault switches on its workers; returns how provisioning ended and
    /// how long it took. A stack that comes up is torn down at once.
    pub fn provision_faulty(
        &self,
        name: &str,
        worker_faults: &[String],
        startup_timeout: Duration,
    ) -> (Result<(), ProvisionError>, Duration) {
        let options = StackOptions {
            startup_timeout,
            ..self.faulty_options(name, worker_faults)
        };
        let started = Instant::now();
        let result =
            crate::stack::provision(self.ctx.engine().clone(), options).map(|stack: Stack| {
                stack.teardown();
            });
        (result, started.elapsed())
    }

    /// Provisions a second stack like this one with launch-time faults
    /// (`worker_faults`, as [`Faults::provision_faulty`]), runs `case` on
    /// it with this case's settings, references, prompts and run directory
    /// (its evidence in `<this case's directory>-<name>`, cancelled with
    /// this case), and tears it down. `Err` when the stack did not come up.
    pub fn on_faulty_stack(
        &self,
        name: &str,
        worker_faults: &[String],
        case: impl FnOnce(&CaseCtx) -> CaseResult,
    ) -> Result<CaseResult, CaseError> {
        let options = self.faulty_options(name, worker_faults);
        let stack = crate::stack::provision(self.ctx.engine().clone(), options).map_err(|e| {
            CaseError::new(format!(
                "the stack with {worker_faults:?} did not come up: {e}"
            ))
        })?;
        let result = on_stack(self.ctx, &stack, name, case);
        stack.teardown();
        Ok(result)
    }

    fn faulty_options(&self, name: &str, worker_faults: &[String]) -> StackOptions {
        let base = self.ctx.stack.options();
        StackOptions {
            logs_dir: self.ctx.evidence.dir().join(name),
            run_id: format!("{}-{name}", base.run_id),
            with_reference: false,
            worker_faults: worker_faults.to_vec(),
            ..base.clone()
        }
    }
}

/// The faults a thread other than the case's delivers
/// (`ctx.faults().for_thread()`), timed to what it watches: it holds the
/// stack only, never the case's context, which stays on the case's thread.
#[derive(Clone, Copy)]
pub struct ThreadFaults<'a> {
    stack: &'a Stack,
}

impl<'a> ThreadFaults<'a> {
    /// [`Faults::kill`].
    pub fn kill(&self, worker: &Worker) -> Result<KillReport, CaseError> {
        Ok(self.stack.kill_worker(worker.name())?)
    }

    /// [`super::Pressure::stop_worker_process`].
    pub fn stop_worker_process<'w>(
        &self,
        worker: &'w Worker,
    ) -> Result<super::pressure_probes::StoppedWorker<'w>, CaseError> {
        super::pressure_probes::stop_worker_process(self.stack, worker)
    }

    /// Takes node 1's link down now (verified); up again on drop.
    pub fn cut_node_link(&self) -> Result<LinkCut<'a>, CaseError> {
        LinkCut::now(self.stack)
    }

    /// Puts `condition` on node 1's link now, verified with probe traffic
    /// to `listener` and `bulk_url` on node 1 (TC-14); taken off on
    /// [`super::LinkDegradation::remove`] or drop.
    pub fn degrade_node_link(
        &self,
        condition: crate::proc::link_condition::LinkCondition,
        listener: std::net::SocketAddr,
        bulk_url: &str,
        logs_dir: std::path::PathBuf,
    ) -> Result<super::LinkDegradation<'a>, CaseError> {
        super::LinkDegradation::now(self.stack, condition, listener, bulk_url, logs_dir)
    }

    /// Node 1's link as both ends of its veth report it now; `None` on a
    /// stack without node 1.
    pub fn node_link_state(&self) -> Option<crate::proc::netns::LinkState> {
        self.stack.namespace_node().map(|n| n.link_state())
    }
}

/// Runs `case` against `stack` (another stack than the case's own) with
/// `ctx`'s settings, references, prompts and run directory; its evidence
/// goes to `<ctx's directory>-<name>`, and the suite's timeout cancels it
/// as it cancels `ctx`.
fn on_stack(
    ctx: &CaseCtx,
    stack: &Stack,
    name: &str,
    case: impl FnOnce(&CaseCtx) -> CaseResult,
) -> CaseResult {
    let nested = CaseCtx {
        activity: ctx.activity.clone(),
        ..CaseCtx::new(
            ctx.id,
            format!("{}-{name}", ctx.evidence.slug()),
            ctx.settings,
            stack,
            ctx.references,
            ctx.prompts,
            ctx.evidence.run(),
        )
        .map_err(|e| CaseError::new(format!("{name}: {}", e.message)))?
    };
    let result = case(&nested);
    nested.evidence.flush_comparisons();
    result
}

/// Node 1 of a two-node stack cut off the network (the host end of its
/// veth down, both ends verified); its link is brought up again, and
/// checked, on drop.
pub struct LinkCut<'a> {
    stack: &'a Stack,
    /// Both ends of the veth once the cut was verified.
    pub state: crate::proc::netns::LinkState,
}

impl<'a> LinkCut<'a> {
    /// Takes node 1's veth down now and verifies both ends report it.
    pub fn now(stack: &'a Stack) -> Result<Self, CaseError> {
        let node = stack.namespace_node().ok_or_else(|| {
            CaseError::new("this fault needs a two-node stack (--topology two-node)")
        })?;
        node.set_link(false, Duration::from_secs(5))
            .map_err(|e| CaseError::fault_not_applied(e.to_string()))?;
        Ok(Self {
            stack,
            state: node.link_state(),
        })
    }
}

impl Drop for LinkCut<'_> {
    fn drop(&mut self) {
        if let Some(node) = self.stack.namespace_node() {
            if let Err(e) = node.set_link(true, Duration::from_secs(10)) {
                tracing::warn!("could not bring node 1's link up again: {e}");
            }
        }
    }
}

fn stop(process: Arc<Supervised>) -> Result<Stopped, CaseError> {
    process
        .signal(Signal::SIGSTOP)
        .map_err(|e| CaseError::fault_not_applied(e.to_string()))?;
    let pid = process.pid();
    let stopped = Stopped { process };
    wait::until(
        format!("pid {pid} to be stopped (state T)"),
        Duration::from_secs(2),
        Duration::from_millis(10),
        || match procfs::state(pid) {
            Some('T') => Poll::Ready(()),
            other => Poll::Pending(format!("state {other:?}")),
        },
    )
    .map_err(|e| CaseError::fault_not_applied(e.to_string()))?;
    Ok(stopped)
}

/// Puts `switches` on `worker` and checks it reports each of them active.
fn put_verified(worker: &Worker, switches: &Value) -> CaseResult {
    let active = crate::rt::block_on(put_faults(worker, switches)).map_err(|e| {
        let detail = format!("on worker {}: {e}", worker.name());
        let message = format!("fault not applied {detail}");
        CaseError::claimed(Claim::FaultNotApplied, detail, message)
    })?;
    let applied = switches
        .as_object()
        .is_some_and(|want| want.iter().all(|(k, v)| active.get(k) == Some(v)));
    if !applied {
        return Err(CaseError::fault_not_applied(format!(
            "worker {} reports {active} after asking for {switches}",
            worker.name()
        )));
    }
    Ok(())
}

impl Drop for EngineFaults {
    fn drop(&mut self) {
        for worker in &self.workers {
            if worker.process.is_running() {
                if let Err(e) =
                    crate::rt::block_on(put_faults(worker, &Value::Object(Default::default())))
                {
                    tracing::warn!("could not clear faults on worker {}: {e}", worker.name());
                }
            }
        }
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Err(e) = self.process.signal(Signal::SIGCONT) {
            tracing::warn!("could not continue {}: {e}", self.process.name());
        }
    }
}
