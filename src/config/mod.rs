//! Run settings: the checked-in default profile ← an optional profile
//! (`--profile NAME|PATH`) ← `PHASE1_*` environment ← harness flags (later wins).
//!
//! ```no_run
//! use kvcr_e2e::config::{self, Env};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (harness, libtest_argv) = config::split_args(std::env::args())?;
//! if harness.help || harness.help_harness {
//!     print!("{}", config::harness_help());
//!     if harness.help_harness { return Ok(()); }
//! }
//! let resolved = config::resolve(&harness, &Env::from_process()?)?;
//! for w in &resolved.warnings { eprintln!("warning: {w}"); }
//! let settings = resolved.settings;
//! let why = settings.engine.supports(kvcr_e2e::engine::Need::Guard, settings.topology);
//! // let args = libtest_mimic::Arguments::from_iter(libtest_argv);
//! # let _ = (libtest_argv, why); Ok(())
//! # }
//! ```
//!
//! Every setting has one row in [`keys::KEYS`]: its profile key
//! (`perf_evict_filler`), environment twin (`PHASE1_PERF_EVICT_FILLER`) and
//! flag (`--perf-evict-filler`). Errors ([`ConfigError`]) name the flag,
//! variable or profile key (with file and line), the value seen, and what is
//! accepted.

mod args;
pub mod command_flags;
mod env;
mod errors;
pub mod keys;
mod log_level;
mod origin;
mod profile;
pub mod redact;
mod resolve;
mod settings;
mod sweep_mode;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub use crate::pyenv::KvcrSpec;
pub use args::{split_args, take_filters, Filters, FlagValue, HarnessArgs};
pub use env::Env;
pub use errors::ConfigError;
pub use keys::harness_help;
pub use log_level::LogLevel;
pub use origin::Origin;
pub use profile::{Entry, Profile, BUILTIN as BUILTIN_PROFILES, DEFAULT_PROFILE};
pub use redact::{redacted_env, Redactor};
pub use resolve::{resolve, Resolved};
pub use settings::{PromptProfile, Settings, WorkloadSettings};
pub use sweep_mode::SweepMode;

impl Settings {
    /// Resolves settings from the process's argv-derived harness flags and
    /// environment (see [`resolve`]).
    pub fn from_process(args: &HarnessArgs) -> Result<Resolved, ConfigError> {
        resolve(args, &Env::from_process()?)
    }
}
