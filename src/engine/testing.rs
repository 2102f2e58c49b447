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

/// The registry with one line more: what adding an engine takes.
mod with_toy {
    registry!(engines,
        /// The toy engine (`engine/toy.rs`, `fixtures/engines/toy.toml`).
        Toy = "toy" => crate::engine::toy::ToyEngine,
    );
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::cpu::CpuEngineProfile;
    use super::super::{placement, slots, Applicability, GeometryKind, Need, Setup, Topology};
    use super::example_context;
    use super::with_toy::Kind;

    #[test]
    fn an_engine_is_one_room_one_fixture_and_one_registry_line() {
        // Listed and parsed: the `--engine` words, help and errors are the
        // registry's.
        assert_eq!(Kind::WORDS, ["cpu", "vllm", "sglang", "toy"]);
        assert_eq!(super::super::Kind::WORDS, &Kind::WORDS[..3]);
        assert_eq!("Toy".parse::<Kind>(), Ok(Kind::Toy));
        assert_eq!(
            "tiny".parse::<Kind>().err().as_deref(),
            Some("unknown engine `tiny`: expected one of cpu, vllm, sglang, toy")
        );
        // Asked what it supports: its own answer, in context.
        assert!(Kind::Toy
            .applicability("TC-02", &[], Topology::Agg)
            .applies());
        assert_eq!(
            Kind::Toy.applicability("TC-04", &[Need::Guard], Topology::Agg),
            Applicability::Ignored("TC-04 on toy/agg: the toy engine has no KVCR tier".into())
        );
        assert_eq!(
            Kind::Toy.applicability("TC-01", &[], Topology::TwoNode),
            Applicability::Ignored("TC-01 on toy/two-node: the toy engine runs on agg only".into())
        );
        // Built from its fixture, fixtures/engines/toy.toml.
        let knobs = CpuEngineProfile::shipped();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let setup = Setup::new(Topology::Agg, GeometryKind::Dense, &knobs, None, root);
        let toy = Kind::Toy.build(&setup).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((toy.name(), toy.model()), ("toy", "toy-model".to_string()));
        assert_eq!(toy.prompt_vocab(), 3..256);
        // Planned by the stack runner as any engine: slots from the one
        // allocator, its workers, no Guard, GPU placement satisfied.
        let ctx = example_context();
        let plans = toy.worker_plans();
        let seats = slots::allot(&plans, toy.guard_per_slot(), &ctx.work_dir, |_, i| {
            20_000 + i as u16
        });
        let workers: Vec<_> = seats.iter().map(|s| toy.worker(&ctx, s)).collect();
        assert_eq!(
            workers.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(),
            ["worker-A", "worker-B"]
        );
        assert_eq!(workers[1].flag_value("--metrics-port"), Some("20001"));
        assert!(!toy.has_guard() && toy.guards(&ctx).is_empty());
        placement::preflight_need(toy.as_ref(), "127.0.0.1", true)
            .unwrap_or_else(|e| panic!("{e}"));
        // Every engine of the registry builds, each named by its word.
        for kind in Kind::ALL {
            let engine = kind.build(&setup).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(engine.name(), kind.as_str());
        }
    }
}
