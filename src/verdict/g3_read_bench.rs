//! TC-12's G3 read bench: every read from disk the worker ran is one KVCR
//! counted.
//!
//! The bench's figures are its reads' times and KVCR's own `g3_deliver`
//! histogram over the bench, so the histogram must show exactly the reads
//! asked for, all successful: a count short of them means reads that went
//! another way (from KVCR's pool, were a block filled there) and left the
//! figures timing something other than the disk, and a failed read times
//! a different path.

use super::kvcr_bench::BenchCounts;
use super::timed_ops::{every_op_counted, OpsNamed};
use super::{Checks, Violation};

/// Claim: KVCR timed every bench read as a successful read from disk.
pub const G3_READS_TIMED: &str = "KVCR timed every bench read from disk as a successful g3_deliver";

/// How the G3 read bench's messages name its ops.
const READS: OpsNamed = OpsNamed {
    ran: "reads from disk",
    counted: "bench reads",
    scope: "g3_deliver",
    why_exact: Some("a read served from KVCR's pool is no g3_deliver"),
};

/// The worker ran every read asked for without a failure, and KVCR's
/// `g3_deliver` success count (`kvcr_success`) rose by exactly that many,
/// with no unsuccessful `g3_deliver`.
pub fn expect_g3_reads_timed(c: &BenchCounts) -> Result<(), Violation> {
    let mut checks = Checks::new(G3_READS_TIMED);
    every_op_counted(&mut checks, &READS, &c.counted());
    checks.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ran: u64, failed: u64, success: u64) -> BenchCounts {
        BenchCounts::of_400(ran, failed, success, "op 7: not on disk only: 42=local")
    }

    #[test]
    fn every_read_counted_and_successful_passes() {
        assert_eq!(expect_g3_reads_timed(&counts(400, 0, 400)), Ok(()));
    }

    #[test]
    fn a_count_that_did_not_move_or_fell_short_fails() {
        let v = expect_g3_reads_timed(&counts(400, 0, 0)).unwrap_err();
        assert_eq!(v.claim, G3_READS_TIMED);
        assert!(
            v.detail.contains("did not move over 400 bench reads"),
            "{v}"
        );
        assert!(
            v.detail
                .contains("a read served from KVCR's pool is no g3_deliver"),
            "{v}"
        );
        let v = expect_g3_reads_timed(&counts(400, 0, 399)).unwrap_err();
        assert!(
            v.detail.contains("rose by 399, expected exactly the 400"),
            "{v}"
        );
        // More than asked: reads outside the bench (a request's) in its window.
        let v = expect_g3_reads_timed(&counts(400, 0, 401)).unwrap_err();
        assert!(v.detail.contains("rose by 401"), "{v}");
    }

    #[test]
    fn a_failed_read_fails_whichever_side_saw_it() {
        let v = expect_g3_reads_timed(&counts(400, 1, 399)).unwrap_err();
        assert!(
            v.detail
                .contains("saw 1 of 400 reads from disk fail (first: op 7: not on disk only"),
            "{v}"
        );
        let mut kvcr = counts(400, 0, 399);
        kvcr.kvcr_unsuccessful = vec![("failed".into(), 1)];
        let v = expect_g3_reads_timed(&kvcr).unwrap_err();
        assert!(
            v.detail.contains("did not succeed on worker A: 1 failed"),
            "{v}"
        );
    }

    #[test]
    fn a_worker_that_ran_fewer_reads_fails() {
        let v = expect_g3_reads_timed(&counts(10, 0, 10)).unwrap_err();
        assert!(
            v.detail
                .contains("ran 10 reads from disk, 400 were asked for"),
            "{v}"
        );
    }
}
