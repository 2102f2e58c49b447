//! The machine's live kvcr-e2e runs: one registry directory shared by every
//! checkout and user of the machine, one owner file per run.
//!
//! Two live stacks on a small machine push its load far up, KVCR's watchdog
//! then latches peer serving off, and cases go red for reasons that are not
//! bugs. So a run registers here when it starts its stack (or attaches to
//! one), says which runs it starts beside, records them with the load
//! average, and with `--exclusive` waits until no other run is left.
//!
//! ```no_run
//! use kvcr_e2e::proc::live_runs::{Registry, RunInfo, RunKind};
//! # fn main() -> Result<(), kvcr_e2e::proc::live_runs::LiveRunError> {
//! let registry = Registry::open(std::path::Path::new("/tmp/kvcr-e2e-live"))?;
//! let me = RunInfo::new("phase1", "target/phase1/runs/phase1/x", RunKind::Provisions, false);
//! let run = registry.register(&me)?;
//! for n in &run.at_start.neighbours {
//!     println!("beside {}", n.run.describe());
//! }
//! run.end(); // also done by the reaper if this process dies
//! # Ok(()) }
//! ```
//!
//! - Every reading and every change happens under `flock` on the directory
//!   itself, so of two runs starting at once one registers first and the
//!   other sees it.
//! - An owner file `<pid>-<start time>-<n>.json` names the process (pid and
//!   start time), its target, run directory, start and whether it is
//!   exclusive; its owner holds a lock on it for as long as it lives.
//! - An entry is stale when nobody holds its lock, or (seen from its own PID
//!   namespace) its pid is gone or names a process with another start time.
//!   Stale entries are removed whenever the registry is read.
//! - The owner removes its file at teardown; the [reaper](super::reaper)
//!   removes it when the harness dies, even by SIGKILL.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::{procfs, reaper};
use crate::wait::{self, Poll};

/// The registry of the default profile (`live_runs_dir`).
pub const DEFAULT_DIR: &str = "/tmp/kvcr-e2e-live";

/// Set by `kvcr-e2e live-runs exclusive -- CMD` for CMD: the id of the
/// session's own entry. Runs started inside a session do not wait for it,
/// nor for each other.
pub const SESSION_ENV: &str = "KVCR_E2E_LIVE_SESSION";

/// How often an exclusive run looks at the registry again while it waits.
const EXCLUSIVE_POLL: Duration = Duration::from_millis(500);

/// Registrations made by this process (several in tests).
static SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// Why the registry could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LiveRunError {
    #[error("the live-run registry {dir}: {error}")]
    Io { dir: PathBuf, error: String },
    #[error("--exclusive: {0}")]
    Wait(String),
}

/// How a run uses its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// It starts (and stops) a stack of its own.
    Provisions,
    /// It attaches to a stack another process owns.
    Attaches,
    /// `kvcr-e2e live-runs exclusive -- CMD`: holds the machine for CMD.
    Session,
}

/// What a run says about itself when it registers.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The test target (`phase1`, `fault_matrix`, `stack-up`).
    pub target: String,
    /// The run directory.
    pub run_dir: PathBuf,
    pub kind: RunKind,
    /// Whether it waits for every other run, and warns those that come later.
    pub exclusive: bool,
    /// For an attached run: the pid of the stack's owner (from its
    /// `stack.json`), which is not a neighbour but the stack itself.
    pub host_pid: Option<u32>,
    /// The session this run is part of ([`SESSION_ENV`]).
    pub session: Option<String>,
}

impl RunInfo {
    /// A run of `target`; its session comes from [`SESSION_ENV`].
    pub fn new(
        target: impl Into<String>,
        run_dir: impl Into<PathBuf>,
        kind: RunKind,
        exclusive: bool,
    ) -> Self {
        RunInfo {
            target: target.into(),
            run_dir: run_dir.into(),
            kind,
            exclusive,
            host_pid: None,
            session: std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty()),
        }
    }

    /// Attached to the stack owned by `pid`.
    pub fn attached_to(mut self, pid: Option<u32>) -> Self {
        self.host_pid = pid;
        self
    }
}

