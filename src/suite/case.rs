//! A case: an ordinary function over a [`CaseCtx`], plus what the suite needs
//! to know to run it.

use std::fmt;
use std::path::PathBuf;

use crate::verdict::Violation;

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
    pub run: fn(&CaseCtx) -> CaseResult,
}

/// Why a case failed: the claim, the numbers, and the evidence file to open.
#[derive(Debug, Clone)]
pub struct CaseError {
    pub message: String,
    pub evidence: Option<PathBuf>,
}

impl CaseError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            evidence: None,
        }
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
        CaseError::new(v.to_string())
    }
}

impl From<crate::telemetry::Unreadable> for CaseError {
    fn from(e: crate::telemetry::Unreadable) -> Self {
        CaseError::new(e.to_string())
    }
}

impl From<crate::wait::WaitError> for CaseError {
    fn from(e: crate::wait::WaitError) -> Self {
        CaseError::new(e.to_string())
    }
}

impl From<crate::stack::StackError> for CaseError {
    fn from(e: crate::stack::StackError) -> Self {
        CaseError::new(e.to_string())
    }
}

impl From<crate::prompts::OutOfPrompts> for CaseError {
    fn from(e: crate::prompts::OutOfPrompts) -> Self {
        CaseError::new(e.to_string())
    }
}
