//! How each engine's stack is launched and read.
//!
//! An [`Engine`] turns a [`LaunchContext`] into process specs: the Dynamo
//! frontend with its KV router, the KVCR Guard service, the workers, and the
//! KVCR-disabled reference workers. The stack runner starts whatever the
//! engine plans; it does not know which engine it runs. The CPU engine is
//! launched for real on every machine; the GPU engines' plans are checked as
//! data (their command lines are those of KVCR's quick start).

use std::path::PathBuf;

use serde::Serialize;

use crate::proc::ProcessSpec;

pub mod cpu;
pub mod dynamo;

/// Page geometry of one KV block, as the harness checks transfers against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Geometry {
    pub name: String,
    pub block_size_tokens: u32,
    /// `(label, bytes)` of every page of one block, e.g. 2 × attn + 3 × ssm parts.
    pub pages: Vec<(String, u64)>,
}

impl Geometry {
    pub fn pages_per_block(&self) -> u64 {
        self.pages.len() as u64
    }

    pub fn bytes_per_block(&self) -> u64 {
        self.pages.iter().map(|(_, bytes)| bytes).sum()
    }

    /// Pool sizes of the Guard service in GB, one per distinct page kind, in
    /// first-seen order (the order of KVCR's `pool_layouts`).
    pub fn pool_kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = Vec::new();
        for (label, _) in &self.pages {
            let kind = label.split(':').next().unwrap_or(label).to_string();
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }

    /// Full blocks in a prompt of `tokens` tokens.
    pub fn full_blocks(&self, tokens: u64) -> u64 {
        tokens / u64::from(self.block_size_tokens)
    }
}

/// Everything a plan needs that the stack runner decides: paths, ports,
/// interpreter, per-run names.
#[derive(Debug, Clone, Serialize)]
pub struct LaunchContext {
    pub python: PathBuf,
    pub repo_root: PathBuf,
    pub logs_dir: PathBuf,
    /// Per-run scratch: discovery dir, ready files (on tmpfs, short paths).
    pub work_dir: PathBuf,
    pub host: String,
    pub frontend_port: u16,
    pub guard_socket: PathBuf,
    pub pool_dir: PathBuf,
    pub compatibility_digest: String,
    pub guard_count: u32,
}

impl LaunchContext {
    pub fn discovery_dir(&self) -> PathBuf {
        self.work_dir.join("discovery")
    }

    pub fn frontend_url(&self) -> String {
        format!("http://{}:{}", self.host, self.frontend_port)
    }
}

/// One worker's seat in the stack. A replacement takes the same slot: the
/// same Guard index and control port, so it can claim the dead worker's pool.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerSlot {
    /// `A`, `B`, ...
    pub name: String,
    pub guard_index: u32,
    pub control_port: u16,
    pub metrics_port: u16,
    pub ready_file: PathBuf,
    /// 0 for the first start, 1 for the first replacement, ...
    pub generation: u32,
}

impl WorkerSlot {
    /// The name a process of this slot is logged under (`worker-A`, `worker-A.1`).
    pub fn process_name(&self) -> String {
        match self.generation {
            0 => format!("worker-{}", self.name),
            n => format!("worker-{}.{n}", self.name),
        }
    }
}

/// The KVCR-disabled engines of the reference phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReferenceVariant {
    /// Prefix caching on: the reference tokens and the warm baseline.
    Cached,
    /// Prefix caching off: the determinism probe's second opinion.
    Uncached,
}

impl ReferenceVariant {
    pub fn label(self) -> &'static str {
        match self {
            ReferenceVariant::Cached => "reference",
            ReferenceVariant::Uncached => "reference-nocache",
        }
    }
}

/// The engine the settings ask for.
pub fn for_settings(
    settings: &crate::config::Settings,
    repo_root: &std::path::Path,
) -> Result<std::sync::Arc<dyn Engine>, String> {
    match settings.engine {
        crate::config::Engine::Cpu => Ok(std::sync::Arc::new(cpu::CpuEngine::new(
            settings.cpu_engine.clone(),
            settings.geometry,
            repo_root,
        ))),
        other => Err(format!(
            "engine {other}: its launch plan is not in this build yet; use --engine cpu"
        )),
    }
}

/// A way to launch one kind of KVCR stack.
pub trait Engine: Send + Sync {
    /// `cpu`, `vllm`, `sglang`.
    fn name(&self) -> &'static str;
    /// The served model name of the KVCR workers.
    fn model(&self) -> String;
    /// The served model name of a reference worker.
    fn reference_model(&self, variant: ReferenceVariant) -> String {
        format!("{}-{}", self.model(), variant.label())
    }
    fn geometry(&self) -> Geometry;
    /// Token ids prompts may use: the model's vocabulary without its special
    /// tokens.
    fn prompt_vocab(&self) -> std::ops::Range<u32>;
    /// Whether this engine runs the KVCR Guard service.
    fn has_guard(&self) -> bool;
    fn frontend(&self, ctx: &LaunchContext) -> ProcessSpec;
    fn guard(&self, ctx: &LaunchContext) -> Option<ProcessSpec>;
    fn worker(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> ProcessSpec;
    fn reference_worker(
        &self,
        ctx: &LaunchContext,
        variant: ReferenceVariant,
        slot: &WorkerSlot,
    ) -> ProcessSpec;
    /// A digest of everything that determines generated tokens (for the
    /// reference cache): model, geometry, engine knobs that matter.
    fn token_identity(&self) -> String;
}
