//! The fault matrix of the default stack (`cargo test --test fault_matrix`):
//! one row per fault, in the order they run (a row finds the stack the
//! rows before it left, restored). docs/fault-matrix.md's table is
//! generated from it ([`super::doc`]).

use std::time::Duration;

use serde_json::json;

use crate::client::{ClientError, Completion};
use crate::engine::Need;
use crate::stack::RefusalKind;
use crate::suite::claim::{Request, Startup};
use crate::suite::{
    caught, clause, CaseCtx, CaseError, CaseResult, Claim, EngineFault, Expect, Fault, FaultRow,
    RowDoc, Workers,
};
use crate::verdict::{guard, load, local, tokens, transfer};

use crate::cases::{
    tc01_generation_correctness as tc01, tc02_local_dram_flow as tc02,
    tc03_hinted_peer_transfer as tc03, tc04_guard_takeover as tc04,
    tc04_worker_killed_under_load as tc04_load, tc05_performance_arms as tc05,
    tc06_guard_recovery_timing as tc06,
};

const A: Workers = Workers::Slots(&["A"]);
const B: Workers = Workers::Slots(&["B"]);
const A_AND_B: Workers = Workers::Slots(&["A", "B"]);

pub static ROWS: &[FaultRow] = &[
    FaultRow {
        case: tc01::CASE,
        name: "wrong_token_is_caught",
        fault: Fault::Arranged(wrong_token),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(tokens::CLAIM, "token 2 of 16 differs"),
        doc: RowDoc {
            fault: "CPU engine `wrong_token_after=2` on A and B",
            caught_by: "TC-01",
            message: "`token 2 of 16 differs: expected …, got … (x-request-id …)`; the id leads (`log-lines.txt`, via Dynamo's id for it) to the worker's `request …: N full blocks` log line",
        },
    },
    DEAD_ROUTER,
    // Worker B's KVCR progress loop dies (KVCR then re-raises its failure
    // on every poll): B exits with its tier, the suite's crash check names
    // the crash and its cause, and the restore step replaces B before the
    // next row.
    FaultRow {
        case: tc01::CASE,
        name: "worker_whose_kvcr_fails_is_reported_and_replaced",
        fault: Fault::Engine(B, EngineFault::KvcrProgressFails),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::Crashed, "worker-B exited on its own (exit status: 5): RuntimeError: fault kvcr_progress_fails: KVCR progress loop failed"),
        doc: RowDoc {
            fault: "`kvcr_progress_fails` on B: KVCR's poll raises as it does once its progress loop died, and B exits 5 with its tier",
            caught_by: "any case (the suite checks every component after each case and inside each row)",
            message: "`crashed during the case: worker-B exited on its own (exit status: 5): RuntimeError: fault kvcr_progress_fails: KVCR progress loop failed; the case then failed: …`; the suite then replaces B",
        },
    },
    // Both workers answer a repeat with `cached_tokens` of one block though
    // they reused the whole prompt: `> 0` passed it; the prompt's full
    // blocks do not.
    FaultRow {
        case: tc01::CASE,
        name: "repeat_that_reports_a_short_cached_prefix_is_caught",
        fault: Fault::Engine(A_AND_B, EngineFault::CachedTokensFirstBlock),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::CACHED_PASS, "repeated: cached_tokens Some(16), expected 64 (4 full blocks × 16, what the engine caches of the prompt)"),
        doc: RowDoc {
            fault: "`cached_tokens_first_block` on A and B: a repeat of a prompt says `cached_tokens` = one block, though the whole prompt was reused",
            caught_by: "TC-01 (cached pass)",
            message: "`cached pass reused the cache: f…v… repeated: cached_tokens Some(16), expected 64 (4 full blocks × 16, what the engine caches of the prompt)` (the old `> 0` check passed it)",
        },
    },
    FaultRow {
        case: tc01::CASE,
        name: "worker_that_never_registers_fails_startup",
        fault: Fault::Arranged(never_registers),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::Startup(Startup::TimedOut), "to register"),
        doc: RowDoc {
            fault: "launch switch `never_register` on a second stack, 8 s startup deadline",
            caught_by: "stack readiness (TC-01's precondition)",
            message: "`timed out … waiting for worker-A to register …`, with its log tail",
        },
    },
    FaultRow {
        case: tc01::CASE,
        name: "worker_that_dies_during_startup_fails_fast",
        fault: Fault::Arranged(dies_during_startup),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::Startup(Startup::GaveUp), "exited during startup"),
        doc: RowDoc {
            fault: "launch switch `die_during_startup` on a second stack",
            caught_by: "stack readiness",
            message: "`gave up waiting … worker-A exited during startup (exit status: 3)`, quoting `fault die_during_startup` from its log, seconds after launch",
        },
    },
    FaultRow {
        case: tc02::CASE,
        name: "corrupted_local_delivery_is_caught",
        fault: Fault::Engine(A, EngineFault::CorruptDeliveredPages),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(tokens::CLAIM, "of 16 differs"),
        doc: RowDoc {
            fault: "`corrupt_delivered_pages` on A",
            caught_by: "TC-02",
            message: "`reference tokens: token N of 16 differs`",
        },
    },
    FaultRow {
        case: tc02::CASE,
        name: "underreported_local_blocks_are_caught",
        fault: Fault::Engine(A, EngineFault::UnderreportBlocks),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::HOST_TIER_HIT, "3 blocks loaded from host memory"),
        doc: RowDoc {
            fault: "`underreport_blocks` on A",
            caught_by: "TC-02",
            message: "`host-tier (DRAM) hit: 3 blocks loaded from host memory … < 4 shared full blocks`",
        },
    },
    // The right blocks move and KVCR counts them right, but the answer's
    // `cached_tokens` says one block: the hit's own clause must catch it.
    FaultRow {
        case: tc02::CASE,
        name: "dram_hit_reporting_short_cached_tokens_is_caught",
        fault: Fault::Engine(A, EngineFault::CachedTokensFirstBlock),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::HOST_TIER_HIT, "cached_tokens Some(16) is not a block-aligned count ≥ 64 (4 blocks × 16)"),
        doc: RowDoc {
            fault: "`cached_tokens_first_block` on A: the right blocks come from KVCR's pool and are counted right, but the answer's `cached_tokens` says one block",
            caught_by: "TC-02",
            message: "`host-tier (DRAM) hit: cached_tokens Some(16) is not a block-aligned count ≥ 64 (4 blocks × 16)`",
        },
    },
    // The right blocks move, but A's tiering read bytes of the KVCR tier
    // say one page more than KVCR delivered.
    FaultRow {
        case: tc02::CASE,
        name: "dram_hit_misreporting_read_bytes_is_caught",
        fault: Fault::Engine(A, EngineFault::WrongTransferBytes),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::HOST_TIER_HIT, "KVCR read bytes"),
        doc: RowDoc {
            fault: "`wrong_transfer_bytes` on A: its tiering read bytes of the KVCR tier say one page more than KVCR delivered into the local hit",
            caught_by: "TC-02",
            message: "`host-tier (DRAM) hit: KVCR read bytes 36864 ≠ local_deliver blocks 4 × 8192`",
        },
    },
    // An engine that does not export `cpu_engine_computed_blocks`: TC-02's
    // "0 blocks recomputed" must not pass on silence.
    FaultRow {
        case: tc02::CASE,
        name: "unexported_computed_blocks_are_not_zero",
        fault: Fault::Engine(A, EngineFault::DropSeries("cpu_engine_computed_blocks")),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::NotReported, "computed_blocks not reported by worker A"),
        doc: RowDoc {
            fault: "`drop_series=cpu_engine_computed_blocks` on A: the engine stops exporting one unlabelled counter",
            caught_by: "TC-02",
            message: "`computed_blocks not reported by worker A: expected the series cpu_engine_computed_blocks_total in the scrape of …`",
        },
    },
    // No KVCR operation histogram at all: "no remote transfer" must not pass
    // on silence (the whole family is gone, so even the series created on
    // first event cannot read as 0).
    FaultRow {
        case: tc02::CASE,
        name: "unexported_kvcr_operations_are_not_zero",
        fault: Fault::Engine(A, EngineFault::DropSeries("vllm:kvcr_duration_seconds")),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::NotReported, "op_count{scope=remote_deliver,result=success} not reported by worker A"),
        doc: RowDoc {
            fault: "`drop_series=vllm:kvcr_duration_seconds` on A: the whole KVCR operation family is gone",
            caught_by: "TC-02",
            message: "`op_count{scope=remote_deliver,result=success} not reported by worker A: …`",
        },
    },
    FaultRow {
        case: tc02::CASE,
        name: "device_cache_that_never_evicts_is_caught",
        fault: Fault::Arranged(never_evicts),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(clause::EVICTION_NOT_PROVEN, "worker A evicted"),
        doc: RowDoc {
            fault: "`no_device_eviction` on A: newly computed blocks do not stay in its device cache, so the fillers push nothing out",
            caught_by: "TC-02 (arrange: evict the device cache)",
            message: "`eviction not proven: worker A evicted N blocks (counted) after 32 filler prompts, fewer than its device cache holds (64)` (N is small, not 0: blocks earlier rows left fill the cache first)",
        },
    },
    FaultRow {
        case: tc03::CASE,
        name: "corrupted_transfer_is_caught",
        fault: Fault::Engine(B, EngineFault::CorruptDeliveredPages),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(tokens::CLAIM, "of 16 differs"),
        doc: RowDoc {
            fault: "`corrupt_delivered_pages` on B (the target)",
            caught_by: "TC-03",
            message: "`reference tokens: token N of 16 differs`",
        },
    },
    FaultRow {
        case: tc03::CASE,
        name: "underreported_blocks_are_caught",
        fault: Fault::Engine(B, EngineFault::UnderreportBlocks),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(transfer::PEER_TRANSFER, "remote_deliver blocks 3 ≠ source_write blocks 4"),
        doc: RowDoc {
            fault: "`underreport_blocks` on B",
            caught_by: "TC-03",
            message: "`peer transfer reconciles: remote_deliver blocks 3 ≠ source_write blocks 4`",
        },
    },
    FaultRow {
        case: tc03::CASE,
        name: "wrong_transfer_bytes_are_caught",
        fault: Fault::Engine(B, EngineFault::WrongTransferBytes),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(transfer::PEER_TRANSFER, "target read bytes"),
        doc: RowDoc {
            fault: "`wrong_transfer_bytes` on B",
            caught_by: "TC-03",
            message: "`peer transfer reconciles: target read bytes … ≠ source_write bytes …`",
        },
    },
    // B's `KV Transfer metrics` line reports one block more than its
    // `/metrics`: the two telemetry sources must agree.
    FaultRow {
        case: tc03::CASE,
        name: "interval_log_disagreeing_with_metrics_is_caught",
        fault: Fault::Engine(B, EngineFault::SkewIntervalLog),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(clause::INTERVAL_LOG, "worker B logged"),
        doc: RowDoc {
            fault: "`skew_interval_log` on B: its `KV Transfer metrics` line reports one block more than its `/metrics`",
            caught_by: "TC-03",
            message: "`interval log agrees with /metrics: worker B logged transfer_blocks{…} = N+1, its /metrics says N (the comparison here is a consistency check of one source (the cpu engine writes the log line and /metrics from the same stats))`",
        },
    },
    // Worker B alive but no longer listed by the router: stopped until its
    // discovery entry was deleted as stale, then continued. The case must
    // name the dropout (not only its HTTP 400s), and the restore replace B.
    FaultRow {
        case: tc03::CASE,
        name: "worker_dropped_out_of_discovery_is_named",
        fault: Fault::DropOutOfDiscovery("B"),
        needs: &[],
        expect: Expect::with(Claim::DroppedOut, "worker B (pid"),
        doc: RowDoc {
            fault: "worker B SIGSTOPped (state `T` verified) until the frontend's `/health` no longer lists it (Dynamo's file discovery deletes an entry not refreshed for 10 s), then continued: alive, but unlisted for good",
            caught_by: "any case (the suite checks after each case and inside each row that every running worker is listed); the restore replaces B",
            message: "`dropped out of the router's discovery during the case: worker B (pid …) is running, but the router no longer lists its instance …: Dynamo's file discovery deleted its entry as not refreshed for 10 s of wall time (…/logs/frontend.1.log: \\`… INFO dynamo_runtime::storage::kv::file: Expired path=\"…/discovery/v1/instances/kvcr%2De2e%2Fcpu%2Fgenerate%2F<B's id in hex>\" …\\`), and a worker never writes a deleted entry again; during the case no clock event of the machine was seen (the worker's own runtime stopped refreshing it); the case then failed: request f… failed: … pinned to worker …: expected HTTP 200, got 400; body starts: {\"message\":\"Invalid request\",\"type\":\"Bad Request\",\"code\":400}`",
        },
    },
    // The machine's wall clock stepped 15 s forward (what a time sync after a
    // paused VM does): every process of the stack then deletes the others'
    // discovery entries as stale. The case must name the step, and the
    // restore replace every worker that dropped out (root only).
    FaultRow {
        case: tc03::CASE,
        name: "wall_clock_step_is_named",
        fault: Fault::WallClockStep(15),
        needs: &[],
        expect: Expect::with(Claim::DroppedOut, "the machine's wall clock stepped +15.0 s"),
        doc: RowDoc {
            fault: "the machine's wall clock stepped 15 s forward (`clock_settime`, root) until a worker dropped out of discovery, then 15 s back before the case, each step held until the harness's clock watcher saw it (F28); runs only with CAP_SYS_TIME (else ignored, failed under `--require-all`)",
            caught_by: "any case; the restore replaces every worker that dropped out",
            message: "`dropped out of the router's discovery during the case: worker A (pid …) is running, but the router no longer lists its instance …: Dynamo's file discovery deleted its entry as not refreshed for 10 s of wall time (…/logs/frontend.1.log: \\`… Expired path=\"…\"\\`), and a worker never writes a deleted entry again; worker B (pid …) is running, …; during the case the machine's wall clock stepped +15.0 s (seen at …); the case then failed: request f… failed: … pinned to worker …: expected HTTP 200, got 400; body starts: {\"message\":\"Invalid request\",…}` (measured 2026-12-03: the frontend's sweep deleted both workers' entries within a second of the step)",
        },
    },
    // The interval-log check asked about a counter no transfer moved (B's
    // failed remote delivers): 0 = 0, or absent on both sides, used to pass.
    FaultRow {
        case: tc04::CASE,
        name: "missing_guard_deposit_is_caught",
        fault: Fault::Engine(A, EngineFault::NoGuardDeposit),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::TimedOut, "waiting for worker A to deposit the 4 blocks of"),
        doc: RowDoc {
            fault: "`no_guard_deposit` on A: the Guard would have nothing to serve",
            caught_by: "TC-04 (arrange: commit into the Guard pool)",
            message: "`timed out … waiting for worker A to deposit the 4 blocks of … into its KVCR pool`",
        },
    },
    GUARD_NEVER_PROMOTES,
    // B drops the router's hints: the Guard promotes, but no takeover
    // attempt is ever read from A's endpoint (each is computed on B).
    FaultRow {
        case: tc04::CASE,
        name: "target_that_ignores_the_hint_gets_no_takeover",
        fault: Fault::Engine(B, EngineFault::IgnoreKvHints),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(clause::TAKEOVER, "attempts pinned to B was served from A's endpoint"),
        doc: RowDoc {
            fault: "`ignore_kv_hints` on B: it drops the router's hints, so the promoted Guard is never read and every attempt is computed on B",
            caught_by: "TC-04 (the takeover attempts)",
            message: "`takeover through the Guard: none of N attempts pinned to B was served from A's endpoint (the last sent … s after the kill; the router hints A's blocks for 6.7-10 s): [CorrectNotGuard(NoRemoteDeliver), …]`",
        },
    },
    FaultRow {
        case: tc04::CASE,
        name: "replacement_that_does_not_reclaim_is_caught",
        fault: Fault::Replacement(EngineFault::NoReclaim),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::HOST_TIER_HIT, "0 blocks loaded"),
        doc: RowDoc {
            fault: "launch switch `no_reclaim` on the replacement A'",
            caught_by: "TC-04",
            message: "`replacement A' did not reclaim the pool: host-tier (DRAM) hit: 0 blocks loaded …`",
        },
    },
    // The survivor B answers wrongly while A is killed under load: the
    // budget never allows a wrong token, whatever the failure allowance.
    FaultRow {
        case: tc04_load::CASE,
        name: "wrong_token_under_load_is_caught",
        fault: Fault::Engine(B, EngineFault::WrongTokenAfter(3)),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(load::CLAIM, "requests returned wrong tokens (never allowed)"),
        doc: RowDoc {
            fault: "`wrong_token_after=3` on B while A is SIGKILLed under a 4-client streaming load",
            caught_by: "TC-04 under load",
            message: "`load within its budget: N requests returned wrong tokens (never allowed)`",
        },
    },
    // The whole load pinned to B (the stand-in for a router that sends A
    // nothing): A is killed idle, which proves nothing about a kill under
    // load, so the case must say A carried nothing.
    FaultRow {
        case: tc04_load::CASE,
        name: "kill_of_a_worker_that_carried_no_load_is_caught",
        fault: Fault::Arranged(load_all_on_b),
        needs: &[],
        expect: Expect::clause(load::CLAIM, "worker A served no request before the fault and none was in flight on it"),
        doc: RowDoc {
            fault: "the same load with every request pinned to B (a router that sends A nothing), A SIGKILLed after the first wave",
            caught_by: "TC-04 under load",
            message: "`load within its budget: worker A served no request before the fault and none was in flight on it: the router sent it nothing, so the fault hit an idle worker`",
        },
    },
    // The survivor B cuts every stream after 3 tokens while A is killed
    // under load: after the kill nothing answers correctly, and the failures
    // exceed the error budget.
    FaultRow {
        case: tc04_load::CASE,
        name: "survivor_that_fails_every_request_is_caught",
        fault: Fault::Arranged(survivor_fails_every_request),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(load::CLAIM, "no request answered correctly after the fault: the stack stopped serving"),
        doc: RowDoc {
            fault: "`cut_stream_after=3` on B while A is SIGKILLed under the load: every stream B serves ends with an error",
            caught_by: "TC-04 under load",
            message: "`load within its budget: N requests failed, more than the budget of M (load_max_failed_requests); no request answered correctly after the fault: the stack stopped serving`",
        },
    },
    FaultRow {
        case: tc05::COLD,
        name: "wrong_token_mid_stream_is_caught",
        fault: Fault::Engine(A, EngineFault::WrongTokenAfter(5)),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(tokens::CLAIM, "token 5 of 16 differs"),
        doc: RowDoc {
            fault: "`wrong_token_after=5` on A",
            caught_by: "TC-05 cold arm",
            message: "`token 5 of 16 differs`",
        },
    },
    // A's counters say the first block of every fresh prompt came from the
    // device cache, though it was computed: the cold arm must see reuse.
    FaultRow {
        case: tc05::COLD,
        name: "cold_prompt_reported_as_reused_is_caught",
        fault: Fault::Engine(A, EngineFault::PhantomDeviceHit),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::COLD_PREFILL, "3 blocks computed, expected all 4 full blocks of the prompt; a fresh prompt reused cached blocks: device hit tokens 16"),
        doc: RowDoc {
            fault: "`phantom_device_hit` on A: its counters report the first computed block of each prompt as a device-cache hit (it was computed; the tokens are right)",
            caught_by: "TC-05 cold arm",
            message: "`cold prefill: 3 blocks computed, expected all 4 full blocks of the prompt; a fresh prompt reused cached blocks: device hit tokens 16, local_deliver blocks 0, host-tier bytes 0, remote_deliver ops 0`",
        },
    },
    // A logs no first-token stamp: TTFT accuracy has nothing to compare the
    // client's first chunk with, which must fail, not read as 0.
    FaultRow {
        case: tc05::COLD,
        name: "missing_first_token_stamp_is_caught",
        fault: Fault::Engine(A, EngineFault::NoFirstTokenStamp),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(clause::TTFT_ACCURACY, "the engine's log has no first-token stamp for it"),
        doc: RowDoc {
            fault: "`no_first_token_stamp` on A: it logs no `first token sent monotonic_ns=` line",
            caught_by: "TC-05 cold arm (TTFT accuracy)",
            message: "`TTFT accuracy: request …: the engine's log has no first-token stamp for it (the cpu engine stamps every first token it sends; see the case's log-lines.txt)`",
        },
    },
    FaultRow {
        case: tc05::COLD,
        name: "stalled_stream_is_caught",
        fault: Fault::Engine(A, EngineFault::StallStreamAfter(2)),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::Request(Request::StreamIdle), "after 2 tokens"),
        doc: RowDoc {
            fault: "`stall_stream_after=2` on A",
            caught_by: "TC-05 cold arm",
            message: "`stream of f… failed: completion of … (streaming): no chunk for 5s after 2 tokens from worker …`",
        },
    },
    // A's device prefix cache finds nothing: the local-hit arm's prefix
    // comes from a lower tier, which is not a device-cache hit.
    FaultRow {
        case: tc05::LOCAL_HIT,
        name: "local_hit_without_device_hits_is_caught",
        fault: Fault::Engine(A, EngineFault::NoDeviceHits),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::DEVICE_HIT, "0 prompt tokens from the device cache < 64 shared"),
        doc: RowDoc {
            fault: "`no_device_hits` on A: its device prefix cache finds nothing, so the prefix comes from a lower tier",
            caught_by: "TC-05 local-hit arm",
            message: "`device-cache (local) hit: 0 prompt tokens from the device cache < 64 shared`",
        },
    },
    FaultRow {
        case: tc05::DRAM_HIT,
        name: "underreported_dram_hit_is_caught",
        fault: Fault::Engine(A, EngineFault::UnderreportBlocks),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::HOST_TIER_HIT, "3 blocks loaded from host memory"),
        doc: RowDoc {
            fault: "`underreport_blocks` on A",
            caught_by: "TC-05 DRAM-hit arm",
            message: "`host-tier (DRAM) hit: 3 blocks loaded from host memory … < 4 shared full blocks`",
        },
    },
    FaultRow {
        case: tc05::REMOTE_HIT,
        name: "underreported_remote_hit_is_caught",
        fault: Fault::Engine(B, EngineFault::UnderreportBlocks),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(transfer::PEER_TRANSFER, "remote_deliver blocks 3 ≠ source_write blocks 4"),
        doc: RowDoc {
            fault: "`underreport_blocks` on B",
            caught_by: "TC-05 remote-hit arm",
            message: "`peer transfer reconciles: remote_deliver blocks 3 ≠ source_write blocks 4`",
        },
    },
    FaultRow {
        case: tc05::SWEEP,
        name: "wrong_token_under_concurrency_is_caught",
        fault: Fault::Engine(A_AND_B, EngineFault::WrongTokenAfter(4)),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(tokens::CLAIM, "token 4 of 16 differs"),
        doc: RowDoc {
            fault: "`wrong_token_after=4` on A and B",
            caught_by: "TC-05 concurrency sweep",
            message: "`reference tokens: token 4 of 16 differs: expected …, got …`",
        },
    },
    FaultRow {
        case: tc05::COLD,
        name: "stream_cut_in_the_middle_is_caught",
        fault: Fault::Engine(A, EngineFault::CutStreamAfter(3)),
        needs: &[Need::FaultSwitches],
        expect: Expect::with(Claim::Request(Request::StreamError), "after 3 tokens"),
        doc: RowDoc {
            fault: "`cut_stream_after=3` on A (the stream ends with an error, no finish)",
            caught_by: "TC-05 cold arm",
            message: "`stream of f… failed: … the server sent an error in the stream after 3 tokens: …`",
        },
    },
    FaultRow {
        case: tc06::CASE,
        name: "guard_that_never_serves_gives_no_t1",
        fault: Fault::StopGuard,
        needs: &[],
        expect: Expect::clause(clause::NO_T1, "none served by the Guard"),
        doc: RowDoc {
            fault: "SIGSTOP of the Guard service",
            caught_by: "TC-06",
            message: "`no t1: N attempts in … s, none served by the Guard (…); Guard promotion_ms None`",
        },
    },
    // B corrupts the pages it is delivered, and after A's kill only the
    // Guard delivers to it: the recovery serves wrong tokens, which TC-06
    // must stop at (not pass over as a not-yet-served attempt).
    FaultRow {
        case: tc06::CASE,
        name: "wrong_tokens_during_recovery_are_caught",
        fault: Fault::Engine(B, EngineFault::CorruptDeliveredPages),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(tokens::CLAIM, "of 16 differs"),
        doc: RowDoc {
            fault: "`corrupt_delivered_pages` on B: after A's kill the only source that delivers to B is the Guard, so the recovery serves wrong tokens (an attempt B answers without a delivery is right)",
            caught_by: "TC-06 (the takeover attempts)",
            message: "`attempt N at M ms returned wrong tokens: reference tokens: token K of 16 differs: expected …, got …`",
        },
    },
    FaultRow {
        case: tc06::CASE,
        name: "replacement_that_does_not_reclaim_gives_no_t2_hit",
        fault: Fault::Replacement(EngineFault::NoReclaim),
        needs: &[Need::FaultSwitches],
        expect: Expect::clause(local::HOST_TIER_HIT, "0 blocks loaded"),
        doc: RowDoc {
            fault: "launch switch `no_reclaim` on the replacement A'",
            caught_by: "TC-06 (t2)",
            message: "`t2: replacement A' did not reclaim the pool: host-tier (DRAM) hit: 0 blocks loaded from host memory (local_deliver blocks 0 + host-tier read bytes 0 / 8192) < 4 shared full blocks; 4 prompt blocks were recomputed; cached_tokens Some(0) is not a block-aligned count ≥ 64 (4 blocks × 16)`",
        },
    },
    FaultRow {
        case: tc01::CASE,
        name: "bad_requests_get_clear_errors_and_workers_stay_up",
        fault: Fault::Arranged(bad_requests),
        needs: &[],
        expect: Expect::claim(Claim::Request(Request::Status)),
        doc: RowDoc {
            fault: "an over-long prompt pinned to A, and an unknown model, through the router",
            caught_by: "the router and the CPU engine",
            message: "HTTP 4xx for the prompt, 404 for the model; then A and B still serve reference tokens",
        },
    },
    // A' presents a KVCR compatibility digest that A's Guard was not started
    // with: the Guard must refuse the handback, so A' cannot reclaim the pool.
    OTHER_COMPATIBILITY_DIGEST,
];

