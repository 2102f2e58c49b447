//! An engine's own placement policy in KVCR (TC-21): a well-behaved one
//! must be consulted as KVCR's own counters say it acted, and a hostile one
//! must be answered with KVCR's safe defaults, a warning for each
//! misbehaviour, while KVCR serves on.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Checks, Violation};

/// A way the engine's policy misbehaves (the CPU engine's `hostile_policy`
/// switch), with what KVCR 0.1.1's policy invoker answers it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Misbehaviour {
    /// `decide_ingest` raises: KVCR keeps the block (KEEP).
    RaiseIngest,
    /// `decide_ingest` answers MOVE_TO, which KVCR does not take at
    /// ingest: KVCR keeps the block (KEEP).
    InvalidIngest,
    /// `decide_ingest` DROPs work KVCR must keep local (a `no_evict`
    /// deposit): KVCR keeps the block (KEEP).
    DropRequired,
    /// `eviction_score` answers NaN: KVCR keeps the previous score (none:
    /// the block waits unscored until the next allocation asks again).
    NanScore,
    /// `eviction_score` raises: the same.
    RaiseScore,
    /// `decide_eviction` answers no decision at all: KVCR keeps the
    /// candidate (KEEP) and looks at the next.
    InvalidEviction,
    /// `decide_eviction` raises: the same.
    RaiseEviction,
    /// `on_ingest` raises: KVCR logs it and goes on.
    RaiseOnIngest,
    /// `on_remove` raises: KVCR logs it and goes on.
    RaiseOnRemove,
}

impl Misbehaviour {
    /// The misbehaviour's name in the `hostile_policy` switch and the
    /// `answer` label of `cpu_engine_kvcr_policy_calls`.
    pub fn name(self) -> &'static str {
        match self {
            Misbehaviour::RaiseIngest => "raise_ingest",
            Misbehaviour::InvalidIngest => "invalid_ingest",
            Misbehaviour::DropRequired => "drop_required",
            Misbehaviour::NanScore => "nan_score",
            Misbehaviour::RaiseScore => "raise_score",
            Misbehaviour::InvalidEviction => "invalid_eviction",
            Misbehaviour::RaiseEviction => "raise_eviction",
            Misbehaviour::RaiseOnIngest => "raise_on_ingest",
            Misbehaviour::RaiseOnRemove => "raise_on_remove",
        }
    }

    /// The policy hook it takes over (the `hook` label).
    pub fn hook(self) -> &'static str {
        match self {
            Misbehaviour::RaiseIngest
            | Misbehaviour::InvalidIngest
            | Misbehaviour::DropRequired => "decide_ingest",
            Misbehaviour::NanScore | Misbehaviour::RaiseScore => "eviction_score",
            Misbehaviour::InvalidEviction | Misbehaviour::RaiseEviction => "decide_eviction",
            Misbehaviour::RaiseOnIngest => "on_ingest",
            Misbehaviour::RaiseOnRemove => "on_remove",
        }
    }

    /// The start of the warning KVCR logs once per misbehaviour
    /// (`kvcr.policy_runtime`).
    pub fn warning(self) -> &'static str {
        match self {
            Misbehaviour::RaiseIngest => "KVCR decide_ingest failed",
            Misbehaviour::InvalidIngest => "KVCR decide_ingest returned invalid decision",
            Misbehaviour::DropRequired => "KVCR decide_ingest cannot drop required-local work",
            Misbehaviour::NanScore => "KVCR eviction_score returned invalid score",
            Misbehaviour::RaiseScore => "KVCR eviction_score failed",
            Misbehaviour::InvalidEviction => "KVCR decide_eviction returned invalid decision",
            Misbehaviour::RaiseEviction => "KVCR decide_eviction failed",
            Misbehaviour::RaiseOnIngest => "KVCR on_ingest failed",
            Misbehaviour::RaiseOnRemove => "KVCR on_remove failed",
        }
    }
}

/// The answer label of a policy call that answered as KVCR's default.
pub const ANSWERED: &str = "answered";

/// The engine's count of its policy's calls over a phase: hook -> answer -> calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PolicyCalls(pub BTreeMap<String, BTreeMap<String, u64>>);

impl PolicyCalls {
    /// Calls of `hook` answered `answer`.
    pub fn get(&self, hook: &str, answer: &str) -> u64 {
        self.0
            .get(hook)
            .and_then(|a| a.get(answer))
            .copied()
            .unwrap_or(0)
    }

