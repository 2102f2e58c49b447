//! A run ended by a signal leaves nothing behind, even a process that
//! started beside its teardown and writes into a directory the teardown
//! already removed (a replacement worker registering itself in the stack's
//! discovery directory: a Slurm `scancel` left such a directory once).
//!
//! One test in its own binary: ending the run's spawns is for the whole
//! process.

use std::path::Path;
use std::time::Duration;

use kvcr_e2e::proc::{procfs, reaper, ProcError, ProcessSpec, Supervised};
use kvcr_e2e::wait::{self, Poll};

/// A process that creates `dir/discovery/instances/worker` again and again,
/// as a worker keeps its discovery entries.
fn writer(dir: &Path, log: &Path) -> Supervised {
    // `echo`, not `:`: a failed redirection of a special builtin ends a
    // POSIX shell, and the teardown below removes the directory under it.
    let script = "while :; do mkdir -p \"$1/discovery/instances\" && echo up > \"$1/discovery/instances/worker\"; done";
    let spec = ProcessSpec::new("discovery-writer", "/bin/sh", log)
        .args(["-c", script, "writer"])
        .arg(dir.display().to_string());
    Supervised::spawn(&spec).expect("/bin/sh starts")
}

/// Waits until `writer` has written `entry` (`what`, for the message).
fn await_entry(entry: &Path, writer: &Supervised, what: &str) {
    wait::until(
        format!("the writer to write {what}"),
        Duration::from_secs(10),
        Duration::from_millis(5),
        || match entry.exists() {
            true => Poll::Ready(()),
            false => Poll::Pending(writer.log_tail(5)),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn finish_kills_a_late_process_and_removes_what_it_wrote_after_the_teardown() {
    let base = tempfile::tempdir().unwrap();
    let scratch = base.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    reaper::track_path(&scratch);
    let late = writer(&scratch, &base.path().join("writer.log"));
    let entry = scratch.join("discovery/instances/worker");
    await_entry(&entry, &late, "its first entry");

    // The signal: nothing starts any more.
    reaper::end_spawns();
    match Supervised::spawn(&ProcessSpec::new(
        "too-late",
        "/bin/true",
        base.path().join("t.log"),
    )) {
        Err(ProcError::Ending { name }) => assert_eq!(name, "too-late"),
        other => panic!("a spawn after end_spawns was not refused: {other:?}"),
    }

    // The stack's teardown removes its scratch directory and forgets it,
    // not knowing the writer, which creates its entry again.
    let _ = std::fs::remove_dir_all(&scratch);
    reaper::forget_path(&scratch);
    await_entry(&entry, &late, "its entry again");

    reaper::finish();
    assert!(
        procfs::group_members(late.pid()).is_empty(),
        "the writer's group outlived finish()"
    );
    assert!(
        !scratch.exists(),
        "{} is there after finish(), written again after the teardown",
        scratch.display()
    );
}
