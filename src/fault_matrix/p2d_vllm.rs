//! The fault matrix of the P→D path on real vLLM (`cargo test --test
//! fault_matrix_vllm_2p1d -- --ignored`): vLLM has no fault switches, so
//! each row's fault comes from outside the engine (signals, timed to the
//! request), and targets the P→D check of TC-01, where the decode pulls
//! the prompt from its prefill with vLLM's NixlConnector.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use super::worker_log;
use crate::cases::tc01_generation_correctness as tc01;
use crate::stack::{KillReport, Worker};
use crate::suite::{
    expect_red, CaseCtx, CaseError, CaseResult, Expect, Fault, FaultRow, RowDoc, ThreadFaults,
};
use crate::telemetry::{self, Counter, Snapshot};
use crate::verdict::disagg;
use crate::wait::{self, Poll};

pub static ROWS: &[FaultRow] = &[
    // The prefill that TC-01 pins its first prompt to answers, and is
    // SIGKILLed while the decode, stopped since the request reached that
    // prefill, has not pulled yet; the decode then continues. Its NIXL
    // read of the dead prefill fails and it recomputes the prompt (the
    // plan's `kv_load_failure_policy`): the tokens stay right, so only the
    // P→D check can catch it.
    FaultRow {
        case: tc01::CASE,
        name: "prefill_killed_before_the_nixl_pull_is_caught",
        fault: Fault::Arranged(prefill_killed_before_the_pull),
        needs: &[],
        expect: Expect::clause(disagg::CLAIM, "did not pull the prefill's pages"),
        doc: RowDoc {
            fault: "when TC-01's first P→D request reaches prefill A (Dynamo's `request received` in A's log), decode C's process group is SIGSTOPped (state `T` verified) before A answered (verified: A had generated no token yet); once A answered (its `vllm:generation_tokens` rose), A is SIGKILLed (gone verified) and C continued. C's NIXL read of the dead A fails and C recomputes the prompt (the plan's `kv_load_failure_policy=recompute`), so the tokens stay right; the timeline is in `fault-timeline.json`",
            caught_by: "TC-01 (P→D check)",
            message: "`P→D transfer reconciles: through prefill A: the decode shows no NIXL read (vllm:nixl_bytes_transferred_count): it did not pull the prefill's pages; decode NIXL failed transfers 1 (vllm:nixl_num_failed_transfers; must be 0); prefill A's side cannot be read: telemetry of worker A: scraping http://…/metrics failed within 5s: …`",
        },
    },
];

/// Tokens `prefill` generated since `before` (a prefill generates one per
/// request, when it answers), scraped now.
fn generated_since(prefill: &Worker, before: &Snapshot) -> Result<u64, String> {
    let now = crate::rt::block_on(telemetry::scrape(&prefill.metrics_url()))
        .map_err(|e| format!("telemetry of worker {}: {e}", prefill.name()))?;
    let delta = now
        .since(before)
        .map_err(|e| format!("telemetry of worker {}: {e}", prefill.name()))?;
    delta
        .required_count(&Counter::GenerationTokens)
        .map_err(|e| e.to_string())
}

/// How the fault went: when each step happened, from the request's arrival
/// at the prefill.
#[derive(serde::Serialize)]
struct Timeline {
    prefill: String,
    decode: String,
    decode_stopped_ms: u128,
    prefill_answered_ms: u128,
    prefill_killed: KillReport,
    decode_continued_ms: u128,
}

/// What the thread timing the fault needs: the stack's faults, never the
/// case's context (which stays on the case's thread).
struct Arrangement<'a> {
    faults: ThreadFaults<'a>,
    prefill: &'a Worker,
    decode: &'a Worker,
    before: &'a Snapshot,
    log: &'a Path,
    from: u64,
    deadline: Duration,
    case_over: &'a AtomicBool,
}

