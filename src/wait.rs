//! Waiting for a condition with a deadline, and saying what was awaited.
//!
//! Nothing in the harness sleeps to wait for state: it polls a condition that
//! either yields a value, keeps waiting, or gives up with a reason (a process
//! that died will never become ready).

use std::fmt;
use std::time::{Duration, Instant};

/// One look at the condition being awaited.
pub enum Poll<T> {
    Ready(T),
    /// Not yet; the text says what is missing (kept for the timeout message).
    Pending(String),
    /// It will never happen; stop waiting now.
    Abort(String),
}

/// Waiting ended without the condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitError {
    pub what: String,
    pub waited: Duration,
    pub last_seen: String,
    pub aborted: bool,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.aborted {
            write!(
                f,
                "gave up waiting for {} after {:.1} s: {}",
                self.what,
                self.waited.as_secs_f64(),
                self.last_seen
            )
        } else {
            write!(
                f,
                "timed out after {:.1} s waiting for {}; last seen: {}",
                self.waited.as_secs_f64(),
                self.what,
                self.last_seen
            )
        }
    }
}

impl std::error::Error for WaitError {}

/// Polls `check` every `every` until it is ready, aborts, or `timeout` passes.
pub fn until<T>(
    what: impl Into<String>,
    timeout: Duration,
    every: Duration,
    mut check: impl FnMut() -> Poll<T>,
) -> Result<T, WaitError> {
    let what = what.into();
    let started = Instant::now();
    loop {
        let last_seen = match check() {
            Poll::Ready(value) => return Ok(value),
            Poll::Pending(seen) => seen,
            Poll::Abort(reason) => {
                return Err(WaitError {
                    what,
                    waited: started.elapsed(),
                    last_seen: reason,
                    aborted: true,
                })
            }
        };
        if started.elapsed() >= timeout {
            return Err(WaitError {
                what,
                waited: started.elapsed(),
                last_seen,
                aborted: false,
            });
        }
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_ready_value() {
        let mut n = 0;
        let got = until(
            "n to reach 3",
            Duration::from_secs(1),
            Duration::ZERO,
            || {
                n += 1;
                if n == 3 {
                    Poll::Ready(n)
                } else {
                    Poll::Pending(format!("n={n}"))
                }
            },
        );
        assert_eq!(got, Ok(3));
    }

    #[test]
    fn timeout_says_what_and_last_seen() {
        let err = until::<()>(
            "the moon",
            Duration::from_millis(30),
            Duration::from_millis(5),
            || Poll::Pending("no moon".into()),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("waiting for the moon") && text.contains("no moon"),
            "{text}"
        );
    }

    #[test]
    fn abort_stops_at_once() {
        let started = Instant::now();
        let err = until::<()>(
            "a dead worker",
            Duration::from_secs(10),
            Duration::from_millis(5),
            || Poll::Abort("it exited with code 3".into()),
        )
        .unwrap_err();
        assert!(err.aborted && started.elapsed() < Duration::from_secs(1));
        assert!(err.to_string().contains("exited with code 3"));
    }
}
