//! The rows of the production cases' fault matrix, one function each.

use serde_json::json;

use kvcr_e2e::suite::{expect_red, Case, CaseCtx, CaseResult};

use crate::cases::{
    tc07_pool_pressure as tc07, tc09_clean_restart as tc09, tc11_source_stall_latch as tc11,
};

const fn row(id: &'static str, name: &'static str, run: fn(&CaseCtx) -> CaseResult) -> Case {
    Case::fault_row(id, name, run)
}

pub fn all() -> Vec<Case> {
    vec![
        row(
            "TC-07",
            "hidden_failed_deposit_is_caught",
            hidden_failed_deposit,
        ),
        row(
            "TC-07",
            "evicted_block_still_published_is_caught",
            evicted_block_still_published,
        ),
        row(
            "TC-09",
            "exit_without_handback_is_caught",
            exit_without_handback,
        ),
        row("TC-11", "hidden_stall_latch_is_caught", hidden_stall_latch),
    ]
}

/// The engine reports every deposited block a success, whatever KVCR said.
fn hidden_failed_deposit(ctx: &CaseCtx) -> CaseResult {
    let _on = ctx.engine_faults(&["A"], json!({"hide_failed_deposits": true}))?;
    expect_red(
        ctx,
        tc07::run,
        "a deposit into a full pool is reported failed",
    )
}

/// The engine never tells the router that a block left KVCR's pool.
fn evicted_block_still_published(ctx: &CaseCtx) -> CaseResult {
    let _on = ctx.engine_faults(&["A"], json!({"drop_removed_inventory": true}))?;
    expect_red(ctx, tc07::run, "an evicted prefix is no longer hinted")
}

/// On SIGTERM the engine exits without closing KVCR: a death, not a release.
fn exit_without_handback(ctx: &CaseCtx) -> CaseResult {
    let _on = ctx.engine_faults(&["A"], json!({"no_handback": true}))?;
    expect_red(
        ctx,
        tc09::run,
        "a clean stop hands the pool back without a promotion",
    )
}

/// The engine drops KVCR's source-stall latch on the floor.
fn hidden_stall_latch(ctx: &CaseCtx) -> CaseResult {
    let _on = ctx.engine_faults(&["A"], json!({"hide_source_stall": true}))?;
    expect_red(
        ctx,
        tc11::run,
        "the source-stall latch is reported as a fact",
    )
}
