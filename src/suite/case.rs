//! A case: an ordinary function over a [`CaseCtx`], plus what the suite needs
//! to know to run it.

use std::fmt;
use std::path::PathBuf;

use crate::client::ClientError;
use crate::engine::Need;
use crate::verdict::Violation;

use super::claim::{Claim, Request, Startup};
use super::CaseCtx;

pub type CaseResult = Result<(), CaseError>;

/// One registered case (or one arm of a case).
#[derive(Clone, Copy)]
pub struct Case {
    /// The test plan's id, `TC-03`.
    pub id: &'static str,
    /// What it shows, `hinted_peer_transfer`; the trial is `TC-03::hinted_peer_transfer`.
    pub name: &'static str,
    /// Kills or replaces components; the suite restores the stack afterwards.
    pub destructive: bool,
    /// What it must have from the stack: where the engine does not give one
    /// on the topology, the trial is ignored with the engine's reason
    /// ([`crate::engine::Kind::applicability`]).
    pub needs: &'static [Need],
    /// What it checks only where the stack gives it: elsewhere that check is
    /// recorded "not checked" with the engine's reason
    /// ([`CaseCtx::supports`]).
    pub optional: &'static [Need],
    pub run: fn(&CaseCtx) -> CaseResult,
}

/// Why a case failed: the claim, the numbers, and the evidence file to open.
#[derive(Debug, Clone)]
pub struct CaseError {
    /// The whole message, as the user reads it.
    pub message: String,
    pub evidence: Option<PathBuf>,
    /// Which clause failed (kept when the message is given context).
    pub claim: Claim,
    /// What that clause said: its part of the message.
    pub detail: String,
}

impl CaseError {
    /// A failure named in prose only ([`Claim::Unnamed`]).
    pub fn new(message: impl Into<String>) -> Self {
        let message = message.into();
        Self::claimed(Claim::Unnamed, message.clone(), message)
    }

    /// A failure of `claim`, whose own part of `message` is `detail`.
    pub fn claimed(claim: Claim, detail: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            evidence: None,
            claim,
            detail: detail.into(),
        }
    }

    /// The case's own clause `clause` failed: `<clause>: <detail>`.
    pub fn clause(clause: &'static str, detail: impl Into<String>) -> Self {
        Violation {
            claim: clause,
            detail: detail.into(),
        }
        .into()
    }

    /// The harness could not inject or verify its fault:
    /// `fault not applied: <detail>`.
    pub fn fault_not_applied(detail: impl Into<String>) -> Self {
        let detail = detail.into();
        let message = format!("fault not applied: {detail}");
        Self::claimed(Claim::FaultNotApplied, detail, message)
    }

    /// A request failed with `e`: `<context>: <e>`.
    pub fn request(e: &ClientError, context: impl fmt::Display) -> Self {
        Self::request_with(e, context, "")
    }

    /// [`CaseError::request`] with `more` said after the error.
    pub fn request_with(e: &ClientError, context: impl fmt::Display, more: &str) -> Self {
        let detail = format!("{e}{more}");
        Self::claimed(
            Claim::Request(Request::of(e)),
            detail.clone(),
            format!("{context}: {detail}"),
        )
    }

    /// Points the failure at an evidence file (kept if one is already named).
    pub fn with_evidence(mut self, path: impl Into<PathBuf>) -> Self {
        if self.evidence.is_none() {
            self.evidence = Some(path.into());
        }
        self
    }
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(path) = &self.evidence {
            write!(f, " (evidence: {})", path.display())?;
        }
        Ok(())
    }
}

impl From<Violation> for CaseError {
    fn from(v: Violation) -> Self {
        CaseError::claimed(Claim::Clause(v.claim), v.detail.clone(), v.to_string())
    }
}

/// The failure `e` states in full, as `claim`.
fn stated(claim: Claim, e: impl ToString) -> CaseError {
    let message = e.to_string();
    CaseError::claimed(claim, message.clone(), message)
}

impl From<crate::telemetry::NotReported> for CaseError {
    fn from(e: crate::telemetry::NotReported) -> Self {
        stated(Claim::NotReported, e)
    }
}

impl From<crate::telemetry::Unreadable> for CaseError {
    fn from(e: crate::telemetry::Unreadable) -> Self {
        match e {
            crate::telemetry::Unreadable::NotReported(e) => e.into(),
            problems => stated(Claim::UntrustedScrape, problems),
        }
    }
}

impl From<crate::wait::WaitError> for CaseError {
    fn from(e: crate::wait::WaitError) -> Self {
        let claim = if e.aborted {
            Claim::GaveUp
        } else {
            Claim::TimedOut
        };
        stated(claim, e)
    }
}

impl CaseError {
    /// A stack's start failed with `e`.
    pub fn startup(e: &crate::stack::ProvisionError) -> Self {
        stated(Claim::Startup(Startup::of(e)), e)
    }
}

impl From<crate::stack::ProvisionError> for CaseError {
    fn from(e: crate::stack::ProvisionError) -> Self {
        CaseError::startup(&e)
    }
}

impl From<crate::stack::StackError> for CaseError {
    fn from(e: crate::stack::StackError) -> Self {
        use crate::stack::StackError;
        match e {
            StackError::Provision(e) => e.into(),
            StackError::FaultNotApplied(_) => stated(Claim::FaultNotApplied, e),
            StackError::NoSuchWorker(_) | StackError::ReplacementNotStarted(_) => {
                stated(Claim::Stack, e)
            }
        }
    }
}

impl From<crate::prompts::OutOfPrompts> for CaseError {
    fn from(e: crate::prompts::OutOfPrompts) -> Self {
        stated(Claim::OutOfPrompts, e)
    }
}
