//! The trace generator: multi-turn sessions over shared system prompts and
//! a Zipf-popular document set, arriving as a Poisson or fixed-interval
//! stream. Seeded: the same parameters give the same trace, byte for byte.
//!
//! A session opens with one of the shared system prompts, then (with
//! probability `document_share`) one document drawn by popularity, then its
//! first user text. Each later turn's prompt is the previous prompt, the
//! previous turn's output and new user text, so a session's prefix grows and
//! is shared by its own later turns. Up to `active_sessions` sessions are
//! open at once; each arrival is the next turn of one of them, picked
//! uniformly, and a session that ends (its turns done, or its next prompt
//! longer than `max_prompt_tokens`) gives its place to the next session.
//!
//! Block ids are handed out in order of first appearance, one per distinct
//! block *and everything before it*: system prompts and documents are whole
//! blocks, so sessions sharing a system prompt share its blocks, and those
//! that also open the same document share its blocks too.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::rng::{Rng, Stream, Zipf};
use super::trace::{Trace, TraceRequest};

/// A count drawn uniformly from `min..=max`; written `MIN..MAX` or `N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub min: u32,
    pub max: u32,
}

impl Span {
    pub const fn new(min: u32, max: u32) -> Self {
        Span { min, max }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}..{}", self.min, self.max)
        }
    }
}

impl FromStr for Span {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("{text:?} is not a count or a range MIN..MAX"))
        };
        let span = match text.split_once("..") {
            Some((lo, hi)) => Span::new(number(lo)?, number(hi)?),
            None => {
                let n = number(text)?;
                Span::new(n, n)
            }
        };
        if span.min > span.max {
            return Err(format!(
                "{text:?}: the range's low end is above its high end"
            ));
        }
        Ok(span)
    }
}

/// How arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Exponential gaps: a Poisson process at the rate.
    Poisson,
    /// Every gap 1 / rate.
    Fixed,
}

impl FromStr for Arrival {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "poisson" => Ok(Arrival::Poisson),
            "fixed" => Ok(Arrival::Fixed),
            other => Err(format!(
                "{other:?} is not an arrival process (poisson or fixed)"
            )),
        }
    }
}

/// The generator's parameters. Each is a flag of
/// `kvcr-e2e workload generate` (`--active-sessions` for `active_sessions`);
/// the defaults suit the CPU stack (16-token blocks, a 64-block device
/// cache).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeneratorParams {
    /// Seed of every draw.
    pub seed: u64,
    /// Tokens per block id (the stack's KV block size, or a multiple of it).
    pub block_size: u32,
    /// Sessions in the trace.
    pub sessions: u32,
    /// Turns (requests) per session.
    pub turns: Span,
    /// Sessions open at once; their turns interleave.
    pub active_sessions: u32,
    /// Shared system prompts, each session taking one uniformly; 0: none.
    pub system_prompts: u32,
    /// Whole blocks of each system prompt.
    pub system_prompt_blocks: u32,
    /// Documents a session may open with; 0: none.
    pub documents: u32,
    /// Whole blocks of each document.
    pub document_blocks: u32,
    /// Fraction of sessions whose first turn carries a document.
    pub document_share: f64,
    /// Zipf exponent of document popularity (rank k drawn ∝ 1 / k^s; 0: uniform).
    pub zipf: f64,
    /// New user tokens in each turn.
    pub user_tokens: Span,
    /// Tokens each request generates (`output_length`).
    pub output_tokens: Span,
    /// A session ends before a prompt longer than this.
    pub max_prompt_tokens: u32,
    /// Arrival process.
    pub arrival: Arrival,
    /// Requests per second.
    pub rate: f64,
}

impl Default for GeneratorParams {
    fn default() -> Self {
        GeneratorParams {
            seed: 1,
            block_size: 16,
            sessions: 50,
            turns: Span::new(1, 6),
            active_sessions: 8,
            system_prompts: 4,
            system_prompt_blocks: 4,
            documents: 16,
            document_blocks: 8,
            document_share: 0.5,
            zipf: 1.0,
            user_tokens: Span::new(8, 40),
            output_tokens: Span::new(8, 32),
            max_prompt_tokens: 1024,
            arrival: Arrival::Poisson,
            rate: 2.0,
        }
    }
}

/// A parameter the generator cannot work with, named by its flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: {problem}")]
pub struct BadParam {
    pub flag: &'static str,
    pub problem: String,
}

fn bad(flag: &'static str, problem: impl Into<String>) -> BadParam {
    BadParam {
        flag,
        problem: problem.into(),
    }
}