/// One live run, as its owner file says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// `<pid>-<start time>-<n>`, the file's name.
    pub id: String,
    pub pid: u32,
    /// The process's start, clock ticks since boot (`/proc/<pid>/stat`).
    pub start_time: u64,
    /// The owner's PID namespace; its pid means something only there.
    pub pid_namespace: Option<String>,
    /// The owner's user id.
    pub uid: u32,
    pub target: String,
    pub run_dir: PathBuf,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub kind: RunKind,
    pub exclusive: bool,
    #[serde(default)]
    pub host_pid: Option<u32>,
    #[serde(default)]
    pub session: Option<String>,
}

impl Entry {
    /// `pid 4242 phase1 (exclusive, attaches) since 2026-12-01T10:53:57Z, run dir …`
    pub fn describe(&self) -> String {
        let mut how = vec![match self.kind {
            RunKind::Provisions => "own stack",
            RunKind::Attaches => "attached",
            RunKind::Session => "exclusive session",
        }];
        if self.exclusive && self.kind != RunKind::Session {
            how.push("exclusive");
        }
        format!(
            "pid {} {} ({}) since {}, run dir {}",
            self.pid,
            self.target,
            how.join(", "),
            self.started_at,
            self.run_dir.display()
        )
    }
}

/// `me` as seen by a registry whose live entries are `live`: a session
/// (from [`SESSION_ENV`]) counts only where its own entry is live. A test
/// with a registry of its own, run inside CI's exclusive session, is then
/// no part of that session, and its runs wait for each other as they would
/// anywhere else.
fn in_this_registry(me: &RunInfo, live: &[Entry]) -> RunInfo {
    let mut me = me.clone();
    if let Some(session) = &me.session {
        if !live.iter().any(|e| &e.id == session) {
            me.session = None;
        }
    }
    me
}

/// How another live run stands to this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// The owner of the stack this run attaches to.
    HostStack,
    /// The exclusive session this run is part of.
    Session,
    /// Another run of the same session.
    SameSession,
    /// A run beside this one: `--exclusive` waits for it.
    Other,
}

impl Relation {
    /// How `other` stands to the run `me` (in PID namespace `namespace`).
    pub fn of(me: &RunInfo, namespace: Option<&str>, other: &Entry) -> Relation {
        let session = me.session.as_deref();
        if session == Some(other.id.as_str()) {
            Relation::Session
        } else if session.is_some() && other.session.as_deref() == session {
            Relation::SameSession
        } else if me.host_pid == Some(other.pid) && other.pid_namespace.as_deref() == namespace {
            Relation::HostStack
        } else {
            Relation::Other
        }
    }

    /// Words for a start line (`beside another live run`).
    pub fn words(self) -> &'static str {
        match self {
            Relation::HostStack => "the stack this run attaches to",
            Relation::Session => "the exclusive session this run is part of",
            Relation::SameSession => "another run of the same exclusive session",
            Relation::Other => "another live run",
        }
    }
}

/// Another live run and how it stands to this one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Neighbour {
    #[serde(flatten)]
    pub run: Entry,
    pub relation: Relation,
}

/// What ran beside a run at one moment, and the machine's load then.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Surroundings {
    /// RFC 3339, UTC.
    pub at: String,
    /// 1, 5 and 15 minute load averages (`None` without `/proc/loadavg`).
    pub load_average: Option<[f64; 3]>,
    /// Every other live run.
    pub neighbours: Vec<Neighbour>,
}

impl Surroundings {
    /// `load 0.52 0.40 0.33`
    pub fn load_words(&self) -> String {
        match self.load_average {
            Some([a, b, c]) => format!("load {a:.2} {b:.2} {c:.2}"),
            None => "load unknown".into(),
        }
    }

    /// The neighbours an exclusive run would wait for.
    pub fn others(&self) -> impl Iterator<Item = &Neighbour> {
        self.neighbours
            .iter()
            .filter(|n| n.relation == Relation::Other)
    }
}

/// The registry directory.
#[derive(Debug, Clone)]
pub struct Registry {
    dir: PathBuf,
}

