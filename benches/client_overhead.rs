//! The streaming client's own cost: per-chunk overhead (client chunk
//! timestamp − server write instant), single-stream throughput, and client
//! CPU at concurrency 8, against an in-process SSE server on plain OS
//! threads. Method and recorded results: docs/benchmarks.md.
//!
//! `cargo bench --bench client_overhead`; options are `KVCR_BENCH_*`
//! environment variables (see [`Options::from_env`]).

use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use kvcr_e2e::client::{Client, Completion, StreamOutcome};
use kvcr_e2e::peer_bench::sse_server::read_request;
use serde_json::{json, Value};

/// Run options, each overridable by an environment variable.
#[derive(Debug, Clone, Copy)]
struct Options {
    /// Chunks per stream in the paced single-stream phase.
    chunks: usize,
    /// Rounds of the single-stream phases.
    rounds: usize,
    /// Streams in flight in the concurrency phase.
    concurrency: usize,
    /// Chunks per stream in the concurrency phase.
    cpu_chunks: usize,
    /// Rounds of the concurrency phase.
    cpu_rounds: usize,
    /// Server pause before each chunk in the paced phases.
    gap: Duration,
    /// Chunks of the unpaced (burst) stream.
    burst_chunks: usize,
}

impl Options {
    fn from_env() -> Self {
        let get = |name: &str, default: usize| -> usize {
            match std::env::var(name) {
                Ok(v) => v
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}={v:?} is not a count")),
                Err(_) => default,
            }
        };
        Options {
            chunks: get("KVCR_BENCH_CHUNKS", 256),
            rounds: get("KVCR_BENCH_ROUNDS", 8),
            concurrency: get("KVCR_BENCH_CONCURRENCY", 8),
            cpu_chunks: get("KVCR_BENCH_CPU_CHUNKS", 64),
            cpu_rounds: get("KVCR_BENCH_CPU_ROUNDS", 30),
            gap: Duration::from_micros(get("KVCR_BENCH_GAP_US", 1000) as u64),
            burst_chunks: get("KVCR_BENCH_BURST_CHUNKS", 4096),
        }
    }
}

// ---------------------------------------------------------------- CPU clocks

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({id}) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (all threads, exited ones included).
fn process_cpu() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

// ---------------------------------------------------------------- SSE server

/// What a request asks the server for; carried in the prompt text as
/// `bench tag=<n> chunks=<n> gap_us=<n>`, so the server needs no shared state.
#[derive(Debug, Clone, Copy)]
struct Script {
    tag: u64,
    chunks: usize,
    gap: Duration,
}

impl Script {
    fn prompt(&self) -> String {
        format!(
            "bench tag={} chunks={} gap_us={}",
            self.tag,
            self.chunks,
            self.gap.as_micros()
        )
    }

