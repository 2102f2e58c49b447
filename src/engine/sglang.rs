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
//!
//! Released SGLang (0.5.23) has no `kvcr` backend: [`preflight`] asks the
//! interpreter for its `--hicache-storage-backend` choices before anything
//! starts, and names the PR and its tested versions when `kvcr` is missing.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::proc::ProcessSpec;

use super::applicability;
use super::needs::{self, Need, Support};
use super::topology;
use super::topology::{plan_workers, Node, Topology, WorkerPlan};
use super::{
    dynamo, Engine, Geometry, LaunchContext, ReferenceVariant, ServedModel, Setup, WorkerSlot,
};

/// Why TC-04, TC-06 and the 2p1d topology do not run on SGLang.
const NO_GUARD_NO_DISAGGREGATION: &str = "SGLang has no Guard and no disaggregation in KVCR 0.1.1";

/// Why the production-conditions cases do not run on SGLang.
const NEEDS_CPU_KVCR_REPORTS: &str = "needs the CPU engine's KVCR reports (per-block deposit outcomes, KVCR inventory events, deliveries by source, /kvcr/holding, the stall latch), which this engine does not expose";

/// Why TC-03 does not run on SGLang (yet).
pub const NO_ROUTER_HINT: &str =
    "no router_hint in Dynamo 1.6.1's SGLang worker (dynamo.sglang publishes no router_hint capability, so no hinted peer transfer can happen)";

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
    /// HiCache's prefetch budget base in seconds (extra-config key). The
    /// PR's README sets 15.0: with SGLang's default (1.0 + 0.25 s per 1024
    /// tokens) a hinted remote fetch that completes is discarded and
    /// `cached_tokens` stays 0.
    pub prefetch_timeout_base: f64,
    /// `--random-seed`.
    pub seed: u64,
    /// The exact source revisions of the stack (part of the reference cache key).
    pub pins: SglangPins,
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
            prefetch_timeout_base: 15.0,
            seed: 0,
            pins: SglangPins::default(),
            nodes: Vec::new(),
            prompt_tokens: [0, 151_643],
        }
    }
}

/// The revisions the SGLang lane runs, by exact commit: the KVCR backend is
/// unreleased and KVCR's version number does not track its API (the PR's
/// README: "Pin the repo commit, not the version").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SglangPins {
    /// sgl-project/sglang at PR #36409 (the `kvcr` HiCache backend).
    pub sglang_commit: String,
    /// The KVCR commit the PR was tested with (`nvidia-kvcr` 0.1.0).
    pub kvcr_commit: String,
    /// NIXL as KVCR pins it for that commit.
    pub nixl_version: String,
    /// ai-dynamo/dynamo: the revision whose `dynamo.sglang` runs the workers.
    pub dynamo: String,
}

impl Default for SglangPins {
    fn default() -> Self {
        Self {
            sglang_commit: "0c1527e4337aed05fc62513b9b49c908a67bee3b".into(),
            kvcr_commit: "873391ce97609c1caf8c785eebb78f7dfa58367d".into(),
            nixl_version: "1.3.1".into(),
            dynamo: "1.6.1".into(),
        }
    }
}

impl SglangPins {
    /// `sglang@<commit> kvcr@<commit> nixl==<v> dynamo@<rev>`.
    pub fn describe(&self) -> String {
        format!(
            "sglang@{} kvcr@{} nixl=={} dynamo@{}",
            self.sglang_commit, self.kvcr_commit, self.nixl_version, self.dynamo
        )
    }

    /// Commits are full 40-hex revisions, never branches or short hashes.
    pub fn check(&self) -> Result<(), String> {
        for (key, value) in [
            ("sglang_commit", &self.sglang_commit),
            ("kvcr_commit", &self.kvcr_commit),
        ] {
            if value.len() != 40 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "engine sglang: pins.{key} must be a full 40-hex commit, got `{value}`"
                ));
            }
        }
        Ok(())
    }
}