impl Registry {
    /// Opens (creating) the registry at `dir`. A directory this user
    /// creates is made writable by every user, sticky like `/tmp`: each
    /// removes only its own files.
    pub fn open(dir: &Path) -> Result<Self, LiveRunError> {
        let registry = Registry {
            dir: dir.to_path_buf(),
        };
        if !dir.is_dir() {
            fs::create_dir_all(dir).map_err(|e| registry.io(e))?;
            // Another user's directory keeps its mode: only its owner may change it.
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o1777));
        }
        Ok(registry)
    }

    /// Where it is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(&self, e: impl std::fmt::Display) -> LiveRunError {
        LiveRunError::Io {
            dir: self.dir.clone(),
            error: e.to_string(),
        }
    }

    /// The directory, locked until the guard drops.
    fn locked(&self) -> Result<Flock<File>, LiveRunError> {
        let dir = File::open(&self.dir).map_err(|e| self.io(e))?;
        Flock::lock(dir, FlockArg::LockExclusive).map_err(|(_, errno)| self.io(errno))
    }

    /// Every live run, oldest first (stale entries removed on the way).
    pub fn live(&self) -> Result<Vec<Entry>, LiveRunError> {
        let _locked = self.locked()?;
        Ok(self.scan())
    }

    /// Registers `me` now, beside whatever runs. The caller says so (one
    /// line per neighbour in [`Registration::at_start`]).
    pub fn register(&self, me: &RunInfo) -> Result<Registration, LiveRunError> {
        let _locked = self.locked()?;
        let live = self.scan();
        self.write_entry(&in_this_registry(me, &live), live, Duration::ZERO)
    }

    /// Waits until no [`Relation::Other`] run is live, then registers `me`
    /// in the same locked step: of two exclusive runs starting at once,
    /// exactly one goes first. `waiting` is called with the runs waited for
    /// at first and whenever they change. Gives up after `timeout`, naming
    /// them.
    pub fn register_exclusive(
        &self,
        me: &RunInfo,
        timeout: Duration,
        mut waiting: impl FnMut(&[Entry]),
    ) -> Result<Registration, LiveRunError> {
        let started = Instant::now();
        let namespace = procfs::pid_namespace();
        let mut last: Vec<String> = Vec::new();
        let what = format!(
            "every other live kvcr-e2e run in {} to end",
            self.dir.display()
        );
        wait::until(what, timeout, EXCLUSIVE_POLL, || {
            let locked = match self.locked() {
                Ok(locked) => locked,
                Err(e) => return Poll::Abort(e.to_string()),
            };
            let live = self.scan();
            let me = in_this_registry(me, &live);
            let blocking: Vec<Entry> = live
                .iter()
                .filter(|e| Relation::of(&me, namespace.as_deref(), e) == Relation::Other)
                .cloned()
                .collect();
            if blocking.is_empty() {
                return match self.write_entry(&me, live, started.elapsed()) {
                    Ok(registration) => Poll::Ready(registration),
                    Err(e) => Poll::Abort(e.to_string()),
                };
            }
            drop(locked);
            let ids: Vec<String> = blocking.iter().map(|e| e.id.clone()).collect();
            if ids != last {
                waiting(&blocking);
                last = ids;
            }
            Poll::Pending(
                blocking
                    .iter()
                    .map(Entry::describe)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })
        .map_err(|e| LiveRunError::Wait(e.to_string()))
    }

    /// Reads every owner file; removes the stale ones. Call it locked.
    fn scan(&self) -> Vec<Entry> {
        let Ok(files) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let namespace = procfs::pid_namespace();
        let mut live: Vec<Entry> = files
            .filter_map(|f| f.ok().map(|f| f.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter_map(|path| {
                let entry = fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Entry>(&t).ok());
                let stale = !lock_is_held(&path)
                    || entry
                        .as_ref()
                        .is_some_and(|e| pid_names_another_process(e, namespace.as_deref()));
                if stale {
                    // Another user's stale file stays (sticky directory);
                    // it is never listed.
                    let _ = fs::remove_file(&path);
                    return None;
                }
                entry
            })
            .collect();
        live.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
        live
    }

    /// Creates, locks and fills this run's owner file; `live` (read under
    /// the same lock) are its neighbours at start. Call it locked.
    fn write_entry(
        &self,
        me: &RunInfo,
        live: Vec<Entry>,
        waited: Duration,
    ) -> Result<Registration, LiveRunError> {
        let pid = std::process::id();
        let start_time = procfs::start_time(pid).unwrap_or(0);
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let id = format!("{pid}-{start_time}-{n}");
        let path = self.dir.join(format!("{id}.json"));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .map_err(|e| self.io(format!("cannot create {}: {e}", path.display())))?;
        let uid = file.metadata().map(|m| m.uid()).unwrap_or(u32::MAX);
        let mut lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| self.io(errno))?;
        reaper::track_path(&path);
        let namespace = procfs::pid_namespace();
        let entry = Entry {
            id,
            pid,
            start_time,
            pid_namespace: namespace.clone(),
            uid,
            target: me.target.clone(),
            run_dir: me.run_dir.clone(),
            started_at: crate::utc::UtcTime::now().rfc3339(),
            kind: me.kind,
            exclusive: me.exclusive,
            host_pid: me.host_pid,
            session: me.session.clone(),
        };
        let text = serde_json::to_string_pretty(&entry).map_err(|e| self.io(e))?;
        if let Err(e) = lock.write_all(text.as_bytes()) {
            let _ = fs::remove_file(&path);
            reaper::forget_path(&path);
            return Err(self.io(e));
        }
        let at_start = surroundings(me, namespace.as_deref(), &entry.id, live);
        Ok(Registration {
            registry: self.clone(),
            entry,
            info: me.clone(),
            path,
            lock: Some(lock),
            waited,
            at_start,
        })
    }
}

