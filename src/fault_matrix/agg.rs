//! The fault matrix of the default stack (`cargo test --test fault_matrix`):
//! one row per fault, in the order they run (a row finds the stack the
//! rows before it left, restored). docs/fault-matrix.md is the same table
//! in prose.

use std::time::Duration;

use serde_json::json;

use crate::client::{ClientError, Completion};
use crate::suite::{caught, CaseCtx, CaseError, CaseResult, EngineFault, Fault, FaultRow, Workers};

use crate::cases::{
    tc01_generation_correctness as tc01, tc02_local_dram_flow as tc02,
    tc03_hinted_peer_transfer as tc03, tc04_guard_takeover as tc04,
    tc04_worker_killed_under_load as tc04_load, tc05_performance_arms as tc05,
    tc06_guard_recovery_timing as tc06,
};

const A: Workers = Workers::Slots(&["A"]);
const B: Workers = Workers::Slots(&["B"]);
const A_AND_B: Workers = Workers::Slots(&["A", "B"]);

/// The rows whose fault comes from outside the engine (a kill, a stop, a
/// launch setting), which the vLLM lane runs too. The others turn on the
/// CPU engine's fault switches.
pub const ENGINE_NEUTRAL: [&str; 3] = [
    "dead_router_is_caught",
    "guard_that_never_promotes_is_caught",
    "replacement_with_another_compatibility_digest_is_caught",
];

