//! Every way writing evidence can fail.

use std::path::PathBuf;

/// An evidence error; each names the file or directory involved.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// A filesystem operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`create run directory`, `write`).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A value could not be serialized to JSON.
    #[error("cannot serialize {what} to JSON for {}: {source}", path.display())]
    Json {
        /// What was serialized.
        what: String,
        /// The file it was meant for.
        path: PathBuf,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// The JUnit report could not be serialized.
    #[error("cannot serialize the JUnit report: {0}")]
    Junit(#[from] quick_junit::SerializeError),
    /// A chart could not be drawn.
    #[error("cannot draw the {chart} chart: {message}")]
    Chart {
        /// Which chart.
        chart: &'static str,
        /// The plotting library's message.
        message: String,
    },
    /// No unique run directory could be created.
    #[error("cannot create a unique run directory under {} after {attempts} attempts", base.display())]
    NoUniqueRunId {
        /// The base directory.
        base: PathBuf,
        /// How many names were tried.
        attempts: u32,
    },
}

impl EvidenceError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| EvidenceError::Io {
            action,
            path,
            source,
        }
    }
}
