//! How each engine's stack is launched and read: every engine and topology
//! fact lives here.
//!
//! An engine is a room of this folder (`cpu.rs`, `vllm/`, `sglang.rs`)
//! with one line in the registry below ([`Kind`], the `--engine` words) and
//! a fixture (`fixtures/engines/<engine>.toml`, the GPU engines' model and
//! devices; the CPU engine's knobs are the harness profile's `[cpu_engine]`).
//! Nothing else names an engine: adding one is its file (and its `mod`
//! line), its fixture and its registry line, as the toy engine's test
//! shows (`engine/toy.rs`, `fixtures/engines/toy.toml`).
//! Its [`Engine`] impl builds it from the run's settings ([`Setup`]), says
//! what it gives the cases on each topology ([`Engine::supports`]) and turns a [`LaunchContext`]
//! into process specs: the Dynamo frontend with its KV router, the KVCR
//! Guard service, the workers, and the KVCR-disabled reference workers. The
//! stack runner starts whatever the engine plans; it does not know which
//! engine it runs. The CPU engine and vLLM's CPU platform are launched for
//! real on every machine; vLLM's and SGLang's GPU platforms are launched on
//! GPU runners (their command lines are those of KVCR's quick start), and
//! every engine's plans are snapshot-tested everywhere.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::proc::ProcessSpec;

pub mod applicability;
pub mod cpu;
pub mod dynamo;
pub mod geometry;
pub mod model_files;
pub mod needs;
pub mod placement;
pub mod pool_size;
pub mod sglang;
pub mod slots;
pub mod stack_spec;
pub mod topology;
pub mod vllm;

pub use applicability::Applicability;
pub use geometry::{Geometry, GeometryKind};
pub use needs::{Need, Support};
pub use slots::WorkerSlot;
pub use stack_spec::StackSpec;
pub use topology::Topology;

/// The nice value of the stack's workers and Guard services once each is
/// ready, where the engine asks for one ([`Engine::ready_nice`]).
pub const READY_NICE: i32 = 10;

/// The launch-time switch that replaces one field of the configuration a
/// worker hands KVCR: `kvcr_override=SECTION.FIELD=JSON` among a stack's
/// worker faults. The CPU engine applies it (its `--kvcr-config-override`),
/// so KVCR's own validation judges the value; an engine without it refuses
/// it as any switch it does not have.
pub const KVCR_OVERRIDE: &str = "kvcr_override";

/// [`KVCR_OVERRIDE`] of `setting` (`SECTION.FIELD=JSON`, e.g.
/// `config.operation_timeout_ms=10`), as a worker fault.
pub fn kvcr_override(setting: &str) -> String {
    format!("{KVCR_OVERRIDE}={setting}")
}

/// The engine registry: one line per engine, its `--engine` word and the
/// room that builds and plans it. `registry!(engines)` below makes
/// [`Kind`]; the toy engine's test (`engine/testing.rs`) makes the same
/// registry with one line more.
macro_rules! registry {
    ($make:ident $(, $($more:tt)+)?) => {
        $make! {
            /// The project's deterministic CPU engine stand-in (default).
            Cpu = "cpu" => $crate::engine::cpu::CpuEngine,
            /// `dynamo.vllm` with the KVCR tier.
            Vllm = "vllm" => $crate::engine::vllm::VllmEngine,
            /// `dynamo.sglang` with the KVCR tier (no Guard, no disaggregation).
            Sglang = "sglang" => $crate::engine::sglang::SglangEngine,
            $($($more)+)?
        }
    };
}

