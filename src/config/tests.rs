//! Tests of the config module: splitting, layering, errors, the engine the
//! settings build, redaction.

use std::io::Write;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::engine::{GeometryKind as Geometry, Kind as Engine, Topology};

fn argv(args: &[&str]) -> Vec<String> {
    std::iter::once("phase1")
        .chain(args.iter().copied())
        .map(String::from)
        .collect()
}

fn split(args: &[&str]) -> Result<(HarnessArgs, Vec<String>), ConfigError> {
    split_args(argv(args))
}

fn resolve_with(args: &[&str], env: &[(&str, &str)]) -> Result<Resolved, ConfigError> {
    let (h, _) = split(args)?;
    resolve(&h, &Env::from_pairs(env.iter().copied()))
}

fn err(args: &[&str], env: &[(&str, &str)]) -> String {
    match resolve_with(args, env) {
        Ok(r) => panic!("expected an error, got {:?}", r.settings),
        Err(e) => e.to_string(),
    }
}

// ---- splitting -------------------------------------------------------------

#[test]
fn libtest_args_pass_through_in_order() {
    let (h, rest) = split(&[
        "--list",
        "--engine",
        "vllm",
        "TC-04",
        "--exact",
        "--test-threads",
        "1",
        "--nocapture",
        "--format=terse",
        "-q",
        "--ignored",
        "--skip",
        "TC-06",
        "--include-ignored",
    ])
    .unwrap();
    assert_eq!(h.get("engine"), Some("vllm"));
    assert_eq!(
        rest,
        argv(&[
            "--list",
            "TC-04",
            "--exact",
            "--test-threads",
            "1",
            "--nocapture",
            "--format=terse",
            "-q",
            "--ignored",
            "--skip",
            "TC-06",
            "--include-ignored",
        ])
    );
}

#[test]
fn both_flag_forms_and_last_wins() {
    let (h, rest) = split(&[
        "--engine=sglang",
        "--topology",
        "two-node",
        "--engine",
        "vllm",
    ])
    .unwrap();
    assert_eq!(h.get("engine"), Some("vllm"));
    assert_eq!(h.get("topology"), Some("two-node"));
    assert_eq!(rest, argv(&[]));
}

#[test]
fn every_harness_flag_is_stripped() {
    let (h, rest) = split(&[
        "--engine",
        "cpu",
        "--topology",
        "agg",
        "--geometry",
        "hybrid",
        "--cases",
        "TC-01,TC-03",
        "--perf-evict-filler",
        "9",
        "--perf-concurrency-levels",
        "1,2",
        "--perf-repeats",
        "2",
        "--run-dir",
        "/tmp/x",
        "--junit",
        "/tmp/j.xml",
        "--attach",
        "s.json",
        "--profile",
        "ci",
        "--python",
        "/usr/bin/python3",
        "--keep-stack",
        "--help-harness",
        "filter",
    ])
    .unwrap();
    assert_eq!(rest, argv(&["filter"]));
    assert_eq!(h.values.len(), 13);
    assert!(h.help_harness);
    assert_eq!(h.get("keep_stack"), Some("true"));
}

#[test]
fn libtest_option_values_are_not_taken_for_harness_flags() {
    let (h, rest) = split(&["--skip", "--engine", "x"]).unwrap();
    assert_eq!(h.values, vec![]);
    assert_eq!(rest, argv(&["--skip", "--engine", "x"]));
}

#[test]
fn double_dash_passes_the_rest_verbatim() {
    let (h, rest) = split(&["--engine", "vllm", "--", "--engine", "--weird"]).unwrap();
    assert_eq!(h.get("engine"), Some("vllm"));
    assert_eq!(rest, argv(&["--", "--engine", "--weird"]));
}

#[test]
fn help_is_noted_and_left_for_libtest() {
    let (h, rest) = split(&["--help"]).unwrap();
    assert!(h.help && !h.help_harness);
    assert_eq!(rest, argv(&["--help"]));
    let (h, rest) = split(&["-h"]).unwrap();
    assert!(h.help);
    assert_eq!(rest, argv(&["-h"]));
}

#[test]
fn unknown_flag_is_an_error_with_a_suggestion() {
    let e = split(&["--engin", "vllm"]).unwrap_err().to_string();
    assert!(e.contains("unknown flag `--engin`"), "{e}");
    assert!(e.contains("did you mean `--engine`"), "{e}");
    assert!(e.contains("--perf-evict-filler"), "{e}");
    assert!(e.contains("--test-threads"), "{e}");
    let e = split(&["-x"]).unwrap_err().to_string();
    assert!(e.contains("unknown flag `-x`"), "{e}");
}

