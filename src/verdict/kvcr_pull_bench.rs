//! TC-05's pull bench: every pull the target ran is one remote deliver
//! KVCR counted, and the source wrote.
//!
//! The bench's figures are the target's per-pull wall times and KVCR's own
//! `remote_deliver` histogram over the bench, so the histogram must show
//! exactly the pulls asked for, all successful: a count that did not move
//! (pulls that went another way, a local deliver, say) would leave the
//! figures resting on something else. The source's `source_write` count
//! must rise too: the source's write is the part of a pull that runs on the
//! peer, and a pull that never made the peer write times no peer pull.

use serde::Serialize;

use super::timed_ops::{every_op_counted, OpsCounted, OpsNamed};
use super::{Checks, Violation};

/// Claim: KVCR timed every bench pull as a successful remote deliver, and
/// the source wrote.
pub const BENCH_PULLED: &str =
    "KVCR timed every bench pull as a successful remote_deliver, written by the source";

/// What a pull bench ran, as the target and both KVCRs counted it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PullCounts {
    /// The worker that pulled (`B`) and the peer it pulled from (`A`).
    pub target: String,
    pub source: String,
    /// Pulls asked for.
    pub asked: u64,
    /// Pulls the target ran, and how many of them failed (raised, left a
    /// block undelivered or a delivered one unwritten), with the first
    /// one described.
    pub ran: u64,
    pub failed: u64,
    pub first_failure: Option<String>,
    /// The target KVCR's `remote_deliver` operations over the bench:
    /// successful, and the others as (result, count).
    pub remote_success: u64,
    pub remote_unsuccessful: Vec<(String, u64)>,
    /// The source KVCR's successful `source_write` operations over the bench.
    pub source_writes: u64,
}

/// How the pull bench's messages name its ops.
const PULLS: OpsNamed = OpsNamed {
    ran: "pulls",
    counted: "bench pulls",
    scope: "remote_deliver",
    why_exact: None,
};

impl PullCounts {
    /// The target's counts as the shared verdict reads them.
    fn counted(&self) -> OpsCounted<'_> {
        OpsCounted {
            worker: &self.target,
            asked: self.asked,
            ran: self.ran,
            failed: self.failed,
            first_failure: self.first_failure.as_deref(),
            success: self.remote_success,
            unsuccessful: &self.remote_unsuccessful,
        }
    }
}

/// The target ran every pull asked for without a failure, its KVCR's
/// `remote_deliver` success count rose by exactly that many with no
/// unsuccessful one, and the source's `source_write` count rose.
pub fn expect_bench_pulled(c: &PullCounts) -> Result<(), Violation> {
    let mut checks = Checks::new(BENCH_PULLED);
    every_op_counted(&mut checks, &PULLS, &c.counted());
    checks.check(c.source_writes != 0, || {
        format!(
            "KVCR's source_write success count on worker {} did not move over {} bench pulls from it: the pulls made no source write",
            c.source, c.asked
        )
    });
    checks.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ran: u64, failed: u64, success: u64, writes: u64) -> PullCounts {
        PullCounts {
            target: "B".into(),
            source: "A".into(),
            asked: 400,
            ran,
            failed,
            first_failure: (failed > 0).then(|| "op 3: not delivered: 17".into()),
            remote_success: success,
            remote_unsuccessful: Vec::new(),
            source_writes: writes,
        }
    }

    #[test]
    fn every_pull_counted_successful_and_written_passes() {
        assert_eq!(expect_bench_pulled(&counts(400, 0, 400, 400)), Ok(()));
        // The source's count need only have moved: its last writes may
        // reach its telemetry after the target saw them complete.
        assert_eq!(expect_bench_pulled(&counts(400, 0, 400, 398)), Ok(()));
    }

    #[test]
    fn a_remote_deliver_count_that_did_not_move_fails() {
        let v = expect_bench_pulled(&counts(400, 0, 0, 400)).unwrap_err();
        assert_eq!(v.claim, BENCH_PULLED);
        assert!(
            v.detail
                .contains("remote_deliver success count on worker B did not move over 400"),
            "{v}"
        );
    }

    #[test]
    fn a_remote_deliver_count_other_than_the_pulls_fails() {
        let v = expect_bench_pulled(&counts(400, 0, 401, 400)).unwrap_err();
        assert!(
            v.detail.contains("rose by 401, expected exactly the 400"),
            "{v}"
        );
    }

    #[test]
    fn a_failed_pull_fails_whichever_side_saw_it() {
        let v = expect_bench_pulled(&counts(400, 1, 400, 400)).unwrap_err();
        assert!(
            v.detail
                .contains("saw 1 of 400 pulls fail (first: op 3: not delivered: 17)"),
            "{v}"
        );
        let mut kvcr = counts(400, 0, 399, 400);
        kvcr.remote_unsuccessful = vec![("failed".into(), 1), ("partial".into(), 0)];
        let v = expect_bench_pulled(&kvcr).unwrap_err();
        assert!(
            v.detail.contains("did not succeed on worker B: 1 failed"),
            "{v}"
        );
    }

    #[test]
    fn pulls_the_source_never_wrote_fail() {
        let v = expect_bench_pulled(&counts(400, 0, 400, 0)).unwrap_err();
        assert!(
            v.detail.contains(
                "source_write success count on worker A did not move over 400 bench pulls"
            ),
            "{v}"
        );
    }

    #[test]
    fn a_target_that_ran_fewer_pulls_fails() {
        let v = expect_bench_pulled(&counts(10, 0, 10, 10)).unwrap_err();
        assert!(v.detail.contains("ran 10 pulls, 400 were asked for"), "{v}");
    }
}
