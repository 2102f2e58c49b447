//! The harness leaves nothing behind and two runs do not collide.
//!
//! These tests start real stacks through the `kvcr-e2e` binary (and the
//! `phase1` test binary cargo built beside this one), kill the harness with
//! SIGKILL, and check every pid, process group and scratch directory the
//! run recorded in its `stack.json`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kvcr_e2e::proc::procfs;
use kvcr_e2e::wait::{self, Poll};
use serde_json::Value;

mod lanes;
use lanes::{link_exists, poll, root};

/// One test at a time: each brings up one or two whole stacks, which is
/// all a 2-core machine should do at once.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn main() -> std::process::ExitCode {
    use kvcr_e2e::suite::machine_trial;
    let trials = vec![
        plain(
            "a_sigkilled_stack_owner_leaves_nothing_behind",
            a_sigkilled_stack_owner_leaves_nothing_behind,
        ),
        plain(
            "a_phase1_run_sigkilled_mid_case_leaves_nothing_behind",
            a_phase1_run_sigkilled_mid_case_leaves_nothing_behind,
        ),
        plain(
            "two_stacks_on_one_machine_do_not_collide",
            two_stacks_on_one_machine_do_not_collide,
        ),
        plain(
            "attached_runs_use_a_warm_stack_and_destructive_cases_restore_it",
            attached_runs_use_a_warm_stack_and_destructive_cases_restore_it,
        ),
        machine_trial(
            "a_two_node_run_sigkilled_leaves_no_process_namespace_or_link",
            kvcr_e2e::proc::netns::precondition,
            a_two_node_run_sigkilled_leaves_no_process_namespace_or_link,
        ),
        machine_trial(
            "a_case_broken_by_a_wall_clock_step_passes_on_its_second_attempt",
            || kvcr_e2e::suite::cannot_step_the_clock().map_or(Ok(()), Err),
            a_case_broken_by_a_wall_clock_step_passes_on_its_second_attempt,
        ),
    ];
    libtest_mimic::run(&libtest_mimic::Arguments::from_args(), trials).exit_code()
}

/// A trial this machine can always run; it fails by panicking.
fn plain(name: &str, body: fn()) -> libtest_mimic::Trial {
    libtest_mimic::Trial::test(name, move || {
        body();
        Ok(())
    })
}

const STARTUP: Duration = Duration::from_secs(240);
const CLEANUP: Duration = Duration::from_secs(20);

