//! The reaper: a small shell process that outlives the harness and cleans up
//! after it, however the harness ends.
//!
//! The harness tells it, over a pipe, which process groups and paths a run
//! owns. When the pipe closes (the harness exited, was SIGKILLed, or
//! panicked) the reaper SIGKILLs every group still on its list and removes
//! every path still on its list. A normal teardown stops the groups itself and
//! then takes them off the list, so the reaper has nothing left to do.
//!
//! The harness keeps the same lists itself. A run ended by a signal first
//! refuses new processes ([`end_spawns`]), then tears its stack down, then
//! [`finish`] kills and removes, before the harness exits, whatever is still
//! listed: a replacement worker started beside the teardown, say, which no
//! stack list held yet. The reaper alone would not do: a Slurm step's end
//! SIGKILLs every process of the step, the reaper included.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use once_cell::sync::Lazy;

use super::procfs;

/// Line protocol: `+g PGID`, `-g PGID`, `+p PATH`, `-p PATH`.
const SCRIPT: &str = r#"
trap '' INT TERM HUP
groups=" "
paths=""
while IFS= read -r line; do
  case "$line" in
    "+g "*) groups="$groups${line#+g } " ;;
    "-g "*) groups=$(printf '%s' "$groups" | sed "s/ ${line#-g } / /") ;;
    "+p "*) paths="$paths
${line#+p }" ;;
    "-p "*) paths=$(printf '%s\n' "$paths" | grep -vxF -- "${line#-p }") ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
printf '%s\n' "$paths" | while IFS= read -r p; do [ -n "$p" ] && rm -rf -- "$p"; done
exit 0
"#;

static REAPER: Lazy<Mutex<Option<ChildStdin>>> = Lazy::new(|| Mutex::new(start()));

/// What the run owns now: the reaper's lists, kept in this process too.
#[derive(Default)]
struct Owned {
    groups: BTreeSet<u32>,
    paths: Vec<PathBuf>,
    /// Set once the run ends on a signal: no process starts after it.
    ending: bool,
}

static OWNED: Lazy<Mutex<Owned>> = Lazy::new(|| Mutex::new(Owned::default()));

fn owned() -> MutexGuard<'static, Owned> {
    OWNED.lock().unwrap_or_else(|p| p.into_inner())
}

fn start() -> Option<ChildStdin> {
    let mut command = Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    match command.spawn() {
        Ok(mut child) => child.stdin.take(),
        Err(err) => {
            tracing::warn!(
                "the reaper did not start ({err}); a killed harness may leave processes behind"
            );
            None
        }
    }
}

fn send(line: String) {
    if let Ok(mut guard) = REAPER.lock() {
        if let Some(stdin) = guard.as_mut() {
            // A failed write means the reaper is gone; teardown still runs.
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }
}

/// Leave to start a process group the run owns; `None` once the run is
/// ending. Held from before the spawn until [`SpawnPermit::track_group`],
/// so [`finish`] never runs between a start and its tracking.
pub struct SpawnPermit(MutexGuard<'static, Owned>);

/// A permit to start a tracked process group, unless the run is ending.
pub fn permit_spawn() -> Option<SpawnPermit> {
    let owned = owned();
    (!owned.ending).then_some(SpawnPermit(owned))
}

impl SpawnPermit {
    /// Kill process group `pgid` if the harness dies before forgetting it.
    pub fn track_group(mut self, pgid: u32) {
        self.0.groups.insert(pgid);
        send(format!("+g {pgid}"));
    }
}

/// The group was stopped by a normal teardown.
pub fn forget_group(pgid: u32) {
    owned().groups.remove(&pgid);
    send(format!("-g {pgid}"));
}

/// Remove `path` (recursively) if the harness dies before forgetting it.
pub fn track_path(path: &Path) {
    let mut owned = owned();
    if !owned.paths.iter().any(|p| p == path) {
        owned.paths.push(path.to_path_buf());
    }
    send(format!("+p {}", path.display()));
}

/// The path was cleaned by a normal teardown. While the run ends on a
/// signal, every path stays listed: a process that [`finish`] has yet to
/// kill may create it again, even between its removal and this call.
pub fn forget_path(path: &Path) {
    let mut owned = owned();
    if owned.ending {
        return;
    }
    owned.paths.retain(|p| p != path);
    send(format!("-p {}", path.display()));
}

/// The run ends on a signal: from now on no tracked process starts
/// ([`permit_spawn`] answers `None`).
pub fn end_spawns() {
    owned().ending = true;
}

/// How long [`finish`] waits for the groups it SIGKILLed to be gone, and
/// for a path to be removed whole.
const FINISH_BUDGET: Duration = Duration::from_secs(10);

/// Ends the run's ownership: every group still listed is SIGKILLed and
/// awaited, every path still listed removed, here, before the harness
/// exits; then the reaper ends with nothing left (or with what could not
/// be killed or removed in [`FINISH_BUDGET`]). No process starts after
/// this. Used by the signal handler and at the end of a run.
pub fn finish() {
    let mut owned = owned();
    owned.ending = true;
    let deadline = Instant::now() + FINISH_BUDGET;
    let groups: Vec<u32> = owned.groups.iter().copied().collect();
    for &pgid in &groups {
        // ESRCH: the group is already empty.
        let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
    }
    for pgid in groups {
        if await_group_gone(pgid, deadline) {
            owned.groups.remove(&pgid);
            send(format!("-g {pgid}"));
        }
    }
    let paths = std::mem::take(&mut owned.paths);
    for path in paths {
        if remove_whole(&path, deadline) {
            send(format!("-p {}", path.display()));
        } else {
            tracing::warn!("{} is left for the reaper to remove", path.display());
            owned.paths.push(path);
        }
    }
    drop(owned);
    if let Ok(mut guard) = REAPER.lock() {
        guard.take();
    }
}

/// Polls until no process of group `pgid` is left, or `deadline`.
fn await_group_gone(pgid: u32, deadline: Instant) -> bool {
    loop {
        if procfs::group_members(pgid).is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            tracing::warn!("process group {pgid} outlived its SIGKILL; left to the reaper");
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes `path` (a file or a tree) until it is gone, or `deadline`.
fn remove_whole(path: &Path, deadline: Instant) -> bool {
    loop {
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        if !path.exists() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
