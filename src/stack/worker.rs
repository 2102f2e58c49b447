use serde_json::json;

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
            "ready": self.ready,
        })
    }
}
