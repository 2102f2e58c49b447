//! Driving a phase1 lane as a child process: build its test binary once, run
//! it with harness flags, a run directory of our choosing and trial filters,
//! then read what that run wrote (`results.json`, `setup-error.txt`).
//!
//! The mutation lane (`kvcr-e2e mutants`) and the A/B comparison
//! (`kvcr-e2e compare`) are both loops over such children.
//!
//! ```no_run
//! use kvcr_e2e::drive::{self, Phase1Child};
//! # fn main() -> Result<(), drive::DriveError> {
//! let repo = std::path::Path::new(".");
//! let binary = drive::test_binary(repo, "phase1")?;
//! let child = Phase1Child {
//!     binary,
//!     repo_root: repo.to_path_buf(),
//!     flags: vec!["--kvcr".into(), "pypi:0.1.1".into()],
//!     filters: vec!["TC-01::generation_correctness".into()],
//!     exact: true,
//!     run_base: "target/drive/one".into(),
//! };
//! let exit = child.run("target/drive/one/child.log".as_ref())?;
//! let read = drive::ReadRun::from_base(&child.run_base)?;
//! # let _ = (exit, read);
//! # Ok(()) }
//! ```

mod binary;
mod child;
mod errors;
mod read;
pub mod workload;

pub use binary::{executable_from_cargo_json, test_binary};
pub use child::{check_harness_flags, ChildExit, Phase1Child};
pub use errors::DriveError;
pub use read::{find_run_root, KvcrSeen, ReadRun, TrialOutcome, TrialRecord};
