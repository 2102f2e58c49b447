//! `kvcr-e2e workload side-by-side`: one trace replayed through a running
//! stack by our client and by AIPerf's trace mode, one after the other, at
//! the same rate, and their TTFT distributions compared
//! ([`super::ttft_agreement`]).
//!
//! Each replay finds a cold cache: ours draws its prompts under a salt of
//! its own ([`TokenSpace`]), AIPerf under a seed of its own, so neither
//! meets the other's blocks or an earlier run's. The prompts differ in
//! their tokens (ours are token ids, AIPerf's are text it synthesizes per
//! hash id) but not in their block structure or, checked per request,
//! their length in tokens.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::aiperf_trace::{self, scaled_trace, TokenizerCache, TraceRun};
use super::report::loadavg;
use super::ttft_agreement::{Accuracy, Agreement};
use crate::client::Client;
use crate::wait::{self, Poll};
use crate::workload::{plan, replay, TokenSpace, Trace};

/// The clients, in the order they replay the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    OursFirst,
    AiperfFirst,
}

impl Order {
    fn clients(self) -> [Peer; 2] {
        match self {
            Order::OursFirst => [Peer::Ours, Peer::Aiperf],
            Order::AiperfFirst => [Peer::Aiperf, Peer::Ours],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Peer {
    Ours,
    Aiperf,
}

/// What `workload side-by-side` was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct SideBySideArgs {
    pub trace: PathBuf,
    pub block_size: u32,
    /// Arrivals divided by it (2.0: twice as fast).
    pub rate: f64,
    /// The stack's description; `None`: `target/phase1/stack.json`.
    pub manifest: Option<PathBuf>,
    /// `None`: `target/workload/side-by-side/<timestamp>/`.
    pub out: Option<PathBuf>,
    pub order: Order,
    /// The model's tokenizer directory (AIPerf's); `None`: the CPU engine's.
    pub tokenizer: Option<PathBuf>,
    /// Token ids our prompts use; `None`: the CPU engine's.
    pub vocab: Option<Range<u32>>,
    pub accuracy: Accuracy,
}

/// Parses `workload side-by-side`'s flags (each `--flag VALUE`).
pub fn parse(args: &[String]) -> Result<SideBySideArgs, String> {
    let (mut trace, mut block_size) = (None, None);
    let mut a = SideBySideArgs {
        trace: PathBuf::new(),
        block_size: 0,
        rate: 1.0,
        manifest: None,
        out: None,
        order: Order::OursFirst,
        tokenizer: None,
        vocab: None,
        accuracy: Accuracy::DOCUMENTED,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let wrong = |what: &str| format!("{flag} {value:?}: {what}");
        let positive = || match value.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
            _ => Err(wrong("must be a positive number")),
        };
        match flag.as_str() {
            "--trace" => trace = Some(PathBuf::from(value)),
            "--block-size" => match value.parse::<u32>() {
                Ok(n) if n > 0 => block_size = Some(n),
                _ => return Err(wrong("must be a whole number of tokens, at least 1")),
            },
            "--rate" => a.rate = positive()?,
            "--manifest" => a.manifest = Some(PathBuf::from(value)),
            "--out" => a.out = Some(PathBuf::from(value)),
            "--order" => {
                a.order = match value.as_str() {
                    "ours-first" => Order::OursFirst,
                    "aiperf-first" => Order::AiperfFirst,
                    _ => return Err(wrong("must be ours-first or aiperf-first")),
                }
            }
            "--tokenizer" => a.tokenizer = Some(PathBuf::from(value)),
            "--vocab" => a.vocab = Some(parse_vocab(value).map_err(|e| wrong(&e))?),
            "--ours-accuracy-ms" => a.accuracy.ours_ms = positive()?,
            "--aiperf-accuracy-ms" => a.accuracy.aiperf_ms = positive()?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if a.accuracy != Accuracy::DOCUMENTED {
        a.accuracy.source = "given on the command line";
    }
    a.trace = trace.ok_or("side-by-side needs --trace FILE")?;
    a.block_size =
        block_size.ok_or("side-by-side needs --block-size N (the trace's tokens per hash id)")?;
    Ok(a)
}

/// `LO..HI`: token ids from LO up to, not including, HI.
fn parse_vocab(text: &str) -> Result<Range<u32>, String> {
    let (lo, hi) = text
        .split_once("..")
        .ok_or("must be LO..HI (token ids LO up to HI, HI excluded)")?;
    let (lo, hi): (u32, u32) = match (lo.trim().parse(), hi.trim().parse()) {
        (Ok(lo), Ok(hi)) => (lo, hi),
        _ => return Err("must be LO..HI with whole numbers".into()),
    };
    if lo >= hi {
        return Err("is empty: LO must be below HI".into());
    }
    Ok(lo..hi)
}

/// The parts of `stack.json` a side-by-side run reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Target {
    pub frontend: String,
    pub model: String,
    pub engine: String,
}

impl Target {
    pub fn read(path: &Path) -> Result<Target, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read the stack description {}: {e} (bring a stack up with `kvcr-e2e stack up --profile workload`)",
                path.display()
            )
        })?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let field = |value: &Value, name: &str| {
            value
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{}: no {name}", path.display()))
        };
        Ok(Target {
            frontend: field(&v["frontend"]["url"], "frontend.url")?,
            model: field(&v["model"], "model")?,
            engine: field(&v["engine"], "engine")?,
        })
    }
}

