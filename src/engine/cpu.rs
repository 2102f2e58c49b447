//! The default stack's engine: the project's CPU engine worker
//! (`fixtures/cpu-engine`, see docs/cpu-engine.md) with the real KVCR tier,
//! behind the real Dynamo frontend, beside the real Guard service.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::proc::ProcessSpec;

use super::applicability;
use super::needs::{self, Need, Support};
use super::topology::{self, Topology, WorkerPlan, WorkerRole};
use super::{
    dynamo, Engine, Geometry, GeometryKind, LaunchContext, ReferenceVariant, ServedModel, Setup,
    WorkerSlot,
};

const MODEL_DIR: &str = "fixtures/models/tiny";
const ENGINE_SOURCES: &str = "fixtures/cpu-engine/cpu_engine";

/// Ids below this are the tiny model's special tokens (bos, eos, pad).
const FIRST_ORDINARY_TOKEN: u32 = 3;
/// Used when config.json cannot be read; the engine then rejects nothing
/// below it either.
const FALLBACK_VOCAB: u32 = 256;

const SSM_PART_LABELS: [&str; 3] = ["ssm:conv", "ssm:temporal", "ssm:x"];

/// The CPU engine's knobs (the harness profile's `[cpu_engine]`); each maps
/// onto a flag of `python -m cpu_engine` (see docs/cpu-engine.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuEngineProfile {
    /// `--block-size`: tokens per KV block.
    pub block_size: u32,
    /// `--attn-pages`: attention pages per block.
    pub attn_pages: u32,
    /// `--attn-page-bytes`.
    pub attn_page_bytes: u64,
    /// `--ssm-parts` (hybrid geometry only).
    pub ssm_parts: u32,
    /// `--ssm-part-bytes` (hybrid geometry only).
    pub ssm_part_bytes: u64,
    /// `--device-cache-blocks`: the device (HBM stand-in) prefix cache.
    pub device_cache_blocks: u32,
    /// `--host-tier-blocks`: the engine-owned host tier.
    pub host_tier_blocks: u32,
    /// `--prefill-us-per-token`.
    pub prefill_us_per_token: u64,
    /// `--decode-us-per-token`.
    pub decode_us_per_token: u64,
    /// `--local-pool-blocks`: in-process KVCR pool when no Guard is used.
    pub local_pool_blocks: u32,
    /// `--stats-interval-s`: KVCR stats interval.
    pub stats_interval_s: f64,
    /// Size of the Guard service's pool, in GB.
    pub guard_pool_gb: f64,
    /// Size of each Guard pool in blocks; overrides `guard_pool_gb`.
    #[serde(default)]
    pub guard_pool_blocks: Option<u32>,
    /// The Guard service's `--heartbeat-timeout-ms`; `None` = pidfd only.
    #[serde(default)]
    pub guard_heartbeat_timeout_ms: Option<u64>,
    /// `--operation-timeout-ms`: KVCR's operation timeout in the engine.
    #[serde(default)]
    pub operation_timeout_ms: Option<u64>,
    /// KVCR's disk tier per worker, in blocks; `None` = no G3.
    #[serde(default)]
    pub g3_capacity_blocks: Option<u32>,
    /// Where the workers' G3 files go; `None` = `<run dir>/g3`.
    #[serde(default)]
    pub g3_dir: Option<PathBuf>,
    /// `--hits-after-prefill`: blocks a prefill in flight computes are no
    /// device hits for other requests until it ends (as in vLLM), so
    /// concurrent requests for one new prefix each compute and deposit it.
    #[serde(default)]
    pub hits_after_prefill: bool,
    /// `--framework-regions`: computed blocks stay in the engine's own
    /// memory (no deposit), and a peer reads them through KVCR's framework
    /// pins, from the device cache first, as from a GPU engine (TC-18).
    #[serde(default)]
    pub framework_regions: bool,
    /// `--kvcr-fetch`: a hinted peer's (or the disk tier's) blocks are
    /// staged into KVCR's pool with `KVCR.fetch`, then delivered from it.
    #[serde(default)]
    pub kvcr_fetch: bool,
    /// `--align-sequence`: each request's block sequence is told to KVCR.
    #[serde(default)]
    pub align_sequence: bool,
    /// `--abort-cancelled`: a cancelled request's KVCR operation is aborted.
    #[serde(default)]
    pub abort_cancelled: bool,
    /// `--kvcr-diagnostics`: KVCR's own diagnostics on (`KVCR_KEY_HISTORY`,
    /// `KVCR_DIAGNOSTICS`, its logger at DEBUG): every block-key event and
    /// query decision in the worker's log (TC-22 reconciles them).
    #[serde(default)]
    pub kvcr_diagnostics: bool,
    /// `--api-misuse-probe`: the worker serves `POST /kvcr/probe/api_misuse`,
    /// calls KVCR must refuse made on its own KVCR and what KVCR did (TC-18).
    #[serde(default)]
    pub api_misuse_probe: bool,
    /// `--placement-policy counting`: KVCR gets the engine's own placement
    /// policy (KVCR's default answers, every call counted in
    /// `cpu_engine_kvcr_policy_calls`, the tiers KVCR told it of each block
    /// in `cpu_engine_kvcr_policy_block_tiers`, misbehaving while the
    /// `hostile_policy` switch is on; TC-21).
    #[serde(default)]
    pub counting_policy: bool,
    /// UCX's keepalive for the workers, seconds: `UCX_KEEPALIVE_INTERVAL`
    /// and the TCP transport's `UCX_TCP_KEEPIDLE`/`KEEPINTVL` (with
    /// `UCX_TCP_KEEPCNT=2`), so a peer behind a cut link is found
    /// unreachable within seconds (TC-13); `None` = UCX's defaults.
    #[serde(default)]
    pub ucx_keepalive_s: Option<u64>,
    /// Aggregated workers of the `agg` topology, slots `A`, `B`, `C`, ...
    /// (the `phase3` profile runs three: a prefix hinted from one source to
    /// two targets at once, TC-17); `None` = the topology's two.
    #[serde(default)]
    pub agg_workers: Option<u32>,
    /// `--capacity-low-watermark-percent`: KVCR asks the engine for capacity
    /// when a pool's free and evictable slots fall below this share of it
    /// (its `capacity_needed_callback`); `None` = never.
    #[serde(default)]
    pub capacity_low_watermark_percent: Option<u32>,
}