/// The rows the vLLM fault lane runs (`fault_matrix_vllm`): three that need
/// no engine switch (a killed router, a stopped Guard, a replacement with
/// another compatibility digest). Each row's restore restarts a vLLM
/// worker (minutes), so the lane runs these, not every row that applies.
pub static ON_VLLM: &[FaultRow] = &[
    DEAD_ROUTER,
    GUARD_NEVER_PROMOTES,
    OTHER_COMPATIBILITY_DIGEST,
];

pub const DEAD_ROUTER: FaultRow = FaultRow {
    case: tc01::CASE,
    name: "dead_router_is_caught",
    fault: Fault::KillFrontend,
    needs: &[],
    expect: Expect::claim(Claim::Request(Request::NoResponse)),
    doc: RowDoc {
        fault: "SIGKILL of the Dynamo frontend (verified gone)",
        caught_by: "TC-01",
        message: "`request f… failed: … no response (…); is the frontend up? see its log`",
    },
};

pub const GUARD_NEVER_PROMOTES: FaultRow = FaultRow {
    case: tc04::CASE,
    name: "guard_that_never_promotes_is_caught",
    fault: Fault::StopGuard,
    needs: &[],
    expect: Expect::clause(guard::PROMOTION, "no `guard_promoted` event for guard 0 in the Guard log"),
    doc: RowDoc {
        fault: "SIGSTOP of the Guard service (state `T` verified)",
        caught_by: "TC-04",
        message: "`Guard promotion after SIGKILL: no \\`guard_promoted\\` event for guard 0 in the Guard log`",
    },
};

