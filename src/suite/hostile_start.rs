//! A KVCR component started alone where it must refuse
//! (`ctx.hostile_start()`, TC-16): the stack's own launch of a Guard
//! service or a worker, in a mount namespace of its own with the hostile
//! condition applied and verified there, polled until it exits or the
//! start-up timeout passes.

use crate::stack::{Hostility, Sabotage};
use crate::verdict::hostile_start::StartAttempt;

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
}
