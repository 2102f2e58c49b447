//! Operations that outlast KVCR's operation timeout while its pool is full
//! (TC-24): deposits that wait for a spill to disk past their deadline, a
//! fetch into the full pool, deliveries from both tiers, a deliver that
//! waits on blocks KVCR is still filling. KVCR must end them failed, the
//! engine must compute instead and answer as before, and once KVCR is idle
//! nothing may stay held.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::full_tiers::Slots;
use super::{Checks, Violation};

/// One request sent while KVCR's operations time out.
#[derive(Debug, Clone, Serialize)]
pub struct StormRequest {
    /// Which part of the case sent it (`after-filling`, `overflow`, `read-back`, `after`).
    pub step: &'static str,
    pub prompt: String,
    /// `None`: not answered within the budget.
    pub latency_ms: Option<f64>,
    /// The tokens against the reference: `None` when they match.
    pub wrong_tokens: Option<String>,
}

/// Every request was answered within `budget_ms` with the reference tokens:
/// an operation KVCR fails is computed instead, and none waits for KVCR past
/// the budget.
pub fn expect_answered_through_storm(
    requests: &[StormRequest],
    budget_ms: f64,
) -> Result<(), Violation> {
    let mut c = Checks::new(
        "every request is answered with the reference tokens within its budget while KVCR's \
         operations time out",
    );
    c.check(!requests.is_empty(), || "no request was sent".into());
    for r in requests {
        match r.latency_ms {
            None => c.check(false, || {
                format!(
                    "{} ({}) was not answered within {budget_ms:.0} ms",
                    r.prompt, r.step
                )
            }),
            Some(ms) => c.check(ms <= budget_ms, || {
                format!(
                    "{} ({}) took {ms:.0} ms (budget {budget_ms:.0} ms)",
                    r.prompt, r.step
                )
            }),
        };
        c.check(r.wrong_tokens.is_none(), || {
            format!(
                "{} ({}): {}",
                r.prompt,
                r.step,
                r.wrong_tokens.as_deref().unwrap_or_default()
            )
        });
    }
    c.verdict()
}

/// What the engine's deliver-while-filling probe answered
/// (`POST /kvcr/probe/deliver_while_filling`): a new prompt's blocks
/// deposited and delivered back while KVCR was still filling them, the
/// interpreter then held (KVCR's progress thread idle, so the fill could not
/// end) past the deliver's deadline, and KVCR polled once.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct FillingProbe {
    pub blocks: Vec<u64>,
    /// The blocks KVCR said it was filling right after the deliver.
    pub filling_at_deliver: Vec<u64>,
    pub held_ms: f64,
    /// The deliver's completion came in KVCR's first poll after the hold.
    pub deliver_answered_after_hold: bool,
    /// Per-block statuses (`SUCCESS`, `FAILED`, ...) by block hash;
    /// `None`: no completion within the probe's wait.
    pub deliver: Option<BTreeMap<String, String>>,
    pub deposit: Option<BTreeMap<String, String>>,
}

impl FillingProbe {
    /// The deliver's blocks KVCR failed.
    pub fn deliver_failed(&self) -> u64 {
        self.deliver.as_ref().map_or(0, |d| {
            d.values().filter(|status| *status == "FAILED").count() as u64
        })
    }
}

/// A deliver that waited on filling blocks past its deadline ended failed
/// at that deadline: every block was filling when it came, the hold
/// outlasted the operation timeout, KVCR answered it in its first poll
/// after the hold (before the fill could end: only its deadline answers it
/// then) with every block failed, and it answered the deposit too. Without
/// the first two, nothing waited past a deadline and the step proves nothing.
pub fn expect_deliver_expired_while_filling(
    p: &FillingProbe,
    timeout_ms: u64,
) -> Result<(), Violation> {
    let mut c = Checks::new(
        "a deliver waiting on blocks KVCR is still filling ends failed at its deadline",
    );
    let not_filling: Vec<u64> = p
        .blocks
        .iter()
        .filter(|h| !p.filling_at_deliver.contains(h))
        .copied()
        .collect();
    c.check(!p.blocks.is_empty(), || "the probe named no block".into())
        .check(not_filling.is_empty(), || {
            format!(
                "blocks {not_filling:?} were not filling when the deliver came: it waited on \
                 nothing"
            )
        })
        .check(p.held_ms >= timeout_ms as f64, || {
            format!(
                "the fill was held {:.1} ms, less than the {timeout_ms} ms operation timeout",
                p.held_ms
            )
        });
    match &p.deliver {
        None => c.check(false, || {
            "KVCR never answered the deliver: it waits on the fill past its deadline".into()
        }),
        Some(statuses) => c
            .check(p.deliver_answered_after_hold, || {
                "KVCR did not answer the deliver at its first poll past the deadline: it waited \
                 for the fill to end"
                    .into()
            })
            .check(p.deliver_failed() == p.blocks.len() as u64, || {
                format!(
                    "of {} blocks, the deliver answered {statuses:?}",
                    p.blocks.len()
                )
            }),
    };
    c.check(p.deposit.is_some(), || {
        "KVCR never answered the deposit whose fill the deliver waited on".into()
    });
    c.verdict()
}