    /// Every call of `hook`, whatever it answered.
    pub fn all(&self, hook: &str) -> u64 {
        self.0.get(hook).map(|a| a.values().sum()).unwrap_or(0)
    }

    /// Calls that answered otherwise than as the default, as `hook/answer=n`.
    pub fn misbehaved(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|(hook, answers)| {
                answers
                    .iter()
                    .filter(|(answer, n)| answer.as_str() != ANSWERED && **n > 0)
                    .map(move |(answer, n)| format!("{hook}/{answer}={n}"))
            })
            .collect()
    }
}

/// What KVCR itself reported of one worker over the same phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KvcrActivity {
    /// Deposited blocks by KVCR's outcome.
    pub deposit_success: u64,
    pub deposit_failed: u64,
    pub deposit_dropped: u64,
    /// Blocks KVCR's inventory events stored into and removed from its
    /// DRAM pool (`LOCAL_G2`).
    pub stored: u64,
    pub removed: u64,
    /// Successful `local_deliver` operations (blocks served from the pool).
    pub local_delivers: u64,
}

/// A well-behaved policy in a stack without a disk tier: KVCR asked it
/// before each admission and each eviction, and told it of each admission
/// and removal its own inventory events report.
pub fn expect_policy_consulted(calls: &PolicyCalls, kvcr: &KvcrActivity) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR consults the engine's placement policy");
    let (stored, removed) = (kvcr.stored, kvcr.removed);
    c.check(stored > 0 && removed > 0, || {
        format!(
            "no evidence: KVCR stored {stored} and evicted {removed} blocks, so neither its \
             admission nor its eviction path ran"
        )
    })
    .check(calls.get("on_ingest", ANSWERED) == stored, || {
        format!(
            "on_ingest was called {} times for {stored} blocks KVCR stored",
            calls.get("on_ingest", ANSWERED)
        )
    })
    .check(calls.get("on_remove", ANSWERED) == removed, || {
        format!(
            "on_remove was called {} times for {removed} blocks KVCR evicted",
            calls.get("on_remove", ANSWERED)
        )
    })
    .check(calls.get("decide_ingest", ANSWERED) >= stored, || {
        format!(
            "decide_ingest was asked {} times before {stored} admissions",
            calls.get("decide_ingest", ANSWERED)
        )
    })
    .check(calls.get("eviction_score", ANSWERED) >= stored, || {
        format!(
            "eviction_score was asked {} times for {stored} blocks that became evictable",
            calls.get("eviction_score", ANSWERED)
        )
    })
    .check(calls.get("decide_eviction", ANSWERED) >= removed, || {
        format!(
            "decide_eviction was asked {} times for {removed} evictions",
            calls.get("decide_eviction", ANSWERED)
        )
    });
    let misbehaved = calls.misbehaved();
    c.check(misbehaved.is_empty(), || {
        format!(
            "the well-behaved policy counted misbehaviours: {}",
            misbehaved.join(", ")
        )
    });
    c.verdict()
}

/// One misbehaviour over a phase: how often the policy made it and how
/// many of KVCR's warnings for it the worker logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Answered {
    pub misbehaviour: Misbehaviour,
    pub calls: u64,
    pub warnings: u64,
}