/// A registered run. Its owner file goes at [`Registration::end`] (or drop).
#[derive(Debug)]
pub struct Registration {
    registry: Registry,
    /// What the owner file says.
    pub entry: Entry,
    info: RunInfo,
    path: PathBuf,
    lock: Option<Flock<File>>,
    /// How long an exclusive run waited for the others.
    pub waited: Duration,
    /// The other live runs when this one registered.
    pub at_start: Surroundings,
}

impl Registration {
    /// The other live runs now, and the load.
    pub fn surroundings(&self) -> Surroundings {
        let live = match self.registry.locked() {
            Ok(_locked) => self.registry.scan(),
            Err(_) => Vec::new(),
        };
        surroundings(
            &self.info,
            procfs::pid_namespace().as_deref(),
            &self.entry.id,
            live,
        )
    }

    /// The owner file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the owner file (the run is over).
    pub fn end(mut self) {
        self.release();
    }

    fn release(&mut self) {
        if let Some(lock) = self.lock.take() {
            if fs::remove_file(&self.path).is_ok() || !self.path.exists() {
                reaper::forget_path(&self.path);
            }
            drop(lock);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.release();
    }
}

fn surroundings(
    me: &RunInfo,
    namespace: Option<&str>,
    own_id: &str,
    live: Vec<Entry>,
) -> Surroundings {
    Surroundings {
        at: crate::utc::UtcTime::now().rfc3339(),
        load_average: procfs::load_average(),
        neighbours: live
            .into_iter()
            .filter(|e| e.id != own_id)
            .map(|run| Neighbour {
                relation: Relation::of(me, namespace, &run),
                run,
            })
            .collect(),
    }
}

/// Whether some process holds the lock on the owner file at `path`. A file
/// that cannot be opened is not ours to judge: held.
fn lock_is_held(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return true;
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(_free) => false,
        Err((_, Errno::EWOULDBLOCK)) => true,
        Err(_) => true,
    }
}

