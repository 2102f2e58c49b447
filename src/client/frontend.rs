//! [`Client`]: the Dynamo frontend over HTTP — completions, `/health`,
//! `/v1/models`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ClientError;
use super::request::{Completion, WireRequest};
use super::response::{as_u64, CompletionOutcome};
use super::stream::StreamLimits;
use crate::telemetry::names::dynamo;

/// Longest body excerpt kept in an error.
pub(crate) const BODY_EXCERPT: usize = 600;

pub(crate) fn excerpt(s: &str) -> String {
    if s.len() <= BODY_EXCERPT {
        return s.to_string();
    }
    let mut end = BODY_EXCERPT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &s[..end], s.len())
}

/// A client of one Dynamo frontend.
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) http: reqwest::Client,
    base: String,
    /// Timeout of a non-streaming request (whole request and body).
    pub request_timeout: Duration,
    /// Deadlines of streaming requests.
    pub limits: StreamLimits,
    /// Every request sent, as sent, when [`Client::recording`] asked for it
    /// (shared by clones: a case's load clients record into its list).
    sent: Option<std::sync::Arc<std::sync::Mutex<Vec<WireRequest>>>>,
}

/// One registered endpoint instance listed by `/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// The instance id (what `x-dynamo-worker-instance-id` pins).
    pub instance_id: u64,
    /// Dynamo namespace.
    pub namespace: Option<String>,
    /// Component.
    pub component: Option<String>,
    /// Endpoint (`generate`, ...).
    pub endpoint: Option<String>,
}

/// The frontend's `/health` answer, read leniently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// HTTP status of the answer.
    pub http_status: u16,
    /// `status` field (`healthy`, ...).
    pub status: Option<String>,
    /// `instances[]` entries that carry an `instance_id`.
    pub instances: Vec<Instance>,
    /// The whole body.
    pub raw: Value,
}