/// The CPU engine's model: its tokenizer, and its vocabulary's ordinary ids
/// (below 3 are its special tokens).
const CPU_MODEL_DIR: &str = "fixtures/models/tiny";
const CPU_FIRST_ORDINARY_TOKEN: u32 = 3;

/// The tokenizer and vocabulary to use: the flags', else the CPU engine's.
fn model_of(
    repo_root: &Path,
    target: &Target,
    args: &SideBySideArgs,
) -> Result<(PathBuf, Range<u32>), String> {
    let cpu = target.engine == "cpu";
    let tokenizer = match (&args.tokenizer, cpu) {
        (Some(dir), _) => dir.clone(),
        (None, true) => repo_root.join(CPU_MODEL_DIR),
        (None, false) => {
            return Err(format!(
            "the stack runs engine {}: name its model's tokenizer directory with --tokenizer DIR",
            target.engine
        ))
        }
    };
    let vocab = match (&args.vocab, cpu) {
        (Some(v), _) => v.clone(),
        (None, true) => CPU_FIRST_ORDINARY_TOKEN..vocab_size(&repo_root.join(CPU_MODEL_DIR))?,
        (None, false) => {
            return Err(format!(
                "the stack runs engine {}: name its ordinary token ids with --vocab LO..HI",
                target.engine
            ))
        }
    };
    Ok((tokenizer, vocab))
}

fn vocab_size(model_dir: &Path) -> Result<u32, String> {
    let path = model_dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    v["vocab_size"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("{}: no vocab_size", path.display()))
}

/// How many prompts were sent at the trace's length, per request.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LengthCheck {
    /// Requests whose length was compared (by the client, the server or both).
    pub checked: usize,
    pub mismatched: usize,
    /// Records that name no trace line, so no length to compare with.
    pub unpaired: usize,
    /// The first few mismatches.
    pub examples: Vec<LengthMismatch>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LengthMismatch {
    /// The trace line (0-based).
    pub index: usize,
    pub trace: u64,
    /// Prompt tokens as the client counted them.
    pub client: Option<u64>,
    /// As the server reported them (`usage.prompt_tokens`).
    pub server: Option<u64>,
}

/// One request's prompt length as a client saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeenLength {
    pub index: Option<usize>,
    pub client: Option<u64>,
    pub server: Option<u64>,
}

