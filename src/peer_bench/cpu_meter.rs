//! CPU time of a client process and all its descendants, sampled from
//! `/proc` while it runs, so that a window (the measured streams) can be cut
//! out of its life (interpreter start-up and imports excluded).

use std::collections::HashMap;
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::clock::monotonic_ns;

/// One look: when, and the tree's user + system CPU so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at_ns: u64,
    pub cpu_ns: u64,
}

/// Samples a process tree every `every` until dropped.
pub struct CpuMeter {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

fn ticks_per_s() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// (ppid, utime + stime in ticks) from a `/proc/PID/stat` line.
fn parse_stat(line: &str) -> Option<(u32, u64)> {
    // The command name may contain spaces: fields start after the last ')'.
    let rest = &line[line.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    Some((
        f.get(1)?.parse().ok()?,
        f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
    ))
}

/// User + system CPU of `root` and its live descendants, in ticks.
pub fn tree_ticks(root: u32) -> u64 {
    let mut by_pid: HashMap<u32, (u32, u64)> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(stat) = fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|l| parse_stat(&l))
            {
                by_pid.insert(pid, stat);
            }
        }
    }
    let mut total = 0;
    let mut frontier = vec![root];
    while let Some(pid) = frontier.pop() {
        if let Some((_, ticks)) = by_pid.get(&pid) {
            total += ticks;
        }
        frontier.extend(
            by_pid
                .iter()
                .filter(|(_, (ppid, _))| *ppid == pid)
                .map(|(child, _)| *child),
        );
    }
    total
}

impl CpuMeter {
    /// Starts sampling `root`, spawned at `spawned_at_ns` (before the spawn,
    /// so the tree had used no CPU then). That first sample opens the series:
    /// on a loaded machine the sampler's first look can come after the
    /// client's first stream.
    pub fn start(root: u32, every: Duration, spawned_at_ns: u64) -> CpuMeter {
        let samples = Arc::new(Mutex::new(vec![Sample {
            at_ns: spawned_at_ns,
            cpu_ns: 0,
        }]));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (samples.clone(), stop.clone());
        let ns_per_tick = 1_000_000_000 / ticks_per_s();
        let handle = thread::Builder::new()
            .name("cpu-meter".into())
            .spawn(move || {
                let mut seen = 0;
                while !st.load(Ordering::Relaxed) {
                    // A process tree's CPU never falls; a reaped process reads 0.
                    seen = (tree_ticks(root) * ns_per_tick).max(seen);
                    let cpu_ns = seen;
                    let at_ns = monotonic_ns();
                    s.lock().expect("samples").push(Sample { at_ns, cpu_ns });
                    thread::sleep(every);
                }
            })
            .expect("spawn the CPU meter");
        CpuMeter {
            samples,
            stop,
            handle: Some(handle),
        }
    }

    /// Stops sampling and returns the samples, closed by `last` (the
    /// client's total at exit, from [`reap`]) when given.
    pub fn finish(mut self, last: Option<Sample>) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let mut samples = std::mem::take(&mut *self.samples.lock().expect("samples"));
        if let Some(mut last) = last {
            let before = samples.iter().map(|s| s.cpu_ns).max().unwrap_or(0);
            last.cpu_ns = last.cpu_ns.max(before);
            samples.retain(|s| s.at_ns < last.at_ns);
            samples.push(last);
        }
        samples
    }
}

impl Drop for CpuMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How a reaped child ended, and its CPU (its own and its reaped
/// descendants', from `wait4`) as a sample at the moment it was reaped.
#[derive(Debug, Clone, Copy)]
pub struct Reaped {
    pub success: bool,
    pub code: i32,
    pub total: Sample,
}

/// Reaps `pid` if it has exited (`wait4` with `WNOHANG`): `Ok(None)` while
/// it runs. Used instead of `Child::try_wait`, which drops the rusage.
pub fn reap(pid: u32) -> std::io::Result<Option<Reaped>> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid for writes during the call.
    let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if rc == 0 {
        return Ok(None);
    }
    let at_ns = monotonic_ns();
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    let exited = libc::WIFEXITED(status);
    let code = if exited {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ok(Some(Reaped {
        success: exited && code == 0,
        code,
        total: Sample {
            at_ns,
            cpu_ns: tv(usage.ru_utime) + tv(usage.ru_stime),
        },
    }))
}

/// CPU used between `from_ns` and `to_ns`, interpolated between samples;
/// `None` when the samples do not cover the window.
pub fn cpu_between(samples: &[Sample], from_ns: u64, to_ns: u64) -> Option<Duration> {
    let at = |t: u64| -> Option<f64> {
        let after = samples.iter().position(|s| s.at_ns >= t)?;
        let b = samples[after];
        let a = samples[after.checked_sub(1)?];
        if b.at_ns == a.at_ns {
            return Some(b.cpu_ns as f64);
        }
        let f = (t - a.at_ns) as f64 / (b.at_ns - a.at_ns) as f64;
        Some(a.cpu_ns as f64 + f * (b.cpu_ns as f64 - a.cpu_ns as f64))
    };
    let used = at(to_ns)? - at(from_ns)?;
    Some(Duration::from_nanos(used.max(0.0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_in_the_name_parses() {
        let line = "42 (tokio rt worker) S 7 42 42 0 -1 4194560 1 0 0 0 150 25 0 0 20 0 3 0 1 2 3";
        assert_eq!(parse_stat(line), Some((7, 175)));
    }

    #[test]
    fn the_window_is_interpolated() {
        let s = [
            Sample {
                at_ns: 0,
                cpu_ns: 0,
            },
            Sample {
                at_ns: 100,
                cpu_ns: 50,
            },
            Sample {
                at_ns: 200,
                cpu_ns: 150,
            },
        ];
        assert_eq!(cpu_between(&s, 50, 150), Some(Duration::from_nanos(75)));
        assert_eq!(cpu_between(&s, 50, 250), None);
    }

    #[test]
    fn the_series_opens_at_the_spawn_even_when_the_first_look_is_late() {
        let start = super::super::clock::monotonic_ns();
        // The opening sample is there whenever the sampler's first look
        // comes (finish joins the sampler, so its period stays short).
        let meter = CpuMeter::start(std::process::id(), Duration::from_millis(5), start);
        let last = Sample {
            at_ns: start + 1_000_000_000,
            cpu_ns: 2_000_000,
        };
        let samples = meter.finish(Some(last));
        assert_eq!(
            samples[0],
            Sample {
                at_ns: start,
                cpu_ns: 0
            }
        );
        // A window that starts 1 ms after the spawn is covered.
        assert!(cpu_between(&samples, start + 1_000_000, start + 500_000_000).is_some());
    }

    #[test]
    fn this_process_uses_cpu() {
        assert!(tree_ticks(std::process::id()) < u64::MAX);
    }
}
