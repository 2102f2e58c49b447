//! `kvcr-e2e gpu-check`: the GPU telemetry checked against a process whose
//! GPU memory is known. A PyTorch child allocates a given number of bytes on
//! one GPU, frees them, and is SIGKILLed; the preflight, the sampler and the
//! release wait must see each step. Needs a driver and PyTorch, nothing else.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::preflight::{preflight, GpuNeed, GpuShare};
use super::release::await_release;
use super::sampler::{GpuTimeline, Sampler};
use super::source::GpuSource;
use crate::wait::{self, Poll};

const GIB: f64 = (1u64 << 30) as f64;
const COMPONENT: &str = "torch-alloc";

/// The child: CUDA context first, then the allocation, then the free, each
/// step on a line from the harness, each step announced on stdout.
const CHILD: &str = r#"
import os, sys, torch
n = int(sys.argv[1])
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
print("CONTEXT", flush=True)
sys.stdin.readline()
x = torch.empty(n, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("ALLOCATED", torch.cuda.memory_reserved(), flush=True)
sys.stdin.readline()
del x
torch.cuda.empty_cache()
torch.cuda.synchronize()
print("FREED", torch.cuda.memory_reserved(), flush=True)
sys.stdin.readline()
"#;

/// What `gpu-check` is asked to do.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    pub python: PathBuf,
    pub gpu: u32,
    pub bytes: u64,
    /// Budget of each wait (PyTorch's import and CUDA init come first).
    pub timeout: Duration,
    pub interval: Duration,
    pub out: PathBuf,
}

/// The tolerance on the allocation as NVML sees it: 5 % of it, at least
/// 256 MiB (allocator rounding, cuBLAS/cuDNN workspaces created lazily).
pub fn tolerance_bytes(bytes: u64) -> u64 {
    (bytes / 20).max(256 << 20)
}

/// The figures the check measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckFigures {
    pub gpu: u32,
    pub allocated_bytes: u64,
    pub pid: u32,
    /// The child's memory after CUDA init, before the allocation.
    pub context_bytes: u64,
    /// After the allocation.
    pub held_bytes: u64,
    /// After `del` + `empty_cache()`.
    pub after_free_bytes: u64,
    /// From SIGKILL to the pid gone from the GPU.
    pub release_ms: Option<u64>,
    /// Peak the sampler attributed to the child.
    pub sampler_peak_bytes: Option<u64>,
    pub sampler_samples: usize,
}

/// One claim of the check and whether it held.
#[derive(Debug, Clone, Serialize)]
pub struct Claim {
    pub ok: bool,
    pub text: String,
}

/// Judges the figures. Each claim is a line of the output.
pub fn judge(f: &CheckFigures) -> Vec<Claim> {
    let tol = tolerance_bytes(f.allocated_bytes);
    let gib = |b: u64| b as f64 / GIB;
    let delta = f.held_bytes.saturating_sub(f.context_bytes);
    let claim = |ok, text: String| Claim { ok, text };
    vec![
        claim(
            f.pid != 0 && f.context_bytes > 0,
            format!(
                "process seen: pid {} on GPU {} (CUDA context {:.2} GiB)",
                f.pid,
                f.gpu,
                gib(f.context_bytes)
            ),
        ),
        claim(
            delta.abs_diff(f.allocated_bytes) <= tol,
            format!(
                "memory: allocated {:.2} GiB, NVML saw {:.2} GiB over the context (tolerance ±{:.2} GiB)",
                gib(f.allocated_bytes),
                gib(delta),
                gib(tol)
            ),
        ),
        claim(
            f.after_free_bytes <= f.context_bytes + tol && f.held_bytes > f.after_free_bytes,
            format!(
                "free seen: {:.2} GiB held after the free (context {:.2} GiB, tolerance {:.2} GiB)",
                gib(f.after_free_bytes),
                gib(f.context_bytes),
                gib(tol)
            ),
        ),
        claim(
            f.release_ms.is_some(),
            match f.release_ms {
                Some(ms) => format!("release after SIGKILL seen in {ms} ms"),
                None => "release after SIGKILL not seen".into(),
            },
        ),
        claim(
            f.sampler_peak_bytes.is_some_and(|p| p >= f.held_bytes.saturating_sub(tol)),
            format!(
                "sampler: {} samples, peak {} attributed to {COMPONENT}",
                f.sampler_samples,
                f.sampler_peak_bytes
                    .map_or("none".to_string(), |p| format!("{:.2} GiB", gib(p)))
            ),
        ),
    ]
}