#[test]
fn missing_value_names_the_flag() {
    let e = split(&["--engine"]).unwrap_err().to_string();
    assert_eq!(
        e,
        "flag --engine needs a value: write `--engine VALUE` or `--engine=VALUE` (accepted: cpu|vllm|sglang)"
    );
}

#[test]
fn to_argv_round_trips() {
    let (h, rest) = split(&["a", "--engine", "vllm", "--keep-stack", "--list"]).unwrap();
    let mut again = vec!["phase1".to_string()];
    again.extend(h.to_argv());
    again.extend(rest[1..].iter().cloned());
    assert_eq!(split_args(again).unwrap(), (h, rest));
}

#[test]
fn harness_help_lists_every_flag_and_env_twin() {
    let help = harness_help();
    for k in keys::KEYS.iter().filter(|k| k.flag.is_some()) {
        assert!(help.contains(k.flag.unwrap()), "{}", k.key);
        assert!(help.contains(k.env), "{}", k.env);
    }
    insta::assert_snapshot!(help);
}

// ---- layering --------------------------------------------------------------

#[test]
fn defaults_come_from_the_default_profile() {
    let r = resolve_with(&[], &[]).unwrap();
    let s = &r.settings;
    assert_eq!(s.engine, Engine::Cpu);
    assert_eq!(s.topology, Topology::Agg);
    assert_eq!(s.geometry, Geometry::Dense);
    assert_eq!(s.perf_concurrency_levels, vec![1, 2, 4, 8]);
    assert_eq!(s.perf_repeats, 10);
    assert_eq!(s.perf_kvcr_bench_ops, 400);
    assert_eq!(s.perf_sweep_requests, 24);
    assert_eq!(s.perf_sweep_waves, 6);
    assert_eq!(s.perf_sweep_mode, crate::config::SweepMode::Closed);
    assert_eq!(s.perf_sweep_rates, vec![5, 10, 20]);
    assert_eq!(s.perf_arrival_seed, 1);
    assert_eq!(s.tc06_cadence, Duration::from_millis(100));
    assert_eq!(s.startup_timeout, Duration::from_secs(180));
    assert_eq!(s.request_timeout, Duration::from_secs(60));
    assert_eq!(s.probe_timeout, Duration::from_secs(10));
    assert_eq!(s.case_timeout, Duration::from_secs(600));
    assert_eq!(s.run_dir, std::path::PathBuf::from("target/phase1/runs"));
    assert_eq!(
        s.reference_cache,
        std::path::PathBuf::from("target/phase1/reference-cache")
    );
    assert_eq!(s.cases, None);
    assert_eq!(s.junit, None);
    assert_eq!(s.cpu_engine.block_size, 16);
    assert_eq!(s.cpu_engine.attn_pages, 2);
    assert_eq!(s.cpu_engine.attn_page_bytes, 4096);
    assert_eq!(s.cpu_engine.ssm_parts, 3);
    assert_eq!(s.cpu_engine.ssm_part_bytes, 2048);
    assert_eq!(s.cpu_engine.device_cache_blocks, 64);
    assert_eq!(s.cpu_engine.host_tier_blocks, 16);
    assert_eq!(s.cpu_engine.prefill_us_per_token, 1000);
    assert_eq!(s.cpu_engine.decode_us_per_token, 1000);
    assert_eq!(s.cpu_engine.local_pool_blocks, 256);
    assert_eq!(s.cpu_engine.stats_interval_s, 1.0);
    assert_eq!(s.cpu_engine.guard_pool_gb, 0.05);
    assert_eq!(s.profile, "default");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(
        s.junit_path(std::path::Path::new("/r")),
        std::path::PathBuf::from("/r/junit.xml")
    );
    assert!(matches!(r.origin("engine"), Some(Origin::Default { line, .. }) if *line > 0));
}

