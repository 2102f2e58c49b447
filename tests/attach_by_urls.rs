//! Attach through URLs across PID namespaces: the stack runs in a PID
//! namespace of its own (`unshare --pid --fork --mount-proc`), so this run
//! sees none of its processes (its pids mean other processes here, or
//! none). The attaching run uses only what the description names as URLs
//! (frontend, each worker's metrics port, the owner's log URL for the Guard
//! and worker logs) and its hooks, which enter the namespace with `nsenter`
//! as a deployer's `kubectl exec` or `podman exec` would. TC-01 and TC-04
//! (kill and replacement through the hooks) pass.
//!
//! Needs root and util-linux (`unshare`, `nsenter`); otherwise the test
//! says why and passes without running.

mod lanes;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kvcr_e2e::proc::procfs;
use lanes::{phase1_binary, poll, root, stack_budget, Owned};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kvcr-e2e");

/// A stack brought up by `kvcr-e2e stack up` inside a new PID (and mount)
/// namespace. `sh` is the namespace's pid 1, so the harness is not (its
/// components treat a parent of pid 1 as a dead harness).
struct NamespacedStack {
    /// SIGKILLed when dropped: `--kill-child` then ends the namespace.
    _unshare: Owned,
    /// `sh`, the namespace's init, by its pid here.
    init: u32,
    manifest: PathBuf,
}

impl NamespacedStack {
    fn up(dir: &Path) -> Self {
        let manifest = dir.join("stack.json");
        let log = std::fs::File::create(dir.join("owner.log")).expect("owner log");
        let err = log.try_clone().expect("owner log");
        let mut unshare = Owned(
            Command::new("unshare")
                .args(["--pid", "--fork", "--kill-child", "--mount-proc", "--"])
                .args(["sh", "-c", "\"$@\" & wait $!", "ns-init"])
                .args([BIN, "stack", "up", "--manifest"])
                .arg(&manifest)
                .arg("--run-dir")
                .arg(dir.join("owner-runs"))
                .current_dir(root())
                .stdout(log)
                .stderr(err)
                .spawn()
                .expect("unshare starts"),
        );
        let pid = unshare.0.id();
        let init = poll(
            "unshare's child, the namespace's init",
            stack_budget(),
            || procfs::children(pid).first().copied(),
        );
        // Written once the stack serves; `logs_url` follows a moment later.
        poll(
            &format!("{} to name the owner's log URL", manifest.display()),
            stack_budget(),
            || {
                if let Ok(Some(status)) = unshare.0.try_wait() {
                    panic!(
                        "`stack up` in the namespace exited ({status}):\n{}",
                        std::fs::read_to_string(dir.join("owner.log")).unwrap_or_default()
                    );
                }
                let text = std::fs::read_to_string(&manifest).ok()?;
                let value: Value = serde_json::from_str(&text).ok()?;
                value.get("logs_url")?.as_str().map(|_| ())
            },
        );
        NamespacedStack {
            _unshare: unshare,
            init,
            manifest,
        }
    }

    /// `argv` run inside the stack's namespaces.
    fn inside(&self, argv: &[&str]) -> Vec<String> {
        let mut words: Vec<String> = ["nsenter", "--target"]
            .iter()
            .map(|w| w.to_string())
            .collect();
        words.push(self.init.to_string());
        words.extend(["--pid", "--mount", "--"].map(String::from));
        words.extend(argv.iter().map(|w| w.to_string()));
        words
    }

    fn description(&self) -> Value {
        let text = std::fs::read_to_string(&self.manifest).expect("description");
        serde_json::from_str(&text).expect("json")
    }
}

impl Drop for NamespacedStack {
    /// `stack down` where the stack runs; then `unshare --kill-child`
    /// (SIGKILLed as an [`Owned`]) takes the namespace's rest with it.
    fn drop(&mut self) {
        let manifest = self.manifest.display().to_string();
        let argv = self.inside(&[BIN, "stack", "down", "--manifest", &manifest]);
        let _ = Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn available() -> Result<(), String> {
    let root_uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false);
    if !root_uid {
        return Err("not root: cannot create a PID namespace with unshare".into());
    }
    for tool in ["unshare", "nsenter"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Err(format!("no `{tool}` (util-linux)"));
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let trials = vec![kvcr_e2e::suite::machine_trial(
        "tc01_and_tc04_pass_attached_through_urls_from_outside_the_stacks_pid_namespace",
        available,
        tc01_and_tc04_pass_attached_through_urls_from_outside_the_stacks_pid_namespace,
    )];
    libtest_mimic::run(&libtest_mimic::Arguments::from_args(), trials).exit_code()
}

fn tc01_and_tc04_pass_attached_through_urls_from_outside_the_stacks_pid_namespace() {
    // Kept after the test: its evidence (stack logs, runs) is read on failure.
    let dir = lanes::evidence_dir("attach_by_urls");
    let stack = NamespacedStack::up(&dir);
    let description = stack.description();
    assert_ne!(
        description["pid_namespace"].as_str(),
        procfs::pid_namespace().as_deref(),
        "the stack runs in a PID namespace of its own"
    );
    let manifest = stack.manifest.display().to_string();
    let hooks = serde_json::json!({
        "kill_worker": stack.inside(&["sh", "-c", "kill -KILL {pid}"]),
        "replace_worker": stack.inside(&[BIN, "stack", "replace-worker", "--manifest", &manifest, "--worker", "{worker}"]),
    });
    let mut description = description;
    description["hooks"] = hooks;
    std::fs::write(&stack.manifest, description.to_string()).expect("write hooks");

    let runs = dir.join("runs");
    let output = Command::new(phase1_binary())
        .arg("--attach")
        .arg(&stack.manifest)
        .arg("--run-dir")
        .arg(&runs)
        .args(["TC-01", "TC-04", "--test-threads", "1"])
        .current_dir(root())
        .output()
        .expect("phase1 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("through its URLs"),
        "the run attached through URLs:\n{text}"
    );
    assert!(
        output.status.success(),
        "TC-01 and TC-04 attached through URLs:\n{text}"
    );
    for case in [
        "TC-01::generation_correctness",
        "TC-04::guard_takeover_and_replacement",
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains(case) && l.contains("passed")),
            "{case} ran and passed:\n{text}"
        );
    }
    // The Guard's log came through the owner's log URL.
    let mirrored = runs.join("latest/logs/attached/guard.log");
    let guard = std::fs::read_to_string(&mirrored).unwrap_or_default();
    assert!(
        guard.contains("guard_promoted"),
        "the Guard log mirrored at {} shows the promotion",
        mirrored.display()
    );
}
