//! TC-05's deliver bench: every deliver the worker ran is one KVCR counted.
//!
//! The bench's figure is KVCR's own `local_deliver` histogram over the
//! bench, so the histogram must show exactly the delivers asked for, all
//! successful: a count that did not move (a KVCR that stopped timing its
//! delivers, or delivers that went another way) would leave the figure
//! resting on nothing, and a failed deliver times a different path.

use serde::Serialize;

use super::timed_ops::{every_op_counted, OpsCounted, OpsNamed};
use super::{Checks, Violation};

/// Claim: KVCR timed every bench deliver, and each succeeded.
pub const BENCH_DELIVERED: &str = "KVCR timed every bench deliver as a successful local_deliver";

/// What a deliver bench ran, as the worker and KVCR counted it (also
/// TC-12's G3 read bench: [`super::g3_read_bench`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BenchCounts {
    /// The worker (`A`).
    pub worker: String,
    /// Delivers asked for.
    pub asked: u64,
    /// Delivers the worker ran, and how many of them failed (raised or
    /// left a block undelivered), with the first one described.
    pub ran: u64,
    pub failed: u64,
    pub first_failure: Option<String>,
    /// KVCR's operations of the bench's scope over the bench (`local_deliver`;
    /// `g3_deliver` for TC-12's G3 read bench): successful, and the others
    /// as (result, count).
    pub kvcr_success: u64,
    pub kvcr_unsuccessful: Vec<(String, u64)>,
}

/// How the deliver bench's messages name its ops.
const DELIVERS: OpsNamed = OpsNamed {
    ran: "delivers",
    counted: "bench delivers",
    scope: "local_deliver",
    why_exact: None,
};

impl BenchCounts {
    /// The counts as the shared verdict reads them.
    pub(super) fn counted(&self) -> OpsCounted<'_> {
        OpsCounted {
            worker: &self.worker,
            asked: self.asked,
            ran: self.ran,
            failed: self.failed,
            first_failure: self.first_failure.as_deref(),
            success: self.kvcr_success,
            unsuccessful: &self.kvcr_unsuccessful,
        }
    }
}

/// The worker ran every deliver asked for without a failure, and KVCR's
/// `local_deliver` success count rose by exactly that many, with no
/// unsuccessful `local_deliver`.
pub fn expect_bench_delivered(c: &BenchCounts) -> Result<(), Violation> {
    let mut checks = Checks::new(BENCH_DELIVERED);
    every_op_counted(&mut checks, &DELIVERS, &c.counted());
    checks.verdict()
}

#[cfg(test)]
impl BenchCounts {
    /// Test help: worker A asked for 400 ops, ran `ran`, saw `failed` fail
    /// (the first described as `failure`); KVCR counted `success`.
    pub(super) fn of_400(ran: u64, failed: u64, success: u64, failure: &str) -> Self {
        BenchCounts {
            worker: "A".into(),
            asked: 400,
            ran,
            failed,
            first_failure: (failed > 0).then(|| failure.into()),
            kvcr_success: success,
            kvcr_unsuccessful: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ran: u64, failed: u64, success: u64) -> BenchCounts {
        BenchCounts::of_400(ran, failed, success, "op 7: RuntimeError: boom")
    }

    #[test]
    fn every_deliver_counted_and_successful_passes() {
        assert_eq!(expect_bench_delivered(&counts(400, 0, 400)), Ok(()));
    }

    #[test]
    fn a_count_that_did_not_move_fails() {
        let v = expect_bench_delivered(&counts(400, 0, 0)).unwrap_err();
        assert_eq!(v.claim, BENCH_DELIVERED);
        assert!(v.detail.contains("did not move over 400"), "{v}");
    }

    #[test]
    fn a_count_other_than_the_ops_fails() {
        let v = expect_bench_delivered(&counts(400, 0, 399)).unwrap_err();
        assert!(
            v.detail.contains("rose by 399, expected exactly the 400"),
            "{v}"
        );
    }

    #[test]
    fn a_failed_deliver_fails_whichever_side_saw_it() {
        let v = expect_bench_delivered(&counts(400, 1, 400)).unwrap_err();
        assert!(
            v.detail.contains("saw 1 of 400 delivers fail (first: op 7"),
            "{v}"
        );
        let mut kvcr = counts(400, 0, 399);
        kvcr.kvcr_unsuccessful = vec![("failed".into(), 1)];
        let v = expect_bench_delivered(&kvcr).unwrap_err();
        assert!(
            v.detail.contains("did not succeed on worker A: 1 failed"),
            "{v}"
        );
    }

    #[test]
    fn a_worker_that_ran_fewer_delivers_fails() {
        let v = expect_bench_delivered(&counts(10, 0, 10)).unwrap_err();
        assert!(
            v.detail.contains("ran 10 delivers, 400 were asked for"),
            "{v}"
        );
    }
}
