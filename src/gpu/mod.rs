//! GPU telemetry through NVML: what the machine has, what each component of
//! the run holds, and how long a killed worker's memory takes to come back.
//!
//! ```text
//! let gpus = gpu::open();                       // None (one line printed) without a driver
//! let inventory = gpu::preflight(&*source, &need)?;   // before any process starts
//! let sampler = Sampler::start(source, components, every);
//! sampler.mark("TC-04 kill worker-A");
//! let timeline = sampler.stop();                // into results.json, JUnit, report
//! ```
//!
//! Everything reads a [`GpuSource`]: [`nvml::NvmlSource`] on a machine with a
//! driver (`libnvidia-ml.so` is loaded at run time, so the binary builds and
//! runs without one), [`fake::FakeGpu`] in unit tests.

pub mod check;
pub mod fake;
pub mod nvml;
pub mod pids;
pub mod preflight;
pub mod release;
pub mod run;
pub mod sampler;
pub mod source;

pub use preflight::{preflight, GpuNeed, PreflightError};
pub use release::{await_release, Release};
pub use sampler::{GpuMark, GpuSample, GpuTimeline, Sampler};
pub use source::{DeviceInfo, DeviceReading, GpuProcess, GpuSource, Inventory};

use std::sync::Arc;

/// The line printed when no NVML is found: GPU telemetry is off, nothing else
/// changes.
pub fn telemetry_off_line(reason: &str) -> String {
    format!("GPU telemetry off: {reason}")
}

/// NVML if the machine has a driver; otherwise `None`, after emitting
/// [`telemetry_off_line`] once (the console prints it).
pub fn open() -> Option<Arc<dyn GpuSource>> {
    open_with(nvml::NvmlSource::open, |line| {
        crate::events::emit(crate::events::RunEvent::GpuTelemetryOff {
            message: line.to_string(),
        })
    })
}

/// [`open`] with the loader and the printer injected (for tests).
pub fn open_with<S: GpuSource + 'static>(
    load: impl FnOnce() -> Result<S, String>,
    say: impl FnOnce(&str),
) -> Option<Arc<dyn GpuSource>> {
    match load() {
        Ok(source) => Some(Arc::new(source)),
        Err(reason) => {
            say(&telemetry_off_line(&reason));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_nvml_one_line_says_telemetry_is_off() {
        let mut lines = Vec::new();
        let got = open_with::<fake::FakeGpu>(
            || Err("libnvidia-ml.so.1 not found (no NVIDIA driver)".into()),
            |l| lines.push(l.to_string()),
        );
        assert!(got.is_none());
        assert_eq!(
            lines,
            ["GPU telemetry off: libnvidia-ml.so.1 not found (no NVIDIA driver)"]
        );
    }

    #[test]
    fn with_a_source_nothing_is_printed() {
        let mut lines = Vec::new();
        let got = open_with(
            || Ok(fake::FakeGpu::h200s(1)),
            |l| lines.push(l.to_string()),
        );
        assert!(got.is_some() && lines.is_empty());
    }

    /// On a machine without a driver (CI, this lane) the real loader fails
    /// with a reason instead of panicking; with a driver it finds a GPU.
    #[test]
    fn the_real_loader_answers_either_way() {
        match nvml::NvmlSource::open() {
            Ok(source) => assert!(!source.devices().unwrap_or_default().is_empty()),
            Err(reason) => assert!(!reason.is_empty()),
        }
    }
}
