//! What a running case is doing now, and the flag that cancels it.
//!
//! Every [`super::CaseCtx`] helper that talks to the stack (a request, a
//! stream, a telemetry scrape, a wait) names itself here first, so a case
//! that runs past its timeout fails with "timed out after N s while
//! <what it was doing>". The same helpers stop at the cancel flag: an
//! in-flight request is dropped, a wait ends at its next poll.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a cancellable request looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// The error a helper returns once its case was cancelled.
pub const CANCELLED: &str = "the case was cancelled (it ran past its timeout)";

/// A case's current activity and cancel flag, shared between the case's
/// thread and the suite that watches the clock.
#[derive(Clone, Default)]
pub struct Activity {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    doing: Mutex<String>,
    cancelled: AtomicBool,
}

impl Activity {
    pub fn new() -> Self {
        Self::default()
    }

    /// Names what the case does from now on; `Err` once it was cancelled.
    pub fn doing(&self, what: impl Into<String>) -> Result<(), &'static str> {
        if let Ok(mut doing) = self.inner.doing.lock() {
            *doing = what.into();
        }
        self.check()
    }

    /// What the case was last doing (`starting` before its first helper).
    pub fn current(&self) -> String {
        self.inner
            .doing
            .lock()
            .map(|d| d.clone())
            .ok()
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "starting".to_string())
    }

    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
    }

    /// Clears the flag: the suite's own restore steps run after a timeout.
    pub fn resume(&self) {
        self.inner.cancelled.store(false, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    pub fn check(&self) -> Result<(), &'static str> {
        if self.is_cancelled() {
            Err(CANCELLED)
        } else {
            Ok(())
        }
    }

    /// Runs `future` on the harness runtime, dropped at once if the case is
    /// cancelled while it runs.
    pub fn block_on<F: Future>(&self, future: F) -> Result<F::Output, &'static str> {
        self.check()?;
        let flag = self.inner.clone();
        crate::rt::block_on(async move {
            tokio::select! {
                out = future => Ok(out),
                _ = async {
                    while !flag.cancelled.load(Ordering::SeqCst) {
                        tokio::time::sleep(CANCEL_POLL).await;
                    }
                } => Err(CANCELLED),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_drops_the_request_in_flight_and_every_later_helper() {
        let activity = Activity::new();
        assert_eq!(activity.current(), "starting");
        activity.doing("streaming f1 on worker A").unwrap();
        let other = activity.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            other.cancel();
        });
        let started = std::time::Instant::now();
        let out = activity.block_on(std::future::pending::<()>());
        canceller.join().unwrap();
        assert_eq!(out, Err(CANCELLED));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(activity.doing("the next request"), Err(CANCELLED));
        assert_eq!(activity.current(), "the next request");
        activity.resume();
        assert_eq!(activity.block_on(async { 7 }), Ok(7));
    }
}
