//! The KVCR benches (TC-05's deliver and pull benches, TC-12's G3 read
//! bench), through `ctx.perf()`: a worker times hundreds of KVCR operations
//! in a row on request (`POST /kvcr/bench/<route>`), apart from any
//! request. Every bench runs the same way: a warm-up, then the timed ops
//! between two telemetry snapshots ([`Perf::time_kvcr_bench`]); the bench
//! and KVCR's count of its ops are recorded and checked, and only a bench
//! that passes becomes a figure ([`Perf::judge_kvcr_bench`]).

use std::time::Duration;

use serde::Serialize;

use crate::evidence::{KvcrBench, KvcrOps};
use crate::stack::Worker;
use crate::verdict::kvcr_bench::BenchCounts;
use crate::verdict::kvcr_pull_bench::PullCounts;
use crate::verdict::Violation;

use super::ask;
use super::records::{G3_READ_BENCH, KVCR_BENCH, KVCR_PULL_BENCH};
use super::{CaseError, CaseResult, Perf};

/// How long a bench may take: a base, and a generous bound per operation
/// (a deliver takes milliseconds, a pull about 10; on a loaded machine up
/// to 30).
const BENCH_TIMEOUT_BASE: Duration = Duration::from_secs(30);
const BENCH_TIMEOUT_PER_OP: Duration = Duration::from_millis(100);

/// Operations a bench runs before it is timed: the first ones pay for
/// what a cold path costs once (a first transfer set-up).
const BENCH_WARM_UP_OPS: u32 = 20;

/// One of the CPU engine's KVCR benches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvcrBenchKind {
    /// Delivers from KVCR's local pool into the blocks' own device slots
    /// (`POST /kvcr/bench/deliver`). The worker refuses (HTTP 409, an
    /// error here naming the blocks) unless its device cache and KVCR's
    /// pool hold every block.
    Deliver,
    /// Pulls from the peer that the router's hint of the worker's last
    /// hinted request for the blocks names, each a hinted KVCR remote
    /// deliver into device slots of its own (`POST /kvcr/bench/pull`). The
    /// worker refuses (HTTP 409, an error here with its reason) unless
    /// such a hint names every block and its own KVCR holds none of them.
    Pull,
    /// Delivers from KVCR's disk tier into the blocks' own device slots
    /// (`POST /kvcr/bench/g3_read`). The worker refuses (HTTP 409, an error
    /// here naming the blocks) unless its device cache holds every block
    /// and KVCR holds each on disk only.
    G3Read,
}

impl KvcrBenchKind {
    /// The bench's route under `/kvcr/bench/`.
    fn route(self) -> &'static str {
        match self {
            Self::Deliver => "deliver",
            Self::Pull => "pull",
            Self::G3Read => "g3_read",
        }
    }

    /// The bench's measurement in results.json's `perf` (where `compare`
    /// reads it), also the stem of its evidence files.
    fn key(self) -> &'static str {
        match self {
            Self::Deliver => KVCR_BENCH,
            Self::Pull => KVCR_PULL_BENCH,
            Self::G3Read => G3_READ_BENCH,
        }
    }

    /// What the case is doing while `worker` runs `ops` ops on `blocks`.
    fn doing(self, ops: u32, blocks: usize, worker: &str) -> String {
        match self {
            Self::Deliver => {
                format!("timing {ops} KVCR delivers of {blocks} blocks on worker {worker}")
            }
            Self::Pull => format!("timing {ops} KVCR pulls of {blocks} blocks to worker {worker}"),
            Self::G3Read => {
                format!("timing {ops} KVCR reads of {blocks} blocks from disk on worker {worker}")
            }
        }
    }
}