    fn parse(body: &str) -> Option<Script> {
        let field = |key: &str| -> Option<u64> {
            let at = body.find(key)? + key.len();
            let digits: String = body[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        };
        Some(Script {
            tag: field("tag=")?,
            chunks: usize::try_from(field("chunks=")?).ok()?,
            gap: Duration::from_micros(field("gap_us=")?),
        })
    }
}

/// One served stream, reported once `[DONE]` is written.
struct Served {
    tag: u64,
    /// Instant just before each data chunk's write (not `[DONE]`).
    writes: Vec<Instant>,
    /// CPU of the connection's thread.
    cpu: Duration,
}

/// An SSE server on 127.0.0.1:0: one OS thread per connection, blocking
/// writes with TCP_NODELAY, so its CPU is attributable per thread.
struct SseServer {
    url: String,
    reports: mpsc::Receiver<Served>,
    /// CPU of the accept thread so far.
    accept_cpu_ns: Arc<AtomicU64>,
    /// Reports that arrived before they were asked for.
    pending: HashMap<u64, Served>,
}

/// A Dynamo-shaped completion chunk (text "x", token id 5, decode worker 1).
fn sse_chunk(finish: Option<&str>) -> Vec<u8> {
    let chunk = json!({
        "id": "cmpl-bench", "object": "text_completion", "created": 1_764_441_600u64, "model": "tiny",
        "choices": [{"index": 0, "text": "x", "finish_reason": finish, "logprobs": null}],
        "usage": null,
        "nvext": {"worker_id": {"prefill_worker_id": null, "decode_worker_id": 1}, "completion_token_ids": [5]}
    });
    format!("data: {chunk}\n\n").into_bytes()
}

fn serve(mut sock: TcpStream, reports: mpsc::Sender<Served>) {
    let cpu_start = thread_cpu();
    let Some(script) = read_request(&mut sock).and_then(|r| Script::parse(&r.body)) else {
        return;
    };
    let _ = sock.set_nodelay(true);
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    if sock.write_all(head).is_err() {
        return;
    }
    // Payloads are built up front so a stamp is followed by the write alone.
    let body = sse_chunk(None);
    let last = sse_chunk(Some("length"));
    let mut writes = Vec::with_capacity(script.chunks);
    for i in 0..script.chunks {
        if !script.gap.is_zero() {
            thread::sleep(script.gap);
        }
        let payload = if i + 1 == script.chunks { &last } else { &body };
        let at = Instant::now();
        if sock.write_all(payload).is_err() {
            return;
        }
        writes.push(at);
    }
    if sock.write_all(b"data: [DONE]\n\n").is_err() {
        return;
    }
    let cpu = thread_cpu().saturating_sub(cpu_start);
    let _ = reports.send(Served {
        tag: script.tag,
        writes,
        cpu,
    });
    let _ = sock.shutdown(Shutdown::Write);
}

impl SseServer {
    fn start() -> SseServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let url = format!(
            "http://{}",
            listener.local_addr().expect("listener has an address")
        );
        let (tx, reports) = mpsc::channel();
        let accept_cpu_ns = Arc::new(AtomicU64::new(0));
        let accept_cpu = accept_cpu_ns.clone();
        thread::Builder::new()
            .name("sse-accept".into())
            .spawn(move || {
                for sock in listener.incoming() {
                    let Ok(sock) = sock else { continue };
                    let tx = tx.clone();
                    thread::Builder::new()
                        .name("sse-conn".into())
                        .spawn(move || serve(sock, tx))
                        .expect("spawn connection thread");
                    accept_cpu.store(thread_cpu().as_nanos() as u64, Ordering::Relaxed);
                }
            })
            .expect("spawn accept thread");
        SseServer {
            url,
            reports,
            accept_cpu_ns,
            pending: HashMap::new(),
        }
    }

    fn accept_cpu(&self) -> Duration {
        Duration::from_nanos(self.accept_cpu_ns.load(Ordering::Relaxed))
    }

    /// The report of stream `tag`, waiting for it if need be.
    fn report(&mut self, tag: u64) -> Served {
        loop {
            if let Some(r) = self.pending.remove(&tag) {
                return r;
            }
            let r = self
                .reports
                .recv_timeout(Duration::from_secs(10))
                .expect("server reports every stream it served");
            self.pending.insert(r.tag, r);
        }
    }
}

// ---------------------------------------------------------------- phases

/// One measured phase: `rounds` × `concurrency` streams of one script.
struct Phase {
    name: &'static str,
    concurrency: usize,
    rounds: usize,
    chunks: usize,
    gap: Duration,
}

/// What a phase measured.
struct PhaseResult {
    name: &'static str,
    concurrency: usize,
    streams: usize,
    chunks_per_stream: usize,
    gap: Duration,
    wall: Duration,
    process_cpu: Duration,
    server_cpu: Duration,
    /// Client timestamp − server write instant, per chunk, in µs.
    overhead_us: Vec<f64>,
    /// The same for each stream's first chunk only (what TTFT carries).
    first_overhead_us: Vec<f64>,
    /// First → last chunk of each stream, client side.
    stream_spans: Vec<Duration>,
}

impl PhaseResult {
    fn chunks(&self) -> usize {
        self.overhead_us.len()
    }

    fn client_cpu(&self) -> Duration {
        self.process_cpu.saturating_sub(self.server_cpu)
    }
}

