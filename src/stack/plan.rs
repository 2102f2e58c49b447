//! What a stack is, fixed once it is provisioned or attached: the engine,
//! its launch context, the run's directories, the worker slots, where
//! each node runs, and the options it was started with. Nothing here
//! changes while cases run; what does (the processes running now, the
//! retired ones, the faults queued for a replacement) is the
//! [`Stack`](super::Stack)'s own.

use std::sync::Arc;
use std::time::Instant;

use crate::engine::{Engine, LaunchContext, WorkerSlot};

use super::nodes::{self, Placement};
use super::{Layout, StackOptions};

/// The immutable part of a stack.
pub struct StackPlan {
    pub engine: Arc<dyn Engine>,
    pub ctx: LaunchContext,
    pub layout: Layout,
    /// The worker slots, planned before any worker starts.
    pub slots: Vec<WorkerSlot>,
    /// Which node each slot runs on, and node 1 when there is one.
    pub placement: Placement,
    /// What the stack was provisioned with (an attached stack: what its
    /// owner provisioned it with, with this run's kill and probe budgets).
    pub options: StackOptions,
    /// The process that provisioned the stack and tears it down.
    pub owner_pid: u32,
    /// The port a bare engine (no Dynamo, no KVCR) listens on for the
    /// reference phase's determinism probes.
    pub bare_port: u16,
    /// When provisioning began.
    pub started: Instant,
}

impl StackPlan {
    /// The node (index into the topology's nodes) `slot` runs on; 0 for a
    /// slot the topology does not name (the reference workers).
    pub fn node_of(&self, slot: &str) -> usize {
        nodes::node_of(&self.engine.worker_plans(), slot)
    }

    /// The launch context of a component on `node`: its address.
    pub fn ctx_on(&self, node: usize) -> LaunchContext {
        LaunchContext {
            host: self.placement.address_of(node, &self.ctx.host),
            ..self.ctx.clone()
        }
    }

    /// The frontend's base URL, e.g. `http://127.0.0.1:8123`.
    pub fn frontend_url(&self) -> String {
        self.ctx.frontend_url()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The engine `phase1` builds with its defaults (the CPU engine).
    pub(in crate::stack) fn phase1_engine() -> Arc<dyn Engine> {
        crate::config::testing::phase1_engine()
    }

    /// Options of a stack in which nothing runs, its logs under `logs`.
    pub(in crate::stack) fn example_options(logs: &std::path::Path) -> StackOptions {
        StackOptions {
            python: "python3".into(),
            repo_root: ".".into(),
            logs_dir: logs.to_path_buf(),
            run_id: "plan-test".into(),
            host: "127.0.0.1".into(),
            startup_timeout: std::time::Duration::from_secs(1),
            with_reference: false,
            worker_faults: Vec::new(),
            kill_timeout: std::time::Duration::from_secs(1),
            probe_timeout: std::time::Duration::from_secs(1),
            kvcr: None,
        }
    }

    #[test]
    fn a_local_plan_puts_every_slot_on_node_0_at_the_stack_host() {
        let logs = std::env::temp_dir().join("kvcr-e2e-plan-test");
        let ctx = crate::engine::testing::example_context();
        let plan = StackPlan {
            layout: Layout {
                logs_dir: logs.clone(),
                scratch_dir: logs.clone(),
            },
            slots: vec![crate::engine::testing::example_slot("A", 0)],
            placement: Placement::local(),
            options: example_options(&logs),
            owner_pid: std::process::id(),
            bare_port: 0,
            started: Instant::now(),
            ctx,
            engine: phase1_engine(),
        };
        for slot in &plan.slots {
            assert_eq!(plan.node_of(&slot.name), 0, "slot {}", slot.name);
        }
        assert_eq!(plan.ctx_on(0).host, plan.ctx.host);
        assert_eq!(plan.frontend_url(), "http://127.0.0.1:18000");
        // A slot the topology does not name (a reference worker) is on node 0.
        assert_eq!(plan.node_of("reference-cached"), 0);
    }
}
