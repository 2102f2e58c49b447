//! The rows of the fault matrix, one function each.

use std::time::Duration;

use serde_json::json;

use kvcr_e2e::client::{ClientError, Completion};
use kvcr_e2e::suite::{caught, expect_red, Case, CaseCtx, CaseError, CaseResult};

use crate::cases::{
    tc01_generation_correctness as tc01, tc02_local_dram_flow as tc02,
    tc03_hinted_peer_transfer as tc03, tc04_guard_takeover as tc04,
    tc04_worker_killed_under_load as tc04_load, tc05_performance_arms as tc05,
    tc06_guard_recovery_timing as tc06,
};

const fn row(id: &'static str, name: &'static str, run: fn(&CaseCtx) -> CaseResult) -> Case {
    Case::fault_row(id, name, run)
}

/// The rows whose fault comes from outside the engine (a kill, a stop, a
/// launch setting): they run on every engine. The others turn on the CPU
/// engine's fault switches.
#[allow(dead_code)] // read by fault_matrix_vllm, which includes this file
pub const ENGINE_NEUTRAL: [&str; 3] = [
    "dead_router_is_caught",
    "guard_that_never_promotes_is_caught",
    "replacement_with_another_compatibility_digest_is_caught",
];

pub fn all() -> Vec<Case> {
    vec![
        row("TC-01", "wrong_token_is_caught", wrong_token),
        row("TC-01", "dead_router_is_caught", dead_router),
        row(
            "TC-01",
            "worker_whose_kvcr_fails_is_reported_and_replaced",
            kvcr_fails,
        ),
        row(
            "TC-01",
            "worker_that_never_registers_fails_startup",
            never_registers,
        ),
        row(
            "TC-01",
            "worker_that_dies_during_startup_fails_fast",
            dies_during_startup,
        ),
        row(
            "TC-02",
            "corrupted_local_delivery_is_caught",
            corrupted_local_delivery,
        ),
        row(
            "TC-02",
            "underreported_local_blocks_are_caught",
            underreported_local_blocks,
        ),
        row(
            "TC-02",
            "unexported_computed_blocks_are_not_zero",
            unexported_computed_blocks,
        ),
        row(
            "TC-02",
            "unexported_kvcr_operations_are_not_zero",
            unexported_kvcr_operations,
        ),
        row(
            "TC-02",
            "device_cache_that_never_evicts_is_caught",
            never_evicts,
        ),
        row("TC-03", "corrupted_transfer_is_caught", corrupted_transfer),
        row(
            "TC-03",
            "underreported_blocks_are_caught",
            underreported_blocks,
        ),
        row(
            "TC-03",
            "wrong_transfer_bytes_are_caught",
            wrong_transfer_bytes,
        ),
        row(
            "TC-03",
            "interval_log_disagreeing_with_metrics_is_caught",
            skewed_interval_log,
        ),
        row("TC-04", "missing_guard_deposit_is_caught", no_guard_deposit),
        row(
            "TC-04",
            "guard_that_never_promotes_is_caught",
            guard_never_promotes,
        ),
        row(
            "TC-04",
            "replacement_that_does_not_reclaim_is_caught",
            no_reclaim,
        ),
        row(
            "TC-04",
            "wrong_token_under_load_is_caught",
            wrong_token_under_load,
        ),
        row(
            "TC-05",
            "wrong_token_mid_stream_is_caught",
            wrong_token_mid_stream,
        ),
        row("TC-05", "stalled_stream_is_caught", stalled_stream),
        row(
            "TC-05",
            "local_hit_without_device_hits_is_caught",
            no_device_hits,
        ),
        row(
            "TC-05",
            "underreported_dram_hit_is_caught",
            underreported_dram_hit,
        ),
        row(
            "TC-05",
            "underreported_remote_hit_is_caught",
            underreported_remote_hit,
        ),
        row(
            "TC-05",
            "wrong_token_under_concurrency_is_caught",
            wrong_token_in_sweep,
        ),
        row("TC-05", "stream_cut_in_the_middle_is_caught", cut_stream),
        row(
            "TC-06",
            "guard_that_never_serves_gives_no_t1",
            guard_never_serves,
        ),
        row(
            "TC-01",
            "bad_requests_get_clear_errors_and_workers_stay_up",
            bad_requests,
        ),
        row(
            "TC-04",
            "replacement_with_another_compatibility_digest_is_caught",
            replacement_with_another_digest,
        ),
    ]
}

