//! The side-by-side figures: per client, its own numbers and their ratio to
//! ours, and whether the goals were met (recorded, not asserted).

use std::fmt::Write as _;

use serde::Serialize;

use super::run::PeerResult;
use super::{Peer, Plan};

/// The goals, each met or not (or unknown when a figure is missing).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Goals {
    /// Ours ≥ 5 × AIPerf's chunks per CPU second.
    pub five_x_aiperf_chunks_per_core: Option<bool>,
    /// Our per-chunk overhead p50 ≤ 20 µs (paced).
    pub overhead_p50_le_20us: Option<bool>,
    /// Our |TTFT error| p99 < 1 ms (paced).
    pub ttft_error_p99_lt_1ms: Option<bool>,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub plan: Plan,
    pub machine: Machine,
    pub results: Vec<PeerResult>,
    /// `client / phase: reason` for each client that did not finish a phase.
    pub failures: Vec<String>,
    pub goals: Goals,
}

/// What else the machine was doing.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub loadavg_start: String,
    pub loadavg_end: String,
    pub date: String,
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub(super) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

impl Report {
    pub fn new(plan: &Plan) -> Report {
        Report {
            plan: plan.clone(),
            machine: Machine {
                nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
                loadavg_start: loadavg(),
                date: time::OffsetDateTime::now_utc()
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default(),
                ..Machine::default()
            },
            results: Vec::new(),
            failures: Vec::new(),
            goals: Goals::default(),
        }
    }

    /// Closes the run: load at the end, and the goals.
    pub fn finish(&mut self) {
        self.machine.loadavg_end = loadavg();
        let rate = |peer| {
            self.get(peer, "saturation")
                .and_then(|r| r.chunks_per_cpu_s)
        };
        let ours = self.get(Peer::Ours, "paced");
        self.goals = Goals {
            five_x_aiperf_chunks_per_core: rate(Peer::Ours)
                .zip(rate(Peer::Aiperf))
                .map(|(o, a)| o >= 5.0 * a),
            overhead_p50_le_20us: ours
                .and_then(|r| r.chunk_overhead_us)
                .map(|s| s.p50 <= 20.0),
            ttft_error_p99_lt_1ms: ours
                .and_then(|r| r.ttft_abs_error_us)
                .map(|s| s.p99 < 1000.0),
        };
    }

    pub fn get(&self, peer: Peer, phase: &str) -> Option<&PeerResult> {
        self.results
            .iter()
            .find(|r| r.peer == peer && r.phase == phase)
    }

    /// Every client has both phases, with every figure.
    pub fn complete(&self) -> Result<(), String> {
        if !self.failures.is_empty() {
            return Err(self.failures.join("\n"));
        }
        for peer in Peer::ALL {
            let sat = self
                .get(peer, "saturation")
                .and_then(|r| r.chunks_per_cpu_s);
            let paced = self.get(peer, "paced");
            let figures = paced.map(|r| {
                [r.chunk_overhead_us, r.ttft_abs_error_us, r.itl_abs_error_us]
                    .iter()
                    .all(Option::is_some)
            });
            if sat.is_none() || figures != Some(true) {
                return Err(format!("{}: figures missing", peer.name()));
            }
        }
        Ok(())
    }

    /// The table printed by the bench and the test, ratios to ours in brackets.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "client peers, {} cpus, load {} -> {}, {}",
            self.machine.nproc,
            self.machine.loadavg_start,
            self.machine.loadavg_end,
            self.machine.date
        );
        let _ = writeln!(
            out,
            "{:<17} | {:>22} | {:>20} | {:>20} | {:>20} | {:>20}",
            "client",
            "chunks/s per core",
            "overhead p50 µs",
            "overhead p99 µs",
            "|TTFT err| p99 µs",
            "|ITL err| p99 µs"
        );
        let ours_sat = self.get(Peer::Ours, "saturation");
        let ours_paced = self.get(Peer::Ours, "paced");
        let cell = |v: Option<f64>, base: Option<f64>| match (v, base) {
            (Some(v), Some(b)) if b != 0.0 => format!("{v:.1} ({:.2}x)", v / b),
            (Some(v), _) => format!("{v:.1}"),
            _ => "missing".into(),
        };
        for peer in Peer::ALL {
            let sat = self.get(peer, "saturation");
            let paced = self.get(peer, "paced");
            let rate = |r: Option<&PeerResult>| r.and_then(|r| r.chunks_per_cpu_s);
            let ov50 = |r: Option<&PeerResult>| r.and_then(|r| r.chunk_overhead_us).map(|s| s.p50);
            let ov99 = |r: Option<&PeerResult>| r.and_then(|r| r.chunk_overhead_us).map(|s| s.p99);
            let tt = |r: Option<&PeerResult>| r.and_then(|r| r.ttft_abs_error_us).map(|s| s.p99);
            let it = |r: Option<&PeerResult>| r.and_then(|r| r.itl_abs_error_us).map(|s| s.p99);
            let _ = writeln!(
                out,
                "{:<17} | {:>22} | {:>20} | {:>20} | {:>20} | {:>20}",
                peer.name(),
                cell(rate(sat), rate(ours_sat)),
                cell(ov50(paced), ov50(ours_paced)),
                cell(ov99(paced), ov99(ours_paced)),
                cell(tt(paced), tt(ours_paced)),
                cell(it(paced), it(ours_paced)),
            );
        }
        let _ = writeln!(out, "goals (recorded, not asserted): {:?}", self.goals);
        for f in &self.failures {
            let _ = writeln!(out, "FAILED {f}");
        }
        out
    }
}
