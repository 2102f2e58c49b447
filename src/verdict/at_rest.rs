//! KVCR at rest: once a case's requests are answered and KVCR has finished
//! the work they started, each worker's KVCR must hold nothing back. Its
//! slot gauges add up (free + allocated = total, per tier), every allocated
//! slot is evictable again (no claim, fill or pin left behind), its block
//! records account for the blocks its tiers hold, no framework pin is held,
//! and no operation, completion or spill is pending.
//!
//! Every case that leaves the stack whole is followed by this check
//! ([`crate::suite`]'s at-rest audit), so a KVCR that leaks a claim, a pin or
//! a slot on any path a case runs fails there, whichever case ran it.

use serde::Serialize;

use super::{Checks, Violation};

/// One tier's slot gauges (`kvcr_state{resource=..._slots}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TierSlots {
    pub total: u64,
    pub free: u64,
    pub allocated: u64,
    pub evictable: u64,
}

/// One worker's KVCR state gauges, as scraped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct KvcrState {
    /// The host pool (`local_g2_*_slots`).
    pub pool: TierSlots,
    /// The disk tier (`g3_*_slots`), where the worker has one.
    pub disk: Option<TierSlots>,
    /// Spills to disk in flight (`g3_pending_stores`; 0 without a disk tier).
    pub g3_pending_stores: u64,
    pub in_flight_ops: u64,
    /// Completed operations the engine has not polled yet.
    pub completed: u64,
    pub framework_pins: u64,
    pub pinned_keys: u64,
    /// Blocks KVCR keeps a record of (`block_records`).
    pub block_records: u64,
}

/// How the worker's blocks map onto KVCR's gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Pool slots one block takes (its pages: 2 dense, 5 hybrid on the CPU engine).
    pub pages_per_block: u64,
    /// Whether every record is of a block in KVCR's own tiers (pool or
    /// disk). An engine that lends KVCR its own memory (framework regions)
    /// has records of blocks held only there.
    pub records_only_own_tiers: bool,
}

impl KvcrState {
    /// What KVCR is still doing: each settles by itself once its work ends.
    /// Empty when KVCR has finished.
    pub fn unsettled(&self) -> Vec<String> {
        let mut moving = Vec::new();
        if self.in_flight_ops != 0 {
            moving.push(format!("{} operations in flight", self.in_flight_ops));
        }
        if self.completed != 0 {
            moving.push(format!("{} completions not polled", self.completed));
        }
        if self.g3_pending_stores != 0 {
            moving.push(format!("{} spills to disk pending", self.g3_pending_stores));
        }
        moving
    }
}

/// What a case may leave behind, declared by the case with its reason
/// (recorded beside the state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Allowance {
    /// Allocated pool slots may stay unevictable: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unevictable: Option<String>,
}

/// `worker`'s KVCR holds nothing back: its work has settled, its gauges add
/// up, every allocated slot is evictable (unless `allowed` says why not),
/// and no framework pin is held.
pub fn expect_at_rest(
    worker: &str,
    s: &KvcrState,
    layout: &Layout,
    allowed: &Allowance,
) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR holds nothing back once a case's work is done");
    let unsettled = s.unsettled();
    c.check(unsettled.is_empty(), || {
        format!("worker {worker}: still {}", unsettled.join(", "))
    });
    tier(
        &mut c,
        worker,
        "pool",
        &s.pool,
        allowed.unevictable.is_some(),
    );
    if let Some(disk) = &s.disk {
        tier(&mut c, worker, "disk", disk, false);
    }
    records(&mut c, worker, s, layout);
    c.check(s.framework_pins == 0 && s.pinned_keys == 0, || {
        format!(
            "worker {worker}: {} framework pins holding {} keys",
            s.framework_pins, s.pinned_keys
        )
    });
    c.verdict()
}

/// The block records against the blocks the tiers hold: each block in the
/// pool (`pages_per_block` slots) or on disk (one slot) has a record, and,
/// where records are only of blocks in KVCR's tiers, no record is of a
/// block held in neither.
fn records(c: &mut Checks, worker: &str, s: &KvcrState, layout: &Layout) {
    let pages = layout.pages_per_block.max(1);
    let pool_blocks = s.pool.allocated / pages;
    let disk_blocks = s.disk.map_or(0, |d| d.allocated);
    c.check(s.pool.allocated % pages == 0, || {
        format!(
            "worker {worker}: {} allocated pool slots are no whole number of {pages}-page blocks",
            s.pool.allocated
        )
    })
    .check(s.block_records >= pool_blocks.max(disk_blocks), || {
        format!(
            "worker {worker}: {} block records for {pool_blocks} blocks in the pool and {disk_blocks} on disk",
            s.block_records
        )
    })
    .check(
        !layout.records_only_own_tiers || s.block_records <= pool_blocks + disk_blocks,
        || {
            format!(
                "worker {worker}: {} block records, more than the {pool_blocks} blocks in the pool and {disk_blocks} on disk",
                s.block_records
            )
        },
    );
}

