//! One KVCR component started alone in a hostile environment (TC-16), and
//! what it did: its exit, its exceptions, and what it left.
//!
//! Each attempt runs inside a mount namespace of its own (`unshare -m`,
//! private propagation), under a small shell that first mounts a tmpfs on
//! `/dev/shm` (so nothing the attempt writes reaches the machine's own
//! `/dev/shm`), makes the attempt's directories there, applies the hostile
//! condition (a size-limited tmpfs on the pool directory, a read-only bind
//! of the socket directory) and verifies it, starts a Guard for a worker
//! attempt, then runs the component. After the component exits the shell
//! stops its Guard and lists every file left under its `/dev/shm`: those
//! mounts vanish with the namespace, so the listing is taken inside it. A
//! port taken is held by the harness itself, an unusable transport is the
//! component's `UCX_TLS`.

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde::Serialize;

use crate::engine::{LaunchContext, WorkerSlot};
use crate::proc::{procfs, ProcessSpec, Supervised};
use crate::telemetry::names::kvcr_log::SERVICE_READY;
use crate::verdict::hostile_start::{traceback_exceptions, PoolFileSpace, StartAttempt};
use crate::verdict::start_leftovers::Leftovers;
use crate::wait::{self, Poll};

use super::ports::{free_ports_in, STACK_PORT_RANGE};
use super::{Stack, StackError};

/// KVCR 0.1.1's Guard journal at the head of every pool group
/// (`kvcr_service._DEFAULT_JOURNAL_BYTES`, not settable from its CLI).
pub const GUARD_JOURNAL_BYTES: u64 = 100 << 20;
const PAGE: u64 = 4096;
/// Where every attempt's directories live, inside its own `/dev/shm`.
const ROOT: &str = "/dev/shm/hostile";
/// How much of an attempt's log is read (a Guard at DEBUG writes little
/// before it exits).
const LOG_BYTES: u64 = 16 << 20;
/// The wrapper's own lines in the component's log.
pub(super) const MARK: &str = "hostile-start:";
/// A worker's line once it serves (`cpu_engine.worker`: `registered
/// <model> as <role> instance <id>`), both parts.
pub(super) const WORKER_READY: [&str; 2] = ["registered ", " instance "];
/// A Guard pool of one page, in KVCR's GB (`0.000004` GB is 4294 bytes,
/// one page once rounded down).
const ONE_PAGE_GB: &str = "0.000004";
/// What the `no_usable_transport` attempt gives the worker: InfiniBand RC
/// only, while the stack confines UCX to loopback.
const UNUSABLE_UCX_TLS: &str = "rc";

/// A hostile condition a component starts into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hostility {
    /// The Guard's pool directory is a tmpfs smaller than its pool group.
    PoolDirTooSmall,
    /// The Guard's pool directory has room for its pool group and not a
    /// page more: it must start, holding the whole pool from the start.
    PoolDirFullAfterStart,
    /// A Guard service of two pool groups whose pool directory has room for
    /// one: the second group's allocation fails after the first group's
    /// Guard started, and the service must close that Guard and remove its
    /// pool file before it exits.
    PoolDirForOneOfTwoGroups,
    /// The Guard's socket directory is a read-only mount.
    SocketDirReadOnly,
    /// A Guard service starts where another, SIGKILLed, left its socket
    /// file and its pool file, beside a live Guard on the same pool
    /// directory (a tmpfs with room for two pool groups): it must remove the
    /// stale socket, reclaim the dead Guard's pool, leave the live one's,
    /// start, and stop cleanly.
    OverACrashedGuard,
    /// The worker's KVCR control port is bound (by the harness).
    PortTaken,
    /// The worker's `UCX_TLS` names no transport it can use.
    NoUsableTransport,
    /// The worker claims a Guard pool smaller than one of its blocks.
    PoolBelowOneBlock,
}

impl Hostility {
    pub const ALL: [Hostility; 8] = [
        Hostility::PoolDirTooSmall,
        Hostility::PoolDirFullAfterStart,
        Hostility::PoolDirForOneOfTwoGroups,
        Hostility::SocketDirReadOnly,
        Hostility::OverACrashedGuard,
        Hostility::PortTaken,
        Hostility::NoUsableTransport,
        Hostility::PoolBelowOneBlock,
    ];

