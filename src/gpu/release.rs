//! How long a killed process's GPU memory takes to come back.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::source::GpuSource;
use crate::wait::{self, Poll, WaitError};

/// The memory of a set of pids was released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Release {
    pub component: String,
    /// GPU memory the pids held when the wait began.
    pub held_bytes: u64,
    /// From the call (made right after the kill) to the first look that saw
    /// none of the pids on any GPU.
    pub release_ms: u64,
}

/// Bytes `pids` hold on every GPU of `gpus`.
fn held_by(source: &dyn GpuSource, gpus: &[u32], pids: &[u32]) -> Result<u64, String> {
    let mut total = 0;
    let mut seen = false;
    for &gpu in gpus {
        for p in source.processes(gpu)? {
            if pids.contains(&p.pid) {
                seen = true;
                total += p.memory_bytes.unwrap_or(1);
            }
        }
    }
    Ok(if seen { total.max(1) } else { 0 })
}

/// Waits until none of `pids` (a killed component's process tree, taken
/// before the kill) holds memory on any GPU, polling every `every`, at most
/// `budget`. Call it right after the kill.
pub fn await_release(
    source: &dyn GpuSource,
    gpus: &[u32],
    component: &str,
    pids: &[u32],
    budget: Duration,
    every: Duration,
) -> Result<Release, WaitError> {
    let started = Instant::now();
    let held_bytes = held_by(source, gpus, pids).unwrap_or(0);
    wait::until(
        format!("the GPU memory of {component} (pids {pids:?}) to be released"),
        budget,
        every,
        || match held_by(source, gpus, pids) {
            Ok(0) => Poll::Ready(()),
            Ok(bytes) => Poll::Pending(format!("{bytes} bytes still held")),
            Err(e) => Poll::Abort(format!("cannot read GPU processes: {e}")),
        },
    )?;
    Ok(Release {
        component: component.into(),
        held_bytes,
        release_ms: started.elapsed().as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fake::{FakeGpu, GIB};
    use super::*;
    use std::sync::Arc;

    #[test]
    fn release_is_seen_when_the_pids_leave_the_gpu() {
        let fake = Arc::new(FakeGpu::h200s(2));
        fake.set_process(0, 41, 20 * GIB);
        fake.set_process(0, 42, GIB);
        let remover = {
            let fake = fake.clone();
            std::thread::spawn(move || {
                // Lets the wait see the memory held once before it goes.
                std::thread::sleep(Duration::from_millis(30));
                fake.remove_process(41);
                fake.remove_process(42);
            })
        };
        let release = await_release(
            &*fake,
            &[0, 1],
            "worker-A",
            &[41, 42],
            Duration::from_secs(10),
            Duration::from_millis(2),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let _ = remover.join();
        assert_eq!(release.held_bytes, 21 * GIB);
        assert!(release.release_ms >= 20, "{release:?}");
    }

    #[test]
    fn memory_that_stays_is_a_timeout_saying_how_much() {
        let fake = FakeGpu::h200s(1);
        fake.set_process(0, 41, 5 * GIB);
        let err = await_release(
            &fake,
            &[0],
            "worker-A",
            &[41],
            Duration::from_millis(30),
            Duration::from_millis(5),
        )
        .expect_err("the memory never goes");
        let text = err.to_string();
        assert!(
            text.contains("worker-A") && text.contains(&format!("{} bytes still held", 5 * GIB)),
            "{text}"
        );
    }
}