/// The child, killed (and reaped) on every way out.
struct Child_ {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr_log: PathBuf,
}

impl Child_ {
    fn spawn(opts: &CheckOptions) -> Result<Self, String> {
        let stderr_log = opts.out.with_extension("child.log");
        let stderr = std::fs::File::create(&stderr_log)
            .map_err(|e| format!("cannot create {}: {e}", stderr_log.display()))?;
        let mut child = Command::new(&opts.python)
            .args(["-c", CHILD, &opts.bytes.to_string()])
            // CUDA's device order = NVML's (PCI bus), so GPU ids agree.
            .env("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
            .env("CUDA_VISIBLE_DEVICES", opts.gpu.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", opts.python.display()))?;
        let stdout = child.stdout.take();
        let (tx, lines) = mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Self {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr_log,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn step(&mut self) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("the child's stdin is closed")?;
        stdin
            .write_all(b"\n")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("cannot write to the child: {e}"))
    }

    /// Waits for a stdout line starting with `word`; a child that exits
    /// first aborts the wait with its stderr.
    fn expect(&mut self, word: &str, timeout: Duration) -> Result<String, String> {
        let log = self.stderr_log.clone();
        let lines = &self.lines;
        let child = &mut self.child;
        wait::until(
            format!("the PyTorch child to say {word}"),
            timeout,
            Duration::from_millis(20),
            || {
                while let Ok(line) = lines.try_recv() {
                    if line.starts_with(word) {
                        return Poll::Ready(line);
                    }
                }
                match child.try_wait() {
                    Ok(Some(status)) => Poll::Abort(format!(
                        "it exited ({status}); its stderr ({}):\n{}",
                        log.display(),
                        tail(&log, 15)
                    )),
                    _ => Poll::Pending("no line yet".into()),
                }
            },
        )
        .map_err(|e| e.to_string())
    }
}

impl Drop for Child_ {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The child's memory on `gpu` once `accept` holds for it.
fn memory_of(
    source: &dyn GpuSource,
    gpu: u32,
    pid: u32,
    what: &str,
    timeout: Duration,
    accept: impl Fn(u64) -> bool,
) -> Result<u64, String> {
    wait::until(what, timeout, Duration::from_millis(50), || {
        match source.processes(gpu) {
            Err(e) => Poll::Abort(e),
            Ok(list) => match list.iter().find(|p| p.pid == pid) {
                None => Poll::Pending(format!("pid {pid} not among GPU {gpu}'s processes")),
                Some(p) => match p.memory_bytes {
                    None => Poll::Abort(format!("the driver reports no memory for pid {pid}")),
                    Some(b) if accept(b) => Poll::Ready(b),
                    Some(b) => Poll::Pending(format!("pid {pid} holds {b} bytes")),
                },
            },
        }
    })
    .map_err(|e| e.to_string())
}

/// The child's pid as the driver reports it: its own pid, else the single
/// process that appeared on the GPU since `before`.
fn driver_pid(
    source: &dyn GpuSource,
    gpu: u32,
    own_pid: u32,
    before: &[u32],
    timeout: Duration,
) -> Result<u32, String> {
    wait::until(
        format!("the child (pid {own_pid}) among GPU {gpu}'s processes"),
        timeout,
        Duration::from_millis(50),
        || match source.processes(gpu) {
            Err(e) => Poll::Abort(e),
            Ok(list) => {
                if list.iter().any(|p| p.pid == own_pid) {
                    return Poll::Ready(own_pid);
                }
                let new: Vec<u32> = list
                    .iter()
                    .map(|p| p.pid)
                    .filter(|p| !before.contains(p))
                    .collect();
                match new.as_slice() {
                    [one] => Poll::Ready(*one),
                    [] => Poll::Pending("no new process on the GPU".into()),
                    many => Poll::Pending(format!(
                        "{} new processes on the GPU ({many:?}), none with the child's pid",
                        many.len()
                    )),
                }
            }
        },
    )
    .map_err(|e| e.to_string())
}

/// Everything the check produced.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    pub figures: CheckFigures,
    pub claims: Vec<Claim>,
    pub timeline: GpuTimeline,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.claims.iter().all(|c| c.ok)
    }
}

/// Runs the check, printing each step to `say`.
pub fn run(
    source: Arc<dyn GpuSource>,
    opts: &CheckOptions,
    say: &mut dyn FnMut(&str),
) -> Result<CheckReport, String> {
    let need_fraction = {
        let devices = source.devices()?;
        let total = devices
            .iter()
            .find(|d| d.index == opts.gpu)
            .map_or(u64::MAX, |d| d.memory_total_bytes);
        (opts.bytes + (2 << 30)) as f64 / total as f64
    };
    let need = GpuNeed {
        plan: format!(
            "gpu-check ({:.1} GiB on GPU {})",
            opts.bytes as f64 / GIB,
            opts.gpu
        ),
        shares: vec![GpuShare {
            gpu: opts.gpu,
            fraction: need_fraction,
            processes: vec![COMPONENT.into()],
        }],
    };
    let inventory = preflight(&*source, &need).map_err(|e| e.to_string())?;
    say(&format!(
        "driver {}, {} GPU(s): {}",
        inventory.driver_version,
        inventory.devices.len(),
        inventory
            .devices
            .iter()
            .map(|d| format!(
                "{} {} ({:.1} GiB, {:.1} GiB free)",
                d.index,
                d.name,
                d.memory_total_bytes as f64 / GIB,
                d.memory_free_bytes() as f64 / GIB
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    say("preflight passed");
    let before: Vec<u32> = source.processes(opts.gpu)?.iter().map(|p| p.pid).collect();
    let sampler = Sampler::start(source.clone(), inventory, opts.interval);
    let mut child = Child_::spawn(opts)?;
    let own_pid = child.pid();
    sampler.watch(COMPONENT, own_pid);
    let mut f = CheckFigures {
        gpu: opts.gpu,
        allocated_bytes: opts.bytes,
        pid: own_pid,
        ..CheckFigures::default()
    };

    child.expect("CONTEXT", opts.timeout)?;
    // The driver names the child by its pid in the host's PID namespace; in
    // a container without that namespace it is another number: the one new
    // process on the GPU.
    let pid = driver_pid(&*source, opts.gpu, own_pid, &before, opts.timeout)?;
    if pid != own_pid {
        say(&format!(
            "the driver lists the child as pid {pid} (this process sees it as {own_pid}: another PID namespace, e.g. a container without the host's)"
        ));
        sampler.watch(COMPONENT, pid);
        f.pid = pid;
    }
    f.context_bytes = memory_of(
        &*source,
        opts.gpu,
        pid,
        "the child's CUDA context on the GPU",
        opts.timeout,
        |_| true,
    )?;
    say(&format!(
        "child pid {pid}: CUDA context {} bytes",
        f.context_bytes
    ));

    sampler.mark("alloc", &format!("{} bytes", opts.bytes));
    child.step()?;
    child.expect("ALLOCATED", opts.timeout)?;
    let tol = tolerance_bytes(opts.bytes);
    let floor = f.context_bytes + opts.bytes.saturating_sub(tol);
    f.held_bytes = memory_of(
        &*source,
        opts.gpu,
        pid,
        "the allocation to show on the GPU",
        opts.timeout,
        |b| b >= floor,
    )
    .or_else(|e| {
        // Keep what was seen so the verdict (not an error) says it.
        say(&format!("allocation not seen in full: {e}"));
        memory_of(
            &*source,
            opts.gpu,
            pid,
            "the child on the GPU",
            opts.timeout,
            |_| true,
        )
    })?;
    say(&format!("after the allocation: {} bytes", f.held_bytes));
    // The sampler must see the allocation too before it goes away.
    let held = f.held_bytes;
    if let Err(e) = wait::until(
        "the sampler to record the allocation",
        opts.timeout,
        opts.interval / 2,
        || match sampler.snapshot().peak_bytes(COMPONENT) {
            Some(peak) if peak >= held => Poll::Ready(()),
            peak => Poll::Pending(format!("peak so far {peak:?}")),
        },
    ) {
        say(&e.to_string());
    }

    sampler.mark("free", "del + empty_cache");
    child.step()?;
    child.expect("FREED", opts.timeout)?;
    let ceiling = f.context_bytes + tol;
    f.after_free_bytes = memory_of(
        &*source,
        opts.gpu,
        pid,
        "the free to show on the GPU",
        opts.timeout,
        |b| b <= ceiling,
    )
    .or_else(|e| {
        say(&format!("free not seen in full: {e}"));
        memory_of(
            &*source,
            opts.gpu,
            pid,
            "the child on the GPU",
            opts.timeout,
            |_| true,
        )
    })?;
    say(&format!("after the free: {} bytes", f.after_free_bytes));

    let mut tree = super::pids::tree(own_pid, &super::pids::parent_map());
    tree.push(pid);
    sampler.mark("kill", COMPONENT);
    let _ = child.child.kill();
    match await_release(
        &*source,
        &[opts.gpu],
        COMPONENT,
        &tree,
        opts.timeout,
        Duration::from_millis(10),
    ) {
        Ok(r) => {
            sampler.mark("release", COMPONENT);
            f.release_ms = Some(r.release_ms);
        }
        Err(e) => say(&format!("{e}")),
    }
    drop(child);
    // One more sample after the release, then stop.
    let timeline = sampler.stop();
    f.sampler_peak_bytes = timeline.peak_bytes(COMPONENT);
    f.sampler_samples = timeline.samples.len();
    let claims = judge(&f);
    Ok(CheckReport {
        figures: f,
        claims,
        timeline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1 << 30;

    fn passing() -> CheckFigures {
        CheckFigures {
            gpu: 0,
            allocated_bytes: 8 * G,
            pid: 4242,
            context_bytes: G / 2,
            held_bytes: 8 * G + G / 2 + (2 << 20),
            after_free_bytes: G / 2,
            release_ms: Some(120),
            sampler_peak_bytes: Some(8 * G + G / 2),
            sampler_samples: 40,
        }
    }

    fn failed(f: &CheckFigures) -> Vec<String> {
        judge(f)
            .into_iter()
            .filter(|c| !c.ok)
            .map(|c| c.text)
            .collect()
    }

    /// A GPU whose only process is the one a stub child describes in a file
    /// (`pid bytes`), present while that pid lives.
    struct StubGpu {
        inner: crate::gpu::fake::FakeGpu,
        file: PathBuf,
        /// Added to the child's pid, as a driver in another PID namespace.
        pid_offset: u32,
    }

    impl GpuSource for StubGpu {
        fn driver_version(&self) -> Result<String, String> {
            self.inner.driver_version()
        }
        fn devices(&self) -> Result<Vec<crate::gpu::DeviceInfo>, String> {
            self.inner.devices()
        }
        fn reading(&self, index: u32) -> Result<crate::gpu::DeviceReading, String> {
            self.inner.reading(index)
        }
        fn processes(&self, index: u32) -> Result<Vec<crate::gpu::GpuProcess>, String> {
            let text = std::fs::read_to_string(&self.file).unwrap_or_default();
            let mut words = text.split_whitespace().map(|w| w.parse::<u64>().ok());
            Ok(match (words.next().flatten(), words.next().flatten()) {
                (Some(pid), Some(bytes))
                    if !matches!(crate::proc::procfs::state(pid as u32), None | Some('Z')) =>
                {
                    vec![crate::gpu::GpuProcess {
                        gpu: index,
                        pid: pid as u32 + self.pid_offset,
                        memory_bytes: Some(bytes),
                    }]
                }
                _ => Vec::new(),
            })
        }
    }

    /// The whole check against a stub child that follows the PyTorch child's
    /// protocol, and writes what NVML would see into a file.
    #[test]
    fn the_check_runs_end_to_end_against_a_stub_child() {
        let report = check_against_stub(0);
        assert_eq!(report.figures.held_bytes, 500_000_000 + 2 * G);
        let kinds: Vec<_> = report
            .timeline
            .marks
            .iter()
            .map(|m| m.kind.as_str())
            .collect();
        assert_eq!(kinds, ["alloc", "free", "kill", "release"]);
    }

    /// In a container without the host's PID namespace the driver's pid is
    /// not ours: the one new GPU process is taken, and the check still holds.
    #[test]
    fn a_driver_in_another_pid_namespace_is_matched_by_the_new_process() {
        let report = check_against_stub(1_000_000);
        assert!(report.figures.pid > 1_000_000, "{:?}", report.figures);
    }

    fn check_against_stub(pid_offset: u32) -> CheckReport {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("gpu");
        let stub = dir.path().join("python");
        let script = format!(
            "#!/bin/sh\nF={f}\nC=500000000\necho \"$$ $C\" > $F\necho CONTEXT\nread x\necho \"$$ $((C + $3))\" > $F\necho ALLOCATED\nread x\necho \"$$ $C\" > $F\necho FREED\nread x\n",
            f = file.display()
        );
        std::fs::write(&stub, script).expect("write stub");
        std::process::Command::new("chmod")
            .args(["+x", &stub.display().to_string()])
            .status()
            .expect("chmod");
        let source = Arc::new(StubGpu {
            inner: crate::gpu::fake::FakeGpu::h200s(1),
            file,
            pid_offset,
        });
        let opts = CheckOptions {
            python: stub,
            gpu: 0,
            bytes: 2 * G,
            timeout: Duration::from_secs(30),
            interval: Duration::from_millis(10),
            out: dir.path().join("check.json"),
        };
        let mut lines = Vec::new();
        let report = run(source, &opts, &mut |l| lines.push(l.to_string()))
            .unwrap_or_else(|e| panic!("{e}\n{lines:#?}"));
        let failed: Vec<_> = report.claims.iter().filter(|c| !c.ok).collect();
        assert!(failed.is_empty(), "{failed:#?}\n{lines:#?}");
        assert_eq!(report.figures.held_bytes, 500_000_000 + 2 * G);
        let kinds: Vec<_> = report
            .timeline
            .marks
            .iter()
            .map(|m| m.kind.as_str())
            .collect();
        assert_eq!(kinds, ["alloc", "free", "kill", "release"]);
        report
    }

    #[test]
    fn a_child_without_torch_fails_with_its_stderr() {
        let dir = tempfile::tempdir().expect("temp dir");
        let opts = CheckOptions {
            python: PathBuf::from("sh"),
            gpu: 0,
            bytes: G,
            timeout: Duration::from_secs(30),
            interval: Duration::from_millis(10),
            out: dir.path().join("check.json"),
        };
        let source = Arc::new(crate::gpu::fake::FakeGpu::h200s(1));
        let err = run(source, &opts, &mut |_| {}).expect_err("sh -c is not PyTorch");
        assert!(err.contains("exited") && err.contains("stderr"), "{err}");
    }

    #[test]
    fn the_expected_figures_pass() {
        assert!(failed(&passing()).is_empty(), "{:?}", failed(&passing()));
        assert_eq!(tolerance_bytes(8 * G), 8 * G / 20);
        assert_eq!(tolerance_bytes(G), 256 << 20);
    }

    #[test]
    fn each_claim_can_fail() {
        type Spoil = fn(&mut CheckFigures);
        let cases: [(Spoil, &str); 5] = [
            (|f| f.pid = 0, "process seen: pid 0"),
            (
                |f| f.held_bytes = 4 * G,
                "memory: allocated 8.00 GiB, NVML saw 3.50 GiB",
            ),
            (|f| f.after_free_bytes = 8 * G, "free seen"),
            (|f| f.release_ms = None, "release after SIGKILL not seen"),
            (|f| f.sampler_peak_bytes = None, "peak none"),
        ];
        for (spoil, expected) in cases {
            let mut f = passing();
            spoil(&mut f);
            let failed = failed(&f);
            assert!(
                failed.len() == 1 && failed[0].contains(expected),
                "{expected}: {failed:?}"
            );
        }
    }
}
