//! Concurrent requests for one new prefix on one worker (TC-17): each
//! request computes the prefix and deposits it, so KVCR meets a deposit of
//! blocks it is still filling from another. It must make that deposit wait
//! for the copy in flight, copy each block once, and fail none.

use serde::Serialize;

use super::Violation;

/// Claim: the deposits overlapped (the case's premise, proven).
pub const DEPOSITS_OVERLAPPED: &str = "a deposit met blocks KVCR was still filling";
/// Claim: a deposit meeting a filling block is not failed or dropped.
pub const NO_FAILED_DEPOSIT: &str = "every deposit of the shared prefix succeeds";
/// Claim: KVCR copied each block of the prefix into its pool once.
pub const DEPOSITED_ONCE: &str = "each block of the shared prefix is copied into KVCR's pool once";

/// What one worker's counters said about the deposits of the burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SharedPrefixDeposits {
    /// Requests sent at once, all for the same prompt.
    pub requests: u64,
    /// Full blocks of the prompt.
    pub prefix_blocks: u64,
    /// Blocks the worker computed (`cpu_engine_computed_blocks`).
    pub computed_blocks: u64,
    /// Deposit outcomes the engine counted (`cpu_engine_kvcr_deposit_blocks`).
    pub deposited_success: u64,
    pub deposited_failed: u64,
    pub deposited_dropped: u64,
    /// Blocks KVCR copied into its pool (`kvcr_transfer_blocks{local_fill}`).
    pub copied_blocks: u64,
    /// Blocks a deposit found still filling
    /// (`cpu_engine_kvcr_deposit_met_filling_blocks`).
    pub met_filling_blocks: u64,
}

impl SharedPrefixDeposits {
    /// Deposit outcomes counted so far: every computed block gets one.
    pub fn answered(&self) -> u64 {
        self.deposited_success + self.deposited_failed + self.deposited_dropped
    }
}

/// At least one deposit met a block still filling: without it the case
/// proved nothing about KVCR's FILLING path.
pub fn expect_overlap(d: &SharedPrefixDeposits, bursts: usize) -> Result<(), Violation> {
    if d.met_filling_blocks > 0 {
        return Ok(());
    }
    Err(Violation {
        claim: DEPOSITS_OVERLAPPED,
        detail: format!(
            "no deposit met a filling block: {} requests for one {}-block prefix computed {} blocks and deposited {}, never while KVCR was still copying another's ({bursts} {} of a new prompt, none met one)",
            d.requests,
            d.prefix_blocks,
            d.computed_blocks,
            d.answered(),
            if bursts == 1 { "burst" } else { "bursts" }
        ),
    })
}

/// No deposit of the burst failed or was dropped.
pub fn expect_no_failed_deposit(d: &SharedPrefixDeposits) -> Result<(), Violation> {
    if d.deposited_failed == 0 && d.deposited_dropped == 0 {
        return Ok(());
    }
    Err(Violation {
        claim: NO_FAILED_DEPOSIT,
        detail: format!(
            "of {} blocks deposited, {} failed and {} were dropped ({} met a block still filling)",
            d.answered(),
            d.deposited_failed,
            d.deposited_dropped,
            d.met_filling_blocks
        ),
    })
}

/// KVCR copied exactly the prefix's blocks, however many deposits carried them.
pub fn expect_deposited_once(d: &SharedPrefixDeposits) -> Result<(), Violation> {
    if d.copied_blocks == d.prefix_blocks {
        return Ok(());
    }
    Err(Violation {
        claim: DEPOSITED_ONCE,
        detail: format!(
            "KVCR copied {} blocks into its pool for a {}-block prefix that {} deposits carried ({} blocks)",
            d.copied_blocks,
            d.prefix_blocks,
            d.requests,
            d.answered()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlapped() -> SharedPrefixDeposits {
        SharedPrefixDeposits {
            requests: 8,
            prefix_blocks: 4,
            computed_blocks: 32,
            deposited_success: 32,
            deposited_failed: 0,
            deposited_dropped: 0,
            copied_blocks: 4,
            met_filling_blocks: 28,
        }
    }

    #[test]
    fn overlapped_deposits_that_copied_once_pass() {
        let d = overlapped();
        assert!(expect_overlap(&d, 1).is_ok());
        assert!(expect_no_failed_deposit(&d).is_ok());
        assert!(expect_deposited_once(&d).is_ok());
    }

    #[test]
    fn deposits_that_never_overlapped_prove_nothing() {
        let d = SharedPrefixDeposits {
            computed_blocks: 4,
            deposited_success: 4,
            met_filling_blocks: 0,
            ..overlapped()
        };
        assert_eq!(
            expect_overlap(&d, 3).unwrap_err().to_string(),
            "a deposit met blocks KVCR was still filling: no deposit met a filling block: 8 requests for one 4-block prefix computed 4 blocks and deposited 4, never while KVCR was still copying another's (3 bursts of a new prompt, none met one)"
        );
        assert!(expect_overlap(&d, 1)
            .unwrap_err()
            .to_string()
            .ends_with("(1 burst of a new prompt, none met one)"));
    }

    #[test]
    fn a_failed_or_dropped_deposit_fails() {
        let failed = SharedPrefixDeposits {
            deposited_success: 28,
            deposited_failed: 4,
            ..overlapped()
        };
        assert!(expect_no_failed_deposit(&failed)
            .unwrap_err()
            .detail
            .contains("4 failed and 0 were dropped"));
        let dropped = SharedPrefixDeposits {
            deposited_success: 31,
            deposited_dropped: 1,
            ..overlapped()
        };
        assert!(expect_no_failed_deposit(&dropped).is_err());
    }

    #[test]
    fn a_block_copied_twice_or_never_fails() {
        for copied in [0, 3, 8] {
            let d = SharedPrefixDeposits {
                copied_blocks: copied,
                ..overlapped()
            };
            let v = expect_deposited_once(&d).unwrap_err();
            assert!(
                v.detail
                    .starts_with(&format!("KVCR copied {copied} blocks")),
                "{v}"
            );
        }
    }
}
