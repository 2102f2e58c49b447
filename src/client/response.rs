//! Reading completion responses leniently: choices, token ids in any of
//! their known places, usage, and the serving worker's identity.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where the generated tokens of an outcome came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server returned token ids.
    Ids,
    /// Only text came back: compare text, and say so.
    TextOnly,
}

/// Token counts of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub completion_tokens: u32,
    /// `usage.prompt_tokens_details.cached_tokens` (absent when the server
    /// does not report it, or sometimes when 0).
    pub cached_tokens: Option<u32>,
}

/// The serving worker(s) as `nvext.worker_id` reports them: either a number,
/// or `{"decode_worker_id": N, "prefill_worker_id": M, "decode_dp_rank": R, ...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WorkerIdentity {
    /// The decode (or only) worker.
    pub decode: Option<u64>,
    /// The prefill worker in disaggregated serving.
    pub prefill: Option<u64>,
    /// The decode worker's data-parallel rank.
    pub decode_dp_rank: Option<u32>,
    /// The prefill worker's data-parallel rank.
    pub prefill_dp_rank: Option<u32>,
}

impl WorkerIdentity {
    /// The worker that produced the tokens: decode, else prefill.
    pub fn serving(&self) -> Option<u64> {
        self.decode.or(self.prefill)
    }

    /// Parses the `nvext.worker_id` value; `None` for shapes without an id.
    pub fn from_value(v: &Value) -> Option<Self> {
        if let Some(id) = as_u64(v) {
            return Some(WorkerIdentity {
                decode: Some(id),
                ..Default::default()
            });
        }
        let o = v.as_object()?;
        let get = |k: &str| o.get(k).and_then(as_u64);
        let w = WorkerIdentity {
            decode: get("decode_worker_id").or_else(|| get("worker_id")),
            prefill: get("prefill_worker_id"),
            decode_dp_rank: get("decode_dp_rank").and_then(|r| u32::try_from(r).ok()),
            prefill_dp_rank: get("prefill_dp_rank").and_then(|r| u32::try_from(r).ok()),
        };
        (w.decode.is_some() || w.prefill.is_some()).then_some(w)
    }
}

/// A JSON number or numeric string as u64 (ids may exceed 2^53 and some
/// servers send them as strings).
pub fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The identity in `body.nvext.worker_id`, if any.
pub fn worker_identity(body: &Value) -> Option<WorkerIdentity> {
    body.get("nvext")
        .and_then(|n| n.get("worker_id"))
        .and_then(WorkerIdentity::from_value)
}

