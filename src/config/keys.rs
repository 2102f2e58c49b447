//! The table of settings: one row per key, with its profile key, environment
//! twin, harness flag and help. Flags, environment and profiles all go through
//! this table, so the three spellings of a setting cannot drift apart.

/// How a key's value is written and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// An unsigned integer of at least `min`.
    Uint {
        /// Smallest accepted value.
        min: u64,
    },
    /// A positive decimal number.
    PositiveFloat,
    /// A comma-separated list (or TOML array) of positive integers.
    UintList,
    /// A comma-separated list (or TOML array) of case ids (`TC-01`).
    Cases,
    /// A filesystem path.
    Path,
    /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`); a flag without value is `true`.
    Bool,
    /// Free text (a profile name or path).
    Text,
    /// A KVCR build (`pypi:<version>`, a wheel, a source directory).
    Kvcr,
}

impl Kind {
    /// What a value looks like, for help and error messages.
    pub fn expected(&self) -> String {
        match self {
            Kind::Choice(words) => format!("one of {}", words.join(", ")),
            Kind::Uint { min: 0 } => "an unsigned integer".to_string(),
            Kind::Uint { min } => format!("an integer ≥ {min}"),
            Kind::PositiveFloat => "a positive number".to_string(),
            Kind::UintList => {
                "a comma-separated list of at least one positive integer, e.g. 1,2,4,8".to_string()
            }
            Kind::Cases => format!(
                "a comma-separated list of case ids out of {}",
                crate::engine::applicability::KNOWN_CASES.join(", ")
            ),
            Kind::Path => "a path".to_string(),
            Kind::Bool => "true or false (1/0, yes/no, on/off)".to_string(),
            Kind::Text => "a name or a path".to_string(),
            Kind::Kvcr => crate::pyenv::kvcr_spec::ACCEPTED.to_string(),
        }
    }

    /// The placeholder shown in help (`--engine <cpu|vllm|sglang>`).
    pub fn placeholder(&self) -> String {
        match self {
            Kind::Choice(words) => words.join("|"),
            Kind::Uint { .. } => "N".to_string(),
            Kind::PositiveFloat => "X".to_string(),
            Kind::UintList => "N,N,...".to_string(),
            Kind::Cases => "TC-NN,...".to_string(),
            Kind::Path => "PATH".to_string(),
            Kind::Bool => String::new(),
            Kind::Text => "NAME|PATH".to_string(),
            Kind::Kvcr => "pypi:VERSION|WHEEL|DIR|SPEC+DIFF".to_string(),
        }
    }
}

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    /// Profile key; dotted inside a table (`cpu_engine.block_size`).
    pub key: &'static str,
    /// Harness flag, if the setting has one.
    pub flag: Option<&'static str>,
    /// Environment twin.
    pub env: &'static str,
    /// Value syntax.
    pub kind: Kind,
    /// Whether the default profile must set it.
    pub required: bool,
    /// One line of help.
    pub help: &'static str,
}

const fn k(
    key: &'static str,
    flag: Option<&'static str>,
    env: &'static str,
    kind: Kind,
    required: bool,
    help: &'static str,
) -> KeySpec {
    KeySpec {
        key,
        flag,
        env,
        kind,
        required,
        help,
    }
}

/// The profile selector: a flag and an environment variable, never a profile key.
pub const PROFILE: KeySpec = k(
    "profile",
    Some("--profile"),
    "PHASE1_PROFILE",
    Kind::Text,
    false,
    "profile layered over the default: default, hybrid, ci, a name under fixtures/profiles/, or a .toml path",
);

/// Every setting, in help order.
pub const KEYS: &[KeySpec] = &[
    k(
        "engine",
        Some("--engine"),
        "PHASE1_ENGINE",
        Kind::Choice(crate::engine::Kind::WORDS),
        true,
        "engine behind the router",
    ),
    k(
        "topology",
        Some("--topology"),
        "PHASE1_TOPOLOGY",
        Kind::Choice(crate::engine::Topology::WORDS),
        true,
        "worker layout: aggregated, 2 prefill + 1 decode, or workers on two hosts",
    ),
    k(
        "geometry",
        Some("--geometry"),
        "PHASE1_GEOMETRY",
        Kind::Choice(crate::engine::GeometryKind::WORDS),
        true,
        "KV page layout: attention pages only, or attention pages + SSM state parts",
    ),
    k(
        "cases",
        Some("--cases"),
        "PHASE1_CASES",
        Kind::Cases,
        false,
        "run only these cases (in addition to libtest filters)",
    ),
    k(
        "perf_evict_filler",
        Some("--perf-evict-filler"),
        "PHASE1_PERF_EVICT_FILLER",
        Kind::Uint { min: 0 },
        true,
        "filler prompts sent to evict a worker's device prefix cache (TC-02, TC-05)",
    ),
    k(
        "perf_concurrency_levels",
        Some("--perf-concurrency-levels"),
        "PHASE1_PERF_CONCURRENCY_LEVELS",
        Kind::UintList,
        true,
        "concurrency levels of the TC-05 sweep",
    ),
    k(
        "perf_repeats",
        Some("--perf-repeats"),
        "PHASE1_PERF_REPEATS",
        Kind::Uint { min: 1 },
        true,
        "fresh prompts per TC-05 arm (R): the n of each arm's p50/p90 and interval",
    ),
    k(
        "perf_kvcr_bench_ops",
        Some("--perf-kvcr-bench-ops"),
        "PHASE1_PERF_KVCR_BENCH_OPS",
        Kind::Uint { min: 1 },
        true,
        "KVCR operations timed by each bench: delivers of one prompt's blocks from KVCR's pool and pulls of them from a peer (TC-05), reads of them from the disk tier (TC-12)",
    ),
    k(
        "perf_sweep_requests",
        Some("--perf-sweep-requests"),
        "PHASE1_PERF_SWEEP_REQUESTS",
        Kind::Uint { min: 1 },
        true,
        "requests per TC-05 sweep level (a closed-loop level sends at least perf_sweep_waves × its concurrency)",
    ),
    k(
        "perf_sweep_waves",
        Some("--perf-sweep-waves"),
        "PHASE1_PERF_SWEEP_WAVES",
        Kind::Uint { min: 1 },
        true,
        "closed-loop sweep: the fewest waves per level (requests >= waves × concurrency)",
    ),
    k(
        "perf_sweep_mode",
        Some("--perf-sweep-mode"),
        "PHASE1_PERF_SWEEP_MODE",
        Kind::Choice(super::sweep_mode::SweepMode::WORDS),
        true,
        "TC-05 sweep load: closed (concurrency levels) or open (Poisson arrivals at perf_sweep_rates)",
    ),
    k(
        "perf_sweep_rates",
        Some("--perf-sweep-rates"),
        "PHASE1_PERF_SWEEP_RATES",
        Kind::UintList,
        true,
        "open-loop sweep: arrival rates, requests per second, one level each",
    ),
    k(
        "perf_arrival_seed",
        Some("--perf-arrival-seed"),
        "PHASE1_PERF_ARRIVAL_SEED",
        Kind::Uint { min: 0 },
        true,
        "open-loop sweep: seed of the Poisson arrivals (level i uses seed + i)",
    ),
    k(
        "workload_trace",
        Some("--workload-trace"),
        "PHASE1_WORKLOAD_TRACE",
        Kind::Path,
        false,
        "WL-01: the Mooncake-format trace to replay (docs/workload.md); unset, WL-01 is ignored",
    ),
    k(
        "workload_block_size",
        Some("--workload-block-size"),
        "PHASE1_WORKLOAD_BLOCK_SIZE",
        Kind::Uint { min: 1 },
        true,
        "WL-01: tokens per block id of the trace (16 for the traces of fixtures/traces/, 512 for Mooncake's)",
    ),
    k(
        "workload_rate",
        Some("--workload-rate"),
        "PHASE1_WORKLOAD_RATE",
        Kind::PositiveFloat,
        true,
        "WL-01: rate factor: the trace's arrival times are divided by it (2: twice as fast)",
    ),
    k(
        "workload_salt",
        Some("--workload-salt"),
        "PHASE1_WORKLOAD_SALT",
        Kind::Uint { min: 0 },
        true,
        "WL-01: salt of the block ids' tokens (another salt: the same trace as other tokens)",
    ),
    k(
        "workload_slo_ttft_ms",
        Some("--workload-slo-ttft-ms"),
        "PHASE1_WORKLOAD_SLO_TTFT_MS",
        Kind::PositiveFloat,
        true,
        "WL-01: TTFT target of goodput, ms",
    ),
    k(
        "workload_slo_tpot_ms",
        Some("--workload-slo-tpot-ms"),
        "PHASE1_WORKLOAD_SLO_TPOT_MS",
        Kind::PositiveFloat,
        true,
        "WL-01: TPOT target of goodput, ms",
    ),
    k(
        "workload_slo_attainment",
        Some("--workload-slo-attainment"),
        "PHASE1_WORKLOAD_SLO_ATTAINMENT",
        Kind::PositiveFloat,
        true,
        "WL-01 sweep: the fraction of requests (at most 1) that must meet both targets for a rate to count as sustained",
    ),
    k(
        "workload_sweep",
        Some("--workload-sweep"),
        "PHASE1_WORKLOAD_SWEEP",
        Kind::UintList,
        false,
        "WL-01: rate factors of the sweep (KVCR on), e.g. 1,2,4,8; unset, no sweep",
    ),
    k(
        "load_clients",
        Some("--load-clients"),
        "PHASE1_LOAD_CLIENTS",
        Kind::Uint { min: 1 },
        true,
        "concurrent streaming clients of the fault-under-load case (TC-04 under load)",
    ),
    k(
        "load_requests_per_client",
        Some("--load-requests-per-client"),
        "PHASE1_LOAD_REQUESTS_PER_CLIENT",
        Kind::Uint { min: 2 },
        true,
        "requests each load client sends, one after another (the load is bounded)",
    ),
    k(
        "load_max_failed_requests",
        Some("--load-max-failed-requests"),
        "PHASE1_LOAD_MAX_FAILED_REQUESTS",
        Kind::Uint { min: 0 },
        true,
        "error budget of the fault-under-load case: failed requests allowed (wrong tokens never are)",
    ),
    k(
        "tc06_cadence_ms",
        Some("--tc06-cadence-ms"),
        "PHASE1_TC06_CADENCE_MS",
        Kind::Uint { min: 1 },
        true,
        "TC-06: milliseconds between recovery attempts",
    ),
    k(
        "run_dir",
        Some("--run-dir"),
        "PHASE1_RUN_DIR",
        Kind::Path,
        true,
        "base directory of run directories (<run-dir>/<run-id>/)",
    ),
    k(
        "junit",
        Some("--junit"),
        "PHASE1_JUNIT",
        Kind::Path,
        false,
        "JUnit XML output (default <run dir>/junit.xml)",
    ),
    k(
        "attach",
        Some("--attach"),
        "PHASE1_ATTACH",
        Kind::Path,
        false,
        "use a running stack described by this stack.json instead of starting one",
    ),
    k(
        "python",
        Some("--python"),
        "PHASE1_PYTHON",
        Kind::Path,
        false,
        "use this Python interpreter instead of the project virtualenv",
    ),
    k(
        "kvcr",
        Some("--kvcr"),
        "PHASE1_KVCR",
        Kind::Kvcr,
        true,
        "the KVCR build under test: pypi:<version> (default pypi:0.1.1, the locks' pin), a wheel, a source directory, or SPEC+FILE.diff (that build patched; docs/kvcr-under-test.md)",
    ),
    k(
        "kvcr_coverage",
        Some("--kvcr-coverage"),
        "PHASE1_KVCR_COVERAGE",
        Kind::Bool,
        true,
        "run every KVCR process under coverage.py and write kvcr's line and branch coverage per module into the evidence (kvcr-coverage.json, results.json, the report; docs/kvcr-under-test.md)",
    ),
    k(
        "engine_profile",
        Some("--engine-profile"),
        "PHASE1_ENGINE_PROFILE",
        Kind::Path,
        false,
        "GPU engine settings (model, GPUs, nodes) for --engine vllm|sglang; default fixtures/engines/<engine>.toml",
    ),
    k(
        "recompute_reference",
        Some("--recompute-reference"),
        "PHASE1_RECOMPUTE_REFERENCE",
        Kind::Bool,
        true,
        "recompute the reference tokens, probes and baselines in this run instead of using a cached entry",
    ),
    k(
        "reference_concurrency",
        Some("--reference-concurrency"),
        "PHASE1_REFERENCE_CONCURRENCY",
        Kind::Uint { min: 1 },
        true,
        "prompt families in flight in the reference phase and TC-01, used only when the engine's batch probe shows batching does not change tokens (1 = sequential)",
    ),
    k(
        "keep_stack",
        Some("--keep-stack"),
        "PHASE1_KEEP_STACK",
        Kind::Bool,
        true,
        "leave the stack running after the run (attach to it later with --attach)",
    ),
    k(
        "require_all",
        Some("--require-all"),
        "PHASE1_REQUIRE_ALL",
        Kind::Bool,
        true,
        "fail, with the reason, every case this machine cannot run (not root for two-node, a missing tool), instead of reporting it ignored; a case that does not apply to the lane stays ignored",
    ),
    k(
        "clock_event_retries",
        Some("--clock-event-retries"),
        "PHASE1_CLOCK_EVENT_RETRIES",
        Kind::Uint { min: 0 },
        true,
        "run a trial again (up to N times) when it failed while the machine's wall clock stepped or the machine stalled (both break Dynamo's file discovery); every attempt is recorded",
    ),
    k(
        "exclusive",
        Some("--exclusive"),
        "PHASE1_EXCLUSIVE",
        Kind::Bool,
        true,
        "wait, before starting or attaching to a stack, until no other kvcr-e2e run is live on this machine (up to exclusive_timeout_s); later runs are warned",
    ),
    k(
        "exclusive_timeout_s",
        Some("--exclusive-timeout-s"),
        "PHASE1_EXCLUSIVE_TIMEOUT_S",
        Kind::Uint { min: 1 },
        true,
        "seconds --exclusive waits for the other live runs to end before the run fails",
    ),
    k(
        "live_runs_dir",
        Some("--live-runs-dir"),
        "PHASE1_LIVE_RUNS_DIR",
        Kind::Path,
        true,
        "the machine-wide registry of live kvcr-e2e runs (one owner file per run), shared by every checkout and user",
    ),
    k(
        "startup_timeout_s",
        Some("--startup-timeout-s"),
        "PHASE1_STARTUP_TIMEOUT_S",
        Kind::Uint { min: 1 },
        true,
        "seconds the whole stack may take to become ready",
    ),
    k(
        "request_timeout_s",
        Some("--request-timeout-s"),
        "PHASE1_REQUEST_TIMEOUT_S",
        Kind::Uint { min: 1 },
        true,
        "seconds one request may take",
    ),
    k(
        "kill_timeout_s",
        Some("--kill-timeout-s"),
        "PHASE1_KILL_TIMEOUT_S",
        Kind::Uint { min: 1 },
        false,
        "seconds a SIGKILLed worker or frontend may take to be gone before the kill counts as not applied (default: the request timeout)",
    ),
    k(
        "probe_timeout_s",
        Some("--probe-timeout-s"),
        "PHASE1_PROBE_TIMEOUT_S",
        Kind::Uint { min: 1 },
        true,
        "seconds one readiness or health probe of a starting stack may take (each is retried until the startup timeout)",
    ),
    k(
        "case_timeout_s",
        Some("--case-timeout-s"),
        "PHASE1_CASE_TIMEOUT_S",
        Kind::Uint { min: 1 },
        true,
        "seconds one case may take; past it the case fails with what it was doing, and the stack is restored",
    ),
    k(
        "reference_cache",
        Some("--reference-cache"),
        "PHASE1_REFERENCE_CACHE",
        Kind::Path,
        true,
        "directory of digest-keyed reference-phase results",
    ),
    k(
        "log_level",
        Some("--log-level"),
        "PHASE1_LOG_LEVEL",
        Kind::Choice(super::log_level::LogLevel::WORDS),
        true,
        "harness log level",
    ),
    k(
        "cpu_engine.block_size",
        None,
        "PHASE1_CPU_ENGINE_BLOCK_SIZE",
        Kind::Uint { min: 1 },
        true,
        "CPU engine --block-size: tokens per KV block",
    ),
    k(
        "cpu_engine.attn_pages",
        None,
        "PHASE1_CPU_ENGINE_ATTN_PAGES",
        Kind::Uint { min: 1 },
        true,
        "CPU engine --attn-pages: attention pages per block",
    ),
    k(
        "cpu_engine.attn_page_bytes",
        None,
        "PHASE1_CPU_ENGINE_ATTN_PAGE_BYTES",
        Kind::Uint { min: 1 },
        true,
        "CPU engine --attn-page-bytes",
    ),
    k(
        "cpu_engine.ssm_parts",
        None,
        "PHASE1_CPU_ENGINE_SSM_PARTS",
        Kind::Uint { min: 0 },
        true,
        "CPU engine --ssm-parts (hybrid geometry only)",
    ),
    k(
        "cpu_engine.ssm_part_bytes",
        None,
        "PHASE1_CPU_ENGINE_SSM_PART_BYTES",
        Kind::Uint { min: 1 },
        true,
        "CPU engine --ssm-part-bytes (hybrid geometry only)",
    ),
    k(
        "cpu_engine.device_cache_blocks",
        None,
        "PHASE1_CPU_ENGINE_DEVICE_CACHE_BLOCKS",
        Kind::Uint { min: 1 },
        true,
        "CPU engine --device-cache-blocks",
    ),
    k(
        "cpu_engine.host_tier_blocks",
        None,
        "PHASE1_CPU_ENGINE_HOST_TIER_BLOCKS",
        Kind::Uint { min: 0 },
        true,
        "CPU engine --host-tier-blocks",
    ),
    k(
        "cpu_engine.prefill_us_per_token",
        None,
        "PHASE1_CPU_ENGINE_PREFILL_US_PER_TOKEN",
        Kind::Uint { min: 0 },
        true,
        "CPU engine --prefill-us-per-token",
    ),
    k(
        "cpu_engine.decode_us_per_token",
        None,
        "PHASE1_CPU_ENGINE_DECODE_US_PER_TOKEN",
        Kind::Uint { min: 0 },
        true,
        "CPU engine --decode-us-per-token",
    ),
    k(
        "cpu_engine.local_pool_blocks",
        None,
        "PHASE1_CPU_ENGINE_LOCAL_POOL_BLOCKS",
        Kind::Uint { min: 1 },
        true,
        "CPU engine --local-pool-blocks",
    ),
    k(
        "cpu_engine.stats_interval_s",
        None,
        "PHASE1_CPU_ENGINE_STATS_INTERVAL_S",
        Kind::PositiveFloat,
        true,
        "CPU engine --stats-interval-s",
    ),
    k(
        "cpu_engine.guard_pool_gb",
        None,
        "PHASE1_CPU_ENGINE_GUARD_POOL_GB",
        Kind::PositiveFloat,
        true,
        "size of the Guard service's pool, in GB",
    ),
    k(
        "cpu_engine.guard_pool_blocks",
        None,
        "PHASE1_CPU_ENGINE_GUARD_POOL_BLOCKS",
        Kind::Uint { min: 1 },
        false,
        "size of each Guard pool in blocks (overrides guard_pool_gb; unset = guard_pool_gb)",
    ),
    k(
        "cpu_engine.guard_heartbeat_timeout_ms",
        None,
        "PHASE1_CPU_ENGINE_GUARD_HEARTBEAT_TIMEOUT_MS",
        Kind::Uint { min: 1000 },
        false,
        "the Guard service's --heartbeat-timeout-ms (unset = pidfd-only promotion)",
    ),
    k(
        "cpu_engine.operation_timeout_ms",
        None,
        "PHASE1_CPU_ENGINE_OPERATION_TIMEOUT_MS",
        Kind::Uint { min: 1 },
        false,
        "CPU engine --operation-timeout-ms: KVCR's operation timeout (unset = 5000)",
    ),
    k(
        "cpu_engine.g3_capacity_blocks",
        None,
        "PHASE1_CPU_ENGINE_G3_CAPACITY_BLOCKS",
        Kind::Uint { min: 1 },
        false,
        "KVCR's disk tier (G3) per worker, in blocks (unset = no G3)",
    ),
    k(
        "cpu_engine.hits_after_prefill",
        None,
        "PHASE1_CPU_ENGINE_HITS_AFTER_PREFILL",
        Kind::Bool,
        false,
        "CPU engine --hits-after-prefill: a block computed by a prefill in flight is no device hit for other requests until that prefill ends (unset = false)",
    ),
    k(
        "cpu_engine.framework_regions",
        None,
        "PHASE1_CPU_ENGINE_FRAMEWORK_REGIONS",
        Kind::Bool,
        false,
        "CPU engine --framework-regions: computed blocks stay in the engine's own memory (no deposit into KVCR's pool) and a peer reads them through KVCR's framework pins, device cache first (unset = false)",
    ),
    k(
        "cpu_engine.kvcr_fetch",
        None,
        "PHASE1_CPU_ENGINE_KVCR_FETCH",
        Kind::Bool,
        false,
        "CPU engine --kvcr-fetch: blocks a hinted peer or the disk tier holds are staged into KVCR's pool with KVCR.fetch, then delivered from it (unset = false)",
    ),
    k(
        "cpu_engine.align_sequence",
        None,
        "PHASE1_CPU_ENGINE_ALIGN_SEQUENCE",
        Kind::Bool,
        false,
        "CPU engine --align-sequence: each request's block sequence is told to KVCR (KVCR.align_sequence) (unset = false)",
    ),
    k(
        "cpu_engine.abort_cancelled",
        None,
        "PHASE1_CPU_ENGINE_ABORT_CANCELLED",
        Kind::Bool,
        false,
        "CPU engine --abort-cancelled: the KVCR operation of a request cancelled while it waits on it is aborted (KVCR.abort) (unset = false)",
    ),
    k(
        "cpu_engine.kvcr_diagnostics",
        None,
        "PHASE1_CPU_ENGINE_KVCR_DIAGNOSTICS",
        Kind::Bool,
        false,
        "CPU engine --kvcr-diagnostics: KVCR's own diagnostics on (KVCR_KEY_HISTORY, KVCR_DIAGNOSTICS, its logger at DEBUG): every block-key event and query decision in the worker's log (unset = false)",
    ),
    k(
        "cpu_engine.api_misuse_probe",
        None,
        "PHASE1_CPU_ENGINE_API_MISUSE_PROBE",
        Kind::Bool,
        false,
        "CPU engine --api-misuse-probe: the worker serves POST /kvcr/probe/api_misuse, calls KVCR must refuse made on its own KVCR (TC-18) (unset = false)",
    ),
    k(
        "cpu_engine.counting_policy",
        None,
        "PHASE1_CPU_ENGINE_COUNTING_POLICY",
        Kind::Bool,
        false,
        "CPU engine --placement-policy counting: KVCR gets the engine's own placement policy, which answers as KVCR's default, counts every call (cpu_engine_kvcr_policy_calls) and misbehaves while the hostile_policy switch is on (unset = false: KVCR's default policy)",
    ),
    k(
        "cpu_engine.ucx_keepalive_s",
        None,
        "PHASE1_CPU_ENGINE_UCX_KEEPALIVE_S",
        Kind::Uint { min: 1 },
        false,
        "UCX keepalive of the CPU engine's workers, seconds (UCX_KEEPALIVE_INTERVAL, UCX_TCP_KEEPIDLE/KEEPINTVL, UCX_TCP_KEEPCNT=2); unset = UCX's defaults",
    ),
    k(
        "cpu_engine.agg_workers",
        None,
        "PHASE1_CPU_ENGINE_AGG_WORKERS",
        Kind::Uint { min: 2 },
        false,
        "aggregated workers of the CPU engine's agg topology, slots A, B, C, ... (at most 26; unset = 2)",
    ),
    k(
        "cpu_engine.capacity_low_watermark_percent",
        None,
        "PHASE1_CPU_ENGINE_CAPACITY_LOW_WATERMARK_PERCENT",
        Kind::Uint { min: 1 },
        false,
        "CPU engine --capacity-low-watermark-percent: KVCR asks the engine for capacity when a pool's free and evictable slots fall below this share of it, 1-100 (unset = never)",
    ),
    k(
        "cpu_engine.g3_dir",
        None,
        "PHASE1_CPU_ENGINE_G3_DIR",
        Kind::Path,
        false,
        "directory of the workers' G3 files (unset = <run dir>/g3)",
    ),
    k(
        "prompts.seed",
        None,
        "PHASE1_PROMPTS_SEED",
        Kind::Uint { min: 0 },
        true,
        "seed of the generated prompt set",
    ),
    k(
        "prompts.families",
        Some("--prompt-families"),
        "PHASE1_PROMPTS_FAMILIES",
        Kind::Uint { min: 1 },
        true,
        "prompt families (distinct shared prefixes)",
    ),
    k(
        "prompts.prefix_blocks",
        None,
        "PHASE1_PROMPTS_PREFIX_BLOCKS",
        Kind::Uint { min: 1 },
        true,
        "full KV blocks in each family's shared prefix",
    ),
    k(
        "prompts.suffix_tokens",
        None,
        "PHASE1_PROMPTS_SUFFIX_TOKENS",
        Kind::Uint { min: 1 },
        true,
        "tokens of each prompt's own suffix",
    ),
    k(
        "prompts.max_tokens",
        None,
        "PHASE1_PROMPTS_MAX_TOKENS",
        Kind::Uint { min: 1 },
        true,
        "tokens generated per request",
    ),
];

/// The spec of a profile key (dotted), if known.
pub fn by_key(key: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.key == key)
}

/// The spec of a harness flag (`--engine`), including `--profile`.
pub fn by_flag(flag: &str) -> Option<&'static KeySpec> {
    if flag == "--profile" {
        return Some(&PROFILE);
    }
    KEYS.iter().find(|k| k.flag == Some(flag))
}

/// The spec of an environment variable, including `PHASE1_PROFILE`.
pub fn by_env(var: &str) -> Option<&'static KeySpec> {
    if var == PROFILE.env {
        return Some(&PROFILE);
    }
    KEYS.iter().find(|k| k.env == var)
}

/// All harness flags, including `--profile` and `--help-harness`.
pub fn harness_flags() -> Vec<&'static str> {
    let mut flags: Vec<&'static str> = KEYS.iter().filter_map(|k| k.flag).collect();
    flags.push("--profile");
    flags.push("--help-harness");
    flags
}

/// Edit distance, for "did you mean" suggestions.
pub(crate) fn closest<'a>(
    seen: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = levenshtein(seen, c);
        if best.map_or(true, |(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .map(|(_, c)| c.to_string())
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The harness part of `--help`: every flag with its environment twin.
pub fn harness_help() -> String {
    let mut out = String::from(
        "kvcr-e2e phase1 harness flags (put them after `--`; each has a PHASE1_* environment twin;\n\
         precedence: fixtures/profiles/default.toml < --profile < environment < flags):\n\n",
    );
    let mut rows: Vec<&KeySpec> = KEYS.iter().filter(|k| k.flag.is_some()).collect();
    rows.push(&PROFILE);
    for spec in rows {
        let Some(flag) = spec.flag else { continue };
        let ph = spec.kind.placeholder();
        let left = if ph.is_empty() {
            flag.to_string()
        } else {
            format!("{flag} <{ph}>")
        };
        out.push_str(&format!(
            "  {left:<44} env {}\n      {}\n",
            spec.env, spec.help
        ));
    }
    out.push_str(&format!(
        "  {}\n      {}\n\nEngine knobs (cpu_engine.*) and prompt settings (prompts.*) are set in a profile\n\
         or through their environment twins, e.g. PHASE1_CPU_ENGINE_BLOCK_SIZE.\n\
         libtest flags (--list, --exact, --ignored, --test-threads N, filters, ...) pass through.\n",
        "--help-harness", "print this help and exit"
    ));
    out
}
