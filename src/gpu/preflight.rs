//! Before any process starts: does this machine have the GPUs and the free
//! memory the plan needs?

use std::fmt;

use serde::{Deserialize, Serialize};

use super::source::{GpuSource, Inventory};

/// What one GPU must give the plan: the largest sum of memory fractions the
/// plan puts on it at one time, and who takes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuShare {
    pub gpu: u32,
    pub fraction: f64,
    pub processes: Vec<String>,
}

/// The GPUs a plan needs on this machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuNeed {
    /// `vllm agg`, `sglang two-node` ...
    pub plan: String,
    pub shares: Vec<GpuShare>,
}

/// The machine cannot run the plan.
#[derive(Debug, Clone, PartialEq)]
pub enum PreflightError {
    Driver(String),
    TooFewGpus {
        plan: String,
        need: u32,
        found: Inventory,
    },
    NotEnoughFree {
        plan: String,
        lines: Vec<String>,
    },
}

impl fmt::Display for PreflightError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreflightError::Driver(e) => write!(f, "GPU preflight: cannot read the GPUs: {e}"),
            PreflightError::TooFewGpus { plan, need, found } => write!(
                f,
                "GPU preflight: plan {plan} needs GPU ids 0..{need} ({need} GPUs), this machine has {} ({}; driver {}); use a profile with fewer `gpu_ids` or a bigger machine",
                found.devices.len(),
                if found.devices.is_empty() { "none".to_string() } else { found.models() },
                found.driver_version
            ),
            PreflightError::NotEnoughFree { plan, lines } => write!(
                f,
                "GPU preflight: plan {plan} needs more free GPU memory than there is (another process on the GPU? see nvidia-smi):\n  {}",
                lines.join("\n  ")
            ),
        }
    }
}

impl std::error::Error for PreflightError {}

const GIB: f64 = (1u64 << 30) as f64;

/// Checks the machine against `need`: every GPU id exists, and each GPU has
/// at least `fraction × total` free (what vLLM's and SGLang's memory
/// fractions claim at start). Returns the inventory for the evidence.
pub fn preflight(source: &dyn GpuSource, need: &GpuNeed) -> Result<Inventory, PreflightError> {
    let found = source.inventory().map_err(PreflightError::Driver)?;
    let max_id = need.shares.iter().map(|s| s.gpu + 1).max().unwrap_or(0);
    if need
        .shares
        .iter()
        .any(|s| !found.devices.iter().any(|d| d.index == s.gpu))
    {
        return Err(PreflightError::TooFewGpus {
            plan: need.plan.clone(),
            need: max_id,
            found,
        });
    }
    let lines: Vec<String> = need
        .shares
        .iter()
        .filter_map(|share| {
            let d = found.devices.iter().find(|d| d.index == share.gpu)?;
            let wanted = share.fraction * d.memory_total_bytes as f64;
            (d.memory_free_bytes() as f64 + 0.5 < wanted).then(|| {
                format!(
                    "GPU {} ({}): needs {:.1} GiB ({:.2} of {:.1} GiB for {}), {:.1} GiB free",
                    d.index,
                    d.name,
                    wanted / GIB,
                    share.fraction,
                    d.memory_total_bytes as f64 / GIB,
                    share.processes.join(", "),
                    d.memory_free_bytes() as f64 / GIB
                )
            })
        })
        .collect();
    if lines.is_empty() {
        Ok(found)
    } else {
        Err(PreflightError::NotEnoughFree {
            plan: need.plan.clone(),
            lines,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{FakeGpu, GIB as BYTES_GIB};
    use super::*;

    fn need(shares: &[(u32, f64)]) -> GpuNeed {
        GpuNeed {
            plan: "sglang agg".into(),
            shares: shares
                .iter()
                .map(|&(gpu, fraction)| GpuShare {
                    gpu,
                    fraction,
                    processes: vec![format!("worker-{gpu}")],
                })
                .collect(),
        }
    }

    #[test]
    fn a_fitting_plan_passes_and_returns_the_inventory() {
        let inventory = preflight(&FakeGpu::h200s(2), &need(&[(0, 0.8), (1, 0.8)]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(inventory.models(), "NVIDIA H200");
        assert_eq!(inventory.driver_version, "570.124.06");
    }

    #[test]
    fn too_few_gpus_names_need_and_found() {
        let err = preflight(&FakeGpu::h200s(1), &need(&[(0, 0.8), (1, 0.8)]))
            .expect_err("one GPU is not two")
            .to_string();
        assert!(
            err.contains("needs GPU ids 0..2 (2 GPUs)")
                && err.contains("this machine has 1 (NVIDIA H200; driver 570.124.06)"),
            "{err}"
        );
    }

    #[test]
    fn memory_taken_by_someone_else_fails_naming_the_gpu() {
        let fake = FakeGpu::h200s(2);
        fake.set_baseline_used(1, 60 * BYTES_GIB);
        let err = preflight(&fake, &need(&[(0, 0.8), (1, 0.8)]))
            .expect_err("GPU 1 is busy")
            .to_string();
        assert!(
            err.contains("GPU 1 (NVIDIA H200): needs 114.4 GiB (0.80 of 143.0 GiB for worker-1), 83.0 GiB free"),
            "{err}"
        );
        assert!(!err.contains("GPU 0 ("), "{err}");
    }

    #[test]
    fn a_driver_error_is_not_a_pass() {
        let fake = FakeGpu::h200s(2);
        fake.break_with("NVML: driver/library version mismatch");
        let err = preflight(&fake, &need(&[(0, 0.5)])).expect_err("broken driver");
        assert!(err.to_string().contains("version mismatch"));
    }
}
