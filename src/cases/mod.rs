//! The phase 1 cases, one file each, each written like its paragraph of
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

/// Every phase 1 case (and arm), in test-plan order.
pub const PHASE1: &[Case] = &[
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
];