/// The upstream facts the preflight message names.
pub const KVCR_BACKEND_PR: &str = "https://github.com/sgl-project/sglang/pull/36409";

/// Asks `python` which `--hicache-storage-backend` choices its SGLang has;
/// prints `VERSION <v>` and `CHOICES <a> <b> ...`, or `IMPORT-ERROR <text>`.
const CHOICES_PROBE: &str = r#"
import argparse, sys
try:
    import sglang
    from sglang.srt.server_args import ServerArgs
except Exception as e:
    print("IMPORT-ERROR", repr(e)); sys.exit(0)
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
print("VERSION", getattr(sglang, "__version__", "unknown"))
for action in parser._actions:
    if "--hicache-storage-backend" in action.option_strings:
        print("CHOICES", " ".join(action.choices or []))
"#;

/// Before any process starts: the interpreter's SGLang must offer `kvcr`
/// among its `--hicache-storage-backend` choices.
pub fn preflight(python: &std::path::Path, pins: &SglangPins) -> Result<(), String> {
    let out = std::process::Command::new(python)
        .args(["-c", CHOICES_PROBE])
        .output()
        .map_err(|e| {
            format!(
                "engine sglang preflight: cannot run {}: {e}",
                python.display()
            )
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
    };
    let needs = format!(
        "The `kvcr` HiCache backend is SGLang PR #36409 ({KVCR_BACKEND_PR}), in no SGLang release yet (0.5.23 has none; ai-dynamo[sglang]==1.6.1 pins 0.5.21). Install SGLang at commit {}. The PR was tested with KVCR 0.1.0 (commit {}) and NIXL {}; other versions fail at store construction.",
        pins.sglang_commit, pins.kvcr_commit, pins.nixl_version
    );
    if let Some(error) = line("IMPORT-ERROR") {
        return Err(format!(
            "engine sglang preflight: {} cannot import SGLang ({error}). {needs}",
            python.display()
        ));
    }
    let version = line("VERSION");
    match (version, line("CHOICES")) {
        (Some(_), Some(choices)) if choices.split_whitespace().any(|c| c == "kvcr") => Ok(()),
        (Some(version), Some(choices)) => Err(format!(
            "engine sglang preflight: the SGLang {version} of {} offers no `kvcr` HiCache storage backend (--hicache-storage-backend choices: {}). {needs}",
            python.display(),
            if choices.is_empty() { "none listed" } else { &choices }
        )),
        _ => Err(format!(
            "engine sglang preflight: could not read SGLang's --hicache-storage-backend choices from {} (exit {}; stdout: {}; stderr: {}). {needs}",
            python.display(),
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// `python -m dynamo.sglang` workers for one topology (agg or two-node).
#[derive(Debug, Clone)]
pub struct SglangEngine {
    pub profile: SglangProfile,
    pub topology: Topology,
    plans: Vec<WorkerPlan>,
    served: ServedModel,
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
        profile.pins.check()?;
        let plans = plan_workers(topology, &profile.gpu_ids, profile.gpus_per_worker)?;
        topology.check_nodes(&profile.nodes)?;
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

    fn plan_for(&self, slot: &WorkerSlot) -> WorkerPlan {
        topology::plan_for(&self.plans, slot, &self.profile.gpu_ids)
    }

    /// A reference worker takes the GPUs of one stack worker: the cached one
    /// A's, the uncached one B's. They run alone, before the stack
    /// (`engine::placement` checks that no GPU is shared beyond its memory).
    fn reference_plan(&self, variant: ReferenceVariant, slot: &WorkerSlot) -> WorkerPlan {
        let index = match variant {
            ReferenceVariant::Cached => 0,
            ReferenceVariant::Uncached => 1,
        };
        match self.plans.get(index % self.plans.len().max(1)) {
            Some(plan) => WorkerPlan {
                slot: slot.name.clone(),
                ..plan.clone()
            },
            None => self.plan_for(slot),
        }
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
        dynamo::gpu_worker_env(dynamo::apply_env(spec, ctx), &node, plan, slot)
    }

    /// `--hicache-storage-backend-extra-config` of the KVCR backend.
    fn kvcr_extra_config(&self, node: &Node, slot: &WorkerSlot) -> Value {
        let p = &self.profile;
        json!({
            "control_host": self.topology.bind_host(node),
            "control_port": slot.control_port,
            "control_advertise_host": node.address,
            "enable_remote_hint": true,
            "enable_telemetry": true,
            "operation_timeout_ms": p.operation_timeout_ms,
            "get_timeout_s": p.get_timeout_s,
            "local_dram_bytes": p.local_dram_bytes,
            "policy": "lru",
            "prefetch_timeout_base": p.prefetch_timeout_base,
        })
    }
}

/// Why TC-05's TTFT accuracy finds no per-request first-token instant
/// on SGLang ([`Need::FirstTokenStamps`]).
const NO_FIRST_TOKEN_STAMP: &str =
    "SGLang records TTFT only as its Prometheus histogram sglang:time_to_first_token_seconds \
     (bucketed, all requests together, from its own arrival); dynamo.sglang logs no \
     per-request first-token time";

impl Engine for SglangEngine {
    fn build(setup: &Setup) -> Result<Self, String> {
        SglangEngine::new(setup.profile()?, setup.topology)
    }

    /// No Guard, no disaggregation, no router hints in Dynamo 1.6.1's
    /// SGLang worker, none of KVCR's per-block reports.
    fn supports(need: Need, topology: Topology) -> Support {
        match need {
            Need::ProductionConditions
            | Need::PoolEvictionReports
            | Need::DiskTierReports
            | Need::DepositReports
            | Need::EngineMemoryReports => Support::no(NEEDS_CPU_KVCR_REPORTS),
            _ if topology == Topology::TwoP1D => Support::no(NO_GUARD_NO_DISAGGREGATION),
            Need::FirstTokenStamps => Support::no(NO_FIRST_TOKEN_STAMP),
            Need::NodeLink => needs::node_link(topology),
            Need::ThirdAggregatedWorker => needs::without(need, "sglang"),
            Need::Topology => Support::Yes,
            Need::Guard => Support::no(NO_GUARD_NO_DISAGGREGATION),
            Need::RouterHints => Support::no(NO_ROUTER_HINT),
            Need::PerformanceArms => {
                Support::given(topology == Topology::Agg, applicability::PERFORMANCE_ON_AGG)
            }
            Need::FaultSwitches
            | Need::PagesPerKind
            | Need::ExactHintMembership
            | Need::BlockLedger
            | Need::RelayedKvcrEvents
            | Need::IndependentIntervalLog
            | Need::DeliverBench => needs::without(need, "sglang"),
        }
    }

    fn hosts(&self) -> &[Node] {
        &self.profile.nodes
    }

    fn name(&self) -> &'static str {
        "sglang"
    }

    fn served(&self) -> &ServedModel {
        &self.served
    }

    fn geometry(&self) -> Geometry {
        Geometry::dense(self.profile.page_size, self.profile.block_bytes)
    }

    fn device_cache_blocks(&self) -> u64 {
        u64::MAX
    }

    fn python_env(&self) -> Option<&'static crate::pyenv::EnvSpec> {
        None
    }

    fn worker(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> ProcessSpec {
        let plan = self.plan_for(slot);
        let node = self.node_of(ctx, &plan);
        let spec = self
            .base_worker(ctx, &slot.process_name(), &self.model(), &plan, slot)
            .arg("--kv-events-config")
            .arg(dynamo::kv_events_config(slot.kv_events_port).to_string())
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
        let plan = self.reference_plan(variant, slot);
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
                .arg(dynamo::kv_events_config(slot.kv_events_port).to_string()),
            ReferenceVariant::Uncached => spec.arg("--disable-radix-cache"),
        };
        node.wrap(spec)
    }

    /// No `--hicache-storage-backend kvcr`: SGLang never loads KVCR.
    fn reference_imports_kvcr(&self) -> bool {
        false
    }

    fn token_identity(&self) -> String {
        let p = &self.profile;
        format!(
            "sglang model={} ({}) page={} block_bytes={} context={} tp={} seed={} deterministic {}",
            p.model,
            super::model_files::digest(&p.model),
            p.page_size,
            p.block_bytes,
            p.context_length,
            p.gpus_per_worker,
            p.seed,
            p.pins.describe()
        )
    }

    fn worker_plans(&self) -> Vec<WorkerPlan> {
        self.plans.clone()
    }

    fn preflight(&self, python: &std::path::Path) -> Result<(), String> {
        preflight(python, &self.profile.pins)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{example_context, example_slot, stack_plan, two_nodes};
    use super::*;

    /// No Guard, no disaggregation, no router hints, none of the CPU
    /// engine's reports; the performance arms on agg only.
    #[test]
    fn what_sglang_supports() {
        let s = SglangEngine::supports;
        assert_eq!(s(Need::Topology, Topology::Agg), Support::Yes);
        assert_eq!(s(Need::Topology, Topology::TwoNode), Support::Yes);
        assert_eq!(s(Need::PerformanceArms, Topology::Agg), Support::Yes);
        for t in Topology::ALL {
            assert_eq!(
                s(Need::ProductionConditions, t),
                Support::no(NEEDS_CPU_KVCR_REPORTS),
                "{t}"
            );
            assert_eq!(
                s(Need::Guard, t),
                Support::no(NO_GUARD_NO_DISAGGREGATION),
                "{t}"
            );
        }
        assert_eq!(
            s(Need::Topology, Topology::TwoP1D),
            Support::no(NO_GUARD_NO_DISAGGREGATION)
        );
        assert_eq!(
            s(Need::RouterHints, Topology::Agg),
            Support::no(NO_ROUTER_HINT)
        );
        assert_eq!(
            s(Need::PerformanceArms, Topology::TwoNode),
            Support::no(applicability::PERFORMANCE_ON_AGG)
        );
        assert!(!s(Need::FaultSwitches, Topology::Agg).is_yes());
        assert!(!s(Need::DeliverBench, Topology::Agg).is_yes());
        assert_eq!(
            s(Need::FirstTokenStamps, Topology::Agg),
            Support::no(NO_FIRST_TOKEN_STAMP)
        );
        // The Guard it lacks is the one its plan has none of.
        assert!(!engine(Topology::Agg).has_guard());
    }

    fn engine(topology: Topology) -> SglangEngine {
        let mut profile = SglangProfile::default();
        if topology == Topology::TwoNode {
            profile.nodes = two_nodes();
        }
        SglangEngine::new(profile, topology).expect("the default profile fits agg and two-node")
    }

    fn extra_config(spec: &ProcessSpec) -> Value {
        let text = spec
            .flag_value("--hicache-storage-backend-extra-config")
            .unwrap_or_default();
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    /// An interpreter that answers the choices probe with `reply`.
    fn stub_python(dir: &std::path::Path, reply: &str) -> std::path::PathBuf {
        let path = dir.join("python");
        std::fs::write(&path, format!("#!/bin/sh\nprintf '{reply}'\n")).expect("write stub");
        let status = std::process::Command::new("chmod")
            .args(["+x", &path.display().to_string()])
            .status()
            .expect("chmod runs");
        assert!(status.success());
        path
    }

    #[test]
    fn preflight_without_the_kvcr_backend_names_the_pr_and_tested_versions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let python = stub_python(
            dir.path(),
            "VERSION 0.5.23\\nCHOICES file mooncake hf3fs nixl aibrix dynamic eic\\n",
        );
        let e = engine(Topology::Agg);
        let err = Engine::preflight(&e, &python).expect_err("0.5.23 has no kvcr");
        for needle in [
            "the SGLang 0.5.23 of",
            "offers no `kvcr` HiCache storage backend (--hicache-storage-backend choices: file mooncake hf3fs nixl aibrix dynamic eic)",
            "SGLang PR #36409 (https://github.com/sgl-project/sglang/pull/36409)",
            "Install SGLang at commit 0c1527e4337aed05fc62513b9b49c908a67bee3b",
            "tested with KVCR 0.1.0 (commit 873391ce97609c1caf8c785eebb78f7dfa58367d) and NIXL 1.3.1",
            "fail at store construction",
        ] {
            assert!(err.contains(needle), "missing `{needle}` in: {err}");
        }
    }

    #[test]
    fn preflight_passes_when_kvcr_is_a_choice() {
        let dir = tempfile::tempdir().expect("temp dir");
        let python = stub_python(
            dir.path(),
            "VERSION 0.5.24.dev0\\nCHOICES file kvcr nixl\\n",
        );
        assert_eq!(Engine::preflight(&engine(Topology::Agg), &python), Ok(()));
    }

    #[test]
    fn preflight_without_sglang_says_so() {
        let dir = tempfile::tempdir().expect("temp dir");
        let python = stub_python(
            dir.path(),
            "IMPORT-ERROR ModuleNotFoundError(\\\"No module named sglang\\\")\\n",
        );
        let err = Engine::preflight(&engine(Topology::Agg), &python).expect_err("no sglang");
        assert!(
            err.contains("cannot import SGLang")
                && err.contains("No module named sglang")
                && err.contains("#36409"),
            "{err}"
        );
        let err = preflight(
            std::path::Path::new("/nonexistent/python3"),
            &SglangPins::default(),
        )
        .expect_err("no interpreter");
        assert!(err.contains("cannot run /nonexistent/python3"), "{err}");
    }

    #[test]
    fn the_plan_carries_the_prs_settings_and_exact_pins() {
        let ctx = example_context();
        let spec = engine(Topology::Agg).worker(&ctx, &example_slot("A", 0));
        assert_eq!(extra_config(&spec)["prefetch_timeout_base"], 15.0);
        let shipped: SglangProfile = toml::from_str(
            &std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("fixtures/engines/sglang.toml"),
            )
            .expect("shipped profile"),
        )
        .expect("shipped profile parses");
        assert_eq!(
            shipped,
            SglangProfile::default(),
            "fixtures/engines/sglang.toml = the defaults"
        );
        let short = SglangProfile {
            pins: SglangPins {
                sglang_commit: "0c1527e".into(),
                ..SglangPins::default()
            },
            ..SglangProfile::default()
        };
        let err = SglangEngine::new(short, Topology::Agg).expect_err("a short hash is no pin");
        assert!(
            err.contains("pins.sglang_commit must be a full 40-hex commit"),
            "{err}"
        );
        assert!(engine(Topology::Agg)
            .token_identity()
            .contains("sglang@0c1527e4337aed05fc62513b9b49c908a67bee3b"));
    }

    #[test]
    fn reference_workers_take_the_gpus_of_a_and_b() {
        let ctx = example_context();
        let e = engine(Topology::Agg);
        let gpu = |v| {
            e.reference_worker(&ctx, v, &example_slot("A", 0))
                .env
                .iter()
                .find(|(k, _)| k == "CUDA_VISIBLE_DEVICES")
                .map(|(_, v)| v.clone())
        };
        assert_eq!(gpu(ReferenceVariant::Cached).as_deref(), Some("0"));
        assert_eq!(gpu(ReferenceVariant::Uncached).as_deref(), Some("1"));
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
        assert_eq!(spec.flag_value("--hicache-storage-backend"), Some("kvcr"));
        assert!(spec.args.iter().any(|a| a == "--enable-hierarchical-cache"));
        assert!(spec
            .args
            .iter()
            .any(|a| a == "--enable-deterministic-inference"));
        assert_eq!(spec.flag_value("--random-seed"), Some("0"));
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
            insta::assert_json_snapshot!(format!("sglang-{topology}"), stack_plan(&e, &ctx));
        }
    }
}
