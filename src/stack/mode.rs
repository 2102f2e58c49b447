//! Who owns a stack's processes, and so how a run reaches them: its own
//! children, another process's in this PID namespace, or components it
//! sees only through their URLs.

use std::path::{Path, PathBuf};

/// How this run holds the stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackMode {
    /// This process started the stack and tears it down.
    Owned,
    /// Another process owns it (`kvcr-e2e stack up`), in this PID
    /// namespace: its processes are signalled and watched from here, a
    /// replacement started here outlives this run, and the owner tears it
    /// down.
    Attached,
    /// Another process owns it where this one sees no process of it
    /// (another PID namespace, container or host): every component is
    /// reached through its URL, kills and replacements through the stack
    /// description's hooks, and its logs are mirrored into `mirror_dir`
    /// from the URL its owner serves them at.
    ByUrls { mirror_dir: PathBuf },
}

impl StackMode {
    /// Whether this run tears the stack down.
    pub fn owns(&self) -> bool {
        matches!(self, StackMode::Owned)
    }

    /// Whether this run sees the stack's processes (pids, `/proc`), as
    /// opposed to their URLs only.
    pub fn sees_processes(&self) -> bool {
        !matches!(self, StackMode::ByUrls { .. })
    }

    /// Where this run mirrors the stack's logs, when it reads them through
    /// their URL.
    pub fn mirror_dir(&self) -> Option<&Path> {
        match self {
            StackMode::ByUrls { mirror_dir } => Some(mirror_dir),
            StackMode::Owned | StackMode::Attached => None,
        }
    }
}
