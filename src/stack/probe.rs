//! The probes of a starting stack, through the harness's client: each
//! request bounded by `timeout` (the run's `probe_timeout_s`), each
//! retried by its caller until the startup timeout.

use std::time::Duration;

use crate::client::{Client, Completion};
use crate::rt;

fn client(base: &str, timeout: Duration) -> Result<Client, String> {
    Client::new(base, timeout).map_err(|e| e.to_string())
}

/// Instance ids listed by the frontend's `/health`.
pub fn health_instance_ids(base: &str, timeout: Duration) -> Result<Vec<u64>, String> {
    rt::block_on(client(base, timeout)?.health())
        .map(|h| h.instance_ids())
        .map_err(|e| e.to_string())
}

/// One short completion pinned to `worker` (through the pin its role
/// takes): HTTP 200 with choices.
pub fn completion(
    base: &str,
    model: &str,
    worker: &super::Worker,
    timeout: Duration,
) -> Result<(), String> {
    let request = worker.pin(Completion::new(model, "kvcr-e2e readiness probe").max_tokens(2));
    rt::block_on(client(base, timeout)?.complete(&request))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The worker's Prometheus `/metrics` under `base` answers and parses.
pub fn metrics(base: &str) -> Result<(), String> {
    rt::block_on(crate::telemetry::scrape(&format!("{base}/metrics")))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// One completion of `tokens` pinned to `worker`.
pub fn completion_of(
    base: &str,
    model: &str,
    worker: &super::Worker,
    tokens: Vec<u32>,
    timeout: Duration,
) -> Result<(), String> {
    let request = worker.pin(Completion::new(model, tokens).max_tokens(1));
    rt::block_on(client(base, timeout)?.complete(&request))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The value of `counter` in the worker's `/metrics` under `base` (0 while
/// the series does not exist yet: KVCR creates it on its first event).
pub fn counter(base: &str, counter: &crate::telemetry::Counter) -> Result<f64, String> {
    rt::block_on(crate::telemetry::scrape(&format!("{base}/metrics")))
        .map(|s| s.counter(counter).unwrap_or(0.0))
        .map_err(|e| e.to_string())
}
