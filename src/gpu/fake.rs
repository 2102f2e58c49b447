//! A scriptable GPU for unit tests: devices, processes and readings that a
//! test changes while a sampler or a wait reads them.

use std::sync::Mutex;

use super::source::{DeviceInfo, DeviceReading, GpuProcess, GpuSource};

pub const GIB: u64 = 1 << 30;

#[derive(Debug, Default)]
struct State {
    driver: String,
    devices: Vec<DeviceInfo>,
    processes: Vec<GpuProcess>,
    /// Make every call fail with this text (a driver that went away).
    broken: Option<String>,
}

/// A fake machine. Device memory used = baseline + its processes' memory.
#[derive(Debug, Default)]
pub struct FakeGpu {
    state: Mutex<State>,
}

impl FakeGpu {
    /// `count` idle H200s (143 GiB each) on driver 570.124.06.
    pub fn h200s(count: u32) -> Self {
        let devices = (0..count)
            .map(|index| DeviceInfo {
                index,
                name: "NVIDIA H200".into(),
                uuid: format!("GPU-fake-{index}"),
                memory_total_bytes: 143 * GIB,
                memory_used_bytes: 0,
            })
            .collect();
        Self {
            state: Mutex::new(State {
                driver: "570.124.06".into(),
                devices,
                ..State::default()
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state)
    }

    /// Sets (or adds) `pid`'s memory on `gpu`.
    pub fn set_process(&self, gpu: u32, pid: u32, bytes: u64) {
        self.with(|s| {
            s.processes.retain(|p| !(p.gpu == gpu && p.pid == pid));
            s.processes.push(GpuProcess {
                gpu,
                pid,
                memory_bytes: Some(bytes),
            });
        });
    }

    /// `pid` leaves every GPU (its memory is released).
    pub fn remove_process(&self, pid: u32) {
        self.with(|s| s.processes.retain(|p| p.pid != pid));
    }

    /// Memory used on `gpu` by something the run does not own.
    pub fn set_baseline_used(&self, gpu: u32, bytes: u64) {
        self.with(|s| {
            if let Some(d) = s.devices.iter_mut().find(|d| d.index == gpu) {
                d.memory_used_bytes = bytes;
            }
        });
    }

    pub fn break_with(&self, reason: &str) {
        self.with(|s| s.broken = Some(reason.into()));
    }

    fn check(s: &State) -> Result<(), String> {
        match &s.broken {
            Some(reason) => Err(reason.clone()),
            None => Ok(()),
        }
    }

    fn used(s: &State, gpu: u32, baseline: u64) -> u64 {
        baseline
            + s.processes
                .iter()
                .filter(|p| p.gpu == gpu)
                .filter_map(|p| p.memory_bytes)
                .sum::<u64>()
    }
}

impl GpuSource for FakeGpu {
    fn driver_version(&self) -> Result<String, String> {
        self.with(|s| Self::check(s).map(|()| s.driver.clone()))
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>, String> {
        self.with(|s| {
            Self::check(s)?;
            Ok(s.devices
                .iter()
                .map(|d| DeviceInfo {
                    memory_used_bytes: Self::used(s, d.index, d.memory_used_bytes),
                    ..d.clone()
                })
                .collect())
        })
    }

    fn reading(&self, index: u32) -> Result<DeviceReading, String> {
        self.with(|s| {
            Self::check(s)?;
            let d = s
                .devices
                .iter()
                .find(|d| d.index == index)
                .ok_or_else(|| format!("no GPU {index}"))?;
            Ok(DeviceReading {
                index,
                memory_used_bytes: Self::used(s, index, d.memory_used_bytes),
                utilization_percent: Some(0),
                temperature_c: Some(30),
            })
        })
    }

    fn processes(&self, index: u32) -> Result<Vec<GpuProcess>, String> {
        self.with(|s| {
            Self::check(s)?;
            Ok(s.processes
                .iter()
                .filter(|p| p.gpu == index)
                .cloned()
                .collect())
        })
    }
}
