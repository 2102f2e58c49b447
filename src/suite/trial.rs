//! What a lane runs, one libtest trial each: a case of the test plan, or a
//! fault-matrix row (a case run with a fault on).

use crate::engine::{Applicability, Kind, Need, Topology};

use super::fault_row::FaultRow;
use super::{Case, CaseCtx, CaseResult};

#[derive(Clone, Copy)]
pub enum Trial {
    Case(Case),
    Row(&'static FaultRow),
}

impl Trial {
    /// The test plan's id, `TC-03` (a row: its case's).
    pub fn id(&self) -> &'static str {
        match self {
            Trial::Case(case) => case.id,
            Trial::Row(row) => row.case.id,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Trial::Case(case) => case.name,
            Trial::Row(row) => row.name,
        }
    }

    /// `TC-03::hinted_peer_transfer`.
    pub fn trial_name(&self) -> String {
        format!("{}::{}", self.id(), self.name())
    }

    /// Its evidence directory name under `cases/`, e.g. `TC-05-cold`.
    pub fn slug(&self) -> String {
        format!("{}-{}", self.id(), self.name())
    }

    /// Kills or replaces components (every row does): the suite restores
    /// the stack afterwards.
    pub fn destructive(&self) -> bool {
        match self {
            Trial::Case(case) => case.destructive,
            Trial::Row(_) => true,
        }
    }

    /// What the trial must have from the stack: its case's needs, and a
    /// row's own after them.
    pub fn needs(&self) -> Vec<Need> {
        match self {
            Trial::Case(case) => case.needs.to_vec(),
            Trial::Row(row) => row.case.needs.iter().chain(row.needs).copied().collect(),
        }
    }

    /// Whether the trial runs on `engine` on `topology`, or why not.
    pub fn applicability(&self, engine: Kind, topology: Topology) -> Applicability {
        engine.applicability(self.id(), &self.needs(), topology)
    }

    pub fn run(&self, ctx: &CaseCtx) -> CaseResult {
        match self {
            Trial::Case(case) => (case.run)(ctx),
            Trial::Row(row) => row.run(ctx),
        }
    }
}

impl From<Case> for Trial {
    fn from(case: Case) -> Self {
        Trial::Case(case)
    }
}

impl From<&'static FaultRow> for Trial {
    fn from(row: &'static FaultRow) -> Self {
        Trial::Row(row)
    }
}
