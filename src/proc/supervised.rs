use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use serde::Serialize;

use super::{procfs, reaper, spawner};

/// Set for a component that must outlive the process that starts it
/// (docs/cpu-engine.md: the CPU engine then does not tie itself to it).
pub const OUTLIVE_PARENT_ENV: &str = "KVCR_E2E_OUTLIVE_PARENT";

/// How to start one component.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessSpec {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Added to (or overriding) the harness's environment.
    pub env: Vec<(String, String)>,
    /// Removed from the harness's environment.
    pub env_remove: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// stdout and stderr both go here.
    pub log: PathBuf,
    /// Started for a stack this process only attached to: no parent-death
    /// signal and no reaper, because the stack's owner stops it.
    pub outlive_harness: bool,
    /// A clean stop's SIGTERM goes to the process alone, not its group: it
    /// stops its own children, as it is stopped in a container (vLLM's
    /// process manager stops its EngineCore, which stops its workers; a
    /// worker SIGTERMed beside it dies "unexpectedly" and fails the engine
    /// mid-shutdown). SIGKILL still goes to the group.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub term_leader_only: bool,
}

impl ProcessSpec {
    pub fn new(
        name: impl Into<String>,
        program: impl Into<PathBuf>,
        log: impl Into<PathBuf>,
    ) -> Self {
        Self {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            env_remove: Vec::new(),
            cwd: None,
            log: log.into(),
            outlive_harness: false,
            term_leader_only: false,
        }
    }

