//! Telemetry: one model ([`Snapshot`], [`Delta`] by meaning) fed by three
//! sources — a worker's Prometheus `/metrics`, vLLM's `KV Transfer metrics:`
//! interval log lines, and the KVCR Guard's log events.
//!
//! Cases ask for meanings ([`Counter`], [`Gauge`]), never metric strings;
//! [`names`] is the one place the strings live.
//!
//! ```no_run
//! # async fn case() -> anyhow::Result<()> {
//! use kvcr_e2e::telemetry::{scrape, Counter, Delta, OpResult, Scope, Tier};
//! let before = scrape("http://127.0.0.1:9101").await?.with_worker("B");
//! // ... send the request pinned to worker B ...
//! let after = scrape("http://127.0.0.1:9101").await?.with_worker("B");
//! let d = Delta::between(&before, &after)?; // a counter reset is an error
//! let blocks = d.count(&Counter::TransferBlocks(Scope::RemoteDeliver));
//! let read = d.count(&Counter::TieringReadBytes(Tier::Kvcr));
//! let failed = d.count(&Counter::OpCount(Scope::RemoteDeliver, OpResult::Failed));
//! std::fs::write("telemetry-B.json", serde_json::to_vec_pretty(&d)?)?;
//! # let _ = (blocks, read, failed); Ok(()) }
//! ```
//!
//! Interval logs accumulate from a byte offset
//! ([`IntervalLogReader::from_end`], then [`IntervalLogReader::snapshot`]
//! twice and subtract); the Guard log yields typed [`GuardEvent`]s
//! ([`GuardLogReader::wait_for`] a [`Promotion`] of guard 0).
//! Parsers never panic: malformed lines become [`ParseProblem`]s.

pub mod discovery_log;
pub mod engine_kvcr_log;
pub mod guard_costs;
pub mod guard_log;
pub mod interval_log;
pub mod names;
pub mod prometheus;
pub mod reconcile;
pub mod snapshot;
pub mod tail;

mod ansi;
mod fields;
mod problem;

pub use ansi::strip_ansi;
pub use guard_log::{
    GuardEvent, GuardLogEntry, GuardLogReader, GuardWaitError, PrimaryAttached, Promotion,
    PromotionStage, ServiceReady, SourceTransfer,
};
pub use interval_log::{IntervalAccumulator, IntervalLogReader, WaitError};
pub use names::{Counter, Gauge, Meaning, OpResult, Resource, Scope, Tier, WhenAbsent};
pub use problem::ParseProblem;
pub use reconcile::PeerTransferCheck;
pub use snapshot::{
    scrape, scrape_with, Delta, DeltaError, GaugeChange, NotReported, OpsByResult, ScrapeError,
    ScrapeProblems, Snapshot, SnapshotSource, Unreadable,
};
pub use tail::{LogTail, TailError};