/// KVCR operations of one scope by result (`kvcr_duration_seconds_count`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ScopeOps {
    pub success: u64,
    pub failed: u64,
}

impl ScopeOps {
    pub fn attempted(&self) -> u64 {
        self.success + self.failed
    }
}

/// What KVCR did while its operations outlasted the timeout: the engine's
/// deposits by KVCR's per-block outcome (KVCR counts no failed deposit
/// itself), KVCR's transfers by scope and result, and the blocks of the
/// fetches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StormOps {
    /// The operation timeout the workers ran with.
    pub timeout_ms: u64,
    pub deposit_success: u64,
    pub deposit_failed: u64,
    pub deposit_dropped: u64,
    pub local_fill: ScopeOps,
    pub local_deliver: ScopeOps,
    pub g3_store: ScopeOps,
    pub g3_fill: ScopeOps,
    pub g3_deliver: ScopeOps,
    /// Blocks the fetches into the pool staged, and those that failed.
    pub fetch_fetched: u64,
    pub fetch_failed: u64,
}

impl StormOps {
    /// Transfers that ended failed, every scope together.
    pub fn failed_transfers(&self) -> u64 {
        [
            self.local_fill,
            self.local_deliver,
            self.g3_store,
            self.g3_fill,
            self.g3_deliver,
        ]
        .iter()
        .map(|s| s.failed)
        .sum()
    }
}

/// The storm happened: deposits met the full pool and waited for a spill to
/// disk (a `g3_store` was attempted: KVCR spills only to make room), and
/// some of them ended failed. Without both, nothing here outlasted the
/// timeout and the case proves nothing.
pub fn expect_storm(s: &StormOps) -> Result<(), Violation> {
    let mut c = Checks::new("operations that outlast KVCR's operation timeout end failed");
    c.check(s.g3_store.attempted() > 0, || {
        format!(
            "no spill to disk was attempted (g3_store: {} succeeded, {} failed): no deposit met \
             the full pool, so none waited for room",
            s.g3_store.success, s.g3_store.failed
        )
    })
    .check(s.deposit_failed > 0, || {
        format!(
            "no deposit block failed ({} succeeded, {} dropped; {} transfers failed): nothing \
             outlasted the {} ms operation timeout",
            s.deposit_success,
            s.deposit_dropped,
            s.failed_transfers(),
            s.timeout_ms
        )
    });
    c.verdict()
}

/// A worker once its KVCR went idle after the storm.
#[derive(Debug, Clone, Serialize)]
pub struct AfterStorm {
    /// KVCR's slot gauges of both tiers.
    pub slots: Slots,
    /// Blocks the engine computed in the window, and blocks whose deposit
    /// KVCR answered (success, failed or dropped).
    pub computed_blocks: u64,
    pub answered_blocks: u64,
    /// Device blocks the engine still pins (a deposit or delivery KVCR never
    /// completed keeps its pages pinned).
    pub device_pinned_blocks: u64,
    /// Operations the engine handed KVCR whose completion never came back.
    pub engine_pending_ops: u64,
    /// Blocks the fetches staged, and the claims the engine gave back.
    pub fetched_blocks: u64,
    pub released_claims: u64,
}

/// Nothing a timed-out operation held stays held: every allocated slot of
/// both tiers is evictable again, no spill pending, no operation in flight
/// (KVCR's count and the engine's), every deposit answered, no device page
/// pinned, every fetched block's claim given back.
pub fn expect_nothing_left(a: &AfterStorm) -> Result<(), Violation> {
    let mut c = Checks::new("operations that timed out leave nothing held once KVCR is idle");
    let held = a.slots.held_back();
    c.check(held.is_empty(), || held.join("; "))
        .check(a.answered_blocks >= a.computed_blocks, || {
            format!(
                "KVCR never answered the deposit of {} of the {} blocks computed",
                a.computed_blocks - a.answered_blocks,
                a.computed_blocks
            )
        })
        .check(a.engine_pending_ops == 0, || {
            format!(
                "{} operations the engine handed KVCR never completed",
                a.engine_pending_ops
            )
        })
        .check(a.device_pinned_blocks == 0, || {
            format!(
                "the engine still pins {} device blocks for KVCR operations",
                a.device_pinned_blocks
            )
        })
        .check(a.released_claims == a.fetched_blocks, || {
            format!(
                "{} blocks fetched into the pool, {} claims given back",
                a.fetched_blocks, a.released_claims
            )
        });
    c.verdict()
}