    /// A clean stop SIGTERMs this process alone; it stops its children
    /// ([`ProcessSpec::term_leader_only`]).
    pub fn stopped_through_its_leader(mut self) -> Self {
        self.term_leader_only = true;
        self
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn env_remove(mut self, key: impl Into<String>) -> Self {
        self.env_remove.push(key.into());
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// The value following `flag` in the arguments.
    pub fn flag_value(&self, flag: &str) -> Option<&str> {
        self.args
            .iter()
            .position(|a| a == flag)
            .and_then(|i| self.args.get(i + 1))
            .map(String::as_str)
    }

    /// The value `key` is set to in the environment (the last setting wins,
    /// as it does for the process).
    pub fn env_var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The command line as one shell-like string, for messages and evidence.
    pub fn command_line(&self) -> String {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("cannot open log file {path}: {source}")]
    Log { path: PathBuf, source: io::Error },
    #[error("cannot start {name} (`{command}`): {source}")]
    Spawn {
        name: String,
        command: String,
        source: io::Error,
    },
    #[error("cannot start {name}: the run is ending (it was interrupted by a signal)")]
    Ending { name: String },
    #[error("cannot signal {name}: it is seen only through {address} (another PID namespace, container or host); the stack description must name a hook for this")]
    Remote { name: String, address: String },
    #[error("cannot signal {name} (pid {pid}): {source}")]
    Signal {
        name: String,
        pid: u32,
        source: nix::Error,
    },
}

/// How a stop went, for evidence.
#[derive(Debug, Clone, Serialize)]
pub struct StopReport {
    pub name: String,
    pub pid: u32,
    pub already_exited: bool,
    pub needed_sigkill: bool,
    pub exit: Option<String>,
    pub stop_ms: u128,
}

/// A running (or exited) child in its own process group.
#[derive(Debug)]
pub struct Supervised {
    name: String,
    pid: u32,
    log: PathBuf,
    /// The log's length when the process was spawned: a replacement appends
    /// to the log of the process it replaces (same name), so what this one
    /// wrote starts here (0 for a process the harness did not start).
    log_start: u64,
    /// `None` for a process this harness attached to but did not start.
    child: Option<Mutex<Child>>,
    status: Mutex<Option<ExitStatus>>,
    /// Tracked by the reaper (killed if the harness dies).
    reaped: bool,
    /// Files in `/dev/shm` the process group was seen holding; removed once
    /// the group is gone (a SIGKILLed engine leaves them behind).
    shm: Mutex<Vec<PathBuf>>,
    /// For a process seen only through the network (its pid means nothing
    /// here): the `host:port` it listens on while it runs.
    remote: Option<String>,
    /// Set once this harness sent the process a signal that ends it
    /// (SIGKILL, SIGTERM), so an exit after it is not a crash.
    ended_by_harness: AtomicBool,
    /// [`ProcessSpec::term_leader_only`].
    term_leader_only: bool,
}

impl Supervised {
    /// Starts `spec` in a new process group with a parent-death signal, and
    /// registers the group with the reaper.
    pub fn spawn(spec: &ProcessSpec) -> Result<Self, ProcError> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .map_err(|source| ProcError::Log {
                path: spec.log.clone(),
                source,
            })?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let log_err = log.try_clone().map_err(|source| ProcError::Log {
            path: spec.log.clone(),
            source,
        })?;
        let mut command = Command::new(&spec.program);
        for key in &spec.env_remove {
            command.env_remove(key);
        }
        command
            .args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, with_inherited(k, v))))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        if let Some(dir) = &spec.cwd {
            command.current_dir(dir);
        }
        if spec.outlive_harness {
            // Components that set their own parent-death signal skip it.
            command.env(OUTLIVE_PARENT_ENV, "1");
        }
        // The harness blocks SIGINT and SIGTERM in every thread
        // (`suite::signals`) and a child inherits that mask through fork and
        // exec: a component would never see the SIGTERM of `stop` and every
        // stop would wait out its grace before SIGKILL. The child gets the
        // default mask back.
        // SAFETY: the closure runs between fork and exec and only calls
        // sigprocmask(2), async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGINT);
                libc::sigaddset(&mut set, libc::SIGTERM);
                if libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // SAFETY: the closure runs between fork and exec and only calls
        // prctl(2) and getppid(2), both async-signal-safe.
        if !spec.outlive_harness {
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    // The harness may have died between fork and prctl.
                    if libc::getppid() == 1 {
                        return Err(io::Error::other("the harness exited during spawn"));
                    }
                    Ok(())
                });
            }
        }
        let reaped = !spec.outlive_harness;
        let permit = if reaped {
            Some(reaper::permit_spawn().ok_or_else(|| ProcError::Ending {
                name: spec.name.clone(),
            })?)
        } else {
            None
        };
        let child = spawner::spawn(command).map_err(|source| ProcError::Spawn {
            name: spec.name.clone(),
            command: spec.command_line(),
            source,
        })?;
        let pid = child.id();
        if let Some(permit) = permit {
            permit.track_group(pid);
        }
        tracing::debug!(name = %spec.name, pid, "started `{}`", spec.command_line());
        Ok(Self {
            name: spec.name.clone(),
            pid,
            log: spec.log.clone(),
            log_start,
            child: Some(Mutex::new(child)),
            status: Mutex::new(None),
            reaped,
            shm: Mutex::new(Vec::new()),
            remote: None,
            ended_by_harness: AtomicBool::new(false),
            term_leader_only: spec.term_leader_only,
        })
    }

    /// A handle on a process another harness started (attach mode). It can
    /// be signalled and watched through `/proc`; its exit status is unknown.
    pub fn attach(name: impl Into<String>, pid: u32, log: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            pid,
            log: log.into(),
            log_start: 0,
            child: None,
            status: Mutex::new(None),
            reaped: false,
            shm: Mutex::new(Vec::new()),
            remote: None,
            ended_by_harness: AtomicBool::new(false),
            term_leader_only: false,
        }
    }

    /// A process this harness can only reach over the network (it runs in
    /// another PID namespace, container or host, or a hook started it): it
    /// runs while `address` (`host:port`) accepts connections. It has no
    /// pid here (0), cannot be signalled, and its log is the owner's.
    pub fn remote(
        name: impl Into<String>,
        address: impl Into<String>,
        log: impl Into<PathBuf>,
    ) -> Self {
        Self {
            remote: Some(address.into()),
            ..Self::attach(name, 0, log)
        }
    }

    /// Seen only through the network ([`Supervised::remote`]).
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The exit status once the child has exited (reaping it), else `None`.
    /// For an attached process that is gone, a placeholder status 0.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        let mut status = self.status.lock().ok()?;
        if status.is_none() {
            *status = match &self.child {
                Some(child) => child.lock().ok()?.try_wait().ok().flatten(),
                // No address: liveness unknown, taken as running.
                None if self
                    .remote
                    .as_deref()
                    .is_some_and(|a| a.is_empty() || accepts(a)) =>
                {
                    None
                }
                None if self.remote.is_none() && procfs::is_alive(self.pid) => None,
                None => Some(std::os::unix::process::ExitStatusExt::from_raw(0)),
            };
        }
        *status
    }

    pub fn is_running(&self) -> bool {
        self.exit_status().is_none()
    }

    /// The exit status of a process this harness started and did not end
    /// itself: it crashed or exited on its own. `None` while it runs, after
    /// the harness killed or stopped it, and for a process it only attached
    /// to (whose exit it cannot tell from a kill delivered by a hook).
    pub fn exited_on_its_own(&self) -> Option<ExitStatus> {
        if self.child.is_none() || self.ended_by_harness.load(Ordering::SeqCst) {
            return None;
        }
        self.exit_status()
    }

    fn note_ending(&self, signal: Signal) {
        if matches!(signal, Signal::SIGKILL | Signal::SIGTERM | Signal::SIGINT) {
            self.ended_by_harness.store(true, Ordering::SeqCst);
        }
    }

    /// Sends `signal` to the child process only (not its group).
    pub fn signal(&self, signal: Signal) -> Result<(), ProcError> {
        if self.is_remote() {
            return Err(self.unreachable());
        }
        if self.exit_status().is_some() {
            return Ok(());
        }
        self.note_ending(signal);
        signal::kill(Pid::from_raw(self.pid as i32), signal).map_err(|source| ProcError::Signal {
            name: self.name.clone(),
            pid: self.pid,
            source,
        })
    }

    /// Sends `signal` (a stop or a continue) to every process of the group:
    /// an engine whose KV cache runs in a child process (vLLM's EngineCore)
    /// is stopped whole.
    pub fn signal_whole_group(&self, signal: Signal) -> Result<(), ProcError> {
        if self.is_remote() {
            return Err(self.unreachable());
        }
        if self.exit_status().is_some() {
            return Ok(());
        }
        self.note_ending(signal);
        signal::killpg(Pid::from_raw(self.pid as i32), signal).map_err(|source| ProcError::Signal {
            name: self.name.clone(),
            pid: self.pid,
            source,
        })
    }

    /// Sets the nice value of every thread of every process in the group
    /// (`setpriority(PRIO_PGRP)`); processes the group starts later inherit
    /// it. Raising it needs no privilege.
    pub fn lower_group_priority(&self, nice: i32) -> io::Result<()> {
        if self.child.is_none() || self.is_remote() {
            return Err(io::Error::other("not a process this harness started"));
        }
        // SAFETY: setpriority(2) takes plain integers.
        let rc = unsafe { libc::setpriority(libc::PRIO_PGRP, self.pid as libc::id_t, nice) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// SIGKILLs every process of the group at once: an engine crash. (An
    /// engine such as vLLM runs its KV cache and KVCR tier in a child
    /// process; killing only the parent would leave the Guard lease held.)
    pub fn kill_group(&self) -> Result<(), ProcError> {
        if self.is_remote() {
            return Err(self.unreachable());
        }
        self.note_ending(Signal::SIGKILL);
        match signal::killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
            Err(source) => Err(ProcError::Signal {
                name: self.name.clone(),
                pid: self.pid,
                source,
            }),
        }
    }

    fn unreachable(&self) -> ProcError {
        ProcError::Remote {
            name: self.name.clone(),
            address: self.remote.clone().unwrap_or_default(),
        }
    }

    /// Sends SIGTERM to the whole group, without waiting (a later
    /// [`Supervised::stop`] waits and escalates).
    pub fn signal_term(&self) {
        self.signal_group(Signal::SIGTERM);
    }

    fn signal_group(&self, signal: Signal) {
        if self.is_remote() {
            return;
        }
        self.note_ending(signal);
        // ESRCH (group already empty) is the expected end state.
        let _ = signal::killpg(Pid::from_raw(self.pid as i32), signal);
    }

    /// Waits up to `timeout` for the child to exit.
    pub fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls until no member of the group is alive, or `deadline`.
    fn wait_group_gone(&self, deadline: Instant) {
        while !procfs::group_members(self.pid).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the whole group: SIGTERM, up to `grace` to exit, then SIGKILL.
    pub fn stop(&self, grace: Duration) -> StopReport {
        let started = Instant::now();
        let already_exited = self.exit_status().is_some();
        self.note_shm();
        if self.term_leader_only {
            // ESRCH (already gone) is an end state too.
            let _ = self.signal(Signal::SIGTERM);
        } else {
            self.signal_group(Signal::SIGTERM);
        }
        let mut status = self.wait_exit(grace);
        // A leader that ends at once (nsenter, which forwards no signal)
        // leaves its child still shutting down on its own SIGTERM: the rest
        // of the grace is the child's, so it writes what it writes at exit
        // (coverage data, its pool's cleanup) before any SIGKILL.
        if status.is_some() && !self.is_remote() {
            self.wait_group_gone(started + grace);
        }
        let needed_sigkill = status.is_none();
        if needed_sigkill {
            self.signal_group(Signal::SIGKILL);
            status = self.wait_exit(Duration::from_secs(5));
        }
        // Leftover members of the group (grandchildren) go too.
        if !self.is_remote() && !procfs::group_members(self.pid).is_empty() {
            self.signal_group(Signal::SIGKILL);
            // A SIGKILL takes effect when its target next runs: on a busy
            // machine the members are still listed for a moment after it.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !procfs::group_members(self.pid).is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if self.reaped {
            reaper::forget_group(self.pid);
        }
        self.remove_shm();
        StopReport {
            name: self.name.clone(),
            pid: self.pid,
            already_exited,
            needed_sigkill,
            exit: status.map(|s| s.to_string()),
            stop_ms: started.elapsed().as_millis(),
        }
    }

    /// Notes the files in `/dev/shm` the process group holds now, so they
    /// are removed when it is gone, by [`Supervised::remove_shm`] or, if the
    /// harness dies first, by the reaper. Called once a component is ready
    /// and again before it is stopped or killed.
    pub fn note_shm(&self) {
        if self.is_remote() {
            return;
        }
        let members = procfs::group_members(self.pid);
        let Ok(mut noted) = self.shm.lock() else {
            return;
        };
        for path in procfs::shm_files_of(&members) {
            if !noted.contains(&path) {
                if self.reaped {
                    reaper::track_path(&path);
                }
                noted.push(path);
            }
        }
    }

    /// Removes the noted `/dev/shm` files once no process of the group is
    /// left; returns those removed. A no-op while the group lives.
    pub fn remove_shm(&self) -> Vec<PathBuf> {
        if self.is_remote() {
            return Vec::new();
        }
        if !procfs::group_members(self.pid).is_empty() {
            return Vec::new();
        }
        let Ok(mut noted) = self.shm.lock() else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        for path in noted.drain(..) {
            if std::fs::remove_file(&path).is_ok() {
                removed.push(path.clone());
            }
            reaper::forget_path(&path);
        }
        removed
    }

    /// The last `lines` lines of the component's log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// The last `lines` lines this process wrote to its log: nothing an
    /// earlier process of the same name appended before it was spawned.
    pub fn log_tail_since_spawn(&self, lines: usize) -> String {
        log_tail_from(&self.log, self.log_start, lines)
    }

    /// What this process wrote to its log since it was spawned, its first
    /// `max_bytes` (what a startup check reads: the start of the log).
    pub fn log_since_spawn(&self, max_bytes: u64) -> String {
        let Ok(file) = File::open(&self.log) else {
            return String::new();
        };
        let mut file = file;
        if file.seek(SeekFrom::Start(self.log_start)).is_err() {
            return String::new();
        }
        let mut bytes = Vec::new();
        let _ = file.take(max_bytes).read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Whether something accepts TCP connections at `address` (`host:port`).
pub fn accepts(address: &str) -> bool {
    use std::net::ToSocketAddrs;
    address
        .to_socket_addrs()
        .ok()
        .into_iter()
        .flatten()
        .any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok())
}

/// The last `lines` lines of a file (reading at most its last 64 KiB).
/// A component's `PYTHONPATH` adds to the harness's own instead of
/// replacing it: whatever the harness runs with (a KVCR build under test,
/// a user's path) reaches every component alike, the CPU engine's workers
/// (which set their package directory) as much as the Guard.
fn with_inherited(key: &str, value: &str) -> String {
    merged(key, value, std::env::var(key).ok().as_deref())
}

fn merged(key: &str, value: &str, inherited: Option<&str>) -> String {
    match inherited {
        Some(inherited) if key == "PYTHONPATH" && !inherited.is_empty() && !value.is_empty() => {
            format!("{value}:{inherited}")
        }
        _ => value.to_string(),
    }
}

pub fn log_tail(path: &Path, lines: usize) -> String {
    log_tail_from(path, 0, lines)
}

/// [`log_tail`] of the part of the file from byte `start` on.
fn log_tail_from(path: &Path, start: u64, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024).max(start)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_components_pythonpath_is_prepended_to_the_harnesss() {
        assert_eq!(
            merged("PYTHONPATH", "/engine", Some("/kvcr-env/site")),
            "/engine:/kvcr-env/site"
        );
        assert_eq!(merged("PYTHONPATH", "/engine", None), "/engine");
        assert_eq!(merged("PYTHONPATH", "/engine", Some("")), "/engine");
        assert_eq!(merged("OTHER", "x", Some("y")), "x");
    }

    fn sh(dir: &Path, name: &str, script: &str) -> ProcessSpec {
        ProcessSpec::new(name, "/bin/sh", dir.join(format!("{name}.log")))
            .arg("-c")
            .arg(script)
    }

    /// Field 19 of `/proc/<pid>/stat`: the nice value.
    fn nice_of(pid: u32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[test]
    fn lowering_the_group_priority_reaches_its_children() {
        let dir = tempfile::tempdir().unwrap();
        // The shell starts a child, then waits for it: both are in the group.
        let group =
            Supervised::spawn(&sh(dir.path(), "group", "sleep 30 & echo $! ; wait")).unwrap();
        let log = group.log_path().to_path_buf();
        let child: u32 = crate::wait::until(
            "the child's pid in the log",
            Duration::from_secs(5),
            Duration::from_millis(20),
            || match std::fs::read_to_string(&log)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                Some(pid) => crate::wait::Poll::Ready(pid),
                None => crate::wait::Poll::Pending("empty".into()),
            },
        )
        .unwrap();
        // 19 is the lowest priority (a test run under `nice -n 19` cannot go
        // lower).
        let lower = (nice_of(group.pid()) + 5).min(19);
        group.lower_group_priority(lower).unwrap();
        assert_eq!(nice_of(group.pid()), lower);
        assert_eq!(nice_of(child), lower);
        group.kill_group().unwrap();
        assert!(group.wait_exit(Duration::from_secs(5)).is_some());
        let attached = Supervised::attach("other", group.pid(), &log);
        assert!(
            attached.lower_group_priority(19).is_err(),
            "only processes this run started"
        );
    }

    #[test]
    fn an_exit_of_its_own_is_told_apart_from_a_kill() {
        let dir = tempfile::tempdir().unwrap();
        let crashed = Supervised::spawn(&sh(dir.path(), "crashed", "exit 5")).unwrap();
        let killed = Supervised::spawn(&sh(dir.path(), "killed", "sleep 30")).unwrap();
        killed.kill_group().unwrap();
        assert!(crashed.wait_exit(Duration::from_secs(5)).is_some());
        assert!(killed.wait_exit(Duration::from_secs(5)).is_some());
        let status = crashed.exited_on_its_own().expect("a crash");
        assert_eq!(status.code(), Some(5));
        assert!(
            killed.exited_on_its_own().is_none(),
            "the harness killed it"
        );
    }

    #[test]
    fn stops_a_process_that_ignores_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let child = Supervised::spawn(&sh(
            dir.path(),
            "stubborn",
            "trap '' TERM; echo up; while :; do sleep 0.05; done",
        ))
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !child.log_tail(1).contains("up") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(child.is_running());
        let report = child.stop(Duration::from_millis(300));
        assert!(report.needed_sigkill);
        assert!(!procfs::is_alive(child.pid()));
    }

    #[test]
    fn stop_takes_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let child =
            Supervised::spawn(&sh(dir.path(), "parent", "sleep 30 & sleep 30 & wait")).unwrap();
        // A deadline, not a wait: the shell's forks are slow on a busy machine.
        let deadline = Instant::now() + Duration::from_secs(30);
        while procfs::group_members(child.pid()).len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(procfs::group_members(child.pid()).len(), 3);
        child.stop(Duration::from_secs(2));
        assert!(procfs::group_members(child.pid()).is_empty());
    }

    /// A leader that stops its own children gets the SIGTERM alone: its
    /// child hears only from it (SIGUSR1 here), never the harness's SIGTERM;
    /// a group stop SIGTERMs the child directly.

    #[test]
    fn a_child_that_outlives_its_leader_gets_the_rest_of_the_grace() {
        // As `nsenter` does: the leader dies of the group's SIGTERM at once,
        // its child takes a while to shut down (writes what it saves at
        // exit) and must not be SIGKILLed for it.
        let dir = tempfile::tempdir().unwrap();
        let saved = dir.path().join("saved.txt");
        let script = format!(
            "sh -c 'trap \"sleep 0.3; echo saved >> {s}; exit 0\" TERM; \
             echo up >> {s}; while :; do sleep 0.05; done' & \
             while :; do sleep 0.05; done",
            s = saved.display()
        );
        let leader = Supervised::spawn(&sh(dir.path(), "nsenter-like", &script)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&saved).is_ok_and(|h| h.contains("up"))
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let report = leader.stop(Duration::from_secs(10));
        assert!(!report.needed_sigkill, "{report:?}");
        let heard = std::fs::read_to_string(&saved).unwrap();
        assert_eq!(heard.lines().nth(1), Some("saved"), "{heard}");
        assert!(procfs::group_members(leader.pid()).is_empty());
    }

    #[test]
    fn a_stop_through_the_leader_leaves_its_children_to_it() {
        let dir = tempfile::tempdir().unwrap();
        // The leader's TERM trap: stopped through its leader, it tells its
        // child (USR1); in a group stop it only waits, so the child's line
        // can come only from the harness's own SIGTERM (forwarding there
        // too would race the two signals in the child).
        // The leader says it is ready once its own trap is set: the child's
        // `up` alone can come first, and a TERM before the trap would end
        // the leader without a word to its child.
        let script = |heard: &Path, on_term: &str| {
            format!(
                "sh -c 'trap \"echo TERM >> {h}; exit 0\" TERM; trap \"echo USR1 >> {h}; exit 0\" USR1; \
                 echo up >> {h}; while :; do sleep 0.05; done' & child=$!; \
                 trap '{on_term} wait $child; exit 0' TERM; echo ready > {h}.ready; \
                 while :; do sleep 0.05; done",
                h = heard.display()
            )
        };
        for (leader_only, on_term, expected) in
            [(true, "kill -USR1 $child;", "USR1"), (false, "", "TERM")]
        {
            let heard = dir.path().join(format!("child-{leader_only}.txt"));
            let mut spec = sh(
                dir.path(),
                &format!("leader-{leader_only}"),
                &script(&heard, on_term),
            );
            if leader_only {
                spec = spec.stopped_through_its_leader();
            }
            let leader = Supervised::spawn(&spec).unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let ready = heard.with_extension("txt.ready");
            while !(std::fs::read_to_string(&heard).is_ok_and(|h| h.contains("up"))
                && ready.exists())
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            let report = leader.stop(Duration::from_secs(10));
            assert!(!report.needed_sigkill, "{report:?}");
            let heard = std::fs::read_to_string(&heard).unwrap();
            assert_eq!(heard.lines().nth(1), Some(expected), "{heard}");
            assert!(procfs::group_members(leader.pid()).is_empty());
        }
    }

    #[test]
    fn the_tail_since_spawn_leaves_out_what_an_earlier_process_of_the_name_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("worker.log");
        std::fs::write(
            &log,
            "KVCRServiceError: guard_index 0 is held by another worker\n",
        )
        .unwrap();
        let child = Supervised::spawn(&sh(dir.path(), "worker", "echo fresh start")).unwrap();
        child.wait_exit(Duration::from_secs(5)).unwrap();
        let since = child.log_tail_since_spawn(50);
        assert!(since.contains("fresh start"), "{since}");
        assert!(!since.contains("held by another worker"), "{since}");
        assert!(child.log_tail(50).contains("held by another worker"));
    }

    #[test]
    fn the_log_since_spawn_starts_at_the_spawn_and_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("worker.log");
        std::fs::write(&log, "earlier process\n").unwrap();
        let child =
            Supervised::spawn(&sh(dir.path(), "worker", "echo first; echo second")).unwrap();
        child.wait_exit(Duration::from_secs(5)).unwrap();
        assert_eq!(child.log_since_spawn(1 << 20), "first\nsecond\n");
        assert_eq!(child.log_since_spawn(5), "first");
    }

    #[test]
    fn log_tail_reads_output() {
        let dir = tempfile::tempdir().unwrap();
        let child =
            Supervised::spawn(&sh(dir.path(), "talker", "echo one; echo two >&2; exit 4")).unwrap();
        let status = child.wait_exit(Duration::from_secs(5)).unwrap();
        assert_eq!(status.code(), Some(4));
        let tail = child.log_tail(5);
        assert!(tail.contains("one") && tail.contains("two"), "{tail}");
    }
}
