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
pub mod placement;
pub mod pool_size;
pub mod sglang;
pub mod topology;
pub mod vllm;

/// Page geometry of one KV block, as the harness checks transfers against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
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

    /// Pages of one kind (`attn`, `ssm`: a label's part before `:`) in a block.
    pub fn pages_of_kind(&self, kind: &str) -> u64 {
        self.pages
            .iter()
            .filter(|(label, _)| label.split(':').next() == Some(kind))
            .count() as u64
    }

    /// Full blocks in a prompt of `tokens` tokens.
    pub fn full_blocks(&self, tokens: u64) -> u64 {
        tokens / u64::from(self.block_size_tokens)
    }
}

/// Everything a plan needs that the stack runner decides: paths, ports,
/// interpreter, per-run names.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
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
    /// The same context for another Guard service of the stack (engines
    /// that run one Guard per worker slot): its own socket, pools and size.
    pub fn for_guard(&self, socket: PathBuf, pool_dir: PathBuf, guard_count: u32) -> Self {
        Self {
            guard_socket: socket,
            pool_dir,
            guard_count,
            ..self.clone()
        }
    }

    pub fn discovery_dir(&self) -> PathBuf {
        self.work_dir.join("discovery")
    }

    pub fn frontend_url(&self) -> String {
        format!("http://{}:{}", self.host, self.frontend_port)
    }
}

/// One worker's seat in the stack. A replacement takes the same slot: the
/// same Guard index and control port, so it can claim the dead worker's pool.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WorkerSlot {
    /// `A`, `B`, ...
    pub name: String,
    /// The slot's group in its Guard service.
    pub guard_index: u32,
    /// The process name of the Guard service holding the slot's pool
    /// (`guard`, or `guard-A` where each slot has its own).
    pub guard_service: String,
    /// That service's socket, which the worker's KVCR tier connects to.
    pub guard_socket: PathBuf,
    pub control_port: u16,
    pub metrics_port: u16,
    pub ready_file: PathBuf,
    /// 0 for the first start, 1 for the first replacement, ...
    pub generation: u32,
    /// ZMQ port the engine publishes its KV events on (GPU engines).
    pub kv_events_port: u16,
    /// NIXL side-channel port of a disaggregated vLLM worker (GPU engines).
    pub side_channel_port: u16,
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
        crate::config::Engine::Cpu => {
            let topology = topology::Topology::parse(settings.topology.as_str())?;
            Ok(std::sync::Arc::new(
                cpu::CpuEngine::new(settings.cpu_engine.clone(), settings.geometry, repo_root)
                    .with_topology(topology),
            ))
        }
        crate::config::Engine::Vllm => {
            let topology = topology::Topology::parse(settings.topology.as_str())?;
            let profile = gpu_profile(settings, repo_root, "vllm")?;
            Ok(std::sync::Arc::new(vllm::VllmEngine::new(
                profile, topology,
            )?))
        }
        crate::config::Engine::Sglang => {
            let topology = topology::Topology::parse(settings.topology.as_str())?;
            let profile = gpu_profile(settings, repo_root, "sglang")?;
            Ok(std::sync::Arc::new(sglang::SglangEngine::new(
                profile, topology,
            )?))
        }
    }
}