/// KVCR's answer to a deposit made after the storm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Admission {
    pub deposit_success: u64,
    pub local_fill: ScopeOps,
    pub g3_store: ScopeOps,
}

/// KVCR still admits deposits after the storm: a new prompt's blocks got
/// pool slots (a copy was attempted or a deposit succeeded) or a spill was
/// started for them. A pool left waiting for an eviction that never lands
/// does neither.
pub fn expect_still_admits(a: &Admission) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR admits deposits again after the storm");
    c.check(
        a.deposit_success > 0 || a.local_fill.attempted() > 0 || a.g3_store.attempted() > 0,
        || {
            format!(
                "a new prompt's deposit got no slot and started no spill: {} blocks succeeded, \
                 local_fill {:?}, g3_store {:?}",
                a.deposit_success, a.local_fill, a.g3_store
            )
        },
    );
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(latency_ms: Option<f64>, wrong: Option<&str>) -> StormRequest {
        StormRequest {
            step: "overflow",
            prompt: "f003v0".into(),
            latency_ms,
            wrong_tokens: wrong.map(str::to_string),
        }
    }

    #[test]
    fn requests_answered_in_time_with_the_reference_pass() {
        let r = [request(Some(120.0), None), request(Some(900.0), None)];
        assert!(expect_answered_through_storm(&r, 10_000.0).is_ok());
    }

    #[test]
    fn a_late_unanswered_or_wrong_request_fails() {
        let r = [
            request(None, None),
            request(Some(12_000.0), None),
            request(Some(100.0), Some("token 3 differs")),
        ];
        let v = expect_answered_through_storm(&r, 10_000.0).unwrap_err();
        assert!(v.detail.contains("not answered within 10000 ms"), "{v}");
        assert!(v.detail.contains("took 12000 ms"), "{v}");
        assert!(v.detail.contains("token 3 differs"), "{v}");
        let v = expect_answered_through_storm(&[], 10_000.0).unwrap_err();
        assert!(v.detail.contains("no request was sent"), "{v}");
    }

    fn storm() -> StormOps {
        StormOps {
            timeout_ms: 10,
            deposit_success: 30,
            deposit_failed: 9,
            local_fill: ScopeOps {
                success: 28,
                failed: 2,
            },
            g3_store: ScopeOps {
                success: 6,
                failed: 11,
            },
            fetch_failed: 4,
            ..StormOps::default()
        }
    }

    #[test]
    fn failed_deposits_behind_spills_are_a_storm() {
        assert!(expect_storm(&storm()).is_ok());
        assert_eq!(storm().failed_transfers(), 13);
    }

    /// Every deposit succeeded: the timeout never bit, even with failed
    /// transfers elsewhere.
    #[test]
    fn no_failed_deposit_is_no_storm() {
        let s = StormOps {
            deposit_failed: 0,
            ..storm()
        };
        let v = expect_storm(&s).unwrap_err();
        assert!(v.detail.contains("no deposit block failed"), "{v}");
        assert!(v.detail.contains("13 transfers failed"), "{v}");
        assert!(v.detail.contains("10 ms operation timeout"), "{v}");
    }

    /// Deposits failed, but none ever met the full pool (no spill): no
    /// capacity waiter passed its deadline.
    #[test]
    fn failures_without_a_spill_are_no_storm_of_waiters() {
        let s = StormOps {
            g3_store: ScopeOps::default(),
            ..storm()
        };
        let v = expect_storm(&s).unwrap_err();
        assert!(v.detail.contains("no spill to disk was attempted"), "{v}");
    }

    fn filling_probe() -> FillingProbe {
        let failed = |hs: &[u64]| {
            hs.iter()
                .map(|h| (h.to_string(), "FAILED".into()))
                .collect()
        };
        FillingProbe {
            blocks: vec![11, 12],
            filling_at_deliver: vec![11, 12],
            held_ms: 30.2,
            deliver_answered_after_hold: true,
            deliver: Some(failed(&[11, 12])),
            deposit: Some(failed(&[11, 12])),
        }
    }

    #[test]
    fn a_deliver_failed_at_its_deadline_while_filling_passes() {
        let p = filling_probe();
        assert!(expect_deliver_expired_while_filling(&p, 10).is_ok());
        assert_eq!(p.deliver_failed(), 2);
    }

    /// KVCR let the deliver wait for the fill: answered late (failed by the
    /// fill's own failure), or never.
    #[test]
    fn a_deliver_answered_after_the_fill_or_never_fails() {
        let late = FillingProbe {
            deliver_answered_after_hold: false,
            ..filling_probe()
        };
        let v = expect_deliver_expired_while_filling(&late, 10).unwrap_err();
        assert!(v.detail.contains("waited for the fill to end"), "{v}");
        let never = FillingProbe {
            deliver: None,
            deposit: None,
            ..late
        };
        let v = expect_deliver_expired_while_filling(&never, 10).unwrap_err();
        assert!(v.detail.contains("never answered the deliver"), "{v}");
        assert!(v.detail.contains("never answered the deposit"), "{v}");
    }

    /// The blocks were no longer filling (the copy ended first), or the hold
    /// was shorter than the timeout: nothing waited past a deadline.
    #[test]
    fn a_deliver_that_never_waited_past_its_deadline_proves_nothing() {
        let mut p = filling_probe();
        p.filling_at_deliver = vec![11];
        p.held_ms = 4.0;
        let mut served = BTreeMap::new();
        served.insert("11".to_string(), "FAILED".to_string());
        served.insert("12".to_string(), "SUCCESS".to_string());
        p.deliver = Some(served);
        let v = expect_deliver_expired_while_filling(&p, 10).unwrap_err();
        assert!(v.detail.contains("blocks [12] were not filling"), "{v}");
        assert!(v.detail.contains("held 4.0 ms"), "{v}");
        assert!(v.detail.contains("of 2 blocks"), "{v}");
    }

    fn idle() -> AfterStorm {
        AfterStorm {
            slots: Slots {
                pool_total: 8,
                pool_allocated: 7,
                pool_evictable: 7,
                g3_total: 64,
                g3_allocated: 20,
                g3_evictable: 20,
                g3_pending_stores: 0,
                in_flight_ops: 0,
            },
            computed_blocks: 40,
            answered_blocks: 40,
            device_pinned_blocks: 0,
            engine_pending_ops: 0,
            fetched_blocks: 2,
            released_claims: 2,
        }
    }

    /// A pool that is not full after the storm (victims of failed spills
    /// were dropped) is fine: only what is held back counts.
    #[test]
    fn an_idle_worker_that_holds_nothing_passes() {
        assert!(expect_nothing_left(&idle()).is_ok());
    }

    #[test]
    fn held_slots_unanswered_deposits_pins_and_claims_fail() {
        let mut a = idle();
        a.slots.pool_evictable = 3;
        a.slots.g3_pending_stores = 1;
        a.slots.in_flight_ops = 2;
        a.answered_blocks = 36;
        a.device_pinned_blocks = 4;
        a.engine_pending_ops = 1;
        a.released_claims = 1;
        let v = expect_nothing_left(&a).unwrap_err();
        for needle in [
            "4 of 7 allocated pool slots not evictable",
            "1 spills to disk pending",
            "2 operations in flight",
            "never answered the deposit of 4 of the 40 blocks",
            "still pins 4 device blocks",
            "1 operations the engine handed KVCR never completed",
            "2 blocks fetched into the pool, 1 claims given back",
        ] {
            assert!(v.detail.contains(needle), "{needle}: {v}");
        }
    }

    #[test]
    fn a_deposit_that_got_a_slot_or_a_spill_is_admitted() {
        for a in [
            Admission {
                deposit_success: 4,
                ..Admission::default()
            },
            Admission {
                local_fill: ScopeOps {
                    success: 0,
                    failed: 1,
                },
                ..Admission::default()
            },
            Admission {
                g3_store: ScopeOps {
                    success: 0,
                    failed: 1,
                },
                ..Admission::default()
            },
        ] {
            assert!(expect_still_admits(&a).is_ok(), "{a:?}");
        }
    }

    #[test]
    fn a_deposit_with_no_slot_and_no_spill_is_not_admitted() {
        let v = expect_still_admits(&Admission::default()).unwrap_err();
        assert!(v.detail.contains("got no slot and started no spill"), "{v}");
    }
}
