//! Where a setting's value came from, so errors and `config.json` can say so.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// The layer that set a value. Later layers win:
/// default profile ← selected profile ← `PHASE1_*` environment ← harness flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "layer", rename_all = "snake_case")]
pub enum Origin {
    /// A key of the checked-in `fixtures/profiles/default.toml`.
    Default {
        /// The key (dotted inside tables).
        key: String,
        /// 1-based line in default.toml (0 if unknown).
        line: usize,
    },
    /// A key of the selected profile.
    Profile {
        /// The profile file (or `builtin:NAME`).
        path: PathBuf,
        /// The key (dotted inside tables).
        key: String,
        /// 1-based line (0 if unknown).
        line: usize,
    },
    /// A `PHASE1_*` environment variable.
    Env {
        /// The variable name.
        var: String,
    },
    /// A harness flag.
    Flag {
        /// The flag (`--engine`).
        flag: String,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default { key, line } => {
                write!(
                    f,
                    "key `{key}` of the default profile (fixtures/profiles/default.toml"
                )?;
                if *line > 0 {
                    write!(f, ":{line}")?;
                }
                write!(f, ")")
            }
            Origin::Profile { path, key, line } => {
                write!(f, "profile key `{key}` ({}", path.display())?;
                if *line > 0 {
                    write!(f, ":{line}")?;
                }
                write!(f, ")")
            }
            Origin::Env { var } => write!(f, "environment variable {var}"),
            Origin::Flag { flag } => write!(f, "flag {flag}"),
        }
    }
}
