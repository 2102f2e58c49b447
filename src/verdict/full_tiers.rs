//! Both of KVCR's tiers full (TC-20): a worker's DRAM pool and its disk
//! tier (G3) hold fewer blocks than it committed, so every deposit waits
//! for a spill to disk and every spill evicts the disk's least recently
//! used block. What KVCR then holds, what it says it evicted, and whether
//! its slots come back.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{Checks, Violation};

/// Where the committed prompts should be once both tiers are full, oldest
/// prompt first: the oldest evicted from disk, then those the disk tier
/// holds, then the newest, still in the DRAM pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub evicted: usize,
    pub on_disk: usize,
    pub in_dram: usize,
}

impl Layout {
    /// Prompts of `per_prompt` blocks, `evicted` more than a pool of
    /// `pool_blocks` and a disk tier of `g3_blocks` hold together. Both
    /// tiers must hold whole prompts, or which prompt is where is not
    /// exact.
    pub fn overflowing(
        pool_blocks: u64,
        g3_blocks: u64,
        per_prompt: u64,
        evicted: usize,
    ) -> Result<Layout, String> {
        if per_prompt == 0 || pool_blocks % per_prompt != 0 || g3_blocks % per_prompt != 0 {
            return Err(format!(
                "both tiers must hold whole prompts: a pool of {pool_blocks} blocks and a disk \
                 tier of {g3_blocks}, prompts of {per_prompt}"
            ));
        }
        if pool_blocks == 0 || g3_blocks == 0 {
            return Err(format!(
                "both tiers must hold a prompt: a pool of {pool_blocks} blocks, a disk tier of \
                 {g3_blocks}"
            ));
        }
        Ok(Layout {
            evicted,
            on_disk: (g3_blocks / per_prompt) as usize,
            in_dram: (pool_blocks / per_prompt) as usize,
        })
    }

    /// Prompts to commit.
    pub fn prompts(&self) -> usize {
        self.evicted + self.on_disk + self.in_dram
    }

    /// What KVCR should answer for the `i`-th prompt (oldest first):
    /// `miss`, `g3` or `local`.
    pub fn tier_of(&self, i: usize) -> &'static str {
        if i < self.evicted {
            "miss"
        } else if i < self.evicted + self.on_disk {
            "g3"
        } else {
            "local"
        }
    }
}

/// What a worker showed after its prompts overflowed both tiers.
#[derive(Debug, Clone, Serialize)]
pub struct FullTiers {
    pub layout: Layout,
    /// The committed prompts' blocks, oldest prompt first.
    pub prompts: Vec<Vec<u64>>,
    /// Where KVCR holds each of those blocks now (`/kvcr/holding`).
    pub holding: BTreeMap<u64, String>,
    /// Blocks of the engine's deposits by KVCR's outcome: success, failed, dropped.
    pub deposits: (u64, u64, u64),
    /// Blocks KVCR's inventory events stored in G3 in the window.
    pub stored_in_g3: u64,
    /// Blocks KVCR's inventory events removed from G3 in the window.
    pub removed_from_g3: Vec<u64>,
    /// `kvcr_transfer_blocks{g3_store}` over the window (successful stores).
    pub g3_store_blocks: u64,
    /// `g3_store` operations that failed in the window.
    pub g3_store_failed: u64,
    /// The disk tier's allocated slots before and after the window, and its total.
    pub g3_allocated_before: u64,
    pub g3_allocated_after: u64,
    pub g3_total: u64,
}

