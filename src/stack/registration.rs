//! What the harness knows about a worker once it serves: read from the
//! outside (Dynamo's discovery, the process's sockets, its slot), never from
//! a file that only one engine writes.

use serde::{Deserialize, Serialize};

/// A registered, serving worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registration {
    pub name: String,
    pub pid: u32,
    /// The id the router knows the worker by (Dynamo's instance id).
    pub instance_id: u64,
    pub model: String,
    /// `tcp://host:port` of the worker's KVCR control listener, when it has one.
    pub control_endpoint: Option<String>,
    /// Base URL of the worker's Prometheus `/metrics` (and, for the CPU
    /// engine, its `/faults` and `/state`).
    pub metrics_url: String,
    pub guard_index: Option<u32>,
    pub kvcr: bool,
    /// Aggregated, prefill or decode (from the engine's plan for the slot).
    #[serde(default)]
    pub role: crate::engine::topology::WorkerRole,
    /// Milliseconds from spawn to serving a real completion.
    #[serde(default)]
    pub ready_ms: u128,
}