    pub fn word(self) -> &'static str {
        match self {
            Hostility::PoolDirTooSmall => "pool_dir_too_small",
            Hostility::PoolDirFullAfterStart => "pool_dir_full_after_start",
            Hostility::PoolDirForOneOfTwoGroups => "pool_dir_for_one_of_two_groups",
            Hostility::SocketDirReadOnly => "socket_dir_read_only",
            Hostility::OverACrashedGuard => "over_a_crashed_guard",
            Hostility::PortTaken => "port_taken",
            Hostility::NoUsableTransport => "no_usable_transport",
            Hostility::PoolBelowOneBlock => "pool_below_one_block",
        }
    }

    /// The Guard service, or the worker (the engine with KVCR).
    pub fn starts_a_worker(self) -> bool {
        matches!(
            self,
            Hostility::PortTaken | Hostility::NoUsableTransport | Hostility::PoolBelowOneBlock
        )
    }

    /// The attempts that must start (and then stop cleanly).
    pub fn must_start(self) -> bool {
        matches!(
            self,
            Hostility::PoolDirFullAfterStart | Hostility::OverACrashedGuard
        )
    }

    /// Words one of which KVCR's exception must contain to name the cause.
    fn cause_words(self) -> &'static [&'static str] {
        match self {
            Hostility::PoolDirTooSmall => &["No space left on device", "ENOSPC"],
            Hostility::PoolDirFullAfterStart => &[],
            Hostility::PoolDirForOneOfTwoGroups => &["No space left on device", "ENOSPC"],
            Hostility::SocketDirReadOnly => &["Read-only file system", "EROFS"],
            Hostility::OverACrashedGuard => &[],
            Hostility::PortTaken => &["Address already in use", "EADDRINUSE"],
            Hostility::NoUsableTransport => &["NIXL_ERR", "UCX", "transport"],
            Hostility::PoolBelowOneBlock => &["at least one complete KV block"],
        }
    }
}

/// How the harness itself spoils an attempt (the fault rows proving the
/// verdicts can fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    None,
    /// The hostile condition is left out: the component starts normally.
    Benign,
    /// The harness writes a file into the pool directory after the
    /// component exited, before the listing.
    PlantFile,
}

/// The attempt's paths, inside its own `/dev/shm`.
pub(super) struct Dirs {
    pub pools: PathBuf,
    pub sockets: PathBuf,
    pub work: PathBuf,
}

impl Dirs {
    fn of(hostility: Hostility) -> Self {
        Self::named(hostility.word())
    }

    /// An attempt's directories under `/dev/shm/hostile/<name>`.
    pub(super) fn named(name: &str) -> Self {
        let root = Path::new(ROOT).join(name);
        Self {
            pools: root.join("pools"),
            sockets: root.join("sock"),
            work: root.join("work"),
        }
    }

    pub(super) fn socket(&self) -> PathBuf {
        self.sockets.join("g.sock")
    }

    /// The live Guard's beside an `over_a_crashed_guard` attempt.
    fn live_socket(&self) -> PathBuf {
        self.sockets.join("live.sock")
    }
}

/// An attempt ready to run: the wrapper's script around its component,
/// the harness's account of the condition, and the port the harness holds.
struct Arranged {
    wrapper: ProcessSpec,
    cause: String,
    held_port: Option<TcpListener>,
}

/// What an attempt's wrapper saw, before the attempt is judged.
pub(super) struct Ran {
    pub exit_code: Option<i32>,
    pub ready: bool,
    pub hung: bool,
    pub elapsed_ms: u64,
    pub deadline_ms: u64,
    /// The wrapper's log: the component's output and the wrapper's lines.
    pub text: String,
    pub left_files: Vec<String>,
    pub listed: bool,
    pub left_processes: Vec<u32>,
}

impl Stack {
    /// Starts one component in `hostility` and returns what it did: its
    /// exit (polled until the start-up timeout), its exceptions, the files
    /// left under its `/dev/shm` and the processes left in its group.
    /// An environment the wrapper could not set up fails as "fault not
    /// applied".
    pub fn attempt_hostile_start(
        &self,
        hostility: Hostility,
        sabotage: Sabotage,
    ) -> Result<StartAttempt, StackError> {
        let dirs = Dirs::of(hostility);
        let Arranged {
            wrapper,
            cause,
            held_port,
        } = self.arrange_hostile_start(hostility, sabotage, &dirs)?;
        let (component, ready_line): (&str, &[&str]) = if hostility.starts_a_worker() {
            ("worker", &WORKER_READY)
        } else {
            ("guard", &[SERVICE_READY])
        };
        let mut pool_files = Vec::new();
        let mut socket_accepted = false;
        let ran = self.run_wrapper(
            hostility.word(),
            &wrapper,
            &format!("the {component} to refuse ({cause}) or to start"),
            ready_line,
            |pid| {
                if hostility.must_start() {
                    pool_files = pool_files_seen_by(pid, &dirs.pools);
                    socket_accepted = accepts_on(pid, &dirs.socket());
                    if socket_accepted {
                        await_probe_closed(&dirs.socket());
                        await_service_polling(pid);
                    }
                }
            },
        );
        drop(held_port);
        let ran = ran?;
        let leftovers = (hostility == Hostility::OverACrashedGuard && hostile(sabotage))
            .then(|| leftovers_seen(&ran.text, &dirs.socket(), socket_accepted));
        Ok(StartAttempt {
            attempt: hostility.word().to_string(),
            component: component.to_string(),
            cause,
            cause_words: hostility
                .cause_words()
                .iter()
                .map(|w| w.to_string())
                .collect(),
            exit_code: ran.exit_code,
            ready: ran.ready,
            hung: ran.hung,
            elapsed_ms: ran.elapsed_ms,
            deadline_ms: ran.deadline_ms,
            exceptions: traceback_exceptions(&ran.text),
            left_files: ran.left_files,
            listed: ran.listed,
            left_processes: ran.left_processes,
            pool_files,
            leftovers,
            log: wrapper.log,
        })
    }

