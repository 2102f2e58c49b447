//! Evidence: what happened, as data ([`CaseRecord`], [`RunRecord`], perf
//! records), and the writers over it: the run directory, `results.json`,
//! JUnit XML, the HTML report and the end-of-run summary.
//!
//! ```no_run
//! use kvcr_e2e::evidence::{self, CaseRecord, Outcome, RunDir};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let settings = serde_json::json!({});
//! let dir = RunDir::create("target/phase1/runs".as_ref(), kvcr_e2e::config::Redactor::from_process_env())?;
//! dir.write_config(&settings)?;
//! let mut rec = CaseRecord::start("TC-02", "TC-02::local_dram_flow");
//! let path = dir.write_json("TC-02", "telemetry.json", &serde_json::json!({"local_deliver": 4}))?;
//! rec = rec.with_evidence(dir.relative(&path));
//! rec.outcome = Outcome::Failed { message: format!("no host-tier hit; see {}", path.display()) };
//! # let run: evidence::RunRecord = todo!();
//! evidence::write_junit(&run, &dir.root().join("junit.xml"), dir.redactor())?;
//! # Ok(()) }
//! ```

mod charts;
mod degraded_link_report;
mod errors;
pub mod expected;
mod gpu;
pub mod guard_costs;
mod junit;
pub mod kvcr_coverage;
pub mod kvcr_coverage_merge;
mod kvcr_ops;
mod not_checked;
mod perf;
mod record;
mod report;
mod results;
mod run_dir;
mod summary;
mod timeline_report;
pub mod workload;
mod workload_report;

#[cfg(test)]
pub(crate) mod sample;
#[cfg(test)]
mod tests;

pub use crate::pyenv::{ComponentImport, GitState, KvcrBuild, KvcrProvenance, PatchState};
pub use crate::utc::UtcTime;
pub use degraded_link_report::TTFT_BY_CONDITION;
pub use errors::EvidenceError;
pub use junit::{
    junit_report, junit_xml, workload_properties, write_junit, write_junit_with,
    write_junit_with_gpu, SUITE,
};
pub use kvcr_coverage::KvcrCoverage;
pub use kvcr_ops::{KvcrBench, KvcrOps};
pub use not_checked::{NotChecked, NOT_CHECKED};
pub use perf::{
    percentiles, ttft_offsets, Arm, ArmSummary, Baseline, DeltaVsBaseline, FirstTokenPair,
    OffsetStats, OpenLoopLevel, Percentiles, PerfSummary, PromotionStages, RecoveryAttempt,
    RecoveryTimeline, RequestRecord, SweepLevel, TtftAccuracy, DISK_TIER_CASE, INTERVAL_CONFIDENCE,
    THROUGHPUT_WINDOWS,
};
pub use record::{
    duration_ms, settings_digest, CaseRecord, IgnoredBecause, Neighbourhood, Outcome,
    ReferenceSummary, RetriedAttempt, RunRecord, StackSummary, StartupTiming, HEALED_BEFORE,
    LEFT_BROKEN,
};
pub use report::{render_page, render_report, write_report, LOAD_TIMELINE};
pub use results::{Results, RESULTS_SCHEMA_VERSION};
pub use run_dir::RunDir;
pub use summary::render_summary;
pub use workload::{WorkloadSummary, WORKLOAD_CASE, WORKLOAD_MEASUREMENT};
