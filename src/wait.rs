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

/// What [`settle`] saw last: the state, and whether it settled in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled<T> {
    pub state: T,
    /// How long it took to settle; `None`: still moving at the deadline.
    pub after: Option<Duration>,
}

/// Reads a state every `every` until `moving` finds nothing still moving in
/// it, or `timeout` passes; either way the last state read (a verdict then
/// names what was still moving). Fails only when a read fails.
pub fn settle<T: Clone, E>(
    what: impl Into<String>,
    timeout: Duration,
    every: Duration,
    mut read: impl FnMut() -> Result<T, E>,
    moving: impl Fn(&T) -> Vec<String>,
) -> Result<Settled<T>, E> {
    let started = Instant::now();
    let mut last = None;
    let mut failed = None;
    let waited = until(what, timeout, every, || match read() {
        Err(e) => {
            failed = Some(e);
            Poll::Abort(String::new())
        }
        Ok(state) => {
            let still = moving(&state);
            last = Some(state.clone());
            match still.is_empty() {
                true => Poll::Ready(state),
                false => Poll::Pending(still.join(", ")),
            }
        }
    });
    match (waited, failed, last) {
        (Ok(state), _, _) => Ok(Settled {
            state,
            after: Some(started.elapsed()),
        }),
        (Err(_), Some(e), _) => Err(e),
        (Err(_), None, Some(state)) => Ok(Settled { state, after: None }),
        (Err(_), None, None) => unreachable!("a wait that was not aborted read a state"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_returns_the_settled_or_the_last_state() {
        let mut n = 0;
        let settled = settle(
            "n to reach 2",
            Duration::from_secs(1),
            Duration::ZERO,
            || -> Result<u32, String> {
                n += 1;
                Ok(n)
            },
            |n| match *n < 2 {
                true => vec![format!("n={n}")],
                false => vec![],
            },
        )
        .unwrap();
        assert_eq!(settled.state, 2);
        assert!(settled.after.is_some());
        let stuck = settle(
            "never",
            Duration::from_millis(5),
            Duration::from_millis(1),
            || -> Result<u32, String> { Ok(7) },
            |_| vec!["moving".into()],
        )
        .unwrap();
        assert_eq!(
            stuck,
            Settled {
                state: 7,
                after: None
            }
        );
        let failed = settle(
            "a read",
            Duration::from_secs(1),
            Duration::ZERO,
            || -> Result<u32, String> { Err("no scrape".into()) },
            |_| vec![],
        );
        assert_eq!(failed, Err("no scrape".to_string()));
    }

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