pub const OTHER_COMPATIBILITY_DIGEST: FaultRow = FaultRow {
    case: tc04::CASE,
    name: "replacement_with_another_compatibility_digest_is_caught",
    fault: Fault::ReplacementDigest,
    needs: &[],
    expect: Expect::with(Claim::Startup(Startup::Refused(RefusalKind::DigestMismatch)), "KVCRServiceError: KVCR compatibility digest does not match the service"),
    doc: RowDoc {
        fault: "launch fault `compatibility_digest_mismatch` on the replacement A' (the harness gives it another KVCR compatibility digest than its Guard's; every engine)",
        caught_by: "TC-04 (the replacement step)",
        message: "`worker-A.1's KVCR claim was refused by its Guard service … s after it started: \\`kvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service\\` (DigestMismatch: the worker presents another KVCR compatibility digest than the Guard service was started with (another engine build or config)); its log: …`",
    },
};

/// A wrong token is caught, and the failure is traceable: it names the
/// request's `x-request-id`, and the worker's own log line of that request
/// (its prefill line, under Dynamo's id for it) is found from it.
fn wrong_token(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let _fault = ctx
        .faults()
        .engine(&["A", "B"], EngineFault::WrongTokenAfter(2))?;
    let failure = caught(ctx, row.case.run, &row.expect)?;
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
    let failure = caught(ctx, row.case.run, &row.expect)?;
    // Another check of the same clause: the error budget.
    if !failure
        .detail
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
    caught(ctx, on_b, &row.expect).map(drop)
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
    match result.map_err(|e| CaseError::startup(&e)) {
        Ok(()) => Err(CaseError::new(
            "a stack whose workers never register came up",
        )),
        Err(e) if row.expect.is_met_by(&e) => {
            ctx.record(
                "caught.json",
                &json!({"message": e.to_string(), "seconds": took.as_secs_f64()}),
            );
            Ok(())
        }
        Err(e) => Err(CaseError::new(format!(
            "provisioning failed, but not waiting for registration (expected a failure of {}): {e}",
            row.expect
        ))),
    }
}

