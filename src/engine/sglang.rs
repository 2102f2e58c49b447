//! The SGLang engine: `python -m dynamo.sglang` workers with KVCR as the
//! HiCache L3 storage backend (`--hicache-storage-backend kvcr`), behind
//! Dynamo's KV router. No Guard service and no disaggregation: TC-04, TC-06
//! and the 2p1d topology do not apply (test-plan.md).
//!
//! The backend is SGLang's `mem_cache/storage/kvcr` (sgl-project/sglang
//! PR #36409); its extra-config keys are those of `KVCRBackendConfig`
//! (`kvcr_config.py`). Router hints reach it only with a Dynamo that
//! publishes SGLang's `router_hint` capability (ai-dynamo/dynamo PR #13591);
//! without one the backend serves as a local-only L3 tier.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::proc::ProcessSpec;

use super::topology;
use super::topology::{plan_workers, Node, Topology, WorkerPlan};
use super::vllm::{bind_host, check_nodes, dense_geometry, gpu_worker_env, kv_events_config};
use super::{dynamo, Engine, Geometry, LaunchContext, ReferenceVariant, WorkerSlot};

/// Model and GPU settings of an SGLang stack (a profile file's `[sglang]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SglangProfile {
    /// Hugging Face id or local path (`--model-path`).
    pub model: String,
    pub served_model_name: Option<String>,
    /// `--tp-size` of every worker.
    pub gpus_per_worker: u32,
    pub gpu_ids: Vec<u32>,
    /// `--context-length`.
    pub context_length: u32,
    /// `--mem-fraction-static`.
    pub mem_fraction_static: f64,
    /// Tokens per page (`--page-size`), the router's block size.
    pub page_size: u32,
    /// Bytes of one page's KV across all layers.
    pub block_bytes: u64,
    /// `--hicache-ratio`: host pool size relative to the device pool.
    pub hicache_ratio: f64,
    /// KVCR's own DRAM tier per worker (`local_dram_bytes`).
    pub local_dram_bytes: u64,
    pub operation_timeout_ms: u32,
    /// Must exceed `operation_timeout_ms` (KVCRBackendConfig refuses otherwise).
    pub get_timeout_s: f64,
    /// `--random-seed`.
    pub seed: u64,
    pub engine_version: String,
    /// Token ids prompts may use, `[first, end)`: the model's ordinary
    /// vocabulary (Qwen3: 0..151643; special tokens follow).
    pub prompt_tokens: [u32; 2],
    pub nodes: Vec<Node>,
}

impl Default for SglangProfile {
    fn default() -> Self {
        Self {
            model: "Qwen/Qwen3-0.6B".into(),
            served_model_name: None,
            gpus_per_worker: 1,
            gpu_ids: vec![0, 1],
            context_length: 32000,
            mem_fraction_static: 0.8,
            page_size: 64,
            block_bytes: 7_340_032,
            hicache_ratio: 2.0,
            local_dram_bytes: 2_000_000_000,
            operation_timeout_ms: 20000,
            get_timeout_s: 30.0,
            seed: 0,
            engine_version: "sglang@pr36409 dynamo@pr13591 kvcr==0.1.1".into(),
            nodes: Vec::new(),
            prompt_tokens: [0, 151_643],
        }
    }
}

/// `python -m dynamo.sglang` workers for one topology (agg or two-node).
#[derive(Debug, Clone)]
pub struct SglangEngine {
    pub profile: SglangProfile,
    pub topology: Topology,
    plans: Vec<WorkerPlan>,
}

impl SglangEngine {
    /// Refuses 2p1d (no disaggregation with the KVCR backend) and profiles
    /// whose GPUs or nodes do not fit the topology.
    pub fn new(profile: SglangProfile, topology: Topology) -> Result<Self, String> {
        if topology == Topology::TwoP1D {
            return Err("engine sglang: topology 2p1d does not apply (KVCR's SGLang backend has no disaggregation); use agg or two-node".into());
        }
        if profile.get_timeout_s * 1000.0 <= f64::from(profile.operation_timeout_ms) {
            return Err(format!(
                "engine sglang: get_timeout_s ({}) must exceed operation_timeout_ms ({}) or the KVCR backend refuses to start",
                profile.get_timeout_s, profile.operation_timeout_ms
            ));
        }
        let plans = plan_workers(topology, &profile.gpu_ids, profile.gpus_per_worker)?;
        check_nodes(topology, &profile.nodes)?;
        Ok(Self {
            profile,
            topology,
            plans,
        })
    }

