//! One client, one phase: start the client process, meter its CPU, wait for
//! it with a deadline, read its log, pair it with the server's streams and
//! measure.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::clock::monotonic_ns;
use super::cpu_meter::{cpu_between, reap, CpuMeter};
use super::measure::{self, Spread};
use super::observed::ClientLog;
use super::sse_server::{Shape, SseServer};
use super::{aiperf, vllm_bench, Load, Peer, Tools};
use crate::wait::{self, Poll};

/// A phase: how the server streams and how hard the client drives it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Phase {
    pub name: &'static str,
    pub shape: Shape,
    pub load: Load,
}

/// What one client measured in one phase.
#[derive(Debug, Clone, Serialize)]
pub struct PeerResult {
    pub peer: Peer,
    pub phase: &'static str,
    pub streams: usize,
    pub chunks: usize,
    /// First request read → last chunk sent.
    pub window_s: f64,
    /// The client's process tree, over the window.
    pub cpu_s: f64,
    pub chunks_per_cpu_s: Option<f64>,
    /// Client chunk stamp − server send stamp.
    pub chunk_overhead_us: Option<Spread>,
    /// Client TTFT − server TTFT, signed.
    pub ttft_error_us: Option<Spread>,
    /// |Client TTFT − server TTFT|.
    pub ttft_abs_error_us: Option<Spread>,
    /// |Client ITL − server ITL|.
    pub itl_abs_error_us: Option<Spread>,
    /// The client's own start-to-exit time.
    pub process_s: f64,
}

fn client_command(
    peer: Peer,
    tools: &Tools,
    url: &str,
    load: &Load,
    dir: &Path,
) -> Result<Command, String> {
    match peer {
        Peer::Ours => {
            let mut cmd = Command::new(&tools.ours);
            cmd.args(["bench-client", "--url", url])
                .args(["--concurrency", &load.concurrency.to_string()])
                .args(["--requests", &load.requests.to_string()])
                .args(["--max-tokens", &load.chunks.to_string()])
                .arg("--out")
                .arg(dir.join("ours.json"));
            Ok(cmd)
        }
        Peer::Aiperf => {
            let python = tools.aiperf.as_ref().ok_or("no aiperf env")?;
            Ok(aiperf::command(python, &tools.tokenizer, url, load, dir))
        }
        Peer::VllmBench => {
            let python = tools.vllm.as_ref().ok_or("no vLLM env")?;
            Ok(vllm_bench::command(
                python,
                &tools.tokenizer,
                url,
                load,
                dir,
            ))
        }
    }
}

fn read_log(peer: Peer, dir: &Path) -> Result<ClientLog, String> {
    match peer {
        Peer::Ours => {
            let path = dir.join("ours.json");
            let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
        }
        Peer::Aiperf => aiperf::read(dir),
        Peer::VllmBench => vllm_bench::read(dir),
    }
}

fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Runs `peer` through `phase` against `server`; files go under `dir`.
pub fn run_peer(
    server: &SseServer,
    peer: Peer,
    phase: &Phase,
    tools: &Tools,
    dir: &Path,
    timeout: Duration,
) -> Result<PeerResult, String> {
    let dir: PathBuf = dir.join(format!("{}-{}", phase.name, peer.name()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    server.set_shape(phase.shape);
    server.take_served();
    let mut cmd = client_command(peer, tools, server.url(), &phase.load, &dir)?;
    let log_path = dir.join("client.log");
    let log = fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
    let started = Instant::now();
    let spawned_at_ns = monotonic_ns();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{} could not start: {e}", peer.name()))?;
    let meter = CpuMeter::start(child.id(), Duration::from_millis(20), spawned_at_ns);
    let waited = wait::until(
        format!("{} to finish phase {}", peer.name(), phase.name),
        timeout,
        Duration::from_millis(5),
        || match reap(child.id()) {
            Ok(Some(reaped)) => Poll::Ready(reaped),
            Ok(None) => Poll::Pending("still running".into()),
            Err(e) => Poll::Abort(e.to_string()),
        },
    );
    let process_s = started.elapsed().as_secs_f64();
    let reaped = match waited {
        Ok(reaped) => reaped,
        Err(e) => {
            let _ = meter.finish(None);
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{e}\n{}", tail(&log_path)));
        }
    };
    let samples = meter.finish(Some(reaped.total));
    if !reaped.success {
        return Err(format!(
            "{} exited with code {}; its output ({}) ends:\n{}",
            peer.name(),
            reaped.code,
            log_path.display(),
            tail(&log_path)
        ));
    }
    let log = read_log(peer, &dir)?;
    if !log.errors.is_empty() {
        return Err(format!(
            "{}: {} requests failed, first: {}",
            peer.name(),
            log.errors.len(),
            log.errors[0]
        ));
    }
    if log.requests.len() != phase.load.requests {
        return Err(format!(
            "{} reported {} requests, {} were asked for",
            peer.name(),
            log.requests.len(),
            phase.load.requests
        ));
    }
    let served = server.take_served();
    let pairs =
        measure::pair(&log.requests, &served).map_err(|e| format!("{}: {e}", peer.name()))?;
    let (from, to) = measure::window_ns(&pairs).ok_or("no streams")?;
    let cpu = cpu_between(&samples, from, to)
        .ok_or_else(|| format!("{}: the CPU samples do not cover the streams", peer.name()))?;
    let abs: Vec<f64> = measure::ttft_error_us(&pairs)
        .iter()
        .map(|e| e.abs())
        .collect();
    Ok(PeerResult {
        peer,
        phase: phase.name,
        streams: pairs.len(),
        chunks: pairs.iter().map(|p| p.seen.chunk_ns.len()).sum(),
        window_s: (to - from) as f64 / 1e9,
        cpu_s: cpu.as_secs_f64(),
        chunks_per_cpu_s: measure::chunks_per_cpu_s(&pairs, cpu),
        chunk_overhead_us: Spread::of(&measure::chunk_overhead_us(&pairs)),
        ttft_error_us: Spread::of(&measure::ttft_error_us(&pairs)),
        ttft_abs_error_us: Spread::of(&abs),
        itl_abs_error_us: Spread::of(&measure::itl_error_us(&pairs)),
        process_s,
    })
}
