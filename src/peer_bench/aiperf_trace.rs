//! AIPerf's trace mode: a Mooncake trace replayed by `aiperf profile
//! --custom-dataset-type mooncake_trace --fixed-schedule`, and its
//! per-request records read back.
//!
//! AIPerf turns each hash id into `block_size` tokens sampled from its
//! corpus with the given tokenizer (the block's first token is the
//! tokenizer's BOS), seeded by `--random-seed` and the trace file's bytes,
//! and sends the decoded text. So equal ids are equal text, as ours are
//! equal token ids: the cache-hit structure is the trace's, the token
//! contents are not ours. It has no rate factor for this dataset (its
//! `--synthesis-speedup-ratio` rebuilds the hash ids), so the trace is
//! given to it already scaled ([`scaled_trace`]).
//!
//! AIPerf 0.13 loads a tokenizer directory given as a path in its main
//! process but not in its decode workers, which force Hugging Face's
//! offline mode and then look the path up as a hub id. [`TokenizerCache`]
//! puts the tokenizer's files into a private hub cache under a repo id
//! instead, and the run is offline throughout.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::workload::Trace;

/// The per-request file of `--export-level records`.
pub const RECORDS_FILE: &str = "profile_export.jsonl";

/// The trace's requests as JSONL with their arrivals in milliseconds from
/// the first one, divided by `rate_factor` (fractions kept: AIPerf reads
/// float timestamps), every other field as it was.
/// The instants are [`Trace::schedule`]'s, which our replay sends at.
pub fn scaled_trace(trace: &Trace, rate_factor: f64) -> String {
    assert!(
        rate_factor.is_finite() && rate_factor > 0.0,
        "a rate factor is a positive number, not {rate_factor}"
    );
    let first = trace.requests().first().map_or(0, |r| r.timestamp);
    trace
        .requests()
        .iter()
        .map(|r| {
            let line = serde_json::json!({
                "timestamp": (r.timestamp - first) as f64 / rate_factor,
                "input_length": r.input_length,
                "output_length": r.output_length,
                "hash_ids": r.hash_ids,
            });
            format!("{line}\n")
        })
        .collect()
}

/// The files a tokenizer is loaded from (weights are never copied).
const TOKENIZER_FILES: [&str; 9] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "config.json",
    "generation_config.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
];

/// A tokenizer directory as a repo of a private Hugging Face hub cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerCache {
    /// `HF_HUB_CACHE` for AIPerf.
    pub hub_cache: PathBuf,
    /// What `--tokenizer` names.
    pub repo_id: String,
}

impl TokenizerCache {
    /// Copies `tokenizer_dir`'s tokenizer files into
    /// `hub_cache/models--kvcr-e2e--<name>/snapshots/<digest>/`, with
    /// `refs/main` naming that snapshot.
    pub fn prepare(hub_cache: &Path, tokenizer_dir: &Path) -> Result<Self, String> {
        let name = tokenizer_dir
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .unwrap_or("tokenizer")
            .replace(
                |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
                "-",
            );
        let files: Vec<PathBuf> = TOKENIZER_FILES
            .iter()
            .map(|f| tokenizer_dir.join(f))
            .filter(|p| p.is_file())
            .collect();
        if !files
            .iter()
            .any(|p| p.ends_with("tokenizer.json") || p.ends_with("tokenizer.model"))
        {
            return Err(format!(
                "{} has no tokenizer.json or tokenizer.model: is it a model directory?",
                tokenizer_dir.display()
            ));
        }
        let mut digest = Sha256::new();
        let mut contents = Vec::new();
        for path in &files {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            digest.update(path.file_name().unwrap_or_default().as_encoded_bytes());
            digest.update(&bytes);
            contents.push((path.file_name().unwrap_or_default().to_owned(), bytes));
        }
        let revision = hex::encode(&digest.finalize()[..20]);
        let repo = hub_cache.join(format!("models--kvcr-e2e--{name}"));
        let snapshot = repo.join("snapshots").join(&revision);
        let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        std::fs::create_dir_all(&snapshot).map_err(|e| io(&snapshot, e))?;
        std::fs::create_dir_all(repo.join("refs")).map_err(|e| io(&repo, e))?;
        for (file, bytes) in contents {
            let to = snapshot.join(file);
            std::fs::write(&to, bytes).map_err(|e| io(&to, e))?;
        }
        let main = repo.join("refs/main");
        std::fs::write(&main, &revision).map_err(|e| io(&main, e))?;
        Ok(TokenizerCache {
            hub_cache: hub_cache.to_path_buf(),
            repo_id: format!("kvcr-e2e/{name}"),
        })
    }
}

/// One AIPerf trace replay.
#[derive(Debug, Clone)]
pub struct TraceRun<'a> {
    /// Python of the `aiperf` env.
    pub python: &'a Path,
    pub tokenizer: &'a TokenizerCache,
    /// The frontend's base URL.
    pub url: &'a str,
    pub model: &'a str,
    /// The trace as AIPerf is to send it ([`scaled_trace`]).
    pub trace_file: &'a Path,
    pub block_size: u32,
    /// `--random-seed`: another seed, other text for the same ids (0 is
    /// AIPerf's "no seed", so it is never used).
    pub seed: u64,
    /// `--artifact-dir`.
    pub dir: &'a Path,
}

