//! The log audit: after each case that leaves the stack whole (not
//! destructive, nothing crashed), the logs of the stack's own components
//! (the frontend, the Guard services, the workers) hold none of KVCR's bad
//! lines ([`BadLine`]: a Python traceback, the source-stall latch, `pool
//! recovery disabled`, a failed Guard or placement) since the last audit.
//! A KVCR that swallows an exception it should never meet, logs it and
//! serves on, fails there, whichever case ran it.
//!
//! The windows chain: the first audit reads each log from its start (the
//! stack's start-up included; a run attached to a kept stack, from its
//! first case), each later one from where the last ended. A destructive
//! case, or one that crashed something, is not audited, and the next
//! window begins when the next case does: what a kill or a restore logs is
//! the case's own to judge. A case that scans its own window
//! (`ctx.pressure().expect_no_bad_lines_since`) names the bad lines it
//! expects; the audit allows those. Components a case starts apart from
//! the stack (TC-16's hostile starts, the second stacks of TC-23 and TC-24)
//! are the case's to judge.

use std::cell::RefCell;
use std::path::PathBuf;

use serde_json::json;

use crate::stack::Stack;
use crate::verdict::log_scan::{self, BadLine};

use super::pressure::LogMarks;
use super::pressure_probes::scan_files_between;
use super::{CaseCtx, CaseError, CaseResult};

/// One case's window of the stack's logs.
#[derive(Default)]
pub(super) struct LogAudit {
    /// Where the window begins (the last audit's end, or the case's start).
    from: RefCell<LogMarks>,
    /// The bad lines the case said it expects.
    expected: RefCell<Vec<BadLine>>,
}

impl LogAudit {
    /// The window begins at `from`.
    pub fn begin(&self, from: LogMarks) {
        *self.from.borrow_mut() = from;
    }

    /// The case expects bad lines of the kinds `expected` in its window.
    pub fn expect(&self, expected: &[BadLine]) {
        self.expected.borrow_mut().extend_from_slice(expected);
    }
}

/// Where each of `stack`'s component logs stands now.
pub(super) fn marks_now(stack: &Stack) -> LogMarks {
    LogMarks(
        stack
            .component_logs()
            .into_iter()
            .map(|p| {
                let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                (p, len)
            })
            .collect(),
    )
}

/// `result`, failed by a bad line in a stack component's log in the
/// case's window when the case passed; and where the next window begins.
/// Recorded as `log-audit.json`.
pub(super) fn judge(ctx: &CaseCtx, result: CaseResult) -> (CaseResult, LogMarks) {
    let to = marks_now(ctx.stack);
    if result.is_err() {
        return (result, to);
    }
    let from = ctx.log_audit.from.borrow().clone();
    let logs: Vec<PathBuf> = to.0.keys().cloned().collect();
    let expected = ctx.log_audit.expected.borrow().clone();
    let found = match scan_files_between(&logs, &from, &to) {
        Ok(found) => found,
        Err(e) => return (Err(CaseError::new(e)), to),
    };
    let judged = ctx.check(
        "log-audit.json",
        &json!({"from": from, "to": to, "expected": expected, "found": found}),
        log_scan::expect_no_bad_lines(&found, &expected),
    );
    (judged, to)
}