pub static ROWS: &[FaultRow] = &[
    FaultRow {
        case: tc01::CASE,
        name: "wrong_token_is_caught",
        fault: Fault::Arranged(wrong_token),
        claim: "token 2 of 16 differs",
    },
    FaultRow {
        case: tc01::CASE,
        name: "dead_router_is_caught",
        fault: Fault::KillFrontend,
        claim: "no response",
    },
    // Worker B's KVCR progress loop dies (KVCR then re-raises its failure
    // on every poll): B exits with its tier, the suite's crash check names
    // the crash and its cause, and the restore step replaces B before the
    // next row.
    FaultRow {
        case: tc01::CASE,
        name: "worker_whose_kvcr_fails_is_reported_and_replaced",
        fault: Fault::Engine(B, EngineFault::KvcrProgressFails),
        claim: "worker-B exited on its own (exit status: 5): RuntimeError: fault kvcr_progress_fails: KVCR progress loop failed",
    },
    // Both workers answer a repeat with `cached_tokens` of one block though
    // they reused the whole prompt: `> 0` passed it; the prompt's full
    // blocks do not.
    FaultRow {
        case: tc01::CASE,
        name: "repeat_that_reports_a_short_cached_prefix_is_caught",
        fault: Fault::Engine(A_AND_B, EngineFault::CachedTokensFirstBlock),
        claim: "repeated: cached_tokens Some(16), expected 64 (4 full blocks × 16, what the engine caches of the prompt)",
    },
    FaultRow {
        case: tc01::CASE,
        name: "worker_that_never_registers_fails_startup",
        fault: Fault::Arranged(never_registers),
        claim: "to register",
    },
    FaultRow {
        case: tc01::CASE,
        name: "worker_that_dies_during_startup_fails_fast",
        fault: Fault::Arranged(dies_during_startup),
        claim: "exited during startup",
    },
    FaultRow {
        case: tc02::CASE,
        name: "corrupted_local_delivery_is_caught",
        fault: Fault::Engine(A, EngineFault::CorruptDeliveredPages),
        claim: "reference tokens: token ",
    },
    FaultRow {
        case: tc02::CASE,
        name: "underreported_local_blocks_are_caught",
        fault: Fault::Engine(A, EngineFault::UnderreportBlocks),
        claim: "host-tier (DRAM) hit: 3 blocks loaded from host memory",
    },
    // The right blocks move and KVCR counts them right, but the answer's
    // `cached_tokens` says one block: the hit's own clause must catch it.
    FaultRow {
        case: tc02::CASE,
        name: "dram_hit_reporting_short_cached_tokens_is_caught",
        fault: Fault::Engine(A, EngineFault::CachedTokensFirstBlock),
        claim: "host-tier (DRAM) hit: cached_tokens Some(16) is not a block-aligned count ≥ 64 (4 blocks × 16)",
    },
    // The right blocks move, but A's tiering read bytes of the KVCR tier
    // say one page more than KVCR delivered.
    FaultRow {
        case: tc02::CASE,
        name: "dram_hit_misreporting_read_bytes_is_caught",
        fault: Fault::Engine(A, EngineFault::WrongTransferBytes),
        claim: "host-tier (DRAM) hit: KVCR read bytes",
    },
    // An engine that does not export `cpu_engine_computed_blocks`: TC-02's
    // "0 blocks recomputed" must not pass on silence.
    FaultRow {
        case: tc02::CASE,
        name: "unexported_computed_blocks_are_not_zero",
        fault: Fault::Engine(A, EngineFault::DropSeries("cpu_engine_computed_blocks")),
        claim: "computed_blocks not reported by worker A",
    },
    // No KVCR operation histogram at all: "no remote transfer" must not pass
    // on silence (the whole family is gone, so even the series created on
    // first event cannot read as 0).
    FaultRow {
        case: tc02::CASE,
        name: "unexported_kvcr_operations_are_not_zero",
        fault: Fault::Engine(A, EngineFault::DropSeries("vllm:kvcr_duration_seconds")),
        claim: "op_count{scope=remote_deliver,result=success} not reported by worker A",
    },
    FaultRow {
        case: tc02::CASE,
        name: "device_cache_that_never_evicts_is_caught",
        fault: Fault::Arranged(never_evicts),
        claim: "eviction not proven: worker A evicted",
    },
    FaultRow {
        case: tc03::CASE,
        name: "corrupted_transfer_is_caught",
        fault: Fault::Engine(B, EngineFault::CorruptDeliveredPages),
        claim: "reference tokens: token ",
    },
    FaultRow {
        case: tc03::CASE,
        name: "underreported_blocks_are_caught",
        fault: Fault::Engine(B, EngineFault::UnderreportBlocks),
        claim: "remote_deliver blocks 3 ≠ source_write blocks 4",
    },
    FaultRow {
        case: tc03::CASE,
        name: "wrong_transfer_bytes_are_caught",
        fault: Fault::Engine(B, EngineFault::WrongTransferBytes),
        claim: "peer transfer reconciles: target read bytes",
    },
    // B's `KV Transfer metrics` line reports one block more than its
    // `/metrics`: the two telemetry sources must agree.
    FaultRow {
        case: tc03::CASE,
        name: "interval_log_disagreeing_with_metrics_is_caught",
        fault: Fault::Engine(B, EngineFault::SkewIntervalLog),
        claim: "interval log agrees with /metrics: worker B logged",
    },
    // Worker B alive but no longer listed by the router: stopped until its
    // discovery entry was deleted as stale, then continued. The case must
    // name the dropout (not only its HTTP 400s), and the restore replace B.
    FaultRow {
        case: tc03::CASE,
        name: "worker_dropped_out_of_discovery_is_named",
        fault: Fault::DropOutOfDiscovery("B"),
        claim: "dropped out of the router's discovery during the case: worker B (pid",
    },
    // The machine's wall clock stepped 15 s forward (what a time sync after a
    // paused VM does): every process of the stack then deletes the others'
    // discovery entries as stale. The case must name the step, and the
    // restore replace every worker that dropped out (root only).
    FaultRow {
        case: tc03::CASE,
        name: "wall_clock_step_is_named",
        fault: Fault::WallClockStep(15),
        claim: "during the case the machine's wall clock stepped +15.0 s",
    },
    // The interval-log check asked about a counter no transfer moved (B's
    // failed remote delivers): 0 = 0, or absent on both sides, used to pass.
    FaultRow {
        case: tc04::CASE,
        name: "missing_guard_deposit_is_caught",
        fault: Fault::Engine(A, EngineFault::NoGuardDeposit),
        claim: "waiting for worker A to deposit the 4 blocks of",
    },
    FaultRow {
        case: tc04::CASE,
        name: "guard_that_never_promotes_is_caught",
        fault: Fault::StopGuard,
        claim:
            "Guard promotion after SIGKILL: no `guard_promoted` event for guard 0 in the Guard log",
    },
    // B drops the router's hints: the Guard promotes, but no takeover
    // attempt is ever read from A's endpoint (each is computed on B).
    FaultRow {
        case: tc04::CASE,
        name: "target_that_ignores_the_hint_gets_no_takeover",
        fault: Fault::Engine(B, EngineFault::IgnoreKvHints),
        claim: "takeover through the Guard: none of ",
    },
    FaultRow {
        case: tc04::CASE,
        name: "replacement_that_does_not_reclaim_is_caught",
        fault: Fault::Replacement(EngineFault::NoReclaim),
        claim: "replacement A' did not reclaim the pool: host-tier (DRAM) hit: 0 blocks loaded",
    },
    // The survivor B answers wrongly while A is killed under load: the
    // budget never allows a wrong token, whatever the failure allowance.
    FaultRow {
        case: tc04_load::CASE,
        name: "wrong_token_under_load_is_caught",
        fault: Fault::Engine(B, EngineFault::WrongTokenAfter(3)),
        claim: "load within its budget: ",
    },
    // The whole load pinned to B (the stand-in for a router that sends A
    // nothing): A is killed idle, which proves nothing about a kill under
    // load, so the case must say A carried nothing.
    FaultRow {
        case: tc04_load::CASE,
        name: "kill_of_a_worker_that_carried_no_load_is_caught",
        fault: Fault::Arranged(load_all_on_b),
        claim: "load within its budget: worker A served no request before the fault and none was in flight on it",
    },
    // The survivor B cuts every stream after 3 tokens while A is killed
    // under load: after the kill nothing answers correctly, and the failures
    // exceed the error budget.
    FaultRow {
        case: tc04_load::CASE,
        name: "survivor_that_fails_every_request_is_caught",
        fault: Fault::Arranged(survivor_fails_every_request),
        claim: "no request answered correctly after the fault: the stack stopped serving",
    },
    FaultRow {
        case: tc05::COLD,
        name: "wrong_token_mid_stream_is_caught",
        fault: Fault::Engine(A, EngineFault::WrongTokenAfter(5)),
        claim: "token 5 of 16 differs",
    },
    // A's counters say the first block of every fresh prompt came from the
    // device cache, though it was computed: the cold arm must see reuse.
    FaultRow {
        case: tc05::COLD,
        name: "cold_prompt_reported_as_reused_is_caught",
        fault: Fault::Engine(A, EngineFault::PhantomDeviceHit),
        claim: "cold prefill: 3 blocks computed, expected all 4 full blocks of the prompt; a fresh prompt reused cached blocks: device hit tokens 16",
    },
    // A logs no first-token stamp: TTFT accuracy has nothing to compare the
    // client's first chunk with, which must fail, not read as 0.
    FaultRow {
        case: tc05::COLD,
        name: "missing_first_token_stamp_is_caught",
        fault: Fault::Engine(A, EngineFault::NoFirstTokenStamp),
        claim: "the engine's log has no first-token stamp for it",
    },
    FaultRow {
        case: tc05::COLD,
        name: "stalled_stream_is_caught",
        fault: Fault::Engine(A, EngineFault::StallStreamAfter(2)),
        claim: "(streaming): no chunk for",
    },
    // A's device prefix cache finds nothing: the local-hit arm's prefix
    // comes from a lower tier, which is not a device-cache hit.
    FaultRow {
        case: tc05::LOCAL_HIT,
        name: "local_hit_without_device_hits_is_caught",
        fault: Fault::Engine(A, EngineFault::NoDeviceHits),
        claim: "device-cache (local) hit: 0 prompt tokens from the device cache < 64 shared",
    },
    FaultRow {
        case: tc05::DRAM_HIT,
        name: "underreported_dram_hit_is_caught",
        fault: Fault::Engine(A, EngineFault::UnderreportBlocks),
        claim: "host-tier (DRAM) hit: 3 blocks loaded from host memory",
    },
    FaultRow {
        case: tc05::REMOTE_HIT,
        name: "underreported_remote_hit_is_caught",
        fault: Fault::Engine(B, EngineFault::UnderreportBlocks),
        claim: "peer transfer reconciles: remote_deliver blocks 3 ≠ source_write blocks 4",
    },
    FaultRow {
        case: tc05::SWEEP,
        name: "wrong_token_under_concurrency_is_caught",
        fault: Fault::Engine(A_AND_B, EngineFault::WrongTokenAfter(4)),
        claim: "token 4 of 16 differs",
    },
    FaultRow {
        case: tc05::COLD,
        name: "stream_cut_in_the_middle_is_caught",
        fault: Fault::Engine(A, EngineFault::CutStreamAfter(3)),
        claim: "sent an error in the stream after 3 tokens",
    },
    FaultRow {
        case: tc06::CASE,
        name: "guard_that_never_serves_gives_no_t1",
        fault: Fault::StopGuard,
        claim: "no t1: ",
    },
    // B corrupts the pages it is delivered, and after A's kill only the
    // Guard delivers to it: the recovery serves wrong tokens, which TC-06
    // must stop at (not pass over as a not-yet-served attempt).
    FaultRow {
        case: tc06::CASE,
        name: "wrong_tokens_during_recovery_are_caught",
        fault: Fault::Engine(B, EngineFault::CorruptDeliveredPages),
        claim: "returned wrong tokens: reference tokens: token ",
    },
    FaultRow {
        case: tc06::CASE,
        name: "replacement_that_does_not_reclaim_gives_no_t2_hit",
        fault: Fault::Replacement(EngineFault::NoReclaim),
        claim: "t2: replacement A' did not reclaim the pool: host-tier (DRAM) hit: 0 blocks loaded",
    },
    FaultRow {
        case: tc01::CASE,
        name: "bad_requests_get_clear_errors_and_workers_stay_up",
        fault: Fault::Arranged(bad_requests),
        claim: "HTTP 4xx for the prompt, 404 for the model",
    },
    // A' presents a KVCR compatibility digest that A's Guard was not started
    // with: the Guard must refuse the handback, so A' cannot reclaim the pool.
    FaultRow {
        case: tc04::CASE,
        name: "replacement_with_another_compatibility_digest_is_caught",
        fault: Fault::ReplacementDigest,
        claim: "KVCRServiceError: KVCR compatibility digest does not match the service",
    },
];

