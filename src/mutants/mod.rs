//! Curated KVCR mutants: planted bugs in the KVCR under test, each a reviewed
//! diff under `fixtures/kvcr-mutants/` whose header says what it models and
//! which case must catch it. `header` reads them, `curated` loads and selects
//! the set, `plan` says what each one runs, `control` runs the unmutated
//! build first, `classify` reads each run, `report` tables the lane,
//! `score` writes the batch's dated score file, and `driver` is
//! `kvcr-e2e mutants`.

pub mod args;
pub mod classify;
pub mod control;
pub mod curated;
pub mod driver;
pub mod generated;
pub mod header;
pub mod plan;
pub mod report;
pub mod score;

pub use args::{GeneratedArgs, MutantsArgs};
pub use classify::{classify, meets_expectation, MutantResult};
pub use driver::run_lane;
pub use header::{parse, Expect, HeaderError, MutantClass, MutantHeader};
pub use report::{LaneReport, MutantRow, Score};

/// Where the curated mutants live, relative to the repository root.
pub const MUTANTS_DIR: &str = "fixtures/kvcr-mutants";
