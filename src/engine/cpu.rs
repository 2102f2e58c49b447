//! The default stack's engine: the project's CPU engine worker
//! (`fixtures/cpu-engine`, see docs/cpu-engine.md) with the real KVCR tier,
//! behind the real Dynamo frontend, beside the real Guard service.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::{CpuEngineProfile, Geometry as GeometryKind};
use crate::proc::ProcessSpec;

use super::topology::{self, Topology, WorkerPlan, WorkerRole};
use super::{dynamo, Engine, Geometry, LaunchContext, ReferenceVariant, WorkerSlot};

const MODEL_DIR: &str = "fixtures/models/tiny";
const ENGINE_SOURCES: &str = "fixtures/cpu-engine/cpu_engine";

/// Ids below this are the tiny model's special tokens (bos, eos, pad).
const FIRST_ORDINARY_TOKEN: u32 = 3;
/// Used when config.json cannot be read; the engine then rejects nothing
/// below it either.
const FALLBACK_VOCAB: u32 = 256;

const SSM_PART_LABELS: [&str; 3] = ["ssm:conv", "ssm:temporal", "ssm:x"];

pub struct CpuEngine {
    pub profile: CpuEngineProfile,
    pub geometry: GeometryKind,
    pub topology: Topology,
    /// `vocab_size` of the model's config.json.
    vocab_size: u32,
    /// Digest of the engine's sources and model files: a change to either
    /// may change tokens, so it is part of the reference cache key.
    sources_digest: String,
}

impl CpuEngine {
    pub fn new(profile: CpuEngineProfile, geometry: GeometryKind, repo_root: &Path) -> Self {
        Self {
            profile,
            geometry,
            topology: Topology::Agg,
            sources_digest: sources_digest(repo_root),
            vocab_size: vocab_size(&repo_root.join(MODEL_DIR)),
        }
    }

    /// The same engine laid out as `topology`.
    pub fn with_topology(self, topology: Topology) -> Self {
        Self { topology, ..self }
    }

    fn plan(&self, slot: &WorkerSlot) -> WorkerPlan {
        topology::plan_for(&self.worker_plans(), slot, &[])
    }

    /// KVCR's disk tier, when the profile sets one: a file per slot (a
    /// replacement opens the one its predecessor used: the Guard refuses a
    /// claim whose G3 paths differ), under `g3_dir` or `<run dir>/g3`.
    fn g3_flags(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> Vec<String> {
        let Some(blocks) = self.profile.g3_capacity_blocks else {
            return Vec::new();
        };
        let dir = match &self.profile.g3_dir {
            Some(dir) if dir.is_absolute() => dir.clone(),
            Some(dir) => ctx.repo_root.join(dir),
            None => ctx.logs_dir.parent().unwrap_or(&ctx.logs_dir).join("g3"),
        };
        let _ = std::fs::create_dir_all(&dir);
        vec![
            "--g3-file".to_string(),
            dir.join(format!("{}.bin", slot.name)).display().to_string(),
            "--g3-capacity-blocks".to_string(),
            blocks.to_string(),
        ]
    }

    fn package_dir(ctx: &LaunchContext) -> PathBuf {
        ctx.repo_root.join("fixtures/cpu-engine")
    }

    fn base_worker(
        &self,
        ctx: &LaunchContext,
        name: &str,
        log_name: &str,
        slot: &WorkerSlot,
    ) -> ProcessSpec {
        let spec = ProcessSpec::new(
            log_name,
            &ctx.python,
            ctx.logs_dir.join(format!("{log_name}.log")),
        )
        .args(["-m", "cpu_engine", "--name", name])
        .arg("--model-path")
        .arg(ctx.repo_root.join(MODEL_DIR).display().to_string())
        .args(["--geometry", self.geometry.as_str()])
        .args(self.profile.engine_flags())
        .args([
            "--metrics-host",
            &ctx.host,
            "--metrics-port",
            &slot.metrics_port.to_string(),
        ])
        .arg("--ready-file")
        .arg(slot.ready_file.display().to_string())
        .env("PYTHONPATH", Self::package_dir(ctx).display().to_string())
        .cwd(&ctx.repo_root);
        dynamo::apply_env(spec, ctx)
    }
}

impl Engine for CpuEngine {
    fn first_token_stamp(&self) -> super::FirstTokenStamp {
        super::FirstTokenStamp::WorkerLog
    }

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn model(&self) -> String {
        "tiny".into()
    }

    fn geometry(&self) -> Geometry {
        let p = &self.profile;
        let mut pages: Vec<(String, u64)> = (0..p.attn_pages)
            .map(|_| ("attn".to_string(), p.attn_page_bytes))
            .collect();
        if self.geometry == GeometryKind::Hybrid {
            pages.extend((0..p.ssm_parts as usize).map(|i| {
                (
                    SSM_PART_LABELS
                        .get(i)
                        .map_or_else(|| format!("ssm:{i}"), |l| l.to_string()),
                    p.ssm_part_bytes,
                )
            }));
        }
        Geometry {
            name: self.geometry.as_str().to_string(),
            block_size_tokens: p.block_size,
            pages,
        }
    }

