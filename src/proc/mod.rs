//! Child processes the harness owns: each one runs in its own process group,
//! writes to its own log file, and cannot outlive the harness.
//!
//! ```no_run
//! use kvcr_e2e::proc::{ProcessSpec, Supervised};
//! # fn main() -> Result<(), kvcr_e2e::proc::ProcError> {
//! let spec = ProcessSpec::new("guard", "python3", "/tmp/guard.log").arg("-V");
//! let guard = Supervised::spawn(&spec)?;
//! let report = guard.stop(std::time::Duration::from_secs(3));
//! # Ok(()) }
//! ```
//!
//! Three layers keep a run from leaving processes behind:
//! 1. a normal teardown stops every group (SIGTERM, grace, SIGKILL);
//! 2. each child gets `PR_SET_PDEATHSIG(SIGKILL)`, so it dies with the harness;
//! 3. the [`reaper`] — a tiny shell that outlives the harness — SIGKILLs every
//!    group it was told about when the harness's end of its pipe closes, which
//!    also covers grandchildren and a SIGKILLed harness.

pub mod clock_watch;
pub mod link_condition;
pub mod live_runs;
pub mod net_delay;
pub mod netns;
pub mod procfs;
pub mod reaper;
mod spawner;
mod supervised;
pub mod ucx;

pub use supervised::{accepts, ProcError, ProcessSpec, StopReport, Supervised};
