//! Verdicts: pure functions from observed numbers to pass or a message that
//! names the claim, quotes the numbers, and says where the evidence is.
//!
//! Cases gather observations (tokens, telemetry deltas, Guard events) and ask
//! a verdict; they never do arithmetic on metric maps inline. Every verdict
//! has unit tests that show it failing.

pub mod api_misuse;
pub mod at_rest;
pub mod concurrent;
pub mod deadline_storm;
pub mod degraded_link;
pub mod disagg;
pub mod disk;
pub mod engine_memory;
pub mod fan_out;
pub mod findings;
pub mod foreign_control;
pub mod full_tiers;
pub mod g3_read_bench;
pub mod guard;
pub mod hostile_start;
pub mod interval;
pub mod journal;
pub mod key_history;
pub mod kvcr_bench;
pub mod kvcr_pull_bench;
pub mod ledger;
pub mod load;
pub mod local;
pub mod log_scan;
pub mod partition;
pub mod peer_metadata;
pub mod policy;
pub mod pressure;
pub mod query_sampling;
pub mod refused_config;
pub mod refused_hint;
pub mod restart;
pub mod scale;
pub mod service;
pub mod shared_pin;
pub mod source_close;
pub mod stall;
pub mod start_leftovers;
pub mod stranger;
mod timed_ops;
pub mod tokens;
pub mod transfer;
pub mod workload;

/// A failed claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which claim of the test plan failed, e.g. "peer transfer reconciles".
    pub claim: &'static str,
    /// What was expected and what was seen, with numbers.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.claim, self.detail)
    }
}

/// Collects every violated check of one claim, so a failure lists them all.
pub(crate) struct Checks {
    claim: &'static str,
    failed: Vec<String>,
}

impl Checks {
    pub(crate) fn new(claim: &'static str) -> Self {
        Self {
            claim,
            failed: Vec::new(),
        }
    }

    /// Records `detail` unless `ok`.
    pub(crate) fn check(&mut self, ok: bool, detail: impl FnOnce() -> String) -> &mut Self {
        if !ok {
            self.failed.push(detail());
        }
        self
    }

    pub(crate) fn verdict(&self) -> Result<(), Violation> {
        if self.failed.is_empty() {
            Ok(())
        } else {
            Err(Violation {
                claim: self.claim,
                detail: self.failed.join("; "),
            })
        }
    }
}

/// Test help: the CPU engine's probe file `probe` (under
/// `fixtures/cpu-engine/cpu_engine/`) lists its attempts as `("name", ...`
/// tuples in the order of `names`, the order a verdict's table expects.
#[cfg(test)]
pub(crate) fn assert_probe_order<'a>(probe: &str, names: impl IntoIterator<Item = &'a str>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/cpu-engine/cpu_engine")
        .join(probe);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut at = 0;
    for name in names {
        let found = text[at..]
            .find(&format!("(\"{name}\","))
            .unwrap_or_else(|| panic!("{name} is not {probe}'s next attempt"));
        at += found + 1;
    }
}
