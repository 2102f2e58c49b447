//! The completion request: an OpenAI `/v1/completions` body plus Dynamo's
//! extensions (worker pinning headers, `nvext.extra_fields`).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::telemetry::names::dynamo;

/// What to send as the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Text, tokenized by the frontend.
    Text(String),
    /// Token ids, sent as the OpenAI token-array prompt form.
    TokenIds(Vec<u32>),
}

impl From<&str> for Prompt {
    fn from(s: &str) -> Self {
        Prompt::Text(s.to_string())
    }
}

impl From<String> for Prompt {
    fn from(s: String) -> Self {
        Prompt::Text(s)
    }
}

impl From<Vec<u32>> for Prompt {
    fn from(ids: Vec<u32>) -> Self {
        Prompt::TokenIds(ids)
    }
}

/// How to ask the server for generated token ids. Responses are parsed
/// leniently whatever is asked (`choices[i].token_ids`,
/// `choices[i].logprobs.tokens`, `nvext.token_ids`); the outcome's
/// [`TokenSource`](super::TokenSource) says whether ids came back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TokenIdsRequest {
    /// Ask for nothing; use ids only if the server sends them anyway.
    #[default]
    Off,
    /// vLLM's top-level `"return_token_ids": true` (`choices[i].token_ids`).
    ReturnTokenIds,
    /// `"logprobs": 1` (`choices[i].logprobs.tokens`, ids or `token_id:N`).
    Logprobs,
    /// Add this entry to `nvext.extra_fields`.
    NvextField(String),
}

/// A completion request. Defaults: temperature 0, `max_tokens` 16, no seed,
/// `nvext.extra_fields = ["worker_id", "timing"]`, not pinned.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Model name as served.
    pub model: String,
    /// The prompt.
    pub prompt: Prompt,
    /// Tokens to generate at most.
    pub max_tokens: u32,
    /// Sampling temperature (0 = greedy).
    pub temperature: f64,
    /// Sampling seed.
    pub seed: Option<u64>,
    /// Pin to this worker instance (`x-dynamo-worker-instance-id`).
    pub worker_id: Option<u64>,
    /// Pin to this data-parallel rank (`x-dynamo-dp-rank`).
    pub dp_rank: Option<u32>,
    /// Pin the prefill step of a disaggregated stack to this worker instance
    /// (`nvext.prefill_worker_id`).
    pub prefill_worker_id: Option<u64>,
    /// Pin the decode step of a disaggregated stack to this worker instance
    /// (`nvext.decode_worker_id`; there the instance header names a prefill
    /// worker).
    pub decode_worker_id: Option<u64>,
    /// `nvext.extra_fields` entries.
    pub extra_fields: Vec<String>,
    /// How to ask for token ids.
    pub token_ids: TokenIdsRequest,
    /// More top-level body fields (e.g. `ignore_eos`).
    pub extra: Map<String, Value>,
    /// The `x-request-id` header: fresh for every request built, so one
    /// request's component log lines can be found by it.
    pub request_id: String,
}

impl Completion {
    /// A greedy request for `model` with `prompt`.
    pub fn new(model: impl Into<String>, prompt: impl Into<Prompt>) -> Self {
        Completion {
            model: model.into(),
            prompt: prompt.into(),
            max_tokens: 16,
            temperature: 0.0,
            seed: None,
            worker_id: None,
            dp_rank: None,
            prefill_worker_id: None,
            decode_worker_id: None,
            extra_fields: vec![
                dynamo::EXTRA_FIELD_WORKER_ID.to_string(),
                dynamo::EXTRA_FIELD_TIMING.to_string(),
            ],
            token_ids: TokenIdsRequest::Off,
            extra: Map::new(),
            request_id: super::request_id::new_request_id(),
        }
    }