fn run_phase(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    server: &mut SseServer,
    next_tag: &mut u64,
    phase: &Phase,
) -> PhaseResult {
    let mut outcomes: Vec<(Script, Instant, StreamOutcome)> = Vec::new();
    let mut served: HashMap<u64, Served> = HashMap::new();
    let mut server_cpu = Duration::ZERO;
    let accept_before = server.accept_cpu();
    let cpu_before = process_cpu();
    let wall_before = Instant::now();
    for _ in 0..phase.rounds {
        let scripts: Vec<Script> = (0..phase.concurrency)
            .map(|_| {
                *next_tag += 1;
                Script {
                    tag: *next_tag,
                    chunks: phase.chunks,
                    gap: phase.gap,
                }
            })
            .collect();
        let round = rt.block_on(async {
            let tasks: Vec<_> = scripts
                .iter()
                .map(|s| {
                    let client = client.clone();
                    let req = Completion::new("tiny", s.prompt()).max_tokens(s.chunks as u32);
                    tokio::spawn(async move {
                        // `stream` takes its send instant just after this one.
                        let before = Instant::now();
                        let out = client.stream(&req).await;
                        (before, out)
                    })
                })
                .collect();
            let mut done = Vec::with_capacity(tasks.len());
            for t in tasks {
                done.push(t.await.expect("stream task ran to completion"));
            }
            done
        });
        for (script, (before, out)) in scripts.into_iter().zip(round) {
            let out = out.unwrap_or_else(|e| panic!("stream {} failed: {e}", script.tag));
            outcomes.push((script, before, out));
        }
        // Collected inside the window: the server threads' CPU is subtracted.
        for (script, _, _) in outcomes.iter().rev().take(phase.concurrency) {
            let r = server.report(script.tag);
            server_cpu += r.cpu;
            served.insert(script.tag, r);
        }
    }
    let wall = wall_before.elapsed();
    let process = process_cpu().saturating_sub(cpu_before);
    server_cpu += server.accept_cpu().saturating_sub(accept_before);

    let mut overhead_us = Vec::new();
    let mut first_overhead_us = Vec::new();
    let mut stream_spans = Vec::new();
    for (script, before, out) in &outcomes {
        let served = &served[&script.tag];
        assert_eq!(
            served.writes.len(),
            out.chunks.len(),
            "stream {}: chunks written vs received",
            script.tag
        );
        for (i, (written, chunk)) in served.writes.iter().zip(&out.chunks).enumerate() {
            let seen = *before + chunk.at;
            let us = match seen.checked_duration_since(*written) {
                Some(d) => d.as_secs_f64() * 1e6,
                None => -(written.duration_since(seen).as_secs_f64() * 1e6),
            };
            overhead_us.push(us);
            if i == 0 {
                first_overhead_us.push(us);
            }
        }
        if let (Some(first), Some(last)) = (out.chunks.first(), out.chunks.last()) {
            stream_spans.push(last.at.saturating_sub(first.at));
        }
    }
    PhaseResult {
        name: phase.name,
        concurrency: phase.concurrency,
        streams: outcomes.len(),
        chunks_per_stream: phase.chunks,
        gap: phase.gap,
        wall,
        process_cpu: process,
        server_cpu,
        overhead_us,
        first_overhead_us,
        stream_spans,
    }
}

