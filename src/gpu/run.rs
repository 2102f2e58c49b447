//! GPU telemetry of one harness run: preflight before the stack starts, the
//! sampler while it runs, a release wait after each worker kill, and the
//! evidence at the end. One run per process, so the state is global: the
//! stack and the cases mark events with one call each.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::preflight::{preflight, GpuNeed};
use super::release::{await_release, Release};
use super::sampler::{GpuTimeline, Sampler};
use super::source::{GpuSource, Inventory};

/// How often the sampler looks at the GPUs during a run.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// The `gpu` field of results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuRun {
    pub timeline: GpuTimeline,
    /// One per worker kill: how long its GPU memory took to come back.
    pub releases: Vec<Release>,
    /// Kills whose release was not seen within the budget (the reason).
    pub release_failures: Vec<String>,
}

struct Active {
    source: Arc<dyn GpuSource>,
    sampler: Sampler,
    gpus: Vec<u32>,
    release_budget: Duration,
    releases: Arc<Mutex<(Vec<Release>, Vec<String>)>>,
    waiters: Vec<std::thread::JoinHandle<()>>,
}

static ACTIVE: Mutex<Option<Active>> = Mutex::new(None);

fn with_active<T>(f: impl FnOnce(&mut Active) -> T) -> Option<T> {
    let mut guard = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_mut().map(f)
}

/// Before any process starts: checks the machine against `need` and starts
/// sampling. `Ok(None)` when there is no NVML (one line says so, nothing else
/// changes); `Err` when the machine cannot run the plan.
pub fn begin(need: &GpuNeed, release_budget: Duration) -> Result<Option<Inventory>, String> {
    let Some(source) = super::open() else {
        return Ok(None);
    };
    begin_with(source, need, release_budget).map(Some)
}

/// [`begin`] with the source given (tests, or an already open NVML).
pub fn begin_with(
    source: Arc<dyn GpuSource>,
    need: &GpuNeed,
    release_budget: Duration,
) -> Result<Inventory, String> {
    let inventory = preflight(&*source, need).map_err(|e| e.to_string())?;
    let gpus = inventory.devices.iter().map(|d| d.index).collect();
    let sampler = Sampler::start(source.clone(), inventory.clone(), SAMPLE_EVERY);
    let mut guard = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
    *guard = Some(Active {
        source,
        sampler,
        gpus,
        release_budget,
        releases: Arc::new(Mutex::new((Vec::new(), Vec::new()))),
        waiters: Vec::new(),
    });
    Ok(inventory)
}

/// Attributes GPU memory in `pid`'s process tree to `component`.
pub fn watch(component: &str, pid: u32) {
    with_active(|a| a.sampler.watch(component, pid));
}

/// A mark on the timeline (`case`, `kill`, ...).
pub fn mark(kind: &str, label: &str) {
    with_active(|a| a.sampler.mark(kind, label));
}

/// The pids whose GPU memory a kill of `pid` should release: its process
/// tree, taken before the signal.
pub fn tree_before_kill(pid: u32) -> Vec<u32> {
    super::pids::tree(pid, &super::pids::parent_map())
}

/// Right after a SIGKILL sent at `sent_at`: marks it and waits, on a thread
/// of its own, until `pids` hold no GPU memory; the time from the kill is
/// recorded. The case does not wait for it.
pub fn after_kill(component: &str, pids: Vec<u32>, sent_at: Instant) {
    with_active(|a| {
        a.sampler.mark("kill", component);
        let source = a.source.clone();
        let gpus = a.gpus.clone();
        let budget = a.release_budget;
        let out = a.releases.clone();
        let component = component.to_string();
        let waiter = std::thread::spawn(move || {
            let got = await_release(
                &*source,
                &gpus,
                &component,
                &pids,
                budget,
                Duration::from_millis(20),
            );
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            match got {
                Ok(release) => out.0.push(Release {
                    release_ms: sent_at.elapsed().as_millis() as u64,
                    ..release
                }),
                Err(e) => out.1.push(e.to_string()),
            }
        });
        a.waiters.push(waiter);
    });
}

/// Stops sampling and returns the run's GPU evidence (`None` without NVML).
pub fn finish() -> Option<GpuRun> {
    let active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    for waiter in active.waiters {
        let _ = waiter.join();
    }
    let timeline = active.sampler.stop();
    let (releases, release_failures) = {
        let r = active.releases.lock().unwrap_or_else(|e| e.into_inner());
        r.clone()
    };
    Some(GpuRun {
        timeline,
        releases,
        release_failures,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fake::{FakeGpu, GIB};
    use super::super::preflight::GpuShare;
    use super::*;

    /// The whole life of a run's telemetry against a fake GPU: preflight,
    /// a watched worker, a kill whose memory is released, the evidence.
    #[test]
    fn a_run_records_samples_marks_and_the_release_after_a_kill() {
        let fake = Arc::new(FakeGpu::h200s(2));
        let need = GpuNeed {
            plan: "fake agg".into(),
            shares: vec![GpuShare {
                gpu: 0,
                fraction: 0.8,
                processes: vec!["worker-A".into()],
            }],
        };
        begin_with(fake.clone(), &need, Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
        let worker = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let pid = worker.id();
        fake.set_process(0, pid, 100 * GIB);
        watch("worker-A", pid);
        mark("case", "TC-04::guard_takeover_and_replacement");
        let pids = tree_before_kill(pid);
        let sent_at = Instant::now();
        let mut worker = worker;
        let _ = worker.kill();
        let _ = worker.wait();
        // The driver lets go of the memory a little after the process dies.
        fake.remove_process(pid);
        after_kill("worker-A", pids, sent_at);
        let run = finish().expect("telemetry was on");
        assert_eq!(run.releases.len(), 1, "{run:?}");
        assert_eq!(run.releases[0].component, "worker-A");
        assert!(run.release_failures.is_empty());
        let kinds: Vec<_> = run.timeline.marks.iter().map(|m| m.kind.as_str()).collect();
        assert_eq!(kinds, ["case", "kill"]);
        assert!(!run.timeline.samples.is_empty());
        assert!(finish().is_none(), "finish hands the run over once");
    }
}
