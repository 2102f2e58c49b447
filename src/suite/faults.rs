//! Faults a case injects, each verified before the case relies on it: a
//! fault that did not take effect fails with "fault not applied", never a
//! pass. Every fault is undone when its guard is dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::proc::{procfs, Supervised};
use crate::stack::{ProvisionError, Stack, StackOptions, Worker};
use crate::wait::{self, Poll};

use super::{CaseCtx, CaseError};

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

/// The CPU-engine switch that makes a prefill worker exit as a peer reads.
const EXIT_AFTER_PREFILL: &str = "exit_after_prefill";

impl CaseCtx<'_> {
    /// Turns CPU-engine fault switches on (`{"corrupt_delivered_pages": true}`)
    /// on the named workers and checks each reports them active.
    pub fn engine_faults(
        &self,
        workers: &[&str],
        switches: Value,
    ) -> Result<EngineFaults, CaseError> {
        let workers = workers
            .iter()
            .map(|w| self.worker(w))
            .collect::<Result<Vec<_>, _>>()?;
        let guard = EngineFaults { workers };
        // A fault that ends the worker's own process: its exit is the fault.
        if switches.get(EXIT_AFTER_PREFILL) == Some(&Value::Bool(true)) {
            for worker in &guard.workers {
                self.expect_exit(worker.process.name());
            }
        }
        for worker in &guard.workers {
            let active = crate::rt::block_on(put_faults(worker, &switches)).map_err(|e| {
                CaseError::new(format!(
                    "fault not applied on worker {}: {e}",
                    worker.name()
                ))
            })?;
            let applied = switches
                .as_object()
                .is_some_and(|want| want.iter().all(|(k, v)| active.get(k) == Some(v)));
            if !applied {
                return Err(CaseError::new(format!(
                    "fault not applied: worker {} reports {active} after asking for {switches}",
                    worker.name()
                )));
            }
        }
        Ok(guard)
    }

    /// SIGSTOPs the Guard service holding worker A's pool (the worker the
    /// Guard cases kill) and verifies its state is `T`.
    pub fn stop_guard(&self) -> Result<Stopped, CaseError> {
        let a = self.worker("A")?;
        let guard = self
            .stack
            .guard_of(&a)
            .ok_or_else(|| CaseError::new("this stack runs no Guard service"))?;
        stop(guard)
    }

    /// SIGKILLs the frontend (the router) and verifies it is gone; the
    /// suite's restore step starts a new one.
    pub fn kill_frontend(&self) -> Result<u32, CaseError> {
        Ok(self.stack.kill_frontend()?)
    }

    /// Provisions a second, separate stack like this one, with launch-time
    /// fault switches on its workers; returns how provisioning ended and
    /// how long it took. A stack that comes up is torn down at once.
    pub fn provision_faulty(
        &self,
        name: &str,
        worker_faults: &[&str],
        startup_timeout: Duration,
    ) -> (Result<(), ProvisionError>, Duration) {
        let base = self.stack.options();
        let options = StackOptions {
            logs_dir: self.case_dir().join(name),
            run_id: format!("{}-{name}", base.run_id),
            startup_timeout,
            with_reference: false,
            worker_faults: worker_faults.iter().map(|f| f.to_string()).collect(),
            ..base.clone()
        };
        let started = Instant::now();
        let result =
            crate::stack::provision(self.stack.engine.clone(), options).map(|stack: Stack| {
                stack.teardown();
            });
        (result, started.elapsed())
    }
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
            .map_err(|e| CaseError::new(format!("fault not applied: {e}")))?;
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

impl CaseCtx<'_> {
    /// Provisions a second stack like this one with launch-time faults
    /// (`worker_faults`, as [`CaseCtx::provision_faulty`]), runs `case` on
    /// it with this case's references, prompts and run directory, and tears
    /// it down. `Err` when the stack did not come up.
    pub fn on_faulty_stack(
        &self,
        name: &str,
        worker_faults: &[&str],
        case: fn(&CaseCtx) -> super::CaseResult,
    ) -> Result<super::CaseResult, CaseError> {
        let base = self.stack.options();
        let options = StackOptions {
            logs_dir: self.case_dir().join(name),
            run_id: format!("{}-{name}", base.run_id),
            with_reference: false,
            worker_faults: worker_faults.iter().map(|f| f.to_string()).collect(),
            ..base.clone()
        };
        let stack = crate::stack::provision(self.stack.engine.clone(), options).map_err(|e| {
            CaseError::new(format!(
                "the stack with {worker_faults:?} did not come up: {e}"
            ))
        })?;
        let result = self.on_stack(&stack, name, case);
        stack.teardown();
        Ok(result)
    }
}

fn stop(process: Arc<Supervised>) -> Result<Stopped, CaseError> {
    process
        .signal(Signal::SIGSTOP)
        .map_err(|e| CaseError::new(format!("fault not applied: {e}")))?;
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
    .map_err(|e| CaseError::new(format!("fault not applied: {e}")))?;
    Ok(stopped)
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
