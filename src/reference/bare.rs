//! Determinism probes on the bare engine: the engine's own OpenAI server,
//! without Dynamo and without KVCR, started alone after the reference
//! workers stopped.
//!
//! For each probe prompt:
//! - the same prompt twice gives the same tokens, and the second request
//!   shows a prefix-cache hit (`cached_tokens` > 0), so the repeat really
//!   ran from cached KV;
//! - the same prompt with a fresh `cache_salt` (a request that cannot reuse
//!   any cached block, which is what prefix caching off means for it) gives
//!   the same tokens, with `cached_tokens` 0;
//! - the bare engine's tokens equal the reference worker's (through Dynamo).

use std::time::Duration;

use crate::client::{Client, Completion, CompletionOutcome, TokenIdsRequest};
use crate::proc::{ProcessSpec, Supervised};
use crate::prompts::Prompt;
use crate::wait::{self, Poll};

use super::ReferenceError;

/// A running bare engine; stopped (and its `/dev/shm` files removed) on drop.
pub struct BareEngine {
    process: Supervised,
    client: Client,
    model: String,
}

impl Drop for BareEngine {
    fn drop(&mut self) {
        self.process.stop(Duration::from_secs(5));
    }
}

impl BareEngine {
    /// Starts `spec` and waits (up to `timeout`) until it serves `model`.
    pub fn start(
        spec: &ProcessSpec,
        url: &str,
        model: &str,
        timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Self, ReferenceError> {
        let process = Supervised::spawn(spec)
            .map_err(|e| ReferenceError::Bare(format!("cannot start {}: {e}", spec.name)))?;
        let client =
            Client::new(url, request_timeout).map_err(|e| ReferenceError::Client(e.to_string()))?;
        let bare = BareEngine {
            process,
            client,
            model: model.to_string(),
        };
        let what = format!("the bare engine at {url} to answer a completion of {model}");
        wait::until(what, timeout, Duration::from_millis(250), || {
            if let Some(status) = bare.process.exit_status() {
                return Poll::Abort(format!(
                    "{} exited during startup ({status}); its log: {}\n{}",
                    bare.process.name(),
                    bare.process.log_path().display(),
                    bare.process.log_tail(20)
                ));
            }
            bare.process.note_shm();
            let probe = Completion::new(model, "kvcr-e2e readiness probe").max_tokens(2);
            match crate::rt::block_on(bare.client.complete(&probe)) {
                Ok(_) => Poll::Ready(()),
                Err(e) => Poll::Pending(e.to_string()),
            }
        })
        .map_err(|e| ReferenceError::Bare(e.to_string()))?;
        bare.process.note_shm();
        Ok(bare)
    }

    fn complete(
        &self,
        prompt: &Prompt,
        max_tokens: u32,
        salt: Option<&str>,
    ) -> Result<CompletionOutcome, ReferenceError> {
        let mut request = Completion::new(&self.model, prompt.tokens.clone())
            .max_tokens(max_tokens)
            .token_ids(TokenIdsRequest::ReturnTokenIds);
        if let Some(salt) = salt {
            request = request.extra("cache_salt", serde_json::json!(salt));
        }
        crate::rt::block_on(self.client.complete(&request)).map_err(|e| ReferenceError::Request {
            prompt: prompt.key(),
            error: format!("bare engine: {e}"),
        })
    }

    /// Runs the probes on `prompt`; `reference` is the reference worker's
    /// tokens for it. Returns what was checked, for the evidence.
    pub fn probe(
        &self,
        prompt: &Prompt,
        max_tokens: u32,
        reference: &[u32],
    ) -> Result<String, ReferenceError> {
        let ids = |o: &CompletionOutcome| {
            o.generated
                .token_ids
                .clone()
                .ok_or_else(|| ReferenceError::Request {
                    prompt: prompt.key(),
                    error: "the bare engine returned no token ids (return_token_ids)".into(),
                })
        };
        let cached =
            |o: &CompletionOutcome| o.generated.usage.as_ref().and_then(|u| u.cached_tokens);
        let first = self.complete(prompt, max_tokens, None)?;
        let again = self.complete(prompt, max_tokens, None)?;
        let salted = self.complete(prompt, max_tokens, Some(&format!("probe-{}", prompt.key())))?;
        judge(
            &prompt.key(),
            (ids(&first)?, cached(&first)),
            (ids(&again)?, cached(&again)),
            (ids(&salted)?, cached(&salted)),
            reference,
        )
    }
}

/// One answer of the bare engine: its token ids and `cached_tokens` (absent
/// when the server did not report it).
type Answer = (Vec<u32>, Option<u32>);

/// The probes' verdict on one prompt's three answers (first, repeat, salted).
fn judge(
    key: &str,
    (first_ids, _): Answer,
    (again_ids, again_cached): Answer,
    (salted_ids, salted_cached): Answer,
    reference: &[u32],
) -> Result<String, ReferenceError> {
    let not_deterministic = |what: String| Err(ReferenceError::NotDeterministic(what));
    if first_ids != again_ids {
        return not_deterministic(format!(
            "bare engine, prompt {key}: {first_ids:?}, then {again_ids:?}"
        ));
    }
    if !again_cached.is_some_and(|c| c > 0) {
        return Err(ReferenceError::Bare(format!(
            "the repeat of prompt {key} reported cached_tokens {again_cached:?}: the probe did not exercise the prefix cache"
        )));
    }
    if salted_ids != first_ids {
        return not_deterministic(format!(
            "bare engine, prompt {key}: {first_ids:?} from cached KV, {salted_ids:?} computed afresh (cache_salt)"
        ));
    }
    // Absent is not zero: the repeat reported the field, so a salted answer
    // without it says nothing about a fresh computation.
    match salted_cached {
        Some(0) => {}
        None => {
            return Err(ReferenceError::Bare(format!(
                "the salted request for prompt {key} reported no cached_tokens: whether it was computed afresh is unknown"
            )))
        }
        Some(c) => {
            return Err(ReferenceError::Bare(format!(
                "the salted request for prompt {key} reported cached_tokens {c}: it was not computed afresh"
            )))
        }
    }
    if first_ids != reference {
        return not_deterministic(format!(
            "prompt {key}: the bare engine gave {first_ids:?}, the reference worker behind Dynamo {reference:?}"
        ));
    }
    Ok(format!(
        "{key}: bare engine repeat (cached_tokens {again_cached:?}), fresh (cache_salt) and reference worker agree"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(ids: &[u32], cached: Option<u32>) -> Answer {
        (ids.to_vec(), cached)
    }

    #[test]
    fn agreeing_answers_pass() {
        let ok = judge(
            "f1",
            a(&[1, 2], Some(0)),
            a(&[1, 2], Some(64)),
            a(&[1, 2], Some(0)),
            &[1, 2],
        );
        assert!(ok.expect("pass").contains("agree"));
    }

    #[test]
    fn a_salted_answer_without_cached_tokens_is_not_a_fresh_computation() {
        let err = judge("f1", a(&[1], None), a(&[1], Some(64)), a(&[1], None), &[1]).unwrap_err();
        assert!(
            err.to_string().contains("reported no cached_tokens"),
            "{err}"
        );
        let err = judge(
            "f1",
            a(&[1], None),
            a(&[1], Some(64)),
            a(&[1], Some(64)),
            &[1],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("cached_tokens 64: it was not computed afresh"),
            "{err}"
        );
    }

    #[test]
    fn a_repeat_without_a_cache_hit_or_other_tokens_fails() {
        let err = judge("f1", a(&[1], None), a(&[1], None), a(&[1], Some(0)), &[1]).unwrap_err();
        assert!(
            err.to_string()
                .contains("did not exercise the prefix cache"),
            "{err}"
        );
        let err = judge(
            "f1",
            a(&[1], None),
            a(&[2], Some(64)),
            a(&[1], Some(0)),
            &[1],
        )
        .unwrap_err();
        assert!(matches!(err, ReferenceError::NotDeterministic(_)), "{err}");
        let err = judge(
            "f1",
            a(&[1], None),
            a(&[1], Some(64)),
            a(&[1], Some(0)),
            &[3],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("the reference worker behind Dynamo"),
            "{err}"
        );
    }
}
