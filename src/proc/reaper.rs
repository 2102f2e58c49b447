//! The reaper: a small shell process that outlives the harness and cleans up
//! after it, however the harness ends.
//!
//! The harness tells it, over a pipe, which process groups and paths a run
//! owns. When the pipe closes (the harness exited, was SIGKILLed, or
//! panicked) the reaper SIGKILLs every group still on its list and removes
//! every path still on its list. A normal teardown stops the groups itself and
//! then takes them off the list, so the reaper has nothing left to do.

use std::io::Write;
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;

use once_cell::sync::Lazy;

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

/// Kill process group `pgid` if the harness dies before forgetting it.
pub fn track_group(pgid: u32) {
    send(format!("+g {pgid}"));
}

/// The group was stopped by a normal teardown.
pub fn forget_group(pgid: u32) {
    send(format!("-g {pgid}"));
}

/// Remove `path` (recursively) if the harness dies before forgetting it.
pub fn track_path(path: &Path) {
    send(format!("+p {}", path.display()));
}

/// The path was cleaned by a normal teardown, or must be kept.
pub fn forget_path(path: &Path) {
    send(format!("-p {}", path.display()));
}

/// Ends the reaper now: everything still tracked is killed and removed.
/// Used by the signal handler and at the end of a run.
pub fn finish() {
    if let Ok(mut guard) = REAPER.lock() {
        guard.take();
    }
}
