//! The ONE place where client-side latency figures are defined.
//!
//! All instants come from the monotonic clock ([`std::time::Instant`]) and
//! are taken in the client: `send` just before the request is written, and
//! one instant per SSE data event as it is decoded.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The definitions, as text a results writer can embed next to its tables.
pub const DEFINITIONS: &str = "\
Client-side timings (monotonic clock, measured in the harness):
- send: the instant just before the HTTP request is sent.
- chunk timestamp: time from send to the arrival of an SSE data event that carries generated text or token ids (a content chunk).
- TTFT (time to first token): send -> first content chunk.
- latency: send -> last SSE data event before [DONE] (the usage chunk included).
- TPOT (time per output token): (latency - TTFT) / (tokens - 1), tokens = generated tokens (usage.completion_tokens when reported, else token ids received, else content chunks); undefined for fewer than 2 tokens. Same as vLLM bench.
- ITL (inter-token latency): the gaps between consecutive content chunks, one value per gap; a chunk carrying several tokens counts once. Same as vLLM bench.";

/// CLOCK_MONOTONIC now, in ns: the clock [`std::time::Instant`] reads on
/// Linux, and one every process of the machine shares (the CPU engine
/// stamps its first token with it), so instants of two processes compare.
pub fn monotonic_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return None;
    }
    Some(u64::try_from(ts.tv_sec).ok()? * 1_000_000_000 + u64::try_from(ts.tv_nsec).ok()?)
}

/// Client-side timings of one stream. See [`DEFINITIONS`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamTimings {
    /// Send → first content chunk.
    #[serde(with = "secs")]
    pub ttft: Duration,
    /// Send → last data event before `[DONE]`.
    #[serde(with = "secs")]
    pub latency: Duration,
    /// (latency − ttft) / (tokens − 1); `None` for fewer than 2 tokens.
    #[serde(with = "opt_secs")]
    pub tpot: Option<Duration>,
    /// Gaps between consecutive content chunks.
    #[serde(with = "vec_secs")]
    pub itl: Vec<Duration>,
    /// Content-chunk arrival times relative to send.
    #[serde(with = "vec_secs")]
    pub chunk_offsets: Vec<Duration>,
    /// Generated tokens used for TPOT.
    pub tokens: usize,
}

impl StreamTimings {
    /// Computes the figures from content-chunk offsets (relative to send,
    /// in arrival order), the latency, and the token count. `None` when no
    /// content chunk arrived.
    pub fn compute(chunk_offsets: &[Duration], latency: Duration, tokens: usize) -> Option<Self> {
        let ttft = *chunk_offsets.first()?;
        let latency = latency.max(chunk_offsets.last().copied().unwrap_or(ttft));
        let tpot = if tokens >= 2 {
            let n = u32::try_from(tokens - 1).unwrap_or(u32::MAX);
            Some(latency.saturating_sub(ttft) / n)
        } else {
            None
        };
        let itl = chunk_offsets
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect();
        Some(StreamTimings {
            ttft,
            latency,
            tpot,
            itl,
            chunk_offsets: chunk_offsets.to_vec(),
            tokens,
        })
    }
}

/// Durations serialize as seconds (f64), so evidence carries units in the field docs.
mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let f = f64::deserialize(d)?;
        Duration::try_from_secs_f64(f).map_err(serde::de::Error::custom)
    }
}

mod opt_secs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(|d| d.as_secs_f64()).serialize(s)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<f64>::deserialize(d)?
            .map(|f| Duration::try_from_secs_f64(f).map_err(serde::de::Error::custom))
            .transpose()
    }
}

mod vec_secs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        d.iter()
            .map(|d| d.as_secs_f64())
            .collect::<Vec<_>>()
            .serialize(s)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        Vec::<f64>::deserialize(d)?
            .into_iter()
            .map(|f| Duration::try_from_secs_f64(f).map_err(serde::de::Error::custom))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn vllm_bench_definitions() {
        // 5 tokens in 4 chunks (the 3rd carried 2 tokens), usage chunk at 130 ms.
        let t = StreamTimings::compute(&[ms(50), ms(70), ms(100), ms(120)], ms(130), 5).unwrap();
        assert_eq!(t.ttft, ms(50));
        assert_eq!(t.latency, ms(130));
        assert_eq!(t.tpot, Some(ms(20))); // (130 - 50) / 4
        assert_eq!(t.itl, vec![ms(20), ms(30), ms(20)]);
        assert_eq!(t.chunk_offsets.len(), 4);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(StreamTimings::compute(&[], ms(10), 0), None);
        let one = StreamTimings::compute(&[ms(40)], ms(45), 1).unwrap();
        assert_eq!((one.tpot, one.itl.len()), (None, 0));
        // A latency earlier than the last chunk is raised to it.
        let t = StreamTimings::compute(&[ms(10), ms(30)], ms(5), 2).unwrap();
        assert_eq!(t.latency, ms(30));
        assert_eq!(t.tpot, Some(ms(20)));
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["ttft"], 0.01);
        let back: StreamTimings = serde_json::from_value(json).unwrap();
        assert_eq!(back.itl, t.itl);
    }

    /// Number of random inputs the property below runs on.
    const PROPTEST_CASES: u32 = 1024;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(PROPTEST_CASES))]

        #[test]
        fn itl_sums_to_last_minus_first(gaps in proptest::collection::vec(0u64..10_000, 1..50), extra in 0u64..1000, tokens in 0usize..100) {
            let mut at = 0u64;
            let offsets: Vec<Duration> = gaps.iter().map(|g| { at += g; Duration::from_micros(at) }).collect();
            let t = StreamTimings::compute(&offsets, Duration::from_micros(at + extra), tokens).unwrap();
            let sum: Duration = t.itl.iter().sum();
            prop_assert_eq!(sum, offsets[offsets.len() - 1] - offsets[0]);
            prop_assert!(t.ttft <= t.latency);
            prop_assert_eq!(t.tpot.is_some(), tokens >= 2);
        }
    }
}
