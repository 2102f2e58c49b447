//! Keeping secrets out of everything the harness writes.
//!
//! Environment variables whose names contain TOKEN, KEY, SECRET, PASSWORD or
//! CREDENTIAL (case-insensitive) are secrets. Their values are replaced by
//! [`REDACTED`] in environment dumps, and a [`Redactor`] scrubs them out of
//! any text or JSON before it is written (config.json, stack.json, case
//! records, logs copied into evidence).

use std::collections::BTreeMap;

/// What a secret value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Secret values shorter than this, and values that are plain numbers or
/// booleans (`PHASE1_PROMPTS_MAX_TOKENS=16`, `TOKENIZERS_PARALLELISM=false`),
/// are not scrubbed from free text: that would erase ordinary digits and
/// words everywhere. They are still redacted in environment dumps.
pub const MIN_SCRUB_LEN: usize = 6;

const MARKERS: &[&str] = &["TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL"];

/// Whether an environment variable (or JSON key) name marks a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    MARKERS.iter().any(|m| upper.contains(m))
}

/// `env` with every secret value replaced by [`REDACTED`].
pub fn redact_env<'a, I>(env: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (&'a String, &'a String)>,
{
    env.into_iter()
        .map(|(k, v)| {
            let v = if is_secret_name(k) {
                REDACTED.to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// The process environment (UTF-8 variables) with secret values redacted.
pub fn redacted_env() -> BTreeMap<String, String> {
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    redact_env(&env)
}

fn is_scrubbable(value: &str) -> bool {
    let v = value.trim();
    v.len() >= MIN_SCRUB_LEN
        && v.parse::<f64>().is_err()
        && !matches!(v.to_ascii_lowercase().as_str(), "true" | "false")
}

/// Scrubs `text` of the process environment's secret values.
pub fn scrub(text: &str) -> String {
    Redactor::from_process_env().scrub(text)
}

/// Scrubs known secret values out of text and JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Secret values, longest first (so a secret containing another is
    /// replaced whole).
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor that changes nothing.
    pub fn none() -> Self {
        Redactor::default()
    }

    /// Secrets of the process environment.
    pub fn from_process_env() -> Self {
        Redactor::from_env(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// Secrets of an environment given as pairs.
    pub fn from_env<I, K, V>(env: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let values = env
            .into_iter()
            .filter(|(k, _)| is_secret_name(k.as_ref()))
            .map(|(_, v)| v.as_ref().to_string());
        Redactor::from_values(values)
    }

    /// Secrets given directly (e.g. a token read from a file).
    pub fn from_values<I: IntoIterator<Item = String>>(values: I) -> Self {
        let mut secrets: Vec<String> = values.into_iter().filter(|v| is_scrubbable(v)).collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets }
    }

    /// How many secret values it scrubs.
    pub fn len(&self) -> usize {
        self.secrets.len()
    }

    /// Whether it scrubs nothing.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret value replaced by [`REDACTED`].
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
    }

    /// `value` with secret values scrubbed from every string (keys included).
    pub fn scrub_json(&self, value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.scrub(&s)),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.scrub_json(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.scrub(&k), self.scrub_json(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}
