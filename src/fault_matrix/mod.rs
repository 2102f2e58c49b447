//! The fault matrices: a verdict that cannot fail is a defect, so each row
//! switches one fault on, runs the phase 1 case that must catch it, and
//! passes only when that case fails with the claim the row names
//! ([`crate::suite::FaultRow`]). Each matrix is a table of rows in the
//! order they run; the lane table ([`crate::lanes`]) says on which stack.
//! docs/fault-matrix.md's tables are generated from them ([`doc`]).

pub mod agg;
pub mod doc;
pub mod p2d;
pub mod p2d_vllm;
pub mod phase2;
pub mod phase3;
pub mod two_node;
mod worker_log;
pub mod workload;