/// Like [`expect_red`], and the failure is traceable: it names the
/// request's `x-request-id`, and the worker's own log line of that request
/// (its prefill line, under Dynamo's id for it) is found from it.
fn traced_expect_red(ctx: &CaseCtx, case: fn(&CaseCtx) -> CaseResult, claim: &str) -> CaseResult {
    let failure = caught(ctx, case, claim)?;
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
    let lines = ctx.log_lines_of(&id);
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

/// A wrong token is caught, and its failure leads to the worker log line.
fn wrong_token(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A", "B"], json!({"wrong_token_after": 2}))?;
    traced_expect_red(ctx, tc01::run, "token 2 of 16 differs")
}

/// Worker B's `KV Transfer metrics` line reports one block more than its
/// `/metrics`: the two telemetry sources must agree.
fn skewed_interval_log(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["B"], json!({"skew_interval_log": true}))?;
    expect_red(
        ctx,
        tc03::run,
        "interval log agrees with /metrics: worker B logged",
    )
}

/// Worker B's KVCR progress loop dies (KVCR then re-raises its failure on
/// every poll): B exits with its tier, the case names the crash and its
/// cause, and the suite replaces B before the next row.
fn kvcr_fails(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["B"], json!({"kvcr_progress_fails": true}))?;
    expect_red(
        ctx,
        tc01::run,
        "worker-B exited on its own (exit status: 5): RuntimeError: fault kvcr_progress_fails: KVCR progress loop failed",
    )
}

fn dead_router(ctx: &CaseCtx) -> CaseResult {
    ctx.kill_frontend()?;
    // The suite's restore step starts a new frontend after the row.
    expect_red(ctx, tc01::run, "no response")
}

fn never_registers(ctx: &CaseCtx) -> CaseResult {
    let (result, took) = ctx.provision_faulty(
        "never-register",
        &["never_register"],
        Duration::from_secs(8),
    );
    match result {
        Ok(()) => Err(CaseError::new(
            "a stack whose workers never register came up",
        )),
        Err(e) if e.to_string().contains("to register") => {
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

fn dies_during_startup(ctx: &CaseCtx) -> CaseResult {
    let timeout = Duration::from_secs(60);
    let (result, took) =
        ctx.provision_faulty("die-during-startup", &["die_during_startup"], timeout);
    ctx.measure("failed_after_s", took.as_secs_f64());
    match result {
        Ok(()) => Err(CaseError::new(
            "a stack whose workers die during startup came up",
        )),
        // An abort, not the deadline: the harness saw the exit and quoted the log.
        Err(e)
            if e.to_string().contains("exited during startup")
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

fn corrupted_local_delivery(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"corrupt_delivered_pages": true}))?;
    expect_red(ctx, tc02::run, "reference tokens: token ")
}

fn underreported_local_blocks(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"underreport_blocks": true}))?;
    expect_red(
        ctx,
        tc02::run,
        "host-tier (DRAM) hit: 3 blocks loaded from host memory",
    )
}

/// An engine that does not export `cpu_engine_computed_blocks`: TC-02's
/// "0 blocks recomputed" must not pass on silence.
fn unexported_computed_blocks(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"drop_series": "cpu_engine_computed_blocks"}))?;
    expect_red(ctx, tc02::run, "computed_blocks not reported by worker A")
}

/// An engine that exports no KVCR operation histogram: "no remote transfer"
/// must not pass on silence (the whole family is gone, so even the series
/// created on first event cannot read as 0).
fn unexported_kvcr_operations(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"drop_series": "vllm:kvcr_duration_seconds"}))?;
    expect_red(
        ctx,
        tc02::run,
        "op_count{scope=remote_deliver,result=success} not reported by worker A",
    )
}

/// A device cache that stops evicting (new blocks do not stay): the fillers
/// push too little out, so TC-02's DRAM hit is not proven to come from
/// below. (A few evictions may still happen while blocks left by earlier
/// rows fill the cache, so the count is not matched, only that it is short.)
fn never_evicts(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"no_device_eviction": true}))?;
    let failure = caught(ctx, tc02::run, "eviction not proven: worker A evicted")?;
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

fn corrupted_transfer(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["B"], json!({"corrupt_delivered_pages": true}))?;
    expect_red(ctx, tc03::run, "reference tokens: token ")
}

