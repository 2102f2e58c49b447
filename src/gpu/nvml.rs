//! [`GpuSource`] over NVML (`nvml-wrapper`). The library is loaded at run
//! time (`libnvidia-ml.so.1`, or `PHASE1_NVML_LIB`), so the harness builds
//! and runs on machines without a driver: [`NvmlSource::open`] then fails with
//! the reason.

use std::ffi::OsString;

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::source::{DeviceInfo, DeviceReading, GpuProcess, GpuSource};

/// Overrides the NVML library path (e.g. a driver in a non-standard place).
pub const LIB_ENV: &str = "PHASE1_NVML_LIB";

pub struct NvmlSource {
    nvml: Nvml,
}

impl NvmlSource {
    /// Loads and initialises NVML; the error says why GPU telemetry is off.
    pub fn open() -> Result<Self, String> {
        let custom: Option<OsString> = std::env::var_os(LIB_ENV);
        let mut builder = Nvml::builder();
        if let Some(path) = &custom {
            builder.lib_path(path);
        }
        let lib = custom
            .as_deref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| "libnvidia-ml.so.1".into());
        match builder.init() {
            Ok(nvml) => Ok(Self { nvml }),
            Err(NvmlError::LibloadingError(e)) => Err(format!(
                "cannot load {lib} (no NVIDIA driver on this machine? set {LIB_ENV} to its path): {e}"
            )),
            Err(e) => Err(format!("NVML did not initialise from {lib}: {e}")),
        }
    }

    fn device(&self, index: u32) -> Result<Device<'_>, String> {
        self.nvml
            .device_by_index(index)
            .map_err(|e| format!("NVML device {index}: {e}"))
    }
}

/// `None` for a value this GPU does not report; other errors are reported.
fn optional<T>(result: Result<T, NvmlError>, what: &str) -> Result<Option<T>, String> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::NotSupported) => Ok(None),
        Err(e) => Err(format!("NVML {what}: {e}")),
    }
}

impl GpuSource for NvmlSource {
    fn driver_version(&self) -> Result<String, String> {
        self.nvml
            .sys_driver_version()
            .map_err(|e| format!("NVML driver version: {e}"))
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>, String> {
        let count = self
            .nvml
            .device_count()
            .map_err(|e| format!("NVML device count: {e}"))?;
        (0..count)
            .map(|index| {
                let d = self.device(index)?;
                let memory = d
                    .memory_info()
                    .map_err(|e| format!("NVML memory of GPU {index}: {e}"))?;
                Ok(DeviceInfo {
                    index,
                    name: d
                        .name()
                        .map_err(|e| format!("NVML name of GPU {index}: {e}"))?,
                    uuid: d.uuid().unwrap_or_default(),
                    memory_total_bytes: memory.total,
                    memory_used_bytes: memory.used,
                })
            })
            .collect()
    }

    fn reading(&self, index: u32) -> Result<DeviceReading, String> {
        let d = self.device(index)?;
        let memory = d
            .memory_info()
            .map_err(|e| format!("NVML memory of GPU {index}: {e}"))?;
        Ok(DeviceReading {
            index,
            memory_used_bytes: memory.used,
            utilization_percent: optional(d.utilization_rates(), "utilization")?.map(|u| u.gpu),
            temperature_c: optional(d.temperature(TemperatureSensor::Gpu), "temperature")?,
        })
    }

    fn processes(&self, index: u32) -> Result<Vec<GpuProcess>, String> {
        let d = self.device(index)?;
        let mut all = d
            .running_compute_processes()
            .map_err(|e| format!("NVML compute processes of GPU {index}: {e}"))?;
        all.extend(
            optional(d.running_graphics_processes(), "graphics processes")?.unwrap_or_default(),
        );
        let mut out: Vec<GpuProcess> = Vec::new();
        for p in all {
            let memory_bytes = match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            };
            // A process with compute and graphics contexts is listed twice.
            if !out.iter().any(|o| o.pid == p.pid) {
                out.push(GpuProcess {
                    gpu: index,
                    pid: p.pid,
                    memory_bytes,
                });
            }
        }
        Ok(out)
    }
}
