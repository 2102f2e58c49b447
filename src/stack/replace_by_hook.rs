//! A replacement worker started by the deployer's `replace_worker` hook.
//! The harness did not start it, so it finds it through URLs only: the
//! frontend's `/health` lists one new instance and the slot's metrics URL
//! answers; then it must serve and deposit like any worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::WorkerSlot;
use crate::proc::Supervised;
use crate::wait::{self, Poll};

use super::hooks::{run_hook, HookRun};
use super::readiness::{finish_worker, Found};
use super::{probe, Stack, StackError, Worker};

/// Runs `template` for `slot` (a fresh generation of a dead worker's slot)
/// and waits until the replacement it started serves. A hook that fails,
/// or that exits without starting a worker the router lists, is an error
/// naming the hook.
pub(super) fn replace(
    stack: &Stack,
    template: &[String],
    slot: WorkerSlot,
) -> Result<(Arc<Worker>, HookRun), StackError> {
    let timeout = stack.plan.options.startup_timeout;
    let url = stack.frontend_url();
    let not_started = |detail: String| {
        StackError::ReplacementNotStarted(format!("worker {}: {detail}", slot.name))
    };
    // Every instance the router lists now, or this stack ever had, is old.
    let probe_timeout = stack.plan.options.probe_timeout;
    let mut known = probe::health_instance_ids(&url, probe_timeout)
        .map_err(|e| not_started(format!("the frontend's {url}/health: {e}")))?;
    known.extend(stack.known_instance_ids());
    let name = slot.process_name();
    let spawned_at = Instant::now();
    let run = run_hook(
        template,
        &[
            ("worker", slot.name.clone()),
            ("process", name.clone()),
            ("generation", slot.generation.to_string()),
        ],
        timeout,
    )
    .map_err(|e| not_started(format!("the replace hook failed: {e}")))?;
    let address = stack.ctx_on(stack.node_of(&slot.name)).host;
    let metrics_url = format!("http://{address}:{}", slot.metrics_port);
    let what =
        format!("one new instance listed by {url}/health with /metrics answering at {metrics_url}");
    let instance_id = wait::until(what, timeout, Duration::from_millis(200), || {
        let seen = match probe::health_instance_ids(&url, probe_timeout) {
            Ok(seen) => seen,
            Err(e) => return Poll::Pending(e),
        };
        let new: Vec<u64> = seen.into_iter().filter(|id| !known.contains(id)).collect();
        match new.as_slice() {
            [] => Poll::Pending(format!("no instance beyond the known {known:?}")),
            [id] => match probe::metrics(&metrics_url) {
                Ok(()) => Poll::Ready(*id),
                Err(e) => Poll::Pending(format!("instance {id} listed; /metrics: {e}")),
            },
            many => Poll::Pending(format!("{} new instances {many:?}, expected one", many.len())),
        }
    })
    .map_err(|e| {
        not_started(format!(
            "the replace hook `{}` exited 0 after {} ms, but no replacement came up: {e}; hook output: {:?}",
            run.argv.join(" "),
            run.elapsed_ms,
            run.output
        ))
    })?;
    let process = Supervised::remote(
        name.clone(),
        format!("{address}:{}", slot.metrics_port),
        stack.log_of(&format!("{name}.log")),
    );
    let found = Found {
        instance_id,
        metrics_url,
        address,
        probe_salt: 1,
    };
    let worker = finish_worker(stack, process, slot, found, spawned_at, true)?;
    Ok((Arc::new(worker), run))
}