impl TraceRun<'_> {
    /// `python -m aiperf profile ...`, streaming completions at the trace's
    /// timestamps, every request's metrics in [`RECORDS_FILE`].
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(self.python);
        cmd.args(["-m", "aiperf", "profile", "--model", self.model])
            .args(["--tokenizer", &self.tokenizer.repo_id])
            .args(["--url", self.url])
            .args(["--endpoint-type", "completions", "--streaming"])
            .arg("--input-file")
            .arg(self.trace_file)
            .args([
                "--custom-dataset-type",
                "mooncake_trace",
                "--fixed-schedule",
            ])
            .args(["--isl-block-size", &self.block_size.to_string()])
            .args(["--random-seed", &self.seed.max(1).to_string()])
            .args(["--export-level", "records"])
            .args(super::aiperf::QUIET)
            .arg("--artifact-dir")
            .arg(self.dir)
            .env("HF_HUB_CACHE", &self.tokenizer.hub_cache)
            .env("HF_HUB_OFFLINE", "1")
            .env("TRANSFORMERS_OFFLINE", "1");
        cmd
    }
}

/// One request as AIPerf recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The trace line it replayed (0-based), from its conversation id
    /// (`session_000042`: AIPerf numbers a seeded trace's sessions in
    /// order, one per line); `None` when the id has another form.
    pub index: Option<usize>,
    pub ttft_ms: Option<f64>,
    /// Prompt tokens as AIPerf counted them with its tokenizer.
    pub client_prompt_tokens: Option<u64>,
    /// Prompt tokens as the server reported them (`usage.prompt_tokens`).
    pub server_prompt_tokens: Option<u64>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

#[derive(Deserialize)]
struct MetricValue {
    value: Value,
    unit: String,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default)]
    benchmark_phase: Option<String>,
}

#[derive(Deserialize)]
struct Line {
    metadata: Metadata,
    #[serde(default)]
    metrics: std::collections::HashMap<String, MetricValue>,
    #[serde(default)]
    error: Option<Value>,
}

/// Reads [`RECORDS_FILE`] from AIPerf's artifact directory.
pub fn read_records(dir: &Path) -> Result<Vec<Record>, String> {
    let path = dir.join(RECORDS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (AIPerf writes it with --export-level records)",
            path.display()
        )
    })?;
    parse_records(&text, &path.display().to_string())
}

/// The profiling records of a [`RECORDS_FILE`]'s text (warm-up records are
/// left out); `origin` names it in errors.
pub fn parse_records(text: &str, origin: &str) -> Result<Vec<Record>, String> {
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(line)
            .map_err(|e| format!("{origin} line {}: not an AIPerf record ({e})", i + 1))?;
        if l.metadata.benchmark_phase.as_deref() == Some("warmup") {
            continue;
        }
        let ttft_ms = match l.metrics.get("time_to_first_token") {
            Some(m) => Some(
                milliseconds(m)
                    .map_err(|e| format!("{origin} line {}: time_to_first_token {e}", i + 1))?,
            ),
            None => None,
        };
        let count = |name: &str| l.metrics.get(name).and_then(|m| m.value.as_u64());
        records.push(Record {
            index: l
                .metadata
                .conversation_id
                .as_deref()
                .and_then(|c| c.strip_prefix("session_"))
                .and_then(|n| n.parse().ok()),
            ttft_ms,
            client_prompt_tokens: count("input_sequence_length"),
            server_prompt_tokens: count("usage_prompt_tokens"),
            error: l.error.filter(|e| !e.is_null()).map(|e| {
                e.get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| e.to_string(), str::to_string)
            }),
        });
    }
    Ok(records)
}

