//! Nothing lost, block by block: the recovery ledger of a dead worker's pool.
//!
//! Like Jepsen's set checker: every block the dead worker had committed to
//! its Guard pool (stored, and not evicted, by KVCR's own inventory events
//! in the case's window) is classified once the replacement has reclaimed
//! the pool: **recovered** (held by the replacement, or reclaimed by it and
//! then evicted by its own LRU: a replacement that starts on a full pool
//! makes room for its first deposits), **lost** (committed,
//! not held, or held only because the replacement computed and stored it
//! again), **unexpected** (served by the Guard or held, but never
//! committed). And the Guard must have recovered the whole pool: its
//! `recovered_blocks` equals the blocks the pool held at the kill.

use std::collections::BTreeSet;

use serde::Serialize;

use super::Violation;

/// What was observed, in the order it happened.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LedgerInput {
    /// Blocks the dead worker committed in this case and still held at the kill.
    pub committed: BTreeSet<u64>,
    /// Blocks its pool held at the kill, committed in this case or before
    /// (KVCR's allocated slots over pages per block); `None` when unknown.
    pub pool_blocks_at_kill: Option<u64>,
    /// The Guard's `recovered_blocks` at its promotion.
    pub guard_recovered_blocks: Option<u64>,
    /// Blocks peers received from the dead worker's endpoint after the kill.
    pub served_by_guard: BTreeSet<u64>,
    /// Blocks the replacement holds after its claim (of those asked for).
    pub held_by_replacement: BTreeSet<u64>,
    /// Blocks the replacement's KVCR evicted without having stored them
    /// (its inventory `removed` events): reclaimed, then evicted to make
    /// room. Held once, so recovered.
    #[serde(default)]
    pub evicted_by_replacement: BTreeSet<u64>,
    /// Blocks the replacement's KVCR stored itself (its inventory `stored`
    /// events; a reclaim announces none): computed again and deposited by
    /// the replacement, so held, but not recovered.
    #[serde(default)]
    pub stored_by_replacement: BTreeSet<u64>,
}

/// Every committed block, classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ledger {
    pub committed: usize,
    pub recovered: Vec<u64>,
    pub lost: Vec<u64>,
    pub unexpected: Vec<u64>,
    pub served_by_guard: Vec<u64>,
    /// Recovered blocks the replacement evicted since (not held any more).
    pub evicted_after_reclaim: Vec<u64>,
}

/// The ledger of `input`.
pub fn classify(input: &LedgerInput) -> Ledger {
    let once_held: BTreeSet<u64> = input
        .held_by_replacement
        .union(&input.evicted_by_replacement)
        .filter(|h| !input.stored_by_replacement.contains(h))
        .copied()
        .collect();
    Ledger {
        committed: input.committed.len(),
        recovered: input.committed.intersection(&once_held).copied().collect(),
        lost: input.committed.difference(&once_held).copied().collect(),
        // Evictions reach blocks committed before the case too: not judged.
        unexpected: input
            .served_by_guard
            .union(&input.held_by_replacement)
            .filter(|h| !input.committed.contains(h))
            .copied()
            .collect(),
        served_by_guard: input.served_by_guard.iter().copied().collect(),
        evicted_after_reclaim: input
            .committed
            .intersection(&input.evicted_by_replacement)
            .filter(|h| !input.held_by_replacement.contains(h))
            .copied()
            .collect(),
    }
}

const CLAIM: &str = "nothing lost, block by block";

