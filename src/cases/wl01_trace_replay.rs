//! WL-01 trace replay (docs/test-plan.md, docs/workload.md): a realistic
//! stream of requests, what KVCR serves of it from each tier, and what that
//! does to latency and goodput, against the same trace with KVCR off.
//!
//! Arrange: the trace of `workload_trace`, replayed in the reference phase
//! on the KVCR-off reference worker at the same rate (its tokens are every
//! request's reference; its timings the baseline).
//! Act: replay it through the router in an open loop at its arrival times
//! divided by `workload_rate`; then, with `workload_sweep`, once per rate
//! factor with a token salt of its own.
//! Check: every request answered with the reference tokens; the hit rate
//! per tier reconciles (answers' cached tokens = the engines' device and
//! external hits = KVCR's deliveries + device hits), no delivery failed.
//! Measure: hit rate per tier, TTFT/TPOT percentiles, goodput under the
//! targets, KVCR on and off; the sweep's goodput per rate and the highest
//! rate sustained.

use crate::evidence::workload::{max_sustained_rate, WorkloadSummary, WORKLOAD_CASE};
use crate::suite::{Case, CaseCtx, CaseResult, Workload};
use crate::verdict::workload::{replay_answered, tiers_reconcile};

pub const CASE: Case = Case {
    id: WORKLOAD_CASE,
    name: "trace_replay",
    destructive: false,
    needs: &[],
    optional: &[],
    run,
};

/// Each sweep replay's token salt is the settings' salt plus this plus its
/// index, so no replay finds the blocks of another.
const SWEEP_SALT_OFFSET: u64 = 1_000;

fn run(ctx: &CaseCtx) -> CaseResult {
    let workload = ctx.workload();
    let reference = workload.reference()?;
    let settings = &ctx.settings().workload;
    let slo = workload.slo();

    let on = workload.replay(settings.rate, settings.salt, Some(reference))?;
    let mut summary = WorkloadSummary {
        trace: reference.trace.clone(),
        slo,
        on: on.summary.clone(),
        off: Some(workload.baseline(reference)),
        sweep: Vec::new(),
        max_sustained_rate_per_s: None,
    };

    if let Some(factors) = &settings.sweep {
        ctx.not_checked(
            "reference tokens of the sweep's replays",
            "each sweep replay uses a token salt of its own, so it finds no blocks of another; the reference phase replays the trace at the settings' salt and rate only",
        );
        for (i, factor) in factors.iter().enumerate() {
            let salt = settings.salt + SWEEP_SALT_OFFSET + i as u64;
            let point = workload.replay(f64::from(*factor), salt, None)?;
            if point.summary.failed > 0 {
                ctx.record(
                    &format!("sweep-x{factor}-first-failure.txt"),
                    &point.first_bad,
                );
            }
            summary.sweep.push(point.summary.sweep_point(&slo));
        }
        summary.max_sustained_rate_per_s = max_sustained_rate(&summary.sweep);
    }
    let reconciled = tiers_reconcile(&on.readings);
    if let Err(v) = &reconciled {
        summary.on.reconciliation = vec![v.detail.clone()];
    }
    workload.report(&summary, on.records);

    ctx.check(
        "replay.json",
        &summary.on,
        replay_answered(Workload::answered(&on.summary), on.first_bad.as_deref()),
    )?;
    ctx.check("tiers.json", &on.readings, reconciled)
}
