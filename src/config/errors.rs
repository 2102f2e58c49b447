//! Every way resolving run settings can fail, as one typed enum.
//!
//! Each message says what was wrong (the flag, environment variable or
//! profile key, and the value seen), what is accepted, and where to look.

use std::path::PathBuf;

use super::origin::Origin;

/// A configuration error, raised before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// An argument that looks like a flag but is neither a harness flag nor
    /// a libtest flag.
    #[error(
        "unknown flag `{flag}`: it is neither a harness flag nor a libtest flag{}\n\
         harness flags: {harness}\n\
         libtest flags: {libtest}\n\
         (run with `-- --help-harness` for what each harness flag does)",
        suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default()
    )]
    UnknownFlag {
        /// The argument as given.
        flag: String,
        /// The closest known flag, if one is close.
        suggestion: Option<String>,
        /// Known harness flags, comma separated.
        harness: String,
        /// Known libtest flags, comma separated.
        libtest: String,
    },

    /// A harness flag that needs a value was last on the command line.
    #[error(
        "flag {flag} needs a value: write `{flag} VALUE` or `{flag}=VALUE` (accepted: {expected})"
    )]
    MissingValue {
        /// The flag.
        flag: &'static str,
        /// What a value looks like.
        expected: String,
    },

    /// A value that does not parse or is out of range.
    #[error("invalid value `{value}` for {origin}: expected {expected}")]
    InvalidValue {
        /// Where the value came from.
        origin: Origin,
        /// The value as seen.
        value: String,
        /// What is accepted.
        expected: String,
    },

    /// Settings that are each valid but do not fit together.
    #[error("{origin}: {message}")]
    Inconsistent {
        /// The setting that has to change.
        origin: Origin,
        /// What is wrong and what to do.
        message: String,
    },

    /// A profile file that is not valid TOML.
    #[error("profile {}:{line}:{column}: not valid TOML: {message}", path.display())]
    ProfileSyntax {
        /// The profile file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },

    /// A profile key the harness does not know (a typo, or a key of a newer
    /// harness).
    #[error(
        "profile {}:{line}: unknown key `{key}`{}; known keys: {known}",
        path.display(),
        suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default()
    )]
    UnknownProfileKey {
        /// The profile file.
        path: PathBuf,
        /// 1-based line (0 when it could not be located).
        line: usize,
        /// The key, dotted for keys inside a table (`cpu_engine.block_siz`).
        key: String,
        /// The closest known key, if one is close.
        suggestion: Option<String>,
        /// Known keys, comma separated.
        known: String,
    },

    /// `--profile NAME` named neither a built-in profile nor an existing file.
    #[error(
        "profile `{name}` (from {origin}) not found: it is not a built-in profile ({builtin}) \
         and none of these files exist: {}",
        searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    ProfileNotFound {
        /// The name or path given.
        name: String,
        /// Where the name came from (an [`Origin`], displayed).
        origin: String,
        /// Built-in profile names.
        builtin: String,
        /// Files that were tried.
        searched: Vec<PathBuf>,
    },

    /// A profile file that exists but could not be read.
    #[error("cannot read profile {}: {source}", path.display())]
    ProfileRead {
        /// The profile file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },

    /// A `PHASE1_*` environment variable whose value is not UTF-8.
    #[error("environment variable {var} is not valid UTF-8; set it to plain text or unset it")]
    EnvNotUnicode {
        /// The variable name.
        var: String,
    },

    /// The checked-in default profile does not set a required key (a bug in
    /// `fixtures/profiles/default.toml`).
    #[error("fixtures/profiles/default.toml does not set required key(s) {keys}; add them with a doc comment")]
    DefaultIncomplete {
        /// The missing keys, comma separated.
        keys: String,
    },
}