fn few(blocks: &[u64]) -> String {
    let shown: Vec<String> = blocks.iter().take(8).map(u64::to_string).collect();
    let more = blocks.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Passes when no committed block is lost, nothing unexpected was served or
/// held, and the Guard recovered exactly the blocks the pool held.
pub fn expect_nothing_lost(input: &LedgerInput) -> Result<Ledger, Violation> {
    let ledger = classify(input);
    let mut failed = Vec::new();
    if input.committed.is_empty() {
        failed.push("no block was committed to the pool: the ledger checks nothing".to_string());
    }
    if !ledger.lost.is_empty() {
        failed.push(format!(
            "{} of {} committed blocks lost (not held by the replacement, or computed and stored again by it): {}",
            ledger.lost.len(),
            ledger.committed,
            few(&ledger.lost)
        ));
    }
    if !ledger.unexpected.is_empty() {
        failed.push(format!(
            "{} blocks served or held that were never committed: {}",
            ledger.unexpected.len(),
            few(&ledger.unexpected)
        ));
    }
    match (input.guard_recovered_blocks, input.pool_blocks_at_kill) {
        (Some(recovered), Some(pool)) if recovered != pool => failed.push(format!(
            "the Guard recovered {recovered} blocks; the pool held {pool} at the kill"
        )),
        (Some(recovered), None) if recovered < ledger.committed as u64 => failed.push(format!(
            "the Guard recovered {recovered} blocks, fewer than the {} committed",
            ledger.committed
        )),
        (None, _) => failed.push("the Guard's recovered_blocks is unknown".to_string()),
        _ => {}
    }
    if failed.is_empty() {
        Ok(ledger)
    } else {
        Err(Violation {
            claim: CLAIM,
            detail: failed.join("; "),
        })
    }
}

/// After the takeover, before the reclaim: every block the Guard served
/// from the dead worker's endpoint was committed (`ledger` classified with
/// nothing held yet; lost blocks are judged after the reclaim).
pub fn expect_served_committed(ledger: &Ledger) -> Result<(), Violation> {
    if ledger.unexpected.is_empty() {
        return Ok(());
    }
    Err(Violation {
        claim: CLAIM,
        detail: format!(
            "after the takeover, the Guard served {} blocks the dead worker never committed: {}",
            ledger.unexpected.len(),
            few(&ledger.unexpected)
        ),
    })
}

/// After a clean release (no promotion): every committed block is held by
/// the replacement, and there was something to hold.
pub fn expect_reclaimed(input: &LedgerInput) -> Result<Ledger, Violation> {
    let ledger = classify(input);
    if input.committed.is_empty() {
        return Err(Violation {
            claim: CLAIM,
            detail: "no block was committed to the pool: the ledger checks nothing".into(),
        });
    }
    if ledger.lost.is_empty() {
        return Ok(ledger);
    }
    Err(Violation {
        claim: CLAIM,
        detail: format!(
            "{} of {} committed blocks lost across the handback (not held by the replacement): {}",
            ledger.lost.len(),
            ledger.committed,
            few(&ledger.lost)
        ),
    })
}

/// Blocks a promoted Guard served from its pool that the dead worker had
/// itself reclaimed in an earlier takeover (records the Guard kept from its
/// own handback, not ones the worker journaled), and what the replacement
/// that reclaimed the pool afterwards holds of them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CarriedBlocks {
    /// The prompt whose prefix a peer read from the Guard, e.g. `f042v1`.
    pub prompt: String,
    /// Blocks of that prefix the peer received from the dead worker's endpoint.
    pub served_by_guard: BTreeSet<u64>,
    /// Those the replacement holds after its claim.
    pub held_by_replacement: BTreeSet<u64>,
    /// Those the replacement's KVCR evicted without storing them: reclaimed,
    /// then evicted to make room. Held once, so kept.
    pub evicted_by_replacement: BTreeSet<u64>,
    /// Those the replacement's KVCR stored itself: computed again, not kept.
    pub stored_by_replacement: BTreeSet<u64>,
}

const CARRIED_CLAIM: &str = "a block the Guard serves stays in the pool it hands back";

