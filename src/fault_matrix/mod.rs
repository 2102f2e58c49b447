//! The fault matrices: a verdict that cannot fail is a defect, so each row
//! switches one fault on, runs the phase 1 case that must catch it, and
//! passes only when that case fails with the claim the row names
//! ([`crate::suite::FaultRow`]). Each matrix is a table of rows in the
//! order they run; the lane table ([`crate::lanes`]) says on which stack.
//! docs/fault-matrix.md is the same tables in prose, and
//! `tests/fault_matrix_doc.rs` keeps them in step.

pub mod agg;
pub mod p2d;
pub mod p2d_vllm;
pub mod phase2;
pub mod two_node;
mod worker_log;
