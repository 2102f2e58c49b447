//! A trace sent through a frontend in an open loop: each request at its
//! arrival time (scaled by a rate factor), whatever is still in flight, so
//! a slow stretch is measured by as many requests as arrived in it (no
//! coordinated omission). Each request records its intended and actual
//! send and what came back.
//!
//! ```no_run
//! # async fn demo(client: &kvcr_e2e::client::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use kvcr_e2e::workload::{replay, plan, Trace, TokenSpace};
//! let trace = Trace::read("fixtures/traces/multi-turn-small.jsonl".as_ref(), 16)?;
//! let space = TokenSpace::new(16, 3..426, 0);
//! let sent = replay(client, plan(&trace, 4.0, &space, "model")).await;
//! # let _ = sent;
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use futures_util::future::join_all;

use crate::client::{Client, ClientError, Completion, StreamOutcome, TokenIdsRequest};
use crate::evidence::workload::{Answer, ReplayedRequest};
use crate::telemetry::names::dynamo::EXTRA_FIELD_COMPLETION_TOKEN_IDS;

use super::{TokenSpace, Trace};

/// One request of a replay, ready to send.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Its line among the trace's requests (0-based).
    pub index: usize,
    /// When to send it, after the replay starts.
    pub at: Duration,
    /// Greedy, streamed, asking for token ids; `max_tokens` is the trace's
    /// `output_length`.
    pub request: Completion,
}

impl Planned {
    pub fn prompt_tokens(&self) -> u32 {
        match &self.request.prompt {
            crate::client::Prompt::TokenIds(t) => t.len() as u32,
            crate::client::Prompt::Text(_) => 0,
        }
    }
}

/// The requests of `trace` against `model`, arrivals divided by
/// `rate_factor` (2.0: twice as fast), prompts from `space`.
pub fn plan(trace: &Trace, rate_factor: f64, space: &TokenSpace, model: &str) -> Vec<Planned> {
    trace
        .schedule(rate_factor)
        .enumerate()
        .map(|(index, (at, request))| Planned {
            index,
            at,
            request: Completion::new(model, space.prompt(request))
                .max_tokens(u32::try_from(request.output_length).unwrap_or(u32::MAX))
                .token_ids(TokenIdsRequest::NvextField(
                    EXTRA_FIELD_COMPLETION_TOKEN_IDS.into(),
                )),
        })
        .collect()
}

/// One request as it came back.
#[derive(Debug)]
pub struct Returned {
    pub index: usize,
    pub request_id: String,
    pub prompt_tokens: u32,
    /// Intended send, after the replay started.
    pub intended: Duration,
    /// Actual send.
    pub sent: Duration,
    /// When the stream ended (or failed).
    pub finished: Duration,
    pub outcome: Result<StreamOutcome, ClientError>,
}

impl Returned {
    /// The generated token ids, if it was answered.
    pub fn tokens(&self) -> Option<&[u32]> {
        self.outcome
            .as_ref()
            .ok()
            .and_then(|o| o.generated.token_ids.as_deref())
    }

    /// The request as the summaries need it, its tokens judged by
    /// `reference`; `None`: not judged (a sweep's replay, whose tokens
    /// have no reference), so an answer counts as right.
    pub fn replayed(&self, reference: Option<&[u32]>) -> ReplayedRequest {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let answer = self.outcome.as_ref().ok().map(|o| {
            let t = o.timings.as_ref();
            Answer {
                ttft_ms: t.map_or(f64::NAN, |t| ms(t.ttft)),
                tpot_ms: t.and_then(|t| t.tpot).map(ms),
                e2el_ms: t.map_or(f64::NAN, |t| ms(t.latency)),
                finished_s: self.finished.as_secs_f64(),
                cached_tokens: o.generated.cached_tokens().unwrap_or(0),
                reference_tokens: reference.map_or(true, |r| Some(r) == self.tokens()),
            }
        });
        ReplayedRequest {
            intended_s: self.intended.as_secs_f64(),
            schedule_delay_ms: ms(self.sent.saturating_sub(self.intended)),
            prompt_tokens: self.prompt_tokens,
            answer,
        }
    }
}

/// Sends every planned request at its instant and waits for all of them;
/// the result is in plan order.
pub async fn replay(client: &Client, planned: Vec<Planned>) -> Vec<Returned> {
    let started = tokio::time::Instant::now();
    join_all(planned.into_iter().map(|p| async move {
        tokio::time::sleep_until(started + p.at).await;
        let sent = started.elapsed();
        let outcome = client.stream(&p.request).await;
        Returned {
            index: p.index,
            request_id: p.request.request_id.clone(),
            prompt_tokens: p.prompt_tokens(),
            intended: p.at,
            sent,
            finished: started.elapsed(),
            outcome,
        }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> Trace {
        Trace::parse(
            "{\"timestamp\":0,\"input_length\":20,\"output_length\":4,\"hash_ids\":[0,1]}\n\
             {\"timestamp\":1000,\"input_length\":32,\"output_length\":8,\"hash_ids\":[0,2]}\n",
            16,
            "t.jsonl",
        )
        .unwrap()
    }

    #[test]
    fn a_plan_sends_each_request_at_its_scaled_arrival_with_its_lengths() {
        let space = TokenSpace::new(16, 3..426, 0);
        let p = plan(&trace(), 2.0, &space, "m");
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].at, Duration::from_millis(500));
        assert_eq!(p[0].prompt_tokens(), 20);
        assert_eq!(p[1].request.max_tokens, 8);
        // Shared block 0: the same first 16 tokens.
        let tokens = |i: usize| match &p[i].request.prompt {
            crate::client::Prompt::TokenIds(t) => t.clone(),
            _ => unreachable!(),
        };
        assert_eq!(tokens(0)[..16], tokens(1)[..16]);
        assert_ne!(tokens(0)[16..], tokens(1)[16..20]);
    }

    #[test]
    fn a_failed_request_has_no_answer_and_wrong_tokens_are_not_right() {
        let failed = Returned {
            index: 0,
            request_id: "r".into(),
            prompt_tokens: 20,
            intended: Duration::from_millis(100),
            sent: Duration::from_millis(103),
            finished: Duration::from_millis(200),
            outcome: Err(ClientError::Status {
                request: "r".into(),
                url: "u".into(),
                status: 503,
                body: String::new(),
            }),
        };
        let r = failed.replayed(Some(&[1, 2]));
        assert!(r.answer.is_none());
        assert!(failed.replayed(None).answer.is_none());
        assert!((r.schedule_delay_ms - 3.0).abs() < 1e-9);
        assert_eq!(r.prompt_tokens, 20);
    }
}
