//! Streaming completions over SSE, with a monotonic timestamp per chunk and
//! deadlines (first chunk, idle gap, overall) that turn stalls into errors.

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{ClientError, StreamFailure};
use super::frontend::{excerpt, Client};
use super::request::Completion;
use super::response::{
    choice_text, finish_reason, token_ids, usage, worker_identity, TokenSource, Usage,
    WorkerIdentity,
};
use super::timing::StreamTimings;
use crate::telemetry::names::dynamo;

/// Deadlines of a streaming request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamLimits {
    /// Send → first content chunk (covers queueing and prefill).
    pub first_chunk: Duration,
    /// Longest quiet gap between events once content has started.
    pub idle: Duration,
    /// Send → end of stream.
    pub overall: Duration,
}

impl Default for StreamLimits {
    /// 30 s to the first chunk, 5 s idle, 120 s overall.
    fn default() -> Self {
        StreamLimits {
            first_chunk: Duration::from_secs(30),
            idle: Duration::from_secs(5),
            overall: Duration::from_secs(120),
        }
    }
}

/// One SSE data event of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Arrival, relative to send.
    pub at: Duration,
    /// Text of the first choice (may be empty).
    pub text: String,
    /// Token ids of the first choice, when present.
    pub token_ids: Option<Vec<u32>>,
    /// Serving worker reported by this chunk.
    pub worker_id: Option<u64>,
    /// Finish reason, on the last content chunk.
    pub finish_reason: Option<String>,
    /// Whether it carried generated text or ids.
    pub content: bool,
}

/// A stream that met the contract: HTTP 200, non-empty choices, a finish
/// reason and `[DONE]`, within its deadlines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamOutcome {
    /// HTTP status (always 200 here).
    pub status: u16,
    /// All generated text.
    pub text: String,
    /// All generated ids, when every content chunk carried ids.
    pub token_ids: Option<Vec<u32>>,
    /// Whether ids came back or only text.
    pub token_source: TokenSource,
    /// The finish reason.
    pub finish_reason: Option<String>,
    /// Usage from the final usage chunk, when sent.
    pub usage: Option<Usage>,
    /// The serving worker (last one reported).
    pub worker_id: Option<u64>,
    /// The last full identity reported.
    pub worker: Option<WorkerIdentity>,
    /// Every distinct worker id reported, in order (more than one is suspicious).
    pub worker_ids_seen: Vec<u64>,
    /// Every data event.
    pub chunks: Vec<Chunk>,
    /// Timings; `None` when no chunk carried content (0 tokens generated).
    pub timings: Option<StreamTimings>,
    /// The send instant on CLOCK_MONOTONIC, ns (see
    /// [`timing::monotonic_ns`](super::timing::monotonic_ns)): send + TTFT is
    /// when the first content chunk arrived, comparable with an engine's own
    /// first-token stamp.
    #[serde(default)]
    pub sent_monotonic_ns: Option<u64>,
}

/// Accumulates a stream's events.
#[derive(Default)]
struct State {
    chunks: Vec<Chunk>,
    text: String,
    ids: Vec<u32>,
    all_ids: bool,
    content_chunks: usize,
    any_choices: bool,
    finish: Option<String>,
    usage: Option<Usage>,
    worker: Option<WorkerIdentity>,
    seen: Vec<u64>,
    last_data_at: Option<Duration>,
    events: usize,
}

impl State {
    fn tokens(&self) -> usize {
        if self.all_ids && self.content_chunks > 0 {
            self.ids.len()
        } else {
            self.content_chunks
        }
    }

    fn worker_id(&self) -> Option<u64> {
        self.worker.and_then(|w| w.serving())
    }

    /// Takes one data event; `Err` for malformed or error chunks.
    fn take(&mut self, at: Duration, data: &str) -> Result<(), StreamFailure> {
        let index = self.events;
        self.events += 1;
        let v: Value = serde_json::from_str(data).map_err(|e| StreamFailure::MalformedChunk {
            index,
            reason: e.to_string(),
            data: excerpt(data),
        })?;
        if !v.is_object() {
            return Err(StreamFailure::MalformedChunk {
                index,
                reason: "not a JSON object".into(),
                data: excerpt(data),
            });
        }
        if let Some(err) = v.get("error") {
            return Err(StreamFailure::ServerError {
                tokens: self.tokens(),
                data: excerpt(&err.to_string()),
            });
        }
        self.last_data_at = Some(at);
        let worker = worker_identity(&v);
        if let Some(w) = worker {
            self.worker = Some(w);
            if let Some(id) = w.serving() {
                if !self.seen.contains(&id) {
                    self.seen.push(id);
                }
            }
        }
        if let Some(u) = usage(&v) {
            self.usage = Some(u);
        }
        let choice = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .cloned();
        let (text, ids, finish) = match &choice {
            Some(c) => {
                self.any_choices = true;
                (choice_text(c), token_ids(c, &v), finish_reason(c))
            }
            None => (String::new(), None, None),
        };
        let content = !text.is_empty() || ids.as_ref().is_some_and(|i| !i.is_empty());
        if content {
            if self.content_chunks == 0 {
                self.all_ids = true;
            }
            self.content_chunks += 1;
            self.text.push_str(&text);
            match &ids {
                Some(i) if !i.is_empty() => self.ids.extend_from_slice(i),
                _ => self.all_ids = false,
            }
        }
        if finish.is_some() {
            self.finish = finish.clone();
        }
        self.chunks.push(Chunk {
            at,
            text,
            token_ids: ids,
            worker_id: worker.and_then(|w| w.serving()),
            finish_reason: finish,
            content,
        });
        Ok(())
    }
}