/// A worker's answer to a bench (`POST /kvcr/bench/<route>`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BenchAnswer {
    /// Delivers run.
    pub ops: u64,
    /// Delivers that raised or left a block undelivered.
    pub failed: u64,
    /// Blocks in each deliver.
    pub blocks_per_op: u64,
    /// The worker's wall time of the bench, seconds.
    pub wall_seconds: f64,
    /// The first failure, as the worker described it.
    #[serde(default)]
    pub first_failure: Option<String>,
    /// Each deliver's wall time as the worker awaited it, seconds, in order.
    #[serde(default)]
    pub op_seconds: Vec<f64>,
    /// The pull bench's source: the control endpoint the router's hint names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A timed bench: what results.json records, and the ops the worker ran.
pub struct TimedBench {
    pub bench: KvcrBench,
    pub ran: u64,
}

impl TimedBench {
    /// The bench's ops as the worker and KVCR counted them, KVCR's being
    /// its ops of `scope` on every worker.
    pub fn counts(&self, scope: &str) -> BenchCounts {
        let (kvcr_success, kvcr_unsuccessful) = self.bench.scope_ops(scope);
        BenchCounts {
            worker: self.bench.worker.clone(),
            asked: self.bench.ops,
            ran: self.ran,
            failed: self.bench.failed,
            first_failure: self.bench.first_failure.clone(),
            kvcr_success,
            kvcr_unsuccessful,
        }
    }

    /// A pull bench's pulls as the worker (the target) and both KVCRs
    /// counted them: the target's `remote_deliver`s, and the writes of
    /// `source` (the peer it pulled from).
    pub fn pull_counts(&self, source: &str) -> PullCounts {
        let bench = &self.bench;
        let (remote_success, remote_unsuccessful) =
            bench.ops_of(&bench.worker, KvcrBench::PULL_SCOPE);
        PullCounts {
            target: bench.worker.clone(),
            source: source.to_string(),
            asked: bench.ops,
            ran: self.ran,
            failed: bench.failed,
            first_failure: bench.first_failure.clone(),
            remote_success,
            remote_unsuccessful,
            source_writes: bench.ops_of(source, KvcrBench::SOURCE_SCOPE).0,
        }
    }
}

