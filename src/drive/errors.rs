//! What can go wrong while driving a phase1 child.

use std::path::PathBuf;

/// A driver error; each message says what to look at.
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    /// `cargo` could not be started or the build failed.
    #[error("building the `{target}` test binary failed: {message}")]
    Build {
        /// The test target.
        target: String,
        /// cargo's own words, or why it did not start.
        message: String,
    },
    /// The child could not be started or waited for.
    #[error("cannot run {binary}: {message}")]
    Spawn {
        /// The test binary.
        binary: PathBuf,
        /// Why.
        message: String,
    },
    /// A file of ours could not be written or read.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The child wrote no run directory under the base we gave it.
    #[error("no run directory (results.json or setup-error.txt) under {0}")]
    NoRunDir(PathBuf),
    /// A results.json that is not one.
    #[error("{path} is not a phase1 results.json: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// serde's words.
        message: String,
    },
    /// A harness flag the driver sets itself, or something that is not a
    /// harness flag.
    #[error("{0}")]
    Flags(String),
}

impl DriveError {
    pub(super) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> DriveError + '_ {
        move |e| DriveError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }
}
