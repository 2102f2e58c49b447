//! Curated KVCR mutants: planted bugs in the KVCR under test, each a reviewed
//! diff under `fixtures/kvcr-mutants/` whose header says what it models and
//! which case must catch it. The `kvcr-e2e mutants` driver runs them; this
//! module reads them.

pub mod header;

pub use header::{parse, Expect, HeaderError, Lane, MutantClass, MutantHeader};

/// Where the curated mutants live, relative to the repository root.
pub const MUTANTS_DIR: &str = "fixtures/kvcr-mutants";
