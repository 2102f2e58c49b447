//! The production-conditions cases, in test-plan order.

use kvcr_e2e::suite::Case;

pub mod common;
pub mod tc07_pool_pressure;
pub mod tc08_guard_service_crash;
pub mod tc09_clean_restart;
pub mod tc10_heartbeat_promotion;
pub mod tc11_source_stall_latch;
pub mod tc12_disk_tier;

/// TC-07..TC-11, on the `phase2` stack.
#[allow(dead_code)] // each target uses one of the two lists
pub fn all() -> Vec<Case> {
    vec![
        tc07_pool_pressure::CASE,
        tc09_clean_restart::CASE,
        tc10_heartbeat_promotion::CASE,
        tc11_source_stall_latch::CASE,
        tc08_guard_service_crash::CASE,
    ]
}

/// TC-12, on the `phase2-g3` stack.
#[allow(dead_code)]
pub fn disk_tier() -> Vec<Case> {
    vec![tc12_disk_tier::CASE]
}
