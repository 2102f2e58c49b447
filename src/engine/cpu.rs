//! The default stack's engine: the project's CPU engine worker
//! (`fixtures/cpu-engine`, see docs/cpu-engine.md) with the real KVCR tier,
//! behind the real Dynamo frontend, beside the real Guard service.

use std::path::PathBuf;

use crate::proc::ProcessSpec;

use super::{dynamo, Engine, Geometry, LaunchContext, ReferenceVariant, WorkerSlot};

// Temporary home of the engine knobs until the config module lands.
pub use self::knobs::CpuEngineProfile;
mod knobs {
    #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
    pub struct CpuEngineProfile {
        pub geometry: String,
        pub block_size: u32,
        pub attn_pages: u32,
        pub attn_page_bytes: u64,
        pub ssm_parts: u32,
        pub ssm_part_bytes: u64,
        pub device_cache_blocks: u32,
        pub host_tier_blocks: u32,
        pub prefill_us_per_token: u32,
        pub decode_us_per_token: u32,
        pub local_pool_blocks: u32,
        pub stats_interval_s: f64,
        pub guard_pool_gb: f64,
    }
}

const SSM_PART_LABELS: [&str; 3] = ["ssm:conv", "ssm:temporal", "ssm:x"];

pub struct CpuEngine {
    pub profile: CpuEngineProfile,
    /// Launch-time fault switches (`--fault NAME[=ARG]`) for every KVCR worker.
    pub launch_faults: Vec<String>,
}

impl CpuEngine {
    pub fn new(profile: CpuEngineProfile) -> Self {
        Self {
            profile,
            launch_faults: Vec::new(),
        }
    }

    fn package_dir(ctx: &LaunchContext) -> PathBuf {
        ctx.repo_root.join("fixtures/cpu-engine")
    }

    fn base_worker(&self, ctx: &LaunchContext, name: &str, log_name: &str, slot: &WorkerSlot) -> ProcessSpec {
        let p = &self.profile;
        let spec = ProcessSpec::new(log_name, &ctx.python, ctx.logs_dir.join(format!("{log_name}.log")))
            .args(["-m", "cpu_engine", "--name", name])
            .arg("--model-path")
            .arg(ctx.repo_root.join("fixtures/models/tiny").display().to_string())
            .args(["--block-size", &p.block_size.to_string()])
            .args(["--geometry", &p.geometry])
            .args(["--attn-pages", &p.attn_pages.to_string()])
            .args(["--attn-page-bytes", &p.attn_page_bytes.to_string()])
            .args(["--ssm-parts", &p.ssm_parts.to_string()])
            .args(["--ssm-part-bytes", &p.ssm_part_bytes.to_string()])
            .args(["--device-cache-blocks", &p.device_cache_blocks.to_string()])
            .args(["--host-tier-blocks", &p.host_tier_blocks.to_string()])
            .args(["--prefill-us-per-token", &p.prefill_us_per_token.to_string()])
            .args(["--decode-us-per-token", &p.decode_us_per_token.to_string()])
            .args(["--stats-interval-s", &p.stats_interval_s.to_string()])
            .args(["--metrics-host", &ctx.host, "--metrics-port", &slot.metrics_port.to_string()])
            .arg("--ready-file")
            .arg(slot.ready_file.display().to_string())
            .env("PYTHONPATH", Self::package_dir(ctx).display().to_string())
            .cwd(&ctx.repo_root);
        dynamo::apply_env(spec, ctx)
    }
}

impl Engine for CpuEngine {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn model(&self) -> String {
        "tiny".into()
    }

    fn geometry(&self) -> Geometry {
        let p = &self.profile;
        let mut pages: Vec<(String, u64)> = (0..p.attn_pages).map(|_| ("attn".to_string(), p.attn_page_bytes)).collect();
        if p.geometry == "hybrid" {
            pages.extend(
                (0..p.ssm_parts as usize).map(|i| (SSM_PART_LABELS.get(i).map_or_else(|| format!("ssm:{i}"), |l| l.to_string()), p.ssm_part_bytes)),
            );
        }
        Geometry {
            name: p.geometry.clone(),
            block_size_tokens: p.block_size,
            pages,
        }
    }

    fn has_guard(&self) -> bool {
        true
    }

    fn frontend(&self, ctx: &LaunchContext) -> ProcessSpec {
        dynamo::frontend(ctx)
    }

    fn guard(&self, ctx: &LaunchContext) -> Option<ProcessSpec> {
        Some(dynamo::guard_service(ctx, &self.geometry(), self.profile.guard_pool_gb))
    }

    fn worker(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> ProcessSpec {
        let mut spec = self
            .base_worker(ctx, &slot.name, &slot.process_name(), slot)
            .args(["--served-model-name", &self.model(), "--kvcr", "on"])
            .args(["--control-host", &ctx.host, "--control-advertise-host", &ctx.host])
            .args(["--control-port", &slot.control_port.to_string()])
            .arg("--guard-socket")
            .arg(ctx.guard_socket.display().to_string())
            .args(["--guard-index", &slot.guard_index.to_string()])
            .args(["--compatibility-digest", &ctx.compatibility_digest]);
        for fault in &self.launch_faults {
            spec = spec.args(["--fault", fault]);
        }
        spec
    }

    fn reference_worker(&self, ctx: &LaunchContext, variant: ReferenceVariant, slot: &WorkerSlot) -> ProcessSpec {
        let spec = self
            .base_worker(ctx, variant.label(), variant.label(), slot)
            .args(["--served-model-name", &self.reference_model(variant), "--kvcr", "off"]);
        match variant {
            ReferenceVariant::Cached => spec,
            // Later flags win in argparse: no device cache, no host tier.
            ReferenceVariant::Uncached => spec.args(["--device-cache-blocks", "0", "--host-tier-blocks", "0"]),
        }
    }

    fn token_identity(&self) -> String {
        let g = self.geometry();
        format!("cpu-engine model=tiny block={} pages={:?}", g.block_size_tokens, g.pages)
    }
}
