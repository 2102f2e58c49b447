//! The resolved run settings and their parts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::engine::cpu::CpuEngineProfile;
use crate::engine::{self, GeometryKind, Topology};

use super::errors::ConfigError;
use super::keys::{self, Kind};
use super::log_level::LogLevel;
use super::origin::Origin;
use super::sweep_mode::SweepMode;

/// How the prompt set is generated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptProfile {
    /// Seed of the generated prompt set.
    pub seed: u64,
    /// Prompt families (distinct shared prefixes).
    pub families: u32,
    /// Full KV blocks in each family's shared prefix.
    pub prefix_blocks: u32,
    /// Tokens of each prompt's own suffix.
    pub suffix_tokens: u32,
    /// Tokens generated per request.
    pub max_tokens: u32,
}

/// WL-01: the trace replayed, how, and the targets its goodput counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadSettings {
    /// The Mooncake-format trace; `None`: no replay (`workload_trace`).
    #[serde(rename = "workload_trace")]
    pub trace: Option<PathBuf>,
    /// Tokens per block id (`workload_block_size`).
    #[serde(rename = "workload_block_size")]
    pub block_size: u32,
    /// Arrival times are divided by it (`workload_rate`).
    #[serde(rename = "workload_rate")]
    pub rate: f64,
    /// Salt of the block ids' tokens (`workload_salt`).
    #[serde(rename = "workload_salt")]
    pub salt: u64,
    /// TTFT target, ms (`workload_slo_ttft_ms`).
    #[serde(rename = "workload_slo_ttft_ms")]
    pub slo_ttft_ms: f64,
    /// TPOT target, ms (`workload_slo_tpot_ms`).
    #[serde(rename = "workload_slo_tpot_ms")]
    pub slo_tpot_ms: f64,
    /// Fraction of requests that must meet both for a sustained rate.
    #[serde(rename = "workload_slo_attainment")]
    pub slo_attainment: f64,
    /// Rate factors of the sweep; `None`: no sweep (`workload_sweep`).
    #[serde(rename = "workload_sweep")]
    pub sweep: Option<Vec<u32>>,
}

impl Default for WorkloadSettings {
    fn default() -> Self {
        WorkloadSettings {
            trace: None,
            block_size: 0,
            rate: 0.0,
            salt: 0,
            slo_ttft_ms: 0.0,
            slo_tpot_ms: 0.0,
            slo_attainment: 0.0,
            sweep: None,
        }
    }
}

