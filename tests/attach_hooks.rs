//! Attach to a stack this run did not start, with the kill delivered by the
//! stack description's hook: TC-04 passes through the hook, and a hook that
//! kills nothing fails TC-04 with "fault not applied".

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

    fn set_kill_hook(&self, argv: &[&str]) {
        let text = std::fs::read_to_string(&self.manifest).expect("description");
        let mut value: Value = serde_json::from_str(&text).expect("json");
        value["hooks"] = serde_json::json!({ "kill_worker": argv });
        std::fs::write(&self.manifest, value.to_string()).expect("write description");
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
fn tc04_kills_through_the_hook_and_a_hook_that_kills_nothing_fails_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stack = DeployedStack::up(dir.path());
    let marker = dir.path().join("hook-calls");

    // A hook that does nothing: the kill is verified, so TC-04 must fail.
    stack.set_kill_hook(&["true"]);
    let (passed, output) = tc04(&stack, &dir.path().join("runs-noop"));
    assert!(
        !passed,
        "TC-04 passed with a kill hook that kills nothing:\n{output}"
    );
    assert!(
        output.contains("fault not applied") && output.contains("kill hook `true`"),
        "TC-04 names the hook that did not kill:\n{output}"
    );

    // The real hook: the deployer's own kill, recorded so we see it ran.
    let script = format!(
        "echo {{worker}} {{pid}} >> {}; kill -KILL {{pid}}",
        marker.display()
    );
    stack.set_kill_hook(&["sh", "-c", &script]);
    let runs = dir.path().join("runs-hook");
    let (passed, output) = tc04(&stack, &runs);
    assert!(passed, "TC-04 through the kill hook failed:\n{output}");
    let calls = std::fs::read_to_string(&marker).expect("the hook ran");
    assert!(calls.starts_with("A "), "the hook killed worker A: {calls}");
    let fault = std::fs::read_to_string(
        runs.join("latest/cases/TC-04-guard_takeover_and_replacement/fault.json"),
    )
    .expect("TC-04 recorded its fault");
    assert!(
        fault.contains("\"hook\""),
        "fault.json records the hook run: {fault}"
    );
    // The hooks survive the replacement's rewrite of the description.
    let text = std::fs::read_to_string(&stack.manifest).expect("description");
    assert!(
        text.contains("kill_worker"),
        "hooks kept in {}",
        stack.manifest.display()
    );
}
