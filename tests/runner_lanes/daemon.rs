//! A daemon the lane started: its own process group, its output in a log
//! file, stopped (SIGTERM, then SIGKILL of the group) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kvcr_e2e::proc::procfs;
use kvcr_e2e::wait::{self, Poll};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

pub struct Daemon {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Daemon {
    pub fn start(name: &str, command: &mut Command, log: &Path) -> Result<Self, String> {
        use std::os::unix::process::CommandExt;
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {name} ({command:?}): {e}"))?;
        Ok(Daemon {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
    }

    /// Fails with the daemon's log when it has exited.
    pub fn check_running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{} exited ({status}); its log {}:\n{}",
                self.name,
                self.log.display(),
                std::fs::read_to_string(&self.log).unwrap_or_default()
            )),
            Err(e) => Err(format!("{}: {e}", self.name)),
        }
    }

    pub fn stop(&mut self) {
        let pgid = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(pgid, Signal::SIGTERM);
        let child = &mut self.child;
        let ended = wait::until(
            format!("{} to end after SIGTERM", self.name),
            Duration::from_secs(10),
            Duration::from_millis(50),
            || match child.try_wait() {
                Ok(Some(_)) if procfs::group_members(child.id()).is_empty() => Poll::Ready(()),
                _ => Poll::Pending("its group is still running".into()),
            },
        );
        if ended.is_ok() {
            return;
        }
        let _ = killpg(pgid, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}
