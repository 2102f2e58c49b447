//! A recorded request sent again, for real: `kvcr-e2e stack up`, TC-03
//! attached to it (a request pinned to A, one pinned to B), then
//! `kvcr-e2e replay` of each gives the reference tokens, through the stack
//! description (re-pinned by slot) and through `--frontend`; the recorded
//! `curl` line does too; and a replay against other reference tokens says
//! where they differ and exits 1. Starts a stack: on a shared machine run it
//! alone.

mod lanes;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use lanes::{phase1_binary, poll, root, stack_budget, Owned};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kvcr-e2e");

/// `kvcr-e2e stack up`; `stack down` when dropped.
struct Stack {
    _owner: Owned,
    manifest: PathBuf,
}

impl Stack {
    fn up(dir: &Path) -> Self {
        let manifest = dir.join("stack.json");
        let log = std::fs::File::create(dir.join("stack-up.log")).expect("log file");
        let mut owner = Owned(
            Command::new(BIN)
                .args(["stack", "up", "--manifest"])
                .arg(&manifest)
                .arg("--run-dir")
                .arg(dir.join("owner-runs"))
                .current_dir(root())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("kvcr-e2e starts"),
        );
        poll(
            &format!("{} to be written", manifest.display()),
            stack_budget(),
            || {
                if let Ok(Some(status)) = owner.0.try_wait() {
                    panic!(
                        "`kvcr-e2e stack up` exited ({status}); see {}",
                        dir.join("stack-up.log").display()
                    );
                }
                std::fs::read_to_string(&manifest).ok()
            },
        );
        Stack {
            _owner: owner,
            manifest,
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["stack", "down", "--manifest"])
            .arg(&self.manifest)
            .stdout(Stdio::null())
            .status();
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn replay(case: &Path, id: &str, target: &[&str]) -> Output {
    Command::new(BIN)
        .arg("replay")
        .arg(case)
        .arg(id)
        .args(target)
        .current_dir(root())
        .output()
        .expect("kvcr-e2e replay runs")
}

fn main() -> std::process::ExitCode {
    let trials = vec![kvcr_e2e::suite::machine_trial(
        "a_recorded_request_replayed_on_a_live_stack_gives_the_reference_tokens",
        curl_found,
        a_recorded_request_replayed_on_a_live_stack_gives_the_reference_tokens,
    )];
    libtest_mimic::run(&libtest_mimic::Arguments::from_args(), trials).exit_code()
}

/// The recorded `curl` line needs curl on this machine.
fn curl_found() -> Result<(), &'static str> {
    let found = Command::new("sh")
        .args(["-c", "command -v curl"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        Ok(())
    } else {
        Err("no curl to run the recorded curl line")
    }
}

fn a_recorded_request_replayed_on_a_live_stack_gives_the_reference_tokens() {
    let phase1 = phase1_binary();
    // Kept after the test: its evidence (stack logs, runs) is read on failure.
    let dir = lanes::evidence_dir("replay_live");
    let stack = Stack::up(&dir);
    let runs = dir.join("runs");
    let run = Command::new(phase1)
        .arg("--attach")
        .arg(&stack.manifest)
        .arg("--run-dir")
        .arg(&runs)
        .args(["TC-03", "--test-threads", "1"])
        .current_dir(root())
        .output()
        .expect("phase1 runs");
    assert!(run.status.success(), "TC-03 attached:\n{}", text(&run));
    let case = std::fs::canonicalize(runs.join("phase1/latest"))
        .expect("the run directory")
        .join("cases/TC-03-hinted_peer_transfer");
    let requests: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(case.join("requests.json")).expect("requests.json"),
    )
    .expect("json");
    let pinned = |slot: &str| {
        requests
            .iter()
            .find(|r| r["pinned_to"] == slot && r["sent"].is_object())
            .unwrap_or_else(|| panic!("no request pinned to {slot}: {requests:?}"))
    };
    let manifest = stack.manifest.display().to_string();
    for slot in ["A", "B"] {
        let id = pinned(slot)["request_id"].as_str().expect("an id");
        let out = replay(&case, id, &["--stack", &manifest]);
        let said = text(&out);
        assert!(out.status.success(), "replay of {id} on {slot}:\n{said}");
        assert!(said.contains("same as the reference (16 tokens)"), "{said}");
        assert!(
            said.contains(&format!("pin: worker {slot}: recorded instance ")),
            "{said}"
        );
    }
    // Through the frontend alone: the recorded pin is kept (the same stack here).
    let frontend: Value =
        serde_json::from_str(&std::fs::read_to_string(&stack.manifest).unwrap()).unwrap();
    let url = frontend["frontend"]["url"].as_str().expect("frontend url");
    let b = pinned("B");
    let id = b["request_id"].as_str().unwrap();
    let out = replay(&case, id, &["--frontend", url]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("recorded instance"), "{}", text(&out));
    // The recorded curl line, as a user would paste it (curl is the
    // trial's precondition).
    {
        let line = b["curl"].as_str().expect("a curl line");
        let out = Command::new("sh")
            .args(["-c", line])
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{line}\n{}", text(&out));
        let body: Value = serde_json::from_slice(&out.stdout).expect("a JSON answer");
        let got = kvcr_e2e::client::CompletionOutcome::from_body(200, body)
            .expect("a completion")
            .generated
            .token_ids;
        let reference: Vec<u32> = serde_json::from_value(b["reference_tokens"].clone()).unwrap();
        assert_eq!(got, Some(reference), "the curl line's tokens");
    }
    // Other reference tokens: the replay says where it differs, and fails.
    let altered = dir.join("altered/cases/TC-03");
    std::fs::create_dir_all(&altered).unwrap();
    let mut edited = requests.clone();
    for r in &mut edited {
        if r["request_id"] == id {
            r["reference_tokens"][3] = Value::from(999_999u32);
        }
    }
    std::fs::write(
        altered.join("requests.json"),
        serde_json::to_string(&edited).unwrap(),
    )
    .unwrap();
    let out = replay(&altered, id, &["--stack", &manifest]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("differs at position 3: the reference has token 999999"),
        "{}",
        text(&out)
    );
}