    /// Runs an attempt's wrapper: polls until the component exits or logs
    /// `ready_line` (then runs `while_ready` with the wrapper's pid and stops
    /// it as the stack would) or the start-up timeout passes (then stops
    /// it, killing its group if it must), and reads back what the wrapper
    /// saw. A wrapper that could not set up its environment fails as "fault
    /// not applied".
    pub(super) fn run_wrapper(
        &self,
        word: &str,
        wrapper: &ProcessSpec,
        awaited: &str,
        ready_line: &[&str],
        while_ready: impl FnOnce(u32),
    ) -> Result<Ran, StackError> {
        let deadline = self.plan.options.startup_timeout;
        let started = Instant::now();
        let process = Supervised::spawn(wrapper).map_err(super::ProvisionError::from)?;
        let seen = wait::until(awaited, deadline, Duration::from_millis(50), || {
            if let Some(status) = process.exit_status() {
                return Poll::Ready(Some(status.code()));
            }
            if process
                .log_since_spawn(LOG_BYTES)
                .lines()
                .any(|l| ready_line.iter().all(|part| l.contains(part)))
            {
                return Poll::Ready(None);
            }
            Poll::Pending("neither exited nor ready".into())
        });
        let (mut exit_code, ready, mut hung) = match seen {
            Ok(Some(code)) => (code, false, false),
            Ok(None) => (None, true, false),
            Err(_) => (None, false, true),
        };
        if ready || hung {
            if ready {
                while_ready(process.pid());
            }
            // Stopped as the stack stops it; the wrapper passes SIGTERM on.
            let _ = process.signal(Signal::SIGTERM);
            match process.wait_exit(self.plan.options.kill_timeout) {
                Some(status) => exit_code = status.code(),
                None => {
                    let _ = process.kill_group();
                    let _ = process.wait_exit(self.plan.options.kill_timeout);
                    hung = true;
                }
            }
        }
        let elapsed_ms = started.elapsed().as_millis() as u64;
        // Since its spawn: a later attempt of the same name appends.
        let text = process.log_since_spawn(LOG_BYTES);
        if let Some(failed) = text
            .lines()
            .find(|l| l.starts_with(&format!("{MARK} setup failed")))
        {
            return Err(StackError::FaultNotApplied(format!(
                "{word}: {failed} (log {})",
                wrapper.log.display()
            )));
        }
        if !text
            .lines()
            .any(|l| l == format!("{MARK} environment ready"))
        {
            // `unshare` itself refused (no CAP_SYS_ADMIN, no user namespaces).
            return Err(StackError::FaultNotApplied(format!(
                "{word}: the wrapper never started the component (exit {exit_code:?}): {} (log {})",
                text.lines().last().unwrap_or("no output"),
                wrapper.log.display()
            )));
        }
        let mut left_files = left_files(&text);
        // Made only inside the namespace: on the machine it means a mount
        // did not hold.
        if Path::new(ROOT).exists() {
            left_files.push(format!("{ROOT} on the machine's own /dev/shm"));
        }
        Ok(Ran {
            exit_code,
            ready,
            hung,
            elapsed_ms,
            deadline_ms: deadline.as_millis() as u64,
            listed: text.lines().any(|l| l == format!("{MARK} listed")),
            left_processes: procfs::group_members(process.pid()),
            left_files,
            text,
        })
    }

    /// The stack's first worker slot, moved into `dirs`: group 0 of the
    /// Guard on the attempt's socket, ports of its own.
    /// What an attempt in `dirs` starts from: the launch context of a
    /// Guard service of one pool group there, that service (placed as the
    /// stack's Guard is) and its group's bytes. `not_applied` says which
    /// attempt could not be arranged.
    pub(super) fn attempt_guard(
        &self,
        dirs: &Dirs,
        not_applied: impl Fn(String) -> StackError,
    ) -> Result<(LaunchContext, ProcessSpec, u64), StackError> {
        let ctx = LaunchContext {
            work_dir: dirs.work.clone(),
            ..self
                .plan
                .ctx
                .for_guard(dirs.socket(), dirs.pools.clone(), 1)
        };
        let guard = self
            .plan
            .engine
            .guard(&ctx)
            .ok_or_else(|| not_applied("this engine runs no Guard service".into()))?;
        let guard = self.plan.placement.wrap(0, guard);
        let group_bytes = pool_group_bytes(guard.flag_value("--pool-sizes-gb").unwrap_or(""))
            .ok_or_else(|| not_applied("the Guard's --pool-sizes-gb is not readable".into()))?;
        Ok((ctx, guard, group_bytes))
    }

    pub(super) fn attempt_slot(&self, host: &str, dirs: &Dirs) -> Result<WorkerSlot, String> {
        let ports =
            free_ports_in(host, 2, STACK_PORT_RANGE).map_err(|e| format!("no free ports: {e}"))?;
        let mut slot = self
            .plan
            .slots
            .first()
            .cloned()
            .ok_or_else(|| "the stack has no worker slot".to_string())?;
        slot.guard_socket = dirs.socket();
        slot.guard_index = 0;
        slot.control_port = ports[0];
        slot.metrics_port = ports[1];
        slot.ready_file = dirs.work.join("ready");
        Ok(slot)
    }

