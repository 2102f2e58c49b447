//! AIPerf (`aiperf profile`, PyPI `aiperf`) from its own pinned env
//! ([`crate::pyenv::AIPERF`]): OpenAI completions, streaming, a closed loop
//! at the phase's concurrency. With `--export-level raw` it writes every
//! request's `start_perf_ns` and each SSE message's `perf_ns`
//! (`time.perf_counter_ns`, the same clock as the server's stamps) and text
//! to `profile_export_raw.jsonl`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

use super::observed::{ClientLog, Observed};
use super::sse_server::tag_of;
use super::Load;

/// The per-request file of `--export-level raw`.
pub const RAW_FILE: &str = "profile_export_raw.jsonl";

/// No terminal UI, no server-metrics scrape, no GPU telemetry: AIPerf
/// alone with the stack, its records to its artifacts only.
pub const QUIET: [&str; 4] = [
    "--ui-type",
    "none",
    "--no-server-metrics",
    "--no-gpu-telemetry",
];

/// `python -m aiperf profile ...` writing its artifacts into `dir`.
pub fn command(python: &Path, tokenizer: &Path, url: &str, load: &Load, dir: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.args(["-m", "aiperf", "profile", "--model", "tiny"])
        .arg("--tokenizer")
        .arg(tokenizer)
        .args([
            "--url",
            url,
            "--endpoint-type",
            "completions",
            "--streaming",
        ])
        .args(["--concurrency", &load.concurrency.to_string()])
        .args(["--request-count", &load.requests.to_string()])
        .args(["--isl", "8", "--osl", &load.chunks.to_string()])
        .args(["--random-seed", "1", "--export-level", "raw"])
        .args(QUIET)
        .arg("--artifact-dir")
        .arg(dir);
    // Not HF_HUB_OFFLINE: aiperf 0.13 then resolves even a local tokenizer
    // directory as a hub id and fails; a local path needs no network.
    cmd
}

#[derive(Deserialize)]
struct Packet {
    name: String,
    value: String,
}

#[derive(Deserialize)]
struct Message {
    perf_ns: u64,
    #[serde(default)]
    packets: Vec<Packet>,
}

#[derive(Deserialize)]
struct Raw {
    start_perf_ns: u64,
    #[serde(default)]
    responses: Vec<Message>,
    #[serde(default)]
    error: Option<Value>,
}

/// The text of a data packet's first choice; `None` for usage-only,
/// `[DONE]` and non-data packets.
fn content_text(packet: &Packet) -> Option<String> {
    if packet.name != "data" {
        return None;
    }
    let v: Value = serde_json::from_str(&packet.value).ok()?;
    let text = v.get("choices")?.get(0)?.get("text")?.as_str()?;
    (!text.is_empty()).then(|| text.to_string())
}

/// The raw record files: `profile_export_raw.jsonl`, or the record
/// processors' own `raw_records/*.jsonl` when they were not merged.
fn raw_files(dir: &Path) -> Vec<PathBuf> {
    let merged = dir.join(RAW_FILE);
    if merged.is_file() {
        return vec![merged];
    }
    let mut parts: Vec<PathBuf> = std::fs::read_dir(dir.join("raw_records"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    parts.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    parts.sort();
    parts
}

/// Reads the raw records aiperf wrote into `dir`.
pub fn read(dir: &Path) -> Result<ClientLog, String> {
    let files = raw_files(dir);
    if files.is_empty() {
        return Err(format!("aiperf wrote no raw records in {}", dir.display()));
    }
    let mut log = ClientLog::default();
    for path in files {
        read_file(&path, &mut log)?;
    }
    Ok(log)
}

fn read_file(path: &Path, log: &mut ClientLog) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let raw: Raw = serde_json::from_str(line).map_err(|e| {
            format!(
                "{} line {}: not an aiperf raw record ({e})",
                path.display(),
                i + 1
            )
        })?;
        if let Some(err) = raw.error.filter(|e| !e.is_null()) {
            log.errors.push(err.to_string());
            continue;
        }
        let mut tag = None;
        let mut chunk_ns = Vec::new();
        for m in &raw.responses {
            for text in m.packets.iter().filter_map(content_text) {
                tag = tag.or_else(|| tag_of(&text));
                chunk_ns.push(m.perf_ns);
            }
        }
        log.requests.push(Observed {
            tag,
            start_ns: raw.start_perf_ns,
            chunk_ns,
        });
    }
    Ok(())
}
