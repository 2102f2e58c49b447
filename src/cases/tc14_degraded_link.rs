//! TC-14 degraded link (two nodes, root): worker B (node 1) holds new
//! prefixes and worker A (node 0) is asked for them, hinted to B, first on
//! the clean link, then under each condition of [`CONDITIONS`] in turn on
//! node 1's end of the run's veth (delay with jitter, loss, a rate cap;
//! one at a time, each verified by its own counters before it is relied
//! on, and taken off and checked gone after its pulls). A condition's
//! prefixes are committed on B before it is applied: B's KV events then
//! reach the router whole, so the hint names every shared block and the
//! condition acts on KVCR's transfer (committed under loss, the router
//! once knew one block of four and hinted only that one).
//!
//! Every answer carries the reference tokens. On the clean link every pull
//! reconciles; under a condition each pull reconciles or fails cleanly (a
//! counted failed delivery, nothing across, A computes every block); no
//! request waits past the request budget. Remote-hit TTFT per condition
//! against the clean link, with bootstrap intervals, is evidence
//! (`ttft-by-condition.md`), never a verdict.

use serde_json::json;

use crate::engine::Need;
use crate::evidence::{Arm, TTFT_BY_CONDITION};
use crate::proc::link_condition::LinkCondition;
use crate::prompts::Family;
use crate::stack::Worker;
use crate::stats::Bootstrap;
use crate::suite::{listener_of, Case, CaseCtx, CaseError, CaseResult};
use crate::verdict::degraded_link::{
    expect_reconciled_or_failed_cleanly, expect_within_budget, summarize, table, DegradedPull,
    PullOutcome,
};
use crate::verdict::transfer::expect_peer_transfer;

pub const CASE: Case = Case {
    id: "TC-14",
    name: "degraded_link",
    destructive: false,
    needs: &[Need::NodeLink, Need::RouterHints],
    optional: &[],
    run,
};

/// The conditions, in the order they are applied (after the clean link).
pub const CONDITIONS: [LinkCondition; 3] = [
    LinkCondition::Delay {
        delay_ms: 20,
        jitter_ms: 10,
    },
    LinkCondition::Loss { percent: 3.0 },
    LinkCondition::RateCap { kbit: 1000 },
];

/// Hinted pulls per condition (and on the clean link): about 2 s each on
/// the CPU stack, so the case stays near 2 minutes with the conditions'
/// set-up and checks.
const PULLS: usize = 8;

pub fn run(ctx: &CaseCtx) -> CaseResult {
    let (a, b) = (ctx.worker("A")?, ctx.worker("B")?);
    let bytes_per_block = ctx.geometry().bytes_per_block();
    let budget_ms = ctx.settings().request_timeout.as_millis() as u64;
    let listener = listener_of(b.admin_url())?;
    let bulk_url = b.metrics_url();
    ctx.measure("pulls_per_condition", PULLS);
    ctx.measure("request_budget_ms", budget_ms);

    let mut conditions = vec![("clean".to_string(), "clean link".to_string())];
    let mut pulls: Vec<(DegradedPull, PullOutcome)> = Vec::new();
    // The clean link: every pull reconciles.
    for i in 0..PULLS {
        let family = commit_on(ctx, &b)?;
        let pull = pull_across(ctx, &family, &b, &a, "clean")?;
        ctx.check(
            &format!("clean-{i}.json"),
            &pull,
            expect_peer_transfer(&pull.transfer, pull.shared_blocks, bytes_per_block),
        )?;
        pulls.push((pull, PullOutcome::Reconciled));
    }

    let faults = ctx.faults().for_thread();
    for condition in CONDITIONS {
        let slug = condition.slug();
        conditions.push((slug.to_string(), condition.label()));
        let families = (0..PULLS)
            .map(|_| commit_on(ctx, &b))
            .collect::<Result<Vec<_>, _>>()?;
        ctx.doing(format!("putting {} on node 1's link", condition.label()))?;
        let degraded = faults.degrade_node_link(
            condition,
            listener,
            &bulk_url,
            ctx.logs_dir().to_path_buf(),
        )?;
        ctx.record(&format!("{slug}-applied.json"), &degraded.applied);
        for (i, family) in families.iter().enumerate() {
            let pull = pull_across(ctx, family, &b, &a, slug)?;
            let verdict = expect_reconciled_or_failed_cleanly(&pull, bytes_per_block);
            let outcome = verdict.as_ref().ok().copied();
            ctx.check(
                &format!("{slug}-{i}.json"),
                &json!({"pull": pull, "outcome": outcome}),
                verdict.map(|_| ()),
            )?;
            pulls.extend(outcome.map(|o| (pull, o)));
        }
        let removed = degraded.remove(listener)?;
        ctx.record(&format!("{slug}-removed.json"), &removed);
    }

    let summaries = summarize(&conditions, &pulls, &Bootstrap::default());
    ctx.measure(TTFT_BY_CONDITION, &summaries);
    ctx.record_text("ttft-by-condition.md", &table(&summaries));
    let all: Vec<DegradedPull> = pulls.into_iter().map(|(p, _)| p).collect();
    ctx.check(
        "budget.json",
        &json!({"budget_ms": budget_ms, "latency_ms": all.iter().map(|p| p.latency_ms).collect::<Vec<_>>()}),
        expect_within_budget(&all, budget_ms),
    )
}

/// A new family whose first prompt `source` answered and deposited.
fn commit_on(ctx: &CaseCtx, source: &Worker) -> Result<Family, CaseError> {
    let family = ctx.family()?;
    ctx.commit(source, family.variant(0))?;
    Ok(family)
}

/// Streams `family`'s second prompt to `target` (hinted to `source`, which
/// holds its first): the answer checked against the reference, its
/// timings, and both sides' transfer counters.
fn pull_across(
    ctx: &CaseCtx,
    family: &Family,
    source: &Worker,
    target: &Worker,
    condition: &str,
) -> Result<DegradedPull, CaseError> {
    let prompt = family.variant(1);
    let (source_before, target_before) = (ctx.snapshot(source)?, ctx.snapshot(target)?);
    let measured = ctx
        .perf()
        .stream_measured(Some(target), prompt, Arm::RemoteHit)?;
    let pulled = ctx
        .observe()
        .peer_transfer(source, &source_before, target, &target_before)?;
    let record = measured.record;
    Ok(DegradedPull {
        condition: condition.to_string(),
        prompt: prompt.key(),
        request_id: record.request_id.unwrap_or_default(),
        ttft_ms: record.ttft_ms.unwrap_or(f64::NAN),
        latency_ms: record.e2el_ms.unwrap_or(f64::NAN),
        computed_blocks: ctx.observe().computed_blocks(&pulled.target)?,
        prompt_blocks: ctx.geometry().full_blocks(prompt.tokens.len() as u64),
        shared_blocks: family.shared_blocks(),
        transfer: pulled.transfer,
    })
}
