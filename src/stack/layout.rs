//! Where a run's files live. Logs go to the run's evidence directory; the
//! Guard socket, pools, discovery directory and ready files go to a per-run
//! scratch directory on tmpfs (short paths for Unix sockets, shared memory
//! for pools), removed at teardown or by the reaper.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::proc::reaper;

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Layout {
    pub logs_dir: PathBuf,
    pub scratch_dir: PathBuf,
}

impl Layout {
    /// Creates the directories. `run_id` makes the scratch directory unique.
    pub fn create(logs_dir: &Path, run_id: &str) -> std::io::Result<Self> {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let scratch_dir = base.join(format!("kvcr-e2e-{run_id}"));
        fs::create_dir_all(logs_dir)?;
        for sub in ["discovery", "pool", "ready"] {
            fs::create_dir_all(scratch_dir.join(sub))?;
        }
        reaper::track_path(&scratch_dir);
        Ok(Self {
            logs_dir: logs_dir.to_path_buf(),
            scratch_dir,
        })
    }

    pub fn guard_socket(&self) -> PathBuf {
        self.scratch_dir.join("guard.sock")
    }

    pub fn pool_dir(&self) -> PathBuf {
        self.scratch_dir.join("pool")
    }

    pub fn ready_file(&self, process_name: &str) -> PathBuf {
        self.scratch_dir
            .join("ready")
            .join(format!("{process_name}.json"))
    }

    pub fn remove_scratch(&self) {
        if fs::remove_dir_all(&self.scratch_dir).is_ok() || !self.scratch_dir.exists() {
            reaper::forget_path(&self.scratch_dir);
        }
    }
}