    /// The component as the stack launches it, in `dirs`, with the hostile
    /// condition (none under [`Sabotage::Benign`]) set up by its wrapper or
    /// held by the harness.
    fn arrange_hostile_start(
        &self,
        hostility: Hostility,
        sabotage: Sabotage,
        dirs: &Dirs,
    ) -> Result<Arranged, StackError> {
        let not_applied =
            |why: String| StackError::FaultNotApplied(format!("{}: {why}", hostility.word()));
        let (ctx, guard, group_bytes) = self.attempt_guard(dirs, not_applied)?;
        let hostile = hostile(sabotage);
        let logs = &self.plan.ctx.logs_dir;
        let mut script = Script::new(dirs, group_bytes);
        let mut held_port = None;
        let (subject, cause) = match hostility {
            Hostility::PoolDirTooSmall => {
                let size = GUARD_JOURNAL_BYTES / 2;
                if hostile {
                    script.pool_dir_tmpfs(size);
                }
                let cause = format!(
                    "its pool directory is a tmpfs of {size} bytes; its pool group needs {group_bytes}"
                );
                (guard, cause)
            }
            Hostility::PoolDirFullAfterStart => {
                script.pool_dir_tmpfs(group_bytes);
                let cause = format!("its pool directory is a tmpfs of exactly its pool group's {group_bytes} bytes: no room for anything after start");
                (guard, cause)
            }
            Hostility::PoolDirForOneOfTwoGroups => {
                // Exactly one group's room: the first group fits, as the
                // `pool_dir_full_after_start` attempt shows; the second cannot.
                let size = if hostile {
                    group_bytes
                } else {
                    2 * group_bytes
                };
                script.pool_dir_tmpfs(size);
                let two = LaunchContext {
                    work_dir: dirs.work.clone(),
                    ..self
                        .plan
                        .ctx
                        .for_guard(dirs.socket(), dirs.pools.clone(), 2)
                };
                let guard = self
                    .plan
                    .engine
                    .guard(&two)
                    .ok_or_else(|| not_applied("this engine runs no Guard service".into()))?;
                let cause = format!(
                    "it holds two pool groups of {group_bytes} bytes each and its pool directory is a tmpfs of {size} bytes"
                );
                (self.plan.placement.wrap(0, guard), cause)
            }
            Hostility::SocketDirReadOnly => {
                if hostile {
                    script.read_only_sockets();
                }
                let cause = format!(
                    "its socket directory {} is a read-only mount",
                    dirs.sockets.display()
                );
                (guard, cause)
            }
            Hostility::OverACrashedGuard => {
                // Room for two groups: the live Guard's and one more, which
                // the new Guard gets only by reclaiming the crashed one's.
                script.pool_dir_tmpfs(2 * group_bytes);
                if hostile {
                    let mut live = guard.clone();
                    set_flag(
                        &mut live,
                        "--socket-path",
                        &dirs.live_socket().display().to_string(),
                    );
                    live.log = logs.join(format!("hostile-{}.live.log", hostility.word()));
                    let mut crashed = guard.clone();
                    crashed.log = logs.join(format!("hostile-{}.crashed.log", hostility.word()));
                    script.crashed_predecessor(&live, &dirs.live_socket(), &crashed);
                }
                let cause = format!(
                    "a SIGKILLed Guard left its socket {} and its pool file, and a live Guard holds another in the same pool directory (a tmpfs of {} bytes: two pool groups)",
                    dirs.socket().display(),
                    2 * group_bytes
                );
                (guard, cause)
            }
            Hostility::PortTaken | Hostility::NoUsableTransport | Hostility::PoolBelowOneBlock => {
                let slot = self.attempt_slot(&ctx.host, dirs).map_err(not_applied)?;
                let mut helper = guard;
                let mut worker = self
                    .plan
                    .placement
                    .wrap(0, self.plan.engine.worker(&ctx, &slot));
                let cause = match hostility {
                    Hostility::PortTaken => {
                        if hostile {
                            let port = TcpListener::bind((ctx.host.as_str(), slot.control_port))
                                .map_err(|e| {
                                    not_applied(format!(
                                        "binding its control port {}: {e}",
                                        slot.control_port
                                    ))
                                })?;
                            held_port = Some(port);
                        }
                        format!(
                            "its KVCR control port {}:{} is already bound (by the harness)",
                            ctx.host, slot.control_port
                        )
                    }
                    Hostility::NoUsableTransport => {
                        if hostile {
                            worker = worker.env("UCX_TLS", UNUSABLE_UCX_TLS);
                        }
                        format!(
                            "UCX_TLS={UNUSABLE_UCX_TLS} (InfiniBand RC only) with UCX_NET_DEVICES={}",
                            worker.env_var("UCX_NET_DEVICES").unwrap_or("unset")
                        )
                    }
                    _ => {
                        // KVCR's block in a pool is one page of the engine's
                        // (its pool layout): pages of two memory pages make
                        // a one-page pool hold less than one block.
                        if worker.flag_value("--attn-page-bytes").is_none() {
                            return Err(not_applied(
                                "the worker takes no --attn-page-bytes to set".into(),
                            ));
                        }
                        set_flag(&mut worker, "--attn-page-bytes", &(2 * PAGE).to_string());
                        if hostile {
                            let pages = vec![ONE_PAGE_GB; helper_pool_count(&helper)];
                            set_flag(&mut helper, "--pool-sizes-gb", &pages.join(","));
                        }
                        format!(
                            "its Guard's pool is one page ({PAGE} bytes), smaller than one KVCR block of the worker's ({} bytes: one page of its pool layout)",
                            2 * PAGE
                        )
                    }
                };
                helper.log = logs.join(format!("hostile-{}.guard.log", hostility.word()));
                script.helper_guard(&helper);
                (worker, cause)
            }
        };
        if sabotage == Sabotage::PlantFile {
            script.plant_file();
        }
        let log = logs.join(format!("hostile-{}.log", hostility.word()));
        let wrapper = ProcessSpec::new(format!("hostile-{}", hostility.word()), "unshare", log)
            .args(unshare_args())
            .args(["sh", "-c", &script.script(&subject), "hostile-start"]);
        Ok(Arranged {
            wrapper,
            cause,
            held_port,
        })
    }
}

