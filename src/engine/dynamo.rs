//! The parts of a stack that are the same for every engine: Dynamo's
//! environment (file discovery, TCP request plane, ZMQ event plane, all on
//! one host), its frontend with the KV router, and the KVCR Guard service.

use crate::proc::ProcessSpec;

use super::{Geometry, LaunchContext};

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
