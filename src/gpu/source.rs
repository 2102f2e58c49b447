//! The small interface the harness reads GPUs through.

use serde::{Deserialize, Serialize};

/// One GPU as preflight sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// NVML index (the `CUDA_VISIBLE_DEVICES` id with the default ordering).
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub memory_total_bytes: u64,
    pub memory_used_bytes: u64,
}

impl DeviceInfo {
    pub fn memory_free_bytes(&self) -> u64 {
        self.memory_total_bytes
            .saturating_sub(self.memory_used_bytes)
    }
}

/// What the machine has: driver and GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub driver_version: String,
    pub devices: Vec<DeviceInfo>,
}

impl Inventory {
    /// `NVIDIA H200` (or `NVIDIA H200, NVIDIA A100` on a mixed machine).
    pub fn models(&self) -> String {
        let mut names: Vec<&str> = Vec::new();
        for d in &self.devices {
            if !names.contains(&d.name.as_str()) {
                names.push(&d.name);
            }
        }
        names.join(", ")
    }
}

/// One look at one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceReading {
    pub index: u32,
    pub memory_used_bytes: u64,
    /// Percent of the last sample period the GPU was busy; `None` when the
    /// driver does not report it.
    pub utilization_percent: Option<u32>,
    pub temperature_c: Option<u32>,
}

/// A process holding memory on a GPU, with its pid as the driver reports it
/// (the host's PID namespace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub gpu: u32,
    pub pid: u32,
    /// `None` when the driver does not say (e.g. under WDDM).
    pub memory_bytes: Option<u64>,
}

/// A source of GPU facts: NVML on a real machine, a fake in tests.
pub trait GpuSource: Send + Sync {
    fn driver_version(&self) -> Result<String, String>;
    fn devices(&self) -> Result<Vec<DeviceInfo>, String>;
    fn reading(&self, index: u32) -> Result<DeviceReading, String>;
    /// Compute and graphics processes on GPU `index`.
    fn processes(&self, index: u32) -> Result<Vec<GpuProcess>, String>;

    fn inventory(&self) -> Result<Inventory, String> {
        Ok(Inventory {
            driver_version: self.driver_version()?,
            devices: self.devices()?,
        })
    }
}
