//! Where a run's files live. Logs go to the run's evidence directory; the
//! Guard socket, pools, discovery directory and ready files go to a per-run
//! scratch directory on tmpfs (short paths for Unix sockets, shared memory
//! for pools), removed at teardown or by the reaper.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use nix::fcntl::{Flock, FlockArg};

use crate::engine::slots;
use crate::proc::reaper;

const SCRATCH_PREFIX: &str = "kvcr-e2e-";
/// The file the owning harness holds locked while it runs (it also names
/// the owner's pid, for people).
const OWNER_FILE: &str = "owner.pid";

/// The owner files this process holds locked, for as long as it lives.
static HELD: std::sync::Mutex<Vec<Flock<fs::File>>> = std::sync::Mutex::new(Vec::new());

/// Shared memory when the machine has it (pools want it), else the temp dir.
fn scratch_base() -> PathBuf {
    if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    }
}

/// Removes scratch directories (pools, discovery, sockets) whose owning
/// harness no longer runs: what a crash left behind that the reaper could
/// not remove. Returns the directories removed.
///
/// The owner is alive while it holds the lock on its owner file. A pid
/// would not do: a harness in another PID namespace (a container, a
/// namespace node, `unshare --pid`) sharing this /dev/shm sees other pids,
/// and took a live run's sockets away.
pub fn reclaim_stale(base: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(base) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(SCRATCH_PREFIX))
        })
        .filter(|dir| owner_is_gone(&dir.join(OWNER_FILE)))
        .filter(|dir| fs::remove_dir_all(dir).is_ok())
        .collect()
}

/// Whether `owner_file` names an owner (it is written after the lock is
/// taken) and nobody holds its lock. No file, or an empty one: a directory
/// being created right now, or not ours.
fn owner_is_gone(owner_file: &Path) -> bool {
    let Ok(file) = fs::File::open(owner_file) else {
        return false;
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => locked.metadata().is_ok_and(|m| m.len() > 0),
        Err(_) => false,
    }
}

/// Creates `owner_file`, locks it for the life of this process, then
/// writes this process's pid into it.
fn hold_owner_file(owner_file: &Path) -> std::io::Result<()> {
    let file = fs::File::create(owner_file)?;
    let mut locked = Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|(_, errno)| std::io::Error::from(errno))?;
    std::io::Write::write_all(&mut *locked, std::process::id().to_string().as_bytes())?;
    if let Ok(mut held) = HELD.lock() {
        held.push(locked);
    }
    Ok(())
}

/// KVCR's pool file names start so (kvcr 0.1.1 `memory._POOL_PREFIX`).
const POOL_FILE_PREFIX: &str = "kvcr-";
/// The logs directory's record of the pool files left once every Guard
/// service of the stack stopped at teardown (a JSON list of paths).
pub const POOL_FILES_AFTER_SHUTDOWN: &str = "pool-files-after-shutdown.json";

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Layout {
    pub logs_dir: PathBuf,
    pub scratch_dir: PathBuf,
}

impl Layout {
    /// Creates the directories. `run_id` makes the scratch directory unique.
    /// Scratch directories of earlier runs whose harness is gone are
    /// reclaimed first.
    pub fn create(logs_dir: &Path, run_id: &str) -> std::io::Result<Self> {
        let base = scratch_base();
        reclaim_stale(&base);
        let scratch_dir = base.join(format!("{SCRATCH_PREFIX}{run_id}"));
        fs::create_dir_all(logs_dir)?;
        for sub in ["discovery", "pool", "ready"] {
            fs::create_dir_all(scratch_dir.join(sub))?;
        }
        hold_owner_file(&scratch_dir.join(OWNER_FILE))?;
        reaper::track_path(&scratch_dir);
        Ok(Self {
            logs_dir: logs_dir.to_path_buf(),
            scratch_dir,
        })
    }

    pub fn guard_socket(&self) -> PathBuf {
        slots::guard_socket(&self.scratch_dir)
    }

    pub fn pool_dir(&self) -> PathBuf {
        self.scratch_dir.join("pool")
    }

    /// The socket of Guard service `service` when each slot has its own.
    pub fn guard_socket_of(&self, service: &str) -> PathBuf {
        slots::guard_socket_of(&self.scratch_dir, service)
    }

    /// The pool directory of Guard service `service` (created).
    pub fn pool_dir_of(&self, service: &str) -> std::io::Result<PathBuf> {
        let dir = self.scratch_dir.join(format!("pool-{service}"));
        fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    pub fn ready_file(&self, process_name: &str) -> PathBuf {
        slots::ready_file(&self.scratch_dir, process_name)
    }

    /// KVCR pool files (`kvcr-<pool>-<generation>`) in the pool directories
    /// of this scratch directory (`pool`, `pool-<service>`): once every
    /// Guard service stopped, the files its shutdown left behind.
    pub fn pool_files(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for dir in fs::read_dir(&self.scratch_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = dir.file_name();
            let name = name.to_string_lossy();
            if name != "pool" && !name.starts_with("pool-") {
                continue;
            }
            for file in fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                if file
                    .file_name()
                    .to_string_lossy()
                    .starts_with(POOL_FILE_PREFIX)
                {
                    found.push(file.path());
                }
            }
        }
        found.sort();
        found
    }