    fn plan_for(&self, slot: &WorkerSlot) -> WorkerPlan {
        topology::plan_for(&self.plans, slot, &self.profile.gpu_ids)
    }

    fn node_of(&self, ctx: &LaunchContext, plan: &WorkerPlan) -> Node {
        topology::node_of(&self.profile.nodes, ctx, plan)
    }

    fn base_worker(
        &self,
        ctx: &LaunchContext,
        log_name: &str,
        served: &str,
        plan: &WorkerPlan,
        slot: &WorkerSlot,
    ) -> ProcessSpec {
        let p = &self.profile;
        let spec = ProcessSpec::new(
            log_name,
            &ctx.python,
            ctx.logs_dir.join(format!("{log_name}.log")),
        )
        .args([
            "-m",
            "dynamo.sglang",
            "--model-path",
            &p.model,
            "--served-model-name",
            served,
        ])
        .args(["--tp-size", &p.gpus_per_worker.to_string()])
        .args(["--page-size", &p.page_size.to_string()])
        .args(["--context-length", &p.context_length.to_string()])
        .args([
            "--mem-fraction-static",
            &format!("{}", p.mem_fraction_static),
        ])
        .args([
            "--enable-deterministic-inference",
            "--random-seed",
            &p.seed.to_string(),
        ])
        .cwd(&ctx.repo_root);
        let node = self.node_of(ctx, plan);
        gpu_worker_env(dynamo::apply_env(spec, ctx), &node, plan, slot)
    }

    /// `--hicache-storage-backend-extra-config` of the KVCR backend.
    fn kvcr_extra_config(&self, node: &Node, slot: &WorkerSlot) -> Value {
        let p = &self.profile;
        json!({
            "control_host": bind_host(self.topology, node),
            "control_port": slot.control_port,
            "control_advertise_host": node.address,
            "enable_remote_hint": true,
            "enable_telemetry": true,
            "operation_timeout_ms": p.operation_timeout_ms,
            "get_timeout_s": p.get_timeout_s,
            "local_dram_bytes": p.local_dram_bytes,
            "policy": "lru",
        })
    }
}

