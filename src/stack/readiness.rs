//! When a component of a stack is ready. Readiness is the same for every
//! engine and reads nothing an engine writes for the harness's sake: a
//! Guard when its socket exists and it logged `KVCR service ready`; a
//! worker when Dynamo's discovery lists an instance on a port the worker's
//! process listens on, its `/metrics` answers, the router's `/health`
//! lists the instance, a completion pinned to it comes back through the
//! router, and (a KVCR worker) it deposited into its pool. Every wait's
//! budget is the user's `startup_timeout_s`; a component that dies fails
//! its wait at once, naming its log, and so does a worker whose KVCR claim
//! its Guard service refused ([`super::claim_refusal`]), quoting KVCR.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::WorkerSlot;
use crate::proc::{procfs, Supervised};
use crate::wait::{self, Poll, WaitError};

use super::claim_refusal::{self, ClaimRefused};
use super::provision::ProvisionError;
use super::{discovery, probe, Registration, Stack, Worker};

const POLL_EVERY: Duration = Duration::from_millis(50);
const LOG_TAIL_LINES: usize = 25;
/// How much of a worker's log since its spawn the refusal check reads: a
/// claim is made early in startup (the CPU engine's log is a few KiB by
/// then, vLLM's well under 1 MiB).
const REFUSAL_SCAN_BYTES: u64 = 4 << 20;

/// Watches a starting worker's log for a KVCR claim refusal; the first one
/// seen is kept, so the wait that aborted on it can return it as such.
pub(super) struct RefusalWatch<'p> {
    process: &'p Supervised,
    spawned_at: Instant,
    seen: Option<ClaimRefused>,
}

impl<'p> RefusalWatch<'p> {
    pub(super) fn new(process: &'p Supervised, spawned_at: Instant) -> Self {
        Self {
            process,
            spawned_at,
            seen: None,
        }
    }

    /// `Abort` once the worker's log since its spawn holds a refusal.
    fn check<T>(&mut self) -> Option<Poll<T>> {
        if self.seen.is_none() {
            let log = self.process.log_since_spawn(REFUSAL_SCAN_BYTES);
            self.seen = claim_refusal::find(&log).map(|(kind, line)| ClaimRefused {
                component: self.process.name().to_string(),
                kind,
                line,
                log: self.process.log_path().to_path_buf(),
                after_spawn: self.spawned_at.elapsed(),
            });
        }
        self.seen
            .as_ref()
            .map(|refused| Poll::Abort(refused.to_string()))
    }

    /// The refusal as the error, when the wait ended on one; else `other`.
    fn or(self, other: ProvisionError) -> ProvisionError {
        match self.seen {
            Some(refused) => ProvisionError::ClaimRefused(Box::new(refused)),
            None => other,
        }
    }
}

/// What a KVCR worker's readiness includes beyond serving: a deposit into
/// its KVCR pool. On a loaded 2-core machine, vLLM's CPU offloading has been
/// seen to come up serving yet never store a block (its primary tier stays
/// empty, nothing reaches KVCR, nothing is logged); every case would then
/// fail on a stack that is not what it tests. Such a worker is not ready: it
/// is restarted once, and the restart is recorded in `stack.json`.
pub const KVCR_DEPOSIT: &str = "a deposit into its KVCR pool (local_fill)";

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