pub(super) fn hostile(sabotage: Sabotage) -> bool {
    sabotage != Sabotage::Benign
}

/// The wrapper's account of the predecessors' files and KVCR's lines about
/// them, from the attempt's log.
fn leftovers_seen(log: &str, socket: &Path, socket_accepted: bool) -> Leftovers {
    let listed = |what: &str| -> Vec<String> {
        let prefix = format!("{MARK} {what} ");
        log.lines()
            .filter_map(|l| l.strip_prefix(prefix.as_str()))
            .map(str::to_string)
            .collect()
    };
    Leftovers {
        stale_socket: socket.display().to_string(),
        orphaned_pools: listed("orphan"),
        live_pools: listed("held"),
        socket_accepted,
        kvcr_lines: log
            .lines()
            .filter(|l| Leftovers::is_kvcr_line(l))
            .map(str::to_string)
            .collect(),
    }
}

/// A connection to the Unix socket `socket` of a running attempt, through
/// its mount namespace (`/proc/<pid>/root`), is accepted.
fn accepts_on(pid: u32, socket: &Path) -> bool {
    let inside = Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(socket.strip_prefix("/").unwrap_or(socket));
    UnixStream::connect(inside).is_ok()
}

/// Waits (at most 5 s) until the service has closed its end of the probe's
/// connection, the first half of keeping the SIGTERM after it from landing
/// while the service still dispatches that connection: KVCR 0.1.1 raises
/// its shutdown from the signal handler, and socketserver swallows it there
/// (docs/kvcr-findings.md, finding 18). A service that never closes it is
/// stopped anyway, and judged on its exit.
fn await_probe_closed(socket: &Path) {
    let _ = wait::until(
        format!(
            "the service to close the probe's connection on {}",
            socket.display()
        ),
        Duration::from_secs(5),
        Duration::from_millis(20),
        || {
            let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
            match sockets_bound_to(&table, socket) {
                0 | 1 => Poll::Ready(()),
                n => Poll::Pending(format!("{n} sockets on the path")),
            }
        },
    );
}

/// Waits (at most 5 s) until the Guard service under `wrapper` (the process
/// running `kvcr.kvcr_service`) sleeps in its accept loop's poll again. The
/// probe's connection closed is not enough: the connection's thread can
/// close it while the main thread is still in `process_request`, waiting
/// for that thread to report started, where a SIGTERM is lost (finding 18).
fn await_service_polling(wrapper: u32) {
    let waited = wait::until(
        "the Guard service's main thread back in its accept loop's poll",
        Duration::from_secs(5),
        Duration::from_millis(10),
        || {
            // The deepest match: the wrapper's own command line names the
            // module too.
            let service = procfs::with_descendants(wrapper)
                .into_iter()
                .rev()
                .find(|p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .map(|c| String::from_utf8_lossy(&c).contains("kvcr.kvcr_service"))
                        .unwrap_or(false)
                });
            let Some(service) = service else {
                return Poll::Pending("no kvcr.kvcr_service process".into());
            };
            match procfs::wchan(service) {
                Some(w) if w.contains("poll") || w.contains("select") => Poll::Ready(()),
                w => Poll::Pending(format!("pid {service} in {w:?}")),
            }
        },
    );
    if let Err(e) = waited {
        // Stopped anyway, and judged on its exit.
        tracing::warn!("{e}");
    }
}

/// The sockets of `/proc/net/unix` (its text) bound to `path`: a listener
/// and each connection its server still holds open.
fn sockets_bound_to(table: &str, path: &Path) -> usize {
    let want = path.to_string_lossy();
    table
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(7) == Some(want.as_ref()))
        .count()
}

/// `unshare` for a private mount namespace: directly with CAP_SYS_ADMIN,
/// otherwise inside a user namespace of its own (where it has it).
pub(super) fn unshare_args() -> Vec<&'static str> {
    const CAP_SYS_ADMIN: u64 = 1 << 21;
    let root = procfs::effective_capabilities().is_ok_and(|caps| caps & CAP_SYS_ADMIN != 0);
    let mut args = vec!["-m", "--propagation", "private"];
    if !root {
        args.splice(0..0, ["-U", "-r"]);
    }
    args.push("--");
    args
}

