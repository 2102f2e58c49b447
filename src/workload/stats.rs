//! What a trace asks of a cache, computed from the trace alone: its size and
//! rate, and the prefix-cache hit rate an ideal cache would reach (the
//! bounds a replay's measured hit rate is compared with).
//!
//! The ideal cache is sequential: each request is looked up at its arrival
//! and stored at once (no request in flight holds blocks, nothing is shared
//! between workers or lost between tiers). A request's hit is the longest
//! run of its leading whole blocks that the cache holds, as an engine's
//! prefix cache matches; a last block cut short is never served nor stored
//! (engines cache whole blocks only).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::trace::Trace;

/// Blocks and tokens a cache served, out of those asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HitRate {
    /// Whole blocks served from the cache.
    pub hit_blocks: u64,
    /// Whole blocks of every prompt.
    pub blocks: u64,
    /// Prompt tokens in the served blocks.
    pub hit_tokens: u64,
    /// Prompt tokens of every request.
    pub input_tokens: u64,
}

impl HitRate {
    /// Served whole blocks / whole blocks (0 when there are none).
    pub fn block_rate(&self) -> f64 {
        ratio(self.hit_blocks, self.blocks)
    }

    /// Served tokens / prompt tokens: the most of a prompt an engine can
    /// report as cached.
    pub fn token_rate(&self) -> f64 {
        ratio(self.hit_tokens, self.input_tokens)
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// A trace's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceStats {
    pub requests: u64,
    /// Last arrival − first arrival, milliseconds.
    pub duration_ms: u64,
    /// Arrivals per second between the first and the last:
    /// `(requests − 1) / duration`; `None` when every request arrives at once.
    pub mean_rate_per_s: Option<f64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Distinct ids of whole blocks: what an infinite cache ends up holding.
    pub distinct_blocks: u64,
    /// The hit rate of an unbounded cache.
    pub infinite: HitRate,
}

impl TraceStats {
    pub fn of(trace: &Trace) -> Self {
        let requests = trace.requests();
        let first = requests.first().map_or(0, |r| r.timestamp);
        let last = requests.last().map_or(0, |r| r.timestamp);
        let duration_ms = last - first;
        let distinct: HashSet<u64> = requests
            .iter()
            .flat_map(|r| r.full_blocks(trace.block_size()).iter().copied())
            .collect();
        TraceStats {
            requests: requests.len() as u64,
            duration_ms,
            mean_rate_per_s: (duration_ms > 0)
                .then(|| (requests.len() - 1) as f64 * 1000.0 / duration_ms as f64),
            input_tokens: requests.iter().map(|r| r.input_length).sum(),
            output_tokens: requests.iter().map(|r| r.output_length).sum(),
            distinct_blocks: distinct.len() as u64,
            infinite: infinite_hit_rate(trace),
        }
    }
}

/// An unbounded cache: a whole block is a hit when its id was a whole block
/// of an earlier request. (An id names a block with its whole prefix, so
/// these hits are always a prompt's leading blocks.)
pub fn infinite_hit_rate(trace: &Trace) -> HitRate {
    let mut seen = HashSet::new();
    replay(trace, |ids| {
        let hits = ids.iter().take_while(|id| seen.contains(*id)).count();
        seen.extend(ids.iter().copied());
        hits
    })
}

/// An LRU cache of `capacity` whole blocks. After its lookup a request's
/// blocks are all stored, its first block the most recently used and its
/// last the least: a cache evicts a prompt's deepest blocks first, as
/// engines free a finished request's blocks from the tail.
pub fn lru_hit_rate(trace: &Trace, capacity: u64) -> HitRate {
    let mut lru = Lru::new(capacity);
    replay(trace, |ids| {
        let hits = ids.iter().take_while(|id| lru.contains(**id)).count();
        for &id in ids.iter().rev() {
            lru.touch(id);
        }
        hits
    })
}

/// Runs `serve` on each request's whole blocks in order; it returns how many
/// leading blocks were hits.
fn replay(trace: &Trace, mut serve: impl FnMut(&[u64]) -> usize) -> HitRate {
    let size = u64::from(trace.block_size());
    let mut rate = HitRate {
        hit_blocks: 0,
        blocks: 0,
        hit_tokens: 0,
        input_tokens: 0,
    };
    for r in trace.requests() {
        let ids = r.full_blocks(trace.block_size());
        let hits = serve(ids) as u64;
        rate.hit_blocks += hits;
        rate.blocks += ids.len() as u64;
        rate.hit_tokens += hits * size;
        rate.input_tokens += r.input_length;
    }
    rate
}

/// Least recently used ids, evicted past `capacity`.
struct Lru {
    capacity: u64,
    clock: u64,
    stamps: HashMap<u64, u64>,
    by_age: BTreeMap<u64, u64>,
}

impl Lru {
    fn new(capacity: u64) -> Self {
        Lru {
            capacity,
            clock: 0,
            stamps: HashMap::new(),
            by_age: BTreeMap::new(),
        }
    }

    fn contains(&self, id: u64) -> bool {
        self.stamps.contains_key(&id)
    }

