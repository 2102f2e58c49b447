//! The stack a run started, seen from outside through its `stack.json`,
//! and the check that nothing of it is left after the run was stopped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kvcr_e2e::proc::procfs;
use kvcr_e2e::wait::{self, Poll};
use serde_json::Value;

/// Pids and the scratch directory of a running stack.
pub struct StackSeen {
    pub pids: Vec<u32>,
    pub scratch: PathBuf,
    pub description: PathBuf,
}

/// Waits until `path` describes a stack with frontend, Guard and two
/// workers; gives up early with `ended()`'s text when it returns one (the
/// job ended before its stack came up).
pub fn await_stack(
    path: &Path,
    budget: Duration,
    ended: impl Fn() -> Option<String>,
) -> Result<StackSeen, String> {
    wait::until(
        format!("{} to describe a running stack", path.display()),
        budget,
        Duration::from_millis(100),
        || match (read_stack(path), ended()) {
            (Some(seen), _) => Poll::Ready(seen),
            (None, Some(why)) => Poll::Abort(format!("the run ended first: {why}")),
            (None, None) => Poll::Pending("no running stack described".into()),
        },
    )
    .map_err(|e| e.to_string())
}

fn read_stack(path: &Path) -> Option<StackSeen> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let mut pids = vec![
        v["frontend"]["process"]["pid"].as_u64()?,
        v["guard"]["process"]["pid"].as_u64()?,
    ];
    for w in v["workers"].as_array()? {
        pids.push(w["pid"].as_u64()?);
    }
    let scratch = PathBuf::from(v["layout"]["scratch_dir"].as_str()?);
    (pids.len() >= 4).then(|| StackSeen {
        pids: pids.into_iter().map(|p| p as u32).collect(),
        scratch,
        description: path.to_path_buf(),
    })
}

/// After `how` (e.g. "scancel"): every recorded pid and every member of its
/// group is gone, and the scratch directory (pools, sockets) is removed.
pub fn expect_gone(seen: &StackSeen, how: &str) -> Result<(), String> {
    wait::until(
        format!(
            "the stack described in {} to be gone after {how}",
            seen.description.display()
        ),
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            let alive: Vec<u32> = seen
                .pids
                .iter()
                .flat_map(|pid| procfs::group_members(*pid).into_iter().chain([*pid]))
                .filter(|p| procfs::is_alive(*p))
                .collect();
            if alive.is_empty() && !seen.scratch.exists() {
                return Poll::Ready(());
            }
            Poll::Pending(format!(
                "stack processes {alive:?} alive, scratch {} {}",
                seen.scratch.display(),
                if seen.scratch.exists() {
                    "still there"
                } else {
                    "removed"
                },
            ))
        },
    )
    .map_err(|e| e.to_string())
}