/// Each request's lengths (the client's and the server's, where known)
/// against its trace line's `input_length`.
pub fn check_lengths(trace: &Trace, seen: impl IntoIterator<Item = SeenLength>) -> LengthCheck {
    let mut c = LengthCheck::default();
    for s in seen {
        let Some(request) = s.index.and_then(|i| trace.requests().get(i)) else {
            c.unpaired += 1;
            continue;
        };
        if s.client.is_none() && s.server.is_none() {
            continue;
        }
        c.checked += 1;
        let want = request.input_length;
        if [s.client, s.server].iter().flatten().any(|&n| n != want) {
            c.mismatched += 1;
            if c.examples.len() < 5 {
                c.examples.push(LengthMismatch {
                    index: s.index.unwrap_or_default(),
                    trace: want,
                    client: s.client,
                    server: s.server,
                });
            }
        }
    }
    c
}

/// One client's replay.
#[derive(Debug, Clone, Serialize)]
pub struct Arm {
    client: Peer,
    /// 1: it ran first.
    position: usize,
    started_utc: String,
    wall_s: f64,
    /// The machine's load averages (1, 5, 15 min) when it started and ended.
    loadavg_start: String,
    loadavg_end: String,
    /// Requests in the trace.
    requests: usize,
    /// Requests with a TTFT.
    answered: usize,
    failed: usize,
    first_failure: Option<String>,
    lengths: LengthCheck,
    /// Why the client produced no records at all.
    problem: Option<String>,
    /// Where its own files are.
    files: Option<PathBuf>,
    /// Per trace line; `null` where the request failed or was not recorded.
    ttft_ms: Vec<Option<f64>>,
}

impl Arm {
    fn new(client: Peer, position: usize, requests: usize) -> Arm {
        Arm {
            client,
            position,
            started_utc: now_rfc3339(),
            wall_s: 0.0,
            loadavg_start: loadavg(),
            loadavg_end: String::new(),
            requests,
            answered: 0,
            failed: 0,
            first_failure: None,
            lengths: LengthCheck::default(),
            problem: None,
            files: None,
            ttft_ms: vec![None; requests],
        }
    }

    fn fail(&mut self, why: String) {
        self.failed += 1;
        self.first_failure.get_or_insert(why);
    }

    fn samples(&self) -> Vec<f64> {
        self.ttft_ms.iter().flatten().copied().collect()
    }
}

/// Everything one run is given to do.
struct Setup<'a> {
    trace: &'a Trace,
    rate: f64,
    target: &'a Target,
    tokenizer: &'a Path,
    vocab: Range<u32>,
    /// Our TokenSpace salt and, folded, AIPerf's seed.
    salt: u64,
    out: &'a Path,
    aiperf_python: &'a Path,
}