    /// Sets `max_tokens`.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// Sets the temperature.
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = t;
        self
    }

    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Pins the request to a worker instance id (as in `/health` and the ready file).
    pub fn pin_worker(mut self, instance_id: u64) -> Self {
        self.worker_id = Some(instance_id);
        self
    }

    /// Pins the prefill step of a disaggregated stack to a prefill worker
    /// instance (`nvext.prefill_worker_id`).
    pub fn pin_prefill_worker(mut self, instance_id: u64) -> Self {
        self.prefill_worker_id = Some(instance_id);
        self
    }

    /// Pins the decode step of a disaggregated stack to a decode worker
    /// instance (`nvext.decode_worker_id`).
    pub fn pin_decode_worker(mut self, instance_id: u64) -> Self {
        self.decode_worker_id = Some(instance_id);
        self
    }

    /// Pins the request to a data-parallel rank.
    pub fn dp_rank(mut self, rank: u32) -> Self {
        self.dp_rank = Some(rank);
        self
    }

    /// Chooses how to ask for token ids.
    pub fn token_ids(mut self, how: TokenIdsRequest) -> Self {
        self.token_ids = how;
        self
    }

    /// Adds a top-level body field.
    pub fn extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// The JSON body; `stream` also asks for a final usage chunk.
    pub fn body(&self, stream: bool) -> Value {
        let prompt = match &self.prompt {
            Prompt::Text(t) => json!(t),
            Prompt::TokenIds(ids) => json!(ids),
        };
        let mut extra_fields = self.extra_fields.clone();
        let mut body = json!({
            "model": self.model,
            "prompt": prompt,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": stream,
        });
        let Some(obj) = body.as_object_mut() else {
            return body;
        };
        if let Some(seed) = self.seed {
            obj.insert("seed".into(), json!(seed));
        }
        if stream {
            obj.insert("stream_options".into(), json!({"include_usage": true}));
        }
        match &self.token_ids {
            TokenIdsRequest::Off => {}
            TokenIdsRequest::ReturnTokenIds => {
                obj.insert("return_token_ids".into(), json!(true));
            }
            TokenIdsRequest::Logprobs => {
                obj.insert("logprobs".into(), json!(1));
            }
            TokenIdsRequest::NvextField(f) => {
                if !extra_fields.contains(f) {
                    extra_fields.push(f.clone());
                }
            }
        }
        let mut nvext = serde_json::Map::new();
        if !extra_fields.is_empty() {
            nvext.insert("extra_fields".into(), json!(extra_fields));
        }
        if let Some(id) = self.prefill_worker_id {
            nvext.insert("prefill_worker_id".into(), json!(id));
        }
        if let Some(id) = self.decode_worker_id {
            nvext.insert("decode_worker_id".into(), json!(id));
        }
        if !nvext.is_empty() {
            obj.insert("nvext".into(), Value::Object(nvext));
        }
        for (k, v) in &self.extra {
            obj.insert(k.clone(), v.clone());
        }
        body
    }

    /// The Dynamo routing headers this request carries.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = vec![(
            super::request_id::HEADER_REQUEST_ID,
            self.request_id.clone(),
        )];
        if let Some(id) = self.worker_id {
            h.push((dynamo::HEADER_WORKER_INSTANCE_ID, id.to_string()));
        }
        if let Some(rank) = self.dp_rank {
            h.push((dynamo::HEADER_DP_RANK, rank.to_string()));
        }
        h
    }
}

impl Completion {
    /// The request as it goes on the wire: what [`Client`](super::Client)
    /// sends, and what a case records.
    pub fn wire(&self, stream: bool) -> WireRequest {
        let mut headers = vec![(CONTENT_TYPE.to_string(), JSON.to_string())];
        headers.extend(self.headers().into_iter().map(|(k, v)| (k.to_string(), v)));
        WireRequest {
            method: "POST".into(),
            path: dynamo::PATH_COMPLETIONS.into(),
            headers,
            body: self.body(stream),
        }
    }
}

const CONTENT_TYPE: &str = "content-type";
const JSON: &str = "application/json";