impl CpuEngineProfile {
    /// The UCX environment of the workers that [`Self::ucx_keepalive_s`] sets.
    pub fn ucx_env(&self) -> Vec<(&'static str, String)> {
        let Some(s) = self.ucx_keepalive_s else {
            return Vec::new();
        };
        vec![
            ("UCX_KEEPALIVE_INTERVAL", format!("{s}s")),
            ("UCX_TCP_KEEPIDLE", format!("{s}s")),
            ("UCX_TCP_KEEPINTVL", format!("{s}s")),
            ("UCX_TCP_KEEPCNT", "2".into()),
        ]
    }
}

impl CpuEngineProfile {
    /// Pages per block for a geometry: attention pages, plus SSM parts when hybrid.
    pub fn pages_per_block(&self, geometry: GeometryKind) -> u32 {
        match geometry {
            GeometryKind::Dense => self.attn_pages,
            GeometryKind::Hybrid => self.attn_pages + self.ssm_parts,
        }
    }

    /// Bytes per block for a geometry (what a block transfer should move).
    pub fn bytes_per_block(&self, geometry: GeometryKind) -> u64 {
        let attn = u64::from(self.attn_pages) * self.attn_page_bytes;
        match geometry {
            GeometryKind::Dense => attn,
            GeometryKind::Hybrid => attn + u64::from(self.ssm_parts) * self.ssm_part_bytes,
        }
    }

    /// The engine flags these knobs map onto (without geometry, ports and paths,
    /// which the stack module adds).
    pub fn engine_flags(&self) -> Vec<String> {
        let pairs: [(&str, String); 11] = [
            ("--block-size", self.block_size.to_string()),
            ("--attn-pages", self.attn_pages.to_string()),
            ("--attn-page-bytes", self.attn_page_bytes.to_string()),
            ("--ssm-parts", self.ssm_parts.to_string()),
            ("--ssm-part-bytes", self.ssm_part_bytes.to_string()),
            (
                "--device-cache-blocks",
                self.device_cache_blocks.to_string(),
            ),
            ("--host-tier-blocks", self.host_tier_blocks.to_string()),
            (
                "--prefill-us-per-token",
                self.prefill_us_per_token.to_string(),
            ),
            (
                "--decode-us-per-token",
                self.decode_us_per_token.to_string(),
            ),
            ("--local-pool-blocks", self.local_pool_blocks.to_string()),
            ("--stats-interval-s", self.stats_interval_s.to_string()),
        ];
        let optional = self
            .operation_timeout_ms
            .map(|ms| ("--operation-timeout-ms", ms.to_string()))
            .into_iter()
            .chain(
                self.capacity_low_watermark_percent
                    .map(|p| ("--capacity-low-watermark-percent", p.to_string())),
            );
        let mut flags: Vec<String> = pairs
            .into_iter()
            .chain(optional)
            .flat_map(|(f, v)| [f.to_string(), v])
            .collect();
        if self.hits_after_prefill {
            flags.push("--hits-after-prefill".into());
        }
        for (on, flag) in [
            (self.framework_regions, "--framework-regions"),
            (self.kvcr_fetch, "--kvcr-fetch"),
            (self.align_sequence, "--align-sequence"),
            (self.abort_cancelled, "--abort-cancelled"),
            (self.kvcr_diagnostics, "--kvcr-diagnostics"),
            (self.api_misuse_probe, "--api-misuse-probe"),
        ] {
            if on {
                flags.push(flag.into());
            }
        }
        if self.counting_policy {
            flags.extend(["--placement-policy".into(), "counting".into()]);
        }
        flags
    }