#[test]
fn default_profile_sets_every_required_key_with_a_doc_comment() {
    let p = Profile::default_profile().unwrap();
    let lines: Vec<&str> = DEFAULT_PROFILE.lines().collect();
    for spec in keys::KEYS.iter().filter(|k| k.required) {
        let e = p.entries.iter().find(|e| e.key == spec.key);
        let e = e.unwrap_or_else(|| panic!("default.toml lacks {}", spec.key));
        let Origin::Default { line, .. } = e.origin else {
            panic!()
        };
        assert!(line > 1, "{}", spec.key);
        assert!(
            lines[line - 2].trim_start().starts_with('#'),
            "{} has no comment above it",
            spec.key
        );
    }
}

#[test]
fn builtin_profiles_parse() {
    for (name, _, _) in BUILTIN_PROFILES {
        let r = resolve_with(&["--profile", name], &[]).unwrap();
        assert_eq!(r.settings.profile, *name);
    }
    let r = resolve_with(&["--profile", "hybrid"], &[]).unwrap();
    assert_eq!(r.settings.geometry, Geometry::Hybrid);
    assert_eq!(r.settings.cpu_engine.pages_per_block(Geometry::Hybrid), 5);
    assert_eq!(
        r.settings.cpu_engine.bytes_per_block(Geometry::Hybrid),
        2 * 4096 + 3 * 2048
    );
    let r = resolve_with(&[], &[("PHASE1_PROFILE", "ci")]).unwrap();
    assert_eq!(r.settings.perf_repeats, 2);
    assert_eq!(r.settings.perf_concurrency_levels, vec![1, 2, 4]);
    assert!(matches!(
        r.origin("perf_repeats"),
        Some(Origin::Profile { .. })
    ));
}

#[test]
fn layers_override_in_order() {
    // profile ci sets perf_repeats 2; env sets 5; flag sets 7.
    let r = resolve_with(&["--profile", "ci"], &[("PHASE1_PERF_REPEATS", "5")]).unwrap();
    assert_eq!(r.settings.perf_repeats, 5);
    assert_eq!(
        r.origin("perf_repeats"),
        Some(&Origin::Env {
            var: "PHASE1_PERF_REPEATS".into()
        })
    );
    let r = resolve_with(
        &["--profile", "ci", "--perf-repeats=7"],
        &[("PHASE1_PERF_REPEATS", "5")],
    )
    .unwrap();
    assert_eq!(r.settings.perf_repeats, 7);
    assert_eq!(
        r.origin("perf_repeats"),
        Some(&Origin::Flag {
            flag: "--perf-repeats".into()
        })
    );
    // The flag's profile wins over the environment's.
    let r = resolve_with(&["--profile", "hybrid"], &[("PHASE1_PROFILE", "ci")]).unwrap();
    assert_eq!(r.settings.profile, "hybrid");
    assert_eq!(r.settings.perf_repeats, 10);
}