/// The resolved run settings. Built by [`super::resolve`]; serialized (redacted)
/// into the run directory's `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// The profile layered over the default (`default` when none was chosen).
    pub profile: String,
    /// Engine behind the router.
    pub engine: engine::Kind,
    /// Worker layout.
    pub topology: Topology,
    /// KV page layout.
    pub geometry: GeometryKind,
    /// Case ids to run (in addition to libtest filters); `None` = all.
    pub cases: Option<Vec<String>>,
    /// Filler prompts sent to evict a device prefix cache.
    pub perf_evict_filler: u32,
    /// Concurrency levels of the TC-05 sweep.
    pub perf_concurrency_levels: Vec<u32>,
    /// Fresh prompts per TC-05 arm.
    pub perf_repeats: u32,
    /// KVCR operations timed by each of TC-05's benches (delivers, pulls).
    pub perf_kvcr_bench_ops: u32,
    /// Requests per TC-05 sweep level (closed loop: at least `perf_sweep_waves` × the level).
    pub perf_sweep_requests: u32,
    /// Closed-loop sweep: the fewest waves per level (requests ≥ waves × level).
    pub perf_sweep_waves: u32,
    /// The sweep's load model: closed loop per concurrency, open loop per rate.
    pub perf_sweep_mode: SweepMode,
    /// Open-loop sweep: arrival rates, requests per second.
    pub perf_sweep_rates: Vec<u32>,
    /// Open-loop sweep: seed of the arrivals (level i uses seed + i).
    pub perf_arrival_seed: u64,
    /// WL-01's trace, its replay and its targets.
    #[serde(flatten)]
    pub workload: WorkloadSettings,
    /// Fault under load: concurrent streaming clients.
    pub load_clients: u32,
    /// Fault under load: requests per client (bounded load).
    pub load_requests_per_client: u32,
    /// Fault under load: failed requests allowed (wrong tokens never are).
    pub load_max_failed_requests: u32,
    /// TC-06: the time between recovery attempts (`tc06_cadence_ms`).
    #[serde(rename = "tc06_cadence_ms", serialize_with = "as_millis")]
    pub tc06_cadence: Duration,
    /// Base directory of run directories.
    pub run_dir: PathBuf,
    /// JUnit output; `None` = `<run dir>/junit.xml` (see [`Settings::junit_path`]).
    pub junit: Option<PathBuf>,
    /// A running stack's `stack.json` to attach to instead of starting one.
    pub attach: Option<PathBuf>,
    /// A Python interpreter to use instead of the project virtualenv.
    pub python: Option<PathBuf>,
    /// The KVCR build under test (`--kvcr`).
    pub kvcr: super::KvcrSpec,
    /// Run every KVCR process under coverage.py (`--kvcr-coverage`).
    pub kvcr_coverage: bool,
    /// GPU engine settings file (`fixtures/engines/<engine>.toml` when unset).
    pub engine_profile: Option<PathBuf>,
    /// Leave the stack running after the run.
    pub keep_stack: bool,
    /// Ignore the reference cache: probes and baselines come from this run's
    /// machine state (a cached entry may be from another time or machine).
    pub recompute_reference: bool,
    /// Prompt families in flight in the reference phase and TC-01, when the
    /// batch probe shows batching does not change tokens (else 1).
    pub reference_concurrency: u32,
    /// Fail the cases this machine cannot run instead of ignoring them.
    pub require_all: bool,
    /// How many times a trial that failed while the machine's clock
    /// stepped or stalled is run again.
    pub clock_event_retries: u32,
    /// Wait until no other live run is registered before starting.
    pub exclusive: bool,
    /// How long `exclusive` waits before the run fails
    /// (`exclusive_timeout_s`).
    #[serde(rename = "exclusive_timeout_s", serialize_with = "as_secs")]
    pub exclusive_timeout: Duration,
    /// The machine-wide registry of live runs.
    pub live_runs_dir: PathBuf,
    /// How long the stack may take to become ready (`startup_timeout_s`).
    #[serde(rename = "startup_timeout_s", serialize_with = "as_secs")]
    pub startup_timeout: Duration,
    /// How long one request may take (`request_timeout_s`).
    #[serde(rename = "request_timeout_s", serialize_with = "as_secs")]
    pub request_timeout: Duration,
    /// How long a SIGKILLed component may take to be gone before the kill
    /// counts as not applied (`kill_timeout_s`; unset, the request timeout).
    #[serde(rename = "kill_timeout_s", serialize_with = "as_secs")]
    pub kill_timeout: Duration,
    /// How long one readiness or health probe of a starting stack may take
    /// (`probe_timeout_s`).
    #[serde(rename = "probe_timeout_s", serialize_with = "as_secs")]
    pub probe_timeout: Duration,
    /// How long one case may take before it is cancelled and fails
    /// (`case_timeout_s`).
    #[serde(rename = "case_timeout_s", serialize_with = "as_secs")]
    pub case_timeout: Duration,
    /// Directory of digest-keyed reference-phase results.
    pub reference_cache: PathBuf,
    /// Harness log level.
    pub log_level: LogLevel,
    /// CPU engine knobs.
    pub cpu_engine: CpuEngineProfile,
    /// Prompt set generation.
    pub prompts: PromptProfile,
}

impl Settings {
    /// The stack these settings make: engine, topology and geometry.
    pub fn stack(&self) -> engine::StackSpec {
        engine::StackSpec::new(self.engine, self.topology, self.geometry)
    }

    /// Where the JUnit XML goes for a run directory `run_root`.
    pub fn junit_path(&self, run_root: &Path) -> PathBuf {
        self.junit
            .clone()
            .unwrap_or_else(|| run_root.join("junit.xml"))
    }

    /// Whether `--cases` selects a case (`TC-05` also selects `TC-05/cold`).
    pub fn selects(&self, case_id: &str) -> bool {
        match &self.cases {
            None => true,
            Some(ids) => {
                let base = engine::applicability::base_case_id(case_id);
                ids.iter().any(|id| id.eq_ignore_ascii_case(&base))
            }
        }
    }

    /// What building the engine takes from these settings.
    pub fn engine_setup<'a>(&'a self, repo_root: &'a Path) -> engine::Setup<'a> {
        engine::Setup::new(
            self.topology,
            self.geometry,
            &self.cpu_engine,
            self.engine_profile.as_deref(),
            repo_root,
        )
    }

    /// The engine these settings ask for, built (GPU engines read their
    /// profile under `repo_root`).
    pub fn build_engine(&self, repo_root: &Path) -> Result<Arc<dyn engine::Engine>, String> {
        self.engine.build(&self.engine_setup(repo_root))
    }