/// Seen from the entry's own PID namespace, its pid is gone or names a
/// process that started at another time (the pid was reused). From another
/// namespace the pid means nothing: only the lock says.
fn pid_names_another_process(entry: &Entry, namespace: Option<&str>) -> bool {
    if entry.pid_namespace.is_none() || entry.pid_namespace.as_deref() != namespace {
        return false;
    }
    procfs::start_time(entry.pid) != Some(entry.start_time)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(target: &str, exclusive: bool) -> RunInfo {
        RunInfo {
            target: target.into(),
            run_dir: PathBuf::from(format!("runs/{target}")),
            kind: RunKind::Provisions,
            exclusive,
            host_pid: None,
            session: None,
        }
    }

    /// An owner file written by hand: no process holds its lock.
    fn planted(dir: &Path, id: &str, pid: u32, start_time: u64) -> PathBuf {
        let entry = Entry {
            id: id.into(),
            pid,
            start_time,
            pid_namespace: procfs::pid_namespace(),
            uid: 0,
            target: "phase1".into(),
            run_dir: "runs/old".into(),
            started_at: "2026-12-01T00:00:00Z".into(),
            kind: RunKind::Provisions,
            exclusive: false,
            host_pid: None,
            session: None,
        };
        let path = dir.join(format!("{id}.json"));
        fs::write(&path, serde_json::to_string(&entry).unwrap()).unwrap();
        path
    }

    #[test]
    fn two_registrations_see_each_other_and_leave_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::open(&tmp.path().join("live")).unwrap();
        let first = registry.register(&info("phase1", false)).unwrap();
        assert!(first.at_start.neighbours.is_empty());
        assert!(first.at_start.load_average.is_some());
        let second = registry.register(&info("fault_matrix", false)).unwrap();
        assert_eq!(second.at_start.neighbours.len(), 1);
        let n = &second.at_start.neighbours[0];
        assert_eq!(
            (n.run.id.as_str(), n.relation),
            (first.entry.id.as_str(), Relation::Other)
        );
        assert_eq!(n.run.pid, std::process::id());
        assert_eq!(
            n.run.start_time,
            procfs::start_time(std::process::id()).unwrap()
        );
        assert!(n.run.describe().starts_with(&format!(
            "pid {} phase1 (own stack) since ",
            std::process::id()
        )));
        assert_eq!(registry.live().unwrap().len(), 2);
        // The first sees the second at its end.
        let at_end = first.surroundings();
        assert_eq!(at_end.neighbours.len(), 1);
        assert_eq!(at_end.neighbours[0].run.target, "fault_matrix");
        first.end();
        drop(second);
        assert!(registry.live().unwrap().is_empty());
        assert_eq!(
            fs::read_dir(registry.dir()).unwrap().count(),
            0,
            "no file left"
        );
    }

    #[test]
    fn stale_entries_are_removed_and_never_listed() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::open(tmp.path()).unwrap();
        // A dead owner: its pid is gone and nobody holds the lock.
        let dead = planted(tmp.path(), "4000000-1-0", 4_000_000, 1);
        // A reused pid: this process's pid with another start time, even
        // with its lock held (by this test).
        let own = std::process::id();
        let reused = planted(
            tmp.path(),
            "reused",
            own,
            procfs::start_time(own).unwrap() + 1,
        );
        let held = Flock::lock(
            File::open(&reused).unwrap(),
            FlockArg::LockExclusiveNonblock,
        )
        .unwrap();
        // Garbage nobody holds.
        fs::write(tmp.path().join("garbage.json"), "{").unwrap();
        let live = registry.register(&info("phase1", false)).unwrap();
        assert!(live.at_start.neighbours.is_empty(), "{:?}", live.at_start);
        assert!(!dead.exists() && !reused.exists());
        assert!(!tmp.path().join("garbage.json").exists());
        drop(held);
        // A live owner in another PID namespace: the pid means nothing here,
        // its lock keeps it.
        let foreign = planted(tmp.path(), "foreign", 4_000_001, 7);
        let mut e: Entry = serde_json::from_str(&fs::read_to_string(&foreign).unwrap()).unwrap();
        e.pid_namespace = Some("pid:[1]".into());
        fs::write(&foreign, serde_json::to_string(&e).unwrap()).unwrap();
        let held = Flock::lock(
            File::open(&foreign).unwrap(),
            FlockArg::LockExclusiveNonblock,
        )
        .unwrap();
        let listed = registry.live().unwrap();
        assert_eq!(listed.len(), 2, "{listed:?}");
        drop(held);
        assert_eq!(registry.live().unwrap().len(), 1);
    }

    #[test]
    fn an_exclusive_run_waits_names_whom_and_gives_up_at_its_deadline() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::open(tmp.path()).unwrap();
        let other = registry.register(&info("phase1", false)).unwrap();
        let mut told = Vec::new();
        let err = registry
            .register_exclusive(&info("ci", true), Duration::from_millis(300), |w| {
                told.push(w.iter().map(|e| e.id.clone()).collect::<Vec<_>>())
            })
            .unwrap_err()
            .to_string();
        assert_eq!(told, vec![vec![other.entry.id.clone()]], "told once");
        assert!(
            err.starts_with("--exclusive: timed out after")
                && err.contains(&format!("pid {} phase1", std::process::id())),
            "{err}"
        );
        assert_eq!(
            registry.live().unwrap().len(),
            1,
            "the waiter never registered"
        );
        // Once the other run ends, the exclusive one goes.
        let ends = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            other.end();
        });
        let exclusive = registry
            .register_exclusive(&info("ci", true), Duration::from_secs(20), |_| {})
            .unwrap();
        ends.join().unwrap();
        assert!(
            exclusive.waited >= Duration::from_millis(100),
            "{:?}",
            exclusive.waited
        );
        assert!(exclusive.at_start.neighbours.is_empty());
        // A later run, exclusive or not, sees it as exclusive.
        let late = registry.register(&info("phase1", false)).unwrap();
        assert!(late.at_start.others().any(|n| n.run.exclusive));
    }

    #[test]
    fn two_exclusive_runs_starting_at_once_go_one_after_the_other() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::open(tmp.path()).unwrap();
        let overlaps = std::sync::Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let registry = registry.clone();
                let overlaps = overlaps.clone();
                std::thread::spawn(move || {
                    let run = registry
                        .register_exclusive(
                            &info(&format!("run{i}"), true),
                            Duration::from_secs(20),
                            |_| {},
                        )
                        .unwrap();
                    if !run.at_start.neighbours.is_empty() || registry.live().unwrap().len() != 1 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    std::thread::sleep(Duration::from_millis(300));
                    run.end();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        assert!(registry.live().unwrap().is_empty());
    }

    #[test]
    fn a_session_and_the_attached_stack_are_not_waited_for() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::open(tmp.path()).unwrap();
        let session = registry
            .register(&RunInfo {
                kind: RunKind::Session,
                ..info("session", true)
            })
            .unwrap();
        let inside = |target: &str| RunInfo {
            session: Some(session.entry.id.clone()),
            ..info(target, true)
        };
        let owner = registry.register(&inside("stack-up")).unwrap();
        // The attached run is in the session and attaches to `owner`.
        let attached = inside("phase1").attached_to(Some(std::process::id()));
        let run = registry
            .register_exclusive(&attached, Duration::from_millis(200), |_| {})
            .unwrap();
        let mut relations: Vec<Relation> =
            run.at_start.neighbours.iter().map(|n| n.relation).collect();
        relations.sort_by_key(|r| *r as u8);
        assert_eq!(relations, vec![Relation::Session, Relation::SameSession]);
        // Outside the session, the same run waits for all of them.
        let outside = info("phase1", true).attached_to(Some(std::process::id()));
        let ns = procfs::pid_namespace();
        assert_eq!(
            Relation::of(&outside, ns.as_deref(), &owner.entry),
            Relation::HostStack
        );
        assert_eq!(
            Relation::of(&outside, ns.as_deref(), &session.entry),
            Relation::HostStack,
            "same pid here"
        );
        assert_eq!(
            Relation::of(&info("x", true), ns.as_deref(), &session.entry),
            Relation::Other
        );
    }

    #[test]
    fn a_session_counts_only_in_the_registry_that_holds_it() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::open(tmp.path()).unwrap();
        // Two runs of a session whose entry lives in another registry (a
        // test's own registry, run inside CI's exclusive session).
        let elsewhere = |target: &str, exclusive: bool| RunInfo {
            session: Some("1-2-3".into()),
            ..info(target, exclusive)
        };
        let first = registry.register(&elsewhere("phase1", false)).unwrap();
        assert_eq!(first.entry.session, None, "no such session here");
        let err = registry
            .register_exclusive(&elsewhere("ci", true), Duration::from_millis(200), |_| {})
            .expect_err("the exclusive run waits for the first, then gives up");
        assert!(err.to_string().contains("phase1"), "{err}");
    }
}