impl GeneratorParams {
    /// Checks the parameters make a trace.
    pub fn check(&self) -> Result<(), BadParam> {
        let at_least_one = [
            ("block-size", self.block_size),
            ("sessions", self.sessions),
            ("turns", self.turns.min),
            ("active-sessions", self.active_sessions),
            ("user-tokens", self.user_tokens.min),
            ("output-tokens", self.output_tokens.min),
        ];
        for (flag, value) in at_least_one {
            if value == 0 {
                return Err(bad(flag, "must be at least 1"));
            }
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(bad("rate", format!("{} is not a positive rate", self.rate)));
        }
        if !(0.0..=1.0).contains(&self.document_share) {
            return Err(bad(
                "document-share",
                format!("{} is not a fraction in 0..1", self.document_share),
            ));
        }
        if !(self.zipf.is_finite() && self.zipf >= 0.0) {
            return Err(bad(
                "zipf",
                format!("{} is not an exponent >= 0", self.zipf),
            ));
        }
        if self.document_share > 0.0 && self.documents == 0 {
            return Err(bad("documents", "is 0 but --document-share is above 0"));
        }
        let blocks = |n: u32| u64::from(n) * u64::from(self.block_size);
        let system = if self.system_prompts > 0 {
            blocks(self.system_prompt_blocks)
        } else {
            0
        };
        let document = if self.document_share > 0.0 {
            blocks(self.document_blocks)
        } else {
            0
        };
        let first = system + document + u64::from(self.user_tokens.max);
        if first > u64::from(self.max_prompt_tokens) {
            return Err(bad(
                "max-prompt-tokens",
                format!(
                    "{} is shorter than a first turn can be ({system} system prompt + {document} document + {} user tokens)",
                    self.max_prompt_tokens, self.user_tokens.max
                ),
            ));
        }
        Ok(())
    }
}

/// Generates the trace the parameters describe.
pub fn generate(params: &GeneratorParams) -> Result<Trace, BadParam> {
    params.check()?;
    let zipf = Zipf::new(params.documents, params.zipf);
    let mut schedule = Rng::new(params.seed, Stream::Schedule);
    let mut arrivals = Arrivals::new(params);
    let mut book = BlockBook::default();
    let mut active: Vec<Session> = Vec::new();
    let mut opened = 0;
    let mut requests = Vec::new();
    loop {
        while active.len() < params.active_sessions as usize && opened < params.sessions {
            active.push(Session::open(params, &zipf, opened));
            opened += 1;
        }
        if active.is_empty() {
            break;
        }
        let pick = schedule.below(active.len() as u64) as usize;
        let session = &mut active[pick];
        let Some(output) = session.next_turn(params) else {
            active.remove(pick);
            continue;
        };
        let (input_length, hash_ids) = book.blocks(&session.context, params.block_size);
        requests.push(TraceRequest {
            timestamp: arrivals.next(),
            input_length,
            output_length: u64::from(output),
            hash_ids,
        });
        if session.end_turn(output) {
            active.remove(pick);
        }
    }
    Ok(Trace::new(params.block_size, requests).expect("the generator writes only valid traces"))
}

/// Where a run of prompt tokens comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Segment {
    System(u32),
    Document(u32),
    User { session: u32, turn: u32 },
    Output { session: u32, turn: u32 },
}

/// Tokens `start..end` of a segment: a block is one or more pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Piece {
    segment: Segment,
    start: u32,
    end: u32,
}

/// Block ids, one per distinct (previous block, contents), numbered from 0
/// in order of first appearance.
#[derive(Default)]
struct BlockBook {
    ids: HashMap<(Option<u64>, Vec<Piece>), u64>,
}

impl BlockBook {
    /// The prompt's length and block ids (the last block may be cut short).
    fn blocks(&mut self, context: &[(Segment, u32)], block_size: u32) -> (u64, Vec<u64>) {
        let mut ids = Vec::new();
        let mut pieces = Vec::new();
        let mut filled = 0;
        for &(segment, len) in context {
            let mut offset = 0;
            while offset < len {
                let take = (len - offset).min(block_size - filled);
                pieces.push(Piece {
                    segment,
                    start: offset,
                    end: offset + take,
                });
                offset += take;
                filled += take;
                if filled == block_size {
                    ids.push(self.id(ids.last().copied(), std::mem::take(&mut pieces)));
                    filled = 0;
                }
            }
        }
        if !pieces.is_empty() {
            ids.push(self.id(ids.last().copied(), pieces));
        }
        let input_length = context.iter().map(|&(_, len)| u64::from(len)).sum();
        (input_length, ids)
    }

    fn id(&mut self, parent: Option<u64>, pieces: Vec<Piece>) -> u64 {
        let next = self.ids.len() as u64;
        *self.ids.entry((parent, pieces)).or_insert(next)
    }
}

/// One conversation: its prompt so far and its turns.
struct Session {
    index: u32,
    rng: Rng,
    turns: u32,
    turn: u32,
    context: Vec<(Segment, u32)>,
    tokens: u32,
}