    /// Whether any selected case needs the device cache evicted (TC-02, TC-05).
    pub fn needs_eviction(&self) -> bool {
        self.selects("TC-02") || self.selects("TC-05")
    }

    /// All-zero settings; every required key is then set by the default profile.
    pub(crate) fn blank() -> Self {
        Settings {
            profile: "default".to_string(),
            engine: engine::Kind::Cpu,
            topology: Topology::Agg,
            geometry: GeometryKind::Dense,
            cases: None,
            perf_evict_filler: 0,
            perf_concurrency_levels: Vec::new(),
            perf_repeats: 0,
            perf_kvcr_bench_ops: 0,
            perf_sweep_requests: 0,
            perf_sweep_waves: 0,
            perf_sweep_mode: SweepMode::Closed,
            perf_sweep_rates: Vec::new(),
            perf_arrival_seed: 0,
            workload: WorkloadSettings::default(),
            load_clients: 0,
            load_requests_per_client: 0,
            load_max_failed_requests: 0,
            tc06_cadence: Duration::ZERO,
            run_dir: PathBuf::new(),
            junit: None,
            attach: None,
            python: None,
            kvcr: super::KvcrSpec::default(),
            kvcr_coverage: false,
            engine_profile: None,
            keep_stack: false,
            recompute_reference: false,
            reference_concurrency: 0,
            require_all: false,
            clock_event_retries: 0,
            exclusive: false,
            exclusive_timeout: Duration::ZERO,
            live_runs_dir: PathBuf::new(),
            startup_timeout: Duration::ZERO,
            request_timeout: Duration::ZERO,
            kill_timeout: Duration::ZERO,
            probe_timeout: Duration::ZERO,
            case_timeout: Duration::ZERO,
            reference_cache: PathBuf::new(),
            log_level: LogLevel::Info,
            cpu_engine: CpuEngineProfile {
                block_size: 0,
                attn_pages: 0,
                attn_page_bytes: 0,
                ssm_parts: 0,
                ssm_part_bytes: 0,
                device_cache_blocks: 0,
                host_tier_blocks: 0,
                prefill_us_per_token: 0,
                decode_us_per_token: 0,
                local_pool_blocks: 0,
                stats_interval_s: 0.0,
                guard_pool_gb: 0.0,
                guard_pool_blocks: None,
                guard_heartbeat_timeout_ms: None,
                operation_timeout_ms: None,
                g3_capacity_blocks: None,
                g3_dir: None,
                hits_after_prefill: false,
                framework_regions: false,
                kvcr_fetch: false,
                align_sequence: false,
                abort_cancelled: false,
                kvcr_diagnostics: false,
                api_misuse_probe: false,
                counting_policy: false,
                ucx_keepalive_s: None,
                agg_workers: None,
                capacity_low_watermark_percent: None,
            },
            prompts: PromptProfile {
                seed: 0,
                families: 0,
                prefix_blocks: 0,
                suffix_tokens: 0,
                max_tokens: 0,
            },
        }
    }