impl Client {
    /// A streaming completion through SSE, timed per chunk. Any departure
    /// from the contract (non-200, malformed chunk, error event, no
    /// `[DONE]` or finish reason, a deadline of [`Client::limits`] passing)
    /// is a typed error naming what was awaited.
    pub async fn stream(&self, req: &Completion) -> Result<StreamOutcome, ClientError> {
        self.stream_built(req.to_string(), self.post(req, true))
            .await
    }

    /// [`Client::stream`] of a request already built (`request` describes it).
    pub(crate) async fn stream_built(
        &self,
        request: String,
        built: reqwest::RequestBuilder,
    ) -> Result<StreamOutcome, ClientError> {
        let url = self.url(dynamo::PATH_COMPLETIONS);
        let limits = self.limits;
        let fail = |failure| ClientError::Stream {
            request: request.clone(),
            url: url.clone(),
            failure,
        };
        let send = Instant::now();
        let sent_monotonic_ns = super::timing::monotonic_ns();
        let overall_at = send + limits.overall;
        let resp = match tokio::time::timeout_at(overall_at.into(), built.send()).await {
            Err(_) => {
                return Err(fail(StreamFailure::NoFirstChunk {
                    waited: send.elapsed(),
                    events: 0,
                }))
            }
            Ok(Err(source)) => {
                return Err(ClientError::Transport {
                    request: request.clone(),
                    url: url.clone(),
                    source,
                })
            }
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        if status != 200 {
            let body = tokio::time::timeout(self.limits.idle, resp.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_else(|| "<body not readable>".into());
            return Err(ClientError::Status {
                request,
                url,
                status,
                body: excerpt(&body),
            });
        }
        let mut events = resp.bytes_stream().eventsource();
        let mut st = State::default();
        let mut last_event = send;
        let mut saw_done = false;
        loop {
            let gap = if st.content_chunks == 0 {
                limits.first_chunk
            } else {
                limits.idle
            };
            let idle_at = last_event + gap;
            let until = idle_at.min(overall_at);
            let next = match tokio::time::timeout_at(until.into(), events.next()).await {
                Ok(n) => n,
                Err(_) => {
                    let failure = if until == overall_at && overall_at <= idle_at {
                        StreamFailure::Overall {
                            limit: limits.overall,
                            tokens: st.tokens(),
                            worker: st.worker_id(),
                        }
                    } else if st.content_chunks == 0 {
                        StreamFailure::NoFirstChunk {
                            waited: send.elapsed(),
                            events: st.events,
                        }
                    } else {
                        StreamFailure::Idle {
                            idle: gap,
                            tokens: st.tokens(),
                            worker: st.worker_id(),
                        }
                    };
                    return Err(fail(failure));
                }
            };
            let ev = match next {
                None => break,
                Some(Err(e)) => {
                    return Err(fail(StreamFailure::Transport {
                        tokens: st.tokens(),
                        reason: e.to_string(),
                    }))
                }
                Some(Ok(ev)) => ev,
            };
            last_event = Instant::now();
            if ev.event == "error" {
                return Err(fail(StreamFailure::ServerError {
                    tokens: st.tokens(),
                    data: excerpt(&ev.data),
                }));
            }
            let data = ev.data.trim();
            if data.is_empty() {
                continue;
            }
            if data == "[DONE]" {
                saw_done = true;
                break;
            }
            st.take(last_event.saturating_duration_since(send), data)
                .map_err(&fail)?;
        }
        if !st.any_choices {
            return Err(fail(StreamFailure::EmptyChoices { events: st.events }));
        }
        if !saw_done || st.finish.is_none() {
            return Err(fail(StreamFailure::Truncated {
                tokens: st.tokens(),
                worker: st.worker_id(),
                saw_done,
                saw_finish: st.finish.is_some(),
            }));
        }
        let offsets: Vec<Duration> = st
            .chunks
            .iter()
            .filter(|c| c.content)
            .map(|c| c.at)
            .collect();
        let tokens = st
            .usage
            .map(|u| u.completion_tokens as usize)
            .filter(|n| *n > 0)
            .unwrap_or_else(|| st.tokens());
        let latency = st.last_data_at.unwrap_or_default();
        let timings = StreamTimings::compute(&offsets, latency, tokens);
        let has_ids = st.all_ids && st.content_chunks > 0;
        Ok(StreamOutcome {
            status,
            worker_id: st.worker_id(),
            worker: st.worker,
            worker_ids_seen: st.seen,
            token_ids: has_ids.then_some(st.ids),
            token_source: if has_ids {
                TokenSource::Ids
            } else {
                TokenSource::TextOnly
            },
            text: st.text,
            finish_reason: st.finish,
            usage: st.usage,
            chunks: st.chunks,
            timings,
            sent_monotonic_ns,
        })
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Inputs per property per run; see docs/robustness.md.
    pub const PROPTEST_CASES: u32 = 512;

    fn json_chunk() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        let value = leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("choices".to_string()),
                        Just("nvext".to_string()),
                        Just("usage".to_string()),
                        Just("completion_token_ids".to_string()),
                        Just("worker_id".to_string()),
                        Just("text".to_string()),
                        Just("finish_reason".to_string()),
                        Just("error".to_string()),
                        "[a-z_]{1,10}",
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        value.prop_map(|v| v.to_string())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(PROPTEST_CASES))]

        /// Hostile SSE data events become chunks or typed failures, never a panic.
        #[test]
        fn any_sse_data_is_a_chunk_or_a_failure(chunks in prop::collection::vec(prop_oneof![json_chunk(), ".{0,64}"], 1..8)) {
            let mut state = State::default();
            for (i, data) in chunks.iter().enumerate() {
                let _ = state.take(Duration::from_millis(i as u64), data);
            }
            let _ = (state.tokens(), state.worker_id());
        }
    }
}
