//! Fault-matrix rows as data: a case run with one fault on, which passes
//! only when the case fails with the claim the row expects ([`Expect`]: the
//! typed clause, and what its detail must name). A row whose fault needs
//! its own arrangement (a second stack, a check after the failure) names a
//! function instead ([`Fault::Arranged`]).

use std::time::Duration;

use serde_json::json;

use crate::engine::Need;

use super::claim::Expect;
use super::engine_fault::EngineFault;
use super::{Case, CaseCtx, CaseError, CaseResult};

/// The workers an engine fault switch is turned on on.
#[derive(Debug, Clone, Copy)]
pub enum Workers {
    /// The workers in these slots (`A`, `B`).
    Slots(&'static [&'static str]),
    /// The decode worker of a disaggregated stack.
    Decode,
    /// Every prefill worker of a disaggregated stack.
    Prefills,
}

/// What a row injects. Each is verified before the case runs and undone
/// after it (a killed component is replaced by the suite's restore step).
#[derive(Clone, Copy)]
pub enum Fault {
    /// A CPU-engine switch on these workers, read back from each (`GET
    /// /faults`), cleared after the case.
    Engine(Workers, EngineFault),
    /// SIGKILL of the Dynamo frontend (verified gone).
    KillFrontend,
    /// SIGSTOP of the Guard service holding worker A's pool (the worker the
    /// Guard cases kill), state `T` verified; continued after the case.
    StopGuard,
    /// A CPU-engine launch switch on the next replacement of a worker (A',
    /// after the case's kill); cleared after the case.
    Replacement(EngineFault),
    /// The next replacement A' starts with another KVCR compatibility
    /// digest than its Guard's (a harness launch fault: any engine).
    ReplacementDigest,
    /// The worker in this slot stopped until the router no longer lists
    /// it, then continued: alive, but dropped out of Dynamo's discovery.
    DropOutOfDiscovery(&'static str),
    /// The machine's wall clock stepped forward by this many seconds until
    /// a worker dropped out of Dynamo's discovery, then stepped back
    /// (root: CAP_SYS_TIME).
    WallClockStep(u64),
    /// The row's own arrangement and checks, given the row.
    Arranged(fn(&CaseCtx, &FaultRow) -> CaseResult),
}

impl Fault {
    /// Whether the fault turns on a CPU-engine switch (a row with it must
    /// need [`Need::FaultSwitches`]; an arranged row says so itself).
    pub fn switches_the_engine(&self) -> bool {
        matches!(self, Fault::Engine(..) | Fault::Replacement(_))
    }