/// The identities of one tier's gauges.
fn tier(c: &mut Checks, worker: &str, name: &str, t: &TierSlots, unevictable_allowed: bool) {
    c.check(t.free + t.allocated == t.total, || {
        format!(
            "worker {worker}: {name} slots free {} + allocated {} ≠ total {}",
            t.free, t.allocated, t.total
        )
    })
    .check(t.evictable <= t.allocated, || {
        format!(
            "worker {worker}: {} {name} slots evictable, more than the {} allocated",
            t.evictable, t.allocated
        )
    })
    .check(unevictable_allowed || t.evictable >= t.allocated, || {
        format!(
            "worker {worker}: {} of {} allocated {name} slots not evictable (claimed, filling or unscored)",
            t.allocated.saturating_sub(t.evictable),
            t.allocated
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const DENSE: Layout = Layout {
        pages_per_block: 2,
        records_only_own_tiers: true,
    };

    fn rest() -> KvcrState {
        KvcrState {
            pool: TierSlots {
                total: 12,
                free: 4,
                allocated: 8,
                evictable: 8,
            },
            block_records: 4,
            ..KvcrState::default()
        }
    }

    fn fails(s: &KvcrState, allowed: &Allowance, needle: &str) {
        let v = expect_at_rest("B", s, &DENSE, allowed).expect_err("must fail");
        assert!(v.detail.contains(needle), "{v}");
        assert!(v.detail.contains("worker B"), "{v}");
    }

    #[test]
    fn a_worker_at_rest_passes() {
        expect_at_rest("B", &rest(), &DENSE, &Allowance::default()).unwrap();
        // Two of the pool's blocks are on disk too, four only there.
        let mut with_disk = rest();
        with_disk.disk = Some(TierSlots {
            total: 64,
            free: 58,
            allocated: 6,
            evictable: 6,
        });
        with_disk.block_records = 8;
        expect_at_rest("B", &with_disk, &DENSE, &Allowance::default()).unwrap();
    }

    #[test]
    fn gauges_that_do_not_add_up_fail() {
        // KVCR's allocated gauge computed as total | free (a generated mutant).
        let mut s = rest();
        s.pool.allocated = 12 | 4;
        s.pool.evictable = s.pool.allocated;
        fails(
            &s,
            &Allowance::default(),
            "free 4 + allocated 12 ≠ total 12",
        );
    }

    #[test]
    fn a_leaked_claim_fails_unless_the_case_allows_it() {
        let mut s = rest();
        s.pool.evictable = 6;
        fails(
            &s,
            &Allowance::default(),
            "2 of 8 allocated pool slots not evictable",
        );
        let allowed = Allowance {
            unevictable: Some("the hostile policy left blocks unscored".into()),
        };
        expect_at_rest("B", &s, &DENSE, &allowed).unwrap();
        // The allowance is the pool's: a disk slot held back still fails.
        s.disk = Some(TierSlots {
            total: 8,
            free: 0,
            allocated: 8,
            evictable: 7,
        });
        fails(&s, &allowed, "1 of 8 allocated disk slots not evictable");
    }

    #[test]
    fn records_that_do_not_account_for_the_blocks_fail() {
        let mut s = rest();
        s.block_records = 5;
        fails(
            &s,
            &Allowance::default(),
            "5 block records, more than the 4 blocks",
        );
        s.block_records = 3;
        fails(
            &s,
            &Allowance::default(),
            "3 block records for 4 blocks in the pool",
        );
        let mut s = rest();
        s.pool.allocated = 7;
        s.pool.free = 5;
        s.pool.evictable = 7;
        fails(
            &s,
            &Allowance::default(),
            "7 allocated pool slots are no whole number",
        );
        // An engine that lends KVCR its memory has records of blocks held there.
        let mut s = rest();
        s.block_records = 9;
        let lent = Layout {
            records_only_own_tiers: false,
            ..DENSE
        };
        expect_at_rest("B", &s, &lent, &Allowance::default()).unwrap();
    }

    #[test]
    fn more_evictable_than_allocated_fails() {
        let mut s = rest();
        s.pool.evictable = 9;
        fails(
            &s,
            &Allowance::default(),
            "9 pool slots evictable, more than the 8",
        );
    }

    #[test]
    fn pins_and_unfinished_work_fail() {
        let mut s = rest();
        s.framework_pins = 1;
        s.pinned_keys = 4;
        fails(&s, &Allowance::default(), "1 framework pins holding 4 keys");
        let mut s = rest();
        s.in_flight_ops = 2;
        s.completed = 1;
        s.g3_pending_stores = 3;
        assert_eq!(
            s.unsettled(),
            vec![
                "2 operations in flight",
                "1 completions not polled",
                "3 spills to disk pending"
            ]
        );
        fails(&s, &Allowance::default(), "still 2 operations in flight");
    }
}
