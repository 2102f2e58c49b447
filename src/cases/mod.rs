//! The cases (phase 1's TC-01..TC-06, the production-conditions TC-07..TC-12, phase 3's TC-17), one file each, each written like its paragraph of
//! docs/test-plan.md: arrange, act, check with named verdicts. They are
//! registered once, here, in test-plan order; the lane table
//! ([`crate::lanes`]) runs them on every engine and topology, and the fault
//! matrices ([`crate::fault_matrix`]) run them with a fault on.

use crate::suite::Case;

pub mod tc01_generation_correctness;
pub mod tc02_local_dram_flow;
pub mod tc03_hinted_peer_transfer;
pub mod tc04_guard_takeover;
pub mod tc04_worker_killed_under_load;
pub mod tc05_performance_arms;
pub mod tc06_guard_recovery_timing;

mod production_common;
pub mod tc07_pool_pressure;
pub mod tc08_guard_service_crash;
pub mod tc09_clean_restart;
pub mod tc10_heartbeat_promotion;
pub mod tc11_source_stall_latch;
pub mod tc12_disk_tier;

pub mod tc13_partition_and_heal;
pub mod tc14_degraded_link;
pub mod tc15_peer_pause;
pub mod tc16_hostile_startup;
pub mod tc17_concurrent_same_prefix;
pub mod tc18_engine_memory_peer_read;
pub mod tc19_interrupted_source_write;
pub mod tc20_full_tiers;
pub mod tc21_placement_policy;
pub mod tc22_peer_transfer_faults;
mod tc22_refused_hints;
pub mod tc23_recovery_journal;
pub mod tc24_deadline_storm;
mod unreachable_source;

pub mod wl01_trace_replay;

pub mod table;

/// Every phase 1 case (and arm), in the order they run.
///
/// The destructive cases run last, so the performance arms measure a stack
/// no case has broken yet, and the last one (TC-04 under load, which leaves
/// worker A dead) needs no restore: a restore serves only a later case (on
/// vLLM it is a worker restart of minutes). TC-06 follows TC-04's takeover,
/// whose replacement it kills in turn.
pub const PHASE1: &[Case] = &[
    tc01_generation_correctness::CASE,
    tc02_local_dram_flow::CASE,
    tc03_hinted_peer_transfer::CASE,
    tc05_performance_arms::COLD,
    tc05_performance_arms::LOCAL_HIT,
    tc05_performance_arms::DRAM_HIT,
    tc05_performance_arms::REMOTE_HIT,
    tc05_performance_arms::SWEEP,
    tc05_performance_arms::DELIVER_BENCH,
    tc05_performance_arms::PULL_BENCH,
    tc04_guard_takeover::CASE,
    tc06_guard_recovery_timing::CASE,
    tc04_worker_killed_under_load::CASE,
];

/// The production-conditions cases on the `phase2` stack (TC-07..TC-11,
/// and TC-21: the engine's own placement policy, well-behaved then
/// hostile), in the order they run: the Guard service crash last, as it
/// leaves a restarted service.
pub const PHASE2: &[Case] = &[
    tc07_pool_pressure::CASE,
    tc21_placement_policy::CASE,
    tc09_clean_restart::CASE,
    tc10_heartbeat_promotion::CASE,
    tc11_source_stall_latch::CASE,
    tc23_recovery_journal::CASE,
    tc08_guard_service_crash::CASE,
];

/// The production-conditions cases that run on real vLLM (`phase2_vllm`):
/// TC-09, TC-10, TC-11 and TC-08, in the `phase2` order. TC-07 and TC-12
/// need the CPU engine's per-block reports or switches (vLLM's
/// `Engine::supports` says why for each).
pub const PHASE2_VLLM: &[Case] = &[
    tc09_clean_restart::CASE,
    tc10_heartbeat_promotion::CASE,
    tc11_source_stall_latch::CASE,
    tc08_guard_service_crash::CASE,
];

/// A workload trace replayed, KVCR on and off (WL-01), on the `workload`
/// stack.
pub const WORKLOAD: &[Case] = &[wl01_trace_replay::CASE];

