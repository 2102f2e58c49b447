//! Layering: default profile ← selected profile ← `PHASE1_*` environment ← flags.

use std::collections::BTreeMap;

use serde::Serialize;

use super::args::HarnessArgs;
use super::env::Env;
use super::errors::ConfigError;
use super::keys::{self, Kind};
use super::origin::Origin;
use super::profile::{Entry, Profile};
use super::settings::Settings;
use crate::engine::{self, GeometryKind};

/// Resolved settings with where each value came from.
#[derive(Debug, Clone, Serialize)]
pub struct Resolved {
    /// The settings.
    pub settings: Settings,
    /// For every key set, the layer that set it last.
    pub provenance: BTreeMap<String, Origin>,
    /// Things worth saying that do not stop the run (unknown `PHASE1_*`
    /// variables, a filler count that may be too small).
    pub warnings: Vec<String>,
}

impl Resolved {
    /// The origin of a key's value.
    pub fn origin(&self, key: &str) -> Option<&Origin> {
        self.provenance.get(key)
    }
}

/// Resolves settings from the harness flags and an environment snapshot.
pub fn resolve(args: &HarnessArgs, env: &Env) -> Result<Resolved, ConfigError> {
    let mut settings = Settings::blank();
    let mut provenance = BTreeMap::new();

    let default = Profile::default_profile()?;
    apply_all(&mut settings, &mut provenance, &default.entries)?;
    let missing: Vec<&str> = keys::KEYS
        .iter()
        .filter(|k| k.required && !provenance.contains_key(k.key))
        .map(|k| k.key)
        .collect();
    if !missing.is_empty() {
        return Err(ConfigError::DefaultIncomplete {
            keys: missing.join(", "),
        });
    }

    let selected = match (args.get("profile"), env.get(keys::PROFILE.env)) {
        (Some(name), _) => Some((
            name.to_string(),
            Origin::Flag {
                flag: "--profile".to_string(),
            },
        )),
        (None, Some(name)) => Some((
            name.to_string(),
            Origin::Env {
                var: keys::PROFILE.env.to_string(),
            },
        )),
        (None, None) => None,
    };
    if let Some((name, origin)) = selected {
        let profile = Profile::load(&name, &origin)?;
        apply_all(&mut settings, &mut provenance, &profile.entries)?;
        settings.profile = name;
    }

    let (env_entries, mut warnings) = env.entries();
    apply_all(&mut settings, &mut provenance, &env_entries)?;

    let flag_entries: Vec<Entry> = args
        .values
        .iter()
        .filter(|v| v.key != keys::PROFILE.key)
        .map(|v| Entry {
            key: v.key.to_string(),
            value: v.value.clone(),
            origin: Origin::Flag {
                flag: v.flag.to_string(),
            },
        })
        .collect();
    apply_all(&mut settings, &mut provenance, &flag_entries)?;
    derive_unset(&mut settings, &provenance);

    validate(&settings, &provenance, &mut warnings)?;
    Ok(Resolved {
        settings,
        provenance,
        warnings,
    })
}

fn apply_all(
    settings: &mut Settings,
    provenance: &mut BTreeMap<String, Origin>,
    entries: &[Entry],
) -> Result<(), ConfigError> {
    for e in entries {
        settings.apply(&e.key, &e.value, &e.origin)?;
        provenance.insert(e.key.clone(), e.origin.clone());
    }
    Ok(())
}

/// Settings whose default is another setting's value, when no layer set
/// them: the kill timeout follows the request timeout.
fn derive_unset(settings: &mut Settings, provenance: &BTreeMap<String, Origin>) {
    if !provenance.contains_key("kill_timeout_s") {
        settings.kill_timeout = settings.request_timeout;
    }
}

fn origin_of(provenance: &BTreeMap<String, Origin>, key: &str) -> Origin {
    provenance
        .get(key)
        .cloned()
        .unwrap_or_else(|| Origin::Default {
            key: key.to_string(),
            line: 0,
        })
}

