//! Fault-matrix rows as data: a case run with one fault on, which passes
//! only when the case fails with the claim the row names. A row whose fault
//! needs its own arrangement (a second stack, a check after the failure)
//! names a function instead ([`Fault::Arranged`]).

use std::time::Duration;

use serde_json::json;

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
    /// Whether the fault comes from outside the engine, so that any engine
    /// can take it (no CPU-engine switch).
    pub fn engine_neutral(&self) -> bool {
        matches!(
            self,
            Fault::KillFrontend
                | Fault::StopGuard
                | Fault::ReplacementDigest
                | Fault::DropOutOfDiscovery(_)
                | Fault::WallClockStep(_)
        )
    }

    /// Why this machine cannot inject the fault, if it cannot.
    pub fn unavailable_here(&self) -> Option<String> {
        match self {
            Fault::WallClockStep(_) => super::cannot_step_the_clock(),
            _ => None,
        }
    }
}

/// One row of a fault matrix: `case` run with `fault` on must fail with a
/// message containing `claim`. docs/fault-matrix.md quotes each whole
/// message (`tests/fault_matrix_doc.rs` keeps the two in step).
#[derive(Clone, Copy)]
pub struct FaultRow {
    /// The case that must catch the fault; the row's trial is
    /// `<its id>::<name>`.
    pub case: Case,
    pub name: &'static str,
    pub fault: Fault,
    /// Verbatim part of the message the case must fail with.
    pub claim: &'static str,
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
                expect_red(ctx, self.case.run, self.claim)
            }
            Fault::KillFrontend => {
                faults.kill_frontend()?;
                expect_red(ctx, self.case.run, self.claim)
            }
            Fault::StopGuard => {
                let _stopped = faults.stop_guard(&*ctx.worker("A")?)?;
                expect_red(ctx, self.case.run, self.claim)
            }
            Fault::Replacement(switch) => {
                faults.on_next_replacement(&[switch.to_string()]);
                let result = expect_red(ctx, self.case.run, self.claim);
                // The replacement carries the switch from its launch.
                faults.clear_engine(&["A"]);
                result
            }
            Fault::ReplacementDigest => {
                faults.on_next_replacement(&[crate::stack::DIGEST_MISMATCH.to_string()]);
                expect_red(ctx, self.case.run, self.claim)
            }
            Fault::DropOutOfDiscovery(slot) => {
                super::drop_out_of_discovery(ctx, slot)?;
                expect_red(ctx, self.case.run, self.claim)
            }
            Fault::WallClockStep(seconds) => {
                // Stepped back once the dropout is verified: the case runs
                // on the broken stack with the clock right again.
                drop(super::WallClockStep::until_a_dropout(
                    ctx,
                    Duration::from_secs(seconds),
                )?);
                expect_red(ctx, self.case.run, self.claim)
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

/// Runs `case` and passes only if it fails with a message containing `claim`.
pub fn expect_red(ctx: &CaseCtx, case: fn(&CaseCtx) -> CaseResult, claim: &str) -> CaseResult {
    caught(ctx, case, claim).map(drop)
}

/// The failure of `case`, when it names `claim` (recorded in `caught.json`).
pub fn caught(
    ctx: &CaseCtx,
    case: fn(&CaseCtx) -> CaseResult,
    claim: &str,
) -> Result<CaseError, CaseError> {
    match ctx.crashes.judge(ctx.stack, &ctx.evidence, case(ctx)) {
        Ok(()) => Err(CaseError::new(format!(
            "the case PASSED with the fault on: its verdict cannot catch this fault (expected a failure naming `{claim}`)"
        ))),
        Err(e) if e.message.contains(claim) => {
            ctx.record("caught.json", &json!({"expected_claim": claim, "message": e.to_string()}));
            Ok(e)
        }
        Err(e) => Err(CaseError::new(format!(
            "the case failed, but not with the expected claim `{claim}`: {e}"
        ))),
    }
}