    /// Sets one key from its textual value, checking it against the key's kind.
    pub(crate) fn apply(
        &mut self,
        key: &str,
        value: &str,
        origin: &Origin,
    ) -> Result<(), ConfigError> {
        let Some(spec) = keys::by_key(key) else {
            return Err(ConfigError::InvalidValue {
                origin: origin.clone(),
                value: value.to_string(),
                expected: "a known setting".to_string(),
            });
        };
        let v = Value {
            text: value,
            kind: spec.kind,
            origin,
        };
        let c = &mut self.cpu_engine;
        let p = &mut self.prompts;
        match key {
            "engine" => self.engine = v.word(engine::Kind::from_word)?,
            "topology" => self.topology = v.word(Topology::from_word)?,
            "geometry" => self.geometry = v.word(GeometryKind::from_word)?,
            "log_level" => self.log_level = v.word(LogLevel::from_word)?,
            "cases" => self.cases = Some(v.cases()?),
            "perf_evict_filler" => self.perf_evict_filler = v.uint()?,
            "perf_concurrency_levels" => self.perf_concurrency_levels = v.uint_list()?,
            "perf_repeats" => self.perf_repeats = v.uint()?,
            "perf_kvcr_bench_ops" => self.perf_kvcr_bench_ops = v.uint()?,
            "perf_sweep_requests" => self.perf_sweep_requests = v.uint()?,
            "perf_sweep_waves" => self.perf_sweep_waves = v.uint()?,
            "perf_sweep_mode" => self.perf_sweep_mode = v.word(SweepMode::from_word)?,
            "perf_sweep_rates" => self.perf_sweep_rates = v.uint_list()?,
            "perf_arrival_seed" => self.perf_arrival_seed = v.uint()?,
            "workload_trace" => self.workload.trace = Some(v.path()?),
            "workload_block_size" => self.workload.block_size = v.uint()?,
            "workload_rate" => self.workload.rate = v.float()?,
            "workload_salt" => self.workload.salt = v.uint()?,
            "workload_slo_ttft_ms" => self.workload.slo_ttft_ms = v.float()?,
            "workload_slo_tpot_ms" => self.workload.slo_tpot_ms = v.float()?,
            "workload_slo_attainment" => {
                self.workload.slo_attainment = v.float()?;
                if self.workload.slo_attainment > 1.0 {
                    return Err(ConfigError::InvalidValue {
                        origin: v.origin.clone(),
                        value: v.text.to_string(),
                        expected: "a fraction of requests above 0 and at most 1".into(),
                    });
                }
            }
            "workload_sweep" => self.workload.sweep = Some(v.uint_list()?),
            "load_clients" => self.load_clients = v.uint()?,
            "load_requests_per_client" => self.load_requests_per_client = v.uint()?,
            "load_max_failed_requests" => self.load_max_failed_requests = v.uint()?,
            "tc06_cadence_ms" => self.tc06_cadence = Duration::from_millis(v.uint()?),
            "run_dir" => self.run_dir = v.path()?,
            "junit" => self.junit = Some(v.path()?),
            "attach" => self.attach = Some(v.path()?),
            "python" => self.python = Some(v.path()?),
            "kvcr" => self.kvcr = v.kvcr()?,
            "kvcr_coverage" => self.kvcr_coverage = v.boolean()?,
            "engine_profile" => self.engine_profile = Some(v.path()?),
            "keep_stack" => self.keep_stack = v.boolean()?,
            "recompute_reference" => self.recompute_reference = v.boolean()?,
            "reference_concurrency" => self.reference_concurrency = v.uint()?,
            "require_all" => self.require_all = v.boolean()?,
            "clock_event_retries" => self.clock_event_retries = v.uint()?,
            "exclusive" => self.exclusive = v.boolean()?,
            "exclusive_timeout_s" => self.exclusive_timeout = Duration::from_secs(v.uint()?),
            "live_runs_dir" => self.live_runs_dir = v.path()?,
            "startup_timeout_s" => self.startup_timeout = Duration::from_secs(v.uint()?),
            "request_timeout_s" => self.request_timeout = Duration::from_secs(v.uint()?),
            "kill_timeout_s" => self.kill_timeout = Duration::from_secs(v.uint()?),
            "probe_timeout_s" => self.probe_timeout = Duration::from_secs(v.uint()?),
            "case_timeout_s" => self.case_timeout = Duration::from_secs(v.uint()?),
            "reference_cache" => self.reference_cache = v.path()?,
            "cpu_engine.block_size" => c.block_size = v.uint()?,
            "cpu_engine.attn_pages" => c.attn_pages = v.uint()?,
            "cpu_engine.attn_page_bytes" => c.attn_page_bytes = v.uint()?,
            "cpu_engine.ssm_parts" => c.ssm_parts = v.uint()?,
            "cpu_engine.ssm_part_bytes" => c.ssm_part_bytes = v.uint()?,
            "cpu_engine.device_cache_blocks" => c.device_cache_blocks = v.uint()?,
            "cpu_engine.host_tier_blocks" => c.host_tier_blocks = v.uint()?,
            "cpu_engine.prefill_us_per_token" => c.prefill_us_per_token = v.uint()?,
            "cpu_engine.decode_us_per_token" => c.decode_us_per_token = v.uint()?,
            "cpu_engine.local_pool_blocks" => c.local_pool_blocks = v.uint()?,
            "cpu_engine.stats_interval_s" => c.stats_interval_s = v.float()?,
            "cpu_engine.guard_pool_gb" => c.guard_pool_gb = v.float()?,
            "cpu_engine.guard_pool_blocks" => c.guard_pool_blocks = Some(v.uint()?),
            "cpu_engine.guard_heartbeat_timeout_ms" => {
                c.guard_heartbeat_timeout_ms = Some(v.uint()?)
            }
            "cpu_engine.operation_timeout_ms" => c.operation_timeout_ms = Some(v.uint()?),
            "cpu_engine.g3_capacity_blocks" => c.g3_capacity_blocks = Some(v.uint()?),
            "cpu_engine.g3_dir" => c.g3_dir = Some(v.path()?),
            "cpu_engine.hits_after_prefill" => c.hits_after_prefill = v.boolean()?,
            "cpu_engine.framework_regions" => c.framework_regions = v.boolean()?,
            "cpu_engine.kvcr_fetch" => c.kvcr_fetch = v.boolean()?,
            "cpu_engine.align_sequence" => c.align_sequence = v.boolean()?,
            "cpu_engine.abort_cancelled" => c.abort_cancelled = v.boolean()?,
            "cpu_engine.kvcr_diagnostics" => c.kvcr_diagnostics = v.boolean()?,
            "cpu_engine.api_misuse_probe" => c.api_misuse_probe = v.boolean()?,
            "cpu_engine.counting_policy" => c.counting_policy = v.boolean()?,
            "cpu_engine.ucx_keepalive_s" => c.ucx_keepalive_s = Some(v.uint()?),
            "cpu_engine.agg_workers" => c.agg_workers = Some(v.uint()?),
            "cpu_engine.capacity_low_watermark_percent" => {
                c.capacity_low_watermark_percent = Some(v.uint()?)
            }
            "prompts.seed" => p.seed = v.uint()?,
            "prompts.families" => p.families = v.uint()?,
            "prompts.prefix_blocks" => p.prefix_blocks = v.uint()?,
            "prompts.suffix_tokens" => p.suffix_tokens = v.uint()?,
            "prompts.max_tokens" => p.max_tokens = v.uint()?,
            _ => return Err(v.bad()),
        }
        Ok(())
    }
}

