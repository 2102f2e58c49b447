//! Realistic workloads as traces: requests with arrival times and prompts
//! named block by block, in the Mooncake trace format.
//!
//! ```no_run
//! use kvcr_e2e::workload::{generate, lru_hit_rate, GeneratorParams, TokenSpace, Trace, TraceStats};
//!
//! // A user's own trace of 512-token blocks, or a generated one.
//! let trace = Trace::read("fixtures/traces/multi-turn-small.jsonl".as_ref(), 16)?;
//! let same = generate(&GeneratorParams { sessions: 50, ..GeneratorParams::default() })?;
//! # let _ = same;
//! // Each request as token ids over the engine's vocabulary; shared ids are
//! // shared prefixes.
//! let space = TokenSpace::new(trace.block_size(), 3..426, 0);
//! for (send_at, request) in trace.schedule(1.0) {
//!     let prompt: Vec<u32> = space.prompt(request);
//!     # let _ = (send_at, prompt);
//! }
//! // The hit rates an ideal cache would reach on it.
//! let stats = TraceStats::of(&trace);
//! let lru = lru_hit_rate(&trace, 64);
//! # let _ = (stats, lru);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`replay`] sends a trace's requests through a frontend in an open loop.

pub mod cli;
mod generate;
mod replay;
mod rng;
mod stats;
mod tokens;
mod trace;

pub use generate::{generate, Arrival, BadParam, GeneratorParams, Span};
pub use replay::{plan, replay, Planned, Returned};
pub use stats::{infinite_hit_rate, lru_hit_rate, HitRate, TraceStats};
pub use tokens::TokenSpace;
pub use trace::{LineProblem, Trace, TraceError, TraceRequest, FIELDS};