    /// The knobs of the shipped default profile (`[cpu_engine]` of
    /// `fixtures/profiles/default.toml`), for tests of the engine room.
    #[cfg(test)]
    pub fn shipped() -> Self {
        #[derive(Deserialize)]
        struct Profile {
            cpu_engine: CpuEngineProfile,
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/profiles/default.toml");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        toml::from_str::<Profile>(&text)
            .map(|p| p.cpu_engine)
            .unwrap_or_else(|e| panic!("[cpu_engine] of {}: {e}", path.display()))
    }
}

pub struct CpuEngine {
    pub profile: CpuEngineProfile,
    pub geometry: GeometryKind,
    pub topology: Topology,
    /// `tiny`, prompts from its ordinary tokens (`vocab_size` of the
    /// model's config.json).
    served: ServedModel,
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
            served: ServedModel {
                name: "tiny".into(),
                prompt_vocab: FIRST_ORDINARY_TOKEN..vocab_size(&repo_root.join(MODEL_DIR)),
            },
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
    fn build(setup: &Setup) -> Result<Self, String> {
        Ok(
            CpuEngine::new(setup.cpu_engine.clone(), setup.geometry, setup.repo_root)
                .with_topology(setup.topology),
        )
    }

    /// Everything, on every topology, but what the production cases and
    /// the performance arms are defined on; its interval log and
    /// `/metrics` come from one source (`IntervalStats`).
    fn supports(need: Need, topology: Topology) -> Support {
        match need {
            Need::PerformanceArms => Support::given(
                topology != Topology::TwoNode,
                applicability::PERFORMANCE_ON_AGG,
            ),
            Need::ProductionConditions => {
                Support::given(topology == Topology::Agg, applicability::PRODUCTION_ON_AGG)
            }
            Need::IndependentIntervalLog => needs::without(need, "cpu"),
            Need::NodeLink => needs::node_link(topology),
            Need::ThirdAggregatedWorker => needs::third_aggregated_worker(topology),
            // `RemoteFWDramOptions` keeps KVCR's `opportunistic_query=False`
            // (`fixtures/cpu-engine/cpu_engine/kvcr_binding.py`): exact
            // hint membership.
            Need::Topology
            | Need::Guard
            | Need::RouterHints
            | Need::PoolEvictionReports
            | Need::DiskTierReports
            | Need::FaultSwitches
            | Need::PagesPerKind
            | Need::ExactHintMembership
            | Need::BlockLedger
            | Need::RelayedKvcrEvents
            | Need::FirstTokenStamps
            | Need::DepositReports
            | Need::EngineMemoryReports
            | Need::DeliverBench => Support::Yes,
        }
    }

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn served(&self) -> &ServedModel {
        &self.served
    }