/// A harness process this test started; SIGKILLed if the test ends early
/// (a failed assertion), so its reaper tears its stack down.
struct Harness(Child);

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Harness {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Harness {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// `kvcr-e2e stack up` writing its description to `manifest`.
fn stack_up(manifest: &Path, runs: &Path) -> Harness {
    Harness(
        Command::new(env!("CARGO_BIN_EXE_kvcr-e2e"))
            .args(["stack", "up", "--manifest"])
            .arg(manifest)
            .arg("--run-dir")
            .arg(runs)
            .current_dir(root())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("kvcr-e2e starts"),
    )
}

fn read_manifest(path: &Path, owner: &mut Child) -> Value {
    poll(
        &format!("{} to be written", path.display()),
        STARTUP,
        || {
            if let Ok(Some(status)) = owner.try_wait() {
                panic!(
                    "the harness exited ({status}) before writing {}",
                    path.display()
                );
            }
            let text = std::fs::read_to_string(path).ok()?;
            serde_json::from_str(&text).ok()
        },
    )
}

/// Every component pid the description records.
fn component_pids(manifest: &Value) -> Vec<u32> {
    let mut pids = vec![manifest["frontend"]["process"]["pid"].as_u64()];
    pids.push(manifest["guard"]["process"]["pid"].as_u64());
    for w in manifest["workers"].as_array().into_iter().flatten() {
        pids.push(w["pid"].as_u64());
    }
    let pids: Vec<u32> = pids.into_iter().flatten().map(|p| p as u32).collect();
    assert!(
        pids.len() >= 4,
        "expected frontend, Guard and two workers in {manifest}"
    );
    pids
}

fn scratch_dir(manifest: &Value) -> PathBuf {
    PathBuf::from(
        manifest["layout"]["scratch_dir"]
            .as_str()
            .expect("layout.scratch_dir"),
    )
}

/// After the harness died: no recorded pid, no member of a recorded group,
/// and no scratch directory (pools, discovery, socket) survives.
fn assert_nothing_left(pids: &[u32], scratch: &Path) {
    let alive = || -> Vec<String> {
        pids.iter()
            .flat_map(|pid| procfs::group_members(*pid).into_iter().chain([*pid]))
            .filter(|p| procfs::is_alive(*p))
            .map(|p| {
                let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                format!(
                    "{p} ({})",
                    String::from_utf8_lossy(&cmdline).replace('\0', " ")
                )
            })
            .collect()
    };
    wait::until(
        "every process of the killed run to be gone",
        CLEANUP,
        Duration::from_millis(100),
        || {
            let left = alive();
            if left.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending(format!("still alive: {}", left.join(", ")))
            }
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    poll("the run's scratch directory to be removed", CLEANUP, || {
        (!scratch.exists()).then_some(())
    });
}

fn a_sigkilled_stack_owner_leaves_nothing_behind() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let manifest_path = tmp.path().join("stack.json");
    let mut owner = stack_up(&manifest_path, &tmp.path().join("runs"));
    let manifest = read_manifest(&manifest_path, &mut owner);
    let pids = component_pids(&manifest);
    assert!(pids.iter().all(|p| procfs::is_alive(*p)), "the stack is up");
    owner.kill().unwrap(); // SIGKILL: no teardown code runs
    owner.wait().unwrap();
    assert_nothing_left(&pids, &scratch_dir(&manifest));
}

/// The `phase1` harness binary cargo built for this run (same deps dir).
fn phase1_binary() -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("phase1-") && !name.contains('.')
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("cargo builds the phase1 test binary before running tests")
}

fn a_phase1_run_sigkilled_mid_case_leaves_nothing_behind() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let mut harness = Harness(
        Command::new(phase1_binary())
            .args(["--run-dir"])
            .arg(&runs)
            .args(["--cases", "TC-05,TC-06"])
            .current_dir(root())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let manifest = read_manifest(&runs.join("latest/stack.json"), &mut harness);
    let pids = component_pids(&manifest);
    // Let one trial finish and the next start, then kill it without warning.
    let finished = poll("the first trial's results", STARTUP, || {
        let text = std::fs::read_to_string(runs.join("latest/results.json")).ok()?;
        let results: serde_json::Value = serde_json::from_str(&text).ok()?;
        let first = results["run"]["cases"].as_array()?.first()?.clone();
        first["name"].as_str().map(String::from)
    });
    harness.kill().unwrap();
    harness.wait().unwrap();
    assert_nothing_left(&pids, &scratch_dir(&manifest));
    // What finished before the kill is reported, as CI would publish it.
    let junit = std::fs::read_to_string(runs.join("latest/junit.xml"))
        .expect("junit.xml written after the first trial");
    assert!(
        junit.contains(&finished),
        "{finished} not in junit.xml:\n{junit}"
    );
}

fn two_stacks_on_one_machine_do_not_collide() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let (m1, m2) = (tmp.path().join("one.json"), tmp.path().join("two.json"));
    let mut first = stack_up(&m1, &tmp.path().join("runs1"));
    let mut second = stack_up(&m2, &tmp.path().join("runs2"));
    let (a, b) = (
        read_manifest(&m1, &mut first),
        read_manifest(&m2, &mut second),
    );

    let ports = |m: &Value| {
        let mut p = vec![m["context"]["frontend_port"].as_u64().unwrap()];
        for w in m["workers"].as_array().unwrap() {
            p.push(w["slot"]["control_port"].as_u64().unwrap());
            p.push(w["slot"]["metrics_port"].as_u64().unwrap());
        }
        p
    };
    let (pa, pb) = (ports(&a), ports(&b));
    assert!(
        pa.iter().all(|p| !pb.contains(p)),
        "ports collide: {pa:?} vs {pb:?}"
    );
    for key in ["work_dir", "guard_socket", "pool_dir"] {
        assert_ne!(a["context"][key], b["context"][key], "{key} is shared");
    }
    assert_ne!(
        a["context"]["compatibility_digest"],
        b["context"]["compatibility_digest"]
    );

    for (manifest, owner) in [(&m1, &mut first), (&m2, &mut second)] {
        let status = Command::new(env!("CARGO_BIN_EXE_kvcr-e2e"))
            .args(["stack", "down", "--manifest"])
            .arg(manifest)
            .status()
            .unwrap();
        assert!(status.success(), "stack down {}", manifest.display());
        owner.wait().unwrap();
    }
    assert_nothing_left(&component_pids(&a), &scratch_dir(&a));
    assert_nothing_left(&component_pids(&b), &scratch_dir(&b));
}

