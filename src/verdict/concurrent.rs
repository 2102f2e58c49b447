//! Concurrent requests for one new prefix on one worker (TC-17): each
//! request computes the prefix and deposits it, so KVCR meets a deposit of
//! blocks it is still filling from another. It must make that deposit wait
//! for the copy in flight, copy each block once, and fail none.
//!
//! The same burst into a full pool (TC-20): every deposit of the prefix
//! waits for room as a capacity waiter, and a waiter that gets its turn
//! after another deposit of its block must take that block, not copy or
//! fail it.

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
pub fn expect_overlap(d: &SharedPrefixDeposits) -> Result<(), Violation> {
    if d.met_filling_blocks > 0 {
        return Ok(());
    }
    Err(Violation {
        claim: DEPOSITS_OVERLAPPED,
        detail: format!(
            "no deposit met a filling block: {} requests for one {}-block prefix computed {} blocks and deposited {}, never while KVCR was still copying another's",
            d.requests,
            d.prefix_blocks,
            d.computed_blocks,
            d.answered()
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

/// Claim: the burst's deposits met a full pool and waited for room.
pub const WAITED_FOR_ROOM: &str =
    "the deposits of the burst met a full pool and waited for spills to disk to make room";
/// Claim: more than one request deposited the prefix (the premise: without
/// it no deposit could meet another's block).
pub const DEPOSITS_MET: &str = "several requests deposited the same new prefix at once";
/// Claim: the burst's prefix is in the pool once the burst is answered.
pub const PREFIX_IN_POOL: &str = "the pool holds the prefix the burst deposited";

/// What showed that a burst's deposits met a full pool and waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FullPoolBurst {
    pub deposits: SharedPrefixDeposits,
    /// The pool's slots, and how many were free just before the burst.
    pub pool_total: u64,
    pub pool_free_before: u64,
    /// Blocks KVCR stored to disk during the burst (`kvcr_transfer_blocks{g3_store}`):
    /// the spills that made room.
    pub spilled_blocks: u64,
    /// KVCR's requests for capacity during the burst
    /// (`cpu_engine_kvcr_capacity_needed`).
    pub capacity_asked: u64,
}

/// The pool had no free slot when the burst came, KVCR spilled at least
/// one block to disk for each block it copied in, and it asked the engine
/// for capacity: a copy into the full pool waits for its spill (KVCR keeps
/// the deposit as a capacity waiter until the spill frees the slot).
pub fn expect_waited_for_room(b: &FullPoolBurst) -> Result<(), Violation> {
    let mut why = Vec::new();
    if b.pool_total == 0 || b.pool_free_before != 0 {
        why.push(format!(
            "the pool was not full before the burst: {} of {} slots free",
            b.pool_free_before, b.pool_total
        ));
    }
    if b.spilled_blocks < b.deposits.copied_blocks.max(b.deposits.prefix_blocks) {
        why.push(format!(
            "KVCR spilled {} blocks to disk while copying {} of a {}-block prefix into its pool",
            b.spilled_blocks, b.deposits.copied_blocks, b.deposits.prefix_blocks
        ));
    }
    if b.capacity_asked == 0 {
        why.push("KVCR never asked the engine for capacity during the burst".to_string());
    }
    if why.is_empty() {
        return Ok(());
    }
    Err(Violation {
        claim: WAITED_FOR_ROOM,
        detail: why.join("; "),
    })
}

/// More blocks of the prefix were computed (and deposited) than it has:
/// at least two requests deposited it, so their deposits met.
pub fn expect_deposits_met(d: &SharedPrefixDeposits) -> Result<(), Violation> {
    if d.computed_blocks > d.prefix_blocks {
        return Ok(());
    }
    Err(Violation {
        claim: DEPOSITS_MET,
        detail: format!(
            "{} requests for one {}-block prefix computed {} blocks: one request deposited it, the others found it in the device cache",
            d.requests, d.prefix_blocks, d.computed_blocks
        ),
    })
}

/// Every block of `prefix` is in the pool (`holding` says `local`): the
/// newest blocks are the last the pool's LRU evicts.
pub fn expect_prefix_in_pool(
    prefix: &[u64],
    holding: &std::collections::BTreeMap<u64, String>,
) -> Result<(), Violation> {
    let elsewhere: Vec<String> = prefix
        .iter()
        .filter(|h| holding.get(h).map(String::as_str) != Some("local"))
        .map(|h| {
            format!(
                "{h:016x} ({})",
                holding.get(h).map(String::as_str).unwrap_or("not reported")
            )
        })
        .collect();
    if elsewhere.is_empty() {
        return Ok(());
    }
    Err(Violation {
        claim: PREFIX_IN_POOL,
        detail: format!(
            "{} of {} blocks not in the pool: {}",
            elsewhere.len(),
            prefix.len(),
            elsewhere.join(", ")
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
        assert!(expect_overlap(&d).is_ok());
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
            expect_overlap(&d).unwrap_err().to_string(),
            "a deposit met blocks KVCR was still filling: no deposit met a filling block: 8 requests for one 4-block prefix computed 4 blocks and deposited 4, never while KVCR was still copying another's"
        );
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

    fn full_pool_burst() -> FullPoolBurst {
        FullPoolBurst {
            deposits: overlapped(),
            pool_total: 8,
            pool_free_before: 0,
            spilled_blocks: 4,
            capacity_asked: 3,
        }
    }

    #[test]
    fn a_burst_that_waited_for_spills_passes() {
        let b = full_pool_burst();
        assert!(expect_waited_for_room(&b).is_ok());
        assert!(expect_deposits_met(&b.deposits).is_ok());
    }

    #[test]
    fn a_burst_into_a_pool_with_room_proves_no_wait() {
        let b = FullPoolBurst {
            pool_free_before: 4,
            spilled_blocks: 0,
            capacity_asked: 0,
            ..full_pool_burst()
        };
        assert_eq!(
            expect_waited_for_room(&b).unwrap_err().to_string(),
            "the deposits of the burst met a full pool and waited for spills to disk to make room: \
             the pool was not full before the burst: 4 of 8 slots free; \
             KVCR spilled 0 blocks to disk while copying 4 of a 4-block prefix into its pool; \
             KVCR never asked the engine for capacity during the burst"
        );
        let too_few_spills = FullPoolBurst {
            spilled_blocks: 3,
            ..full_pool_burst()
        };
        assert!(expect_waited_for_room(&too_few_spills).is_err());
    }

    #[test]
    fn one_deposit_of_the_prefix_proves_nothing_met() {
        let d = SharedPrefixDeposits {
            computed_blocks: 4,
            ..overlapped()
        };
        assert!(expect_deposits_met(&d)
            .unwrap_err()
            .detail
            .starts_with("8 requests for one 4-block prefix computed 4 blocks"));
    }

    #[test]
    fn a_prefix_block_outside_the_pool_fails() {
        let mut holding = std::collections::BTreeMap::new();
        holding.insert(1, "local".to_string());
        holding.insert(2, "g3".to_string());
        assert!(expect_prefix_in_pool(&[1], &holding).is_ok());
        assert_eq!(
            expect_prefix_in_pool(&[1, 2, 3], &holding)
                .unwrap_err()
                .detail,
            "2 of 3 blocks not in the pool: 0000000000000002 (g3), 0000000000000003 (not reported)"
        );
    }
}
