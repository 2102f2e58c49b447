//! Our streaming client ([`crate::client::Client::stream`]) as a benchmark
//! client: `concurrency` tasks in a closed loop until `requests` streams
//! are done. Run in its own process (`kvcr-e2e bench-client`) so its CPU is
//! measured the same way as the other clients'.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::clock::monotonic_ns;
use super::observed::{ClientLog, Observed};
use super::sse_server::tag_of;
use crate::client::{Client, Completion};

/// Streams `requests` completions of `max_tokens` from `url`,
/// `concurrency` at a time.
pub async fn run(url: &str, concurrency: usize, requests: usize, max_tokens: u32) -> ClientLog {
    // Only streams: their limits bound each request.
    let limits = crate::client::StreamLimits::default();
    let client = match Client::new(url, limits.overall) {
        Ok(c) => c,
        Err(e) => {
            return ClientLog {
                requests: Vec::new(),
                errors: vec![e.to_string()],
            }
        }
    };
    // `Instant` is CLOCK_MONOTONIC on Linux: one pair of readings maps it.
    let (base, base_ns) = (Instant::now(), monotonic_ns());
    let to_ns = move |i: Instant| base_ns + i.duration_since(base).as_nanos() as u64;
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (client, next) = (client.clone(), next.clone());
            tokio::spawn(async move {
                let mut log = ClientLog::default();
                while next.fetch_add(1, Ordering::Relaxed) < requests {
                    let req = Completion::new("tiny", "bench").max_tokens(max_tokens);
                    // `stream` takes its own send instant just after this one.
                    let before = Instant::now();
                    match client.stream(&req).await {
                        Ok(out) => log.requests.push(Observed {
                            tag: tag_of(&out.generated.text),
                            start_ns: to_ns(before),
                            chunk_ns: out
                                .chunks
                                .iter()
                                .filter(|c| c.content)
                                .map(|c| to_ns(before + c.at))
                                .collect(),
                        }),
                        Err(e) => log.errors.push(e.to_string()),
                    }
                }
                log
            })
        })
        .collect();
    let mut all = ClientLog::default();
    for t in tasks {
        match t.await {
            Ok(mut log) => {
                all.requests.append(&mut log.requests);
                all.errors.append(&mut log.errors);
            }
            Err(e) => all.errors.push(format!("client task failed: {e}")),
        }
    }
    all
}