impl Session {
    fn open(params: &GeneratorParams, zipf: &Zipf, index: u32) -> Self {
        let mut rng = Rng::new(params.seed, Stream::Session(u64::from(index)));
        let turns = rng.between(params.turns.min, params.turns.max);
        let mut context = Vec::new();
        if params.system_prompts > 0 {
            let which = rng.below(u64::from(params.system_prompts)) as u32;
            context.push((
                Segment::System(which),
                params.system_prompt_blocks * params.block_size,
            ));
        }
        if params.documents > 0 && rng.chance(params.document_share) {
            let which = zipf.draw(&mut rng);
            context.push((
                Segment::Document(which),
                params.document_blocks * params.block_size,
            ));
        }
        context.retain(|&(_, len)| len > 0);
        let tokens = context.iter().map(|&(_, len)| len).sum();
        Session {
            index,
            rng,
            turns,
            turn: 0,
            context,
            tokens,
        }
    }

    /// Adds this turn's user text and draws its output length; `None` when
    /// the prompt would pass `max_prompt_tokens` (the session ends).
    fn next_turn(&mut self, params: &GeneratorParams) -> Option<u32> {
        let user = self
            .rng
            .between(params.user_tokens.min, params.user_tokens.max);
        let output = self
            .rng
            .between(params.output_tokens.min, params.output_tokens.max);
        if self.tokens.saturating_add(user) > params.max_prompt_tokens {
            return None;
        }
        let (session, turn) = (self.index, self.turn);
        self.context.push((Segment::User { session, turn }, user));
        self.tokens += user;
        Some(output)
    }

    /// Appends the turn's output to the context; true when the session is done.
    fn end_turn(&mut self, output: u32) -> bool {
        let (session, turn) = (self.index, self.turn);
        self.context
            .push((Segment::Output { session, turn }, output));
        self.tokens = self.tokens.saturating_add(output);
        self.turn += 1;
        self.turn >= self.turns
    }
}

/// Arrival times in whole milliseconds, from 0.
struct Arrivals {
    rng: Rng,
    arrival: Arrival,
    gap_ms: f64,
    count: u64,
    clock_ms: f64,
}

impl Arrivals {
    fn new(params: &GeneratorParams) -> Self {
        Arrivals {
            rng: Rng::new(params.seed, Stream::Arrivals),
            arrival: params.arrival,
            gap_ms: 1000.0 / params.rate,
            count: 0,
            clock_ms: 0.0,
        }
    }

