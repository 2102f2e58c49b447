//! What the KVCR benches' count verdicts share (the deliver and pull
//! benches of TC-05, TC-12's G3 read bench): the worker ran every op asked
//! for without a failure, and KVCR's own count of the bench's scope rose by
//! exactly that many, all successful. The figures rest on KVCR's histogram
//! of that scope, so a count that did not move, or moved by another number,
//! leaves them timing something else; a failed op times a different path.

use super::Checks;

/// How one bench's messages name its ops and KVCR's count of them.
pub(super) struct OpsNamed {
    /// The worker's ops, plural: "delivers".
    pub ran: &'static str,
    /// The same, as KVCR counted them: "bench delivers".
    pub counted: &'static str,
    /// KVCR's scope that times each op: "local_deliver".
    pub scope: &'static str,
    /// Why a count other than the ops matters, where it is not plain
    /// (added to the count's messages).
    pub why_exact: Option<&'static str>,
}

/// A bench's ops, as the worker that ran them and its KVCR counted them.
pub(super) struct OpsCounted<'a> {
    pub worker: &'a str,
    pub asked: u64,
    pub ran: u64,
    pub failed: u64,
    pub first_failure: Option<&'a str>,
    /// KVCR's successful ops of the scope, and the others as (result, count).
    pub success: u64,
    pub unsuccessful: &'a [(String, u64)],
}

/// Adds to `checks` that the worker ran every op asked for without a
/// failure, and that KVCR's success count of the scope rose by exactly
/// that many with no unsuccessful op.
pub(super) fn every_op_counted(checks: &mut Checks, ops: &OpsNamed, c: &OpsCounted) {
    let unsuccessful: Vec<String> = c
        .unsuccessful
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(result, n)| format!("{n} {result}"))
        .collect();
    let why = |lead: &str, close: &str| {
        ops.why_exact
            .map(|why| format!("{lead}{why}{close}"))
            .unwrap_or_default()
    };
    checks
        .check(c.ran == c.asked, || {
            format!(
                "worker {} ran {} {}, {} were asked for",
                c.worker, c.ran, ops.ran, c.asked
            )
        })
        .check(c.failed == 0, || {
            format!(
                "worker {} saw {} of {} {} fail (first: {})",
                c.worker,
                c.failed,
                c.ran,
                ops.ran,
                c.first_failure.unwrap_or("not described")
            )
        })
        .check(c.success != 0, || {
            format!(
                "KVCR's {} success count on worker {} did not move over {} {} (its kvcr_duration_seconds histogram is the figures' evidence{})",
                ops.scope, c.worker, c.asked, ops.counted, why("; ", "")
            )
        })
        .check(c.success == 0 || c.success == c.asked, || {
            format!(
                "KVCR's {} success count on worker {} rose by {}, expected exactly the {} {}{}",
                ops.scope,
                c.worker,
                c.success,
                c.asked,
                ops.counted,
                why(" (", ")")
            )
        })
        .check(unsuccessful.is_empty(), || {
            format!(
                "KVCR counted {} operations that did not succeed on worker {}: {}",
                ops.scope,
                c.worker,
                unsuccessful.join(", ")
            )
        });
}