#[test]
fn every_env_twin_sets_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, "{}").unwrap();
    let f = file.to_str().unwrap();
    let env = [
        ("PHASE1_ENGINE", "vllm"),
        ("PHASE1_TOPOLOGY", "2p1d"),
        ("PHASE1_GEOMETRY", "hybrid"),
        ("PHASE1_CASES", "tc-01, TC-03,TC-01"),
        ("PHASE1_PERF_EVICT_FILLER", "40"),
        ("PHASE1_PERF_CONCURRENCY_LEVELS", "1, 16"),
        ("PHASE1_PERF_REPEATS", "4"),
        ("PHASE1_PERF_SWEEP_REQUESTS", "40"),
        ("PHASE1_PERF_SWEEP_MODE", "Open"),
        ("PHASE1_PERF_SWEEP_RATES", "3,30"),
        ("PHASE1_PERF_ARRIVAL_SEED", "99"),
        ("PHASE1_TC06_CADENCE_MS", "50"),
        ("PHASE1_RUN_DIR", "/tmp/runs"),
        ("PHASE1_JUNIT", "/tmp/j.xml"),
        ("PHASE1_ATTACH", f),
        ("PHASE1_PYTHON", f),
        ("PHASE1_KEEP_STACK", "yes"),
        ("PHASE1_STARTUP_TIMEOUT_S", "9"),
        ("PHASE1_REQUEST_TIMEOUT_S", "8"),
        ("PHASE1_REFERENCE_CACHE", "/tmp/ref"),
        ("PHASE1_LOG_LEVEL", "DEBUG"),
        ("PHASE1_CPU_ENGINE_BLOCK_SIZE", "32"),
        ("PHASE1_PROMPTS_SEED", "7"),
    ];
    let r = resolve_with(&[], &env).unwrap();
    let s = &r.settings;
    assert_eq!(s.engine, Engine::Vllm);
    assert_eq!(s.topology, Topology::TwoP1D);
    assert_eq!(s.geometry, Geometry::Hybrid);
    assert_eq!(
        s.cases,
        Some(vec!["TC-01".to_string(), "TC-03".to_string()])
    );
    assert_eq!(s.perf_evict_filler, 40);
    assert_eq!(s.perf_concurrency_levels, vec![1, 16]);
    assert_eq!(s.perf_repeats, 4);
    assert_eq!(s.perf_sweep_requests, 40);
    assert_eq!(s.perf_sweep_mode, crate::config::SweepMode::Open);
    assert_eq!(s.perf_sweep_rates, vec![3, 30]);
    assert_eq!(s.perf_arrival_seed, 99);
    assert_eq!(s.tc06_cadence, Duration::from_millis(50));
    assert_eq!(s.run_dir.to_str(), Some("/tmp/runs"));
    assert_eq!(
        s.junit.as_deref().and_then(|p| p.to_str()),
        Some("/tmp/j.xml")
    );
    assert_eq!(s.attach.as_deref(), Some(file.as_path()));
    assert_eq!(s.python.as_deref(), Some(file.as_path()));
    assert!(s.keep_stack);
    assert_eq!(s.startup_timeout, Duration::from_secs(9));
    assert_eq!(s.request_timeout, Duration::from_secs(8));
    assert_eq!(s.reference_cache.to_str(), Some("/tmp/ref"));
    assert_eq!(s.log_level, LogLevel::Debug);
    assert_eq!(s.cpu_engine.block_size, 32);
    assert_eq!(s.prompts.seed, 7);
    assert!(s.selects("TC-03/remote"));
    assert!(!s.selects("TC-02"));
}

#[test]
fn the_kill_timeout_follows_the_request_timeout_unless_set() {
    let s = resolve_with(&["--request-timeout-s", "15"], &[])
        .unwrap()
        .settings;
    assert_eq!(s.kill_timeout, Duration::from_secs(15));
    let r = resolve_with(
        &["--request-timeout-s", "15"],
        &[("PHASE1_KILL_TIMEOUT_S", "40")],
    )
    .unwrap();
    assert_eq!(r.settings.kill_timeout, Duration::from_secs(40));
    assert!(matches!(
        r.origin("kill_timeout_s"),
        Some(Origin::Env { .. })
    ));
    let s = resolve_with(&["--kill-timeout-s=5"], &[]).unwrap().settings;
    assert_eq!(
        (s.kill_timeout, s.request_timeout),
        (Duration::from_secs(5), Duration::from_secs(60))
    );
    let e = err(&["--kill-timeout-s", "0"], &[]);
    assert!(
        e.contains("for flag --kill-timeout-s: expected an integer ≥ 1"),
        "{e}"
    );
}

#[test]
fn durations_keep_their_keys_and_units_in_config_json() {
    let s = resolve_with(&[], &[]).unwrap().settings;
    let json = serde_json::to_value(&s).unwrap_or_default();
    assert_eq!(json["request_timeout_s"], 60);
    assert_eq!(json["kill_timeout_s"], 60);
    assert_eq!(json["probe_timeout_s"], 10);
    assert_eq!(json["tc06_cadence_ms"], 100);
    assert_eq!(json["engine"], "cpu");
}

