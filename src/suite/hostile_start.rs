//! A KVCR component started alone where it must refuse
//! (`ctx.hostile_start()`, TC-16): the stack's own launch of a Guard
//! service or a worker, in a mount namespace of its own with the hostile
//! condition applied and verified there, polled until it exits or the
//! start-up timeout passes.

use crate::stack::{ConfigRow, Hostility, Sabotage};
use crate::verdict::hostile_start::StartAttempt;
use crate::verdict::refused_config::ConfigAttempt;

use super::{CaseCtx, CaseError};

/// Hostile starts (`ctx.hostile_start()`).
pub struct HostileStart<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> HostileStart<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// Starts the component `hostility` names into it and returns what it
    /// did, recorded as `hostile-<word>.json`.
    pub fn attempt(
        &self,
        hostility: Hostility,
        sabotage: Sabotage,
    ) -> Result<StartAttempt, CaseError> {
        let component = if hostility.starts_a_worker() {
            "a worker"
        } else {
            "a Guard service"
        };
        self.ctx
            .doing(format!("starting {component} with {}", hostility.word()))?;
        let attempt = self.ctx.stack.attempt_hostile_start(hostility, sabotage)?;
        self.ctx
            .record(&format!("hostile-{}.json", hostility.word()), &attempt);
        self.ctx
            .measure(&format!("{}_ms", hostility.word()), attempt.elapsed_ms);
        Ok(attempt)
    }

    /// Starts `row`'s component with the configuration it must refuse and
    /// returns what it did, recorded as `refused-<name>.json`.
    pub fn refused_config(
        &self,
        row: &ConfigRow,
        sabotage: Sabotage,
    ) -> Result<ConfigAttempt, CaseError> {
        self.ctx
            .doing(format!("starting a KVCR component with {}", row.settings()))?;
        let attempt = self.ctx.stack.attempt_refused_config(row, sabotage)?;
        self.ctx
            .record(&format!("refused-{}.json", row.name), &attempt);
        self.ctx
            .measure(&format!("{}_ms", row.name), attempt.start.elapsed_ms);
        Ok(attempt)
    }
}