/// The bytes one Guard pool group maps: its journal and its pools, each
/// pool as KVCR sizes it (GB of 2^30 bytes, down to whole pages).
pub fn pool_group_bytes(pool_sizes_gb: &str) -> Option<u64> {
    let mut total = GUARD_JOURNAL_BYTES;
    for size in pool_sizes_gb.split(',') {
        let gb: f64 = size.trim().parse().ok()?;
        if !gb.is_finite() || gb <= 0.0 {
            return None;
        }
        let bytes = (gb * (1u64 << 30) as f64) as u64 / PAGE * PAGE;
        total += bytes;
    }
    Some(total)
}

pub(super) fn helper_pool_count(guard: &ProcessSpec) -> usize {
    guard
        .flag_value("--pool-sizes-gb")
        .map_or(1, |sizes| sizes.split(',').count())
}

fn set_flag(spec: &mut ProcessSpec, flag: &str, value: &str) {
    if let Some(i) = spec.args.iter().position(|a| a == flag) {
        if let Some(v) = spec.args.get_mut(i + 1) {
            *v = value.to_string();
        }
    }
}

/// `flag` set to `value`: replaced where `spec` has it, added otherwise.
pub(super) fn set_or_add_flag(spec: &mut ProcessSpec, flag: &str, value: &str) {
    if spec.flag_value(flag).is_some() {
        set_flag(spec, flag, value);
    } else {
        spec.args.extend([flag.to_string(), value.to_string()]);
    }
}

/// The files the wrapper listed after the component exited.
pub fn left_files(log: &str) -> Vec<String> {
    let prefix = format!("{MARK} left ");
    log.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .map(str::to_string)
        .collect()
}

