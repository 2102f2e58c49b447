//! KVCR's own time during one request: the increase of its
//! `kvcr_duration_seconds{scope,result}` histogram (count and sum) on a
//! worker over the request's telemetry window. A deliver that gets slower
//! shows here even when the client's TTFT hides it (the deliver overlaps
//! other work of the engine). [`KvcrBench`] is the same increase over one
//! of the benches: hundreds of delivers, peer pulls (TC-05) or reads from
//! the disk tier (TC-12) timed apart from requests.

use serde::{Deserialize, Serialize};

use crate::telemetry::{Counter, Delta};

/// Operations of one scope and result on one worker during a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvcrOps {
    /// The worker (`A`, `B`).
    pub worker: String,
    /// KVCR's `scope` label (`local_deliver`, `remote_deliver`, `source_write`).
    pub scope: String,
    /// KVCR's `result` label (`success`, `partial`, `failed`).
    pub result: String,
    /// Operations (the histogram's `_count` increase).
    pub count: u64,
    /// Their summed duration, seconds (the `_sum` increase).
    pub seconds: f64,
}

impl KvcrOps {
    /// Every scope and result whose operation count moved in `delta`, in the
    /// delta's order. A count without its sum (a source that reports only
    /// counts) is left out: its time is unknown, not 0.
    pub fn from_delta(worker: &str, delta: &Delta) -> Vec<KvcrOps> {
        delta
            .counters
            .iter()
            .filter_map(|(c, &n)| match c {
                Counter::OpCount(scope, result) if n >= 0.5 => {
                    let seconds =
                        delta.observed(&Counter::OpSeconds(scope.clone(), result.clone()))?;
                    Some(KvcrOps {
                        worker: worker.to_string(),
                        scope: scope.label().to_string(),
                        result: result.label().to_string(),
                        count: n.round() as u64,
                        seconds,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// Mean duration of one operation, ms.
    pub fn mean_ms(&self) -> Option<f64> {
        (self.count > 0 && self.seconds.is_finite())
            .then(|| self.seconds * 1000.0 / self.count as f64)
    }
}

/// One of TC-05's KVCR benches, timed apart from any request. The deliver
/// bench: worker `worker` delivered one committed prompt's blocks from
/// KVCR's local pool into their own device slots `ops` times in a row
/// (`POST /kvcr/bench/deliver`). The pull bench: worker `worker` (the
/// target) pulled one prompt's blocks from its peer `ops` times in a row,
/// each a hinted remote deliver (`POST /kvcr/bench/pull`), and `kvcr_ops`
/// holds the source's operations too. TC-12's G3 read bench is the same
/// record of delivers from KVCR's disk tier (`POST /kvcr/bench/g3_read`,
/// scope [`KvcrBench::G3_READ_SCOPE`]). `kvcr_ops` is KVCR's own histogram
/// increase over the bench, so hundreds of operations make one round's mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvcrBench {
    /// The worker that ran the operations (`A`; the pull bench's target).
    pub worker: String,
    /// Delivers asked for (after the warm-up, which is not counted).
    pub ops: u64,
    /// Delivers the worker saw fail (raised, or a block undelivered).
    pub failed: u64,
    /// Blocks in each deliver.
    pub blocks_per_op: u64,
    /// The worker's wall time of the bench, seconds.
    pub wall_seconds: f64,
    /// The first failed deliver, as the worker described it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
    /// KVCR's operations over the bench, per scope and result.
    pub kvcr_ops: Vec<KvcrOps>,
    /// Each deliver's wall time as the worker awaited it, seconds, in order
    /// (empty in runs recorded before the worker reported them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub op_seconds: Vec<f64>,
}

impl KvcrBench {
    /// KVCR's scope of a deliver from its local pool (the deliver bench's scope).
    pub const SCOPE: &'static str = "local_deliver";
    /// KVCR's scope of the target's whole pull (the pull bench's scope).
    pub const PULL_SCOPE: &'static str = "remote_deliver";
    /// KVCR's scope of the source's write inside a pull.
    pub const SOURCE_SCOPE: &'static str = "source_write";

    /// KVCR's scope of a read from its disk tier straight into engine
    /// memory (TC-12's G3 read bench's scope).
    pub const G3_READ_SCOPE: &'static str = "g3_deliver";

    /// KVCR's `local_deliver` operations over the bench: how many
    /// succeeded, and the others as (result, count).
    pub fn local_delivers(&self) -> (u64, Vec<(String, u64)>) {
        self.scope_ops(Self::SCOPE)
    }

    /// KVCR's operations of `scope` over the bench (every worker): how many
    /// succeeded, and the others as (result, count).
    pub fn scope_ops(&self, scope: &str) -> (u64, Vec<(String, u64)>) {
        by_result(self.kvcr_ops.iter().filter(|o| o.scope == scope))
    }

    /// KVCR's operations of `scope` on `worker` over the bench: how many
    /// succeeded, and the others as (result, count).
    pub fn ops_of(&self, worker: &str, scope: &str) -> (u64, Vec<(String, u64)>) {
        by_result(
            self.kvcr_ops
                .iter()
                .filter(|o| o.worker == worker && o.scope == scope),
        )
    }
}

/// The successful operations' count, and the others as (result, count).
fn by_result<'o>(ops: impl Iterator<Item = &'o KvcrOps>) -> (u64, Vec<(String, u64)>) {
    let (success, other): (Vec<&KvcrOps>, Vec<&KvcrOps>) = ops.partition(|o| o.result == "success");
    (
        success.iter().map(|o| o.count).sum(),
        other.iter().map(|o| (o.result.clone(), o.count)).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{OpResult, Scope, Snapshot, SnapshotSource};

    fn delta(counters: &[(Counter, f64)]) -> Delta {
        let before = Snapshot::new(
            Some("A".into()),
            SnapshotSource::Text {
                label: "test".into(),
            },
        );
        let mut after = before.clone();
        for (c, v) in counters {
            after.counters.insert(c.clone(), *v);
        }
        after.since(&before).unwrap()
    }

    #[test]
    fn a_moved_scope_gives_its_count_and_time_and_a_count_without_time_is_left_out() {
        let d = delta(&[
            (
                Counter::OpCount(Scope::LocalDeliver, OpResult::Success),
                2.0,
            ),
            (
                Counter::OpSeconds(Scope::LocalDeliver, OpResult::Success),
                0.010,
            ),
            (Counter::OpCount(Scope::LocalFill, OpResult::Success), 1.0),
            (Counter::OpCount(Scope::SourceWrite, OpResult::Success), 0.0),
            (
                Counter::OpSeconds(Scope::SourceWrite, OpResult::Success),
                0.0,
            ),
        ]);
        let ops = KvcrOps::from_delta("A", &d);
        assert_eq!(ops.len(), 1, "{ops:?}");
        assert_eq!(
            (ops[0].scope.as_str(), ops[0].result.as_str(), ops[0].count),
            ("local_deliver", "success", 2)
        );
        assert!((ops[0].mean_ms().unwrap() - 5.0).abs() < 1e-9);
        assert!(KvcrOps::from_delta("A", &delta(&[])).is_empty());
    }

    #[test]
    fn a_bench_splits_its_local_delivers_by_result() {
        let op = |scope: &str, result: &str, count| KvcrOps {
            worker: "A".into(),
            scope: scope.into(),
            result: result.into(),
            count,
            seconds: 0.1,
        };
        let mut bench = KvcrBench {
            worker: "A".into(),
            ops: 400,
            failed: 0,
            blocks_per_op: 4,
            wall_seconds: 2.0,
            first_failure: None,
            kvcr_ops: vec![
                op("local_deliver", "success", 398),
                op("transfer", "success", 400),
                op("local_deliver", "failed", 2),
            ],
            op_seconds: Vec::new(),
        };
        assert_eq!(
            bench.local_delivers(),
            (398, vec![("failed".to_string(), 2)])
        );
        assert_eq!(bench.scope_ops("transfer"), (400, Vec::new()));
        assert_eq!(bench.scope_ops(KvcrBench::G3_READ_SCOPE), (0, Vec::new()));
        bench.kvcr_ops.clear();
        assert_eq!(bench.local_delivers(), (0, Vec::new()));
    }

    #[test]
    fn a_pull_bench_splits_each_workers_ops_by_result() {
        let op = |worker: &str, scope: &str, result: &str, count| KvcrOps {
            worker: worker.into(),
            scope: scope.into(),
            result: result.into(),
            count,
            seconds: 0.1,
        };
        let bench = KvcrBench {
            worker: "B".into(),
            ops: 400,
            failed: 0,
            blocks_per_op: 4,
            wall_seconds: 4.0,
            first_failure: None,
            kvcr_ops: vec![
                op("B", "remote_deliver", "success", 399),
                op("B", "remote_deliver", "failed", 1),
                op("A", "source_write", "success", 400),
                op("A", "remote_deliver", "success", 7),
            ],
            op_seconds: Vec::new(),
        };
        assert_eq!(
            bench.ops_of("B", KvcrBench::PULL_SCOPE),
            (399, vec![("failed".to_string(), 1)])
        );
        assert_eq!(
            bench.ops_of("A", KvcrBench::SOURCE_SCOPE),
            (400, Vec::new())
        );
        assert_eq!(bench.ops_of("B", KvcrBench::SOURCE_SCOPE), (0, Vec::new()));
    }

    #[test]
    fn a_request_record_carries_its_ops_and_omits_none() {
        let mut r = crate::evidence::RequestRecord::default();
        let bare = serde_json::to_value(&r).unwrap();
        assert!(bare.get("kvcr_ops").is_none());
        r.kvcr_ops = vec![KvcrOps {
            worker: "B".into(),
            scope: "remote_deliver".into(),
            result: "success".into(),
            count: 1,
            seconds: 0.004,
        }];
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"kvcr_ops\":[{\"worker\":\"B\""), "{text}");
        let back: crate::evidence::RequestRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.kvcr_ops[0].mean_ms(), Some(4.0));
    }
}