/// A duration as the whole seconds of its `_s` key.
fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

/// A duration as the whole milliseconds of its `_ms` key.
fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A textual value being checked against its key's kind.
struct Value<'a> {
    text: &'a str,
    kind: Kind,
    origin: &'a Origin,
}

impl Value<'_> {
    fn bad(&self) -> ConfigError {
        ConfigError::InvalidValue {
            origin: self.origin.clone(),
            value: self.text.to_string(),
            expected: self.kind.expected(),
        }
    }

    fn word<T>(&self, parse: fn(&str) -> Option<T>) -> Result<T, ConfigError> {
        parse(self.text).ok_or_else(|| self.bad())
    }

    fn uint<T: TryFrom<u64>>(&self) -> Result<T, ConfigError> {
        let min = match self.kind {
            Kind::Uint { min } => min,
            _ => 0,
        };
        let n: u64 = self.text.trim().parse().map_err(|_| self.bad())?;
        if n < min {
            return Err(self.bad());
        }
        T::try_from(n).map_err(|_| ConfigError::InvalidValue {
            origin: self.origin.clone(),
            value: self.text.to_string(),
            expected: format!(
                "{} that fits in {} bits",
                self.kind.expected(),
                std::mem::size_of::<T>() * 8
            ),
        })
    }

    fn float(&self) -> Result<f64, ConfigError> {
        let x: f64 = self.text.trim().parse().map_err(|_| self.bad())?;
        if x.is_finite() && x > 0.0 {
            Ok(x)
        } else {
            Err(self.bad())
        }
    }

    fn uint_list(&self) -> Result<Vec<u32>, ConfigError> {
        let mut out = Vec::new();
        for part in self.text.split(',') {
            let n: u32 = part.trim().parse().map_err(|_| self.bad())?;
            if n == 0 {
                return Err(self.bad());
            }
            out.push(n);
        }
        Ok(out)
    }

    fn cases(&self) -> Result<Vec<String>, ConfigError> {
        let mut out: Vec<String> = Vec::new();
        for part in self.text.split(',') {
            let id = part.trim().to_ascii_uppercase();
            if !engine::applicability::KNOWN_CASES.contains(&id.as_str()) {
                return Err(self.bad());
            }
            if !out.contains(&id) {
                out.push(id);
            }
        }
        Ok(out)
    }

    fn path(&self) -> Result<PathBuf, ConfigError> {
        if self.text.trim().is_empty() {
            return Err(self.bad());
        }
        Ok(PathBuf::from(self.text))
    }

    fn kvcr(&self) -> Result<super::KvcrSpec, ConfigError> {
        super::KvcrSpec::parse(self.text).map_err(|why| ConfigError::InvalidValue {
            origin: self.origin.clone(),
            value: self.text.to_string(),
            expected: format!("{} ({why})", self.kind.expected()),
        })
    }

    fn boolean(&self) -> Result<bool, ConfigError> {
        match self.text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(self.bad()),
        }
    }
}