    fn next(&mut self) -> u64 {
        let at = match self.arrival {
            Arrival::Fixed => self.count as f64 * self.gap_ms,
            Arrival::Poisson => {
                let at = self.clock_ms;
                self.clock_ms += self.rng.exponential(self.gap_ms);
                at
            }
        };
        self.count += 1;
        at.floor() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::stats::TraceStats;
    use crate::workload::tokens::TokenSpace;

    fn small() -> GeneratorParams {
        GeneratorParams {
            sessions: 20,
            ..GeneratorParams::default()
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
        let a = generate(&small()).unwrap().to_jsonl();
        assert_eq!(a, generate(&small()).unwrap().to_jsonl());
        let other = GeneratorParams { seed: 2, ..small() };
        assert_ne!(a, generate(&other).unwrap().to_jsonl());
    }

    #[test]
    fn the_rate_moves_arrivals_only() {
        let slow = generate(&small()).unwrap();
        let fast = generate(&GeneratorParams {
            rate: 8.0,
            ..small()
        })
        .unwrap();
        let shapes = |t: &Trace| {
            t.requests()
                .iter()
                .map(|r| (r.input_length, r.output_length, r.hash_ids.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(shapes(&slow), shapes(&fast));
        assert!(TraceStats::of(&fast).duration_ms < TraceStats::of(&slow).duration_ms / 2);
    }

    #[test]
    fn turns_extend_the_previous_prompt_with_its_output_and_new_text() {
        let params = GeneratorParams {
            sessions: 1,
            turns: Span::new(3, 3),
            active_sessions: 1,
            ..GeneratorParams::default()
        };
        let t = generate(&params).unwrap();
        assert_eq!(t.len(), 3);
        let space = TokenSpace::new(16, 3..426, 0);
        for pair in t.requests().windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            // The new prompt holds the old one, its output, then user text.
            let grown = after.input_length - before.input_length;
            assert!(grown >= before.output_length + u64::from(params.user_tokens.min));
            assert!(grown <= before.output_length + u64::from(params.user_tokens.max));
            // Every whole block of the old prompt is a block of the new one.
            let whole = before.full_blocks(16);
            assert_eq!(after.hash_ids[..whole.len()], *whole);
            let (a, b) = (space.prompt(before), space.prompt(after));
            let shared = whole.len() * 16;
            assert_eq!(a[..shared], b[..shared]);
        }
    }

    #[test]
    fn sessions_share_system_prompts_and_documents() {
        let params = GeneratorParams {
            sessions: 40,
            turns: Span::new(1, 1),
            system_prompts: 2,
            documents: 3,
            document_share: 1.0,
            ..GeneratorParams::default()
        };
        let t = generate(&params).unwrap();
        assert_eq!(t.len(), 40);
        let system = params.system_prompt_blocks as usize;
        let opening = system + params.document_blocks as usize;
        let mut systems = std::collections::BTreeSet::new();
        let mut openings = std::collections::BTreeMap::<Vec<u64>, u32>::new();
        for r in t.requests() {
            systems.insert(r.hash_ids[..system].to_vec());
            *openings.entry(r.hash_ids[..opening].to_vec()).or_default() += 1;
        }
        assert_eq!(systems.len(), 2);
        // At most 2 system prompts x 3 documents, and some shared widely.
        assert!(openings.len() <= 6);
        assert!(openings.values().any(|&n| n >= 8), "{openings:?}");
        // The user text is each request's own.
        let tails: std::collections::BTreeSet<u64> =
            t.requests().iter().map(|r| r.hash_ids[opening]).collect();
        assert_eq!(tails.len(), 40);
    }

    #[test]
    fn popular_documents_are_opened_more_often() {
        let params = GeneratorParams {
            sessions: 400,
            turns: Span::new(1, 1),
            system_prompts: 0,
            documents: 20,
            document_share: 1.0,
            zipf: 1.2,
            ..GeneratorParams::default()
        };
        let t = generate(&params).unwrap();
        let mut counts = HashMap::<u64, u32>::new();
        for r in t.requests() {
            *counts.entry(r.hash_ids[0]).or_default() += 1;
        }
        let mut sorted: Vec<u32> = counts.values().copied().collect();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        // Rank 1 of 20 at s = 1.2 is drawn about 30 % of the time.
        assert!(sorted[0] > 90, "{sorted:?}");
        assert!(sorted[0] > 3 * sorted[3], "{sorted:?}");
        let none = GeneratorParams {
            document_share: 0.0,
            documents: 0,
            ..params
        };
        let t = generate(&none).unwrap();
        assert!(t.requests().iter().all(|r| r.input_length <= 40));
    }

    #[test]
    fn prompts_stay_under_the_cap_and_arrivals_keep_the_rate() {
        let params = GeneratorParams {
            sessions: 200,
            turns: Span::new(10, 10),
            max_prompt_tokens: 400,
            ..GeneratorParams::default()
        };
        let t = generate(&params).unwrap();
        assert!(t.requests().iter().all(|r| r.input_length <= 400));
        let stats = TraceStats::of(&t);
        let rate = stats.mean_rate_per_s.unwrap();
        assert!((rate - 2.0).abs() < 0.2, "rate {rate}");
        let fixed = GeneratorParams {
            arrival: Arrival::Fixed,
            rate: 4.0,
            ..small()
        };
        let t = generate(&fixed).unwrap();
        let at: Vec<u64> = t.requests().iter().take(4).map(|r| r.timestamp).collect();
        assert_eq!(at, [0, 250, 500, 750]);
    }

    #[test]
    fn bad_parameters_name_their_flag() {
        let err = |p: GeneratorParams| generate(&p).unwrap_err().to_string();
        assert_eq!(
            err(GeneratorParams {
                sessions: 0,
                ..small()
            }),
            "--sessions: must be at least 1"
        );
        assert!(err(GeneratorParams {
            rate: 0.0,
            ..small()
        })
        .starts_with("--rate:"));
        assert!(err(GeneratorParams {
            document_share: 1.5,
            ..small()
        })
        .starts_with("--document-share:"));
        assert!(err(GeneratorParams {
            documents: 0,
            ..small()
        })
        .starts_with("--documents:"));
        assert!(err(GeneratorParams {
            zipf: -1.0,
            ..small()
        })
        .starts_with("--zipf:"));
        let short = err(GeneratorParams {
            max_prompt_tokens: 100,
            ..small()
        });
        assert_eq!(short, "--max-prompt-tokens: 100 is shorter than a first turn can be (64 system prompt + 128 document + 40 user tokens)");
    }

    #[test]
    fn spans_and_arrivals_parse() {
        assert_eq!("3..7".parse::<Span>().unwrap(), Span::new(3, 7));
        assert_eq!("4".parse::<Span>().unwrap(), Span::new(4, 4));
        assert_eq!(Span::new(3, 7).to_string(), "3..7");
        assert!("7..3".parse::<Span>().unwrap_err().contains("low end"));
        assert!("x".parse::<Span>().is_err());
        assert_eq!("fixed".parse::<Arrival>().unwrap(), Arrival::Fixed);
        assert!("burst".parse::<Arrival>().is_err());
    }
}
