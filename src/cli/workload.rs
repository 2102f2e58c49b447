//! `kvcr-e2e workload --trace FILE`: a trace replayed through a stack as a
//! lane run as a child, into a dated directory under `target/workload/replay`.

use std::path::Path;
use std::process::ExitCode;

/// `kvcr-e2e workload --trace …`; `args` follow `workload`.
pub fn replay_trace(repo_root: &Path, args: &[String]) -> ExitCode {
    let stamp = crate::mutants::driver::stamp(time::OffsetDateTime::now_utc());
    let out = repo_root.join("target/workload/replay").join(stamp);
    crate::drive::workload::command(args, repo_root, out)
}