// ---------------------------------------------------------------- report

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn summary(values: &[f64]) -> Value {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    json!({
        "n": v.len(),
        "min": v.first(), "p50": percentile(&v, 50.0), "p90": percentile(&v, 90.0),
        "p99": percentile(&v, 99.0), "max": v.last(), "mean": mean,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl PhaseResult {
    fn to_json(&self) -> Value {
        let chunks = self.chunks() as f64;
        // Per stream: chunks after the first over first → last chunk.
        let stream_rates: Vec<f64> = self
            .stream_spans
            .iter()
            .filter(|s| !s.is_zero())
            .map(|s| (self.chunks_per_stream as f64 - 1.0) / s.as_secs_f64())
            .collect();
        json!({
            "phase": self.name,
            "concurrency": self.concurrency,
            "streams": self.streams,
            "chunks_per_stream": self.chunks_per_stream,
            "server_gap_us": self.gap.as_micros() as u64,
            "chunks": self.chunks(),
            "wall_s": self.wall.as_secs_f64(),
            // Unpaced, chunks queue behind each other: not an overhead figure.
            "overhead_is_queueing": self.gap.is_zero(),
            "overhead_us": summary(&self.overhead_us),
            "first_chunk_overhead_us": summary(&self.first_overhead_us),
            "process_cpu_ms": ms(self.process_cpu),
            "server_cpu_ms": ms(self.server_cpu),
            "client_cpu_ms": ms(self.client_cpu()),
            "client_cpu_ms_per_wall_s": ms(self.client_cpu()) / self.wall.as_secs_f64(),
            "client_cpu_us_per_chunk": ms(self.client_cpu()) * 1e3 / chunks,
            "chunks_per_wall_s": chunks / self.wall.as_secs_f64(),
            "stream_chunks_per_s": summary(&stream_rates),
        })
    }
}

fn read_loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Cost of what `Client::stream` does between the bench's `before` instant
/// and its own send instant (request text and URL), in µs: the amount by
/// which the measured overhead may read low. Median of 21 batch means, so a
/// preempted batch does not skew it.
fn anchor_bias_us(client: &Client) -> f64 {
    const BATCH: u32 = 500;
    let req = Completion::new("tiny", "bench tag=0 chunks=256 gap_us=1000").max_tokens(256);
    let mut batches: Vec<f64> = (0..21)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..BATCH {
                let text = std::hint::black_box(&req).to_string();
                let url = format!("{}{}", client.base_url(), "/v1/completions");
                std::hint::black_box((text, url));
            }
            start.elapsed().as_secs_f64() * 1e6 / f64::from(BATCH)
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

fn print_table(results: &[Value]) {
    println!(
        "{:<10} {:>4} {:>7} | {:>8} {:>8} {:>8} {:>8} | {:>10} {:>10} | {:>10}",
        "phase",
        "conc",
        "chunks",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "mean µs",
        "cpu ms/s",
        "cpu µs/ch",
        "chunks/s",
    );
    for r in results {
        let o = &r["overhead_us"];
        let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        // Unpaced streams queue: their "overhead" is backlog, shown as "-".
        let cell = |v: &Value| {
            if r["overhead_is_queueing"].as_bool().unwrap_or(false) {
                "-".to_string()
            } else {
                format!("{:.1}", f(v))
            }
        };
        println!(
            "{:<10} {:>4} {:>7} | {:>8} {:>8} {:>8} {:>8} | {:>10.1} {:>10.2} | {:>10.0}",
            r["phase"].as_str().unwrap_or("?"),
            r["concurrency"].as_u64().unwrap_or(0),
            r["chunks"].as_u64().unwrap_or(0),
            cell(&o["p50"]),
            cell(&o["p90"]),
            cell(&o["p99"]),
            cell(&o["mean"]),
            f(&r["client_cpu_ms_per_wall_s"]),
            f(&r["client_cpu_us_per_chunk"]),
            f(&r["stream_chunks_per_s"]["p50"]),
        );
    }
}

fn main() {
    let opts = Options::from_env();
    let load_start = read_loadavg();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut server = SseServer::start();
    // Only streams: their limits bound each request.
    let overall = kvcr_e2e::client::StreamLimits::default().overall;
    let client = Client::new(server.url.clone(), overall).expect("client for the local server");
    let mut tag = 0u64;

    let phases = [
        Phase {
            name: "warmup",
            concurrency: 1,
            rounds: 2,
            chunks: 32,
            gap: Duration::ZERO,
        },
        Phase {
            name: "paced",
            concurrency: 1,
            rounds: opts.rounds,
            chunks: opts.chunks,
            gap: opts.gap,
        },
        Phase {
            name: "burst",
            concurrency: 1,
            rounds: opts.rounds,
            chunks: opts.burst_chunks,
            gap: Duration::ZERO,
        },
        Phase {
            name: "paced-conc",
            concurrency: opts.concurrency,
            rounds: opts.cpu_rounds,
            chunks: opts.cpu_chunks,
            gap: opts.gap,
        },
    ];
    let started = Instant::now();
    let results: Vec<Value> = phases
        .iter()
        .map(|p| run_phase(&rt, &client, &mut server, &mut tag, p))
        .filter(|r| r.name != "warmup")
        .map(|r| r.to_json())
        .collect();
    let bias = anchor_bias_us(&client);
    let load_end = read_loadavg();

    let date = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "unknown".into());
    let nproc = thread::available_parallelism().map_or(0, |n| n.get());
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "client_overhead ({profile}) {date}, {nproc} cpus ({}), load {load_start} -> {load_end}, {:.1} s",
        cpu_model(),
        started.elapsed().as_secs_f64()
    );
    println!(
        "overhead = client chunk timestamp - server write instant; may read low by {bias:.2} µs (request setup before send)"
    );
    print_table(&results);

    let report = json!({
        "bench": "client_overhead",
        "date": date,
        "profile": profile,
        "machine": {
            "nproc": nproc,
            "cpu_model": cpu_model(),
            "loadavg_start": load_start,
            "loadavg_end": load_end,
        },
        "options": {
            "chunks": opts.chunks, "rounds": opts.rounds, "concurrency": opts.concurrency,
            "cpu_chunks": opts.cpu_chunks, "cpu_rounds": opts.cpu_rounds,
            "gap_us": opts.gap.as_micros() as u64, "burst_chunks": opts.burst_chunks,
        },
        "anchor_bias_us": bias,
        "total_s": started.elapsed().as_secs_f64(),
        "phases": results,
    });
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&dir).expect("create target/bench");
    let path = dir.join("client_overhead.json");
    let text = serde_json::to_string_pretty(&report).expect("results serialize");
    std::fs::write(&path, text + "\n").expect("write results JSON");
    println!("wrote {}", path.display());
}
