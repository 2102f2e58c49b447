//! A Guard service started where a crashed one left its socket file and its
//! pool files, beside a live Guard sharing its pool directory (TC-16): the
//! new service removes the dead socket and starts serving on its path,
//! reclaims the crashed Guard's pool files, and leaves the live Guard's pool
//! alone. KVCR decides use by the pool's lock, never by its name: an
//! orphan is a pool file whose exclusive lock can be taken.

use serde::Serialize;

use super::hostile_start::StartAttempt;
use super::{Checks, Violation};

/// Claim: a stale socket is removed and the service serves on its path.
pub const STALE_SOCKET_REPLACED: &str =
    "a Guard started over a crashed one's socket removes it and serves on its path";
/// Claim: the crashed Guard's pool files are reclaimed.
pub const ORPHANS_RECLAIMED: &str = "a Guard started over a crashed one reclaims its pool files";
/// Claim: a pool file a live Guard holds is left in place.
pub const LIVE_POOL_KEPT: &str = "a Guard's start leaves a pool file a live Guard holds";

/// KVCR's own lines (`kvcr_service._unlink_stale_socket`,
/// `_PoolRegistry._purge_orphaned_pools`), each followed by the path.
pub const REMOVING_STALE_SOCKET: &str = "Removing stale KVCR service socket: ";
pub const RECLAIMED_ORPHAN: &str = "Reclaimed orphaned KVCR pool from a dead instance: ";
pub const LEAVING_IN_USE: &str = "Leaving KVCR pool still in use: ";

/// What a crashed and a live Guard left for the new one, and what KVCR
/// said about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Leftovers {
    /// The socket file the SIGKILLed Guard left, the new one's path.
    pub stale_socket: String,
    /// The pool files the SIGKILLed Guard left.
    pub orphaned_pools: Vec<String>,
    /// The pool files of the Guard still running on the same directory.
    pub live_pools: Vec<String>,
    /// A connection to the socket path was accepted while the new Guard was
    /// ready.
    pub socket_accepted: bool,
    /// The new Guard's log lines about stale sockets and pools.
    pub kvcr_lines: Vec<String>,
}

impl Leftovers {
    /// KVCR logged `phrase` followed by exactly `path`.
    fn said(&self, phrase: &str, path: &str) -> bool {
        self.kvcr_lines.iter().any(|l| {
            l.split_once(phrase)
                .is_some_and(|(_, rest)| rest == path || rest.starts_with(&format!("{path} ")))
        })
    }

    /// The lines worth quoting: KVCR's own about stale sockets and pools.
    pub fn is_kvcr_line(line: &str) -> bool {
        [REMOVING_STALE_SOCKET, RECLAIMED_ORPHAN, LEAVING_IN_USE]
            .iter()
            .any(|p| line.contains(p))
    }

