//! Rows for the P→D path of a 2P+1D stack, one function each.

use kvcr_e2e::suite::{expect_red, Case, CaseCtx, CaseError, CaseResult, EngineFault};

use crate::cases::tc01_generation_correctness as tc01;

const fn row(id: &'static str, name: &'static str, run: fn(&CaseCtx) -> CaseResult) -> Case {
    Case::fault_row(id, name, run)
}

pub fn all() -> Vec<Case> {
    vec![
        row("TC-01", "decode_given_wrong_pages_is_caught", wrong_pages),
        row("TC-01", "decode_misreporting_bytes_is_caught", wrong_bytes),
        row(
            "TC-01",
            "prefill_killed_before_the_pull_is_caught",
            prefill_killed_before_pull,
        ),
    ]
}

/// The decode worker, or a row error saying the stack has none.
fn decode_name(ctx: &CaseCtx) -> Result<String, CaseError> {
    ctx.disagg()
        .decode_worker()
        .map(|w| w.name().to_string())
        .ok_or_else(|| {
            CaseError::new("this row needs a stack with a decode worker (--topology 2p1d)")
        })
}

/// The decode's pulled pages are corrupted after delivery: wrong tokens.
fn wrong_pages(ctx: &CaseCtx) -> CaseResult {
    let decode = decode_name(ctx)?;
    let _fault = ctx
        .faults()
        .engine(&[&decode], EngineFault::CorruptDeliveredPages)?;
    expect_red(ctx, tc01::run, "reference tokens")
}

/// The decode reports one page more than it read: the P→D check catches it.
fn wrong_bytes(ctx: &CaseCtx) -> CaseResult {
    let decode = decode_name(ctx)?;
    let _fault = ctx
        .faults()
        .engine(&[&decode], EngineFault::WrongTransferBytes)?;
    expect_red(ctx, tc01::run, "P→D transfer reconciles")
}

/// Whichever prefill answers dies before the decode pulls (and deposited
/// nothing for its Guard): the decode recomputes, the P→D check catches it.
fn prefill_killed_before_pull(ctx: &CaseCtx) -> CaseResult {
    let prefills: Vec<String> = ctx
        .disagg()
        .prefill_workers()
        .iter()
        .map(|w| w.name().to_string())
        .collect();
    let names: Vec<&str> = prefills.iter().map(String::as_str).collect();
    let _fault = ctx.faults().engine(&names, EngineFault::ExitAfterPrefill)?;
    expect_red(ctx, tc01::run, "did not pull the prefill's pages")
}
