//! The source-stall latch (TC-11): reported as a fact when it happens, not
//! when it should not, and the peer's fallback when a latched source refuses.

use std::path::PathBuf;

use serde::Serialize;

use super::{Checks, Violation};

/// The clause of TC-11's long stop.
pub const LATCH_REPORTED: &str = "the source-stall latch is reported as a fact";

/// The source-stall latch, as a fact: which component, when, KVCR's words.
#[derive(Debug, Clone, Serialize)]
pub struct Latch {
    pub component: String,
    pub log: PathBuf,
    pub line_no: usize,
    /// The log line's own timestamp (its first two words).
    pub at: String,
    pub message: String,
    /// What the engine's `/state` says (`kvcr_source_stalled`); `None` on an
    /// engine that answers no `/state` (vLLM: the latch is KVCR's own log
    /// line, and the case records the state as not checked).
    pub state_stalled: Option<bool>,
}

/// Before any stop: the source has not latched already (in its startup or
/// an earlier case), or the case's stops would prove nothing.
pub fn expect_not_latched_yet(latch: Option<&Latch>) -> Result<(), Violation> {
    let mut c = Checks::new("the source is not latched before the case stops it");
    if let Some(l) = latch {
        c.check(false, || {
            format!(
                "{} had latched before the case: {}:{}: `{}`",
                l.component,
                l.log.display(),
                l.line_no,
                l.message
            )
        });
    }
    c.verdict()
}

/// A stop shorter than the timeout: no latch, the peer still read the blocks.
pub fn expect_no_latch(
    latch: Option<&Latch>,
    remote_blocks: u64,
    prefix_blocks: u64,
) -> Result<(), Violation> {
    let mut c = Checks::new("a stall shorter than operation_timeout_ms does not latch");
    c.check(latch.is_none(), || {
        format!(
            "the source latched after a short stop: {}",
            latch.map(|l| l.message.as_str()).unwrap_or_default()
        )
    })
    .check(remote_blocks >= prefix_blocks, || {
        format!("after the short stop the peer read {remote_blocks} of {prefix_blocks} blocks from the source")
    });
    c.verdict()
}

/// A stop longer than the timeout: the latch is reported by `component`,
/// as a log line and in the engine's state.
pub fn expect_latch(latch: Option<&Latch>, component: &str) -> Result<(), Violation> {
    let mut c = Checks::new(LATCH_REPORTED);
    match latch {
        None => {
            c.check(false, || {
                format!("{component} reported no source-stall latch after a stop longer than operation_timeout_ms")
            });
        }
        Some(l) => {
            c.check(l.component.starts_with(component), || {
                format!("the latch was reported by {}, not {component}", l.component)
            })
            .check(l.state_stalled != Some(false), || {
                format!(
                    "{component}'s /state does not say kvcr_source_stalled after `{}`",
                    l.message
                )
            });
        }
    }
    c.verdict()
}

/// What the peer did when a latched source refused its read.
#[derive(Debug, Clone, Serialize)]
pub struct Fallback {
    pub remote_deliver_failed: u64,
    pub remote_deliver_blocks: u64,
    pub computed_blocks: u64,
    pub prefix_blocks: u64,
}

/// The peer tried (the router hinted the source), was refused, and recomputed.
pub fn expect_fallback(f: &Fallback) -> Result<(), Violation> {
    let mut c = Checks::new("a peer of a latched source falls back correctly");
    c.check(f.remote_deliver_failed >= 1, || {
        "the peer attempted no remote delivery from the latched source (was it hinted?)".to_string()
    })
    .check(f.remote_deliver_blocks == 0, || {
        format!(
            "the latched source still served {} blocks",
            f.remote_deliver_blocks
        )
    })
    .check(f.computed_blocks >= f.prefix_blocks, || {
        format!(
            "the peer computed {} of the {} blocks it could not read",
            f.computed_blocks, f.prefix_blocks
        )
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latch(stalled: Option<bool>) -> Latch {
        Latch {
            component: "worker-A".into(),
            log: "worker-A.log".into(),
            line_no: 3,
            at: "2026-12-01 13:00:00,000".into(),
            message: "KVCR source progress stalled for 3012.0 ms (timeout: 2000 ms)".into(),
            state_stalled: stalled,
        }
    }

    #[test]
    fn no_latch_after_a_short_stop() {
        assert!(expect_no_latch(None, 4, 4).is_ok());
        assert!(expect_no_latch(Some(&latch(Some(true))), 4, 4)
            .unwrap_err()
            .detail
            .contains("latched after a short stop"));
        assert!(expect_no_latch(None, 0, 4).is_err());
    }

    #[test]
    fn a_source_latched_before_the_case_is_named() {
        assert!(expect_not_latched_yet(None).is_ok());
        let v = expect_not_latched_yet(Some(&latch(None))).unwrap_err();
        assert!(
            v.detail
                .contains("worker-A had latched before the case: worker-A.log:3"),
            "{v}"
        );
    }

    #[test]
    fn the_latch_must_be_reported() {
        assert!(expect_latch(Some(&latch(Some(true))), "worker-A").is_ok());
        assert!(expect_latch(None, "worker-A")
            .unwrap_err()
            .detail
            .contains("reported no source-stall latch"));
        assert!(expect_latch(Some(&latch(Some(false))), "worker-A").is_err());
        // No /state (vLLM): the log line alone is the report.
        assert!(expect_latch(Some(&latch(None)), "worker-A").is_ok());
    }

    #[test]
    fn the_fallback_recomputes() {
        let ok = Fallback {
            remote_deliver_failed: 1,
            remote_deliver_blocks: 0,
            computed_blocks: 4,
            prefix_blocks: 4,
        };
        assert!(expect_fallback(&ok).is_ok());
        assert!(expect_fallback(&Fallback {
            remote_deliver_failed: 0,
            ..ok.clone()
        })
        .is_err());
        assert!(expect_fallback(&Fallback {
            remote_deliver_blocks: 4,
            ..ok.clone()
        })
        .is_err());
        assert!(expect_fallback(&Fallback {
            computed_blocks: 0,
            ..ok
        })
        .is_err());
    }
}
