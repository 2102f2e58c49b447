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
mod interval;
mod lifecycle;
pub mod load;
pub mod observe;
mod perf;
pub mod pressure;
mod records;
mod requests;
mod signals;

pub use case::{Case, CaseError, CaseResult};
pub use ctx::{Answer, CaseCtx};
pub use fault_row::{caught, expect_red};
pub use faults::{EngineFaults, LinkCut, Stopped};
pub use lifecycle::Suite;
