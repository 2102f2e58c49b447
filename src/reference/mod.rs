//! The reference phase: tokens and TTFT baselines from the same engine with
//! KVCR disabled, after checking the bare engine is deterministic.
//!
//! Results are cached under a digest of everything that determines them
//! (engine identity and settings, the engine's sources and model files, the
//! packages installed in the Python env and the patches applied to it, the
//! geometry, prompt set, generation settings); a cache entry is used only
//! when its digest matches exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::client::{Client, Completion, TokenIdsRequest};
use crate::config::Settings;
use crate::engine::{Engine, ReferenceVariant};
use crate::evidence::{percentiles, Baseline};
use crate::prompts::{self, Family, Prompt, PromptBook, PromptShape};
use crate::stack::Stack;
use crate::telemetry::names::dynamo::EXTRA_FIELD_COMPLETION_TOKEN_IDS;

mod bare;
pub mod workload;

pub use workload::WorkloadReference;

/// How many families the determinism probes use.
const PROBE_FAMILIES: usize = 2;
/// The filler salt of the batch probe's prompts (outside the prompt set, so
/// the probe leaves no recorded prompt warm; cases use salts from 0 up).
const BATCH_PROBE_SALT: u64 = 0xBA7C;
/// Bumped when the format or meaning of a cache entry changes.
const CACHE_FORMAT: &str = "reference-v1";

#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error(
        "engine not deterministic: {0} (this is the bare engine with KVCR off, not a KVCR failure)"
    )]
    NotDeterministic(String),
    #[error("the reference workers are not running (the cache was expected to hold {0})")]
    NoReferenceWorker(String),
    #[error("reference request for prompt {prompt} failed: {error}")]
    Request { prompt: String, error: String },
    #[error("cannot reach the frontend: {0}")]
    Client(String),
    #[error("reference cache {path}: {error}")]
    Cache { path: PathBuf, error: String },
    #[error("bare-engine probe: {0}")]
    Bare(String),
    #[error("the reference cache key: {0}")]
    Key(String),
}

/// Recorded reference results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct References {
    pub digest: String,
    pub tokens: BTreeMap<String, Vec<u32>>,
    pub baseline: Baseline,
    pub probes: Vec<String>,
    #[serde(default)]
    pub from_cache: bool,
    pub seconds: f64,
    /// When the references were computed (Unix seconds; 0 in caches
    /// written before this was recorded).
    #[serde(default)]
    pub computed_unix_s: u64,
    /// Where they were computed: host name and run directory.
    #[serde(default)]
    pub computed_by: String,
    /// How the phase sent its prompts, and why (`None` in cache entries
    /// written before the batch probe existed).
    #[serde(default)]
    pub batching: Option<Batching>,
    /// WL-01's trace replayed on the reference worker, when a trace is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadReference>,
}

/// How many prompt families the reference phase (and TC-01) keeps in
/// flight, and why: the batch probe's finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batching {
    /// Families in flight (1 = sequential).
    pub concurrency: u32,
    /// What decided it.
    pub reason: String,
}

impl Batching {
    /// `batching` or, for an entry without a probe result, sequential.
    pub fn of(batching: Option<&Batching>) -> Batching {
        batching.cloned().unwrap_or_else(|| Batching {
            concurrency: 1,
            reason: "sequential: the cached reference entry predates the batch probe".into(),
        })
    }
}

impl References {
    /// The reference tokens of `prompt`.
    pub fn tokens(&self, prompt: &Prompt) -> Option<&[u32]> {
        self.tokens.get(&prompt.key()).map(Vec::as_slice)
    }

    /// Everything but the token table, for the run summary.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "digest": self.digest, "prompts": self.tokens.len(), "baseline": self.baseline,
            "probes": self.probes, "from_cache": self.from_cache, "seconds": self.seconds,
            "computed_unix_s": self.computed_unix_s, "computed_by": self.computed_by,
            "batching": Batching::of(self.batching.as_ref()),
            "workload": self.workload.as_ref().map(|w| serde_json::json!({
                "trace": w.trace, "rate_factor": w.rate_factor, "salt": w.salt,
                "requests": w.requests.len(), "served_by": w.served_by,
            })),
        })
    }
}

