//! Splitting the test binary's argv into harness flags and libtest's arguments.
//!
//! Harness flags are stripped; everything libtest-mimic understands is passed
//! through untouched and in order (so `--list`, `--exact`, filters, IDE and
//! nextest invocations keep working). An argument that looks like a flag but
//! is neither is an error, not silently passed on.

use serde::Serialize;

use super::errors::ConfigError;
use super::keys::{self, Kind};

/// libtest-mimic 0.8 flags that take no value.
const LIBTEST_SWITCHES: &[&str] = &[
    "--include-ignored",
    "--ignored",
    "--test",
    "--bench",
    "--list",
    "--nocapture",
    "--show-output",
    "--exact",
    "--quiet",
    "--help",
    "-q",
    "-h",
];

/// libtest-mimic 0.8 flags that take a value (`--flag VALUE` or `--flag=VALUE`).
const LIBTEST_OPTIONS: &[&str] = &[
    "--test-threads",
    "--logfile",
    "--skip",
    "--color",
    "--format",
    "-Z",
];

/// One harness flag as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlagValue {
    /// The setting's profile key (`perf_evict_filler`), or `profile`.
    pub key: &'static str,
    /// The flag (`--perf-evict-filler`).
    pub flag: &'static str,
    /// The value as given (`true` for a switch without value).
    pub value: String,
}

/// The harness flags found on the command line, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HarnessArgs {
    /// Harness flags with their values, in command-line order (later wins).
    pub values: Vec<FlagValue>,
    /// `--help-harness` was given: print [`keys::harness_help`] and exit.
    pub help_harness: bool,
    /// `--help`/`-h` was given (and left for libtest): print the harness help
    /// first, then let libtest-mimic print its own.
    pub help: bool,
}

impl HarnessArgs {
    /// The last value given for a key (`"engine"`, `"profile"`).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|v| v.key == key)
            .map(|v| v.value.as_str())
    }

    /// The flags back as arguments (`--flag=value`), so that
    /// `split_args([argv0] ++ to_argv() ++ rest[1..])` gives the same split.
    pub fn to_argv(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .values
            .iter()
            .map(|v| format!("{}={}", v.flag, v.value))
            .collect();
        if self.help_harness {
            out.push("--help-harness".to_string());
        }
        out
    }
}

/// Splits argv (including the program name first) into harness flags and the
/// arguments for `libtest_mimic::Arguments::from_iter` (program name first,
/// libtest flags and filters in their original order).
///
/// Both `--flag value` and `--flag=value` are accepted. After a bare `--`
/// everything is passed to libtest as is.
pub fn split_args<I, S>(argv: I) -> Result<(HarnessArgs, Vec<String>), ConfigError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut it = argv.into_iter().map(Into::into);
    let mut rest: Vec<String> = it.next().into_iter().collect();
    let mut harness = HarnessArgs::default();
    while let Some(arg) = it.next() {
        if arg == "--" {
            rest.push(arg);
            rest.extend(it.by_ref());
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            rest.push(arg);
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if arg.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if name == "--help-harness" {
            harness.help_harness = true;
            continue;
        }
        if let Some(spec) = keys::by_flag(&name) {
            let flag = spec.flag.unwrap_or("--profile");
            let value = match (inline, spec.kind) {
                (Some(v), _) => v,
                (None, Kind::Bool) => "true".to_string(),
                (None, _) => match it.next() {
                    Some(v) => v,
                    None => {
                        return Err(ConfigError::MissingValue {
                            flag,
                            expected: expected_static(spec.kind),
                        })
                    }
                },
            };
            harness.values.push(FlagValue {
                key: spec.key,
                flag,
                value,
            });
            continue;
        }
        if LIBTEST_SWITCHES.contains(&name.as_str()) {
            if name == "--help" || name == "-h" {
                harness.help = true;
            }
            rest.push(arg);
            continue;
        }
        let short_z = arg.starts_with("-Z") && !arg.starts_with("--");
        if LIBTEST_OPTIONS.contains(&name.as_str()) || short_z {
            let attached = inline.is_some() || (short_z && arg.len() > 2);
            rest.push(arg);
            if !attached {
                if let Some(v) = it.next() {
                    rest.push(v);
                }
            }
            continue;
        }
        return Err(unknown_flag(&name));
    }
    Ok((harness, rest))
}

/// Test-name filters taken out of libtest's arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// Positional filters, in order; a trial runs when it matches any.
    pub patterns: Vec<String>,
}

impl Filters {
    /// Whether `name` is selected: no filter, or any filter matches (a
    /// substring, or the whole name under `--exact`), as libtest does.
    pub fn selects(&self, name: &str, exact: bool) -> bool {
        self.patterns.is_empty()
            || self.patterns.iter().any(|p| {
                if exact {
                    name == p
                } else {
                    name.contains(p.as_str())
                }
            })
    }
}

/// Takes every positional filter out of libtest's arguments (as returned by
/// [`split_args`]). libtest runs the union of several filters;
/// libtest-mimic 0.8 accepts only one, so the suite applies them itself.
/// Option values (`--skip X`, `--test-threads 1`) stay with their option.
pub fn take_filters(libtest_argv: Vec<String>) -> (Filters, Vec<String>) {
    let mut it = libtest_argv.into_iter();
    let mut rest: Vec<String> = it.next().into_iter().collect();
    let mut filters = Filters::default();
    while let Some(arg) = it.next() {
        if arg == "--" {
            filters.patterns.extend(it.by_ref());
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            filters.patterns.push(arg);
            continue;
        }
        let takes_value = LIBTEST_OPTIONS.contains(&arg.as_str()) || arg == "-Z";
        rest.push(arg);
        if takes_value {
            rest.extend(it.next());
        }
    }
    (filters, rest)
}

fn unknown_flag(flag: &str) -> ConfigError {
    let harness = keys::harness_flags();
    let libtest: Vec<&str> = LIBTEST_SWITCHES
        .iter()
        .chain(LIBTEST_OPTIONS)
        .copied()
        .collect();
    let suggestion = keys::closest(flag, harness.iter().chain(libtest.iter()).copied());
    ConfigError::UnknownFlag {
        flag: flag.to_string(),
        suggestion,
        harness: harness.join(", "),
        libtest: libtest.join(", "),
    }
}

fn expected_static(kind: Kind) -> &'static str {
    match kind {
        Kind::Choice(w) if w == keys::ENGINES => "cpu|vllm|sglang",
        Kind::Choice(w) if w == keys::TOPOLOGIES => "agg|2p1d|two-node",
        Kind::Choice(w) if w == keys::GEOMETRIES => "dense|hybrid",
        Kind::Choice(_) => "error|warn|info|debug|trace",
        Kind::Uint { .. } => "an integer",
        Kind::PositiveFloat => "a positive number",
        Kind::UintList => "a comma-separated list of positive integers",
        Kind::Cases => "a comma-separated list of case ids, e.g. TC-01,TC-03",
        Kind::Path => "a path",
        Kind::Bool => "true|false",
        Kind::Text => "a profile name or path",
        Kind::Kvcr => "pypi:<version>, a wheel (*.whl), a KVCR source directory, or SPEC+FILE.diff",
    }
}