fn underreported_blocks(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["B"], json!({"underreport_blocks": true}))?;
    expect_red(
        ctx,
        tc03::run,
        "remote_deliver blocks 3 ≠ source_write blocks 4",
    )
}

fn wrong_transfer_bytes(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["B"], json!({"wrong_transfer_bytes": true}))?;
    expect_red(
        ctx,
        tc03::run,
        "peer transfer reconciles: target read bytes",
    )
}

fn no_guard_deposit(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"no_guard_deposit": true}))?;
    expect_red(
        ctx,
        tc04::run,
        "waiting for worker A to deposit the 4 blocks of",
    )
}

fn guard_never_promotes(ctx: &CaseCtx) -> CaseResult {
    let _stopped = ctx.stop_guard()?;
    expect_red(
        ctx,
        tc04::run,
        "Guard promotion after SIGKILL: no `guard_promoted` event for guard 0 in the Guard log",
    )
}

fn no_reclaim(ctx: &CaseCtx) -> CaseResult {
    ctx.stack.set_replacement_faults(vec!["no_reclaim".into()]);
    let result = expect_red(
        ctx,
        tc04::run,
        "replacement A' did not reclaim the pool: host-tier (DRAM) hit: 0 blocks loaded",
    );
    // The replacement carries the switch from its launch; clear it.
    drop(ctx.engine_faults(&["A"], json!({})));
    result
}

/// The survivor B answers wrongly while A is killed under load: the budget
/// never allows a wrong token, whatever the failure allowance.
fn wrong_token_under_load(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["B"], json!({"wrong_token_after": 3}))?;
    expect_red(ctx, tc04_load::run, "load within its budget: ")
}

fn wrong_token_mid_stream(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"wrong_token_after": 5}))?;
    expect_red(ctx, tc05::COLD.run, "token 5 of 16 differs")
}

fn stalled_stream(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"stall_stream_after": 2}))?;
    expect_red(ctx, tc05::COLD.run, "(streaming): no chunk for")
}

/// A's device prefix cache finds nothing: the local-hit arm's prefix comes
/// from a lower tier, which is not a device-cache hit.
fn no_device_hits(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"no_device_hits": true}))?;
    expect_red(
        ctx,
        tc05::LOCAL_HIT.run,
        "device-cache (local) hit: 0 prompt tokens from the device cache < 64 shared",
    )
}

fn cut_stream(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"cut_stream_after": 3}))?;
    expect_red(
        ctx,
        tc05::COLD.run,
        "sent an error in the stream after 3 tokens",
    )
}

fn underreported_dram_hit(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A"], json!({"underreport_blocks": true}))?;
    expect_red(
        ctx,
        tc05::DRAM_HIT.run,
        "host-tier (DRAM) hit: 3 blocks loaded from host memory",
    )
}

fn underreported_remote_hit(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["B"], json!({"underreport_blocks": true}))?;
    expect_red(
        ctx,
        tc05::REMOTE_HIT.run,
        "peer transfer reconciles: remote_deliver blocks 3 ≠ source_write blocks 4",
    )
}

fn wrong_token_in_sweep(ctx: &CaseCtx) -> CaseResult {
    let _fault = ctx.engine_faults(&["A", "B"], json!({"wrong_token_after": 4}))?;
    expect_red(ctx, tc05::SWEEP.run, "token 4 of 16 differs")
}

fn guard_never_serves(ctx: &CaseCtx) -> CaseResult {
    let _stopped = ctx.stop_guard()?;
    expect_red(ctx, tc06::run, "no t1: ")
}

/// Bad input through the real router gets a clear error response, and every
/// worker keeps serving correct tokens afterwards.
fn bad_requests(ctx: &CaseCtx) -> CaseResult {
    let a = ctx.worker("A")?;
    let status_of =
        |request: Completion| match kvcr_e2e::rt::block_on(ctx.client.complete(&request)) {
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
            "over-long prompt got HTTP {long_status} (want 4xx), unknown model got HTTP {model_status} (want 404)"
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

/// The replacement A' presents a KVCR compatibility digest that A's Guard
/// was not started with: the Guard must refuse the handback, so A' cannot
/// reclaim the pool.
fn replacement_with_another_digest(ctx: &CaseCtx) -> CaseResult {
    ctx.stack
        .set_replacement_faults(vec![kvcr_e2e::stack::DIGEST_MISMATCH.into()]);
    expect_red(
        ctx,
        tc04::run,
        "KVCRServiceError: KVCR compatibility digest does not match the service",
    )
}