impl Arrangement<'_> {
    fn not_over(&self) -> Result<(), String> {
        if self.case_over.load(Ordering::SeqCst) {
            Err("the case ended before".to_string())
        } else {
            Ok(())
        }
    }

    /// Stop the decode when the request reaches the prefill, kill the
    /// prefill once it answered, continue the decode.
    fn run(&self) -> Result<Timeline, String> {
        let (prefill, decode) = (self.prefill, self.decode);
        wait::until(
            format!(
                "a request to reach prefill {} ({})",
                prefill.name(),
                self.log.display()
            ),
            self.deadline,
            Duration::from_millis(2),
            || match self.not_over() {
                Err(e) => Poll::Abort(e),
                Ok(())
                    if worker_log::since(self.log, self.from)
                        .contains(worker_log::REQUEST_ARRIVED) =>
                {
                    Poll::Ready(())
                }
                Ok(()) => Poll::Pending("no request yet".into()),
            },
        )
        .map_err(|e| e.to_string())?;
        let arrived = std::time::Instant::now();
        let stopped = self
            .faults
            .stop_worker_process(decode)
            .map_err(|e| e.message)?;
        let decode_stopped_ms = arrived.elapsed().as_millis();
        // The decode must have been stopped before the prefill answered, or
        // it may have pulled already.
        let early = generated_since(prefill, self.before)?;
        if early > 0 {
            return Err(format!(
                "the prefill answered ({early} tokens generated) before the decode was stopped"
            ));
        }
        wait::until(
            format!("prefill {} to answer", prefill.name()),
            self.deadline,
            Duration::from_millis(10),
            || match self
                .not_over()
                .and_then(|()| generated_since(prefill, self.before))
            {
                Err(e) => Poll::Abort(e),
                Ok(0) => Poll::Pending("no token generated yet".into()),
                Ok(_) => Poll::Ready(()),
            },
        )
        .map_err(|e| e.to_string())?;
        let prefill_answered_ms = arrived.elapsed().as_millis();
        let prefill_killed = self.faults.kill(prefill).map_err(|e| e.message)?;
        drop(stopped);
        Ok(Timeline {
            prefill: prefill.name().to_string(),
            decode: decode.name().to_string(),
            decode_stopped_ms,
            prefill_answered_ms,
            prefill_killed,
            decode_continued_ms: arrived.elapsed().as_millis(),
        })
    }
}

/// TC-01 with its first P→D request arranged: when the request reaches
/// the prefill it is pinned to, the decode is stopped (SIGSTOP of its
/// process group, state `T` verified) before the prefill can have
/// answered (verified: the prefill had generated nothing yet); once the
/// prefill answered (its generation counter rose), it is SIGKILLed
/// (verified gone) and the decode continued. The suite's restore step
/// replaces the prefill after the row.
fn prefill_killed_before_the_pull(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let disagg = ctx.disagg();
    let decode = disagg
        .decode_worker()
        .ok_or_else(|| CaseError::new("this row needs a decode worker (--topology 2p1d)"))?;
    // TC-01 pins its first fresh prompt to the first prefill worker.
    let prefill = disagg
        .prefill_workers()
        .into_iter()
        .next()
        .ok_or_else(|| CaseError::new("this row needs prefill workers (--topology 2p1d)"))?;
    let before = ctx.snapshot(&prefill)?;
    let log = prefill.process.log_path().to_path_buf();
    let from = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let case_over = AtomicBool::new(false);
    let arrange = Arrangement {
        faults: ctx.faults().for_thread(),
        prefill: &prefill,
        decode: &decode,
        before: &before,
        log: &log,
        from,
        deadline: ctx.settings().request_timeout,
        case_over: &case_over,
    };
    std::thread::scope(|scope| {
        let fault = scope.spawn(|| arrange.run());
        let verdict = expect_red(ctx, row.case.run, &row.expect);
        case_over.store(true, Ordering::SeqCst);
        let timeline = fault
            .join()
            .map_err(|_| CaseError::new("the thread timing the fault panicked"))?
            .map_err(|e| CaseError::new(format!("fault not applied: {e}")))?;
        ctx.record(
            "fault-timeline.json",
            &json!({"timeline": timeline, "verdict": verdict.as_ref().err().map(|e| e.to_string())}),
        );
        verdict
    })
}
