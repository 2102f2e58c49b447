//! TC-17 concurrent same prefix: eight requests for one new prompt, pinned
//! to worker A, sent at once. On the `phase3` stack the CPU engine makes a
//! block a device hit only once the prefill computing it has ended (as vLLM
//! does), so each request computes the prefix and deposits it into KVCR,
//! and KVCR meets deposits of blocks it is still filling from another
//! (its FILLING state). Expect: every answer has the reference tokens, at
//! least one deposit met a filling block (the engine asks KVCR before each
//! deposit: `cpu_engine_kvcr_deposit_met_filling_blocks`), no deposit
//! failed or was dropped, and KVCR copied each block of the prefix once
//! (`kvcr_transfer_blocks{scope=local_fill}` equals the prefix's blocks).

use serde_json::json;

use crate::engine::Need;
use crate::suite::{Case, CaseCtx, CaseResult};
use crate::verdict::concurrent::{expect_deposited_once, expect_no_failed_deposit, expect_overlap};

pub const CASE: Case = Case {
    id: "TC-17",
    name: "concurrent_same_prefix",
    destructive: false,
    needs: &[Need::DepositReports],
    optional: &[],
    run,
};

/// Requests sent at once (the test plan asks for at least eight).
const REQUESTS: usize = 8;

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    let family = ctx.family()?;
    let prompt = family.variant(0);
    let prefix_blocks = ctx.geometry().full_blocks(prompt.tokens.len() as u64);

    let before = ctx.snapshot(&a)?;
    let answers = ctx.shared_prefix().burst_on(&a, prompt, REQUESTS)?;
    for answer in &answers {
        ctx.expect_reference(prompt, &answer.tokens)?;
    }
    let deposits =
        ctx.shared_prefix()
            .settled_deposits(&a, &before, REQUESTS as u64, prefix_blocks)?;
    ctx.measure("deposits", deposits);
    let evidence =
        json!({"worker": "A", "prompt": prompt.key(), "deposits": deposits, "answers": answers});
    ctx.check("deposits.json", &evidence, expect_overlap(&deposits))?;
    ctx.check(
        "deposits.json",
        &evidence,
        expect_no_failed_deposit(&deposits),
    )?;
    ctx.check("deposits.json", &evidence, expect_deposited_once(&deposits))
}
