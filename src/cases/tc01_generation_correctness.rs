//! TC-01 generation correctness: each prompt through the router returns
//! exactly the reference tokens, on a first pass (cold) and on a repeat pass
//! (cached), and each cached answer says it reused all the blocks the
//! engine caches of the prompt (`cached_tokens` = its full blocks; on vLLM
//! short of the last token). Readiness was proven by a real completion when
//! the stack started. On a stack with a decode worker, the P→D transfer
//! reconciles through each prefill worker in turn (a fresh prompt pinned to
//! it with `nvext.prefill_worker_id`): the decode pulled exactly the
//! prompt's full blocks from that prefill.

use crate::suite::{Case, CaseCtx, CaseResult};
use crate::verdict::local::expect_cached_repeat;

pub const CASE: Case = Case {
    id: "TC-01",
    name: "generation_correctness",
    destructive: false,
    needs: &[],
    optional: &[],
    run,
};

/// Families per pass; every variant of each is sent.
const FAMILIES: usize = 3;

pub fn run(ctx: &CaseCtx) -> CaseResult {
    if let Some(decode) = ctx.disagg().decode_worker() {
        // Through each prefill worker in turn (pinned), a fresh prompt each.
        let fresh = ctx.families(ctx.disagg().prefill_workers().len())?;
        let prompts: Vec<_> = fresh.iter().map(|f| f.variant(0)).collect();
        ctx.disagg()
            .expect_prefill_to_decode_each(&decode, &prompts)?;
    }
    let families = ctx.families(FAMILIES)?;
    let block_size = u64::from(ctx.geometry().block_size_tokens);
    let mut served = 0;
    let mut cached = Vec::new();
    for pass in ["cold", "cached"] {
        // Families in flight as the reference phase's batch probe allows
        // (sequential without it); each family's variants in order, and the
        // cached pass only after the whole cold pass.
        let answers = ctx.complete_routed_families(&families)?;
        for (prompt, answer) in families.iter().flat_map(|f| &f.variants).zip(answers) {
            ctx.expect_reference(prompt, &answer.tokens)
                .map_err(|e| crate::suite::CaseError {
                    message: format!("{pass} pass: {}", e.message),
                    ..e
                })?;
            if pass == "cached" {
                let expected = ctx
                    .engine()
                    .cached_tokens_of_repeat(prompt.tokens.len() as u64);
                cached.push((answer.prompt.clone(), answer.cached_tokens, expected));
            }
            served += 1;
        }
    }
    for (prompt, cached_tokens, expected) in &cached {
        ctx.check(
            "cached-pass.json",
            &cached,
            expect_cached_repeat(prompt, *cached_tokens, *expected, block_size),
        )?;
    }
    ctx.measure("requests", served);
    ctx.measure(
        "stack_first_completion_ms",
        ctx.stack_startup().first_completion_ms,
    );
    Ok(())
}
