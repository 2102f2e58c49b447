//! The resolved run settings and their parts.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::errors::ConfigError;
use super::keys::{self, Kind};
use super::origin::Origin;

macro_rules! word_enum {
    ($(#[$doc:meta])* $name:ident, $words:path { $($(#[$vdoc:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $word)] $variant),+
        }

        impl $name {
            /// Every value, in the order of the accepted words.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word used in flags, environment and profiles.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }

            /// Parses the word (case-insensitive); `None` if it is not one of
            #[doc = concat!("[`", stringify!($words), "`].")]
            pub fn from_word(word: &str) -> Option<Self> {
                let w = word.trim().to_ascii_lowercase();
                match w.as_str() { $($word => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

word_enum!(
    /// The engine behind the router.
    Engine, keys::ENGINES {
        /// The project's deterministic CPU engine stand-in (default).
        Cpu = "cpu",
        /// `dynamo.vllm` with the KVCR tier.
        Vllm = "vllm",
        /// `dynamo.sglang` with the KVCR tier (no Guard, no disaggregation).
        Sglang = "sglang",
    }
);

word_enum!(
    /// How workers are laid out.
    Topology, keys::TOPOLOGIES {
        /// Router + 2 workers + Guard service (default).
        Agg = "agg",
        /// Two prefill workers and one decode worker.
        TwoPrefillOneDecode = "2p1d",
        /// Workers on two hosts.
        TwoNode = "two-node",
    }
);

word_enum!(
    /// The KV page layout of a block.
    Geometry, keys::GEOMETRIES {
        /// Attention pages only.
        Dense = "dense",
        /// Attention pages plus SSM state parts.
        Hybrid = "hybrid",
    }
);

word_enum!(
    /// The harness's log level.
    LogLevel, keys::LOG_LEVELS {
        /// Errors only.
        Error = "error",
        /// Warnings and errors.
        Warn = "warn",
        /// The default.
        Info = "info",
        /// Debugging detail.
        Debug = "debug",
        /// Everything.
        Trace = "trace",
    }
);

/// The CPU engine's knobs; each maps onto a flag of `python -m cpu_engine`
/// (see docs/cpu-engine.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    pub guard_pool_blocks: Option<u32>,
    /// The Guard service's `--heartbeat-timeout-ms`; `None` = pidfd only.
    pub guard_heartbeat_timeout_ms: Option<u64>,
    /// `--operation-timeout-ms`: KVCR's operation timeout in the engine.
    pub operation_timeout_ms: Option<u64>,
    /// KVCR's disk tier per worker, in blocks; `None` = no G3.
    pub g3_capacity_blocks: Option<u32>,
    /// Where the workers' G3 files go; `None` = `<run dir>/g3`.
    pub g3_dir: Option<PathBuf>,
}

impl CpuEngineProfile {
    /// Pages per block for a geometry: attention pages, plus SSM parts when hybrid.
    pub fn pages_per_block(&self, geometry: Geometry) -> u32 {
        match geometry {
            Geometry::Dense => self.attn_pages,
            Geometry::Hybrid => self.attn_pages + self.ssm_parts,
        }
    }

    /// Bytes per block for a geometry (what a block transfer should move).
    pub fn bytes_per_block(&self, geometry: Geometry) -> u64 {
        let attn = u64::from(self.attn_pages) * self.attn_page_bytes;
        match geometry {
            Geometry::Dense => attn,
            Geometry::Hybrid => attn + u64::from(self.ssm_parts) * self.ssm_part_bytes,
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
            .map(|ms| ("--operation-timeout-ms", ms.to_string()));
        pairs
            .into_iter()
            .chain(optional)
            .flat_map(|(f, v)| [f.to_string(), v])
            .collect()
    }
}

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

/// The resolved run settings. Built by [`super::resolve`]; serialized (redacted)
/// into the run directory's `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// The profile layered over the default (`default` when none was chosen).
    pub profile: String,
    /// Engine behind the router.
    pub engine: Engine,
    /// Worker layout.
    pub topology: Topology,
    /// KV page layout.
    pub geometry: Geometry,
    /// Case ids to run (in addition to libtest filters); `None` = all.
    pub cases: Option<Vec<String>>,
    /// Filler prompts sent to evict a device prefix cache.
    pub perf_evict_filler: u32,
    /// Concurrency levels of the TC-05 sweep.
    pub perf_concurrency_levels: Vec<u32>,
    /// Fresh prompts per TC-05 arm.
    pub perf_repeats: u32,
    /// Fault under load: concurrent streaming clients.
    pub load_clients: u32,
    /// Fault under load: requests per client (bounded load).
    pub load_requests_per_client: u32,
    /// Fault under load: failed requests allowed (wrong tokens never are).
    pub load_max_failed_requests: u32,
    /// TC-06 attempt cadence.
    pub tc06_cadence_ms: u64,
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
    /// Wait until no other live run is registered before starting.
    pub exclusive: bool,
    /// Seconds `exclusive` waits before the run fails.
    pub exclusive_timeout_s: u64,
    /// The machine-wide registry of live runs.
    pub live_runs_dir: PathBuf,
    /// Seconds the stack may take to become ready.
    pub startup_timeout_s: u64,
    /// Seconds one request may take.
    pub request_timeout_s: u64,
    /// Seconds one case may take before it is cancelled and fails.
    pub case_timeout_s: u64,
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
                let base = super::applicability::base_case_id(case_id);
                ids.iter().any(|id| id.eq_ignore_ascii_case(&base))
            }
        }
    }

    /// Whether any selected case needs the device cache evicted (TC-02, TC-05).
    pub fn needs_eviction(&self) -> bool {
        self.selects("TC-02") || self.selects("TC-05")
    }

    /// All-zero settings; every required key is then set by the default profile.
    pub(crate) fn blank() -> Self {
        Settings {
            profile: "default".to_string(),
            engine: Engine::Cpu,
            topology: Topology::Agg,
            geometry: Geometry::Dense,
            cases: None,
            perf_evict_filler: 0,
            perf_concurrency_levels: Vec::new(),
            perf_repeats: 0,
            load_clients: 0,
            load_requests_per_client: 0,
            load_max_failed_requests: 0,
            tc06_cadence_ms: 0,
            run_dir: PathBuf::new(),
            junit: None,
            attach: None,
            python: None,
            kvcr: super::KvcrSpec::default(),
            engine_profile: None,
            keep_stack: false,
            recompute_reference: false,
            reference_concurrency: 0,
            require_all: false,
            exclusive: false,
            exclusive_timeout_s: 0,
            live_runs_dir: PathBuf::new(),
            startup_timeout_s: 0,
            request_timeout_s: 0,
            case_timeout_s: 0,
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
            "engine" => self.engine = v.word(Engine::from_word)?,
            "topology" => self.topology = v.word(Topology::from_word)?,
            "geometry" => self.geometry = v.word(Geometry::from_word)?,
            "log_level" => self.log_level = v.word(LogLevel::from_word)?,
            "cases" => self.cases = Some(v.cases()?),
            "perf_evict_filler" => self.perf_evict_filler = v.uint()?,
            "perf_concurrency_levels" => self.perf_concurrency_levels = v.uint_list()?,
            "perf_repeats" => self.perf_repeats = v.uint()?,
            "load_clients" => self.load_clients = v.uint()?,
            "load_requests_per_client" => self.load_requests_per_client = v.uint()?,
            "load_max_failed_requests" => self.load_max_failed_requests = v.uint()?,
            "tc06_cadence_ms" => self.tc06_cadence_ms = v.uint()?,
            "run_dir" => self.run_dir = v.path()?,
            "junit" => self.junit = Some(v.path()?),
            "attach" => self.attach = Some(v.path()?),
            "python" => self.python = Some(v.path()?),
            "kvcr" => self.kvcr = v.kvcr()?,
            "engine_profile" => self.engine_profile = Some(v.path()?),
            "keep_stack" => self.keep_stack = v.boolean()?,
            "recompute_reference" => self.recompute_reference = v.boolean()?,
            "reference_concurrency" => self.reference_concurrency = v.uint()?,
            "require_all" => self.require_all = v.boolean()?,
            "exclusive" => self.exclusive = v.boolean()?,
            "exclusive_timeout_s" => self.exclusive_timeout_s = v.uint()?,
            "live_runs_dir" => self.live_runs_dir = v.path()?,
            "startup_timeout_s" => self.startup_timeout_s = v.uint()?,
            "request_timeout_s" => self.request_timeout_s = v.uint()?,
            "case_timeout_s" => self.case_timeout_s = v.uint()?,
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
            if !super::KNOWN_CASES.contains(&id.as_str()) {
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
