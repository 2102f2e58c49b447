//! The fault matrix of the two-node topology (`cargo test --test
//! fault_matrix_two_node`): two rows target TC-03's transfer across the
//! veth, and each needs its own arrangement (a cut timed to the transfer,
//! a second stack); one puts TC-14's degraded link off the link.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use super::worker_log;
use crate::stack::NODE_WITHOUT_PID_NAMESPACE;
use crate::suite::claim::Request;
use crate::suite::{
    clause, expect_red, CaseCtx, CaseError, CaseResult, Claim, ConditionsOffTheLink, Expect, Fault,
    FaultRow, LinkCut, RowDoc,
};
use crate::wait::{self, Poll};

use crate::cases::tc03_hinted_peer_transfer as tc03;
use crate::cases::tc14_degraded_link as tc14;

pub static ROWS: &[FaultRow] = &[
    NODE_CUT_OFF,
    FaultRow {
        case: tc03::CASE,
        name: "transfer_over_shared_memory_is_caught",
        fault: Fault::Arranged(shared_memory_transfer),
        needs: &[],
        expect: Expect::clause(clause::CROSSED_THE_NETWORK, "the transfer went over shared memory, not the network"),
        doc: RowDoc {
            fault: "launch fault `node_without_pid_namespace` on a second two-node stack: node 1 gets its own network and mount namespaces but this host's PID namespace, so UCX takes A and B for same-host peers; TC-03 runs on that stack (a real transfer: tokens and byte counts pass first)",
            caught_by: "TC-03 (the network check)",
            message: "`a peer transfer between nodes crossed the network: A (…) -> B (…): at A: expected a remote memory read or write to an inter-node peer over tcp/kvh…, UCX saw only same-node peers: [\"… intra-node cfg#1 cma/memory\" …]: the transfer went over shared memory, not the network; …`",
        },
    },
    FaultRow {
        case: tc14::CASE,
        name: "degraded_link_not_on_the_link_is_caught",
        fault: Fault::Arranged(conditions_off_the_link),
        needs: &[],
        expect: Expect::with(Claim::FaultNotApplied, "not 20 ms longer"),
        doc: RowDoc {
            fault: "a harness fault: TC-14's conditions go on node 1's loopback instead of its veth (rules, delayer and qdisc all real, on the wrong interface), so the link is not degraded",
            caught_by: "TC-14 (verifying its first condition, the delay)",
            message: "`fault not applied: gave up waiting for delay 20 ± 10 ms each way to show in its counters …: the INPUT rule queued no packet …; a TCP connect across the link took Some(0.…) ms against Some(0.…) ms on the clean link: not 20 ms longer`",
        },
    },
];

pub const NODE_CUT_OFF: FaultRow = FaultRow {
    case: tc03::CASE,
    name: "node_cut_off_the_network_during_a_transfer_is_caught",
    fault: Fault::Arranged(node_cut_off),
    needs: &[],
    expect: Expect::with(Claim::Request(Request::NoResponse), "which is cut off the network"),
    doc: RowDoc {
        fault: "node 1's veth taken down (`ip link set <host end> down`, both ends verified `down`) the moment worker B's log shows TC-03's request arriving, i.e. while B pulls A's pages and answers; brought up again (verified `up`, route back) when the row ends, and the suite restores the stack",
        caught_by: "TC-03",
        message: "`request f… failed: … no response (…); … worker B runs on node 1, which is cut off the network: kvh… (this host) is down, kvn… (node 1) is down` (the request ends at the client's deadline; requests and scrapes towards a worker on a cut-off node always name the cut)",
    },
};

/// The rows that run on real vLLM (`fault_matrix_vllm_two_node`): the
/// shared-memory row starts a second stack, minutes of vLLM restarts for
/// a check of the harness's own UCX reading, which the CPU engine's lane
/// already proves.
pub static ON_VLLM: &[FaultRow] = &[NODE_CUT_OFF];

/// Node 1 (worker B and its Guard) loses its network the moment TC-03's
/// request reaches B, i.e. while B pulls A's pages across the veth (or
/// answers): the pull and the answer hang in TCP. TC-03 must end at the
/// client's deadline (`--request-timeout-s`, 20 s in this target) with an
/// error that names the cut, not hang. The link is brought up again
/// (verified) when the row ends; the suite then restores the stack.
fn node_cut_off(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let b = ctx.worker("B")?;
    let log = b.process.log_path().to_path_buf();
    let from = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let case_over = AtomicBool::new(false);
    let faults = ctx.faults().for_thread();
    let request_timeout = ctx.settings().request_timeout;
    std::thread::scope(|scope| {
        let cutter = scope.spawn(|| -> Result<LinkCut<'_>, String> {
            wait::until(
                format!("a request to arrive at worker B ({})", log.display()),
                request_timeout,
                Duration::from_millis(2),
                || {
                    if case_over.load(Ordering::SeqCst) {
                        return Poll::Abort("the case ended before".to_string());
                    }
                    if worker_log::since(&log, from).contains(worker_log::REQUEST_ARRIVED) {
                        Poll::Ready(())
                    } else {
                        Poll::Pending("no request yet".into())
                    }
                },
            )
            .map_err(|e| e.to_string())?;
            faults.cut_node_link().map_err(|e| e.message)
        });
        let verdict = expect_red(ctx, row.case.run, &row.expect);
        case_over.store(true, Ordering::SeqCst);
        let cut = cutter
            .join()
            .map_err(|_| CaseError::new("the thread cutting node 1's link panicked"))?
            .map_err(|e| {
                CaseError::new(format!("fault not applied: node 1's link was not cut: {e}"))
            })?;
        ctx.record(
            "link-cut.json",
            &json!({"cut": cut.state, "verdict": verdict.as_ref().err().map(|e| e.to_string())}),
        );
        // Dropping the cut brings the link up again, and checks it.
        drop(cut);
        let restored = faults
            .node_link_state()
            .ok_or_else(|| CaseError::new("the stack lost its namespace node"))?;
        if !restored.is_up() {
            return Err(CaseError::new(format!(
                "node 1's link is not up again after the row: {restored}"
            )));
        }
        verdict
    })
}

/// A second two-node stack whose node 1 has no PID namespace of its own
/// (a harness launch fault): UCX takes B's peer A for a same-host process
/// and moves the pages through `cma`, a real transfer over shared memory.
/// TC-03 on that stack must fail with UCX's own report of it.
fn shared_memory_transfer(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    ctx.faults().on_faulty_stack(
        "shm-stack",
        &[NODE_WITHOUT_PID_NAMESPACE.to_string()],
        |nested| expect_red(nested, row.case.run, &row.expect),
    )?
}

/// TC-14 with its conditions put on node 1's loopback instead of its veth:
/// the link is never degraded, so verifying the first condition must fail
/// as "fault not applied" rather than let the case pass on a clean link.
fn conditions_off_the_link(ctx: &CaseCtx, row: &FaultRow) -> CaseResult {
    let _off = ConditionsOffTheLink::now();
    expect_red(ctx, row.case.run, &row.expect)
}