/// Overflowing both tiers: every deposit waited for room and succeeded, the
/// disk tier evicted its least recently used blocks (the oldest prompts,
/// each removal published), kept the rest, and its accounting adds up.
pub fn expect_full_tiers_evict(f: &FullTiers) -> Result<(), Violation> {
    let mut c = Checks::new("a full disk tier evicts its least recently used blocks");
    let committed: u64 = f.prompts.iter().map(|p| p.len() as u64).sum();
    let (success, failed, dropped) = f.deposits;
    c.check(failed == 0 && dropped == 0 && success >= committed, || {
        format!(
            "deposits into the full pool must wait for room and succeed: {success} blocks \
             succeeded, {failed} failed, {dropped} dropped of {committed} committed"
        )
    });
    let misplaced: Vec<String> = f
        .prompts
        .iter()
        .enumerate()
        .filter_map(|(i, blocks)| {
            let want = f.layout.tier_of(i);
            let wrong: Vec<String> = blocks
                .iter()
                .filter_map(|h| {
                    let held = f.holding.get(h).map(String::as_str).unwrap_or("unknown");
                    (held != want).then(|| format!("{h} in {held}"))
                })
                .collect();
            (!wrong.is_empty()).then(|| format!("prompt {i} (want {want}): {}", wrong.join(", ")))
        })
        .collect();
    c.check(misplaced.is_empty(), || {
        format!(
            "KVCR holds blocks elsewhere than least-recently-used eviction puts them: {}",
            misplaced.join("; ")
        )
    });
    let removed: BTreeSet<u64> = f.removed_from_g3.iter().copied().collect();
    let evicted = &f.prompts[..f.layout.evicted.min(f.prompts.len())];
    let unpublished: Vec<u64> = evicted
        .iter()
        .flatten()
        .filter(|h| !removed.contains(h))
        .copied()
        .collect();
    c.check(unpublished.is_empty(), || {
        format!("no G3 `removed` event for the evicted blocks {unpublished:?}")
    });
    let kept_removed: Vec<u64> = f.prompts[evicted.len()..]
        .iter()
        .flatten()
        .filter(|h| removed.contains(h))
        .copied()
        .collect();
    c.check(kept_removed.is_empty(), || {
        format!("G3 `removed` events for blocks that should have stayed: {kept_removed:?}")
    });
    c.check(f.g3_store_blocks == f.stored_in_g3, || {
        format!(
            "g3_store counted {} blocks, the inventory stored {} in G3",
            f.g3_store_blocks, f.stored_in_g3
        )
    })
    .check(f.g3_store_failed == 0, || {
        format!("{} g3_store operations failed", f.g3_store_failed)
    });
    let growth = f.g3_allocated_after as i64 - f.g3_allocated_before as i64;
    let net = f.stored_in_g3 as i64 - f.removed_from_g3.len() as i64;
    c.check(growth == net, || {
        format!(
            "the disk tier's allocated slots went {} → {} ({growth:+}), but G3 stored {} and \
             removed {} blocks ({net:+})",
            f.g3_allocated_before,
            f.g3_allocated_after,
            f.stored_in_g3,
            f.removed_from_g3.len()
        )
    })
    .check(f.g3_allocated_after == f.g3_total, || {
        format!(
            "the disk tier is not full: {} of {} slots allocated",
            f.g3_allocated_after, f.g3_total
        )
    });
    c.verdict()
}

/// KVCR's slot gauges of both tiers (`kvcr_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Slots {
    pub pool_total: u64,
    pub pool_allocated: u64,
    pub pool_evictable: u64,
    pub g3_total: u64,
    pub g3_allocated: u64,
    pub g3_evictable: u64,
    pub g3_pending_stores: u64,
    pub in_flight_ops: u64,
}

impl Slots {
    /// What is still held back: slots neither free nor evictable, stores in
    /// flight, operations in flight. Empty once KVCR is idle and leaked
    /// nothing.
    pub fn held_back(&self) -> Vec<String> {
        let mut held = Vec::new();
        if self.pool_evictable != self.pool_allocated {
            held.push(format!(
                "{} of {} allocated pool slots not evictable (claimed or filling)",
                self.pool_allocated.saturating_sub(self.pool_evictable),
                self.pool_allocated
            ));
        }
        if self.g3_evictable != self.g3_allocated {
            held.push(format!(
                "{} of {} allocated disk slots not evictable (claimed)",
                self.g3_allocated.saturating_sub(self.g3_evictable),
                self.g3_allocated
            ));
        }
        if self.g3_pending_stores != 0 {
            held.push(format!("{} spills to disk pending", self.g3_pending_stores));
        }
        if self.in_flight_ops != 0 {
            held.push(format!("{} operations in flight", self.in_flight_ops));
        }
        held
    }
}

/// Once idle, both full tiers give every slot back: each allocated slot is
/// evictable again (no claim or fill left behind, no spill pending, no
/// operation in flight), and both tiers are still full.
pub fn expect_slots_back(s: &Slots) -> Result<(), Violation> {
    let mut c = Checks::new("a full tier's slots come back once KVCR is idle");
    let held = s.held_back();
    c.check(held.is_empty(), || held.join("; "))
        .check(s.pool_allocated == s.pool_total, || {
            format!(
                "the pool is not full: {} of {} slots allocated",
                s.pool_allocated, s.pool_total
            )
        })
        .check(s.g3_allocated == s.g3_total, || {
            format!(
                "the disk tier is not full: {} of {} slots allocated",
                s.g3_allocated, s.g3_total
            )
        });
    c.verdict()
}