impl Health {
    /// Parses a `/health` body (unknown fields ignored).
    pub fn from_body(http_status: u16, raw: Value) -> Self {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let instances = raw
            .get("instances")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|i| {
                        Some(Instance {
                            instance_id: i.get("instance_id").and_then(as_u64)?,
                            namespace: s(i, "namespace"),
                            component: s(i, "component"),
                            endpoint: s(i, "endpoint"),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Health {
            http_status,
            status: s(&raw, "status"),
            instances,
            raw,
        }
    }

    /// Distinct instance ids, sorted.
    pub fn instance_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.instances.iter().map(|i| i.instance_id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Distinct instance ids serving `endpoint` (e.g. `generate`), sorted.
    pub fn instance_ids_for(&self, endpoint: &str) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .instances
            .iter()
            .filter(|i| i.endpoint.as_deref() == Some(endpoint))
            .map(|i| i.instance_id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// HTTP 200 and `status` = `healthy` (or no status field).
    pub fn is_healthy(&self) -> bool {
        self.http_status == 200 && self.status.as_deref().map_or(true, |s| s == "healthy")
    }
}

impl Client {
    /// A client of the frontend at `base` (e.g. `http://127.0.0.1:8000`).
    /// Proxies from the environment are ignored: the stack is local.
    pub fn new(base: impl Into<String>) -> Result<Self, ClientError> {
        let base = base.into().trim_end_matches('/').to_string();
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| ClientError::Setup {
                base: base.clone(),
                reason: e.to_string(),
            })?;
        Ok(Client {
            http,
            base,
            request_timeout: Duration::from_secs(120),
            limits: StreamLimits::default(),
            sent: None,
        })
    }

    /// Sets the non-streaming request timeout.
    pub fn with_request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = t;
        self
    }

    /// Sets the streaming deadlines.
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The frontend's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// From now on, keeps every request this client (and its clones) sends,
    /// exactly as sent ([`Client::sent`]).
    pub fn recording(mut self) -> Self {
        self.sent = Some(Default::default());
        self
    }

    /// The requests sent since [`Client::recording`], in order.
    pub fn sent(&self) -> Vec<WireRequest> {
        self.sent
            .as_ref()
            .and_then(|s| s.lock().ok().map(|s| s.clone()))
            .unwrap_or_default()
    }

    pub(crate) fn post(&self, req: &Completion, stream: bool) -> reqwest::RequestBuilder {
        let wire = req.wire(stream);
        let rb = self.post_wire(&wire);
        if let Some(sent) = &self.sent {
            if let Ok(mut sent) = sent.lock() {
                sent.push(wire);
            }
        }
        rb
    }

    /// `wire`'s method, path, headers and body bytes, as they are.
    pub(crate) fn post_wire(&self, wire: &WireRequest) -> reqwest::RequestBuilder {
        let method =
            reqwest::Method::from_bytes(wire.method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let mut rb = self
            .http
            .request(method, self.url(&wire.path))
            .body(wire.body_bytes());
        for (k, v) in &wire.headers {
            rb = rb.header(k, v);
        }
        rb
    }

    /// A non-streaming completion. HTTP 200 with non-empty `choices`, or a
    /// typed error carrying the status, a body excerpt and the request.
    pub async fn complete(&self, req: &Completion) -> Result<CompletionOutcome, ClientError> {
        self.complete_built(req.to_string(), self.post(req, false))
            .await
    }

    /// A recorded request sent again as it is (`kvcr-e2e replay`): a
    /// stream when its body asks for one. Returns the generated token ids
    /// and the serving worker.
    pub async fn send_recorded(
        &self,
        wire: &WireRequest,
    ) -> Result<(Option<Vec<u32>>, Option<u64>), ClientError> {
        let what = format!(
            "recorded request {} {} (x-request-id {})",
            wire.method,
            wire.path,
            wire.header(super::HEADER_REQUEST_ID).unwrap_or("none")
        );
        if wire.streams() {
            let out = self.stream_built(what, self.post_wire(wire)).await?;
            Ok((out.token_ids, out.worker_id))
        } else {
            let out = self.complete_built(what, self.post_wire(wire)).await?;
            Ok((out.token_ids, out.worker_id))
        }
    }

    async fn complete_built(
        &self,
        request: String,
        built: reqwest::RequestBuilder,
    ) -> Result<CompletionOutcome, ClientError> {
        let url = self.url(dynamo::PATH_COMPLETIONS);
        let transport = |source| ClientError::Transport {
            request: request.clone(),
            url: url.clone(),
            source,
        };
        let resp = built
            .timeout(self.request_timeout)
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(transport)?;
        if status != 200 {
            return Err(ClientError::Status {
                request,
                url,
                status,
                body: excerpt(&text),
            });
        }
        let bad = |reason: String| ClientError::BadBody {
            request: request.clone(),
            url: url.clone(),
            reason,
            body: excerpt(&text),
        };
        let body: Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("the body is not JSON ({e})")))?;
        CompletionOutcome::from_body(status, body).map_err(bad)
    }

    async fn get_json(&self, path: &str, what: &str) -> Result<(u16, Value), ClientError> {
        let url = self.url(path);
        let request = format!("GET {what}");
        let resp = self
            .http
            .get(&url)
            .timeout(self.request_timeout.min(Duration::from_secs(10)))
            .send()
            .await
            .map_err(|source| ClientError::Transport {
                request: request.clone(),
                url: url.clone(),
                source,
            })?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|source| ClientError::Transport {
            request: request.clone(),
            url: url.clone(),
            source,
        })?;
        let body = serde_json::from_str(&text).map_err(|e| ClientError::BadBody {
            request,
            url,
            reason: format!("the body is not JSON ({e})"),
            body: excerpt(&text),
        })?;
        Ok((status, body))
    }

    /// Reads `/health` (any status with a JSON body is an answer; check
    /// [`Health::is_healthy`]).
    pub async fn health(&self) -> Result<Health, ClientError> {
        let (status, body) = self
            .get_json(dynamo::PATH_HEALTH, "frontend health")
            .await?;
        Ok(Health::from_body(status, body))
    }

    /// The model ids of `/v1/models`.
    pub async fn models(&self) -> Result<Vec<String>, ClientError> {
        let (status, body) = self.get_json(dynamo::PATH_MODELS, "model list").await?;
        let url = self.url(dynamo::PATH_MODELS);
        if status != 200 {
            return Err(ClientError::Status {
                request: "GET model list".into(),
                url,
                status,
                body: excerpt(&body.to_string()),
            });
        }
        let Some(data) = body.get("data").and_then(Value::as_array) else {
            return Err(ClientError::BadBody {
                request: "GET model list".into(),
                url,
                reason: "no `data` array".into(),
                body: excerpt(&body.to_string()),
            });
        };
        Ok(data
            .iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
            .collect())
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Inputs per property per run; see docs/robustness.md.
    pub const PROPTEST_CASES: u32 = 512;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(PROPTEST_CASES))]

        /// Any `/health` body (JSON or not) reads as a health value, never a panic.
        #[test]
        fn any_health_body_is_read(text in ".{0,200}", ids in prop::collection::vec(any::<i64>(), 0..4)) {
            let raw = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
            let _ = Health::from_body(200, raw).instance_ids();
            let shaped = serde_json::json!({"status": "ready", "instances": ids.iter().map(|i| serde_json::json!({"instance_id": i, "endpoint": "generate"})).collect::<Vec<_>>()});
            let health = Health::from_body(200, shaped);
            let _ = (health.instance_ids(), health.instance_ids_for("generate"), health.is_healthy());
        }
    }
}