/// [`Kind`] from the registry's lines: the `--engine` words (help, errors,
/// profiles), how each engine is built, and what it supports.
macro_rules! engines {
    ($($(#[$doc:meta])* $variant:ident = $word:literal => $room:ty),+ $(,)?) => {
        crate::words::word_enum!(
            /// The engine behind the router (`--engine`): one room of `engine/` each.
            Kind, "engine" { $($(#[$doc])* $variant = $word),+ }
        );

        impl Kind {
            /// Builds the engine from the run's settings.
            pub fn build(self, setup: &$crate::engine::Setup) -> Result<std::sync::Arc<dyn $crate::engine::Engine>, String> {
                let setup = $crate::engine::Setup { engine: self.as_str(), ..*setup };
                match self {
                    $(Kind::$variant => <$room as $crate::engine::Engine>::build(&setup)
                        .map(|e| std::sync::Arc::new(e) as std::sync::Arc<dyn $crate::engine::Engine>),)+
                }
            }

            /// Whether this engine gives `need` on `topology`: the engine's
            /// own answer ([`Engine::supports`]).
            pub fn supports(self, need: $crate::engine::Need, topology: $crate::engine::Topology) -> $crate::engine::Support {
                match self {
                    $(Kind::$variant => <$room as $crate::engine::Engine>::supports(need, topology),)+
                }
            }

            /// Whether trial `case_id`, which needs `needs`, runs on this
            /// engine on `topology` ([`applicability::applicability`]).
            pub fn applicability(self, case_id: &str, needs: &[$crate::engine::Need], topology: $crate::engine::Topology) -> $crate::engine::Applicability {
                $crate::engine::applicability::applicability(case_id, needs, self.as_str(), topology, |need, t| self.supports(need, t))
            }
        }
    };
}

registry!(engines);

// After the registry's macros: the toy engine's test invokes them, with
// the toy engine's room beside the others.
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod toy;

/// What building an engine takes from the run's settings.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    pub topology: Topology,
    /// The page layout asked for (the CPU engine builds either).
    pub geometry: GeometryKind,
    /// The CPU engine's knobs: the harness profile's `[cpu_engine]`.
    pub cpu_engine: &'a cpu::CpuEngineProfile,
    /// `--engine-profile`: the engine's own settings file, when given.
    pub engine_profile: Option<&'a Path>,
    pub repo_root: &'a Path,
    /// The registry word of the engine being built (set by [`Kind::build`]).
    engine: &'static str,
}

impl<'a> Setup<'a> {
    pub fn new(
        topology: Topology,
        geometry: GeometryKind,
        cpu_engine: &'a cpu::CpuEngineProfile,
        engine_profile: Option<&'a Path>,
        repo_root: &'a Path,
    ) -> Self {
        Self {
            topology,
            geometry,
            cpu_engine,
            engine_profile,
            repo_root,
            engine: "",
        }
    }

    /// The engine's own settings: `--engine-profile PATH`, else its
    /// fixture `fixtures/engines/<engine>.toml`.
    pub fn profile<T: serde::de::DeserializeOwned>(&self) -> Result<T, String> {
        let path = match self.engine_profile {
            Some(path) if path.is_relative() => self.repo_root.join(path),
            Some(path) => path.to_path_buf(),
            None => self
                .repo_root
                .join(format!("fixtures/engines/{}.toml", self.engine)),
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("engine profile {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("engine profile {}: {e}", path.display()))
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
    /// A context for plans that are read, not launched (GPU placement
    /// before provisioning, plan tests, docs): fixed paths and ports under
    /// `host`; nothing in it exists.
    pub fn unlaunched(host: &str) -> Self {
        Self {
            python: PathBuf::from("/opt/kvcr-e2e/.venv/bin/python"),
            repo_root: PathBuf::from("/src/kvcr-e2e"),
            logs_dir: PathBuf::from("/src/kvcr-e2e/target/phase1/runs/example/logs"),
            work_dir: PathBuf::from("/dev/shm/kvcr-e2e-example"),
            host: host.into(),
            frontend_port: 18000,
            guard_socket: PathBuf::from("/dev/shm/kvcr-e2e-example/guard.sock"),
            pool_dir: PathBuf::from("/dev/shm/kvcr-e2e-example/pools"),
            compatibility_digest: "example-digest".into(),
            guard_count: 3,
        }
    }

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

/// The path of the prefill → decode (P→D) transfer of a disaggregated stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrefillToDecode {
    /// KVCR's REMOTE path: the decode's KVCR tier reads the prefill's pages
    /// on the router's hint; both sides' KVCR counters show it (the CPU
    /// engine).
    KvcrRemote,
    /// vLLM's NixlConnector: the decode reads the prefill's KV blocks with
    /// NIXL and counts the reads in `vllm:nixl_*`; KVCR does not see them.
    NixlConnector,
}

/// A way to launch one kind of KVCR stack.
pub trait Engine: Send + Sync {
    /// Builds the engine from the run's settings (its own settings file:
    /// [`Setup::profile`]).
    fn build(setup: &Setup) -> Result<Self, String>
    where
        Self: Sized;
    /// Whether this engine gives `need` on `topology`, or why not: what
    /// decides which cases run where ([`Kind::applicability`] adds which
    /// case, engine and topology to the reason) and which of a case's
    /// optional checks are "not checked".
    fn supports(need: Need, topology: Topology) -> Support
    where
        Self: Sized;
    /// `cpu`, `vllm`, `sglang`: the engine's word in the registry.
    fn name(&self) -> &'static str;
    /// The model the KVCR workers serve.
    fn served(&self) -> &ServedModel;
    /// The served model name of the KVCR workers.
    fn model(&self) -> String {
        self.served().name.clone()
    }
    /// The served model name of a reference worker.
    fn reference_model(&self, variant: ReferenceVariant) -> String {
        format!("{}-{}", self.model(), variant.label())
    }
    fn geometry(&self) -> Geometry;
    /// Token ids prompts may use: the model's vocabulary without its special
    /// tokens.
    fn prompt_vocab(&self) -> std::ops::Range<u32> {
        self.served().prompt_vocab.clone()
    }
    /// The size of each pool of the engine's KVCR Guard service, in GB;
    /// `None` for an engine without the Guard (default).
    fn guard_pool_gb(&self) -> Option<f64> {
        None
    }
    /// Whether this engine runs the KVCR Guard service.
    fn has_guard(&self) -> bool {
        self.guard_pool_gb().is_some()
    }
    /// The Dynamo frontend with its KV router (the same for every engine).
    fn frontend(&self, ctx: &LaunchContext) -> ProcessSpec {
        dynamo::frontend(ctx)
    }
    /// The Guard service of `ctx`, one pool per page kind of the geometry.
    fn guard(&self, ctx: &LaunchContext) -> Option<ProcessSpec> {
        let pool_gb = self.guard_pool_gb()?;
        Some(dynamo::guard_service(ctx, &self.geometry(), pool_gb))
    }
    fn worker(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> ProcessSpec;
    /// `worker` (one of this engine's workers) with launch-time fault
    /// switches (the fault matrix's); an engine without any refuses them.
    fn with_faults(&self, worker: ProcessSpec, faults: &[&str]) -> Result<ProcessSpec, String> {
        if faults.is_empty() {
            Ok(worker)
        } else {
            Err(format!(
                "the {} engine has no launch-time fault switches (asked for {faults:?})",
                self.name()
            ))
        }
    }
    fn reference_worker(
        &self,
        ctx: &LaunchContext,
        variant: ReferenceVariant,
        slot: &WorkerSlot,
    ) -> ProcessSpec;
    /// A digest of everything that determines generated tokens (for the
    /// reference cache): model, geometry, engine knobs that matter.
    fn token_identity(&self) -> String;
    /// The hosts the engine's profile names for a multi-node topology;
    /// empty when the harness makes the extra nodes itself (namespace nodes
    /// on this host, see [`Topology::unavailable_here`]).
    fn hosts(&self) -> &[topology::Node] {
        &[]
    }
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
    /// The nice value each worker's and Guard service's process group gets
    /// once it is ready, so that a worker still starting gets the cores
    /// before ready components that keep polling (`None`: all run at the
    /// harness's priority). See [`READY_NICE`].
    fn ready_nice(&self) -> Option<i32> {
        None
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
    /// The longest prompt a worker takes, when the engine has a limit the
    /// harness knows (the CPU engine's: every full prompt block must fit in
    /// its device cache at once).
    fn max_prompt_tokens(&self) -> Option<usize> {
        None
    }
    /// Whether the engine counts its device-cache evictions and the prompt
    /// blocks it computes (the CPU engine does). vLLM counts neither: the
    /// harness derives both from its prefix-cache counters.
    fn counts_blocks(&self) -> bool {
        false
    }

    /// Whether each KVCR worker's `/metrics` reports KVCR's state gauges
    /// (`kvcr_state`) as they are now, so the suite can check after a case
    /// that KVCR holds nothing back (the CPU engine does; vLLM logs them per
    /// interval only).
    fn reports_kvcr_state(&self) -> bool {
        false
    }

    /// Whether an aggregated worker deposits the blocks it computes into
    /// its KVCR pool, so that its readiness can wait for one. The CPU
    /// engine with `framework_regions` keeps them in its own memory.
    fn deposits_computed_blocks(&self) -> bool {
        true
    }

    /// The Guard service's `--heartbeat-timeout-ms`, when the stack sets it
    /// (TC-10's promotion deadline; TC-11 must stop a source for less).
    fn guard_heartbeat_timeout_ms(&self) -> Option<u64> {
        None
    }

    /// KVCR's `operation_timeout_ms` in the workers, when the stack sets it
    /// (the source-stall latch's threshold, TC-11).
    fn kvcr_operation_timeout_ms(&self) -> Option<u64> {
        None
    }

    /// Whether the worker's log carries KVCR's startup stages
    /// (`progress_startup_stage`, kvcr.progress at DEBUG), from which the
    /// pool's registration with NIXL is read (the CPU engine's does).
    fn logs_kvcr_startup_stages(&self) -> bool {
        false
    }

    /// Whether KVCR runs in a child process of the worker's process (vLLM's
    /// EngineCore): a stop of the worker must stop its whole process group,
    /// and a Guard's heartbeat fence SIGKILLs that child, not the worker's
    /// own pid.
    fn kvcr_in_child_process(&self) -> bool {
        false
    }

    /// The pinned Python env the harness builds for this engine, or `None`
    /// when the user brings the interpreter (`--python`, e.g. a GPU image).
    fn python_env(&self) -> Option<&'static crate::pyenv::EnvSpec> {
        Some(&crate::pyenv::CPU_STACK)
    }
    /// The prompt tokens a repeat of a `prompt_tokens`-token prompt reports
    /// cached (`cached_tokens`) once the whole prompt was computed before:
    /// by default (the CPU engine) every full block of it.
    fn cached_tokens_of_repeat(&self, prompt_tokens: u64) -> u64 {
        self.geometry().full_blocks(prompt_tokens) * u64::from(self.geometry().block_size_tokens)
    }
    /// How the decode worker of a disaggregated stack gets the KV its
    /// prefill computed, and so where a case reads that transfer.
    fn prefill_to_decode(&self) -> PrefillToDecode {
        PrefillToDecode::KvcrRemote
    }
}

/// The model an engine's KVCR workers serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedModel {
    /// `--served-model-name`.
    pub name: String,
    /// Token ids prompts may use: the vocabulary without special tokens.
    pub prompt_vocab: std::ops::Range<u32>,
}

impl ServedModel {
    /// As a Dynamo engine's profile writes it: `served_model_name`, else
    /// the model id; `prompt_tokens = [first, end]`.
    pub fn from_profile(
        model: &str,
        served_model_name: Option<&str>,
        prompt_tokens: [u32; 2],
    ) -> Self {
        Self {
            name: served_model_name.unwrap_or(model).to_string(),
            prompt_vocab: prompt_tokens[0]..prompt_tokens[1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_plans_from_the_shipped_profiles() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let cpu = cpu::CpuEngineProfile::shipped();
        for (engine, topology, workers) in [
            (Kind::Cpu, Topology::Agg, 2),
            (Kind::Cpu, Topology::TwoP1D, 3),
            (Kind::Cpu, Topology::TwoNode, 2),
            (Kind::Vllm, Topology::Agg, 2),
            (Kind::Vllm, Topology::TwoP1D, 3),
            (Kind::Sglang, Topology::Agg, 2),
        ] {
            let setup = Setup::new(topology, GeometryKind::Dense, &cpu, None, root);
            let e = engine
                .build(&setup)
                .unwrap_or_else(|e| panic!("{engine}/{topology}: {e}"));
            assert_eq!(e.name(), engine.as_str());
            assert_eq!(e.worker_plans().len(), workers, "{engine}/{topology}");
            // The Guard it plans is the Guard it says it gives the cases.
            assert_eq!(
                e.has_guard(),
                engine.supports(Need::Guard, topology).is_yes(),
                "{engine}/{topology}"
            );
        }
    }

    /// A repeat of a computed prompt: the CPU engine reports every full
    /// block cached, vLLM every full block short of the last token; only
    /// vLLM's comparison of its log line with /metrics is between two
    /// independent sources.
    #[test]
    fn what_a_repeat_caches_and_which_sources_are_independent() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let cpu = cpu::CpuEngineProfile::shipped();
        let setup = Setup::new(Topology::Agg, GeometryKind::Dense, &cpu, None, root);
        let (c, v) = (
            Kind::Cpu.build(&setup).unwrap(),
            Kind::Vllm.build(&setup).unwrap(),
        );
        let (cb, vb) = (
            u64::from(c.geometry().block_size_tokens),
            u64::from(v.geometry().block_size_tokens),
        );
        assert_eq!(c.cached_tokens_of_repeat(4 * cb + 8), 4 * cb);
        assert_eq!(c.cached_tokens_of_repeat(4 * cb), 4 * cb);
        assert_eq!(v.cached_tokens_of_repeat(4 * vb + 8), 4 * vb);
        assert_eq!(v.cached_tokens_of_repeat(4 * vb), 3 * vb);
        let independent = |k: Kind| k.supports(Need::IndependentIntervalLog, Topology::Agg);
        assert_eq!(
            independent(Kind::Cpu),
            Support::no("the cpu engine writes both from one; checked as its consistency")
        );
        assert_eq!(independent(Kind::Vllm), Support::Yes);
    }

    #[test]
    fn a_missing_engine_profile_is_a_clear_error() {
        let cpu = cpu::CpuEngineProfile::shipped();
        let missing = Path::new("/nonexistent/vllm.toml");
        let setup = Setup::new(
            Topology::Agg,
            GeometryKind::Dense,
            &cpu,
            Some(missing),
            Path::new("."),
        );
        let err = Kind::Vllm.build(&setup).err().unwrap_or_default();
        assert!(
            err.contains("engine profile /nonexistent/vllm.toml"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_engine_lists_the_registry() {
        assert_eq!(
            "tiny".parse::<Kind>().err().as_deref(),
            Some("unknown engine `tiny`: expected one of cpu, vllm, sglang")
        );
    }
}