    fn guard_pool_gb(&self) -> Option<f64> {
        Some(self.profile.guard_pool_gb)
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

    fn worker_plans(&self) -> Vec<WorkerPlan> {
        match (self.topology, self.profile.agg_workers) {
            (Topology::Agg, Some(n)) => topology::plan_agg_workers(n),
            _ => topology::plan_cpu_workers(self.topology),
        }
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
        let spec = self
            .profile
            .ucx_env()
            .into_iter()
            .fold(spec, |spec, (k, v)| spec.env(k, &v));
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

    /// `--fault NAME[=ARG]` each (docs/cpu-engine.md), but
    /// [`super::KVCR_OVERRIDE`]`=SECTION.FIELD=JSON`, which is the engine's
    /// `--kvcr-config-override SECTION.FIELD=JSON`.
    fn with_faults(&self, worker: ProcessSpec, faults: &[&str]) -> Result<ProcessSpec, String> {
        Ok(faults.iter().fold(worker, |spec, fault| {
            match fault
                .strip_prefix(super::KVCR_OVERRIDE)
                .and_then(|rest| rest.strip_prefix('='))
            {
                Some(setting) => spec.args(["--kvcr-config-override", setting]),
                None => spec.args(["--fault", fault]),
            }
        }))
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

    /// `cpu_engine/cli.py` `max_prompt_tokens`: the device cache's blocks
    /// plus one partial block.
    fn max_prompt_tokens(&self) -> Option<usize> {
        let blocks = self.profile.device_cache_blocks as usize + 1;
        Some(blocks * self.geometry().block_size_tokens as usize - 1)
    }

    fn reports_kvcr_state(&self) -> bool {
        true
    }

    fn counts_blocks(&self) -> bool {
        true
    }

    fn deposits_computed_blocks(&self) -> bool {
        !self.profile.framework_regions
    }

    fn logs_kvcr_startup_stages(&self) -> bool {
        true
    }

    fn guard_heartbeat_timeout_ms(&self) -> Option<u64> {
        self.profile.guard_heartbeat_timeout_ms
    }

    fn kvcr_operation_timeout_ms(&self) -> Option<u64> {
        self.profile.operation_timeout_ms
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything, but the production cases off agg, the performance arms
    /// on two nodes, a link between nodes on one node, and an interval log
    /// independent of `/metrics`.
    #[test]
    fn what_the_cpu_engine_supports() {
        for t in Topology::ALL {
            for need in Need::ALL {
                let answer = CpuEngine::supports(need, t);
                let expected_no = match need {
                    Need::IndependentIntervalLog => true,
                    Need::ProductionConditions => t != Topology::Agg,
                    Need::PerformanceArms => t == Topology::TwoNode,
                    Need::NodeLink => t != Topology::TwoNode,
                    Need::ThirdAggregatedWorker => t != Topology::Agg,
                    _ => false,
                };
                assert_eq!(!answer.is_yes(), expected_no, "{need:?} on {t}: {answer:?}");
            }
        }
        assert_eq!(
            CpuEngine::supports(Need::ProductionConditions, Topology::TwoNode),
            Support::no(applicability::PRODUCTION_ON_AGG)
        );
        assert_eq!(
            CpuEngine::supports(Need::PerformanceArms, Topology::TwoNode),
            Support::no(applicability::PERFORMANCE_ON_AGG)
        );
        assert_eq!(
            CpuEngine::supports(Need::IndependentIntervalLog, Topology::Agg),
            Support::no("the cpu engine writes both from one; checked as its consistency")
        );
    }

    /// A KVCR override among the launch faults is the engine's
    /// `--kvcr-config-override`; every other switch stays a `--fault`.
    #[test]
    fn a_kvcr_override_is_a_config_override_and_the_rest_stay_faults() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let engine = CpuEngine::new(CpuEngineProfile::shipped(), GeometryKind::Dense, root);
        let timeout = crate::engine::kvcr_override("config.operation_timeout_ms=10");
        assert_eq!(timeout, "kvcr_override=config.operation_timeout_ms=10");
        let spec = engine
            .with_faults(
                ProcessSpec::new("worker-B", "/py", "/l"),
                &[
                    &timeout,
                    "hide_failed_deposits",
                    "kvcr_overrides_are_not_this",
                ],
            )
            .unwrap();
        assert_eq!(
            spec.args,
            [
                "--kvcr-config-override",
                "config.operation_timeout_ms=10",
                "--fault",
                "hide_failed_deposits",
                "--fault",
                "kvcr_overrides_are_not_this",
            ]
        );
    }

    /// The KVCR API knobs become the engine's flags; with
    /// `framework_regions` the workers deposit nothing, so their readiness
    /// waits for no deposit.
    #[test]
    fn the_kvcr_api_knobs_are_flags_and_framework_regions_deposits_nothing() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let shipped = CpuEngineProfile::shipped();
        let flags = shipped.engine_flags();
        for flag in [
            "--framework-regions",
            "--kvcr-fetch",
            "--align-sequence",
            "--abort-cancelled",
            "--kvcr-diagnostics",
            "--api-misuse-probe",
        ] {
            assert!(!flags.iter().any(|f| f == flag), "{flag} is off by default");
        }
        assert!(!flags.iter().any(|f| f == "--placement-policy"));
        assert!(
            CpuEngine::new(shipped.clone(), GeometryKind::Dense, root).deposits_computed_blocks()
        );
        let on = CpuEngineProfile {
            framework_regions: true,
            kvcr_fetch: true,
            align_sequence: true,
            abort_cancelled: true,
            kvcr_diagnostics: true,
            api_misuse_probe: true,
            counting_policy: true,
            ..shipped
        };
        let flags = on.engine_flags();
        for flag in [
            "--framework-regions",
            "--kvcr-fetch",
            "--align-sequence",
            "--abort-cancelled",
            "--kvcr-diagnostics",
            "--api-misuse-probe",
        ] {
            assert!(flags.iter().any(|f| f == flag), "{flag} in {flags:?}");
        }
        assert!(flags.ends_with(&["--placement-policy".into(), "counting".into()]));
        assert!(!CpuEngine::new(on, GeometryKind::Dense, root).deposits_computed_blocks());
    }
}
