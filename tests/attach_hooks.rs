//! Attach to a stack this run did not start, with the kill and the
//! replacement delivered by the stack description's hooks: TC-04 passes
//! through both, a kill hook that kills nothing fails TC-04 with "fault not
//! applied", and a broken replace hook fails it with "replacement not
//! started", naming the hook and quoting its output.

mod lanes;

use std::path::Path;
use std::process::{Command, Stdio};

use lanes::{phase1_binary, poll, root, stack_budget, Owned};
use serde_json::Value;

/// `kvcr-e2e stack up` writing `manifest`; stopped by `stack down` (or
/// SIGKILL, then its reaper) when dropped.
struct DeployedStack {
    owner: Owned,
    manifest: std::path::PathBuf,
}

impl DeployedStack {
    fn up(dir: &Path) -> Self {
        let manifest = dir.join("stack.json");
        let owner = Owned(
            Command::new(env!("CARGO_BIN_EXE_kvcr-e2e"))
                .args(["stack", "up", "--manifest"])
                .arg(&manifest)
                .arg("--run-dir")
                .arg(dir.join("owner-runs"))
                .current_dir(root())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("kvcr-e2e starts"),
        );
        let mut stack = DeployedStack { owner, manifest };
        poll(
            &format!("{} to be written", stack.manifest.display()),
            stack_budget(),
            || {
                if let Ok(Some(status)) = stack.owner.0.try_wait() {
                    panic!("`kvcr-e2e stack up` exited ({status}) before writing its description");
                }
                std::fs::read_to_string(&stack.manifest).ok()
            },
        );
        stack
    }

    fn set_hooks(&self, hooks: Value) {
        let text = std::fs::read_to_string(&self.manifest).expect("description");
        let mut value: Value = serde_json::from_str(&text).expect("json");
        value["hooks"] = hooks;
        std::fs::write(&self.manifest, value.to_string()).expect("write description");
    }

    fn set_kill_hook(&self, argv: &[&str]) {
        self.set_hooks(serde_json::json!({ "kill_worker": argv }));
    }

    /// The deployer's replace: `kvcr-e2e stack replace-worker`, which starts
    /// the replacement where the stack runs and records it.
    fn replace_hook(&self, marker: &Path) -> Vec<String> {
        let script = format!(
            "echo {{worker}} {{process}} >> {marker}; exec {bin} stack replace-worker --manifest {manifest} --worker {{worker}}",
            marker = marker.display(),
            bin = env!("CARGO_BIN_EXE_kvcr-e2e"),
            manifest = self.manifest.display()
        );
        vec!["sh".into(), "-c".into(), script]
    }
}

impl Drop for DeployedStack {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_kvcr-e2e"))
            .args(["stack", "down", "--manifest"])
            .arg(&self.manifest)
            .stdout(Stdio::null())
            .status();
    }
}

/// Runs TC-04 attached to `stack`; returns (passed, output, run dir).
fn tc04(stack: &DeployedStack, runs: &Path) -> (bool, String) {
    let output = Command::new(phase1_binary())
        .arg("--attach")
        .arg(&stack.manifest)
        .arg("--run-dir")
        .arg(runs)
        .args(["TC-04", "--test-threads", "1"])
        // Bounds the wait for a kill that never happens (the no-op hook
        // below); a killed CPU worker is gone in well under a second.
        .args(["--kill-timeout-s", "15"])
        .current_dir(root())
        .output()
        .expect("phase1 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn tc04_kills_and_replaces_through_the_hooks_and_broken_hooks_fail_it() {
    // Kept after the test: its evidence (stack logs, runs) is read on failure.
    let dir = lanes::evidence_dir("attach_hooks");
    let stack = DeployedStack::up(&dir);
    let marker = dir.join("hook-calls");

    // A hook that does nothing: the kill is verified, so TC-04 must fail.
    stack.set_kill_hook(&["true"]);
    let (passed, output) = tc04(&stack, &dir.join("runs-noop"));
    assert!(
        !passed,
        "TC-04 passed with a kill hook that kills nothing:\n{output}"
    );
    assert!(
        output.contains("fault not applied") && output.contains("kill hook `true`"),
        "TC-04 names the hook that did not kill:\n{output}"
    );

    // The real hooks: the deployer's own kill and replace, recorded so we
    // see they ran.
    let script = format!(
        "echo {{worker}} {{pid}} >> {}; kill -KILL {{pid}}",
        marker.display()
    );
    let kill = ["sh", "-c", &script];
    let replaced = dir.join("replace-calls");
    stack.set_hooks(serde_json::json!({
        "kill_worker": kill,
        "replace_worker": stack.replace_hook(&replaced),
    }));
    let runs = dir.join("runs-hook");
    let (passed, output) = tc04(&stack, &runs);
    assert!(
        passed,
        "TC-04 through the kill and replace hooks failed:\n{output}"
    );
    let calls = std::fs::read_to_string(&marker).expect("the hook ran");
    assert!(calls.starts_with("A "), "the hook killed worker A: {calls}");
    // Both TC-04 cases kill A and replace it: A', then A''.
    let replaces = std::fs::read_to_string(&replaced).expect("the replace hook ran");
    assert!(
        replaces.starts_with("A worker-A.1\n"),
        "the hook replaced worker A: {replaces}"
    );
    let case = runs.join("latest/cases/TC-04-guard_takeover_and_replacement");
    let fault = std::fs::read_to_string(case.join("fault.json")).expect("TC-04 recorded its fault");
    assert!(
        fault.contains("\"hook\""),
        "fault.json records the hook run: {fault}"
    );
    let replacement =
        std::fs::read_to_string(case.join("replacement.json")).expect("TC-04 recorded A'");
    assert!(
        replacement.contains("replace-worker"),
        "replacement.json records the replace hook run: {replacement}"
    );
    // The hooks survive the replacement's rewrite of the description, which
    // lists the replacement the hook started.
    let text = std::fs::read_to_string(&stack.manifest).expect("description");
    assert!(
        text.contains("kill_worker") && text.contains("replace_worker"),
        "hooks kept in {}",
        stack.manifest.display()
    );
    assert!(
        text.contains("worker-A.1"),
        "the description lists A': {text}"
    );

    // A broken replace hook: the kill works, the replacement never starts.
    stack.set_hooks(serde_json::json!({
        "kill_worker": kill,
        "replace_worker": ["sh", "-c", "echo no such deployment: kvcr-stack >&2; exit 3"],
    }));
    let (passed, output) = tc04(&stack, &dir.join("runs-broken-replace"));
    assert!(
        !passed,
        "TC-04 passed with a replace hook that starts nothing:\n{output}"
    );
    assert!(
        output.contains("replacement not started")
            && output.contains("the replace hook failed")
            && output.contains("no such deployment: kvcr-stack"),
        "TC-04 names the replace hook that failed and quotes it:\n{output}"
    );
}