    /// Why this machine cannot inject the fault, if it cannot.
    pub fn unavailable_here(&self) -> Option<String> {
        match self {
            Fault::WallClockStep(_) => super::cannot_step_the_clock(),
            _ => None,
        }
    }
}

/// One row of a fault matrix: `case` run with `fault` on must fail with
/// the claim `expect` names. docs/fault-matrix.md's tables are generated
/// from the rows ([`crate::fault_matrix::doc`]).
#[derive(Clone, Copy)]
pub struct FaultRow {
    /// The case that must catch the fault; the row's trial is
    /// `<its id>::<name>`.
    pub case: Case,
    pub name: &'static str,
    pub fault: Fault,
    /// What the row must have beyond its case's needs (a CPU-engine switch:
    /// [`Need::FaultSwitches`]); where the engine does not give it, the
    /// row is ignored with the reason.
    pub needs: &'static [Need],
    /// The failure the case must end with.
    pub expect: Expect,
    /// The row's line in docs/fault-matrix.md.
    pub doc: RowDoc,
}

/// How a row reads in docs/fault-matrix.md (markdown).
#[derive(Debug, Clone, Copy)]
pub struct RowDoc {
    /// How the fault is injected, and what it does.
    pub fault: &'static str,
    /// What must catch it: the case, or the step of it.
    pub caught_by: &'static str,
    /// The whole message a run gave, `…` for what varies from run to run.
    pub message: &'static str,
}

impl FaultRow {
    /// Injects the fault, runs the case, and passes only if the case failed
    /// with the claim. Every row is destructive: the suite restores the
    /// stack after it.
    pub fn run(&self, ctx: &CaseCtx) -> CaseResult {
        let faults = ctx.faults();
        match self.fault {
            Fault::Engine(on, switch) => {
                let names = worker_names(ctx, on)?;
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let _on = faults.engine(&names, switch)?;
                expect_red(ctx, self.case.run, &self.expect)
            }
            Fault::KillFrontend => {
                faults.kill_frontend()?;
                expect_red(ctx, self.case.run, &self.expect)
            }
            Fault::StopGuard => {
                let _stopped = faults.stop_guard(&*ctx.worker("A")?)?;
                expect_red(ctx, self.case.run, &self.expect)
            }
            Fault::Replacement(switch) => {
                faults.on_next_replacement(&[switch.to_string()]);
                let result = expect_red(ctx, self.case.run, &self.expect);
                // The replacement carries the switch from its launch.
                faults.clear_engine(&["A"]);
                result
            }
            Fault::ReplacementDigest => {
                faults.on_next_replacement(&[crate::stack::DIGEST_MISMATCH.to_string()]);
                expect_red(ctx, self.case.run, &self.expect)
            }
            Fault::DropOutOfDiscovery(slot) => {
                super::drop_out_of_discovery(ctx, slot)?;
                expect_red(ctx, self.case.run, &self.expect)
            }
            Fault::WallClockStep(seconds) => {
                // Stepped back once the dropout is verified: the case runs
                // on the broken stack with the clock right again.
                drop(super::WallClockStep::until_a_dropout(
                    ctx,
                    Duration::from_secs(seconds),
                )?);
                expect_red(ctx, self.case.run, &self.expect)
            }
            Fault::Arranged(arrange) => arrange(ctx, self),
        }
    }
}

/// The slots of `workers` on this case's stack.
fn worker_names(ctx: &CaseCtx, workers: Workers) -> Result<Vec<String>, CaseError> {
    let names = match workers {
        Workers::Slots(slots) => slots.iter().map(|s| s.to_string()).collect(),
        Workers::Decode => ctx
            .disagg()
            .decode_worker()
            .map(|w| vec![w.name().to_string()])
            .unwrap_or_default(),
        Workers::Prefills => ctx
            .disagg()
            .prefill_workers()
            .iter()
            .map(|w| w.name().to_string())
            .collect(),
    };
    if names.is_empty() {
        return Err(CaseError::new(format!(
            "this row needs a stack with {} (--topology 2p1d)",
            match workers {
                Workers::Decode => "a decode worker",
                _ => "prefill workers",
            }
        )));
    }
    Ok(names)
}

/// Runs `case` and passes only if it fails as `expect` says.
pub fn expect_red(ctx: &CaseCtx, case: fn(&CaseCtx) -> CaseResult, expect: &Expect) -> CaseResult {
    caught(ctx, case, expect).map(drop)
}

/// The failure of `case`, when it is the one `expect` names (recorded in
/// `caught.json`).
pub fn caught(
    ctx: &CaseCtx,
    case: fn(&CaseCtx) -> CaseResult,
    expect: &Expect,
) -> Result<CaseError, CaseError> {
    judge_caught(
        ctx.crashes.judge(ctx.stack, &ctx.evidence, case(ctx)),
        expect,
    )
    .inspect(|e| {
        ctx.record(
            "caught.json",
            &json!({
                "expected": expect.to_string(),
                "claim": e.claim.to_string(),
                "detail": e.detail,
                "message": e.to_string(),
            }),
        );
    })
}

/// `result`'s failure when it is the one `expect` names; otherwise why not.
pub fn judge_caught(result: CaseResult, expect: &Expect) -> Result<CaseError, CaseError> {
    match result {
        Ok(()) => Err(CaseError::new(format!(
            "the case PASSED with the fault on: its verdict cannot catch this fault (expected a failure of {expect})"
        ))),
        Err(e) if expect.is_met_by(&e) => Ok(e),
        Err(e) => Err(CaseError::new(format!(
            "the case failed, but not as expected (a failure of {expect}): it failed with {} on: {e}",
            e.claim
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::claim::Request;
    use crate::suite::Claim;
    use crate::verdict::Violation;

    const P2D_BYTES: Expect = Expect::clause("P→D transfer reconciles", "decode read bytes");

    fn failed(claim: &'static str, detail: &str) -> CaseResult {
        Err(Violation {
            claim,
            detail: detail.into(),
        }
        .into())
    }

    #[test]
    fn a_row_passes_on_its_clause() {
        let caught = judge_caught(
            failed(
                "P→D transfer reconciles",
                "decode read bytes 36864 ≠ prefill source_write bytes 32768",
            ),
            &P2D_BYTES,
        )
        .unwrap();
        assert_eq!(caught.claim, Claim::Clause("P→D transfer reconciles"));
    }

    #[test]
    fn a_row_fails_on_another_sub_check_of_its_clause() {
        let other = judge_caught(
            failed(
                "P→D transfer reconciles",
                "the decode shows no remote_deliver success: it did not pull the prefill's pages",
            ),
            &P2D_BYTES,
        )
        .unwrap_err();
        assert!(other.message.contains("not as expected"), "{other}");
    }

    #[test]
    fn a_row_fails_on_another_clause_with_the_same_words() {
        // The message holds every word the row expects, but another clause
        // failed: a substring match would have passed it.
        let result = failed(
            "reference tokens",
            "P→D transfer reconciles: decode read bytes were never compared",
        );
        let message = result.as_ref().unwrap_err().message.clone();
        assert!(
            message.contains("P→D transfer reconciles") && message.contains("decode read bytes")
        );
        let wrong = judge_caught(result, &P2D_BYTES).unwrap_err();
        assert!(
            wrong.message.contains("it failed with `reference tokens`"),
            "{wrong}"
        );
        // So does a failure named in prose only.
        let prose = Err(CaseError::new(
            "P→D transfer reconciles: decode read bytes 1 ≠ 2",
        ));
        assert!(judge_caught(prose, &P2D_BYTES).is_err());
    }

    #[test]
    fn a_no_response_row_fails_on_an_error_status() {
        let status = crate::client::ClientError::Status {
            request: "completion of f1".into(),
            url: "http://127.0.0.1:1/v1/completions".into(),
            status: 503,
            body: "no response from the worker".into(),
        };
        let dead_router = Expect::claim(Claim::Request(Request::NoResponse));
        let result = Err(CaseError::request(&status, "request f1 failed"));
        assert!(judge_caught(result, &dead_router).is_err());
    }

    #[test]
    fn a_row_fails_when_the_case_passes() {
        let passed = judge_caught(Ok(()), &P2D_BYTES).unwrap_err();
        assert!(passed.message.contains("the case PASSED"), "{passed}");
    }
}