impl Setup<'_> {
    fn aiperf_seed(&self) -> u64 {
        self.salt % 2_147_483_647 + 1
    }

    fn run(&self, client: Peer, position: usize) -> Arm {
        let mut arm = Arm::new(client, position, self.trace.len());
        let started = Instant::now();
        match client {
            Peer::Ours => self.ours(&mut arm),
            Peer::Aiperf => self.aiperf(&mut arm),
        }
        arm.wall_s = started.elapsed().as_secs_f64();
        arm.loadavg_end = loadavg();
        arm.answered = arm.ttft_ms.iter().flatten().count();
        arm
    }

    fn ours(&self, arm: &mut Arm) {
        let space = TokenSpace::new(self.trace.block_size(), self.vocab.clone(), self.salt);
        let client = match Client::new(&self.target.frontend, Duration::from_secs(120)) {
            Ok(c) => c,
            Err(e) => {
                arm.problem = Some(e.to_string());
                return;
            }
        };
        let planned = plan(self.trace, self.rate, &space, &self.target.model);
        let returned = crate::rt::block_on(replay(&client, planned));
        let mut seen = Vec::new();
        for r in &returned {
            match &r.outcome {
                Ok(o) => match &o.timings {
                    Some(t) => arm.ttft_ms[r.index] = Some(t.ttft.as_secs_f64() * 1000.0),
                    None => arm.fail(format!("request {}: no content chunk", r.request_id)),
                },
                Err(e) => arm.fail(format!("request {}: {e}", r.request_id)),
            }
            seen.push(SeenLength {
                index: Some(r.index),
                client: Some(u64::from(r.prompt_tokens)),
                server: r
                    .outcome
                    .as_ref()
                    .ok()
                    .and_then(|o| o.generated.usage)
                    .map(|u| u64::from(u.prompt_tokens)),
            });
        }
        arm.lengths = check_lengths(self.trace, seen);
    }

    fn aiperf(&self, arm: &mut Arm) {
        let dir = self.out.join("aiperf");
        arm.files = Some(dir.clone());
        if let Err(e) = self.aiperf_run(&dir, arm) {
            arm.problem = Some(e);
        }
    }

    fn aiperf_run(&self, dir: &Path, arm: &mut Arm) -> Result<(), String> {
        let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let trace_file = dir.join("trace-scaled.jsonl");
        std::fs::write(&trace_file, scaled_trace(self.trace, self.rate))
            .map_err(|e| io(&trace_file, e))?;
        let tokenizer = TokenizerCache::prepare(&dir.join("hf-cache"), self.tokenizer)?;
        let artifacts = dir.join("artifacts");
        let run = TraceRun {
            python: self.aiperf_python,
            tokenizer: &tokenizer,
            url: &self.target.frontend,
            model: &self.target.model,
            trace_file: &trace_file,
            block_size: self.trace.block_size(),
            seed: self.aiperf_seed(),
            dir: &artifacts,
        };
        let log = dir.join("aiperf.log");
        run_logged(run.command(), &log, self.aiperf_deadline())?;
        let records = aiperf_trace::read_records(&artifacts)?;
        let mut seen = Vec::new();
        for r in &records {
            match (r.index.filter(|&i| i < arm.requests), r.ttft_ms, &r.error) {
                (_, _, Some(e)) => arm.fail(e.clone()),
                (Some(i), Some(ttft), None) => arm.ttft_ms[i] = Some(ttft),
                (None, _, None) => arm.fail("a record naming no trace line".into()),
                (Some(i), None, None) => arm.fail(format!("trace line {i}: no TTFT recorded")),
            }
            seen.push(SeenLength {
                index: r.index,
                client: r.client_prompt_tokens,
                server: r.server_prompt_tokens,
            });
        }
        let missing = arm.requests.saturating_sub(records.len());
        for _ in 0..missing {
            arm.fail(format!(
                "AIPerf recorded {} of {} requests",
                records.len(),
                arm.requests
            ));
        }
        arm.lengths = check_lengths(self.trace, seen);
        Ok(())
    }

    /// The replay's length, plus room for AIPerf to start (~10 s), to let
    /// the last requests finish and to write its files.
    fn aiperf_deadline(&self) -> Duration {
        let span = self
            .trace
            .schedule(self.rate)
            .last()
            .map_or(Duration::ZERO, |(at, _)| at);
        span + Duration::from_secs(300)
    }
}

/// Runs `cmd` in a process group of its own, output into `log`, until it
/// exits or `deadline` passes (then the group is killed).
fn run_logged(mut cmd: Command, log: &Path, deadline: Duration) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let file2 = file.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(file)
        .stderr(file2)
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("AIPerf could not start: {e}"))?;
    let waited = wait::until(
        "AIPerf to finish the trace",
        deadline,
        Duration::from_millis(200),
        || match child.try_wait() {
            Ok(Some(status)) => Poll::Ready(status),
            Ok(None) => Poll::Pending("still running".into()),
            Err(e) => Poll::Abort(e.to_string()),
        },
    );
    let tail = || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    };
    match waited {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!(
            "AIPerf exited with {status}; its output ({}) ends:\n{}",
            log.display(),
            tail()
        )),
        Err(e) => {
            // The group AIPerf leads: its services are its children.
            // SAFETY: kill(2) on a process group this call created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            Err(format!("{e}\n{}", tail()))
        }
    }
}