/// Usage from `body.usage`, if present and readable.
pub fn usage(body: &Value) -> Option<Usage> {
    let u = body.get("usage")?;
    if u.is_null() {
        return None;
    }
    let n = |v: Option<&Value>| v.and_then(as_u64).and_then(|x| u32::try_from(x).ok());
    Some(Usage {
        prompt_tokens: n(u.get("prompt_tokens")).unwrap_or(0),
        completion_tokens: n(u.get("completion_tokens")).unwrap_or(0),
        cached_tokens: n(u
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens"))),
    })
}

/// A token id from a logprobs token entry: a number, `"token_id:N"`, or a numeric string.
fn logprob_token_id(v: &Value) -> Option<u32> {
    match v {
        Value::String(s) => {
            let s = s.strip_prefix("token_id:").unwrap_or(s);
            s.parse().ok()
        }
        other => as_u64(other).and_then(|x| u32::try_from(x).ok()),
    }
}

fn id_array(v: &Value) -> Option<Vec<u32>> {
    v.as_array()?
        .iter()
        .map(|x| as_u64(x).and_then(|n| u32::try_from(n).ok()))
        .collect()
}

/// Generated token ids of `choice`, from `token_ids`, `logprobs.tokens`, or
/// `nvext.completion_token_ids` / `nvext.token_ids` of the enclosing body;
/// `None` when none is readable.
pub fn token_ids(choice: &Value, body: &Value) -> Option<Vec<u32>> {
    if let Some(ids) = choice.get("token_ids").and_then(id_array) {
        return Some(ids);
    }
    if let Some(tokens) = choice
        .get("logprobs")
        .and_then(|l| l.get("tokens"))
        .and_then(Value::as_array)
    {
        if let Some(ids) = tokens
            .iter()
            .map(logprob_token_id)
            .collect::<Option<Vec<_>>>()
        {
            return Some(ids);
        }
    }
    let nvext = body.get("nvext")?;
    nvext
        .get(crate::telemetry::names::dynamo::EXTRA_FIELD_COMPLETION_TOKEN_IDS)
        .or_else(|| nvext.get("token_ids"))
        .and_then(id_array)
}

/// The first choice's text (empty when absent).
pub fn choice_text(choice: &Value) -> String {
    choice
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The choice's finish reason, when set.
pub fn finish_reason(choice: &Value) -> Option<String> {
    choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// What every answer carries, streamed or not: the generated text and ids,
/// how it ended, the usage, and the worker that served it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generated {
    /// HTTP status (always 200 here).
    pub status: u16,
    /// All generated text (of the first choice).
    pub text: String,
    /// Generated token ids, when the server returned them (a stream: when
    /// every content chunk carried ids).
    pub token_ids: Option<Vec<u32>>,
    /// Whether ids came back or only text.
    pub token_source: TokenSource,
    /// Finish reason of the first choice.
    pub finish_reason: Option<String>,
    /// Usage, when reported (a stream: from its final usage chunk).
    pub usage: Option<Usage>,
    /// The serving worker (`nvext.worker_id`, decode worker when an object;
    /// a stream: the last one reported).
    pub worker_id: Option<u64>,
    /// The full identity as reported.
    pub worker: Option<WorkerIdentity>,
}

impl Generated {
    /// The answer's parts; its token source and serving worker follow from them.
    pub fn new(
        status: u16,
        text: String,
        token_ids: Option<Vec<u32>>,
        finish_reason: Option<String>,
        usage: Option<Usage>,
        worker: Option<WorkerIdentity>,
    ) -> Self {
        Self {
            status,
            text,
            token_source: if token_ids.is_some() {
                TokenSource::Ids
            } else {
                TokenSource::TextOnly
            },
            token_ids,
            finish_reason,
            usage,
            worker_id: worker.and_then(|w| w.serving()),
            worker,
        }
    }

    /// `usage.prompt_tokens_details.cached_tokens`, when reported.
    pub fn cached_tokens(&self) -> Option<u64> {
        self.usage
            .as_ref()
            .and_then(|u| u.cached_tokens)
            .map(u64::from)
    }
}

/// A non-streaming completion that met the contract (HTTP 200, non-empty choices).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionOutcome {
    /// Text, ids, usage and serving worker.
    #[serde(flatten)]
    pub generated: Generated,
    /// `nvext.timing`, when reported.
    pub timing: Option<Value>,
    /// The whole response body.
    pub raw: Value,
}

impl CompletionOutcome {
    /// Builds an outcome from a 200 body; `Err(reason)` when `choices` is
    /// missing or empty.
    pub fn from_body(status: u16, body: Value) -> Result<Self, String> {
        let choice = match body.get("choices").and_then(Value::as_array) {
            None => return Err("the body has no `choices` array".into()),
            Some(c) => match c.first() {
                None => return Err("`choices` is empty".into()),
                Some(first) => first.clone(),
            },
        };
        Ok(CompletionOutcome {
            generated: Generated::new(
                status,
                choice_text(&choice),
                token_ids(&choice, &body),
                finish_reason(&choice),
                usage(&body),
                worker_identity(&body),
            ),
            timing: body.get("nvext").and_then(|n| n.get("timing")).cloned(),
            raw: body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn worker_id_forms() {
        let n = WorkerIdentity::from_value(&json!(7587890412930u64)).unwrap();
        assert_eq!(n.serving(), Some(7587890412930));
        let big = WorkerIdentity::from_value(&json!(5683645024925323515u64)).unwrap();
        assert_eq!(big.serving(), Some(5683645024925323515));
        let o = WorkerIdentity::from_value(
            &json!({"decode_worker_id": 5, "decode_dp_rank": 1, "prefill_worker_id": 9}),
        )
        .unwrap();
        assert_eq!(
            (o.serving(), o.prefill, o.decode_dp_rank),
            (Some(5), Some(9), Some(1))
        );
        let p = WorkerIdentity::from_value(&json!({"prefill_worker_id": 9})).unwrap();
        assert_eq!(p.serving(), Some(9));
        let s = WorkerIdentity::from_value(&json!("42")).unwrap();
        assert_eq!(s.serving(), Some(42));
        assert_eq!(WorkerIdentity::from_value(&json!({"x": 1})), None);
        assert_eq!(WorkerIdentity::from_value(&json!(-1)), None);
        assert_eq!(WorkerIdentity::from_value(&json!(null)), None);
    }

    #[test]
    fn token_id_places() {
        let body = json!({});
        assert_eq!(
            token_ids(&json!({"token_ids": [1, 2]}), &body),
            Some(vec![1, 2])
        );
        assert_eq!(
            token_ids(
                &json!({"logprobs": {"tokens": ["token_id:5", "6", 7]}}),
                &body
            ),
            Some(vec![5, 6, 7])
        );
        assert_eq!(
            token_ids(&json!({"logprobs": {"tokens": ["hello"]}}), &body),
            None
        );
        assert_eq!(
            token_ids(&json!({}), &json!({"nvext": {"token_ids": [3]}})),
            Some(vec![3])
        );
        assert_eq!(
            token_ids(&json!({}), &json!({"nvext": {"completion_token_ids": [3]}})),
            Some(vec![3])
        );
        assert_eq!(token_ids(&json!({"token_ids": [-1]}), &body), None);
    }

    #[test]
    fn outcome_requires_choices() {
        assert!(CompletionOutcome::from_body(200, json!({"choices": []})).is_err());
        assert!(CompletionOutcome::from_body(200, json!({"id": "x"})).is_err());
        let o = CompletionOutcome::from_body(
            200,
            json!({"choices": [{"text": "hi", "finish_reason": "length"}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0}},
                   "nvext": {"worker_id": {"decode_worker_id": 11}, "timing": {"ttft_ms": 3.0}}}),
        )
        .unwrap();
        let o = o.generated;
        assert_eq!(o.worker_id, Some(11));
        assert_eq!(o.token_source, TokenSource::TextOnly);
        assert_eq!(o.cached_tokens(), Some(0));
        assert_eq!(o.finish_reason.as_deref(), Some("length"));
    }
}