/// The CPU engine serves prompts of at most `(device_cache_blocks + 1) ×
/// block_size − 1` tokens (every full block must fit its device cache), and
/// answers a longer one with HTTP 400. The longest prompt of the set is a
/// family's extended prompt: the prefix, one more block, the suffix.
fn check_longest_prompt_fits(
    s: &Settings,
    provenance: &BTreeMap<String, Origin>,
) -> Result<(), ConfigError> {
    let c = &s.cpu_engine;
    let block = u64::from(c.block_size);
    let longest =
        (u64::from(s.prompts.prefix_blocks) + 1) * block + u64::from(s.prompts.suffix_tokens);
    let limit = (u64::from(c.device_cache_blocks) + 1) * block;
    if longest < limit {
        return Ok(());
    }
    Err(ConfigError::InvalidValue {
        origin: origin_of(provenance, "cpu_engine.device_cache_blocks"),
        value: c.device_cache_blocks.to_string(),
        expected: format!(
            "a device cache that holds the longest prompt: {longest} tokens ((prompts.prefix_blocks {} + 1) \
             × block_size {block} + prompts.suffix_tokens {}) needs cpu_engine.device_cache_blocks ≥ {} \
             (the CPU engine answers a prompt of more than (device_cache_blocks + 1) × block_size − 1 tokens with HTTP 400)",
            s.prompts.prefix_blocks,
            s.prompts.suffix_tokens,
            (longest + 1).div_ceil(block.max(1)) - 1
        ),
    })
}

/// Checks that hold across keys, naming the key to change.
fn validate(
    s: &Settings,
    provenance: &BTreeMap<String, Origin>,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    if s.perf_evict_filler == 0 && s.needs_eviction() {
        return Err(ConfigError::InvalidValue {
            origin: origin_of(provenance, "perf_evict_filler"),
            value: "0".to_string(),
            expected: "an integer ≥ 1 while TC-02 or TC-05 is selected (they evict the device \
                       prefix cache with filler prompts; default 32), or select other cases with --cases"
                .to_string(),
        });
    }
    if s.geometry == GeometryKind::Hybrid
        && s.engine == engine::Kind::Cpu
        && s.cpu_engine.ssm_parts == 0
    {
        return Err(ConfigError::InvalidValue {
            origin: origin_of(provenance, "cpu_engine.ssm_parts"),
            value: "0".to_string(),
            expected: "an integer ≥ 1 with geometry hybrid (a hybrid block has SSM state parts)"
                .to_string(),
        });
    }
    if s.engine == engine::Kind::Cpu {
        check_longest_prompt_fits(s, provenance)?;
    }
    for (key, path) in [
        ("attach", &s.attach),
        ("python", &s.python),
        ("engine_profile", &s.engine_profile),
    ] {
        if let Some(p) = path {
            if !p.is_file() {
                return Err(ConfigError::InvalidValue {
                    origin: origin_of(provenance, key),
                    value: p.display().to_string(),
                    expected: format!("{} that exists and is a file", Kind::Path.expected()),
                });
            }
        }
    }
    if s.engine == engine::Kind::Cpu && s.needs_eviction() {
        let c = &s.cpu_engine;
        let per_prompt = u64::from(s.prompts.prefix_blocks)
            + u64::from(s.prompts.suffix_tokens).div_ceil(u64::from(c.block_size.max(1)));
        let filled = per_prompt * u64::from(s.perf_evict_filler);
        let capacity = u64::from(c.device_cache_blocks);
        if filled <= capacity {
            warnings.push(format!(
                "perf_evict_filler = {} fills about {filled} blocks, not more than the CPU engine's \
                 device cache of {capacity} blocks: eviction may not happen (set by {})",
                s.perf_evict_filler,
                origin_of(provenance, "perf_evict_filler")
            ));
        }
    }
    Ok(())
}