/// What a side-by-side run recorded (`side-by-side.json`).
#[derive(Debug, Clone, Serialize)]
pub struct SideBySide {
    pub trace: TraceSummary,
    pub rate: f64,
    pub order: Order,
    pub target: Target,
    pub tokenizer: PathBuf,
    pub vocab: [u32; 2],
    /// Our TokenSpace salt.
    pub salt: u64,
    pub aiperf_seed: u64,
    pub arms: Vec<Arm>,
    pub agreement: Option<Agreement>,
    /// `agree`, `disagree` or `no verdict`.
    pub verdict: String,
    /// Why there is no verdict, or what weakens it.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    pub path: PathBuf,
    pub requests: usize,
    pub block_size: u32,
    pub digest: String,
}

impl SideBySide {
    fn judge(arms: &[Arm], accuracy: &Accuracy) -> (Option<Agreement>, String, Vec<String>) {
        let arm = |p: Peer| arms.iter().find(|a| a.client == p);
        let samples = |p: Peer| arm(p).map(Arm::samples).unwrap_or_default();
        let agreement = Agreement::of(&samples(Peer::Ours), &samples(Peer::Aiperf), accuracy);
        let mut notes = Vec::new();
        for a in arms {
            let name = client_name(a.client);
            if let Some(p) = &a.problem {
                notes.push(format!("{name}: {p}"));
            }
            if a.failed > 0 {
                notes.push(format!(
                    "{name}: {} of {} requests failed or were not recorded; first: {}",
                    a.failed,
                    a.requests,
                    a.first_failure.as_deref().unwrap_or("?")
                ));
            }
            if a.lengths.mismatched > 0 {
                notes.push(format!(
                    "{name}: {} of {} prompts were not the trace's length; first: {:?}",
                    a.lengths.mismatched, a.lengths.checked, a.lengths.examples[0]
                ));
            }
        }
        let verdict = match (&agreement, notes.is_empty()) {
            (Some(a), true) => a.verdict.word().to_string(),
            _ => "no verdict".to_string(),
        };
        (agreement, verdict, notes)
    }

    /// The table users read: per client its requests, then the quantiles.
    pub fn markdown(&self) -> String {
        let mut t = format!(
            "Trace {} ({} requests, {}-token blocks), rate ×{}, order {}.\n\n\
             | client | ran | requests | answered | failed | prompt lengths checked / off | wall (s) | load average (start → end) |\n\
             |---|---|---|---|---|---|---|---|\n",
            self.trace.path.display(),
            self.trace.requests,
            self.trace.block_size,
            self.rate,
            match self.order {
                Order::OursFirst => "ours first",
                Order::AiperfFirst => "AIPerf first",
            },
        );
        for a in &self.arms {
            t.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} / {} | {:.1} | {} → {} |\n",
                client_name(a.client),
                if a.position == 1 { "first" } else { "second" },
                a.requests,
                a.answered,
                a.failed,
                a.lengths.checked,
                a.lengths.mismatched,
                a.wall_s,
                a.loadavg_start,
                a.loadavg_end
            ));
        }
        t.push('\n');
        if let Some(a) = &self.agreement {
            t.push_str(&a.markdown());
        }
        t.push_str(&format!("\nVerdict: **{}**.\n", self.verdict));
        for n in &self.notes {
            t.push_str(&format!("- {n}\n"));
        }
        t
    }

    /// 0 agree, 1 disagree, 3 no verdict.
    pub fn exit_code(&self) -> u8 {
        match self.verdict.as_str() {
            "agree" => 0,
            "disagree" => 1,
            _ => 3,
        }
    }
}