fn attached_runs_use_a_warm_stack_and_destructive_cases_restore_it() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let manifest_path = tmp.path().join("stack.json");
    let mut owner = stack_up(&manifest_path, &tmp.path().join("owner-runs"));
    let before = read_manifest(&manifest_path, &mut owner);
    let attached_run = |case: &str| {
        let started = Instant::now();
        let output = Command::new(phase1_binary())
            .arg("--attach")
            .arg(&manifest_path)
            .arg("--run-dir")
            .arg(tmp.path().join("attached-runs"))
            .arg(case)
            .current_dir(root())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "attached {case} failed:\n{text}");
        assert!(
            text.contains(" passed; 0 failed") && !text.contains(" 0 passed;"),
            "attached {case} ran no case:\n{text}"
        );
        assert!(text.contains("attached to the stack"), "{text}");
        started.elapsed()
    };
    // A destructive case kills worker A and restores the stack it attached to.
    attached_run("TC-04");
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    let replacement = after["workers"][0]["pid"].as_u64().unwrap() as u32;
    assert_ne!(
        replacement,
        before["workers"][0]["pid"].as_u64().unwrap() as u32,
        "A was replaced"
    );
    assert!(
        procfs::is_alive(replacement),
        "the replacement outlives the attached run"
    );
    // The next attached run finds the stack whole, and starts nothing.
    let warm = attached_run("TC-03");
    eprintln!("TC-03 against a warm stack took {warm:?}");

    let status = Command::new(env!("CARGO_BIN_EXE_kvcr-e2e"))
        .args(["stack", "down", "--manifest"])
        .arg(&manifest_path)
        .status()
        .unwrap();
    assert!(status.success());
    owner.wait().unwrap();
    let mut pids = component_pids(&before);
    pids.push(replacement);
    assert_nothing_left(&pids, &scratch_dir(&before));
}

/// The network namespace of `pid`, as `/proc/<pid>/ns/net` names it.
fn net_namespace(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()
}

fn a_two_node_run_sigkilled_leaves_no_process_namespace_or_link() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let mut harness = Harness(
        Command::new(phase1_binary())
            .args(["--run-dir"])
            .arg(&runs)
            .args(["--topology", "two-node", "--cases", "TC-01"])
            .current_dir(root())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let manifest = read_manifest(&runs.join("latest/stack.json"), &mut harness);
    let pids = component_pids(&manifest);
    // Node 1: the harness's `unshare` child and the namespace's first process.
    let holder = procfs::children(harness.id())
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "unshare")
        })
        .expect("the two-node harness owns an `unshare` (node 1)");
    let init = *procfs::children(holder)
        .first()
        .expect("node 1's first process");
    let namespace = net_namespace(init).expect("node 1's network namespace");
    assert_ne!(net_namespace(std::process::id()), Some(namespace.clone()));
    let interface = format!("kvh{init:x}");
    assert!(link_exists(&interface), "node 1's veth {interface} is up");
    let worker_b = manifest["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["slot"]["name"] == "B")
        .and_then(|w| w["pid"].as_u64())
        .expect("worker B in stack.json") as u32;
    let b_members = procfs::group_members(worker_b);
    assert!(
        b_members
            .iter()
            .any(|p| net_namespace(*p).as_ref() == Some(&namespace)),
        "worker B's group {b_members:?} runs inside node 1"
    );

    harness.kill().unwrap(); // SIGKILL: no teardown code runs
    harness.wait().unwrap();
    assert_nothing_left(&pids, &scratch_dir(&manifest));
    poll(
        "node 1's processes, namespace and veth to be gone",
        CLEANUP,
        || {
            let inside: Vec<u32> = std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|p| net_namespace(*p).as_ref() == Some(&namespace))
                .collect();
            (inside.is_empty()
                && !procfs::is_alive(holder)
                && !procfs::is_alive(init)
                && !link_exists(&interface))
            .then_some(())
        },
    );
}