/// A wrong token is caught, and the failure is traceable: it names the
/// request's `x-request-id`, and the worker's own log line of that request
/// (its prefill line, under Dynamo's id for it) is found from it.
fn wrong_token(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let _fault = ctx
        .faults()
        .engine(&["A", "B"], EngineFault::WrongTokenAfter(2))?;
    let failure = caught(ctx, row.case.run, row.claim)?;
    expect_traced(ctx, &failure)
}

/// `failure` names an `x-request-id` whose log lines include the worker's
/// prefill line.
fn expect_traced(ctx: &CaseCtx, failure: &CaseError) -> CaseResult {
    let Some(id) = failure
        .message
        .split("x-request-id ")
        .nth(1)
        .map(|rest| rest.chars().take(36).collect::<String>())
    else {
        return Err(CaseError::new(format!(
            "the failure names no x-request-id: {failure}"
        )));
    };
    let lines = ctx.observe().log_lines_of(&id);
    let path = ctx.record(
        "traced.json",
        &json!({"request_id": id, "log_lines": lines}),
    );
    if !lines.iter().any(|l| {
        l.starts_with("worker-") && l.contains("cpu_engine.engine") && l.contains("full blocks")
    }) {
        return Err(CaseError::new(format!(
            "x-request-id {id} leads to no worker prefill line ({} log lines)",
            lines.len()
        ))
        .with_evidence(path));
    }
    Ok(())
}