/// Passes when every carried block the Guard served is in the pool it
/// handed back (held, or reclaimed and then evicted, by the replacement,
/// and not computed again by it): a read of a block is a use of it, not its
/// removal, however many handbacks the block has been through.
pub fn expect_carried_blocks_kept(carried: &CarriedBlocks) -> Result<(), Violation> {
    if carried.served_by_guard.is_empty() {
        return Err(Violation {
            claim: CARRIED_CLAIM,
            detail: format!(
                "the Guard served no block of {}: the check has nothing to follow",
                carried.prompt
            ),
        });
    }
    let missing: Vec<u64> = carried
        .served_by_guard
        .iter()
        .filter(|h| {
            let once_held = carried.held_by_replacement.contains(h)
                || carried.evicted_by_replacement.contains(h);
            !once_held || carried.stored_by_replacement.contains(h)
        })
        .copied()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Violation {
        claim: CARRIED_CLAIM,
        detail: format!(
            "the Guard served {} blocks of {} that the dead worker had reclaimed in an earlier \
             takeover; the pool it handed back is missing {} of them (not held by the \
             replacement, or computed and stored again by it): {}",
            carried.served_by_guard.len(),
            carried.prompt,
            missing.len(),
            few(&missing)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[u64]) -> BTreeSet<u64> {
        v.iter().copied().collect()
    }

    fn input() -> LedgerInput {
        LedgerInput {
            committed: set(&[1, 2, 3, 4]),
            pool_blocks_at_kill: Some(6),
            guard_recovered_blocks: Some(6),
            served_by_guard: set(&[1, 2]),
            held_by_replacement: set(&[1, 2, 3, 4]),
            evicted_by_replacement: set(&[]),
            stored_by_replacement: set(&[]),
        }
    }

    #[test]
    fn a_block_the_replacement_evicted_after_reclaiming_is_recovered() {
        let mut i = input();
        i.held_by_replacement = set(&[1, 2, 3]);
        i.evicted_by_replacement = set(&[4, 99]);
        let ledger = expect_nothing_lost(&i).unwrap();
        assert_eq!(ledger.evicted_after_reclaim, vec![4]);
        assert!(ledger.lost.is_empty());
        // Evicted by the replacement, never committed: not unexpected.
        assert!(ledger.unexpected.is_empty());
        i.evicted_by_replacement = set(&[]);
        assert!(expect_nothing_lost(&i)
            .unwrap_err()
            .detail
            .contains("1 of 4 committed blocks lost"));
    }

    #[test]
    fn a_block_the_replacement_stored_itself_is_lost_not_recovered() {
        let mut i = input();
        i.stored_by_replacement = set(&[4, 50]);
        let v = expect_nothing_lost(&i).unwrap_err();
        assert!(
            v.detail
                .contains("1 of 4 committed blocks lost (not held by the replacement, or computed and stored again by it): 4"),
            "{v}"
        );
        assert!(expect_reclaimed(&i).is_err());
    }

    #[test]
    fn a_whole_recovery_passes() {
        let ledger = expect_nothing_lost(&input()).unwrap();
        assert_eq!(ledger.recovered, vec![1, 2, 3, 4]);
        assert!(ledger.lost.is_empty() && ledger.unexpected.is_empty());
    }

    #[test]
    fn a_lost_block_is_named() {
        let mut i = input();
        i.held_by_replacement = set(&[1, 2, 4]);
        i.guard_recovered_blocks = Some(5);
        let v = expect_nothing_lost(&i).unwrap_err();
        assert!(v
            .detail
            .contains("1 of 4 committed blocks lost (not held by the replacement, or computed and stored again by it): 3"));
        assert!(v
            .detail
            .contains("the Guard recovered 5 blocks; the pool held 6"));
    }

    #[test]
    fn a_block_never_committed_is_unexpected() {
        let mut i = input();
        i.served_by_guard = set(&[1, 9]);
        let v = expect_nothing_lost(&i).unwrap_err();
        assert!(v.detail.contains("never committed: 9"), "{v}");
    }

    #[test]
    fn an_empty_or_unknown_ledger_fails() {
        let v = expect_nothing_lost(&LedgerInput::default()).unwrap_err();
        assert!(v.detail.contains("checks nothing"));
        assert!(v.detail.contains("recovered_blocks is unknown"));
        let mut i = input();
        i.pool_blocks_at_kill = None;
        i.guard_recovered_blocks = Some(3);
        assert!(expect_nothing_lost(&i)
            .unwrap_err()
            .detail
            .contains("fewer than the 4 committed"));
    }

    #[test]
    fn after_the_takeover_a_served_block_never_committed_is_named() {
        let mut i = LedgerInput {
            committed: set(&[1, 2, 3]),
            served_by_guard: set(&[1, 2]),
            ..Default::default()
        };
        assert!(expect_served_committed(&classify(&i)).is_ok());
        i.served_by_guard = set(&[2, 7]);
        let v = expect_served_committed(&classify(&i)).unwrap_err();
        assert!(
            v.detail
                .contains("served 1 blocks the dead worker never committed: 7"),
            "{v}"
        );
    }

    #[test]
    fn a_reclaim_must_hold_every_committed_block() {
        let mut i = input();
        assert!(expect_reclaimed(&i).is_ok());
        i.held_by_replacement = set(&[1, 2, 3]);
        assert!(expect_reclaimed(&i)
            .unwrap_err()
            .detail
            .contains("1 of 4 committed blocks lost across the handback"));
        assert!(expect_reclaimed(&LedgerInput::default()).is_err());
    }

    #[test]
    fn many_lost_blocks_are_shortened() {
        let mut i = input();
        i.committed = (1..=20).collect();
        i.held_by_replacement = set(&[]);
        i.pool_blocks_at_kill = Some(20);
        i.guard_recovered_blocks = Some(20);
        let v = expect_nothing_lost(&i).unwrap_err();
        assert!(
            v.detail.contains("1, 2, 3, 4, 5, 6, 7, 8 and 12 more"),
            "{v}"
        );
    }

    fn carried() -> CarriedBlocks {
        CarriedBlocks {
            prompt: "f042v1".into(),
            served_by_guard: set(&[1, 2, 3, 4]),
            held_by_replacement: set(&[1, 2, 3, 4]),
            ..Default::default()
        }
    }

    #[test]
    fn carried_blocks_the_replacement_holds_pass() {
        assert!(expect_carried_blocks_kept(&carried()).is_ok());
        // Reclaimed, then evicted by the replacement's own LRU: kept.
        let mut c = carried();
        c.held_by_replacement = set(&[1, 2]);
        c.evicted_by_replacement = set(&[3, 4]);
        assert!(expect_carried_blocks_kept(&c).is_ok());
    }

    #[test]
    fn carried_blocks_gone_after_one_read_fail_named() {
        // A Guard that retires each carried block once its read is released
        // hands back a pool without any of them.
        let mut c = carried();
        c.held_by_replacement = set(&[]);
        let v = expect_carried_blocks_kept(&c).unwrap_err();
        assert_eq!(
            v.claim,
            "a block the Guard serves stays in the pool it hands back"
        );
        assert!(
            v.detail.contains(
                "the Guard served 4 blocks of f042v1 that the dead worker had reclaimed in an \
                 earlier takeover; the pool it handed back is missing 4 of them"
            ),
            "{v}"
        );
        assert!(v.detail.ends_with(": 1, 2, 3, 4"), "{v}");
    }

    #[test]
    fn a_carried_block_computed_again_is_missing() {
        let mut c = carried();
        c.stored_by_replacement = set(&[3]);
        let v = expect_carried_blocks_kept(&c).unwrap_err();
        assert!(v.detail.contains("missing 1 of them"), "{v}");
        assert!(v.detail.ends_with(": 3"), "{v}");
    }

    #[test]
    fn nothing_served_checks_nothing() {
        let v = expect_carried_blocks_kept(&CarriedBlocks {
            prompt: "f042v1".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(v.detail.contains("served no block of f042v1"), "{v}");
    }
}
