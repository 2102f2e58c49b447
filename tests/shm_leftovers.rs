//! A SIGKILLed engine leaves files in `/dev/shm` (vLLM: `psm_*`,
//! `sem.mp-*`, `vllm_offload_*.mmap`). The harness removes exactly those its
//! own processes held, once the process group is gone, and nothing else.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kvcr_e2e::proc::{ProcessSpec, Supervised};
use kvcr_e2e::wait::{self, Poll};
use nix::sys::signal::Signal;

/// A process that creates and maps `path` (as vLLM maps its shared memory)
/// and then waits to be killed.
fn holder(path: &Path, log: &Path) -> Supervised {
    let code = "import mmap, sys, time\n\
                f = open(sys.argv[1], 'w+b'); f.truncate(4096)\n\
                m = mmap.mmap(f.fileno(), 4096); m[:5] = b'kvcr!'\n\
                print('mapped', flush=True)\n\
                time.sleep(600)\n";
    let spec = ProcessSpec::new("shm-holder", "python3", log)
        .args(["-c", code])
        .arg(path.display().to_string());
    Supervised::spawn(&spec).expect("python3 starts")
}

fn await_mapped(p: &Supervised) {
    wait::until(
        "the holder to map its file",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || {
            if p.log_tail(5).contains("mapped") {
                Poll::Ready(())
            } else {
                Poll::Pending(p.log_tail(20))
            }
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

fn shm_path(tag: &str) -> PathBuf {
    PathBuf::from(format!(
        "/dev/shm/psm_kvcr_e2e_{tag}_{}",
        std::process::id()
    ))
}

#[test]
fn files_a_killed_component_held_are_removed_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let held = shm_path("held");
    let bystander = shm_path("bystander");
    std::fs::write(&bystander, b"not ours").unwrap();

    let p = holder(&held, &dir.path().join("holder.log"));
    await_mapped(&p);
    p.note_shm();
    p.signal(Signal::SIGKILL).unwrap();
    assert!(
        p.wait_exit(Duration::from_secs(5)).is_some(),
        "SIGKILL took"
    );
    assert!(held.exists(), "a SIGKILLed process leaves its file behind");

    let removed = p.remove_shm();
    assert_eq!(removed, vec![held.clone()]);
    assert!(!held.exists());
    assert!(bystander.exists(), "a file the process never held is kept");
    std::fs::remove_file(&bystander).unwrap();
}

#[test]
fn nothing_is_removed_while_the_group_lives() {
    let dir = tempfile::tempdir().unwrap();
    let held = shm_path("live");
    let p = holder(&held, &dir.path().join("holder.log"));
    await_mapped(&p);
    p.note_shm();
    assert!(p.remove_shm().is_empty(), "the group still runs");
    assert!(held.exists());
    // A normal stop removes it.
    p.stop(Duration::from_secs(2));
    assert!(!held.exists(), "stop() removes what the group held");
}

/// A process that creates a named semaphore the way vLLM's processes do
/// (`multiprocessing` with the spawn start method: `sem.mp-*` under
/// /dev/shm, left for Python's resource tracker to unlink) and prints its
/// name.
fn semaphore_holder(log: &Path) -> Supervised {
    let code = "import multiprocessing as mp, time\n\
                lock = mp.get_context('spawn').Lock()\n\
                print('mapped /dev/shm/sem.' + lock._semlock.name.lstrip('/'), flush=True)\n\
                time.sleep(600)\n";
    let spec = ProcessSpec::new("sem-holder", "python3", log).args(["-c", code]);
    Supervised::spawn(&spec).expect("python3 starts")
}

#[test]
fn a_named_semaphore_of_a_killed_component_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let p = semaphore_holder(&dir.path().join("holder.log"));
    await_mapped(&p);
    let tail = p.log_tail(5);
    let semaphore = PathBuf::from(
        tail.lines()
            .find_map(|l| l.strip_prefix("mapped "))
            .expect("the holder names its semaphore"),
    );
    assert!(semaphore.exists(), "{} exists", semaphore.display());
    p.note_shm();
    // Python's resource tracker, a child in the group, would unlink it on a
    // clean exit; a kill of the group (as the harness kills an engine)
    // takes it too.
    p.kill_group().unwrap();
    assert!(
        p.wait_exit(Duration::from_secs(5)).is_some(),
        "SIGKILL took"
    );
    // Nothing removed within the budget is judged below.
    let removed = wait::until(
        "the holder's file to be removed",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || match p.remove_shm() {
            removed if removed.is_empty() => Poll::Pending("nothing removed".into()),
            removed => Poll::Ready(removed),
        },
    )
    .unwrap_or_default();
    let left = semaphore.exists();
    if left {
        std::fs::remove_file(&semaphore).unwrap();
    }
    assert!(
        !left,
        "{} left behind; removed {removed:?}",
        semaphore.display()
    );
    assert!(removed.contains(&semaphore));
}
