//! The `PHASE1_*` environment layer.

use std::collections::BTreeMap;

use super::errors::ConfigError;
use super::keys;
use super::origin::Origin;
use super::profile::Entry;

/// Prefix of the harness's environment twins.
pub const PREFIX: &str = "PHASE1_";

/// A snapshot of the environment (tests build one from pairs; the harness
/// takes the process environment once at start).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The process environment. Variables that are not UTF-8 are skipped,
    /// except `PHASE1_*` ones, which are an error.
    pub fn from_process() -> Result<Env, ConfigError> {
        let mut vars = BTreeMap::new();
        for (k, v) in std::env::vars_os() {
            let Some(k) = k.to_str().map(str::to_string) else {
                continue;
            };
            match v.into_string() {
                Ok(v) => {
                    vars.insert(k, v);
                }
                Err(_) if k.starts_with(PREFIX) => {
                    return Err(ConfigError::EnvNotUnicode { var: k })
                }
                Err(_) => {}
            }
        }
        Ok(Env { vars })
    }

    /// An environment from pairs.
    pub fn from_pairs<I, K, V>(pairs: I) -> Env
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// A variable's value; empty values count as unset.
    pub fn get(&self, var: &str) -> Option<&str> {
        self.vars
            .get(var)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// All variables.
    pub fn vars(&self) -> &BTreeMap<String, String> {
        &self.vars
    }

    /// The settings set by `PHASE1_*` twins (not `PHASE1_PROFILE`), plus a
    /// warning for each unknown `PHASE1_*` variable (likely a typo).
    pub fn entries(&self) -> (Vec<Entry>, Vec<String>) {
        let mut entries = Vec::new();
        let mut warnings = Vec::new();
        for (var, value) in &self.vars {
            if !var.starts_with(PREFIX) || value.is_empty() || var == keys::PROFILE.env {
                continue;
            }
            match keys::by_env(var) {
                Some(spec) => entries.push(Entry {
                    key: spec.key.to_string(),
                    value: value.clone(),
                    origin: Origin::Env { var: var.clone() },
                }),
                None => {
                    let hint = keys::closest(var, keys::KEYS.iter().map(|k| k.env))
                        .map(|s| format!(" (did you mean {s}?)"))
                        .unwrap_or_default();
                    warnings.push(format!(
                        "environment variable {var} is not a harness setting and is ignored{hint}"
                    ));
                }
            }
        }
        (entries, warnings)
    }
}