/// TC-04 under load with B cutting every stream: both the error budget and
/// the "served after the fault" clause must be named.
fn survivor_fails_every_request(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let _fault = ctx
        .faults()
        .engine(&["B"], EngineFault::CutStreamAfter(3))?;
    let failure = caught(ctx, row.case.run, row.claim)?;
    if !failure
        .message
        .contains("requests failed, more than the budget of")
    {
        return Err(CaseError::new(format!(
            "caught, but the error budget was not named: {failure}"
        )));
    }
    Ok(())
}

/// TC-04 under load with every request pinned to B: the kill of A must be
/// reported as a kill of a worker that carried nothing.
fn load_all_on_b(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    caught(ctx, on_b, row.claim).map(drop)
}

fn on_b(ctx: &CaseCtx) -> CaseResult {
    tc04_load::run_routed(ctx, tc04_load::Routing::PinnedTo("B"))
}

/// A second stack whose workers never register: provisioning must fail,
/// waiting for the registration, at its (short) startup deadline.
fn never_registers(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let (result, took) = ctx.faults().provision_faulty(
        "never-register",
        &[EngineFault::NeverRegister.to_string()],
        Duration::from_secs(8),
    );
    match result {
        Ok(()) => Err(CaseError::new(
            "a stack whose workers never register came up",
        )),
        Err(e) if e.to_string().contains(row.claim) => {
            ctx.record(
                "caught.json",
                &json!({"message": e.to_string(), "seconds": took.as_secs_f64()}),
            );
            Ok(())
        }
        Err(e) => Err(CaseError::new(format!(
            "provisioning failed, but not waiting for registration: {e}"
        ))),
    }
}

