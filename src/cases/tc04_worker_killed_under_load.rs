//! TC-04 under load (Dynamo's fault-tolerance pattern): a bounded streaming
//! load runs through the router (`load_clients` clients, each sending
//! `load_requests_per_client` fresh prompts one after another); after the
//! first wave, worker A is SIGKILLed (verified). Every request of the window
//! is recorded: sent, done, outcome (ok, failed, wrong tokens), serving
//! worker. Budget: no wrong tokens ever, at most `load_max_failed_requests`
//! failed, correct answers after the kill, and A carried load (it served
//! requests before the kill, or was serving one at it: a kill of a worker
//! the router sent nothing proves nothing). The case then waits for the
//! Guard to promote A's group, so the suite's replacement can take it back.

use crate::engine::Need;
use crate::suite::CaseError;

use crate::client::WorkerIdentity;
use crate::prompts::Prompt;
use crate::suite::{Case, CaseCtx, CaseResult};
use crate::verdict::load::{expect_within_budget, FaultedWorkerLoad, LoadOutcome, LoadTally};

pub const CASE: Case = Case {
    id: "TC-04",
    name: "worker_killed_under_load",
    destructive: true,
    needs: &[Need::Guard],
    optional: &[],
    run,
};

pub fn run(ctx: &CaseCtx) -> CaseResult {
    run_routed(ctx, Routing::Router)
}

/// Where the load's requests go.
#[derive(Debug, Clone, Copy)]
pub enum Routing {
    /// Through the router (the case).
    Router,
    /// All pinned to one worker slot: the fault matrix's stand-in for a
    /// router that sends A nothing.
    PinnedTo(&'static str),
}

/// The case, with the load routed as `routing` says.
pub fn run_routed(ctx: &CaseCtx, routing: Routing) -> CaseResult {
    let clients = ctx.settings().load_clients as usize;
    let per_client = ctx.settings().load_requests_per_client as usize;
    let max_failed = ctx.settings().load_max_failed_requests as usize;
    let families = ctx.families(clients * per_client)?;
    let prompts: Vec<Vec<Prompt>> = families
        .chunks(per_client)
        .map(|c| c.iter().map(|f| f.variant(0).clone()).collect())
        .collect();

    let a = ctx.worker("A")?;
    let pin = match routing {
        Routing::Router => None,
        Routing::PinnedTo(slot) => Some(ctx.worker(slot)?),
    };
    let mut guard_events = ctx.guard().of(&a)?.follow()?;
    // The kill lands once the first wave is done, with the next one in flight.
    let load = ctx
        .load()
        .with_fault(prompts, pin.as_deref(), clients, || ctx.faults().kill(&a))?;
    // A replacement can claim A's Guard group only once the Guard holds it.
    let promotion = guard_events.await_promotion(a.slot.guard_index)?;
    ctx.measure("promotion_ms", promotion.as_ref().map(|p| p.promotion_ms));
    if promotion.is_none() {
        return Err(CaseError::new(format!(
            "no `guard_promoted` event for guard {} after the kill under load: the stack cannot be restored",
            a.slot.guard_index
        )));
    }

    let tally = LoadTally::of(load.requests.iter().map(|r| r.outcome));
    let ok_after_kill = load
        .requests
        .iter()
        .filter(|r| r.sent_ms >= load.fault_at_ms && r.outcome == LoadOutcome::Ok)
        .count();
    // A request in flight on A at the kill fails and its response names no
    // worker: the router's log says whose stream was cut.
    let a_instance = a.instance_id();
    let carried = FaultedWorkerLoad::of(
        a.name(),
        load.fault_at_ms,
        load.requests.iter().map(|r| {
            let identity = WorkerIdentity {
                decode: r.worker_id,
                prefill: r.prefill_worker_id,
                ..Default::default()
            };
            let on_a = a.served(&identity) || r.cut_on_worker == Some(a_instance);
            (r.sent_ms, r.done_ms, on_a)
        }),
    );
    ctx.measure(
        "load",
        serde_json::json!({
            "clients": clients, "requests_per_client": per_client,
            "max_failed": max_failed, "kill_at_ms": load.fault_at_ms,
            "tally": tally, "ok_after_kill": ok_after_kill, "killed_worker_carried": carried,
        }),
    );
    ctx.load().report(&load);
    ctx.check(
        "load.json",
        &load,
        expect_within_budget(&tally, ok_after_kill, max_failed, &carried),
    )
}
