//! Fixtures of the engine room's tests: a launch context and worker slots
//! in which nothing exists, two GPU nodes, and the plan of a whole stack as
//! the plan snapshots hold it.

use std::path::PathBuf;

use crate::proc::ProcessSpec;

use super::topology::Node;
use super::{Engine, LaunchContext, WorkerSlot};

/// A fixed launch context on `127.0.0.1`.
pub fn example_context() -> LaunchContext {
    LaunchContext::unlaunched("127.0.0.1")
}

/// Fixed worker slots: `A`, `B`, `C`, each with a Guard of its own, and
/// ports 17771.., 18101.., 20081.., 5601...
pub fn example_slot(name: &str, generation: u32) -> WorkerSlot {
    let index = name.bytes().next().map_or(0, |b| b.saturating_sub(b'A')) as u16;
    WorkerSlot {
        name: name.into(),
        guard_index: 0,
        guard_service: format!("guard-{name}"),
        guard_socket: PathBuf::from(format!("/dev/shm/kvcr-e2e-example/guard-{name}.sock")),
        control_port: 17771 + index,
        metrics_port: 18101 + index,
        ready_file: PathBuf::from(format!("/dev/shm/kvcr-e2e-example/ready-{name}")),
        generation,
        kv_events_port: 20081 + index,
        side_channel_port: 5601 + index,
    }
}

/// Two GPU hosts: `gpu-a` (this one) and `gpu-b`, reached through srun.
pub fn two_nodes() -> Vec<Node> {
    vec![
        Node {
            name: "gpu-a".into(),
            address: "10.0.0.1".into(),
            launcher: Vec::new(),
        },
        Node {
            name: "gpu-b".into(),
            address: "10.0.0.2".into(),
            launcher: [
                "srun",
                "--nodes=1",
                "--ntasks=1",
                "--nodelist={node}",
                "--export=ALL",
            ]
            .map(String::from)
            .to_vec(),
        },
    ]
}

/// The plan of every process of one stack, as the plan snapshots hold it:
/// frontend, Guards, workers, A's replacement, reference workers, the bare
/// engine.
pub fn stack_plan(e: &dyn Engine, ctx: &LaunchContext) -> Vec<ProcessSpec> {
    let mut specs = vec![e.frontend(ctx)];
    specs.extend(e.guards(ctx));
    for plan in e.worker_plans() {
        specs.push(e.worker(ctx, &example_slot(&plan.slot, 0)));
    }
    specs.push(e.worker(ctx, &example_slot("A", 1)));
    for variant in e.reference_variants() {
        specs.push(e.reference_worker(ctx, variant, &example_slot("A", 0)));
    }
    specs.extend(e.bare_engine(ctx, 19999));
    specs
}