/// A second stack whose workers exit during startup: provisioning must
/// abort when it sees the exit, quoting the worker's log, not wait for its
/// deadline.
fn dies_during_startup(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    // The user's startup budget: an abort well inside it is the claim.
    let timeout = ctx.settings.startup_timeout;
    let (result, took) = ctx.faults().provision_faulty(
        "die-during-startup",
        &[EngineFault::DieDuringStartup.to_string()],
        timeout,
    );
    ctx.measure("failed_after_s", took.as_secs_f64());
    match result {
        Ok(()) => Err(CaseError::new(
            "a stack whose workers die during startup came up",
        )),
        // An abort, not the deadline: the harness saw the exit and quoted the log.
        Err(e)
            if e.to_string().contains(row.claim)
                && e.to_string().contains("fault die_during_startup") =>
        {
            ctx.record(
                "caught.json",
                &json!({"message": e.to_string(), "seconds": took.as_secs_f64()}),
            );
            Ok(())
        }
        Err(e) => Err(CaseError::new(format!(
            "provisioning failed, but not by noticing the dead worker: {e}"
        ))),
    }
}

/// A device cache that stops evicting (new blocks do not stay): the fillers
/// push too little out, so TC-02's DRAM hit is not proven to come from
/// below. (A few evictions may still happen while blocks left by earlier
/// rows fill the cache, so the count is not matched, only that it is short.)
fn never_evicts(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let _fault = ctx.faults().engine(&["A"], EngineFault::NoDeviceEviction)?;
    let failure = caught(ctx, row.case.run, row.claim)?;
    if !failure
        .message
        .contains("(counted) after 32 filler prompts, fewer than its device cache holds (64)")
    {
        return Err(CaseError::new(format!(
            "caught, but not with the documented numbers: {failure}"
        )));
    }
    Ok(())
}

/// Bad input through the real router gets a clear error response, and every
/// worker keeps serving correct tokens afterwards.
fn bad_requests(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let a = ctx.worker("A")?;
    let status_of = |request: Completion| match crate::rt::block_on(ctx.client.complete(&request)) {
        Err(ClientError::Status { status, body, .. }) => Ok((status, body)),
        other => Err(CaseError::new(format!(
            "expected an error status, got {other:?}"
        ))),
    };
    let too_long: Vec<u32> = (0..4096).map(|i| 3 + i % 400).collect();
    let (long_status, long_body) =
        status_of(Completion::new(ctx.stack.engine.model(), too_long).pin_worker(a.instance_id()))?;
    let (model_status, model_body) = status_of(Completion::new("no-such-model", "hello"))?;
    ctx.record(
        "bad-requests.json",
        &json!({"over_long_prompt": [long_status, long_body], "unknown_model": [model_status, model_body]}),
    );
    if !(400..500).contains(&long_status) || model_status != 404 {
        return Err(CaseError::new(format!(
            "expected {}: over-long prompt got HTTP {long_status}, unknown model got HTTP {model_status}",
            row.claim
        )));
    }
    // The workers are still up and correct.
    for worker in ctx.stack.workers() {
        let family = ctx.family()?;
        let answer = ctx.complete_on(&worker, family.variant(0))?;
        ctx.expect_reference(family.variant(0), &answer.tokens)?;
    }
    Ok(())
}