fn milliseconds(m: &MetricValue) -> Result<f64, String> {
    let v = m
        .value
        .as_f64()
        .ok_or_else(|| format!("{} is not a number", m.value))?;
    let scale = match m.unit.as_str() {
        "ms" => 1.0,
        "us" | "µs" => 1e-3,
        "ns" => 1e-6,
        "s" | "sec" => 1e3,
        other => return Err(format!("has unit {other:?}, not a time")),
    };
    Ok(v * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn the_scaled_trace_starts_at_zero_and_divides_the_gaps() {
        let t = Trace::parse(
            "{\"timestamp\":1000,\"input_length\":20,\"output_length\":4,\"hash_ids\":[0,1]}\n\
             {\"timestamp\":1250,\"input_length\":32,\"output_length\":8,\"hash_ids\":[0,2]}\n\
             {\"timestamp\":2001,\"input_length\":16,\"output_length\":1,\"hash_ids\":[3]}\n",
            16,
            "t",
        )
        .unwrap();
        let text = scaled_trace(&t, 2.0);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let at: Vec<f64> = lines
            .iter()
            .map(|l| l["timestamp"].as_f64().unwrap())
            .collect();
        assert_eq!(at, vec![0.0, 125.0, 500.5]);
        assert_eq!(lines[1]["hash_ids"], serde_json::json!([0, 2]));
        assert_eq!(lines[1]["input_length"], 32);
        assert_eq!(lines[1]["output_length"], 8);
        // Our plan sends at the same instants.
        for ((d, _), aiperf) in t.schedule(2.0).zip(&at) {
            assert!((d.as_secs_f64() * 1000.0 - aiperf).abs() < 1e-6);
        }
        // At rate 1 the gaps are the trace's.
        let same: Vec<f64> = scaled_trace(&t, 1.0)
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["timestamp"]
                    .as_f64()
                    .unwrap()
            })
            .collect();
        assert_eq!(same, vec![0.0, 250.0, 1001.0]);
    }

    #[test]
    fn records_are_read_as_aiperf_writes_them() {
        let path = root().join("fixtures/aiperf/trace-profile-export.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let r = parse_records(&text, "fixture").unwrap();
        // The warm-up record is left out.
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].index, Some(0));
        assert!((r[0].ttft_ms.unwrap() - 25.485888).abs() < 1e-9);
        assert_eq!(
            (r[0].client_prompt_tokens, r[0].server_prompt_tokens),
            (Some(216), Some(216))
        );
        assert_eq!(r[1].index, Some(1));
        assert_eq!(r[0].error, None);
        let failed = &r[2];
        assert_eq!(failed.index, Some(3));
        assert_eq!(failed.ttft_ms, None);
        assert_eq!(
            failed.error.as_deref(),
            Some("no responders for model tiny")
        );
    }

    #[test]
    fn a_ttft_in_other_units_is_converted_and_a_bad_line_named() {
        let line = |unit: &str| {
            format!(
                "{{\"metadata\":{{\"conversation_id\":\"a-uuid\"}},\"metrics\":{{\"time_to_first_token\":{{\"value\":2500000,\"unit\":\"{unit}\"}}}}}}"
            )
        };
        let r = parse_records(&line("ns"), "x").unwrap();
        assert_eq!((r[0].ttft_ms, r[0].index), (Some(2.5), None));
        let err = parse_records(&line("tokens"), "x").unwrap_err();
        assert!(
            err.contains("line 1") && err.contains("\"tokens\""),
            "{err}"
        );
        let err = parse_records("\n{\"metrics\":{}}", "f.jsonl").unwrap_err();
        assert!(
            err.starts_with("f.jsonl line 2: not an AIPerf record"),
            "{err}"
        );
    }

    #[test]
    fn the_tokenizer_becomes_a_repo_of_a_private_hub_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let c = TokenizerCache::prepare(tmp.path(), &root().join("fixtures/models/tiny")).unwrap();
        assert_eq!(c.repo_id, "kvcr-e2e/tiny");
        let repo = tmp.path().join("models--kvcr-e2e--tiny");
        let revision = std::fs::read_to_string(repo.join("refs/main")).unwrap();
        assert_eq!(revision.len(), 40);
        assert!(repo
            .join("snapshots")
            .join(&revision)
            .join("tokenizer.json")
            .is_file());
        // Again: the same snapshot.
        let again =
            TokenizerCache::prepare(tmp.path(), &root().join("fixtures/models/tiny")).unwrap();
        assert_eq!(again, c);
        assert_eq!(
            std::fs::read_to_string(repo.join("refs/main")).unwrap(),
            revision
        );
        // A directory without a tokenizer is refused.
        let err = TokenizerCache::prepare(tmp.path(), tmp.path()).unwrap_err();
        assert!(err.contains("no tokenizer.json"), "{err}");
    }

    #[test]
    fn the_command_replays_the_trace_offline_at_its_timestamps() {
        let cache = TokenizerCache {
            hub_cache: "/c".into(),
            repo_id: "kvcr-e2e/tiny".into(),
        };
        let run = TraceRun {
            python: Path::new("/py"),
            tokenizer: &cache,
            url: "http://127.0.0.1:8000",
            model: "tiny",
            trace_file: Path::new("/t.jsonl"),
            block_size: 16,
            seed: 0,
            dir: Path::new("/out"),
        };
        let cmd = run.command();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let after = |flag: &str| {
            let i = args
                .iter()
                .position(|a| a == flag)
                .unwrap_or_else(|| panic!("{flag}"));
            args[i + 1].clone()
        };
        assert_eq!(after("--custom-dataset-type"), "mooncake_trace");
        assert!(args.contains(&"--fixed-schedule".to_string()));
        assert_eq!(after("--isl-block-size"), "16");
        assert_eq!(after("--tokenizer"), "kvcr-e2e/tiny");
        assert_eq!(after("--input-file"), "/t.jsonl");
        assert_eq!(after("--export-level"), "records");
        // Seed 0 would be AIPerf's "unseeded" (session ids then uuids).
        assert_eq!(after("--random-seed"), "1");
        let envs: Vec<(String, String)> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.unwrap().to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert!(envs.contains(&("HF_HUB_CACHE".into(), "/c".into())));
        assert!(envs.contains(&("HF_HUB_OFFLINE".into(), "1".into())));
    }
}