/// Steps the machine's wall clock by `seconds` (negative: back).
fn step_wall_clock(seconds: i64) {
    use nix::sys::time::TimeSpec;
    use nix::time::{clock_gettime, clock_settime, ClockId};
    let now = clock_gettime(ClockId::CLOCK_REALTIME).unwrap();
    clock_settime(ClockId::CLOCK_REALTIME, now + TimeSpec::new(seconds, 0)).unwrap();
}

/// What failed CI on a fresh machine (F16 in docs/results.md): the wall
/// clock steps forward in the middle of a case, Dynamo's file discovery
/// drops the workers, the case fails. The suite sees the step, replaces
/// the workers that dropped out and runs the case again, which passes;
/// both attempts are in results.json and JUnit.
fn a_case_broken_by_a_wall_clock_step_passes_on_its_second_attempt() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    // The harness prints each clock event its watcher sees on stderr.
    let stderr_path = tmp.path().join("harness.stderr");
    let mut harness = Harness(
        Command::new(phase1_binary())
            .args(["--run-dir"])
            .arg(&runs)
            // TC-03 pins its requests to A and B, which is what a dropout
            // breaks (an unpinned request still finds a worker). At 40 ms a
            // prompt token it runs for about 15 s, so the step and the sweep
            // that follows it land inside its first attempt.
            .env("PHASE1_CPU_ENGINE_PREFILL_US_PER_TOKEN", "40000")
            .args(["TC-03::hinted_peer_transfer", "--exact"])
            .current_dir(root())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let manifest = read_manifest(&runs.join("latest/stack.json"), &mut harness);
    let instances = scratch_dir(&manifest).join("discovery/v1/instances");
    let generate_entries = || {
        std::fs::read_dir(&instances)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().contains("generate"))
            .count()
    };
    poll("TC-03 to start", STARTUP, || {
        runs.join("latest/cases/TC-03-hinted_peer_transfer")
            .exists()
            .then_some(())
    });
    step_wall_clock(15);
    // Every entry is then 15 s old, past Dynamo's 10 s: the next sweep of
    // any process deletes them all.
    poll(
        "every worker's discovery entry to be deleted after the step",
        CLEANUP,
        || (generate_entries() == 0).then_some(()),
    );
    // Held until the harness's clock watcher (one sample every 250 ms) saw
    // it: a step back inside the same sample would cancel it out (F28).
    poll("the harness to see the step forward", CLEANUP, || {
        std::fs::read_to_string(&stderr_path)
            .unwrap_or_default()
            .contains("wall clock stepped +15.0 s")
            .then_some(())
    });
    step_wall_clock(-15);
    let status = poll("the run to end", STARTUP, || harness.try_wait().unwrap());
    assert!(status.success(), "the run failed: {status}");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(runs.join("latest/results.json")).unwrap())
            .unwrap();
    let tc03 = &results["run"]["cases"][0];
    assert_eq!(tc03["outcome"], "passed", "{tc03}");
    let retried = tc03["retried"]
        .as_array()
        .unwrap_or_else(|| panic!("TC-03 passed on its first attempt: the step missed it: {tc03}"));
    assert_eq!(retried.len(), 1, "{tc03}");
    assert!(
        retried[0]["clock_events"][0]
            .as_str()
            .is_some_and(|e| e.starts_with("the machine's wall clock stepped +15.0 s")),
        "{tc03}"
    );
    let junit = std::fs::read_to_string(runs.join("latest/junit.xml")).unwrap();
    assert!(junit.contains("<flakyFailure"), "{junit}");
    assert!(
        runs.join("latest/cases/TC-03-hinted_peer_transfer-attempt2")
            .is_dir(),
        "the second attempt's evidence"
    );
}