fn client_name(p: Peer) -> &'static str {
    match p {
        Peer::Ours => "ours",
        Peer::Aiperf => "AIPerf",
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn default_out(repo_root: &Path) -> PathBuf {
    let stamp = time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_else(|_| "run".into());
    repo_root.join("target/workload/side-by-side").join(stamp)
}

/// `kvcr-e2e workload side-by-side ...`: exit 0 agree, 1 disagree, 2 usage
/// or setup, 3 no verdict.
pub fn command(repo_root: &Path, args: &[String], usage: &str) -> ExitCode {
    let fail = |e: &str| {
        eprintln!("error: workload side-by-side: {e}\n\n{usage}");
        ExitCode::from(2)
    };
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => return fail(&e),
    };
    let trace = match Trace::read(&args.trace, args.block_size) {
        Ok(t) => t,
        Err(e) => return fail(&e.to_string()),
    };
    let manifest = args
        .manifest
        .clone()
        .unwrap_or_else(|| repo_root.join("target/phase1/stack.json"));
    let target = match Target::read(&manifest) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let (tokenizer, vocab) = match model_of(repo_root, &target, &args) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    let aiperf = match crate::pyenv::ensure_env(repo_root, &crate::pyenv::AIPERF, None) {
        Ok(env) => env.python,
        Err(e) => return fail(&format!("the aiperf env: {e}")),
    };
    let out = args.out.clone().unwrap_or_else(|| default_out(repo_root));
    if let Err(e) = std::fs::create_dir_all(&out) {
        return fail(&format!("{}: {e}", out.display()));
    }
    let salt = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let setup = Setup {
        trace: &trace,
        rate: args.rate,
        target: &target,
        tokenizer: &tokenizer,
        vocab: vocab.clone(),
        salt,
        out: &out,
        aiperf_python: &aiperf,
    };
    let mut arms = Vec::new();
    for (i, client) in args.order.clients().into_iter().enumerate() {
        crate::events::emit(crate::events::RunEvent::SideBySideReplay {
            client: client_name(client).to_string(),
            requests: trace.len(),
            rate: args.rate,
        });
        arms.push(setup.run(client, i + 1));
    }
    let aiperf_seed = setup.aiperf_seed();
    let (agreement, verdict, notes) = SideBySide::judge(&arms, &args.accuracy);
    let result = SideBySide {
        trace: TraceSummary {
            path: args.trace.clone(),
            requests: trace.len(),
            block_size: trace.block_size(),
            digest: trace.digest(),
        },
        rate: args.rate,
        order: args.order,
        target,
        tokenizer,
        vocab: [vocab.start, vocab.end],
        salt,
        aiperf_seed,
        arms,
        agreement,
        verdict,
        notes,
    };
    let table = result.markdown();
    print!("{table}");
    let json = serde_json::to_string_pretty(&result).expect("the result serializes");
    for (name, text) in [("side-by-side.json", json), ("side-by-side.md", table)] {
        let path = out.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    eprintln!("wrote {}", out.display());
    ExitCode::from(result.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn flags_set_their_fields_and_defaults_hold() {
        let a = parse(&args(
            "--trace t.jsonl --block-size 16 --rate 2.5 --order aiperf-first \
             --manifest m.json --out o --tokenizer tok --vocab 3..426",
        ))
        .unwrap();
        assert_eq!(a.trace, PathBuf::from("t.jsonl"));
        assert_eq!(
            (a.block_size, a.rate, a.order),
            (16, 2.5, Order::AiperfFirst)
        );
        assert_eq!(a.manifest, Some(PathBuf::from("m.json")));
        assert_eq!(a.out, Some(PathBuf::from("o")));
        assert_eq!(a.tokenizer, Some(PathBuf::from("tok")));
        assert_eq!(a.vocab, Some(3..426));
        assert_eq!(a.accuracy, Accuracy::DOCUMENTED);
        let d = parse(&args("--trace t --block-size 512")).unwrap();
        assert_eq!(
            (d.rate, d.order, d.manifest, d.vocab),
            (1.0, Order::OursFirst, None, None)
        );
        let custom = parse(&args("--trace t --block-size 16 --aiperf-accuracy-ms 5")).unwrap();
        assert_eq!(custom.accuracy.aiperf_ms, 5.0);
        assert_eq!(custom.accuracy.source, "given on the command line");
    }

    #[test]
    fn bad_flags_say_what_is_wrong() {
        let err = |t: &str| parse(&args(t)).unwrap_err();
        assert_eq!(err("--block-size 16"), "side-by-side needs --trace FILE");
        assert!(err("--trace t").contains("--block-size"));
        assert_eq!(err("--trace"), "--trace needs a value");
        assert!(err("--trace t --block-size 0").contains("at least 1"));
        assert!(err("--trace t --block-size 16 --rate 0").contains("positive"));
        assert!(err("--trace t --block-size 16 --rate fast").contains("positive"));
        assert!(
            err("--trace t --block-size 16 --order both").contains("ours-first or aiperf-first")
        );
        assert!(err("--trace t --block-size 16 --vocab 9..3").contains("empty"));
        assert!(err("--trace t --block-size 16 --vocab 426").contains("LO..HI"));
        assert_eq!(
            err("--trace t --block-size 16 --speed 2"),
            "unknown flag --speed"
        );
    }

    #[test]
    fn the_manifest_names_the_frontend_model_and_engine() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("stack.json");
        std::fs::write(
            &path,
            r#"{"engine":"cpu","model":"tiny","frontend":{"url":"http://127.0.0.1:8000","process":{}}}"#,
        )
        .unwrap();
        let t = Target::read(&path).unwrap();
        assert_eq!(t.frontend, "http://127.0.0.1:8000");
        assert_eq!((t.model.as_str(), t.engine.as_str()), ("tiny", "cpu"));
        std::fs::write(&path, r#"{"engine":"cpu","model":"tiny"}"#).unwrap();
        assert!(Target::read(&path).unwrap_err().contains("no frontend.url"));
        let missing = Target::read(&tmp.path().join("none.json")).unwrap_err();
        assert!(missing.contains("stack up --profile workload"), "{missing}");
    }

    #[test]
    fn the_cpu_engine_brings_its_tokenizer_and_vocabulary_others_must_name_them() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let a = parse(&args("--trace t --block-size 16")).unwrap();
        let target = |engine: &str| Target {
            frontend: "u".into(),
            model: "m".into(),
            engine: engine.into(),
        };
        let (tok, vocab) = model_of(root, &target("cpu"), &a).unwrap();
        assert_eq!(tok, root.join("fixtures/models/tiny"));
        assert_eq!(vocab, 3..426);
        assert!(model_of(root, &target("vllm"), &a)
            .unwrap_err()
            .contains("--tokenizer"));
        let named = parse(&args("--trace t --block-size 16 --tokenizer /m")).unwrap();
        assert!(model_of(root, &target("vllm"), &named)
            .unwrap_err()
            .contains("--vocab"));
    }

    fn trace() -> Trace {
        Trace::parse(
            "{\"timestamp\":0,\"input_length\":20,\"output_length\":4,\"hash_ids\":[0,1]}\n\
             {\"timestamp\":10,\"input_length\":32,\"output_length\":8,\"hash_ids\":[0,2]}\n",
            16,
            "t",
        )
        .unwrap()
    }

    #[test]
    fn lengths_are_checked_against_the_trace_by_client_and_server() {
        let seen = |index, client, server| SeenLength {
            index,
            client,
            server,
        };
        let c = check_lengths(
            &trace(),
            [
                seen(Some(0), Some(20), Some(20)),
                seen(Some(1), Some(32), Some(33)),
                seen(None, Some(20), None),
                seen(Some(7), Some(20), None),
                seen(Some(0), None, None),
            ],
        );
        assert_eq!((c.checked, c.mismatched, c.unpaired), (2, 1, 2));
        assert_eq!(
            c.examples,
            vec![LengthMismatch {
                index: 1,
                trace: 32,
                client: Some(32),
                server: Some(33)
            }]
        );
    }

    fn arm(client: Peer, ttft: &[f64]) -> Arm {
        let mut a = Arm::new(client, 1, ttft.len());
        a.ttft_ms = ttft.iter().map(|&t| Some(t)).collect();
        a.answered = ttft.len();
        a
    }

    #[test]
    fn the_verdict_is_the_quantiles_unless_a_request_failed_or_a_length_was_off() {
        let acc = Accuracy::DOCUMENTED;
        let ours = arm(Peer::Ours, &[20.0, 25.0, 30.0]);
        let close = arm(Peer::Aiperf, &[30.0, 35.0, 40.0]);
        let far = arm(Peer::Aiperf, &[80.0, 85.0, 90.0]);
        let (_, v, notes) = SideBySide::judge(&[ours.clone(), close.clone()], &acc);
        assert_eq!((v.as_str(), notes.len()), ("agree", 0));
        let (_, v, _) = SideBySide::judge(&[ours.clone(), far], &acc);
        assert_eq!(v, "disagree");
        let mut failed = close.clone();
        failed.fail("503".into());
        let (a, v, notes) = SideBySide::judge(&[ours.clone(), failed], &acc);
        assert_eq!(v, "no verdict");
        assert!(a.is_some(), "the quantiles are still shown");
        assert!(
            notes[0].starts_with("AIPerf: 1 of 3 requests failed"),
            "{notes:?}"
        );
        let mut off = close;
        off.lengths = check_lengths(
            &trace(),
            [SeenLength {
                index: Some(0),
                client: Some(19),
                server: None,
            }],
        );
        let (_, v, notes) = SideBySide::judge(&[ours.clone(), off], &acc);
        assert_eq!(v, "no verdict");
        assert!(notes[0].contains("not the trace's length"), "{notes:?}");
        let (a, v, _) = SideBySide::judge(&[ours], &acc);
        assert_eq!((a, v.as_str()), (None, "no verdict"));
    }

    #[test]
    fn the_table_names_both_clients_their_order_and_the_verdict() {
        let mut first = arm(Peer::Aiperf, &[30.0, 35.0]);
        first.position = 1;
        let mut second = arm(Peer::Ours, &[20.0, 25.0]);
        second.position = 2;
        let arms = vec![first, second];
        let (agreement, verdict, notes) = SideBySide::judge(&arms, &Accuracy::DOCUMENTED);
        let s = SideBySide {
            trace: TraceSummary {
                path: "t.jsonl".into(),
                requests: 2,
                block_size: 16,
                digest: "d".into(),
            },
            rate: 2.0,
            order: Order::AiperfFirst,
            target: Target {
                frontend: "u".into(),
                model: "tiny".into(),
                engine: "cpu".into(),
            },
            tokenizer: "tok".into(),
            vocab: [3, 426],
            salt: 1,
            aiperf_seed: 2,
            arms,
            agreement,
            verdict,
            notes,
        };
        let t = s.markdown();
        assert!(t.contains("order AIPerf first"), "{t}");
        assert!(t.contains("| AIPerf | first | 2 | 2 | 0 |"), "{t}");
        assert!(t.contains("| ours | second |"), "{t}");
        assert!(t.contains("| p50 | 20.00 | 30.00 | +10.00 | yes |"), "{t}");
        assert!(t.contains("Verdict: **agree**."), "{t}");
        assert_eq!(s.exit_code(), 0);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["order"], "aiperf-first");
        assert_eq!(json["arms"][0]["client"], "aiperf");
        assert_eq!(json["arms"][1]["ttft_ms"], serde_json::json!([20.0, 25.0]));
    }
}