/// A hostile policy: each chosen misbehaviour happened and KVCR logged one
/// warning for each; KVCR went on as its safe defaults promise: every
/// block it asked about was kept and stored, no deposit failed or was
/// dropped, it still evicted and still served blocks from its pool.
pub fn expect_hostile_policy_answered(
    answered: &[Answered],
    calls: &PolicyCalls,
    kvcr: &KvcrActivity,
) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR answers a misbehaving placement policy with its safe defaults");
    c.check(!answered.is_empty(), || {
        "no evidence: no misbehaviour was chosen".to_string()
    });
    for a in answered {
        let name = a.misbehaviour.name();
        c.check(a.calls > 0, || {
            format!("no evidence: the policy never misbehaved as {name} (its counter did not move)")
        })
        .check(a.warnings == a.calls, || {
            format!(
                "KVCR logged {} warnings \"{}\" for {} {name} misbehaviours",
                a.warnings,
                a.misbehaviour.warning(),
                a.calls
            )
        });
    }
    let asked = calls.all("decide_ingest");
    c.check(kvcr.stored == asked, || {
        format!(
            "KVCR stored {} blocks after asking decide_ingest {asked} times: a block it asked \
             about was not kept (KEEP is KVCR's answer to a misbehaving decide_ingest)",
            kvcr.stored
        )
    })
    .check(calls.all("on_ingest") == kvcr.stored, || {
        format!(
            "on_ingest was called {} times for {} blocks KVCR stored",
            calls.all("on_ingest"),
            kvcr.stored
        )
    })
    .check(calls.all("on_remove") == kvcr.removed, || {
        format!(
            "on_remove was called {} times for {} blocks KVCR evicted",
            calls.all("on_remove"),
            kvcr.removed
        )
    })
    .check(
        kvcr.deposit_success > 0 && kvcr.deposit_failed == 0 && kvcr.deposit_dropped == 0,
        || {
            format!(
                "deposits must go on: {} blocks succeeded, {} failed, {} dropped",
                kvcr.deposit_success, kvcr.deposit_failed, kvcr.deposit_dropped
            )
        },
    )
    .check(kvcr.removed > 0, || {
        "KVCR evicted no block: the pool stopped making room".to_string()
    })
    // KEEP is KVCR's answer to a decide_eviction that raised or answered
    // no decision: only a block the policy answered for may leave.
    .check(
        calls.get("decide_eviction", ANSWERED) >= kvcr.removed,
        || {
            format!(
                "KVCR evicted {} blocks, but the policy answered decide_eviction only {} times: \
             a block whose decide_eviction raised or answered no decision was evicted \
             (KEEP is KVCR's answer to a misbehaving decide_eviction)",
                kvcr.removed,
                calls.get("decide_eviction", ANSWERED)
            )
        },
    )
    .check(kvcr.local_delivers > 0, || {
        "KVCR served no block from its pool (no successful local_deliver)".to_string()
    });
    c.verdict()
}

/// What KVCR told the engine's policy of the blocks it handed it over a
/// phase (`cpu_engine_kvcr_policy_block_tiers`): hook -> the tiers a block
/// meta said the block is resident in (KVCR's `CacheTier` names, sorted,
/// joined by `+`; [`NO_TIER`] for none) -> block metas.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BlockTiersTold(pub BTreeMap<String, BTreeMap<String, u64>>);

/// The `tiers` label of a block meta resident in no tier.
pub const NO_TIER: &str = "none";
/// KVCR's name of the engine's framework memory tier.
const FW_G2: &str = "FW_G2";

impl BlockTiersTold {
    /// Block metas handed to `hook`, whatever their tiers.
    pub fn all(&self, hook: &str) -> u64 {
        self.0.get(hook).map(|t| t.values().sum()).unwrap_or(0)
    }

    /// Every block meta handed to any hook.
    pub fn total(&self) -> u64 {
        self.0.keys().map(|hook| self.all(hook)).sum()
    }

    /// Block metas whose tiers match `pred`, as `hook/tiers=n`.
    fn listed_where(&self, pred: impl Fn(&str, &[&str]) -> bool) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|(hook, tiers)| tiers.iter().map(move |(t, n)| (hook, t, *n)))
            .filter(|(hook, t, n)| *n > 0 && pred(hook, &t.split('+').collect::<Vec<_>>()))
            .map(|(hook, t, n)| format!("{hook}/{t}={n}"))
            .collect()
    }
}

/// Whether the engine could have lent KVCR its own memory (FW_G2) over a
/// phase: KVCR marks a block resident in FW_G2 only while it holds a pin
/// of the engine's memory for a peer's read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FrameworkMemory {
    /// The engine offers KVCR memory to pin: a host tier
    /// (`cpu_engine.host_tier_blocks` > 0) or its device cache
    /// (`cpu_engine.framework_regions`).
    pub offered: bool,
    /// Blocks the engine pinned for KVCR over the phase
    /// (`cpu_engine_kvcr_framework_pin_blocks{event="pinned"}`).
    pub pinned: u64,
}

/// The hooks whose block metas must match their calls one for one: KVCR
/// calls them with one block as it stores or removes it, so their counts
/// are settled once its deposits are answered (a scoring call may still be
/// on its way between the policy's two counts).
const SETTLED_HOOKS: [&str; 2] = ["on_ingest", "on_remove"];

