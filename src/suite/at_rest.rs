//! The at-rest audit: after each case that leaves the stack whole (not
//! destructive, nothing crashed), on an engine whose workers report KVCR's
//! state gauges live ([`crate::engine::Engine::reports_kvcr_state`]), every
//! KVCR worker of the stack must come to rest
//! ([`crate::verdict::at_rest`]). The audit waits for each worker's KVCR to
//! finish the work the case started (at most [`SETTLE_WITHIN`]), records
//! every worker's gauges as `at-rest.json`, and fails a case that passed
//! with what a worker holds back. A case that failed keeps its own failure.

use std::cell::RefCell;
use std::time::Duration;

use serde::Serialize;

use crate::stack::Worker;
use crate::telemetry::{Gauge, Resource, Snapshot};
use crate::verdict::at_rest::{expect_at_rest, Allowance, KvcrState, Layout, TierSlots};
use crate::wait;

use super::claim::Claim;
use super::{CaseCtx, CaseError, CaseResult};

/// How long a worker's KVCR may take to finish the case's work: past
/// KVCR's default abandon timeout (5 s), after which it gives up on any
/// operation.
const SETTLE_WITHIN: Duration = Duration::from_secs(10);

/// What the case declared it may leave behind.
#[derive(Default)]
pub(super) struct AtRest {
    allowed: RefCell<Allowance>,
}

impl AtRest {
    /// Allocated pool slots may stay unevictable after this case, `why`.
    pub fn allow_unevictable(&self, why: impl Into<String>) {
        self.allowed.borrow_mut().unevictable = Some(why.into());
    }
}

/// One worker's state at the audit.
#[derive(Serialize)]
struct Seen {
    worker: String,
    state: KvcrState,
    /// How long it took to settle, or what was still moving at the deadline.
    settled_ms: Option<u128>,
}

/// `result`, failed by the first worker that holds something back once
/// KVCR has finished the case's work (see the module's doc).
pub(super) fn judge(ctx: &CaseCtx, result: CaseResult) -> CaseResult {
    if result.is_err() || !ctx.engine().reports_kvcr_state() {
        return result;
    }
    let allowed = ctx.at_rest.allowed.borrow().clone();
    let layout = Layout {
        pages_per_block: ctx.engine().geometry().pages_per_block(),
        records_only_own_tiers: ctx.engine().deposits_computed_blocks(),
    };
    let workers: Vec<_> = ctx
        .stack
        .workers()
        .into_iter()
        .filter(|w| w.ready.kvcr)
        .collect();
    let mut seen = Vec::new();
    for worker in &workers {
        seen.push(settle(ctx, worker)?);
    }
    let verdicts: Vec<_> = seen
        .iter()
        .map(|s| expect_at_rest(&s.worker, &s.state, &layout, &allowed))
        .collect();
    let path = ctx.record(
        "at-rest.json",
        &serde_json::json!({"workers": &seen, "layout": &layout, "allowed": &allowed,
                            "settle_within_ms": SETTLE_WITHIN.as_millis()}),
    );
    match verdicts.into_iter().find_map(Result::err) {
        None => Ok(()),
        Some(v) => Err(CaseError::from(v).with_evidence(path)),
    }
}

/// `worker`'s state once its KVCR has settled, or the last seen at
/// [`SETTLE_WITHIN`] (the verdict then names what was still moving).
fn settle(ctx: &CaseCtx, worker: &Worker) -> Result<Seen, CaseError> {
    let settled = wait::settle(
        format!("worker {}'s KVCR to finish the case's work", worker.name()),
        SETTLE_WITHIN,
        Duration::from_millis(50),
        || ctx.snapshot(worker).and_then(|s| kvcr_state(&s, worker)),
        KvcrState::unsettled,
    )?;
    Ok(Seen {
        worker: worker.name().to_string(),
        state: settled.state,
        settled_ms: settled.after.map(|d| d.as_millis()),
    })
}

/// `worker`'s KVCR state gauges in `snapshot`. The pool's and the
/// operations' gauges must be reported; the disk tier's are read where the
/// worker reports a disk tier.
fn kvcr_state(snapshot: &Snapshot, worker: &Worker) -> Result<KvcrState, CaseError> {
    let gauge = |r: Resource| {
        let absent = format!(
            "worker {}'s KVCR reports no kvcr_state{{resource={r}}}",
            worker.name()
        );
        snapshot
            .gauge(&Gauge::State(r))
            .map(|v| v as u64)
            .ok_or_else(|| {
                let detail = absent;
                CaseError::claimed(Claim::NotReported, detail.clone(), detail)
            })
    };
    let disk = match snapshot.gauge(&Gauge::State(Resource::G3TotalSlots)) {
        None => None,
        Some(_) => Some(TierSlots {
            total: gauge(Resource::G3TotalSlots)?,
            free: gauge(Resource::G3FreeSlots)?,
            allocated: gauge(Resource::G3AllocatedSlots)?,
            evictable: gauge(Resource::G3EvictableSlots)?,
        }),
    };
    Ok(KvcrState {
        pool: TierSlots {
            total: gauge(Resource::LocalG2TotalSlots)?,
            free: gauge(Resource::LocalG2FreeSlots)?,
            allocated: gauge(Resource::LocalG2AllocatedSlots)?,
            evictable: gauge(Resource::LocalG2EvictableSlots)?,
        },
        g3_pending_stores: match disk {
            Some(_) => gauge(Resource::G3PendingStores)?,
            None => 0,
        },
        disk,
        in_flight_ops: gauge(Resource::InFlightOps)?,
        completed: gauge(Resource::Completed)?,
        framework_pins: gauge(Resource::FrameworkPins)?,
        pinned_keys: gauge(Resource::PinnedKeys)?,
        block_records: gauge(Resource::BlockRecords)?,
    })
}
