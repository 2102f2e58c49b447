//! What can go wrong in a comparison, each message saying what to do.

use std::path::PathBuf;

/// A comparison error.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// An odd or too short round plan.
    #[error("a comparison needs an even number of rounds, at least 2 (one base and one head round per pair), got {0}")]
    Rounds(u32),
    /// A rule or bootstrap setting out of range.
    #[error("{0}")]
    Setting(String),
    /// Base and head runs that cannot be paired.
    #[error("pairing needs as many head runs as base runs: {base} base, {head} head")]
    Unpaired {
        /// Base runs given.
        base: usize,
        /// Head runs given.
        head: usize,
    },
    /// Rounds whose runs did not start in the plan's order.
    #[error(
        "the runs do not interleave: {message}. Give the base runs and, after --head, the head \
         runs in pair order; pair k's runs must have started side by side, in the order \
         base 0, head 0, head 1, base 1, base 2, head 2, … (ABBA, as `kvcr-e2e compare` \
         runs them)"
    )]
    Interleave {
        /// Which rounds, and when they started.
        message: String,
    },
    /// A results.json that cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A results.json that is not one.
    #[error("{path} is not a phase1 results.json: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Writing the outputs failed.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A chart could not be drawn.
    #[error("cannot draw the chart of {figure}: {message}")]
    Chart {
        /// The figure.
        figure: String,
        /// Why.
        message: String,
    },
}
