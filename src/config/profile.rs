//! Profile files: the checked-in default and the overrides layered on it.
//!
//! A profile is TOML whose keys are the settings' profile keys: top-level
//! run settings, plus the `[cpu_engine]` and `[prompts]` tables. Every
//! profile only overrides the default profile, key by key.

use std::path::{Path, PathBuf};

use super::errors::ConfigError;
use super::keys;
use super::origin::Origin;

/// The checked-in default profile; every required key is set here.
pub const DEFAULT_PROFILE: &str = include_str!("../../fixtures/profiles/default.toml");

/// Built-in profiles by name: (name, file label, TOML text).
pub const BUILTIN: &[(&str, &str, &str)] = &[
    ("default", "fixtures/profiles/default.toml", DEFAULT_PROFILE),
    (
        "hybrid",
        "fixtures/profiles/hybrid.toml",
        include_str!("../../fixtures/profiles/hybrid.toml"),
    ),
    (
        "ci",
        "fixtures/profiles/ci.toml",
        include_str!("../../fixtures/profiles/ci.toml"),
    ),
];

/// Top-level keys that describe a profile and set nothing.
const METADATA_KEYS: &[&str] = &["description"];

/// One key set by a profile, as text, with where it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The setting's profile key (dotted inside tables).
    pub key: String,
    /// The value as text (arrays joined with commas).
    pub value: String,
    /// Where it was set.
    pub origin: Origin,
}

/// A loaded profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The name or path it was selected by.
    pub name: String,
    /// The file it came from (a label for built-ins).
    pub path: PathBuf,
    /// The keys it sets, in file order.
    pub entries: Vec<Entry>,
}

impl Profile {
    /// Parses the checked-in default profile.
    pub fn default_profile() -> Result<Profile, ConfigError> {
        parse(
            "default",
            Path::new("fixtures/profiles/default.toml"),
            DEFAULT_PROFILE,
            true,
        )
    }

    /// Loads a profile by built-in name, name under `fixtures/profiles/`, or path.
    pub fn load(name: &str, origin: &Origin) -> Result<Profile, ConfigError> {
        let looks_like_path = name.contains('/') || name.ends_with(".toml");
        if !looks_like_path {
            if let Some((n, label, text)) = BUILTIN.iter().find(|(n, _, _)| *n == name) {
                return parse(n, Path::new(label), text, *n == "default");
            }
        }
        let mut searched = vec![PathBuf::from(name)];
        if !looks_like_path {
            let file = format!("{name}.toml");
            searched.push(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("fixtures/profiles")
                    .join(&file),
            );
            searched.push(Path::new("fixtures/profiles").join(&file));
        }
        for path in &searched {
            if path.is_file() {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::ProfileRead {
                        path: path.clone(),
                        source,
                    })?;
                return parse(name, path, &text, false);
            }
        }
        Err(ConfigError::ProfileNotFound {
            name: name.to_string(),
            origin: origin.to_string(),
            builtin: BUILTIN
                .iter()
                .map(|(n, _, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
            searched,
        })
    }
}

/// Parses profile text. `is_default` marks its entries as default-profile origins.
pub fn parse(
    name: &str,
    path: &Path,
    text: &str,
    is_default: bool,
) -> Result<Profile, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
        ConfigError::ProfileSyntax {
            path: path.to_path_buf(),
            line,
            column,
            message: e.message().trim().to_string(),
        }
    })?;
    let mut entries = Vec::new();
    for (key, value) in &table {
        if METADATA_KEYS.contains(&key.as_str()) {
            continue;
        }
        match value {
            toml::Value::Table(inner) if key == "cpu_engine" || key == "prompts" => {
                for (sub, v) in inner {
                    let dotted = format!("{key}.{sub}");
                    let line = line_of(text, Some(key), sub);
                    entries.push(entry(path, &dotted, line, v, is_default)?);
                }
            }
            _ => {
                let line = line_of(text, None, key);
                entries.push(entry(path, key, line, value, is_default)?);
            }
        }
    }
    Ok(Profile {
        name: name.to_string(),
        path: path.to_path_buf(),
        entries,
    })
}

fn entry(
    path: &Path,
    key: &str,
    line: usize,
    value: &toml::Value,
    is_default: bool,
) -> Result<Entry, ConfigError> {
    if keys::by_key(key).is_none() {
        let known: Vec<&str> = keys::KEYS.iter().map(|k| k.key).collect();
        return Err(ConfigError::UnknownProfileKey {
            path: path.to_path_buf(),
            line,
            key: key.to_string(),
            suggestion: keys::closest(key, known.iter().copied()),
            known: known.join(", "),
        });
    }
    let origin = if is_default {
        Origin::Default {
            key: key.to_string(),
            line,
        }
    } else {
        Origin::Profile {
            path: path.to_path_buf(),
            key: key.to_string(),
            line,
        }
    };
    let value = to_text(value).ok_or_else(|| ConfigError::InvalidValue {
        origin: origin.clone(),
        value: value.to_string(),
        expected: keys::by_key(key)
            .map(|s| s.kind.expected())
            .unwrap_or_default(),
    })?;
    Ok(Entry {
        key: key.to_string(),
        value,
        origin,
    })
}

/// A TOML value as the text a flag would carry; `None` for tables and dates.
fn to_text(value: &toml::Value) -> Option<String> {
    Some(match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(items) => items
            .iter()
            .map(|v| match v {
                toml::Value::Array(_) | toml::Value::Table(_) => None,
                other => to_text(other),
            })
            .collect::<Option<Vec<_>>>()?
            .join(","),
        toml::Value::Datetime(_) | toml::Value::Table(_) => return None,
    })
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

/// 1-based line where `key` is assigned in `section` (or at top level); 0 if not found.
fn line_of(text: &str, section: Option<&str>, key: &str) -> usize {
    let mut current: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('[') {
            current = Some(
                line.trim_matches(|c| c == '[' || c == ']')
                    .trim()
                    .to_string(),
            );
            continue;
        }
        let Some((lhs, _)) = line.split_once('=') else {
            continue;
        };
        let lhs = lhs.trim().trim_matches('"');
        let here = current.as_deref();
        if (here == section && lhs == key)
            || (here.is_none() && section.is_some_and(|s| lhs == format!("{s}.{key}")))
        {
            return i + 1;
        }
    }
    0
}
