//! The phase 1 cases, in test-plan order.

use kvcr_e2e::suite::Case;

pub mod tc01_generation_correctness;
pub mod tc02_local_dram_flow;
pub mod tc03_hinted_peer_transfer;
pub mod tc04_guard_takeover;
pub mod tc04_worker_killed_under_load;
pub mod tc05_performance_arms;
pub mod tc06_guard_recovery_timing;

pub fn all() -> Vec<Case> {
    vec![
        tc01_generation_correctness::CASE,
        tc02_local_dram_flow::CASE,
        tc03_hinted_peer_transfer::CASE,
        tc04_guard_takeover::CASE,
        tc04_worker_killed_under_load::CASE,
        tc05_performance_arms::COLD,
        tc05_performance_arms::LOCAL_HIT,
        tc05_performance_arms::DRAM_HIT,
        tc05_performance_arms::REMOTE_HIT,
        tc05_performance_arms::SWEEP,
        tc06_guard_recovery_timing::CASE,
    ]
}