/// A prefix the full disk tier evicted is computed again: nothing of it is
/// delivered from G3, all its blocks are computed.
pub fn expect_recomputed(
    blocks: &[u64],
    delivered_from_g3: &BTreeSet<u64>,
    computed_blocks: u64,
) -> Result<(), Violation> {
    let mut c = Checks::new("a prefix evicted from the full disk tier is recomputed");
    let from_disk: Vec<u64> = blocks
        .iter()
        .filter(|h| delivered_from_g3.contains(h))
        .copied()
        .collect();
    c.check(from_disk.is_empty(), || {
        format!("{from_disk:?} were delivered from G3 after their eviction")
    })
    .check(computed_blocks >= blocks.len() as u64, || {
        format!(
            "{computed_blocks} blocks computed, fewer than the {} evicted",
            blocks.len()
        )
    });
    c.verdict()
}

/// What a fetch answered (`POST /kvcr/fetch`): per block whether it
/// arrived in the pool, and how many of its claims were given back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Staged {
    pub fetched: BTreeMap<u64, bool>,
    pub released: u64,
}

/// A prefix on the full disk tier fetched into the full pool.
#[derive(Debug, Clone, Serialize)]
pub struct FromDisk {
    pub blocks: Vec<u64>,
    pub staged: Staged,
    /// `kvcr_transfer_blocks{g3_fill}` over the fetch.
    pub g3_fill_blocks: u64,
    /// `g3_fill` operations that failed over the fetch.
    pub g3_fill_failed: u64,
    /// Where KVCR holds the blocks after the fetch.
    pub held_after: BTreeMap<u64, String>,
}

/// Every block of the prefix came from disk into the pool (the fetch says
/// so, `g3_fill` counts it, KVCR holds it in the pool), and every claim
/// the fetch took was given back.
pub fn expect_fetched_from_disk(f: &FromDisk) -> Result<(), Violation> {
    let mut c = Checks::new("a fetch stages a prefix from the full disk tier into the full pool");
    let n = f.blocks.len() as u64;
    let not_fetched: Vec<u64> = f
        .blocks
        .iter()
        .filter(|h| f.staged.fetched.get(h) != Some(&true))
        .copied()
        .collect();
    let not_in_pool: Vec<String> = f
        .blocks
        .iter()
        .filter_map(|h| {
            let held = f.held_after.get(h).map(String::as_str).unwrap_or("unknown");
            (held != "local").then(|| format!("{h} in {held}"))
        })
        .collect();
    c.check(not_fetched.is_empty(), || {
        format!("the fetch failed for {not_fetched:?}")
    })
    .check(f.staged.released == n, || {
        format!(
            "{} of the fetch's {n} claims were given back",
            f.staged.released
        )
    })
    .check(f.g3_fill_blocks == n && f.g3_fill_failed == 0, || {
        format!(
            "g3_fill counted {} blocks of {n} ({} failed)",
            f.g3_fill_blocks, f.g3_fill_failed
        )
    })
    .check(not_in_pool.is_empty(), || {
        format!(
            "not held in the pool after the fetch: {}",
            not_in_pool.join(", ")
        )
    });
    c.verdict()
}

/// Blocks fetched from disk, pushed out of the pool later, are held on
/// disk again (their disk copy kept) and were not stored to disk a second
/// time.
pub fn expect_back_on_disk(
    blocks: &[u64],
    held: &BTreeMap<u64, String>,
    stored_again: &BTreeSet<u64>,
) -> Result<(), Violation> {
    let mut c = Checks::new(
        "a block fetched from disk is held on disk again, not stored twice, once it leaves the pool",
    );
    let elsewhere: Vec<String> = blocks
        .iter()
        .filter_map(|h| {
            let at = held.get(h).map(String::as_str).unwrap_or("unknown");
            (at != "g3").then(|| format!("{h} in {at}"))
        })
        .collect();
    let twice: Vec<u64> = blocks
        .iter()
        .filter(|h| stored_again.contains(h))
        .copied()
        .collect();
    c.check(elsewhere.is_empty(), || {
        format!("not held on disk: {}", elsewhere.join(", "))
    })
    .check(twice.is_empty(), || {
        format!("stored to disk again: {twice:?}")
    });
    c.verdict()
}

