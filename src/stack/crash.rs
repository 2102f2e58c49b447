//! Components that exited on their own while the stack was in use: a
//! crash, not a kill of this harness.

use std::sync::Arc;

use serde::Serialize;

use super::{exit_cause, Stack};

/// A component that exited on its own while the stack was in use.
#[derive(Debug, Clone, Serialize)]
pub struct Crash {
    pub name: String,
    pub status: String,
    /// The last exceptions of its log (`exit_cause`), when it has any.
    pub cause: Option<String>,
    pub log: std::path::PathBuf,
}

impl std::fmt::Display for Crash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} exited on its own ({})", self.name, self.status)?;
        if let Some(cause) = &self.cause {
            write!(f, ": {cause}")?;
        }
        write!(f, " (log: {})", self.log.display())
    }
}

impl Stack {
    /// Every current component (frontend, Guard services, workers) that
    /// exited on its own: a crash, not a kill of this harness. Each names
    /// its exit status and the cause its log gives (its last exceptions).
    pub fn crashed_components(&self) -> Vec<Crash> {
        let frontend = self.frontend();
        let workers = self.workers();
        std::iter::once(frontend.as_ref())
            .chain(self.guards.iter().map(Arc::as_ref))
            .chain(workers.iter().map(|w| &w.process))
            .filter_map(|p| {
                let status = p.exited_on_its_own()?;
                let tail = p.log_tail(exit_cause::LINES_SCANNED);
                Some(Crash {
                    name: p.name().to_string(),
                    status: status.to_string(),
                    cause: exit_cause::startup_cause(&tail),
                    log: p.log_path().to_path_buf(),
                })
            })
            .collect()
    }
}
