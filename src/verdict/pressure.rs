//! Pools under pressure (TC-07): the pool is the size asked for, eviction is
//! least-recently-used by KVCR's own inventory events, a deposit that found
//! no slot is reported failed, an evicted prefix is no longer hinted.

use std::collections::BTreeSet;

use serde::Serialize;

use super::{Checks, Violation};

/// The clause of TC-07's full pool.
pub const FULL_POOL: &str = "a deposit into a full pool is reported failed, not lost";
/// The clause of TC-07's evicted prefix.
pub const EVICTED_NOT_HINTED: &str = "an evicted prefix is no longer hinted";

/// The Guard pools hold the blocks the profile asked for.
pub fn expect_pool_blocks(want: u64, pool_blocks: &[u64]) -> Result<(), Violation> {
    if !pool_blocks.is_empty() && pool_blocks.iter().all(|b| *b == want) {
        return Ok(());
    }
    Err(Violation {
        claim: "the Guard pool is sized in blocks",
        detail: format!(
            "guard_pool_blocks = {want}, but the service's ready line gives pools of {pool_blocks:?} blocks"
        ),
    })
}

/// What the LRU check saw: blocks touched after commit (A), blocks committed
/// before the touch and never touched (B), what the overflow evicted, and
/// what the pool holds after it.
#[derive(Debug, Clone, Serialize)]
pub struct EvictionOrder {
    pub touched: Vec<u64>,
    pub untouched_older: Vec<u64>,
    pub removed: Vec<u64>,
    pub resident_after: BTreeSet<u64>,
}

/// Commit A, B, C; touch A; overflow: A survives, B is gone.
pub fn expect_lru(order: &EvictionOrder) -> Result<(), Violation> {
    let mut checks = Checks::new("eviction is least recently used");
    let removed: BTreeSet<u64> = order.removed.iter().copied().collect();
    if removed.is_empty() {
        checks.check(false, || {
            "the overflow evicted nothing (no inventory `removed` event)".to_string()
        });
    }
    let evicted_touched: Vec<u64> = order
        .touched
        .iter()
        .filter(|h| removed.contains(h) || !order.resident_after.contains(h))
        .copied()
        .collect();
    if !evicted_touched.is_empty() {
        checks.check(false, || {
            format!(
                "the recently touched blocks {evicted_touched:?} were evicted (removed: {:?})",
                order.removed
            )
        });
    }
    let kept_older: Vec<u64> = order
        .untouched_older
        .iter()
        .filter(|h| !removed.contains(h))
        .copied()
        .collect();
    if !kept_older.is_empty() {
        checks.check(false, || {
            format!(
            "the least recently used blocks {kept_older:?} survived the overflow (removed: {:?})",
            order.removed
        )
        });
    }
    checks.verdict()
}

/// A deposit of more blocks than the pool can take at once (`room`: its
/// free and evictable blocks): KVCR answers FAILED for the rest, and the
/// engine reports them.
pub fn expect_failed_reported(
    deposited_blocks: u64,
    room: u64,
    success: u64,
    failed: u64,
    dropped: u64,
) -> Result<(), Violation> {
    let mut checks = Checks::new(FULL_POOL);
    let must_fail = deposited_blocks.saturating_sub(room);
    if failed < must_fail {
        checks.check(false, || format!(
            "{deposited_blocks} blocks deposited into a pool with room for {room}: {failed} reported failed, at least {must_fail} must be"
        ));
    }
    if success + failed + dropped != deposited_blocks {
        checks.check(false, || format!(
            "outcomes success {success} + failed {failed} + dropped {dropped} ≠ {deposited_blocks} blocks deposited"
        ));
    }
    checks.verdict()
}

/// An evicted prefix sent to a peer: the router no longer hints it (the
/// peer attempts no remote delivery) and the peer computes it.
pub fn expect_not_hinted(
    remote_attempts: u64,
    computed_blocks: u64,
    prefix_blocks: u64,
) -> Result<(), Violation> {
    let mut checks = Checks::new(EVICTED_NOT_HINTED);
    if remote_attempts > 0 {
        checks.check(false, || format!(
            "the peer attempted {remote_attempts} remote deliveries of blocks its source had evicted: the router still hinted them"
        ));
    }
    if computed_blocks < prefix_blocks {
        checks.check(false, || format!(
            "the peer computed {computed_blocks} blocks, fewer than the {prefix_blocks} evicted ones"
        ));
    }
    checks.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(removed: &[u64], resident: &[u64]) -> EvictionOrder {
        EvictionOrder {
            touched: vec![1, 2],
            untouched_older: vec![3, 4],
            removed: removed.to_vec(),
            resident_after: resident.iter().copied().collect(),
        }
    }

    #[test]
    fn lru_passes_when_the_older_go_and_the_touched_stay() {
        assert!(expect_lru(&order(&[3, 4], &[1, 2, 5])).is_ok());
    }

    #[test]
    fn evicting_the_touched_fails() {
        let v = expect_lru(&order(&[1, 2], &[3, 4, 5])).unwrap_err();
        assert!(v
            .detail
            .contains("recently touched blocks [1, 2] were evicted"));
        assert!(v
            .detail
            .contains("least recently used blocks [3, 4] survived"));
        assert!(expect_lru(&order(&[], &[1, 2, 3, 4]))
            .unwrap_err()
            .detail
            .contains("evicted nothing"));
    }

    #[test]
    fn failed_deposits_must_be_reported() {
        assert!(expect_failed_reported(10, 8, 8, 2, 0).is_ok());
        let v = expect_failed_reported(10, 8, 10, 0, 0).unwrap_err();
        assert!(v.detail.contains("0 reported failed, at least 2 must be"));
        assert!(expect_failed_reported(10, 8, 7, 2, 0)
            .unwrap_err()
            .detail
            .contains("≠ 10 blocks deposited"));
    }

    #[test]
    fn a_hint_to_an_evicted_prefix_fails() {
        assert!(expect_not_hinted(0, 4, 4).is_ok());
        assert!(expect_not_hinted(1, 4, 4)
            .unwrap_err()
            .detail
            .contains("still hinted"));
        assert!(expect_not_hinted(0, 2, 4).is_err());
    }

    #[test]
    fn the_pool_must_be_the_size_asked_for() {
        assert!(expect_pool_blocks(12, &[12]).is_ok());
        assert!(expect_pool_blocks(12, &[6400]).is_err());
        assert!(expect_pool_blocks(12, &[]).is_err());
    }
}