/// Waits until every Guard of [`spawn_guards`] is ready; returns when the
/// last one was, in ms since `started`.
pub(super) fn await_guards(
    guards: &[(Arc<Supervised>, PathBuf)],
    timeout: Duration,
    started: Instant,
) -> Result<u128, ProvisionError> {
    for (guard, socket) in guards {
        await_guard(guard, socket, timeout)?;
    }
    Ok(started.elapsed().as_millis())
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
pub(super) fn await_worker(
    stack: &Stack,
    process: Supervised,
    slot: WorkerSlot,
    spawned_at: Instant,
    kvcr: bool,
) -> Result<Worker, ProvisionError> {
    let found = await_registered(stack, &process, &slot, spawned_at)?;
    finish_worker(stack, process, slot, found, spawned_at, kvcr)
}

/// Waits until `process` is registered in `slot`: an instance in Dynamo's
/// discovery on a port it listens on, `/metrics` answering, and the
/// router's `/health` listing it. Its startup is over then; whether it
/// serves is [`finish_worker`]'s to see.
pub(super) fn await_registered(
    stack: &Stack,
    process: &Supervised,
    slot: &WorkerSlot,
    spawned_at: Instant,
) -> Result<Found, ProvisionError> {
    let timeout = stack.plan.options.startup_timeout;
    let frontend = stack.frontend();
    let ctx = &stack.plan.ctx;
    // The address of the worker's node (node placement).
    let address = stack.ctx_on(stack.node_of(&slot.name)).host;
    let metrics_url = format!("http://{address}:{}", slot.metrics_port);
    let discovery_dir = ctx.discovery_dir();
    let what = format!(
        "{} to register in Dynamo's discovery ({}) on a port it listens on, with /metrics answering at {metrics_url}",
        process.name(),
        discovery_dir.display()
    );
    let mut refusal = RefusalWatch::new(process, spawned_at);
    let instance = wait::until(what, timeout, Duration::from_millis(200), || {
        // A refusal first: a refused worker that exited is explained by it.
        if let Some(refused) = refusal.check() {
            return refused;
        }
        if let Some(dead) = died(process).or_else(|| died(&frontend)) {
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
    });
    let instance = match instance {
        Ok(instance) => instance,
        Err(e) => return Err(refusal.or(not_ready(process, e))),
    };
    await_health_lists(stack, &frontend, &[instance.instance_id], timeout)?;
    let registered_ms = spawned_at.elapsed().as_millis();
    if let Ok(mut t) = stack.timings.lock() {
        t.per_component_registered_ms
            .push((process.name().to_string(), registered_ms));
    }
    Ok(Found {
        instance_id: instance.instance_id,
        metrics_url,
        address,
        probe_salt: 0,
    })
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
    let timeout = stack.plan.options.startup_timeout;
    let frontend = stack.frontend();
    let Found {
        instance_id,
        metrics_url,
        address,
        probe_salt,
    } = found;
    let model = if kvcr {
        stack.plan.engine.model()
    } else {
        stack
            .plan
            .engine
            .reference_variants()
            .into_iter()
            .find(|v| v.label() == slot.name)
            .map(|v| stack.plan.engine.reference_model(v))
            .unwrap_or_else(|| stack.plan.engine.model())
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
            .plan
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
    await_completion(stack, &frontend, &model, &worker, timeout)?;
    // An engine that keeps its blocks in its own memory deposits none:
    // serving is all its readiness can show.
    if kvcr
        && worker.role() == crate::engine::topology::WorkerRole::Aggregated
        && stack.plan.engine.deposits_computed_blocks()
    {
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
    stack: &Stack,
    frontend: &Supervised,
    ids: &[u64],
    timeout: Duration,
) -> Result<(), ProvisionError> {
    let what = format!("{}/health to list instances {ids:?}", stack.frontend_url());
    await_health(stack, frontend, what, timeout, |seen| {
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
        stack.plan.ctx.frontend_url()
    );
    let timeout = stack.plan.options.startup_timeout;
    await_health(stack, &frontend, what, timeout, |seen| !seen.contains(&id))
}

/// Polls `frontend`'s `/health` until the instance ids it lists satisfy
/// `wanted`, failing at once if the frontend dies.
fn await_health(
    stack: &Stack,
    frontend: &Supervised,
    what: String,
    timeout: Duration,
    wanted: impl Fn(&[u64]) -> bool,
) -> Result<(), ProvisionError> {
    let url = stack.frontend_url();
    let probe_timeout = stack.plan.options.probe_timeout;
    wait::until(what, timeout, POLL_EVERY, || {
        if let Some(dead) = died(frontend) {
            return dead;
        }
        match probe::health_instance_ids(&url, probe_timeout) {
            Ok(seen) if wanted(&seen) => Poll::Ready(()),
            Ok(seen) => Poll::Pending(format!("instances {seen:?}")),
            Err(e) => Poll::Pending(e),
        }
    })
    .map_err(|e| not_ready(frontend, e))
}

pub(super) fn await_completion(
    stack: &Stack,
    frontend: &Supervised,
    model: &str,
    worker: &Worker,
    timeout: Duration,
) -> Result<(), ProvisionError> {
    let url = stack.frontend_url();
    let probe_timeout = stack.plan.options.probe_timeout;
    let what = format!(
        "a completion of model {model} through the router from worker {}",
        worker.name()
    );
    wait::until(what, timeout, Duration::from_millis(200), || {
        if let Some(dead) = died(frontend).or_else(|| died(&worker.process)) {
            return dead;
        }
        match probe::completion(&url, model, worker, probe_timeout) {
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
    let vocab = stack.plan.engine.prompt_vocab();
    let span = vocab.end.saturating_sub(vocab.start).max(1);
    let block = stack.plan.engine.geometry().block_size_tokens;
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
                &stack.plan.ctx.frontend_url(),
                &worker.ready.model,
                worker,
                tokens.clone(),
                stack.plan.options.probe_timeout,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::ProcessSpec;

    /// A worker that logs a refusal and stays up (as an engine that keeps
    /// its process after its KVCR tier failed) fails its wait at once, as
    /// the refusal, not at the deadline.
    #[test]
    fn a_refusal_in_a_live_workers_log_ends_the_wait_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ProcessSpec::new("worker-B", "/bin/sh", dir.path().join("worker-B.log"))
            .arg("-c")
            .arg("echo 'kvcr.control_channels.KVCRServiceError: KVCR Guard 0 is held by another worker'; exec sleep 30");
        let spawned_at = Instant::now();
        let process = Supervised::spawn(&spec).unwrap();
        let mut watch = RefusalWatch::new(&process, spawned_at);
        let waited = wait::until("registration", Duration::from_secs(20), POLL_EVERY, || {
            watch
                .check()
                .unwrap_or(Poll::Pending::<()>("not registered".into()))
        });
        let err = watch.or(not_ready(&process, waited.unwrap_err()));
        assert!(process.is_running(), "the worker still runs");
        assert!(spawned_at.elapsed() < Duration::from_secs(10));
        let ProvisionError::ClaimRefused(refused) = &err else {
            panic!("not a refusal: {err}");
        };
        assert_eq!(refused.kind, crate::stack::RefusalKind::HeldByAnother);
        assert!(
            err.to_string()
                .starts_with("worker-B's KVCR claim was refused by its Guard service"),
            "{err}"
        );
        process.stop(Duration::from_secs(2));
    }

    /// Without a refusal the wait's own error is kept.
    #[test]
    fn no_refusal_keeps_the_waits_error() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ProcessSpec::new("worker-A", "/bin/sh", dir.path().join("worker-A.log"))
            .arg("-c")
            .arg("echo starting; exit 3");
        let process = Supervised::spawn(&spec).unwrap();
        process.wait_exit(Duration::from_secs(5)).unwrap();
        let mut watch = RefusalWatch::new(&process, Instant::now());
        let waited = wait::until("registration", Duration::from_secs(5), POLL_EVERY, || {
            watch
                .check()
                .or_else(|| died(&process))
                .unwrap_or(Poll::Pending::<()>("not registered".into()))
        });
        let err = watch.or(not_ready(&process, waited.unwrap_err()));
        assert!(matches!(err, ProvisionError::NotReady(_)), "{err}");
        assert!(err.to_string().contains("exited during startup"), "{err}");
    }
}