/// The prompt set the settings describe, over the engine's vocabulary.
pub fn prompt_shape(settings: &Settings, engine: &dyn Engine) -> PromptShape {
    let vocab = engine.prompt_vocab();
    PromptShape {
        seed: settings.prompts.seed,
        families: settings.prompts.families as usize,
        variants: 3,
        prefix_blocks: settings.prompts.prefix_blocks,
        suffix_tokens: settings.prompts.suffix_tokens,
        block_size: engine.geometry().block_size_tokens,
        first_token: vocab.start,
        vocab_size: vocab.end,
    }
}

/// The cache key of a reference run. `env` is what the reference run's
/// Python env holds ([`crate::pyenv::identity::env_identity`] of the base
/// interpreter). The KVCR build under test is part of it only when the
/// engine's references import KVCR ([`Engine::reference_imports_kvcr`]; a
/// run checks that claim): KVCR-off references of another build are still
/// valid.
pub fn digest(
    settings: &Settings,
    engine: &dyn Engine,
    env: &str,
    kvcr: Option<&crate::evidence::KvcrBuild>,
    trace: Option<&crate::workload::Trace>,
) -> String {
    let mut h = Sha256::new();
    if let Some(trace) = trace {
        h.update(workload::digest_part(settings, trace));
    }
    h.update(CACHE_FORMAT);
    h.update(engine.token_identity());
    h.update(format!("env {env}"));
    h.update(prompts::digest(&prompt_shape(settings, engine)));
    h.update(format!("max_tokens={}", settings.prompts.max_tokens));
    if engine.reference_imports_kvcr() {
        h.update(format!(
            "kvcr={}",
            kvcr.map_or("unknown", |b| b.files_sha256.as_str())
        ));
    }
    hex::encode(h.finalize())
}

/// The interpreter whose packages key the references: the base env's when a
/// KVCR build is layered over it (the layer holds only KVCR).
fn reference_python<'a>(
    python: &'a Path,
    kvcr: Option<&'a crate::evidence::KvcrBuild>,
) -> &'a Path {
    kvcr.map_or(python, |b| b.base_python.as_path())
}

fn cache_path(dir: &Path, digest: &str) -> PathBuf {
    dir.join(format!("{digest}.json"))
}

/// Whether a valid cache entry exists (then no reference workers are needed).
/// An env whose packages cannot be listed has no valid entry (the
/// reference phase then fails with the reason).
pub fn cached(
    settings: &Settings,
    engine: &dyn Engine,
    dir: &Path,
    python_env: &crate::pyenv::PythonEnv,
    trace: Option<&crate::workload::Trace>,
) -> bool {
    if settings.recompute_reference {
        return false;
    }
    let kvcr = python_env.kvcr.as_ref();
    let python = reference_python(&python_env.python, kvcr);
    let Ok(env) = crate::pyenv::identity::env_identity(python) else {
        return false;
    };
    let digest = digest(settings, engine, &env, kvcr, trace);
    read_cache(&cache_path(dir, &digest), &digest).is_some()
}

fn read_cache(path: &Path, digest: &str) -> Option<References> {
    let text = std::fs::read_to_string(path).ok()?;
    let refs: References = serde_json::from_str(&text).ok()?;
    (refs.digest == digest).then_some(refs)
}

