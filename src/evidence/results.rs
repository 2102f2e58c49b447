//! `results.json`: the run record, every request, and the perf summaries.

use std::path::PathBuf;

use serde::Serialize;

use super::errors::EvidenceError;
use super::perf::{PerfSummary, RequestRecord};
use super::record::RunRecord;
use super::run_dir::RunDir;

/// Version of the results.json layout; bumped on incompatible changes.
pub const RESULTS_SCHEMA_VERSION: u32 = 1;

/// Everything a run produced, as one document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Results {
    /// [`RESULTS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run and its cases.
    pub run: RunRecord,
    /// Every request the perf cases sent.
    pub requests: Vec<RequestRecord>,
    /// Perf arms, sweep and recovery timeline.
    pub perf: PerfSummary,
    /// GPU telemetry (NVML): inventory, samples over the run, kill marks and
    /// release times. Absent without NVML.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::gpu::run::GpuRun>,
    /// kvcr's line and branch coverage (`--kvcr-coverage`). Absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kvcr_coverage: Option<super::KvcrCoverage>,
    /// What the Guard pool cost against its size (a production-size pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard_costs: Option<super::guard_costs::GuardCosts>,
}

impl Results {
    /// Results of a run.
    pub fn new(run: RunRecord, requests: Vec<RequestRecord>, perf: PerfSummary) -> Self {
        Results {
            schema_version: RESULTS_SCHEMA_VERSION,
            run,
            requests,
            perf,
            gpu: None,
            kvcr_coverage: None,
            guard_costs: None,
        }
    }

    /// The run's KVCR coverage, when it measured it.
    pub fn with_kvcr_coverage(mut self, coverage: Option<super::KvcrCoverage>) -> Self {
        self.kvcr_coverage = coverage;
        self
    }

    /// What the Guard pool cost against its size, on a production-size pool.
    pub fn with_guard_costs(mut self, costs: Option<super::guard_costs::GuardCosts>) -> Self {
        self.guard_costs = costs;
        self
    }

    /// The run's GPU telemetry, when there was any.
    pub fn with_gpu(mut self, gpu: Option<crate::gpu::run::GpuRun>) -> Self {
        self.gpu = gpu;
        self
    }

    /// Writes `results.json` into the run directory; returns its path.
    pub fn write(&self, dir: &RunDir) -> Result<PathBuf, EvidenceError> {
        dir.write_root_json("results.json", self)
    }
}