/// The pool files of a running attempt, seen through its mount namespace
/// (`/proc/<pid>/root`): size and allocated bytes.
fn pool_files_seen_by(pid: u32, pools: &Path) -> Vec<PoolFileSpace> {
    let inside = Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(pools.strip_prefix("/").unwrap_or(pools));
    let mut files: Vec<PoolFileSpace> = std::fs::read_dir(inside)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let m = e.metadata().ok()?;
                    Some(PoolFileSpace {
                        name: e.file_name().to_string_lossy().into_owned(),
                        size_bytes: m.len(),
                        allocated_bytes: m.blocks() * 512,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

/// The wrapper's shell script, built up step by step.
pub(super) struct Script {
    lines: Vec<String>,
    after: Vec<String>,
    /// The attempt's pool and socket directories and its socket, quoted.
    pools: String,
    sockets: String,
    socket: String,
}

pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `spec` as one shell command: its directory, its environment, its
/// command line.
pub(super) fn command(spec: &ProcessSpec) -> String {
    let mut words = vec!["env".to_string()];
    for key in &spec.env_remove {
        words.push(format!("-u {}", quote(key)));
    }
    for (k, v) in &spec.env {
        words.push(quote(&format!("{k}={v}")));
    }
    words.push(quote(&spec.program.display().to_string()));
    words.extend(spec.args.iter().map(|a| quote(a)));
    let cd = spec
        .cwd
        .as_ref()
        .map(|d| format!("cd {} && ", quote(&d.display().to_string())))
        .unwrap_or_default();
    format!("{cd}exec {}", words.join(" "))
}

impl Script {
    pub(super) fn new(dirs: &Dirs, group_bytes: u64) -> Self {
        let d = |p: &Path| quote(&p.display().to_string());
        let made = [&dirs.pools, &dirs.sockets, &dirs.work.join("discovery")].map(|p| d(p));
        // Room for one pool group, its snapshot and the work files.
        let shm = group_bytes + (256 << 20);
        let lines = vec![
            format!("say() {{ echo \"{MARK} $*\"; }}"),
            format!("mount -t tmpfs -o size={shm} tmpfs /dev/shm || {{ say 'setup failed: no tmpfs on /dev/shm'; exit 90; }}"),
            format!("mkdir -p {} || {{ say 'setup failed: mkdir'; exit 90; }}", made.join(" ")),
        ];
        Self {
            lines,
            after: Vec::new(),
            pools: d(&dirs.pools),
            sockets: d(&dirs.sockets),
            socket: d(&dirs.socket()),
        }
    }

    fn pool_dir_tmpfs(&mut self, bytes: u64) {
        let pools = &self.pools;
        self.lines.push(format!(
            "mount -t tmpfs -o size={bytes} tmpfs {pools} && [ \"$(df -B1 --output=size {pools} | tail -1 | tr -d ' ')\" -le {} ] || {{ say 'setup failed: no tmpfs of {bytes} bytes on the pool directory'; exit 90; }}",
            bytes.div_ceil(PAGE) * PAGE
        ));
        self.lines.push(format!(
            "say \"pool directory: $(df -B1 --output=size,avail {pools} | tail -1)\""
        ));
    }

    fn read_only_sockets(&mut self) {
        let sockets = &self.sockets;
        self.lines.push(format!(
            "mount --bind {sockets} {sockets} && mount -o remount,bind,ro {sockets} || {{ say 'setup failed: no read-only bind on the socket directory'; exit 90; }}"
        ));
        self.lines.push(format!(
            "if ( : > {sockets}/probe ) 2>/dev/null; then say 'setup failed: the socket directory is writable'; exit 90; fi"
        ));
    }

    /// A Guard the worker claims from, started first, stopped after it (its
    /// exit status in `$helper_rc` from then on).
    pub(super) fn helper_guard(&mut self, guard: &ProcessSpec) {
        let socket = &self.socket;
        let log = quote(&guard.log.display().to_string());
        self.lines
            .push(format!("( {} ) > {log} 2>&1 &", command(guard)));
        self.lines.push("helper=$!".into());
        // Polled with a deadline of 30 s (600 × 50 ms).
        self.lines.push(format!(
            "n=0; until [ -S {socket} ]; do n=$((n+1)); if [ $n -gt 600 ] || ! kill -0 $helper 2>/dev/null; then say \"setup failed: its Guard did not start (log \"{log}\")\"; exit 90; fi; sleep 0.05; done"
        ));
        self.after.push(
            "kill -TERM $helper 2>/dev/null; wait $helper; helper_rc=$?; say \"its Guard exited $helper_rc\"".into(),
        );
    }

    /// A live Guard on the same pool directory (its own socket), then a
    /// Guard on the attempt's socket, SIGKILLed once it is up: it leaves its
    /// socket and its pool file. The wrapper lists the live Guard's pool
    /// files (`held`) and the dead one's (`orphan`), verifies the stale
    /// socket, and stops the live Guard after the component.
    fn crashed_predecessor(
        &mut self,
        live: &ProcessSpec,
        live_socket: &Path,
        crashed: &ProcessSpec,
    ) {
        let pools = &self.pools;
        let socket = &self.socket;
        let live_socket = quote(&live_socket.display().to_string());
        for (spec, var, sock) in [(live, "live", &live_socket), (crashed, "crashed", socket)] {
            let log = quote(&spec.log.display().to_string());
            self.lines
                .push(format!("( {} ) > {log} 2>&1 &", command(spec)));
            self.lines.push(format!("{var}=$!"));
            // Polled with a deadline of 30 s (600 × 50 ms).
            self.lines.push(format!(
                "n=0; until [ -S {sock} ]; do n=$((n+1)); if [ $n -gt 600 ] || ! kill -0 ${var} 2>/dev/null; then say \"setup failed: the {var} Guard did not start (log \"{log}\")\"; exit 90; fi; sleep 0.05; done"
            ));
            if var == "live" {
                self.lines.push(format!(
                    "held=' '; for f in {pools}/*; do [ -f \"$f\" ] || continue; held=\"$held$f \"; say \"held $f\"; done"
                ));
            }
        }
        self.lines
            .push("kill -KILL $crashed; wait $crashed 2>/dev/null".into());
        self.lines.push(format!(
            "[ -S {socket} ] || {{ say 'setup failed: the crashed Guard left no socket'; exit 90; }}"
        ));
        self.lines.push(format!(
            "n=0; for f in {pools}/*; do [ -f \"$f\" ] || continue; case \"$held\" in *\" $f \"*) ;; *) n=$((n+1)); say \"orphan $f\";; esac; done; [ $n -gt 0 ] || {{ say 'setup failed: the crashed Guard left no pool file'; exit 90; }}"
        ));
        self.after.push(
            "kill -TERM $live 2>/dev/null; wait $live; say \"the live Guard exited $?\"".into(),
        );
    }

    pub(super) fn plant_file(&mut self) {
        self.after
            .push(format!(": > {}/kvcr-planted-by-the-harness", self.pools));
    }

    /// A line run before the component starts.
    pub(super) fn before(&mut self, line: String) {
        self.lines.push(line);
    }

    /// A line run after the component exited, before the listing.
    pub(super) fn after(&mut self, line: String) {
        self.after.push(line);
    }

    /// A line run first once the component exited (before a helper it
    /// started with is stopped).
    pub(super) fn after_first(&mut self, line: String) {
        self.after.insert(0, line);
    }

    pub(super) fn script(&self, subject: &ProcessSpec) -> String {
        let mut lines = self.lines.clone();
        lines.push("say 'environment ready'".into());
        lines.push(format!("( {} ) &", command(subject)));
        lines.push("child=$!".into());
        lines.push("trap 'kill -TERM $child 2>/dev/null' TERM INT".into());
        // `wait` returns early when the trap runs; the loop ends once the
        // child is reaped, with its own status.
        lines.push(
            "while :; do wait $child; rc=$?; kill -0 $child 2>/dev/null || break; done".into(),
        );
        lines.push("say \"exit $rc\"".into());
        lines.extend(self.after.iter().cloned());
        // The namespace's own /dev/shm: whatever is there, the attempt made.
        lines.push(
            "find /dev/shm -mindepth 1 ! -type d | while read -r f; do say \"left $f\"; done"
                .into(),
        );
        lines.push("say listed".into());
        lines.push("exit $rc".into());
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sockets_on_a_path_are_read_from_proc_net_unix() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1001 /s/g.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 1002 /s/g.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1003 /s/other.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 1004\n";
        assert_eq!(sockets_bound_to(table, Path::new("/s/g.sock")), 2);
        assert_eq!(sockets_bound_to(table, Path::new("/s/none.sock")), 0);
    }

    #[test]
    fn a_pool_group_is_its_journal_and_its_pages() {
        // 0.05 GB is 53687091 bytes, 53686272 in whole pages.
        assert_eq!(pool_group_bytes("0.05"), Some(104_857_600 + 53_686_272));
        assert_eq!(
            pool_group_bytes("0.05,0.000004"),
            Some(104_857_600 + 53_686_272 + 4096)
        );
        assert_eq!(pool_group_bytes(""), None);
        assert_eq!(pool_group_bytes("0"), None);
    }

    #[test]
    fn the_listing_is_read_back_from_the_log() {
        let log = "x\nhostile-start: left /dev/shm/hostile/a/pools/kvcr-pool_0-ab\nhostile-start: listed\n";
        assert_eq!(
            left_files(log),
            vec!["/dev/shm/hostile/a/pools/kvcr-pool_0-ab".to_string()]
        );
        assert!(left_files("hostile-start: listed\n").is_empty());
    }

    #[test]
    fn the_script_mounts_first_and_lists_last() {
        let dirs = Dirs::of(Hostility::PoolDirTooSmall);
        let mut script = Script::new(&dirs, 158_543_872);
        script.pool_dir_tmpfs(52_428_800);
        script.plant_file();
        let subject = ProcessSpec::new("guard", "/venv/bin/python", "/logs/g.log")
            .args([
                "-m",
                "kvcr.kvcr_service",
                "--pool-dir",
                "/dev/shm/hostile/x/pools",
            ])
            .env("A", "it's")
            .env_remove("NATS_SERVER");
        let text = script.script(&subject);
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {text}"))
        };
        assert!(at("tmpfs /dev/shm") < at("size=52428800"));
        assert!(at("size=52428800") < at("environment ready"));
        assert!(at("environment ready") < at("kvcr-planted-by-the-harness"));
        assert!(at("kvcr-planted-by-the-harness") < at("say listed"));
        assert!(text.contains("exec env -u 'NATS_SERVER' 'A=it'\\''s' '/venv/bin/python' '-m'"));
        assert!(text.contains("find /dev/shm -mindepth 1 ! -type d"));
    }

    #[test]
    fn the_predecessors_start_before_and_the_live_one_stops_after() {
        let dirs = Dirs::of(Hostility::OverACrashedGuard);
        let mut script = Script::new(&dirs, 158_543_872);
        script.pool_dir_tmpfs(2 * 158_543_872);
        let guard = |log: &str| {
            ProcessSpec::new("guard", "/venv/bin/python", log).args([
                "-m",
                "kvcr.kvcr_service",
                "--socket-path",
                "/dev/shm/hostile/over_a_crashed_guard/sock/g.sock",
            ])
        };
        let mut live = guard("/logs/live.log");
        set_flag(&mut live, "--socket-path", "/x/live.sock");
        script.crashed_predecessor(&live, &dirs.live_socket(), &guard("/logs/crashed.log"));
        let text = script.script(&guard("/logs/g.log"));
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {text}"))
        };
        assert!(at("size=317087744") < at("> '/logs/live.log'"));
        assert!(
            at("until [ -S '/dev/shm/hostile/over_a_crashed_guard/sock/live.sock' ]")
                < at("say \"held $f\"")
        );
        assert!(at("say \"held $f\"") < at("> '/logs/crashed.log'"));
        assert!(at("> '/logs/crashed.log'") < at("kill -KILL $crashed"));
        assert!(at("kill -KILL $crashed") < at("say \"orphan $f\""));
        assert!(at("say \"orphan $f\"") < at("environment ready"));
        assert!(at("environment ready") < at("kill -TERM $live"));
        assert!(at("kill -TERM $live") < at("say listed"));
        assert!(text.contains("'--socket-path' '/x/live.sock'"), "{text}");
        // Well-formed shell.
        let checked = std::process::Command::new("sh")
            .args(["-n", "-c", &text])
            .status()
            .expect("sh");
        assert!(checked.success(), "{text}");
    }

    #[test]
    fn the_leftovers_are_read_back_from_the_log() {
        let log = "\
hostile-start: held /p/kvcr-pool_0-bb
hostile-start: orphan /p/kvcr-pool_0-aa
hostile-start: environment ready
WARNING:kvcr.kvcr_service:Removing stale KVCR service socket: /s/g.sock
WARNING:kvcr.kvcr_service:Reclaimed orphaned KVCR pool from a dead instance: /p/kvcr-pool_0-aa (5 bytes)
INFO:kvcr.kvcr_service:Leaving KVCR pool still in use: /p/kvcr-pool_0-bb
INFO:kvcr.kvcr_service:KVCR service ready: socket=/s/g.sock
";
        let l = leftovers_seen(log, Path::new("/s/g.sock"), true);
        assert_eq!(l.stale_socket, "/s/g.sock");
        assert_eq!(l.orphaned_pools, vec!["/p/kvcr-pool_0-aa".to_string()]);
        assert_eq!(l.live_pools, vec!["/p/kvcr-pool_0-bb".to_string()]);
        assert!(l.socket_accepted);
        assert_eq!(l.kvcr_lines.len(), 3, "{:?}", l.kvcr_lines);
    }

    #[test]
    fn every_refusal_names_its_cause_words() {
        for h in Hostility::ALL {
            assert_eq!(h.cause_words().is_empty(), h.must_start(), "{}", h.word());
        }
    }
}