#[test]
fn empty_env_is_unset_and_unknown_env_warns() {
    let r = resolve_with(
        &[],
        &[
            ("PHASE1_ENGINE", ""),
            ("PHASE1_ENGIN", "vllm"),
            ("HOME", "/h"),
        ],
    )
    .unwrap();
    assert_eq!(r.settings.engine, Engine::Cpu);
    assert_eq!(r.warnings.len(), 1);
    assert!(
        r.warnings[0].contains("PHASE1_ENGIN is not a harness setting"),
        "{:?}",
        r.warnings
    );
    assert!(
        r.warnings[0].contains("did you mean PHASE1_ENGINE?"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn profile_from_a_path() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    writeln!(
        f,
        "engine = \"sglang\"\n[cpu_engine]\nblock_size = 8\n[prompts]\nmax_tokens = 4"
    )
    .unwrap();
    let path = f.path().to_str().unwrap();
    let r = resolve_with(&["--profile", path], &[]).unwrap();
    assert_eq!(r.settings.engine, Engine::Sglang);
    assert_eq!(r.settings.cpu_engine.block_size, 8);
    assert_eq!(r.settings.prompts.max_tokens, 4);
    assert_eq!(r.settings.cpu_engine.attn_pages, 2);
    match r.origin("cpu_engine.block_size") {
        Some(Origin::Profile { line, key, .. }) => {
            assert_eq!(*line, 3);
            assert_eq!(key, "cpu_engine.block_size");
        }
        other => panic!("{other:?}"),
    }
}

// ---- errors ----------------------------------------------------------------

fn profile_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn bad_engine_from_each_layer() {
    assert_eq!(
        err(&["--engine", "nope"], &[]),
        "invalid value `nope` for flag --engine: expected one of cpu, vllm, sglang"
    );
    assert_eq!(
        err(&[], &[("PHASE1_ENGINE", "nope")]),
        "invalid value `nope` for environment variable PHASE1_ENGINE: expected one of cpu, vllm, sglang"
    );
    let f = profile_file("# x\nengine = \"nope\"\n");
    let e = err(&["--profile", f.path().to_str().unwrap()], &[]);
    assert_eq!(
        e,
        format!(
            "invalid value `nope` for profile key `engine` ({}:2): expected one of cpu, vllm, sglang",
            f.path().display()
        )
    );
}

#[test]
fn bad_topology_geometry_log_level() {
    assert!(err(&["--topology", "3p"], &[]).contains("expected one of agg, 2p1d, two-node"));
    assert!(err(&["--geometry=moe"], &[]).contains("expected one of dense, hybrid"));
    assert!(err(&["--log-level", "loud"], &[])
        .contains("expected one of error, warn, info, debug, trace"));
}

#[test]
fn bad_concurrency_levels() {
    let expected = "expected a comma-separated list of at least one positive integer, e.g. 1,2,4,8";
    assert_eq!(
        err(&["--perf-concurrency-levels", "1,x"], &[]),
        format!("invalid value `1,x` for flag --perf-concurrency-levels: {expected}")
    );
    assert_eq!(
        err(&["--perf-concurrency-levels="], &[]),
        format!("invalid value `` for flag --perf-concurrency-levels: {expected}")
    );
    assert!(err(&["--perf-concurrency-levels", "0,2"], &[]).contains(expected));
    let f = profile_file("perf_concurrency_levels = []\n");
    assert!(err(&["--profile", f.path().to_str().unwrap()], &[]).contains(expected));
}

#[test]
fn filler_zero_when_eviction_needed() {
    let e = err(&["--perf-evict-filler", "0"], &[]);
    assert!(e.starts_with("invalid value `0` for flag --perf-evict-filler: expected an integer ≥ 1 while TC-02 or TC-05"), "{e}");
    let e = err(&["--cases", "TC-02"], &[("PHASE1_PERF_EVICT_FILLER", "0")]);
    assert!(
        e.contains("environment variable PHASE1_PERF_EVICT_FILLER"),
        "{e}"
    );
    // Not needed: fine.
    let r = resolve_with(&["--perf-evict-filler", "0", "--cases", "TC-01,TC-04"], &[]).unwrap();
    assert_eq!(r.settings.perf_evict_filler, 0);
}

#[test]
fn small_filler_warns() {
    let r = resolve_with(&["--perf-evict-filler", "2"], &[]).unwrap();
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("eviction may not happen")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn bad_numbers_cases_bools_paths() {
    assert!(err(&["--perf-repeats", "0"], &[]).contains("expected an integer ≥ 1"));
    assert!(err(&["--perf-repeats", "-1"], &[]).contains("invalid value `-1`"));
    assert!(err(&["--tc06-cadence-ms", "fast"], &[]).contains("flag --tc06-cadence-ms"));
    assert!(err(&["--cases", "TC-90"], &[]).contains("case ids out of TC-01, TC-02"));
    assert!(err(&["--keep-stack=maybe"], &[]).contains("expected true or false"));
    assert!(err(&[], &[("PHASE1_CPU_ENGINE_STATS_INTERVAL_S", "-1")]).contains("a positive number"));
    assert!(
        err(&[], &[("PHASE1_CPU_ENGINE_BLOCK_SIZE", "99999999999")]).contains("fits in 32 bits")
    );
    let e = err(&["--attach", "/nonexistent/stack.json"], &[]);
    assert_eq!(
        e,
        "invalid value `/nonexistent/stack.json` for flag --attach: expected a path that exists and is a file"
    );
    assert!(err(&["--python", "/nonexistent/python"], &[]).contains("flag --python"));
}

#[test]
fn hybrid_needs_ssm_parts() {
    let e = err(
        &["--geometry", "hybrid"],
        &[("PHASE1_CPU_ENGINE_SSM_PARTS", "0")],
    );
    assert!(
        e.contains("environment variable PHASE1_CPU_ENGINE_SSM_PARTS"),
        "{e}"
    );
}

#[test]
fn malformed_profile_names_file_and_line() {
    let f = profile_file("engine = \"cpu\"\n\nperf_repeats = = 3\n");
    let e = err(&["--profile", f.path().to_str().unwrap()], &[]);
    assert!(
        e.starts_with(&format!("profile {}:3:", f.path().display())),
        "{e}"
    );
    assert!(e.contains("not valid TOML"), "{e}");
}

#[test]
fn unknown_profile_key_names_file_line_and_suggestion() {
    let f = profile_file("engine = \"cpu\"\n[cpu_engine]\nblock_siz = 4\n");
    let e = err(&["--profile", f.path().to_str().unwrap()], &[]);
    assert!(
        e.starts_with(&format!(
            "profile {}:3: unknown key `cpu_engine.block_siz`",
            f.path().display()
        )),
        "{e}"
    );
    assert!(e.contains("did you mean `cpu_engine.block_size`"), "{e}");
}

#[test]
fn profile_not_found_lists_what_was_tried() {
    let e = err(&["--profile", "nosuch"], &[]);
    assert!(
        e.starts_with("profile `nosuch` (from flag --profile) not found"),
        "{e}"
    );
    assert!(e.contains("default, hybrid, ci"), "{e}");
    assert!(e.contains("fixtures/profiles/nosuch.toml"), "{e}");
}

#[test]
fn profile_value_of_the_wrong_shape() {
    let f = profile_file("[prompts]\nseed = { a = 1 }\n");
    let e = err(&["--profile", f.path().to_str().unwrap()], &[]);
    assert!(e.contains("profile key `prompts.seed`"), "{e}");
    assert!(e.contains(":2)"), "{e}");
}

// ---- the engine the settings build ---------------------------------------

#[test]
fn settings_build_the_engine_they_name() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (flags, name, workers) in [
        (&[][..], "cpu", 2),
        (&["--topology", "2p1d"][..], "cpu", 3),
        (&["--profile", "phase3"][..], "cpu", 3),
        (&["--profile", "vllm-cpu"][..], "vllm", 2),
        (&["--engine", "sglang"][..], "sglang", 2),
    ] {
        let s = resolve_with(flags, &[])
            .unwrap_or_else(|e| panic!("{e}"))
            .settings;
        let e = s
            .build_engine(root)
            .unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        assert_eq!(
            (e.name(), e.worker_plans().len()),
            (name, workers),
            "{flags:?}"
        );
    }
}

// ---- redaction -------------------------------------------------------------

#[test]
fn secret_names() {
    for n in [
        "HF_TOKEN",
        "aws_secret_access_key",
        "DB_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "ApiKey",
    ] {
        assert!(redact::is_secret_name(n), "{n}");
    }
    for n in ["HOME", "PATH", "PHASE1_ENGINE"] {
        assert!(!redact::is_secret_name(n), "{n}");
    }
}

#[test]
fn redaction_of_env_text_and_json() {
    let env = [
        ("HF_TOKEN", "hf_abcdef123456"),
        ("HOME", "/home/u"),
        ("MAX_TOKENS", "16"),
        ("X_KEY", "false"),
    ];
    let map: std::collections::BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let red = redact::redact_env(&map);
    assert_eq!(red["HF_TOKEN"], redact::REDACTED);
    assert_eq!(red["HOME"], "/home/u");
    let r = Redactor::from_env(env);
    assert_eq!(
        r.len(),
        1,
        "short, numeric and boolean values are not scrubbed from text"
    );
    assert_eq!(
        r.scrub("curl -H 'Authorization: Bearer hf_abcdef123456' max 16 false"),
        "curl -H 'Authorization: Bearer [REDACTED]' max 16 false"
    );
    let j = serde_json::json!({"cmd": ["x", "--token=hf_abcdef123456"], "n": 16, "hf_abcdef123456": true});
    let s = serde_json::to_string(&r.scrub_json(j)).unwrap();
    assert!(!s.contains("hf_abcdef"), "{s}");
    assert!(Redactor::none().is_empty());
}

#[test]
fn process_env_is_redacted() {
    // No env mutation (tests run in parallel): check the invariant on whatever is set.
    for (k, v) in redacted_env() {
        if redact::is_secret_name(&k) {
            assert_eq!(v, redact::REDACTED);
        }
    }
}

// ---- properties ------------------------------------------------------------

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("--engine".to_string()),
        Just("--engine=vllm".to_string()),
        Just("--cases".to_string()),
        Just("--keep-stack".to_string()),
        Just("--perf-concurrency-levels=1,2".to_string()),
        Just("--list".to_string()),
        Just("--exact".to_string()),
        Just("--test-threads".to_string()),
        Just("--skip".to_string()),
        Just("--format=json".to_string()),
        Just("-q".to_string()),
        Just("-Zunstable-options".to_string()),
        Just("--".to_string()),
        Just("--help".to_string()),
        Just("--help-harness".to_string()),
        Just("TC-01".to_string()),
        "[-a-z0-9=,]{0,12}",
        any::<String>(),
    ]
}