/// Phase 3 on the CPU stack (`phase3` profile): concurrent requests for one
/// new prefix (TC-17), components started where they must refuse (TC-16),
/// then a source paused past the operation timeout (TC-15, destructive: it
/// restarts A).
pub const PHASE3: &[Case] = &[
    tc17_concurrent_same_prefix::CASE,
    tc16_hostile_startup::CASE,
    tc15_peer_pause::CASE,
];

/// Phase 3 on two nodes (`phase3_two_node`): the link between them cut and
/// healed (TC-13), then degraded: delay, loss, a rate cap (TC-14).
pub const PHASE3_TWO_NODE: &[Case] = &[tc13_partition_and_heal::CASE, tc14_degraded_link::CASE];

/// The KVCR calls a GPU engine makes (`phase3_api`): a peer read served
/// from engine memory through framework pins, staged with `KVCR.fetch`
/// (TC-18), and a peer read whose source gets its pins late or closes first
/// (TC-19, last: it restarts worker A); between them, two peers reading
/// one prefix while its source's pin is pending (TC-22).
pub const PHASE3_API: &[Case] = &[
    tc18_engine_memory_peer_read::CASE,
    tc22_peer_transfer_faults::CASE,
    tc19_interrupted_source_write::CASE,
];

/// KVCR's disk tier on the `phase2-g3` stack: both tiers of worker B
/// overflowed (TC-20), operations that outlast KVCR's operation timeout
/// while the pool is full (TC-24, on a stack of its own), then TC-12 on
/// worker A: its G3 read bench, then the disk tier's spill, read-backs and
/// handback (destructive: it kills A).
pub const PHASE2_G3: &[Case] = &[
    tc20_full_tiers::CASE,
    tc24_deadline_storm::CASE,
    tc12_disk_tier::G3_READ_BENCH,
    tc12_disk_tier::CASE,
];

/// The cases whose costs grow with the Guard pool, on production-size pools
/// (`phase3_scale`, `phase3_scale_4g`): the clean restart's handback, the
/// takeover and its timing, then the disk tier (its prompts fill the pool
/// and the disk tier: after it, every deposit waits for an eviction to
/// disk, which at 16 MiB blocks outlasted KVCR's operation timeout), and
/// the Guard service crash last (it leaves a restarted service).
pub const PHASE3_SCALE: &[Case] = &[
    tc09_clean_restart::CASE,
    tc04_guard_takeover::CASE,
    tc06_guard_recovery_timing::CASE,
    tc12_disk_tier::CASE,
    tc08_guard_service_crash::CASE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Need;

    /// `--cases` accepts exactly the test plan's registered case ids.
    #[test]
    fn the_known_cases_are_the_registered_ones() {
        let mut ids: Vec<&str> = table::test_plan_cases().iter().map(|c| c.id).collect();
        ids.dedup();
        assert_eq!(ids, crate::engine::applicability::KNOWN_CASES);
    }

    /// The needs a case's file asks the stack about (`Need::…`) are the
    /// ones its `Case` declares, so the generated table and the ignored
    /// reasons tell what the case really reads.
    #[test]
    fn a_case_asks_only_for_what_it_declares() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cases");
        let mut cases: Vec<Case> = table::test_plan_cases();
        cases.extend(WORKLOAD);
        for entry in std::fs::read_dir(&root).unwrap() {
            let path = entry.unwrap().path();
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let Some(number) = stem
                .get(2..4)
                .filter(|_| stem.starts_with("tc") || stem.starts_with("wl"))
            else {
                continue;
            };
            let id = format!("{}-{number}", stem[..2].to_ascii_uppercase());
            let text = std::fs::read_to_string(&path).unwrap();
            let declared: Vec<Need> = cases
                .iter()
                .filter(|c| c.id == id)
                .flat_map(|c| c.needs.iter().chain(c.optional))
                .copied()
                .collect();
            for need in crate::engine::Need::ALL {
                if text.contains(&format!("Need::{need:?}")) {
                    assert!(
                        declared.contains(&need),
                        "{} asks for Need::{need:?}, which no case {id} declares",
                        path.display()
                    );
                }
            }
        }
    }
}