/// Loads the references from the cache, or runs the probes and records them.
pub fn load_or_run(
    stack: &Stack,
    settings: &Settings,
    book: &PromptBook,
    dir: &Path,
    trace: Option<(&crate::workload::Trace, &Path)>,
) -> Result<References, ReferenceError> {
    let kvcr = stack.options().kvcr.as_ref();
    let max_prompt = stack.plan.engine.max_prompt_tokens();
    let env = crate::pyenv::identity::env_identity(reference_python(&stack.options().python, kvcr))
        .map_err(ReferenceError::Key)?;
    let digest = digest(
        settings,
        stack.plan.engine.as_ref(),
        &env,
        kvcr,
        trace.map(|t| t.0),
    );
    let path = cache_path(dir, &digest);
    let cache = match settings.recompute_reference {
        true => None,
        false => read_cache(&path, &digest),
    };
    if let Some(mut refs) = cache {
        refs.from_cache = true;
        crate::events::emit(crate::events::RunEvent::ReferenceFromCache { path: path.clone() });
        return Ok(refs);
    }
    let started = Instant::now();
    crate::events::emit(crate::events::RunEvent::ReferencePhase {
        prompts: book
            .all()
            .iter()
            .map(|f| recorded(f, max_prompt).count())
            .sum::<usize>(),
    });
    if let Some(skipped) = book.all().iter().find(|f| !fits(&f.extended, max_prompt)) {
        crate::events::emit(crate::events::RunEvent::ReferenceWithoutExtended {
            tokens: skipped.extended.tokens.len(),
            example: skipped.extended.key().to_string(),
            max_prompt: max_prompt.unwrap_or_default(),
        });
    }
    let client = Client::new(stack.frontend_url(), settings.request_timeout)
        .map_err(|e| ReferenceError::Client(e.to_string()))?;
    let variants = stack.plan.engine.reference_variants();
    for variant in &variants {
        if stack.reference(*variant).is_none() {
            return Err(ReferenceError::NoReferenceWorker(
                path.display().to_string(),
            ));
        }
    }
    let cached_model = stack.plan.engine.reference_model(ReferenceVariant::Cached);
    let max_tokens = settings.prompts.max_tokens;
    let batching = probe_batching(
        &client,
        &cached_model,
        &prompt_shape(settings, stack.plan.engine.as_ref()),
        settings.reference_concurrency,
        max_tokens,
    )?;
    crate::events::emit(crate::events::RunEvent::ReferenceBatching {
        concurrency: batching.concurrency,
        reason: batching.reason.clone(),
    });
    let (tokens, baseline) = record_all(
        &client,
        &cached_model,
        book,
        max_tokens,
        batching.concurrency as usize,
        max_prompt,
    )?;
    let workload = match trace {
        Some((trace, trace_path)) => Some(workload::run(
            &client,
            &cached_model,
            &settings.workload,
            stack.plan.engine.as_ref(),
            trace,
            trace_path,
        )?),
        None => None,
    };
    let probes = if variants.contains(&ReferenceVariant::Uncached) {
        let uncached_model = stack
            .plan
            .engine
            .reference_model(ReferenceVariant::Uncached);
        probe_determinism(&client, &cached_model, &uncached_model, book, max_tokens)?
    } else {
        // The bare engine runs alone: the reference workers go first.
        stack.stop_references();
        probe_bare_engine(stack, settings, book, &tokens)?
    };
    let refs = References {
        digest: digest.clone(),
        tokens,
        baseline,
        probes,
        from_cache: false,
        seconds: started.elapsed().as_secs_f64(),
        computed_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        computed_by: format!(
            "{} ({})",
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "unknown host".into()),
            stack
                .plan
                .layout
                .logs_dir
                .parent()
                .unwrap_or(&stack.plan.layout.logs_dir)
                .display()
        ),
        batching: Some(batching),
        workload,
    };
    write_cache(dir, &path, &refs)?;
    Ok(refs)
}

/// The determinism probes on the engine's bare server (no Dynamo, no KVCR).
fn probe_bare_engine(
    stack: &Stack,
    settings: &Settings,
    book: &PromptBook,
    reference: &BTreeMap<String, Vec<u32>>,
) -> Result<Vec<String>, ReferenceError> {
    let Some(spec) = stack
        .plan
        .engine
        .bare_engine(&stack.plan.ctx, stack.plan.bare_port)
    else {
        return Err(ReferenceError::Bare(
            "the engine runs no uncached reference worker and no bare engine: nothing can probe determinism".into(),
        ));
    };
    crate::events::emit(crate::events::RunEvent::DeterminismProbes {
        engine: spec.name.to_string(),
    });
    let url = format!("http://{}:{}", stack.plan.ctx.host, stack.plan.bare_port);
    let engine = bare::BareEngine::start(
        &spec,
        &url,
        &stack.plan.engine.model(),
        stack.options().startup_timeout,
        settings.request_timeout,
    )?;
    book.all()
        .iter()
        .take(PROBE_FAMILIES)
        .map(|family| {
            let prompt = family.variant(0);
            let reference = reference
                .get(&prompt.key())
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            engine.probe(prompt, settings.prompts.max_tokens, reference)
        })
        .collect()
}

/// A greedy completion request for `prompt` that asks for token ids.
pub fn request(model: &str, prompt: &Prompt, max_tokens: u32) -> Completion {
    Completion::new(model, prompt.tokens.clone())
        .max_tokens(max_tokens)
        .token_ids(TokenIdsRequest::NvextField(
            EXTRA_FIELD_COMPLETION_TOKEN_IDS.into(),
        ))
}

fn tokens_of(
    client: &Client,
    model: &str,
    prompt: &Prompt,
    max_tokens: u32,
) -> Result<Vec<u32>, ReferenceError> {
    crate::rt::block_on(tokens_of_async(client, model, prompt, max_tokens))
}

