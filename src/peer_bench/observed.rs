//! What a client saw, in one shape for every client: per request, when it
//! was sent and when each content chunk arrived, on [`super::clock`].

use serde::{Deserialize, Serialize};

/// One request as a client recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    /// The server's `<id>` tag read back from the text, when the client
    /// reports text.
    pub tag: Option<u64>,
    /// When the client stamped the request as sent.
    pub start_ns: u64,
    /// When the client stamped each content chunk.
    pub chunk_ns: Vec<u64>,
}

impl Observed {
    /// From a send stamp, a TTFT and the ITLs after it, in seconds (the
    /// shape of `vllm bench serve` results).
    pub fn from_seconds(tag: Option<u64>, start_s: f64, ttft_s: f64, itls_s: &[f64]) -> Observed {
        let ns = |s: f64| (s * 1e9).round() as u64;
        let mut at = start_s + ttft_s;
        let mut chunk_ns = vec![ns(at)];
        for itl in itls_s {
            at += itl;
            chunk_ns.push(ns(at));
        }
        Observed {
            tag,
            start_ns: ns(start_s),
            chunk_ns,
        }
    }
}

/// Everything one client run recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientLog {
    pub requests: Vec<Observed>,
    /// Requests the client itself counted as failed, with its reason.
    pub errors: Vec<String>,
}