/// KVCR tells the policy truly where each block is held, on a stack whose
/// engine lends KVCR none of its memory: no block meta says FW_G2, and each
/// block KVCR tells `on_ingest` of is resident in the one tier it was
/// ingested into (its pool, `LOCAL_G2`, or with `disk_tier` also `G3`).
/// The counts of `on_ingest` and `on_remove` must cover every call the
/// policy counted of them (`calls`).
pub fn expect_block_tiers_told(
    told: &BlockTiersTold,
    calls: &PolicyCalls,
    framework: &FrameworkMemory,
    disk_tier: bool,
) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR tells its placement policy where each block is held");
    c.check(told.total() > 0 && told.all("on_ingest") > 0, || {
        format!(
            "no evidence: the policy was handed {} block metas, {} of them at on_ingest",
            told.total(),
            told.all("on_ingest")
        )
    })
    .check(!framework.offered && framework.pinned == 0, || {
        format!(
            "the check needs an engine that lends KVCR none of its memory: it offers memory to \
             pin: {}, it pinned {} blocks for KVCR",
            framework.offered, framework.pinned
        )
    });
    for hook in SETTLED_HOOKS {
        c.check(told.all(hook) == calls.all(hook), || {
            format!(
                "{hook} was handed {} block metas in {} calls",
                told.all(hook),
                calls.all(hook)
            )
        });
    }
    let in_fw = told.listed_where(|_, tiers| tiers.contains(&FW_G2));
    c.check(in_fw.is_empty(), || {
        format!(
            "KVCR told the policy of blocks in the engine's framework memory ({FW_G2}), which \
             lent it none: {}",
            in_fw.join(", ")
        )
    });
    let ingest_tiers: &[&str] = if disk_tier {
        &["LOCAL_G2", "G3"]
    } else {
        &["LOCAL_G2"]
    };
    let misplaced = told.listed_where(|hook, tiers| {
        hook == "on_ingest" && !(tiers.len() == 1 && ingest_tiers.contains(&tiers[0]))
    });
    c.check(misplaced.is_empty(), || {
        format!(
            "on_ingest was told of blocks not resident in the one tier they were ingested into \
             ({}): {}",
            ingest_tiers.join(" or "),
            misplaced.join(", ")
        )
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(entries: &[(&str, &str, u64)]) -> PolicyCalls {
        let mut map: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for (hook, answer, n) in entries {
            map.entry(hook.to_string())
                .or_default()
                .insert(answer.to_string(), *n);
        }
        PolicyCalls(map)
    }

    fn activity() -> KvcrActivity {
        KvcrActivity {
            deposit_success: 20,
            deposit_failed: 0,
            deposit_dropped: 0,
            stored: 20,
            removed: 16,
            local_delivers: 1,
        }
    }

    fn consulted() -> PolicyCalls {
        calls(&[
            ("decide_ingest", ANSWERED, 20),
            ("on_ingest", ANSWERED, 20),
            ("eviction_score", ANSWERED, 24),
            ("decide_eviction", ANSWERED, 16),
            ("on_remove", ANSWERED, 16),
        ])
    }

    #[test]
    fn a_policy_consulted_as_kvcr_acted_passes() {
        assert_eq!(expect_policy_consulted(&consulted(), &activity()), Ok(()));
    }

    #[test]
    fn hooks_that_disagree_with_kvcrs_counters_fail() {
        let mut short = consulted();
        short
            .0
            .get_mut("on_remove")
            .unwrap()
            .insert(ANSWERED.into(), 15);
        let v = expect_policy_consulted(&short, &activity()).unwrap_err();
        assert!(
            v.detail.contains("on_remove was called 15 times for 16"),
            "{v}"
        );
        let v = expect_policy_consulted(&PolicyCalls::default(), &activity()).unwrap_err();
        for hook in [
            "on_ingest",
            "on_remove",
            "decide_ingest",
            "eviction_score",
            "decide_eviction",
        ] {
            assert!(v.detail.contains(hook), "{hook}: {v}");
        }
    }

    #[test]
    fn no_eviction_is_no_evidence() {
        let quiet = KvcrActivity {
            removed: 0,
            ..activity()
        };
        let v = expect_policy_consulted(&consulted(), &quiet).unwrap_err();
        assert!(v.detail.contains("no evidence"), "{v}");
    }

    #[test]
    fn a_well_behaved_policy_that_misbehaved_fails() {
        let mut bad = consulted();
        bad.0
            .get_mut("eviction_score")
            .unwrap()
            .insert("nan_score".into(), 2);
        let v = expect_policy_consulted(&bad, &activity()).unwrap_err();
        assert!(v.detail.contains("eviction_score/nan_score=2"), "{v}");
    }

    fn hostile() -> (Vec<Answered>, PolicyCalls) {
        let answered = vec![
            Answered {
                misbehaviour: Misbehaviour::RaiseIngest,
                calls: 5,
                warnings: 5,
            },
            Answered {
                misbehaviour: Misbehaviour::NanScore,
                calls: 12,
                warnings: 12,
            },
        ];
        let c = calls(&[
            ("decide_ingest", "raise_ingest", 5),
            ("decide_ingest", "invalid_ingest", 5),
            ("decide_ingest", ANSWERED, 10),
            ("on_ingest", ANSWERED, 15),
            ("on_ingest", "raise_on_ingest", 5),
            ("decide_eviction", ANSWERED, 16),
            ("decide_eviction", "raise_eviction", 8),
            ("decide_eviction", "invalid_eviction", 8),
            ("on_remove", ANSWERED, 16),
        ]);
        (answered, c)
    }

    #[test]
    fn a_block_evicted_against_a_misbehaving_decide_eviction_fails() {
        // Seed 5's draw 25: `decision[0]` read as `decision[-1]`, so KVCR
        // evicts the blocks whose decide_eviction it answered with KEEP.
        let (answered, mut c) = hostile();
        c.0.get_mut("decide_eviction")
            .unwrap()
            .insert(ANSWERED.into(), 10);
        let v = expect_hostile_policy_answered(&answered, &c, &activity()).unwrap_err();
        assert!(
            v.detail.contains(
                "KVCR evicted 16 blocks, but the policy answered decide_eviction only 10 times"
            ),
            "{v}"
        );
    }

    #[test]
    fn misbehaviours_answered_with_warnings_while_kvcr_serves_pass() {
        let (answered, c) = hostile();
        assert_eq!(
            expect_hostile_policy_answered(&answered, &c, &activity()),
            Ok(())
        );
    }

    #[test]
    fn a_misbehaviour_without_its_warning_fails() {
        let (mut answered, c) = hostile();
        answered[0].warnings = 0;
        let v = expect_hostile_policy_answered(&answered, &c, &activity()).unwrap_err();
        assert!(
            v.detail.contains(
                "KVCR logged 0 warnings \"KVCR decide_ingest failed\" for 5 raise_ingest"
            ),
            "{v}"
        );
    }

    #[test]
    fn a_misbehaviour_that_never_happened_is_no_evidence() {
        let (mut answered, c) = hostile();
        answered[1] = Answered {
            misbehaviour: Misbehaviour::InvalidEviction,
            calls: 0,
            warnings: 0,
        };
        let v = expect_hostile_policy_answered(&answered, &c, &activity()).unwrap_err();
        assert!(
            v.detail.contains("never misbehaved as invalid_eviction"),
            "{v}"
        );
        let v = expect_hostile_policy_answered(&[], &c, &activity()).unwrap_err();
        assert!(v.detail.contains("no misbehaviour was chosen"), "{v}");
    }

    #[test]
    fn a_kvcr_that_stops_serving_fails() {
        let (answered, c) = hostile();
        let failed = KvcrActivity {
            deposit_failed: 4,
            stored: 16,
            removed: 0,
            local_delivers: 0,
            ..activity()
        };
        let v = expect_hostile_policy_answered(&answered, &c, &failed).unwrap_err();
        for part in [
            "4 failed",
            "KVCR stored 16 blocks after asking decide_ingest 20 times",
            "evicted no block",
            "no block from its pool",
            "on_remove was called 16 times for 0 blocks KVCR evicted",
        ] {
            assert!(v.detail.contains(part), "{part}: {v}");
        }
    }

    fn told(entries: &[(&str, &str, u64)]) -> BlockTiersTold {
        BlockTiersTold(calls(entries).0)
    }

    /// What KVCR 0.1.1 tells the policy over the calm phase of `consulted`.
    fn told_truly() -> BlockTiersTold {
        told(&[
            ("decide_ingest", NO_TIER, 20),
            ("on_ingest", "LOCAL_G2", 20),
            ("eviction_score", "LOCAL_G2", 24),
            ("decide_eviction", "LOCAL_G2", 16),
            ("on_remove", NO_TIER, 16),
        ])
    }

    const LENDS_NONE: FrameworkMemory = FrameworkMemory {
        offered: false,
        pinned: 0,
    };

    #[test]
    fn blocks_told_where_kvcr_holds_them_pass() {
        assert_eq!(
            expect_block_tiers_told(&told_truly(), &consulted(), &LENDS_NONE, false),
            Ok(())
        );
        let spilled = told(&[("on_ingest", "LOCAL_G2", 12), ("on_ingest", "G3", 8)]);
        let calls = calls(&[("on_ingest", ANSWERED, 20)]);
        assert_eq!(
            expect_block_tiers_told(&spilled, &calls, &LENDS_NONE, true),
            Ok(())
        );
    }

    #[test]
    fn blocks_told_in_framework_memory_that_lent_none_fail() {
        // KVCR's `_block_meta` with its framework-memory check inverted.
        let inverted = told(&[
            ("decide_ingest", "FW_G2", 20),
            ("on_ingest", "FW_G2+LOCAL_G2", 20),
            ("eviction_score", "FW_G2+LOCAL_G2", 24),
            ("decide_eviction", "FW_G2+LOCAL_G2", 16),
            ("on_remove", "FW_G2", 16),
        ]);
        let v = expect_block_tiers_told(&inverted, &consulted(), &LENDS_NONE, false).unwrap_err();
        for part in [
            "KVCR told the policy of blocks in the engine's framework memory (FW_G2), which lent \
             it none: decide_eviction/FW_G2+LOCAL_G2=16, decide_ingest/FW_G2=20",
            "on_remove/FW_G2=16",
            "on_ingest was told of blocks not resident in the one tier they were ingested into \
             (LOCAL_G2): on_ingest/FW_G2+LOCAL_G2=20",
        ] {
            assert!(v.detail.contains(part), "{part}: {v}");
        }
    }

    #[test]
    fn an_ingested_block_told_elsewhere_fails() {
        let nowhere = told(&[("on_ingest", "LOCAL_G2", 19), ("on_ingest", NO_TIER, 1)]);
        let c = calls(&[("on_ingest", ANSWERED, 20)]);
        let v = expect_block_tiers_told(&nowhere, &c, &LENDS_NONE, false).unwrap_err();
        assert!(v.detail.contains("on_ingest/none=1"), "{v}");
        // G3 is an ingest tier only on a stack with a disk tier.
        let disk = told(&[("on_ingest", "G3", 20)]);
        let v = expect_block_tiers_told(&disk, &c, &LENDS_NONE, false).unwrap_err();
        assert!(v.detail.contains("on_ingest/G3=20"), "{v}");
        let both = told(&[("on_ingest", "G3+LOCAL_G2", 20)]);
        let v = expect_block_tiers_told(&both, &c, &LENDS_NONE, true).unwrap_err();
        assert!(
            v.detail
                .contains("(LOCAL_G2 or G3): on_ingest/G3+LOCAL_G2=20"),
            "{v}"
        );
    }

    #[test]
    fn no_block_meta_is_no_evidence() {
        let v = expect_block_tiers_told(
            &BlockTiersTold::default(),
            &PolicyCalls::default(),
            &LENDS_NONE,
            false,
        )
        .unwrap_err();
        assert!(
            v.detail
                .contains("no evidence: the policy was handed 0 block metas, 0 of them"),
            "{v}"
        );
        let no_ingest = told(&[("eviction_score", "LOCAL_G2", 3)]);
        let v = expect_block_tiers_told(&no_ingest, &PolicyCalls::default(), &LENDS_NONE, false)
            .unwrap_err();
        assert!(
            v.detail.contains("3 block metas, 0 of them at on_ingest"),
            "{v}"
        );
    }

    #[test]
    fn tiers_not_counted_for_every_call_fail() {
        let mut short = told_truly();
        short
            .0
            .get_mut("on_remove")
            .unwrap()
            .insert(NO_TIER.into(), 15);
        let v = expect_block_tiers_told(&short, &consulted(), &LENDS_NONE, false).unwrap_err();
        assert!(
            v.detail
                .contains("on_remove was handed 15 block metas in 16 calls"),
            "{v}"
        );
    }

    #[test]
    fn an_engine_that_lends_its_memory_is_no_ground_for_the_check() {
        for framework in [
            FrameworkMemory {
                offered: true,
                pinned: 0,
            },
            FrameworkMemory {
                offered: false,
                pinned: 4,
            },
        ] {
            let v = expect_block_tiers_told(&told_truly(), &consulted(), &framework, false)
                .unwrap_err();
            assert!(
                v.detail
                    .contains("the check needs an engine that lends KVCR none of its memory"),
                "{v}"
            );
        }
    }
}