    fn prompt_vocab(&self) -> std::ops::Range<u32> {
        FIRST_ORDINARY_TOKEN..self.vocab_size
    }

    fn has_guard(&self) -> bool {
        true
    }

    fn guard(&self, ctx: &LaunchContext) -> Option<ProcessSpec> {
        let geometry = self.geometry();
        let sizes = match self.profile.guard_pool_blocks {
            // Pools sized in blocks: the exact figure that holds them.
            Some(blocks) => super::pool_size::pool_bytes_for_blocks(&geometry, u64::from(blocks))
                .into_iter()
                .map(super::pool_size::exact_gb)
                .collect(),
            None => vec![format!("{}", self.profile.guard_pool_gb); geometry.pool_kinds().len()],
        };
        Some(dynamo::guard_service_with(
            ctx,
            &sizes,
            self.profile.guard_heartbeat_timeout_ms,
        ))
    }

    fn worker_plans(&self) -> Vec<WorkerPlan> {
        topology::plan_cpu_workers(self.topology)
    }

    /// One Guard service per node: each node's worker keeps its pool on its
    /// own `/dev/shm`. On one node, one shared service.
    fn guard_per_slot(&self) -> bool {
        self.topology.node_count() > 1
    }

    fn worker(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> ProcessSpec {
        let role = self.plan(slot).role;
        let spec = self.base_worker(ctx, &slot.name, &slot.process_name(), slot);
        // Across nodes, UCX reports the transport of every protocol it
        // selects: the evidence that a peer transfer crossed the network.
        let spec = if self.topology.node_count() > 1 {
            spec.env("UCX_PROTO_INFO", "y")
        } else {
            spec
        };
        spec.args(["--served-model-name", &self.model(), "--kvcr", "on"])
            .args(["--role", role_flag(role), "--component", component(role)])
            .args([
                "--control-host",
                &ctx.host,
                "--control-advertise-host",
                &ctx.host,
            ])
            .args(["--control-port", &slot.control_port.to_string()])
            .arg("--guard-socket")
            .arg(slot.guard_socket.display().to_string())
            .args(["--guard-index", &slot.guard_index.to_string()])
            .args(["--compatibility-digest", &ctx.compatibility_digest])
            .args(self.g3_flags(ctx, slot))
    }

    fn reference_worker(
        &self,
        ctx: &LaunchContext,
        variant: ReferenceVariant,
        slot: &WorkerSlot,
    ) -> ProcessSpec {
        let spec = self
            .base_worker(ctx, variant.label(), variant.label(), slot)
            .args([
                "--served-model-name",
                &self.reference_model(variant),
                "--kvcr",
                "off",
            ]);
        match variant {
            ReferenceVariant::Cached => spec,
            ReferenceVariant::Uncached => spec.arg("--no-prefix-caching"),
        }
    }

    fn device_cache_blocks(&self) -> u64 {
        u64::from(self.profile.device_cache_blocks)
    }

    fn counts_blocks(&self) -> bool {
        true
    }

    fn counts_pages_per_kind(&self) -> bool {
        true
    }

    /// `--kvcr off`: the engine imports KVCR only with `--kvcr on`.
    fn reference_imports_kvcr(&self) -> bool {
        false
    }

    fn token_identity(&self) -> String {
        let g = self.geometry();
        format!(
            "cpu-engine model=tiny block={} pages={:?} sources={}",
            g.block_size_tokens, g.pages, self.sources_digest
        )
    }
}

/// The engine's `--role` value.
fn role_flag(role: WorkerRole) -> &'static str {
    match role {
        WorkerRole::Aggregated => "aggregated",
        WorkerRole::Prefill => "prefill",
        WorkerRole::Decode => "decode",
    }
}

/// The Dynamo component a worker serves on: prefill workers on their own
/// (`<ns>.prefill.generate`, as dynamo.vllm does), the rest on `cpu`.
fn component(role: WorkerRole) -> &'static str {
    match role {
        WorkerRole::Prefill => "prefill",
        WorkerRole::Aggregated | WorkerRole::Decode => "cpu",
    }
}

/// SHA-256 over the engine's Python sources and the model directory, in
/// name order.
fn sources_digest(repo_root: &Path) -> String {
    let mut hasher = Sha256::new();
    for dir in [ENGINE_SOURCES, MODEL_DIR] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root.join(dir))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        for file in files {
            hasher.update(
                file.file_name()
                    .map(|n| n.as_encoded_bytes().to_vec())
                    .unwrap_or_default(),
            );
            hasher.update(std::fs::read(&file).unwrap_or_default());
        }
    }
    hex::encode(hasher.finalize())
}

/// `vocab_size` from a Hugging Face style config.json.
fn vocab_size(model_dir: &Path) -> u32 {
    std::fs::read_to_string(model_dir.join("config.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|config| config.get("vocab_size")?.as_u64())
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(FALLBACK_VOCAB)
}