impl Perf<'_> {
    /// Has `worker` run `ops` ops of the `kind` bench on `hashes` in a
    /// row and returns its answer.
    pub fn kvcr_bench(
        &self,
        kind: KvcrBenchKind,
        worker: &Worker,
        hashes: &[u64],
        ops: u32,
    ) -> Result<BenchAnswer, CaseError> {
        self.ctx
            .doing(kind.doing(ops, hashes.len(), worker.name()))?;
        let url = format!("{}/kvcr/bench/{}", worker.admin_url(), kind.route());
        let body = serde_json::json!({"hashes": hashes, "ops": ops});
        let timeout = BENCH_TIMEOUT_BASE + BENCH_TIMEOUT_PER_OP * ops;
        let answer = ask::block_on(
            self.ctx,
            super::pressure::post_json_within(&url, &body, timeout),
        )?
        .map_err(|e| {
            CaseError::new(format!(
                "the {} bench on worker {}: {e}",
                kind.route(),
                worker.name()
            ))
        })?;
        serde_json::from_value(answer.clone()).map_err(|e| {
            CaseError::new(format!("{url} answered {answer}, not a bench result: {e}"))
        })
    }

    /// Runs the `kind` bench on `worker` after a warm-up (measured as
    /// `warm_up`): `perf_kvcr_bench_ops` ops on `hashes`, with KVCR's
    /// operations of `worker`, and of `source` if given (the peer a pull
    /// reads from), over the timed ops.
    pub fn time_kvcr_bench(
        &self,
        kind: KvcrBenchKind,
        worker: &Worker,
        source: Option<&Worker>,
        hashes: &[u64],
    ) -> Result<TimedBench, CaseError> {
        let ctx = self.ctx;
        let warm_up = self.kvcr_bench(kind, worker, hashes, BENCH_WARM_UP_OPS)?;
        ctx.measure("warm_up", &warm_up);
        let ops = ctx.settings().perf_kvcr_bench_ops;
        // The worker's own window is the tightest: snapshotted last before
        // the bench and first after it.
        let source_before = source.map(|s| ctx.snapshot(s)).transpose()?;
        let before = ctx.snapshot(worker)?;
        let answer = self.kvcr_bench(kind, worker, hashes, ops)?;
        let mut kvcr_ops = KvcrOps::from_delta(worker.name(), &ctx.delta_since(worker, &before)?);
        if let (Some(source), Some(source_before)) = (source, source_before) {
            let delta = ctx.delta_since(source, &source_before)?;
            kvcr_ops.extend(KvcrOps::from_delta(source.name(), &delta));
        }
        Ok(TimedBench {
            bench: KvcrBench {
                worker: worker.name().to_string(),
                ops: u64::from(ops),
                failed: answer.failed,
                blocks_per_op: answer.blocks_per_op,
                wall_seconds: answer.wall_seconds,
                first_failure: answer.first_failure,
                kvcr_ops,
                op_seconds: answer.op_seconds,
            },
            ran: answer.ops,
        })
    }

    /// Records the bench (`<key>.json`) and KVCR's count of its ops
    /// (`<key>_counts.json`) with the count's verdict, and, only if that
    /// passes, the bench into results.json's `perf.<key>`: only a bench
    /// whose every op KVCR timed becomes a figure.
    pub fn judge_kvcr_bench(
        &self,
        kind: KvcrBenchKind,
        bench: &KvcrBench,
        counts: &impl Serialize,
        verdict: Result<(), Violation>,
    ) -> CaseResult {
        let key = kind.key();
        self.ctx.record(&format!("{key}.json"), bench);
        self.ctx
            .check(&format!("{key}_counts.json"), counts, verdict)?;
        self.ctx.measure(key, bench);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bench_has_its_route_and_its_measurement() {
        let named: Vec<_> = [
            KvcrBenchKind::Deliver,
            KvcrBenchKind::Pull,
            KvcrBenchKind::G3Read,
        ]
        .iter()
        .map(|k| (k.route(), k.key()))
        .collect();
        assert_eq!(
            named,
            [
                ("deliver", "kvcr_bench"),
                ("pull", "kvcr_pull_bench"),
                ("g3_read", "g3_read_bench")
            ]
        );
    }

    fn op(worker: &str, scope: &str, result: &str, count: u64) -> KvcrOps {
        KvcrOps {
            worker: worker.into(),
            scope: scope.into(),
            result: result.into(),
            count,
            seconds: 0.1,
        }
    }

    fn timed(worker: &str, kvcr_ops: Vec<KvcrOps>) -> TimedBench {
        TimedBench {
            bench: KvcrBench {
                worker: worker.into(),
                ops: 400,
                failed: 1,
                blocks_per_op: 4,
                wall_seconds: 2.0,
                first_failure: Some("op 3: boom".into()),
                kvcr_ops,
                op_seconds: Vec::new(),
            },
            ran: 399,
        }
    }

    #[test]
    fn a_bench_counts_its_scope_and_what_the_worker_ran() {
        let t = timed(
            "A",
            vec![
                op("A", "g3_deliver", "success", 398),
                op("A", "g3_deliver", "failed", 1),
                op("A", "local_deliver", "success", 5),
            ],
        );
        let c = t.counts(KvcrBench::G3_READ_SCOPE);
        assert_eq!(
            (c.worker.as_str(), c.asked, c.ran, c.failed, c.kvcr_success),
            ("A", 400, 399, 1, 398)
        );
        assert_eq!(c.first_failure.as_deref(), Some("op 3: boom"));
        assert_eq!(c.kvcr_unsuccessful, vec![("failed".to_string(), 1)]);
    }

    #[test]
    fn a_pull_bench_counts_the_targets_remote_delivers_and_the_sources_writes() {
        let t = timed(
            "B",
            vec![
                op("B", "remote_deliver", "success", 399),
                op("A", "remote_deliver", "success", 7),
                op("A", "source_write", "success", 400),
            ],
        );
        let c = t.pull_counts("A");
        assert_eq!(
            (c.target.as_str(), c.source.as_str(), c.ran),
            ("B", "A", 399)
        );
        assert_eq!((c.remote_success, c.source_writes), (399, 400));
    }
}
