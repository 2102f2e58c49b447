//! The parts of a stack that are the same for every engine: Dynamo's
//! environment (file discovery, TCP request plane, ZMQ event plane, all on
//! one host), its frontend with the KV router, and the KVCR Guard service;
//! and what every Dynamo engine worker (`dynamo.vllm`, `dynamo.sglang`)
//! shares: its KV-events publisher, its environment on its node, one Guard
//! service per node.

use serde_json::{json, Value};

use crate::proc::ProcessSpec;

use super::topology::{set_env, Node, Topology, WorkerPlan, WorkerRole};
use super::{Geometry, LaunchContext, WorkerSlot};

/// Dynamo without etcd or NATS: everything a component needs to find the
/// others through a per-run discovery directory.
pub fn apply_env(spec: ProcessSpec, ctx: &LaunchContext) -> ProcessSpec {
    spec.env_remove("NATS_SERVER")
        .env_remove("ETCD_ENDPOINTS")
        .env("DYN_DISCOVERY_BACKEND", "file")
        .env("DYN_FILE_KV", ctx.discovery_dir().display().to_string())
        .env("DYN_REQUEST_PLANE", "tcp")
        .env("DYN_EVENT_PLANE", "zmq")
        .env("DYN_TCP_RPC_HOST", &ctx.host)
        .env("DYN_EVENT_PLANE_HOST", &ctx.host)
        .env("DYN_TCP_RESPONSE_STREAM_HOST", &ctx.host)
        .env("PYTHONUNBUFFERED", "1")
        // Engines seed block hashes from it; a restarted engine must find its blocks.
        .env("PYTHONHASHSEED", "0")
}

/// `python -m dynamo.frontend --router-mode kv`.
pub fn frontend(ctx: &LaunchContext) -> ProcessSpec {
    let spec = ProcessSpec::new("frontend", &ctx.python, ctx.logs_dir.join("frontend.log"))
        .args([
            "-m",
            "dynamo.frontend",
            "--router-mode",
            "kv",
            "--http-host",
        ])
        .arg(&ctx.host)
        .arg("--http-port")
        .arg(ctx.frontend_port.to_string())
        .cwd(&ctx.repo_root);
    apply_env(spec, ctx)
}

/// `python -m kvcr.kvcr_service`, one pool per page kind of the geometry.
pub fn guard_service(ctx: &LaunchContext, geometry: &Geometry, pool_gb: f64) -> ProcessSpec {
    let sizes = vec![format!("{pool_gb}"); geometry.pool_kinds().len()];
    guard_service_with(ctx, &sizes, None)
}

/// `python -m kvcr.kvcr_service` with these `--pool-sizes-gb` figures (one
/// per page kind) and, when set, `--heartbeat-timeout-ms`.
pub fn guard_service_with(
    ctx: &LaunchContext,
    pool_sizes_gb: &[String],
    heartbeat_timeout_ms: Option<u64>,
) -> ProcessSpec {
    let sizes = pool_sizes_gb.join(",");
    let spec = ProcessSpec::new("guard", &ctx.python, ctx.logs_dir.join("guard.log"))
        .args(["-m", crate::telemetry::names::kvcr_cli::GUARD_MODULE])
        .arg("--socket-path")
        .arg(ctx.guard_socket.display().to_string())
        .arg("--pool-dir")
        .arg(ctx.pool_dir.display().to_string())
        .arg("--guard-count")
        .arg(ctx.guard_count.to_string())
        .arg("--pool-sizes-gb")
        .arg(sizes)
        .arg("--compatibility-digest")
        .arg(&ctx.compatibility_digest)
        // DEBUG carries primary_attached and the promotion stages.
        .args(["--log-level", "DEBUG"])
        .env("PYTHONUNBUFFERED", "1")
        .cwd(&ctx.repo_root);
    match heartbeat_timeout_ms {
        Some(ms) => spec.args(["--heartbeat-timeout-ms", &ms.to_string()]),
        None => spec,
    }
}

/// `--kv-events-config`: ZMQ publisher on the slot's harness-allocated port.
pub fn kv_events_config(port: u16) -> Value {
    json!({
        "publisher": "zmq",
        "topic": "kv-events",
        "endpoint": format!("tcp://*:{port}"),
        "enable_kv_cache_events": true,
    })
}

/// [`worker_env`] plus the plan's GPUs (`CUDA_VISIBLE_DEVICES`): a GPU worker
/// of an engine without a platform layer (SGLang).
pub fn gpu_worker_env(
    spec: ProcessSpec,
    node: &Node,
    plan: &WorkerPlan,
    slot: &WorkerSlot,
) -> ProcessSpec {
    worker_env(
        spec.env("CUDA_VISIBLE_DEVICES", plan.cuda_visible_devices()),
        node,
        plan,
        slot,
    )
}

/// Environment of a Dynamo engine worker: its metrics server and, on another
/// node, Dynamo's planes bound to that node's address.
pub fn worker_env(
    spec: ProcessSpec,
    node: &Node,
    plan: &WorkerPlan,
    slot: &WorkerSlot,
) -> ProcessSpec {
    let mut spec = spec
        // Dynamo's system server serves the engine's Prometheus metrics
        // (`vllm:*`, `sglang:*`) on /metrics of this port.
        .env("DYN_SYSTEM_PORT", slot.metrics_port.to_string())
        .env("DYN_SYSTEM_HOST", &node.address);
    for key in [
        "DYN_TCP_RPC_HOST",
        "DYN_EVENT_PLANE_HOST",
        "DYN_TCP_RESPONSE_STREAM_HOST",
    ] {
        spec = set_env(spec, key, &node.address);
    }
    if plan.role != WorkerRole::Aggregated {
        spec = spec.env("VLLM_NIXL_SIDE_CHANNEL_HOST", &node.address).env(
            "VLLM_NIXL_SIDE_CHANNEL_PORT",
            slot.side_channel_port.to_string(),
        );
    }
    spec
}

/// One Guard service per node (the first as planned, the others wrapped in
/// their node's launcher and named `guard-<node>`).
pub fn guards_per_node(
    ctx: &LaunchContext,
    nodes: &[Node],
    topology: Topology,
    guard: Option<ProcessSpec>,
) -> Vec<ProcessSpec> {
    let Some(guard) = guard else {
        return Vec::new();
    };
    nodes
        .iter()
        .take(topology.node_count())
        .enumerate()
        .map(|(i, node)| {
            let spec = if i == 0 {
                guard.clone()
            } else {
                let name = format!("guard-{}", node.name);
                ProcessSpec {
                    log: ctx.logs_dir.join(format!("{name}.log")),
                    name,
                    ..guard.clone()
                }
            };
            node.wrap(spec)
        })
        .collect()
}