/// A request exactly as sent: method, path, every header the harness sets
/// (the HTTP library adds only `host`, `content-length` and `accept`), and
/// the JSON body, whose bytes on the wire are [`WireRequest::body_bytes`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireRequest {
    pub method: String,
    /// Below the frontend's base URL (`/v1/completions`).
    pub path: String,
    /// In the order they were set; names lower case.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl WireRequest {
    /// The body's bytes as sent.
    pub fn body_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.body).unwrap_or_default()
    }

    /// Whether the body asks for a stream (SSE).
    pub fn streams(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }

    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Sets header `name` (replacing it where it was, else at the end).
    pub fn set_header(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        match self
            .headers
            .iter_mut()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
        {
            Some(slot) => slot.1 = value,
            None => self.headers.push((name.to_ascii_lowercase(), value)),
        }
    }

    /// Removes header `name`; returns its value.
    pub fn remove_header(&mut self, name: &str) -> Option<String> {
        let at = self
            .headers
            .iter()
            .position(|(k, _)| k.eq_ignore_ascii_case(name))?;
        Some(self.headers.remove(at).1)
    }

    /// A `curl` command line that sends this request again to the frontend
    /// at `$KVCR_FRONTEND`, or at `base_url` when that is unset.
    pub fn curl(&self, base_url: &str) -> String {
        let mut words = vec![
            "curl -sS -N -X".to_string(),
            shell_quote(&self.method),
            format!(
                "\"${{KVCR_FRONTEND:-{}}}\"{}",
                escape_in_double_quotes(base_url.trim_end_matches('/')),
                shell_quote(&self.path)
            ),
        ];
        for (k, v) in &self.headers {
            words.push("-H".into());
            words.push(shell_quote(&format!("{k}: {v}")));
        }
        words.push("--data-binary".into());
        words.push(shell_quote(&String::from_utf8_lossy(&self.body_bytes())));
        words.join(" ")
    }
}

/// `s` as one shell word in single quotes (`'` written as `'\''`).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s` safe inside double quotes (`"`, `$`, `` ` `` and `\` escaped).
fn escape_in_double_quotes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '"' | '$' | '`' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One line about a request for error messages: model, prompt excerpt, pinning.
impl fmt::Display for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.prompt {
            Prompt::Text(t) => {
                let cut: String = t.chars().take(40).collect();
                let more = if t.chars().count() > 40 { "…" } else { "" };
                write!(
                    f,
                    "completion of {:?} for prompt {cut:?}{more} ({} chars)",
                    self.model,
                    t.chars().count()
                )?
            }
            Prompt::TokenIds(ids) => write!(
                f,
                "completion of {:?} for a {}-token prompt",
                self.model,
                ids.len()
            )?,
        }
        write!(f, ", max_tokens {}", self.max_tokens)?;
        if let Some(id) = self.worker_id {
            write!(f, ", pinned to worker {id}")?;
        }
        if let Some(r) = self.dp_rank {
            write!(f, ", dp rank {r}")?;
        }
        if let Some(id) = self.prefill_worker_id {
            write!(f, ", prefill pinned to worker {id}")?;
        }
        if let Some(id) = self.decode_worker_id {
            write!(f, ", decode pinned to worker {id}")?;
        }
        write!(f, ", x-request-id {}", self.request_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_and_headers() {
        let c = Completion::new("tiny", "hello")
            .max_tokens(8)
            .seed(7)
            .pin_worker(7587890412930)
            .dp_rank(1)
            .token_ids(TokenIdsRequest::ReturnTokenIds);
        insta::assert_json_snapshot!(c.body(true));
        assert_eq!(
            c.headers(),
            vec![
                ("x-request-id", c.request_id.clone()),
                ("x-dynamo-worker-instance-id", "7587890412930".to_string()),
                ("x-dynamo-dp-rank", "1".to_string())
            ]
        );
        let ids = Completion::new("tiny", vec![1u32, 2, 3])
            .token_ids(TokenIdsRequest::NvextField("token_ids".into()));
        let b = ids.body(false);
        assert_eq!(b["prompt"], json!([1, 2, 3]));
        assert_eq!(
            b["nvext"]["extra_fields"],
            json!(["worker_id", "timing", "token_ids"])
        );
        assert!(b.get("stream_options").is_none());
        assert!(b["nvext"].get("prefill_worker_id").is_none());
        let p = Completion::new("tiny", "x").pin_prefill_worker(42);
        assert_eq!(p.body(false)["nvext"]["prefill_worker_id"], json!(42));
        assert_eq!(p.headers().len(), 1, "the prefill pin is a body field");
        assert!(p.to_string().ends_with(&format!(
            "prefill pinned to worker 42, x-request-id {}",
            p.request_id
        )));
        let d = Completion::new("tiny", "x").pin_decode_worker(43);
        assert_eq!(d.body(false)["nvext"]["decode_worker_id"], json!(43));
        assert_eq!(d.headers().len(), 1, "the decode pin is a body field");
        assert_ne!(c.request_id, d.request_id, "every request its own id");
        assert_eq!(
            c.to_string(),
            format!("completion of \"tiny\" for prompt \"hello\" (5 chars), max_tokens 8, pinned to worker 7587890412930, dp rank 1, x-request-id {}", c.request_id)
        );
    }
}