    /// Writes [`Layout::pool_files`] into the logs directory
    /// ([`POOL_FILES_AFTER_SHUTDOWN`]): what the run's evidence reads of the
    /// Guard services' cleanup after the scratch directory is gone.
    pub fn record_pool_files_after_shutdown(&self) {
        let left = self.pool_files();
        if let Ok(json) = serde_json::to_string_pretty(&left) {
            let _ = fs::write(self.logs_dir.join(POOL_FILES_AFTER_SHUTDOWN), json);
        }
    }

    pub fn remove_scratch(&self) {
        if fs::remove_dir_all(&self.scratch_dir).is_ok() || !self.scratch_dir.exists() {
            reaper::forget_path(&self.scratch_dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(base: &Path, name: &str, owner: Option<u32>) -> PathBuf {
        let dir = base.join(format!("{SCRATCH_PREFIX}{name}"));
        fs::create_dir_all(dir.join("pool")).unwrap();
        fs::write(dir.join("pool/kvcr-pool_0-x"), b"pool").unwrap();
        if let Some(pid) = owner {
            fs::write(dir.join(OWNER_FILE), pid.to_string()).unwrap();
        }
        dir
    }

    /// The pool files left in the pool directories, and nothing else, are
    /// what the record of a shutdown lists.
    #[test]
    fn pool_files_are_kvcr_files_of_the_pool_directories() {
        let base = tempfile::tempdir().unwrap();
        let logs = base.path().join("logs");
        fs::create_dir_all(&logs).unwrap();
        let dir = scratch(base.path(), "run", None);
        fs::create_dir_all(dir.join("pool-guard-b")).unwrap();
        fs::create_dir_all(dir.join("discovery")).unwrap();
        fs::write(dir.join("pool-guard-b/kvcr-pool_0-y"), b"").unwrap();
        fs::write(dir.join("pool/not-a-pool"), b"").unwrap();
        fs::write(dir.join("discovery/kvcr-z"), b"").unwrap();
        let layout = Layout {
            logs_dir: logs.clone(),
            scratch_dir: dir.clone(),
        };
        assert_eq!(
            layout.pool_files(),
            vec![
                dir.join("pool/kvcr-pool_0-x"),
                dir.join("pool-guard-b/kvcr-pool_0-y")
            ]
        );
        layout.record_pool_files_after_shutdown();
        let recorded: Vec<PathBuf> = serde_json::from_str(
            &fs::read_to_string(logs.join(POOL_FILES_AFTER_SHUTDOWN)).unwrap(),
        )
        .unwrap();
        assert_eq!(recorded.len(), 2);
        // A clean shutdown: nothing left, an empty list recorded.
        fs::remove_file(dir.join("pool/kvcr-pool_0-x")).unwrap();
        fs::remove_file(dir.join("pool-guard-b/kvcr-pool_0-y")).unwrap();
        layout.record_pool_files_after_shutdown();
        assert_eq!(
            fs::read_to_string(logs.join(POOL_FILES_AFTER_SHUTDOWN)).unwrap(),
            "[]"
        );
    }

    #[test]
    fn stale_scratch_of_a_dead_harness_is_reclaimed() {
        let base = tempfile::tempdir().unwrap();
        // Its owner wrote its pid and died: nobody holds the lock.
        let stale = scratch(base.path(), "stale", Some(4_000_000));
        let unowned = scratch(base.path(), "unowned", None);
        let live = scratch(base.path(), "live", None);
        hold_owner_file(&live.join(OWNER_FILE)).unwrap();
        let removed = reclaim_stale(base.path());
        assert_eq!(removed, vec![stale.clone()]);
        assert!(!stale.exists() && live.exists() && unowned.exists());
    }

    #[test]
    fn a_live_owner_seen_from_another_pid_namespace_keeps_its_scratch() {
        // The pid in the file means nothing here (another namespace's pid,
        // or no process at all): the lock decides.
        let base = tempfile::tempdir().unwrap();
        let live = scratch(base.path(), "other-ns", None);
        let file = fs::File::create(live.join(OWNER_FILE)).unwrap();
        let mut locked = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        std::io::Write::write_all(&mut *locked, b"2").unwrap();
        assert!(reclaim_stale(base.path()).is_empty());
        assert!(live.exists());
        drop(locked);
        assert_eq!(reclaim_stale(base.path()), vec![live]);
    }
}
