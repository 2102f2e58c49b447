//! Fault-matrix rows: a case run with a fault on, which passes only when the
//! case fails with the claim the row names.

use serde_json::json;

use super::{Case, CaseCtx, CaseError, CaseResult};

impl Case {
    /// A row: the case it targets (`id`), what it injects (`name`), how.
    /// Every row is destructive: the suite restores the stack after it.
    pub const fn fault_row(
        id: &'static str,
        name: &'static str,
        run: fn(&CaseCtx) -> CaseResult,
    ) -> Case {
        Case {
            id,
            name,
            destructive: true,
            run,
        }
    }
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
    match ctx.with_crashes(case(ctx)) {
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
