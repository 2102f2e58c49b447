//! A line a parser could not read: kept as data, never a panic, never an
//! error that loses the rest of the input.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::fields::excerpt;

/// Longest line excerpt kept in a problem record.
pub const PROBLEM_EXCERPT_BYTES: usize = 240;

/// One malformed line of some telemetry source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseProblem {
    /// Where: `line 12` of a scrape, or `byte 4096` of a log file.
    pub at: String,
    /// What was expected and what was seen.
    pub reason: String,
    /// The offending line (cut to [`PROBLEM_EXCERPT_BYTES`]).
    pub line: String,
}

impl ParseProblem {
    /// A problem at `at`, with `reason`, about `line`.
    pub fn new(at: impl Into<String>, reason: impl Into<String>, line: &str) -> Self {
        ParseProblem {
            at: at.into(),
            reason: reason.into(),
            line: excerpt(line, PROBLEM_EXCERPT_BYTES),
        }
    }
}

impl fmt::Display for ParseProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {:?}", self.at, self.reason, self.line)
    }
}