/// KVCR's capacity requests (its `capacity_needed_callback`, counted by the
/// engine per pool): while deposits meet the full pool, its free and
/// evictable slots fall below the low watermark and KVCR asks; a read from
/// disk takes no pool slot and asks nothing.
pub fn expect_capacity_asked(
    deposits: usize,
    asked_while_filling: u64,
    asked_while_reading: u64,
) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR asks for capacity when its pool runs low, and only then");
    c.check(asked_while_filling > 0, || {
        format!("KVCR never asked for capacity while {deposits} deposits met the full pool")
    })
    .check(asked_while_reading == 0, || {
        format!(
            "KVCR asked for capacity {asked_while_reading} times during a read from disk, \
             which takes no pool slot"
        )
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        // phase2_g3: a pool of 8 blocks, a disk tier of 64, prompts of 4.
        Layout::overflowing(8, 64, 4, 2).unwrap()
    }

    /// Five prompts of two blocks: one evicted, three on disk, one in DRAM.
    fn small() -> FullTiers {
        let layout = Layout {
            evicted: 1,
            on_disk: 3,
            in_dram: 1,
        };
        let prompts: Vec<Vec<u64>> = (0..5).map(|p| vec![p * 10, p * 10 + 1]).collect();
        let holding = prompts
            .iter()
            .enumerate()
            .flat_map(|(i, blocks)| blocks.iter().map(move |h| (*h, layout.tier_of(i).into())))
            .collect();
        FullTiers {
            layout,
            prompts,
            holding,
            deposits: (10, 0, 0),
            stored_in_g3: 8,
            removed_from_g3: vec![0, 1],
            g3_store_blocks: 8,
            g3_store_failed: 0,
            g3_allocated_before: 0,
            g3_allocated_after: 6,
            g3_total: 6,
        }
    }

    #[test]
    fn the_layout_of_phase2_g3() {
        let l = layout();
        assert_eq!(
            (l.evicted, l.on_disk, l.in_dram, l.prompts()),
            (2, 16, 2, 20)
        );
        assert_eq!(
            [0, 1, 2, 17, 18, 19].map(|i| l.tier_of(i)),
            ["miss", "miss", "g3", "g3", "local", "local"]
        );
        assert!(Layout::overflowing(8, 64, 3, 2)
            .unwrap_err()
            .contains("whole prompts"));
        assert!(Layout::overflowing(8, 0, 4, 2).is_err());
        assert!(Layout::overflowing(8, 64, 0, 2).is_err());
    }

    #[test]
    fn full_tiers_that_evict_the_oldest_pass() {
        assert_eq!(expect_full_tiers_evict(&small()), Ok(()));
    }

    #[test]
    fn a_disk_tier_that_refuses_stores_once_full_fails() {
        // The disk tier never evicts: later spills are dropped, so the
        // prompts that should be on disk are gone and nothing is removed.
        let mut f = small();
        for h in [20, 21, 30, 31] {
            f.holding.insert(h, "miss".into());
        }
        f.holding.insert(0, "g3".into());
        f.holding.insert(1, "g3".into());
        f.removed_from_g3.clear();
        f.stored_in_g3 = 6;
        f.g3_store_blocks = 6;
        let v = expect_full_tiers_evict(&f).unwrap_err();
        assert_eq!(
            v.claim,
            "a full disk tier evicts its least recently used blocks"
        );
        assert!(
            v.detail.contains("prompt 0 (want miss): 0 in g3, 1 in g3"),
            "{v}"
        );
        assert!(v.detail.contains("prompt 2 (want g3): 20 in miss"), "{v}");
        assert!(
            v.detail
                .contains("no G3 `removed` event for the evicted blocks [0, 1]"),
            "{v}"
        );
    }

    #[test]
    fn failed_deposits_and_unreconciled_counts_fail() {
        let mut f = small();
        f.deposits = (8, 2, 0);
        f.g3_store_blocks = 7;
        f.g3_store_failed = 1;
        f.g3_allocated_after = 5;
        let v = expect_full_tiers_evict(&f).unwrap_err().detail;
        assert!(
            v.contains("8 blocks succeeded, 2 failed, 0 dropped of 10"),
            "{v}"
        );
        assert!(
            v.contains("g3_store counted 7 blocks, the inventory stored 8"),
            "{v}"
        );
        assert!(v.contains("1 g3_store operations failed"), "{v}");
        assert!(
            v.contains("went 0 → 5 (+5), but G3 stored 8 and removed 2 blocks (+6)"),
            "{v}"
        );
        assert!(v.contains("the disk tier is not full: 5 of 6"), "{v}");
    }

    #[test]
    fn an_eviction_of_the_wrong_blocks_fails() {
        // LRU inverted: the newest disk blocks leave, the oldest stay.
        let mut f = small();
        f.removed_from_g3 = vec![30, 31];
        f.holding.insert(0, "g3".into());
        f.holding.insert(1, "g3".into());
        f.holding.insert(30, "miss".into());
        f.holding.insert(31, "miss".into());
        let v = expect_full_tiers_evict(&f).unwrap_err().detail;
        assert!(
            v.contains("prompt 3 (want g3): 30 in miss, 31 in miss"),
            "{v}"
        );
        assert!(
            v.contains("events for blocks that should have stayed: [30, 31]"),
            "{v}"
        );
    }

    fn idle() -> Slots {
        Slots {
            pool_total: 8,
            pool_allocated: 8,
            pool_evictable: 8,
            g3_total: 64,
            g3_allocated: 64,
            g3_evictable: 64,
            g3_pending_stores: 0,
            in_flight_ops: 0,
        }
    }

    #[test]
    fn slots_come_back() {
        assert!(idle().held_back().is_empty());
        assert_eq!(expect_slots_back(&idle()), Ok(()));
    }

    #[test]
    fn a_leaked_claim_or_pending_store_fails() {
        let leaked = Slots {
            g3_evictable: 60,
            pool_evictable: 7,
            g3_pending_stores: 1,
            in_flight_ops: 2,
            ..idle()
        };
        let v = expect_slots_back(&leaked).unwrap_err();
        assert_eq!(v.claim, "a full tier's slots come back once KVCR is idle");
        for part in [
            "1 of 8 allocated pool slots not evictable",
            "4 of 64 allocated disk slots not evictable",
            "1 spills to disk pending",
            "2 operations in flight",
        ] {
            assert!(v.detail.contains(part), "{v}");
        }
        let not_full = Slots {
            g3_allocated: 63,
            g3_evictable: 63,
            ..idle()
        };
        assert!(expect_slots_back(&not_full)
            .unwrap_err()
            .detail
            .contains("the disk tier is not full: 63 of 64"));
    }

    #[test]
    fn an_evicted_prefix_must_be_recomputed() {
        let none = BTreeSet::new();
        assert_eq!(expect_recomputed(&[1, 2], &none, 2), Ok(()));
        let served: BTreeSet<u64> = [2].into();
        let v = expect_recomputed(&[1, 2], &served, 1).unwrap_err();
        assert!(v.detail.contains("[2] were delivered from G3"), "{v}");
        assert!(
            v.detail.contains("1 blocks computed, fewer than the 2"),
            "{v}"
        );
    }

    fn from_disk() -> FromDisk {
        FromDisk {
            blocks: vec![5, 6],
            staged: Staged {
                fetched: [(5, true), (6, true)].into(),
                released: 2,
            },
            g3_fill_blocks: 2,
            g3_fill_failed: 0,
            held_after: [(5, "local".to_string()), (6, "local".to_string())].into(),
        }
    }

    #[test]
    fn a_fetch_from_disk_must_arrive_be_counted_and_give_its_claims_back() {
        assert_eq!(expect_fetched_from_disk(&from_disk()), Ok(()));
        let mut f = from_disk();
        f.staged.fetched.insert(6, false);
        f.staged.released = 1;
        f.g3_fill_blocks = 1;
        f.g3_fill_failed = 1;
        f.held_after.insert(6, "g3".into());
        let v = expect_fetched_from_disk(&f).unwrap_err();
        assert_eq!(
            v.claim,
            "a fetch stages a prefix from the full disk tier into the full pool"
        );
        for part in [
            "the fetch failed for [6]",
            "1 of the fetch's 2 claims were given back",
            "g3_fill counted 1 blocks of 2 (1 failed)",
            "not held in the pool after the fetch: 6 in g3",
        ] {
            assert!(v.detail.contains(part), "{v}");
        }
    }

    #[test]
    fn a_fetched_block_goes_back_to_disk_without_a_second_store() {
        let on_disk: BTreeMap<u64, String> = [(5, "g3".to_string()), (6, "g3".to_string())].into();
        assert_eq!(expect_back_on_disk(&[5, 6], &on_disk, &[9].into()), Ok(()));
        let lost: BTreeMap<u64, String> = [(5, "g3".to_string()), (6, "miss".to_string())].into();
        let v = expect_back_on_disk(&[5, 6], &lost, &[5].into()).unwrap_err();
        assert!(v.detail.contains("not held on disk: 6 in miss"), "{v}");
        assert!(v.detail.contains("stored to disk again: [5]"), "{v}");
    }

    #[test]
    fn capacity_is_asked_while_filling_and_not_while_reading() {
        assert_eq!(expect_capacity_asked(20, 55, 0), Ok(()));
        let v = expect_capacity_asked(20, 0, 2).unwrap_err();
        assert_eq!(
            v.claim,
            "KVCR asks for capacity when its pool runs low, and only then"
        );
        assert!(
            v.detail
                .contains("never asked for capacity while 20 deposits"),
            "{v}"
        );
        assert!(
            v.detail
                .contains("asked for capacity 2 times during a read"),
            "{v}"
        );
    }
}