proptest! {
    #[test]
    fn arbitrary_argv_never_panics_and_round_trips(args in proptest::collection::vec(token(), 0..12)) {
        let argv: Vec<String> = std::iter::once("phase1".to_string()).chain(args).collect();
        if let Ok((h, rest)) = split_args(argv.clone()) {
            let mut again = vec!["phase1".to_string()];
            again.extend(h.to_argv());
            again.extend(rest[1..].iter().cloned());
            let (h2, rest2) = split_args(again).expect("re-split of a valid split");
            prop_assert_eq!(&h2.values, &h.values);
            prop_assert_eq!(h2.help_harness, h.help_harness);
            prop_assert_eq!(rest2, rest);
            // Resolution never panics either.
            let _ = resolve(&h, &Env::default());
        }
    }
}

#[test]
fn several_positional_filters_run_the_union_and_skip_stays() {
    let (_, libtest) = split(&["TC-01", "--skip", "TC-01::b", "TC-03", "--exact"]).unwrap();
    let (filters, rest) = super::take_filters(libtest);
    assert_eq!(filters.patterns, ["TC-01", "TC-03"]);
    assert_eq!(rest, ["phase1", "--skip", "TC-01::b", "--exact"]);
    assert!(filters.selects("TC-01::generation_correctness", false));
    assert!(filters.selects("TC-03::hinted_peer_transfer", false));
    assert!(!filters.selects("TC-02::local_dram_flow", false));
    assert!(!filters.selects("TC-01::generation_correctness", true));
    assert!(super::Filters::default().selects("anything", true));
    // libtest-mimic accepts what is left.
    let args = libtest_mimic::Arguments::from_iter(rest);
    assert_eq!(args.skip, ["TC-01::b"]);
    assert!(args.filter.is_none() && args.exact);
    // After a bare `--`, everything is a filter.
    let (filters, rest) = super::take_filters(argv(&["--list", "--", "--odd", "TC-05"]));
    assert_eq!(filters.patterns, ["--odd", "TC-05"]);
    assert_eq!(rest, ["phase1", "--list"]);
}

#[test]
fn a_device_cache_too_small_for_the_longest_prompt_is_an_error() {
    // Default prompts: 4 prefix blocks of 16 tokens; the extended prompt has
    // one more block and an 8-token suffix: 88 tokens. Four cached blocks
    // serve at most 79.
    let e = err(&[], &[("PHASE1_CPU_ENGINE_DEVICE_CACHE_BLOCKS", "4")]);
    assert!(e.contains("88 tokens"), "{e}");
    assert!(e.contains("device_cache_blocks ≥ 5"), "{e}");
    assert!(resolve_with(&[], &[("PHASE1_CPU_ENGINE_DEVICE_CACHE_BLOCKS", "5")]).is_ok());
}

#[test]
fn every_profile_in_the_fixtures_resolves() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/profiles");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let arg = path.to_str().unwrap();
        if let Err(e) = resolve_with(&["--profile", arg], &[]) {
            panic!("{}: {e}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 6, "only {seen} profiles in {}", dir.display());
}
