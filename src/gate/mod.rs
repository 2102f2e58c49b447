//! `kvcr-e2e gate --kvcr <build> [--base <build>]`: the command a KVCR
//! change runs. The functional lanes with that build, one after the other,
//! then `compare` against the base (default: the locks' release), into one
//! summary, one JUnit file and one exit code (0 pass, 1 a failed lane or a
//! regression, 2 nothing compared, 3 no verdict; [`outcome`]).
//!
//! ```no_run
//! use kvcr_e2e::gate::{self, GateArgs, LocalSteps};
//! # fn main() -> Result<(), String> {
//! let repo = std::path::Path::new(".");
//! let args = GateArgs::parse(
//!     &["--kvcr".into(), "fixtures/kvcr-slowdowns/promotion.diff".into()],
//!     &["phase1", "phase2", "phase2_g3", "phase3"],
//!     &["phase1", "phase2", "phase2_g3", "phase3"],
//! )?;
//! let mut steps = LocalSteps::prepare(repo, &args)?;    // builds resolve, binaries built
//! let report = gate::run_gate(&mut steps, &args, "target/gate/x".as_ref());
//! gate::write_outputs(&report, "target/gate/x".as_ref())?;
//! print!("{}", gate::render_summary(&report));
//! std::process::exit(report.verdict().exit_code().into());
//! # }
//! ```

mod args;
mod outcome;
mod report;
mod run;

#[cfg(test)]
mod tests;

pub use args::{takes_a_build, GateArgs, COMPARE_FLAGS, DEFAULT_LANES};
pub use outcome::{CompareOutcome, GateReport, GateVerdict, LaneEvidence, LaneResult, LaneStatus};
pub use report::{
    junit_report, render_json, render_page, render_summary, write_outputs, GateWritten,
    GATE_SCHEMA_VERSION, LANES_SUITE,
};
pub use run::{hold_machine, lane_runs, run_gate, run_lane_child, LaneRun, LocalSteps, Steps};
