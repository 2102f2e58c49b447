//! The phase 1 suite as a libtest-mimic program: cases registered as trials,
//! one stack provisioned on first need and shared, one reference phase,
//! records gathered from every trial, then JUnit, results, report, teardown.
//!
//! ```no_run
//! use kvcr_e2e::suite::{Suite, Trial};
//! fn main() -> std::process::ExitCode {
//!     let trials: Vec<Trial> = kvcr_e2e::cases::PHASE1.iter().copied().map(Trial::Case).collect();
//!     Suite::main("phase1", trials, &["--geometry".into(), "hybrid".into()])
//! }
//! ```
//!
//! A test target does not call it itself: it names its lane
//! ([`crate::lanes`]), whose row says which trials and which stack.

mod activity;
mod ask;
mod at_rest;
mod case;
mod case_evidence;
pub mod claim;
mod crashes;
mod ctx;
mod deadline;
mod disagg;
mod discovery_faults;
mod engine_fault;
mod expected;
mod fault_row;
mod faults;
pub mod foreign_peer;
mod guard;
mod guard_costs;
mod hostile_start;
mod ignore;
mod kvcr_benches;
mod kvcr_checks;
mod kvcr_coverage;
mod lifecycle;
mod link_degradation;
mod load;
mod log_audit;
mod neighbours;
mod observe;
mod perf;
mod pressure;
mod pressure_probes;
mod readings;
mod records;
pub mod replay;
mod request_log;
pub mod requests;
mod restore;
mod shared_prefix;
mod signals;
mod trial;
mod workload;

pub use ask::Answer;
pub use case::{Case, CaseError, CaseResult};
pub use claim::{clause, Claim, Expect};
pub use ctx::{CaseCtx, Eviction};
pub use disagg::Disagg;
pub use discovery_faults::{cannot_step_the_clock, drop_out_of_discovery, WallClockStep};
pub use engine_fault::EngineFault;
pub use fault_row::{caught, expect_red, judge_caught, Fault, FaultRow, RowDoc, Workers};
pub use faults::{EngineFaults, Faults, LinkCut, Stopped, ThreadFaults};
pub use guard::{GuardAttempt, GuardFollower, GuardView, Guards};
pub use hostile_start::HostileStart;
pub use ignore::{machine_cannot_run_trial, machine_trial, require_all_from_env, Skip};
pub use kvcr_benches::{BenchAnswer, KvcrBenchKind, TimedBench};
pub use lifecycle::{install_teardown_on_signal, Suite};
pub use link_degradation::{
    listener_of, AppliedCondition, ConditionsOffTheLink, LinkDegradation, RemovedCondition,
};
pub use load::{Load, LoadRequest, LoadRun};
pub use neighbours::registry_dir;
pub use observe::{Observe, PeerTransferDeltas};
pub use perf::{Measured, Perf};
pub use pressure::{Latch, LogMark, LogMarks, Pressure};
pub use pressure_probes::{ClaimProbe, StoppedWorker};
pub use readings::PrefillAccounting;
pub use shared_prefix::{FanOutReading, FanOutTarget, Sending, SharedPrefix};
pub use trial::Trial;
pub use workload::{Replayed, Workload};