/// A GPU engine's settings: `--engine-profile PATH`, else
/// `fixtures/engines/<engine>.toml`.
fn gpu_profile<T: serde::de::DeserializeOwned>(
    settings: &crate::config::Settings,
    repo_root: &std::path::Path,
    engine: &str,
) -> Result<T, String> {
    let path = match &settings.engine_profile {
        Some(path) if path.is_relative() => repo_root.join(path),
        Some(path) => path.clone(),
        None => repo_root.join(format!("fixtures/engines/{engine}.toml")),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("engine profile {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("engine profile {}: {e}", path.display()))
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
    /// The Dynamo frontend with its KV router (the same for every engine).
    fn frontend(&self, ctx: &LaunchContext) -> ProcessSpec {
        dynamo::frontend(ctx)
    }
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
    /// Whether the reference engines (KVCR off) import KVCR, so that their
    /// tokens could depend on the KVCR build under test and the reference
    /// cache key must hold it. A run checks the answer: a reference whose
    /// log shows a kvcr import fails the reference phase.
    fn reference_imports_kvcr(&self) -> bool {
        true
    }
    /// The worker slots this engine's topology asks for (default: two
    /// aggregated workers `A`, `B` on the local node).
    fn worker_plans(&self) -> Vec<topology::WorkerPlan> {
        topology::default_workers()
    }
    /// Checks, before any process starts, that `python` can run this
    /// engine's plan (default: nothing to check).
    fn preflight(&self, _python: &std::path::Path) -> Result<(), String> {
        Ok(())
    }
    /// Every Guard service of the stack, one per node (default: [`Engine::guard`]).
    fn guards(&self, ctx: &LaunchContext) -> Vec<ProcessSpec> {
        self.guard(ctx).into_iter().collect()
    }
    /// Whether each worker slot gets a Guard service of its own (index 0 in
    /// it) instead of one group in a shared service. vLLM's KVCR adapter
    /// takes the Guard index from the data-parallel rank, so one worker
    /// process per slot means one Guard per slot.
    fn guard_per_slot(&self) -> bool {
        false
    }
    /// Whether workers must start one at a time (each ready before the
    /// next starts): heavy engines on a small machine.
    fn start_serially(&self) -> bool {
        false
    }
    /// The KVCR-disabled engines the reference phase runs behind the router.
    fn reference_variants(&self) -> Vec<ReferenceVariant> {
        vec![ReferenceVariant::Cached, ReferenceVariant::Uncached]
    }
    /// The bare engine (no Dynamo, no KVCR) serving an OpenAI API on `port`,
    /// for the determinism probes; `None` when the reference workers probe.
    fn bare_engine(&self, _ctx: &LaunchContext, _port: u16) -> Option<ProcessSpec> {
        None
    }
    /// Blocks the device prefix cache of one worker holds (what the eviction
    /// fillers must push out).
    fn device_cache_blocks(&self) -> u64;
    /// Whether the engine counts its device-cache evictions and the prompt
    /// blocks it computes (the CPU engine does). vLLM counts neither: the
    /// harness derives both from its prefix-cache counters.
    fn counts_blocks(&self) -> bool {
        false
    }

    /// Whether the engine counts the KVCR pages it read per kind
    /// (`Counter::KvcrReadPages`); the CPU engine does, vLLM and SGLang do not.
    fn counts_pages_per_kind(&self) -> bool {
        false
    }
    /// The pinned Python env the harness builds for this engine, or `None`
    /// when the user brings the interpreter (`--python`, e.g. a GPU image).
    fn python_env(&self) -> Option<&'static crate::pyenv::EnvSpec> {
        Some(&crate::pyenv::CPU_STACK)
    }
    /// Where the engine records the instant it sent a request's first token
    /// (TC-05's TTFT accuracy), or why it records none.
    fn first_token_stamp(&self) -> FirstTokenStamp {
        FirstTokenStamp::Unavailable(format!(
            "{} records no per-request first-token instant the harness can read",
            self.name()
        ))
    }
}

/// See [`Engine::first_token_stamp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstTokenStamp {
    /// The worker's log: `request <dynamo id>: first token sent
    /// monotonic_ns=N realtime_ns=M`, written right after the first token
    /// left (CLOCK_MONOTONIC, read before the send).
    WorkerLog,
    /// None, and why.
    Unavailable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(engine: &str, topology: &str) -> crate::config::Settings {
        let args =
            crate::config::split_args(["phase1", "--engine", engine, "--topology", topology])
                .unwrap()
                .0;
        crate::config::resolve(
            &args,
            &crate::config::Env::from_pairs(Vec::<(String, String)>::new()),
        )
        .unwrap()
        .settings
    }

    #[test]
    fn every_engine_plans_from_the_shipped_profiles() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for (engine, topology, workers) in [
            ("cpu", "agg", 2),
            ("cpu", "2p1d", 3),
            ("cpu", "two-node", 2),
            ("vllm", "agg", 2),
            ("vllm", "2p1d", 3),
            ("sglang", "agg", 2),
        ] {
            let e = for_settings(&settings(engine, topology), root)
                .unwrap_or_else(|e| panic!("{engine}/{topology}: {e}"));
            assert_eq!(e.name(), engine);
            assert_eq!(e.worker_plans().len(), workers, "{engine}/{topology}");
        }
    }

    #[test]
    fn a_missing_engine_profile_is_a_clear_error() {
        let mut s = settings("vllm", "agg");
        s.engine_profile = Some("/nonexistent/vllm.toml".into());
        let err = for_settings(&s, std::path::Path::new(".")).err().unwrap();
        assert!(
            err.contains("engine profile /nonexistent/vllm.toml"),
            "{err}"
        );
    }
}
