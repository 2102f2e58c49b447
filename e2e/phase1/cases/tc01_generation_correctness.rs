//! TC-01 generation correctness: each prompt through the router returns
//! exactly the reference tokens, on a first pass (cold) and on a repeat pass
//! (cached). Readiness was proven by a real completion when the stack started.

use kvcr_e2e::suite::{Case, CaseCtx, CaseResult};

pub const CASE: Case = Case {
    id: "TC-01",
    name: "generation_correctness",
    destructive: false,
    run,
};

/// Families per pass; every variant of each is sent.
const FAMILIES: usize = 3;

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let families = ctx.families(FAMILIES)?;
    let mut served = 0;
    for pass in ["cold", "cached"] {
        for prompt in families.iter().flat_map(|f| &f.variants) {
            let answer = ctx.complete_routed(prompt)?;
            ctx.expect_reference(prompt, &answer.tokens).map_err(|e| {
                kvcr_e2e::suite::CaseError {
                    message: format!("{pass} pass: {}", e.message),
                    ..e
                }
            })?;
            served += 1;
        }
    }
    ctx.measure("requests", served);
    ctx.measure(
        "stack_first_completion_ms",
        ctx.stack.timings().first_completion_ms,
    );
    Ok(())
}