async fn tokens_of_async(
    client: &Client,
    model: &str,
    prompt: &Prompt,
    max_tokens: u32,
) -> Result<Vec<u32>, ReferenceError> {
    client
        .complete(&request(model, prompt, max_tokens))
        .await
        .map_err(|e| ReferenceError::Request {
            prompt: prompt.key(),
            error: e.to_string(),
        })?
        .generated
        .token_ids
        .ok_or_else(|| ReferenceError::Request {
            prompt: prompt.key(),
            error: "the response carried no token ids (nvext.completion_token_ids)".into(),
        })
}

/// The same prompt twice gives the same tokens; with and without prefix
/// caching gives the same tokens.
fn probe_determinism(
    client: &Client,
    cached_model: &str,
    uncached_model: &str,
    book: &PromptBook,
    max_tokens: u32,
) -> Result<Vec<String>, ReferenceError> {
    let mut passed = Vec::new();
    for family in book.all().iter().take(PROBE_FAMILIES) {
        let prompt = family.variant(0);
        let first = tokens_of(client, cached_model, prompt, max_tokens)?;
        let again = tokens_of(client, cached_model, prompt, max_tokens)?;
        if first != again {
            return Err(ReferenceError::NotDeterministic(format!(
                "prompt {} gave {first:?}, then {again:?}",
                prompt.key()
            )));
        }
        let uncached = tokens_of(client, uncached_model, prompt, max_tokens)?;
        if first != uncached {
            return Err(ReferenceError::NotDeterministic(format!(
                "prompt {} gave {first:?} with prefix caching, {uncached:?} without",
                prompt.key()
            )));
        }
        passed.push(format!(
            "{}: repeat and no-prefix-cache agree",
            prompt.key()
        ));
    }
    Ok(passed)
}

/// The batch probe: does sending prompts together change their tokens?
///
/// `2 × concurrency` prompts outside the prompt set go to the reference
/// engine `concurrency` at a time (a cold cache, batched as the recording
/// would batch them), then one at a time; the tokens must be equal. Equal
/// tokens allow the recording (and TC-01) to keep `concurrency` families in
/// flight; a difference keeps them sequential, which is not an error: the
/// engine is deterministic one request at a time (the determinism probes
/// check that), and batching is simply not used. An engine that batches
/// differently on other prompts would still be caught: every token of every
/// case is compared with the references.
fn probe_batching(
    client: &Client,
    model: &str,
    shape: &PromptShape,
    concurrency: u32,
    max_tokens: u32,
) -> Result<Batching, ReferenceError> {
    if concurrency <= 1 {
        return Ok(Batching {
            concurrency: 1,
            reason: "sequential: reference_concurrency is 1 (no batch probe)".into(),
        });
    }
    let prompts = prompts::fillers(shape, BATCH_PROBE_SALT, 2 * concurrency as usize);
    let together: Vec<Result<Vec<u32>, ReferenceError>> = crate::rt::block_on(
        stream::iter(
            prompts
                .iter()
                .map(|p| tokens_of_async(client, model, p, max_tokens)),
        )
        .buffered(concurrency as usize)
        .collect(),
    );
    for (prompt, together) in prompts.iter().zip(together) {
        let together = together?;
        let alone = tokens_of(client, model, prompt, max_tokens)?;
        if together != alone {
            return Ok(Batching {
                concurrency: 1,
                reason: format!(
                    "sequential: the batch probe's prompt {} gave {together:?} sent {concurrency} at a time, {alone:?} alone",
                    prompt.key()
                ),
            });
        }
    }
    Ok(Batching {
        concurrency,
        reason: format!(
            "batch probe: {} prompts gave the same tokens sent {concurrency} at a time and one at a time",
            prompts.len()
        ),
    })
}

/// Streams every prompt (variant 0 cold, later variants warm) through the
/// reference model, `concurrency` families at a time (each family's
/// variants in order).
/// Whether `prompt` fits the engine's prompt limit (`None`: no limit known).
fn fits(prompt: &Prompt, max_prompt: Option<usize>) -> bool {
    max_prompt.map_or(true, |max| prompt.tokens.len() <= max)
}

/// The prompts of `family` the reference phase records: every variant, and
/// the extended prompt where it fits the engine (a profile whose device
/// cache holds one prompt, Phase 2's, has no room for its extra block; only
/// TC-03 uses it). A variant that does not fit is still sent, and fails.
fn recorded(family: &Family, max_prompt: Option<usize>) -> impl Iterator<Item = &Prompt> {
    family
        .reference_prompts()
        .filter(move |p| p.variant != crate::prompts::EXTENDED_VARIANT || fits(p, max_prompt))
}

