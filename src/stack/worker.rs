use serde_json::json;

use crate::client::{Completion, WorkerIdentity};
use crate::engine::topology::WorkerRole;
use crate::engine::WorkerSlot;
use crate::proc::Supervised;

use super::Registration;

/// One engine worker of the stack.
#[derive(Debug)]
pub struct Worker {
    pub slot: WorkerSlot,
    pub process: Supervised,
    pub ready: Registration,
}

impl Worker {
    pub fn name(&self) -> &str {
        &self.slot.name
    }

    /// The id the router knows this worker by (pin header, `nvext.worker_id`).
    pub fn instance_id(&self) -> u64 {
        self.ready.instance_id
    }

    /// Aggregated, prefill or decode.
    pub fn role(&self) -> WorkerRole {
        self.ready.role
    }

    /// `request` pinned to this worker: an aggregated worker through the
    /// instance header; in a disaggregated stack, where Dynamo 1.6.1 reads
    /// that header as a prefill pin, through `nvext.prefill_worker_id` or
    /// `nvext.decode_worker_id` (the router picks the other side).
    pub fn pin(&self, request: Completion) -> Completion {
        match self.role() {
            WorkerRole::Aggregated => request.pin_worker(self.instance_id()),
            WorkerRole::Prefill => request.pin_prefill_worker(self.instance_id()),
            WorkerRole::Decode => request.pin_decode_worker(self.instance_id()),
        }
    }

    /// Whether this worker took part in a response reported as `identity`:
    /// as its prefill worker, or as the worker that produced the tokens.
    pub fn served(&self, identity: &WorkerIdentity) -> bool {
        let id = Some(self.instance_id());
        match self.role() {
            WorkerRole::Prefill => identity.prefill == id,
            WorkerRole::Aggregated | WorkerRole::Decode => identity.serving() == id,
        }
    }

    pub fn metrics_url(&self) -> String {
        format!("{}/metrics", self.ready.metrics_url)
    }

    /// The worker's base HTTP URL (metrics, faults, state).
    pub fn admin_url(&self) -> &str {
        &self.ready.metrics_url
    }

    /// `tcp://host:port`, the endpoint a router hint names for this worker.
    pub fn control_endpoint(&self) -> Option<&str> {
        self.ready.control_endpoint.as_deref()
    }

    pub fn describe(&self) -> serde_json::Value {
        json!({
            "slot": self.slot,
            "pid": self.process.pid(),
            "log": self.process.log_path(),
            "rss_kib": crate::proc::procfs::rss_kib(self.process.pid()),
            "group_rss_kib": crate::proc::procfs::group_rss_kib(self.process.pid()),
            "ready": self.ready,
        })
    }
}
