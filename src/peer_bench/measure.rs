//! A client's log against the server's record of the same streams: which
//! stream each request read, and how far the client's stamps are from the
//! server's.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

use super::observed::Observed;
use super::sse_server::Served;

/// Nearest-rank percentile summary of a sample, in µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for an empty sample.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| v[((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Spread {
            n: v.len(),
            p50: rank(50.0),
            p99: rank(99.0),
            max: v[v.len() - 1],
        })
    }
}

/// A client request paired with the stream the server sent it.
#[derive(Debug)]
pub struct Pair<'a> {
    pub seen: &'a Observed,
    pub sent: &'a Served,
}

/// Pairs each request with its stream: by the `<id>` tag when the client
/// reports text, else the unclaimed stream that arrived first after the
/// request was sent and whose first chunk went out before the client saw it.
/// `Err` names the first request that no stream explains.
pub fn pair<'a>(seen: &'a [Observed], sent: &'a [Served]) -> Result<Vec<Pair<'a>>, String> {
    let by_id: HashMap<u64, &Served> = sent.iter().map(|s| (s.id, s)).collect();
    let mut claimed = vec![false; sent.len()];
    let mut order: Vec<&Observed> = seen.iter().collect();
    order.sort_by_key(|o| o.start_ns);
    let mut pairs = Vec::new();
    for o in order {
        let found = match o.tag {
            Some(tag) => by_id.get(&tag).copied(),
            None => {
                let first_seen = o.chunk_ns.first().copied().unwrap_or(u64::MAX);
                let i = sent.iter().enumerate().position(|(i, s)| {
                    !claimed[i]
                        && s.arrived_ns >= o.start_ns
                        && s.sends_ns.first().is_some_and(|f| *f <= first_seen)
                        && s.sends_ns.len() == o.chunk_ns.len()
                });
                i.map(|i| {
                    claimed[i] = true;
                    &sent[i]
                })
            }
        };
        match found {
            Some(s) if s.sends_ns.len() == o.chunk_ns.len() => {
                pairs.push(Pair { seen: o, sent: s })
            }
            Some(s) => {
                return Err(format!(
                    "request sent at {} ns read {} chunks of stream {}, which had {}",
                    o.start_ns,
                    o.chunk_ns.len(),
                    s.id,
                    s.sends_ns.len()
                ))
            }
            None => {
                return Err(format!(
                    "no served stream explains the request sent at {} ns (tag {:?}, {} chunks)",
                    o.start_ns,
                    o.tag,
                    o.chunk_ns.len()
                ))
            }
        }
    }
    Ok(pairs)
}

fn us(later: u64, earlier: u64) -> f64 {
    (later as f64 - earlier as f64) / 1e3
}

/// Per chunk: client stamp − server send stamp, in µs.
pub fn chunk_overhead_us(pairs: &[Pair]) -> Vec<f64> {
    pairs
        .iter()
        .flat_map(|p| {
            p.seen
                .chunk_ns
                .iter()
                .zip(&p.sent.sends_ns)
                .map(|(c, s)| us(*c, *s))
        })
        .collect()
}

/// Per request: client TTFT − server TTFT (request read → first send), µs.
pub fn ttft_error_us(pairs: &[Pair]) -> Vec<f64> {
    pairs
        .iter()
        .filter_map(|p| {
            let client = us(*p.seen.chunk_ns.first()?, p.seen.start_ns);
            let server = us(*p.sent.sends_ns.first()?, p.sent.arrived_ns);
            Some(client - server)
        })
        .collect()
}

/// Per inter-chunk gap: |client ITL − server ITL|, µs.
pub fn itl_error_us(pairs: &[Pair]) -> Vec<f64> {
    pairs
        .iter()
        .flat_map(|p| {
            let c = p.seen.chunk_ns.windows(2).map(|w| us(w[1], w[0]));
            let s = p.sent.sends_ns.windows(2).map(|w| us(w[1], w[0]));
            c.zip(s).map(|(c, s)| (c - s).abs())
        })
        .collect()
}

/// The window the pairs cover: first request read → last chunk sent.
pub fn window_ns(pairs: &[Pair]) -> Option<(u64, u64)> {
    let from = pairs.iter().map(|p| p.sent.arrived_ns).min()?;
    let to = pairs.iter().filter_map(|p| p.sent.sends_ns.last()).max()?;
    Some((from, *to))
}

/// Chunks read per second of client CPU.
pub fn chunks_per_cpu_s(pairs: &[Pair], cpu: Duration) -> Option<f64> {
    let chunks: usize = pairs.iter().map(|p| p.seen.chunk_ns.len()).sum();
    (!cpu.is_zero()).then(|| chunks as f64 / cpu.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(id: u64, arrived_ns: u64, sends_ns: &[u64]) -> Served {
        Served {
            id,
            arrived_ns,
            sends_ns: sends_ns.to_vec(),
        }
    }

    #[test]
    fn requests_pair_by_tag_or_by_time_and_errors_are_client_minus_server() {
        let sent = [
            served(1, 100, &[1_100, 2_100]),
            served(2, 150, &[1_150, 2_150]),
        ];
        let seen = [
            Observed {
                tag: Some(2),
                start_ns: 140,
                chunk_ns: vec![1_160, 2_170],
            },
            Observed {
                tag: None,
                start_ns: 90,
                chunk_ns: vec![1_120, 2_110],
            },
        ];
        let pairs = pair(&seen, &sent).unwrap();
        assert_eq!(pairs.iter().map(|p| p.sent.id).collect::<Vec<_>>(), [1, 2]);
        let ns = |v: Vec<f64>| {
            v.iter()
                .map(|us| (us * 1e3).round() as i64)
                .collect::<Vec<_>>()
        };
        assert_eq!(ns(chunk_overhead_us(&pairs)), [20, 10, 10, 20]);
        // ttft: (1120-90) - (1100-100) = 30 ns; (1160-140) - (1150-150) = 20 ns.
        assert_eq!(ns(ttft_error_us(&pairs)), [30, 20]);
        assert_eq!(ns(itl_error_us(&pairs)), [10, 10]);
        assert_eq!(window_ns(&pairs), Some((100, 2_150)));
    }

    #[test]
    fn an_unexplained_request_is_an_error() {
        let seen = [Observed {
            tag: Some(9),
            start_ns: 0,
            chunk_ns: vec![1],
        }];
        assert!(pair(&seen, &[]).unwrap_err().contains("tag Some(9)"));
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]).unwrap().p50, 2.0);
    }
}