fn record_all(
    client: &Client,
    model: &str,
    book: &PromptBook,
    max_tokens: u32,
    concurrency: usize,
    max_prompt: Option<usize>,
) -> Result<(BTreeMap<String, Vec<u32>>, Baseline), ReferenceError> {
    let mut tokens = BTreeMap::new();
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    {
        let results: Vec<Result<_, ReferenceError>> = crate::rt::block_on(
            stream::iter(book.all().iter().map(|family| async move {
                let mut out = Vec::new();
                for prompt in recorded(family, max_prompt) {
                    let streamed = client
                        .stream(&request(model, prompt, max_tokens))
                        .await
                        .map_err(|e| ReferenceError::Request {
                            prompt: prompt.key(),
                            error: e.to_string(),
                        })?;
                    out.push((prompt.clone(), streamed));
                }
                Ok::<_, ReferenceError>(out)
            }))
            .buffer_unordered(concurrency.max(1))
            .collect(),
        );
        for family in results {
            for (prompt, streamed) in family? {
                if let Some(t) = &streamed.timings {
                    let ttft_ms = t.ttft.as_secs_f64() * 1000.0;
                    // The extended prompt computes a block more than a
                    // warm variant: in neither baseline.
                    if prompt.variant == 0 {
                        cold.push(ttft_ms);
                    } else if prompt.variant != crate::prompts::EXTENDED_VARIANT {
                        warm.push(ttft_ms);
                    }
                }
                let ids = streamed
                    .generated
                    .token_ids
                    .ok_or_else(|| ReferenceError::Request {
                        prompt: prompt.key(),
                        error: "the stream carried no token ids (nvext.completion_token_ids)"
                            .into(),
                    })?;
                tokens.insert(prompt.key(), ids);
            }
        }
    }
    Ok((
        tokens,
        Baseline {
            cold_ttft_ms: percentiles(&cold),
            warm_ttft_ms: percentiles(&warm),
        },
    ))
}

fn write_cache(dir: &Path, path: &Path, refs: &References) -> Result<(), ReferenceError> {
    let fail = |error: String| ReferenceError::Cache {
        path: path.to_path_buf(),
        error,
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
    let text = serde_json::to_string(refs).map_err(|e| fail(e.to_string()))?;
    // Write then rename: a concurrent run never reads half a file.
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| fail(e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extended_prompt_past_the_engines_limit_is_not_recorded_but_a_variant_is() {
        let shape = PromptShape {
            seed: 7,
            families: 1,
            variants: 2,
            prefix_blocks: 4,
            suffix_tokens: 8,
            block_size: 16,
            first_token: 3,
            vocab_size: 512,
        };
        let family = &prompts::families(&shape)[0];
        let keys = |max| recorded(family, max).map(Prompt::key).collect::<Vec<_>>();
        // Phase 2's CPU engine: 4 device blocks, 79 tokens; the extended prompt has 88.
        assert_eq!(keys(Some(79)), ["f000v0", "f000v1"]);
        assert_eq!(keys(Some(88)), ["f000v0", "f000v1", "f000x"]);
        assert_eq!(keys(None), ["f000v0", "f000v1", "f000x"]);
        // A variant past the limit is still sent (and fails, naming it).
        assert_eq!(keys(Some(10)), ["f000v0", "f000v1"]);
    }

    #[test]
    fn a_cache_entry_without_a_batch_probe_runs_sequentially() {
        // An entry written before the probe existed has no `batching`.
        let old = r#"{"digest":"d","tokens":{},"baseline":{"cold_ttft_ms":{"n":0,"mean":null,"p50":null,"p90":null,"p99":null},"warm_ttft_ms":{"n":0,"mean":null,"p50":null,"p90":null,"p99":null}},"probes":[],"seconds":1.0}"#;
        let refs: References = serde_json::from_str(old).unwrap();
        let b = Batching::of(refs.batching.as_ref());
        assert_eq!(b.concurrency, 1);
        assert!(
            b.reason.contains("predates the batch probe"),
            "{}",
            b.reason
        );
        let probed = Batching {
            concurrency: 4,
            reason: "batch probe: …".into(),
        };
        assert_eq!(Batching::of(Some(&probed)), probed);
    }
}