/// A second stack whose workers exit during startup: provisioning must
/// abort when it sees the exit, quoting the worker's log, not wait for its
/// deadline.
fn dies_during_startup(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    // The user's startup budget: an abort well inside it is the claim.
    let timeout = ctx.settings().startup_timeout;
    let (result, took) = ctx.faults().provision_faulty(
        "die-during-startup",
        &[EngineFault::DieDuringStartup.to_string()],
        timeout,
    );
    ctx.measure("failed_after_s", took.as_secs_f64());
    match result.map_err(|e| CaseError::startup(&e)) {
        Ok(()) => Err(CaseError::new(
            "a stack whose workers die during startup came up",
        )),
        // An abort, not the deadline: the harness saw the exit and quoted the log.
        Err(e) if row.expect.is_met_by(&e) && e.detail.contains("fault die_during_startup") => {
            ctx.record(
                "caught.json",
                &json!({"message": e.to_string(), "seconds": took.as_secs_f64()}),
            );
            Ok(())
        }
        Err(e) => Err(CaseError::new(format!(
            "provisioning failed, but not by noticing the dead worker (expected a failure of {}): {e}",
            row.expect
        ))),
    }
}

/// A device cache that stops evicting (new blocks do not stay): the fillers
/// push too little out, so TC-02's DRAM hit is not proven to come from
/// below. (A few evictions may still happen while blocks left by earlier
/// rows fill the cache, so the count is not matched, only that it is short.)
fn never_evicts(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let _fault = ctx.faults().engine(&["A"], EngineFault::NoDeviceEviction)?;
    let failure = caught(ctx, row.case.run, &row.expect)?;
    if !failure
        .detail
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
    // Each must fail as the row expects (an error status), nothing else.
    let status_of = |request: Completion| match crate::rt::block_on(ctx.client.complete(&request)) {
        Err(e)
            if row
                .expect
                .is_met_by(&CaseError::request(&e, "the bad request")) =>
        {
            match e {
                ClientError::Status { status, body, .. } => Ok((status, body)),
                other => Err(CaseError::new(format!(
                    "expected an error status, got {other:?}"
                ))),
            }
        }
        other => Err(CaseError::new(format!(
            "expected a failure of {}, got {other:?}",
            row.expect
        ))),
    };
    let too_long: Vec<u32> = (0..4096).map(|i| 3 + i % 400).collect();
    let (long_status, long_body) =
        status_of(Completion::new(ctx.engine().model(), too_long).pin_worker(a.instance_id()))?;
    let (model_status, model_body) = status_of(Completion::new("no-such-model", "hello"))?;
    ctx.record(
        "bad-requests.json",
        &json!({"over_long_prompt": [long_status, long_body], "unknown_model": [model_status, model_body]}),
    );
    if !(400..500).contains(&long_status) || model_status != 404 {
        return Err(CaseError::new(format!(
            "expected HTTP 4xx for the prompt, 404 for the model: over-long prompt got HTTP {long_status}, unknown model got HTTP {model_status}"
        )));
    }
    // The workers are still up and correct.
    for worker in ctx.workers() {
        let family = ctx.family()?;
        let answer = ctx.complete_on(&worker, family.variant(0))?;
        ctx.expect_reference(family.variant(0), &answer.tokens)?;
    }
    Ok(())
}
