//! The phase 1 suite as a libtest-mimic program: cases registered as trials,
//! one stack provisioned on first need and shared, one reference phase,
//! records gathered from every trial, then JUnit, results, report, teardown.
//!
//! ```no_run
//! use kvcr_e2e::suite::{Case, Suite};
//! fn main() -> std::process::ExitCode {
//!     let cases: Vec<Case> = Vec::new(); // e2e/phase1/cases
//!     Suite::main("phase1", cases)
//! }
//! ```

mod activity;
mod case;
pub mod commands;
mod ctx;
mod deadline;
mod disagg;
mod fault_row;
mod faults;
pub mod guard;
mod ignore;
mod interval;
mod kvcr_checks;
mod lifecycle;
pub mod live_commands;
pub mod load;
mod neighbours;
pub mod observe;
mod perf;
pub mod pressure;
mod records;
pub mod replay;
pub mod requests;
mod signals;

pub use case::{Case, CaseError, CaseResult};
pub use ctx::{Answer, CaseCtx};
pub use fault_row::{caught, expect_red};
pub use faults::{EngineFaults, LinkCut, Stopped};
pub use ignore::{machine_cannot_run, machine_cannot_run_trial, require_all_from_env, Skip};
pub use lifecycle::Suite;
