//! KVCR's disk tier (TC-12): blocks spill to G3 under pressure, come back
//! from it, and survive a Guard handback to the replacement.

use std::collections::BTreeSet;

use serde::Serialize;

use super::{Checks, Violation};

/// The oldest prompt's blocks after the pool overflowed.
#[derive(Debug, Clone, Serialize)]
pub struct Spill {
    /// The blocks that should have spilled (the first prompt's).
    pub blocks: Vec<u64>,
    /// Blocks KVCR's inventory events put in G3 in the window.
    pub stored_in_g3: BTreeSet<u64>,
    /// Of `blocks`, those KVCR answers `FETCHABLE, G3` for now.
    pub held_in_g3: BTreeSet<u64>,
    /// `g3_store` blocks counted in the window.
    pub g3_store_blocks: u64,
}

fn missing(want: &[u64], have: &BTreeSet<u64>) -> Vec<u64> {
    want.iter().filter(|h| !have.contains(h)).copied().collect()
}

/// Every block of the oldest prompt spilled: stored in G3 by KVCR's
/// events, held there, counted by `g3_store`.
pub fn expect_spilled(s: &Spill) -> Result<(), Violation> {
    let mut c = Checks::new("blocks spill from DRAM to disk under pressure");
    let not_stored = missing(&s.blocks, &s.stored_in_g3);
    let not_held = missing(&s.blocks, &s.held_in_g3);
    c.check(not_stored.is_empty(), || {
        format!("no G3 `stored` event for {not_stored:?}")
    })
    .check(not_held.is_empty(), || {
        format!("KVCR does not hold {not_held:?} in G3")
    })
    .check(s.g3_store_blocks >= s.blocks.len() as u64, || {
        format!(
            "g3_store counted {} blocks, fewer than the {} spilled",
            s.g3_store_blocks,
            s.blocks.len()
        )
    });
    c.verdict()
}

/// A prefix on disk was delivered from it, block by block and by count.
pub fn expect_served_from_disk(
    blocks: &[u64],
    delivered_from_g3: &BTreeSet<u64>,
    g3_deliver_blocks: u64,
) -> Result<(), Violation> {
    let mut c = Checks::new("a prefix on disk is served from G3");
    let not_from_disk = missing(blocks, delivered_from_g3);
    c.check(not_from_disk.is_empty(), || {
        format!("{not_from_disk:?} were not delivered from G3")
    })
    .check(g3_deliver_blocks >= blocks.len() as u64, || {
        format!(
            "g3_deliver counted {g3_deliver_blocks} blocks, fewer than the {} delivered",
            blocks.len()
        )
    });
    c.verdict()
}

/// The replacement holds the spilled blocks in G3 and serves them from it.
pub fn expect_g3_survives(
    blocks: &[u64],
    held_in_g3: &BTreeSet<u64>,
    delivered_from_g3: &BTreeSet<u64>,
) -> Result<(), Violation> {
    let mut c = Checks::new("G3 records survive a Guard handback");
    let not_held = missing(blocks, held_in_g3);
    let not_from_disk = missing(blocks, delivered_from_g3);
    c.check(not_held.is_empty(), || {
        format!("the replacement does not hold {not_held:?} in G3")
    })
    .check(not_from_disk.is_empty(), || {
        format!("the replacement did not deliver {not_from_disk:?} from G3")
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[u64]) -> BTreeSet<u64> {
        v.iter().copied().collect()
    }

    #[test]
    fn a_spill_must_be_stored_held_and_counted() {
        let ok = Spill {
            blocks: vec![1, 2],
            stored_in_g3: set(&[1, 2, 3]),
            held_in_g3: set(&[1, 2]),
            g3_store_blocks: 3,
        };
        assert!(expect_spilled(&ok).is_ok());
        let dropped = Spill {
            stored_in_g3: set(&[]),
            held_in_g3: set(&[]),
            g3_store_blocks: 0,
            ..ok
        };
        let v = expect_spilled(&dropped).unwrap_err();
        assert!(v.detail.contains("no G3 `stored` event for [1, 2]"), "{v}");
    }

    #[test]
    fn served_from_disk_and_surviving() {
        assert!(expect_served_from_disk(&[1, 2], &set(&[1, 2]), 2).is_ok());
        assert!(expect_served_from_disk(&[1, 2], &set(&[1]), 1).is_err());
        assert!(expect_g3_survives(&[1, 2], &set(&[1, 2]), &set(&[1, 2])).is_ok());
        assert!(expect_g3_survives(&[1, 2], &set(&[]), &set(&[]))
            .unwrap_err()
            .detail
            .contains("does not hold [1, 2] in G3"));
    }
}