    fn quoted(&self) -> String {
        if self.kvcr_lines.is_empty() {
            "it logged nothing about them".to_string()
        } else {
            format!("it logged `{}`", self.kvcr_lines.join("` `"))
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn seen_while_ready(a: &StartAttempt, path: &str) -> bool {
    a.pool_files.iter().any(|f| f.name == file_name(path))
}

fn leftovers<'a>(a: &'a StartAttempt, claim: &'static str) -> Result<&'a Leftovers, Violation> {
    a.leftovers.as_ref().ok_or_else(|| Violation {
        claim,
        detail: format!("{}: no leftovers were recorded", a.attempt),
    })
}

/// The new Guard logged that it removed the stale socket, became ready, a
/// connection to its path was accepted, and SIGTERM stopped it with exit 0.
pub fn expect_stale_socket_replaced(a: &StartAttempt) -> Result<(), Violation> {
    let l = leftovers(a, STALE_SOCKET_REPLACED)?;
    let mut c = Checks::new(STALE_SOCKET_REPLACED);
    let log = a.log.display();
    c.check(l.said(REMOVING_STALE_SOCKET, &l.stale_socket), || {
        format!(
            "the Guard never logged `{REMOVING_STALE_SOCKET}{}` ({}); log {log}",
            l.stale_socket,
            l.quoted()
        )
    })
    .check(a.ready, || {
        format!(
            "the Guard never logged its ready line over the stale socket {} (exit {:?}, `{}`); log {log}",
            l.stale_socket,
            a.exit_code,
            a.exceptions.join(" <- ")
        )
    });
    if a.ready {
        c.check(l.socket_accepted, || {
            format!(
                "the Guard was ready but a connection to {} was not accepted",
                l.stale_socket
            )
        })
        .check(a.exit_code == Some(0), || {
            format!(
                "the Guard did not exit 0 when stopped with SIGTERM (exit {:?}); log {log}",
                a.exit_code
            )
        });
    }
    c.verdict()
}

/// Every pool file the crashed Guard left was reclaimed: KVCR logged it,
/// and it was gone while the new Guard ran.
pub fn expect_orphans_reclaimed(a: &StartAttempt) -> Result<(), Violation> {
    let l = leftovers(a, ORPHANS_RECLAIMED)?;
    let mut c = Checks::new(ORPHANS_RECLAIMED);
    c.check(!l.orphaned_pools.is_empty(), || {
        "the crashed Guard left no pool file to reclaim".to_string()
    });
    for orphan in &l.orphaned_pools {
        c.check(l.said(RECLAIMED_ORPHAN, orphan), || {
            format!(
                "the crashed Guard's pool file {orphan} was not reclaimed ({}); log {}",
                l.quoted(),
                a.log.display()
            )
        })
        .check(!seen_while_ready(a, orphan), || {
            format!(
                "the crashed Guard's pool file {orphan} was still there while the new Guard ran"
            )
        });
    }
    c.verdict()
}

/// Every pool file of the live Guard was left: KVCR said so, never that it
/// reclaimed it, and it was there while the new Guard ran.
pub fn expect_live_pool_kept(a: &StartAttempt) -> Result<(), Violation> {
    let l = leftovers(a, LIVE_POOL_KEPT)?;
    let mut c = Checks::new(LIVE_POOL_KEPT);
    c.check(!l.live_pools.is_empty(), || {
        "the live Guard had no pool file to keep".to_string()
    });
    for live in &l.live_pools {
        c.check(!l.said(RECLAIMED_ORPHAN, live), || {
            format!(
                "the live Guard's pool file {live} was reclaimed as an orphan ({}); log {}",
                l.quoted(),
                a.log.display()
            )
        })
        .check(l.said(LEAVING_IN_USE, live), || {
            format!(
                "the Guard never logged `{LEAVING_IN_USE}{live}` ({})",
                l.quoted()
            )
        });
        if a.ready {
            c.check(seen_while_ready(a, live), || {
                format!("the live Guard's pool file {live} was gone while the new Guard ran")
            });
        }
    }
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::hostile_start::PoolFileSpace;

    const P: &str = "/dev/shm/hostile/over_a_crashed_guard/pools";
    const SOCK: &str = "/dev/shm/hostile/over_a_crashed_guard/sock/g.sock";

    fn pool(name: &str) -> PoolFileSpace {
        PoolFileSpace {
            name: name.into(),
            size_bytes: 158_543_872,
            allocated_bytes: 158_543_872,
        }
    }

    fn clean() -> StartAttempt {
        let orphan = format!("{P}/kvcr-pool_0-{}", "a".repeat(32));
        let live = format!("{P}/kvcr-pool_0-{}", "b".repeat(32));
        StartAttempt {
            attempt: "over_a_crashed_guard".into(),
            component: "guard".into(),
            cause: "a crashed Guard's socket and pool files".into(),
            cause_words: vec![],
            exit_code: Some(0),
            ready: true,
            hung: false,
            elapsed_ms: 1500,
            deadline_ms: 60_000,
            exceptions: vec![],
            left_files: vec![],
            listed: true,
            left_processes: vec![],
            pool_files: vec![
                pool(&format!("kvcr-pool_0-{}", "b".repeat(32))),
                pool(&format!("kvcr-pool_0-{}", "c".repeat(32))),
            ],
            leftovers: Some(Leftovers {
                stale_socket: SOCK.into(),
                orphaned_pools: vec![orphan.clone()],
                live_pools: vec![live.clone()],
                socket_accepted: true,
                kvcr_lines: vec![
                    format!("WARNING:kvcr.kvcr_service:{REMOVING_STALE_SOCKET}{SOCK}"),
                    format!(
                        "WARNING:kvcr.kvcr_service:{RECLAIMED_ORPHAN}{orphan} (158543872 bytes)"
                    ),
                    format!("INFO:kvcr.kvcr_service:{LEAVING_IN_USE}{live}"),
                ],
            }),
            log: "logs/hostile-over_a_crashed_guard.log".into(),
        }
    }

    fn with_lines(lines: &[usize]) -> StartAttempt {
        let mut a = clean();
        let l = a.leftovers.as_mut().unwrap();
        l.kvcr_lines = lines.iter().map(|&i| l.kvcr_lines[i].clone()).collect();
        a
    }

    #[test]
    fn a_clean_restart_over_leftovers_passes() {
        let a = clean();
        assert_eq!(expect_stale_socket_replaced(&a), Ok(()));
        assert_eq!(expect_orphans_reclaimed(&a), Ok(()));
        assert_eq!(expect_live_pool_kept(&a), Ok(()));
    }

    /// The stale socket never removed: the bind fails, the Guard is never
    /// ready.
    #[test]
    fn a_guard_that_never_removes_the_stale_socket_fails() {
        let a = StartAttempt {
            ready: false,
            exit_code: Some(1),
            exceptions: vec!["OSError: [Errno 98] Address already in use".into()],
            pool_files: vec![],
            ..with_lines(&[1, 2])
        };
        let v = expect_stale_socket_replaced(&a).unwrap_err();
        assert_eq!(v.claim, STALE_SOCKET_REPLACED);
        assert!(
            v.detail
                .contains(&format!("never logged `{REMOVING_STALE_SOCKET}{SOCK}`")),
            "{v}"
        );
        assert!(v.detail.contains("never logged its ready line"), "{v}");
        assert!(v.detail.contains("Address already in use"), "{v}");
        // The other claims still hold where they can be judged.
        assert_eq!(expect_orphans_reclaimed(&a), Ok(()));
        assert_eq!(expect_live_pool_kept(&a), Ok(()));
    }

    #[test]
    fn a_ready_guard_not_accepting_or_not_stopping_cleanly_fails() {
        let mut a = clean();
        a.leftovers.as_mut().unwrap().socket_accepted = false;
        a.exit_code = Some(1);
        let v = expect_stale_socket_replaced(&a).unwrap_err();
        assert!(v.detail.contains("was not accepted"), "{v}");
        assert!(v.detail.contains("did not exit 0"), "{v}");
    }

    /// A purge that takes every pool for one in use.
    #[test]
    fn an_orphan_left_in_place_fails() {
        let orphan = clean().leftovers.unwrap().orphaned_pools[0].clone();
        let mut a = with_lines(&[0, 2]);
        let l = a.leftovers.as_mut().unwrap();
        l.kvcr_lines
            .push(format!("INFO:kvcr.kvcr_service:{LEAVING_IN_USE}{orphan}"));
        a.pool_files.push(pool(file_name(&orphan)));
        let v = expect_orphans_reclaimed(&a).unwrap_err();
        assert_eq!(v.claim, ORPHANS_RECLAIMED);
        assert!(
            v.detail
                .contains(&format!("pool file {orphan} was not reclaimed")),
            "{v}"
        );
        assert!(v.detail.contains(LEAVING_IN_USE), "{v}");
        assert!(
            v.detail.contains("still there while the new Guard ran"),
            "{v}"
        );
        let none = StartAttempt {
            leftovers: Some(Leftovers {
                orphaned_pools: vec![],
                ..clean().leftovers.unwrap()
            }),
            ..clean()
        };
        assert!(expect_orphans_reclaimed(&none)
            .unwrap_err()
            .detail
            .contains("left no pool file"));
    }

    /// A purge that ignores the pool's lock.
    #[test]
    fn a_live_pool_reclaimed_fails() {
        let live = clean().leftovers.unwrap().live_pools[0].clone();
        let mut a = with_lines(&[0, 1]);
        a.leftovers.as_mut().unwrap().kvcr_lines.push(format!(
            "WARNING:kvcr.kvcr_service:{RECLAIMED_ORPHAN}{live} (158543872 bytes)"
        ));
        a.pool_files.retain(|f| f.name != file_name(&live));
        let v = expect_live_pool_kept(&a).unwrap_err();
        assert_eq!(v.claim, LIVE_POOL_KEPT);
        assert!(
            v.detail
                .contains(&format!("pool file {live} was reclaimed as an orphan")),
            "{v}"
        );
        assert!(
            v.detail
                .contains("never logged `Leaving KVCR pool still in use"),
            "{v}"
        );
        assert!(v.detail.contains("was gone while the new Guard ran"), "{v}");
        assert_eq!(expect_orphans_reclaimed(&a), Ok(()));
    }

    #[test]
    fn a_path_is_matched_whole() {
        let l = Leftovers {
            kvcr_lines: vec![format!("{RECLAIMED_ORPHAN}/p/kvcr-pool_0-ab (5 bytes)")],
            ..Leftovers::default()
        };
        assert!(l.said(RECLAIMED_ORPHAN, "/p/kvcr-pool_0-ab"));
        assert!(!l.said(RECLAIMED_ORPHAN, "/p/kvcr-pool_0-a"));
        assert!(!l.said(LEAVING_IN_USE, "/p/kvcr-pool_0-ab"));
        assert!(Leftovers::is_kvcr_line(
            "INFO:x:Leaving KVCR pool still in use: /p"
        ));
        assert!(!Leftovers::is_kvcr_line(
            "INFO:x:KVCR service ready: socket=/s"
        ));
    }

    #[test]
    fn an_attempt_without_leftovers_fails() {
        let a = StartAttempt {
            leftovers: None,
            ..clean()
        };
        assert!(expect_stale_socket_replaced(&a).is_err());
        assert!(expect_orphans_reclaimed(&a).is_err());
        assert!(expect_live_pool_kept(&a).is_err());
    }
}