impl Engine for SglangEngine {
    fn name(&self) -> &'static str {
        "sglang"
    }

    fn model(&self) -> String {
        self.profile
            .served_model_name
            .clone()
            .unwrap_or_else(|| self.profile.model.clone())
    }

    fn geometry(&self) -> Geometry {
        dense_geometry(self.profile.page_size, self.profile.block_bytes)
    }

    fn prompt_vocab(&self) -> std::ops::Range<u32> {
        self.profile.prompt_tokens[0]..self.profile.prompt_tokens[1]
    }

    fn has_guard(&self) -> bool {
        false
    }

    fn device_cache_blocks(&self) -> u64 {
        u64::MAX
    }

    fn python_env(&self) -> Option<&'static crate::pyenv::EnvSpec> {
        None
    }

    fn guard(&self, _ctx: &LaunchContext) -> Option<ProcessSpec> {
        None
    }

    fn worker(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> ProcessSpec {
        let plan = self.plan_for(slot);
        let node = self.node_of(ctx, &plan);
        let spec = self
            .base_worker(ctx, &slot.process_name(), &self.model(), &plan, slot)
            .arg("--kv-events-config")
            .arg(kv_events_config(slot.kv_events_port).to_string())
            .args([
                "--enable-hierarchical-cache",
                "--hicache-ratio",
                &format!("{}", self.profile.hicache_ratio),
            ])
            .args([
                "--hicache-write-policy",
                "write_through",
                "--hicache-storage-backend",
                "kvcr",
            ])
            .arg("--hicache-storage-backend-extra-config")
            .arg(self.kvcr_extra_config(&node, slot).to_string());
        node.wrap(spec)
    }

    fn reference_worker(
        &self,
        ctx: &LaunchContext,
        variant: ReferenceVariant,
        slot: &WorkerSlot,
    ) -> ProcessSpec {
        let plan = self.plan_for(slot);
        let node = self.node_of(ctx, &plan);
        let spec = self.base_worker(
            ctx,
            variant.label(),
            &self.reference_model(variant),
            &plan,
            slot,
        );
        let spec = match variant {
            ReferenceVariant::Cached => spec
                .arg("--kv-events-config")
                .arg(kv_events_config(slot.kv_events_port).to_string()),
            ReferenceVariant::Uncached => spec.arg("--disable-radix-cache"),
        };
        node.wrap(spec)
    }

    fn token_identity(&self) -> String {
        let p = &self.profile;
        format!(
            "sglang model={} page={} block_bytes={} context={} tp={} seed={} deterministic version={}",
            p.model, p.page_size, p.block_bytes, p.context_length, p.gpus_per_worker, p.seed, p.engine_version
        )
    }

    fn worker_plans(&self) -> Vec<WorkerPlan> {
        self.plans.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::super::vllm::{example_context, example_slot, flag_value};
    use super::*;

    fn engine(topology: Topology) -> SglangEngine {
        let mut profile = SglangProfile::default();
        if topology == Topology::TwoNode {
            profile.nodes = vec![
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
            ];
        }
        SglangEngine::new(profile, topology).expect("the default profile fits agg and two-node")
    }

    fn extra_config(spec: &ProcessSpec) -> Value {
        let text = flag_value(spec, "--hicache-storage-backend-extra-config").unwrap_or_default();
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    #[test]
    fn sglang_has_no_guard() {
        let e = engine(Topology::Agg);
        let ctx = example_context();
        assert!(!e.has_guard());
        assert!(e.guard(&ctx).is_none());
        assert!(e.guards(&ctx).is_empty());
        for plan in e.worker_plans() {
            let line = e.worker(&ctx, &example_slot(&plan.slot, 0)).command_line();
            assert!(
                !line.contains("guard") && !line.contains(&ctx.guard_socket.display().to_string()),
                "{line}"
            );
        }
    }

    #[test]
    fn worker_uses_kvcr_as_hicache_backend_on_the_slot_port() {
        let ctx = example_context();
        let slot = example_slot("B", 0);
        let spec = engine(Topology::Agg).worker(&ctx, &slot);
        assert_eq!(flag_value(&spec, "--hicache-storage-backend"), Some("kvcr"));
        assert!(spec.args.iter().any(|a| a == "--enable-hierarchical-cache"));
        assert!(spec
            .args
            .iter()
            .any(|a| a == "--enable-deterministic-inference"));
        assert_eq!(flag_value(&spec, "--random-seed"), Some("0"));
        let config = extra_config(&spec);
        assert_eq!(config["control_port"], slot.control_port);
        assert_eq!(config["control_advertise_host"], "127.0.0.1");
        assert_eq!(config["enable_remote_hint"], true);
        let op = config["operation_timeout_ms"].as_f64().unwrap_or(f64::MAX);
        assert!(config["get_timeout_s"].as_f64().unwrap_or(0.0) * 1000.0 > op);
    }

    #[test]
    fn reference_workers_have_no_kvcr() {
        let ctx = example_context();
        let e = engine(Topology::Agg);
        for variant in [ReferenceVariant::Cached, ReferenceVariant::Uncached] {
            let line = e
                .reference_worker(&ctx, variant, &example_slot("A", 0))
                .command_line();
            assert!(
                !line.contains("hicache") && !line.contains("control_port"),
                "{line}"
            );
        }
        let uncached = e.reference_worker(&ctx, ReferenceVariant::Uncached, &example_slot("A", 0));
        assert!(uncached.args.iter().any(|a| a == "--disable-radix-cache"));
    }

    #[test]
    fn two_p_one_d_and_bad_timeouts_are_refused() {
        let err = SglangEngine::new(SglangProfile::default(), Topology::TwoP1D)
            .expect_err("no disaggregation");
        assert!(err.contains("2p1d"), "{err}");
        let profile = SglangProfile {
            get_timeout_s: 5.0,
            ..SglangProfile::default()
        };
        assert!(SglangEngine::new(profile, Topology::Agg).is_err());
    }

    #[test]
    fn two_node_advertises_the_node_address() {
        let ctx = LaunchContext {
            host: "10.0.0.1".into(),
            ..example_context()
        };
        let spec = engine(Topology::TwoNode).worker(&ctx, &example_slot("B", 0));
        let config = extra_config(&spec);
        assert_eq!(config["control_advertise_host"], "10.0.0.2");
        assert_eq!(config["control_host"], "0.0.0.0");
    }

    #[test]
    fn snapshot_plans() {
        for topology in [Topology::Agg, Topology::TwoNode] {
            let ctx = match topology {
                Topology::TwoNode => LaunchContext {
                    host: "10.0.0.1".into(),
                    ..example_context()
                },
                _ => example_context(),
            };
            let e = engine(topology);
            insta::assert_json_snapshot!(
                format!("sglang-{topology}"),
                super::super::vllm::tests::stack_plan(&e, &ctx)
            );
        }
    }
}
