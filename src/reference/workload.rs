//! WL-01's reference: the workload trace replayed on the KVCR-off reference
//! worker, at the same rate as the KVCR run, in the reference phase. Each
//! request's tokens are the reference the KVCR replay is held to; the
//! replay's timings and cached tokens are the KVCR-off baseline.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::config::{Settings, WorkloadSettings};
use crate::engine::Engine;
use crate::evidence::workload::{ReplayedRequest, TraceInfo};
use crate::workload::{plan, replay, TokenSpace, Trace};

use super::ReferenceError;

/// The trace replayed with KVCR off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReference {
    pub trace: TraceInfo,
    pub rate_factor: f64,
    pub salt: u64,
    /// Every request's generated tokens, in trace order.
    pub tokens: Vec<Vec<u32>>,
    /// Every request as sent and answered, in trace order.
    pub requests: Vec<ReplayedRequest>,
    /// Where it ran, for the report.
    pub served_by: String,
}

/// The trace the settings name, read and checked; `None` when none is set.
pub fn trace_of(
    settings: &WorkloadSettings,
    repo_root: &Path,
) -> Result<Option<(Trace, PathBuf)>, String> {
    let Some(path) = &settings.trace else {
        return Ok(None);
    };
    let path = match path.is_absolute() {
        true => path.clone(),
        false => repo_root.join(path),
    };
    let trace = Trace::read(&path, settings.block_size).map_err(|e| e.to_string())?;
    Ok(Some((trace, path)))
}

/// What identifies the replay in the reference cache key: the trace's
/// bytes and how it is replayed.
pub fn digest_part(settings: &Settings, trace: &Trace) -> String {
    let w = &settings.workload;
    format!(
        "workload trace={} block_size={} rate={} salt={}",
        trace.digest(),
        w.block_size,
        w.rate,
        w.salt
    )
}

/// The trace's description for the evidence.
pub fn trace_info(trace: &Trace, path: &Path) -> TraceInfo {
    let requests = trace.requests();
    let (first, last) = (
        requests.first().map_or(0, |r| r.timestamp),
        requests.last().map_or(0, |r| r.timestamp),
    );
    TraceInfo {
        name: path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        ),
        sha256: trace.digest(),
        requests: requests.len() as u32,
        block_size: trace.block_size(),
        duration_s: last.saturating_sub(first) as f64 / 1000.0,
    }
}

/// The engine's token space for the trace (its prompt vocabulary).
pub fn token_space(settings: &WorkloadSettings, engine: &dyn Engine) -> TokenSpace {
    TokenSpace::new(settings.block_size, engine.prompt_vocab(), settings.salt)
}

/// Replays the trace on the reference model behind `client`; every
/// request must be answered with token ids.
pub fn run(
    client: &Client,
    model: &str,
    settings: &WorkloadSettings,
    engine: &dyn Engine,
    trace: &Trace,
    path: &Path,
) -> Result<WorkloadReference, ReferenceError> {
    let space = token_space(settings, engine);
    let planned = plan(trace, settings.rate, &space, model);
    if let Some(max) = engine.max_prompt_tokens() {
        if let Some(p) = planned.iter().find(|p| p.prompt_tokens() as usize > max) {
            return Err(ReferenceError::Request {
                prompt: format!("workload request {} (line {})", p.index, p.index + 1),
                error: format!(
                    "{} prompt tokens; the engine takes at most {max}",
                    p.prompt_tokens()
                ),
            });
        }
    }
    crate::events::emit(crate::events::RunEvent::ReferenceWorkload {
        trace: path.to_path_buf(),
        requests: planned.len(),
        rate: settings.rate,
    });
    let returned = crate::rt::block_on(replay(client, planned));
    let mut tokens = Vec::with_capacity(returned.len());
    let mut requests = Vec::with_capacity(returned.len());
    for r in &returned {
        let failed = |error: String| ReferenceError::Request {
            prompt: format!("workload request {} (line {})", r.index, r.index + 1),
            error,
        };
        let outcome = r.outcome.as_ref().map_err(|e| failed(e.to_string()))?;
        let ids = outcome.generated.token_ids.clone().ok_or_else(|| {
            failed("the response carried no token ids (nvext.completion_token_ids)".into())
        })?;
        requests.push(r.replayed(Some(&ids)));
        tokens.push(ids);
    }
    Ok(WorkloadReference {
        trace: trace_info(trace, path),
        rate_factor: settings.rate,
        salt: settings.salt,
        tokens,
        requests,
        served_by: format!("the reference worker ({model}): the same engine, KVCR off"),
    })
}