    fn touch(&mut self, id: u64) {
        self.clock += 1;
        if let Some(old) = self.stamps.insert(id, self.clock) {
            self.by_age.remove(&old);
        }
        self.by_age.insert(self.clock, id);
        while self.stamps.len() as u64 > self.capacity {
            let (_, oldest) = self
                .by_age
                .pop_first()
                .expect("a full cache has an oldest id");
            self.stamps.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::trace::TraceRequest;

    fn trace(block_size: u32, rows: &[(u64, u64, &[u64])]) -> Trace {
        let requests = rows
            .iter()
            .map(|&(timestamp, input_length, ids)| TraceRequest {
                timestamp,
                input_length,
                output_length: 2,
                hash_ids: ids.to_vec(),
            })
            .collect();
        Trace::new(block_size, requests).unwrap()
    }

    #[test]
    fn counts_duration_rate_and_tokens() {
        let t = trace(
            4,
            &[(1000, 8, &[0, 1]), (1500, 7, &[0, 2]), (3000, 4, &[3])],
        );
        let s = TraceStats::of(&t);
        assert_eq!((s.requests, s.duration_ms), (3, 2000));
        assert_eq!(s.mean_rate_per_s, Some(1.0));
        assert_eq!((s.input_tokens, s.output_tokens), (19, 6));
        // Whole blocks: 0, 1; 0 (2 is cut short); 3.
        assert_eq!(s.distinct_blocks, 3);
        let at_once = trace(4, &[(5, 4, &[0]), (5, 4, &[0])]);
        assert_eq!(TraceStats::of(&at_once).mean_rate_per_s, None);
    }

    #[test]
    fn infinite_cache_hits_every_block_seen_before() {
        // Block size 2. Whole blocks per request and hits, by hand:
        //   [0 1 2]    : 0 of 3
        //   [0 1 3]    : 0 1 hit, 3 new      -> 2 of 3
        //   [0 4]      : 0 hit               -> 1 of 2
        //   [0 1 2 5]  : 0 1 2 hit, 5 new    -> 3 of 4
        //   [6] cut    : no whole block      -> 0 of 0
        let t = trace(
            2,
            &[
                (0, 6, &[0, 1, 2]),
                (1, 6, &[0, 1, 3]),
                (2, 4, &[0, 4]),
                (3, 8, &[0, 1, 2, 5]),
                (4, 1, &[6]),
            ],
        );
        let h = infinite_hit_rate(&t);
        assert_eq!((h.hit_blocks, h.blocks), (6, 12));
        assert_eq!((h.hit_tokens, h.input_tokens), (12, 25));
        assert_eq!(h.block_rate(), 0.5);
        assert_eq!(h.token_rate(), 12.0 / 25.0);
        assert_eq!(TraceStats::of(&t).infinite, h);
    }

    #[test]
    fn a_block_cut_short_is_neither_served_nor_stored() {
        // [0 1] with 1 cut short: only 0 is stored; the next request's 1 is a miss.
        let t = trace(4, &[(0, 5, &[0, 1]), (1, 8, &[0, 1])]);
        let h = infinite_hit_rate(&t);
        assert_eq!((h.hit_blocks, h.blocks), (1, 3));
    }

    #[test]
    fn lru_evicts_the_least_recent_and_a_prompts_deepest_first() {
        // Capacity 3, block size 1; each touch stamps the next clock tick,
        // a request's blocks from its last to its first.
        //   [0 1]  miss miss      {1@1 0@2}
        //   [2 3]  miss miss      {0@2 3@3 2@4}   (1 evicted)
        //   [0 1]  hit  miss      {2@4 1@5 0@6}   (3 evicted)
        //   [2 3]  hit  miss      {0@6 3@7 2@8}   (1 evicted)
        let t = trace(
            1,
            &[
                (0, 2, &[0, 1]),
                (1, 2, &[2, 3]),
                (2, 2, &[0, 1]),
                (3, 2, &[2, 3]),
            ],
        );
        let h = lru_hit_rate(&t, 3);
        assert_eq!((h.hit_blocks, h.blocks), (2, 8));
        // Room for everything: the same as the infinite cache.
        assert_eq!(lru_hit_rate(&t, 4), infinite_hit_rate(&t));
        assert_eq!(lru_hit_rate(&t, 4).hit_blocks, 4);
        // No room at all: no hits.
        assert_eq!(lru_hit_rate(&t, 0).hit_blocks, 0);
    }

    #[test]
    fn lru_hits_stop_at_the_first_missing_block() {
        // Capacity 2: [0 1 2] keeps 0 and 1 (2, the deepest, goes).
        //   [0 1 2] again: 0 1 hit, 2 miss; it keeps 0 and 1 again.
        //   [0 1 3]: 0 1 hit, 3 miss.
        let t = trace(
            1,
            &[(0, 3, &[0, 1, 2]), (1, 3, &[0, 1, 2]), (2, 3, &[0, 1, 3])],
        );
        let h = lru_hit_rate(&t, 2);
        assert_eq!((h.hit_blocks, h.blocks), (4, 9));
    }

    #[test]
    fn rates_of_nothing_are_zero() {
        let empty = HitRate {
            hit_blocks: 0,
            blocks: 0,
            hit_tokens: 0,
            input_tokens: 0,
        };
        assert_eq!((empty.block_rate(), empty.token_rate()), (0.0, 0.0));
    }
}
