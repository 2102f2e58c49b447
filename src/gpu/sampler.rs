//! A thread that samples every GPU and the run's components while the run
//! goes on, plus marks (case boundaries, kills) on the same clock.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::pids::{self, ComponentMemory};
use super::source::{DeviceReading, GpuProcess, GpuSource, Inventory};

/// At most this many sampling errors are kept (the first ones say why).
const MAX_ERRORS: usize = 20;

/// One look at every GPU, `t_ms` after the sampler started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub t_ms: u64,
    pub devices: Vec<DeviceReading>,
    pub components: Vec<ComponentMemory>,
    /// GPU processes that belong to no component of the run (another user,
    /// or a process the harness cannot see from its PID namespace).
    pub unattributed: Vec<GpuProcess>,
}

/// Something that happened during the run, on the sampler's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuMark {
    pub t_ms: u64,
    /// `case`, `kill`, `release`, ...
    pub kind: String,
    pub label: String,
}

/// Everything the sampler saw: the `gpu` field of results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuTimeline {
    pub inventory: Inventory,
    pub interval_ms: u64,
    pub samples: Vec<GpuSample>,
    pub marks: Vec<GpuMark>,
    /// Samples that failed (a reading the driver did not give is never a 0).
    pub errors: Vec<String>,
}

impl GpuTimeline {
    /// Highest memory a component held on any GPU over the run.
    pub fn peak_bytes(&self, component: &str) -> Option<u64> {
        self.samples
            .iter()
            .flat_map(|s| &s.components)
            .filter(|c| c.component == component)
            .filter_map(|c| c.memory_bytes)
            .max()
    }
}

#[derive(Default)]
struct Shared {
    components: Vec<(String, u32)>,
    samples: Vec<GpuSample>,
    marks: Vec<GpuMark>,
    errors: Vec<String>,
}

/// The running sampler. Dropping it stops the thread.
pub struct Sampler {
    started: Instant,
    inventory: Inventory,
    interval: Duration,
    shared: Arc<Mutex<Shared>>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `source` every `interval`; the first sample is taken
    /// at once.
    pub fn start(source: Arc<dyn GpuSource>, inventory: Inventory, interval: Duration) -> Self {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let started = Instant::now();
        let (stop, stopped) = mpsc::channel::<()>();
        let gpus: Vec<u32> = inventory.devices.iter().map(|d| d.index).collect();
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("gpu-sampler".into())
                .spawn(move || loop {
                    let sample = take_sample(&*source, &gpus, &shared, started);
                    {
                        let mut s = lock(&shared);
                        match sample {
                            Ok(sample) => s.samples.push(sample),
                            Err(e) if s.errors.len() < MAX_ERRORS => s
                                .errors
                                .push(format!("at {} ms: {e}", started.elapsed().as_millis())),
                            Err(_) => {}
                        }
                    }
                    // The interval is the sampling period, not a wait for state.
                    match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                })
                .ok()
        };
        Self {
            started,
            inventory,
            interval,
            shared,
            stop: Some(stop),
            thread,
        }
    }

    /// Attributes GPU processes in `pid`'s tree to `component` from now on.
    pub fn watch(&self, component: &str, pid: u32) {
        let mut s = lock(&self.shared);
        s.components.retain(|(name, _)| name != component);
        s.components.push((component.to_string(), pid));
    }

    /// Records a mark at the current time.
    pub fn mark(&self, kind: &str, label: &str) {
        let t_ms = self.started.elapsed().as_millis() as u64;
        lock(&self.shared).marks.push(GpuMark {
            t_ms,
            kind: kind.into(),
            label: label.into(),
        });
    }

    /// The samples so far (the sampler keeps running).
    pub fn snapshot(&self) -> GpuTimeline {
        let s = lock(&self.shared);
        GpuTimeline {
            inventory: self.inventory.clone(),
            interval_ms: self.interval.as_millis() as u64,
            samples: s.samples.clone(),
            marks: s.marks.clone(),
            errors: s.errors.clone(),
        }
    }

    /// Stops the thread and returns everything it saw.
    pub fn stop(mut self) -> GpuTimeline {
        self.halt();
        self.snapshot()
    }

    fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn take_sample(
    source: &dyn GpuSource,
    gpus: &[u32],
    shared: &Mutex<Shared>,
    started: Instant,
) -> Result<GpuSample, String> {
    let t_ms = started.elapsed().as_millis() as u64;
    let mut devices = Vec::with_capacity(gpus.len());
    let mut processes = Vec::new();
    for &gpu in gpus {
        devices.push(source.reading(gpu)?);
        processes.extend(source.processes(gpu)?);
    }
    let components = lock(shared).components.clone();
    let (components, unattributed) = pids::attribute(
        &processes,
        &components,
        &pids::parent_map(),
        pids::innermost_pid,
    );
    Ok(GpuSample {
        t_ms,
        devices,
        components,
        unattributed,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fake::{FakeGpu, GIB};
    use super::*;
    use crate::wait::{self, Poll};

    fn samples_with(sampler: &Sampler, what: &str, pred: impl Fn(&GpuSample) -> bool) {
        wait::until(
            what,
            Duration::from_secs(10),
            Duration::from_millis(5),
            || {
                let t = sampler.snapshot();
                match t.samples.iter().any(&pred) {
                    true => Poll::Ready(()),
                    false => Poll::Pending(format!("{} samples", t.samples.len())),
                }
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn samples_attribute_memory_to_the_watched_component_and_keep_marks() {
        let fake = Arc::new(FakeGpu::h200s(2));
        let me = std::process::id();
        fake.set_process(1, me, 3 * GIB);
        fake.set_process(0, 999_999_999, GIB);
        let inventory = fake.inventory().expect("fake inventory");
        let sampler = Sampler::start(fake.clone(), inventory, Duration::from_millis(5));
        sampler.watch("worker-B", me);
        sampler.mark("case", "TC-04::guard_takeover_and_replacement");
        samples_with(&sampler, "worker-B's memory", |s| {
            s.components.iter().any(|c| c.component == "worker-B")
        });
        fake.remove_process(me);
        sampler.mark("kill", "worker-B");
        samples_with(&sampler, "worker-B gone", |s| {
            s.devices[1].memory_used_bytes == 0 && s.components.is_empty()
        });
        let timeline = sampler.stop();
        assert_eq!(timeline.peak_bytes("worker-B"), Some(3 * GIB));
        assert_eq!(
            timeline
                .marks
                .iter()
                .map(|m| m.kind.as_str())
                .collect::<Vec<_>>(),
            ["case", "kill"]
        );
        assert!(timeline
            .samples
            .iter()
            .any(|s| s.unattributed.iter().any(|p| p.pid == 999_999_999)));
        assert!(timeline.errors.is_empty(), "{:?}", timeline.errors);
    }

    #[test]
    fn a_failing_driver_is_recorded_as_errors_not_zeros() {
        let fake = Arc::new(FakeGpu::h200s(1));
        let inventory = fake.inventory().expect("fake inventory");
        fake.break_with("NVML: GPU is lost");
        let sampler = Sampler::start(fake, inventory, Duration::from_millis(5));
        wait::until(
            "an error",
            Duration::from_secs(10),
            Duration::from_millis(5),
            || match sampler.snapshot().errors.len() {
                0 => Poll::Pending("none yet".into()),
                n => Poll::Ready(n),
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let timeline = sampler.stop();
        assert!(timeline.samples.is_empty());
        assert!(
            timeline.errors[0].contains("GPU is lost"),
            "{:?}",
            timeline.errors
        );
    }
}
