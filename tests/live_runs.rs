//! The machine's registry of live runs across real processes, no stack:
//! `kvcr-e2e live-runs hold` registers the way a run does and holds its
//! entry until its stdin closes. An exclusive run waits for another process
//! and names it, two exclusive runs starting at once never overlap, a
//! SIGKILLed run's entry is removed by its reaper, and a session
//! (`live-runs exclusive -- CMD`) is not waited for by its own runs.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kvcr-e2e");
const BUDGET: Duration = Duration::from_secs(30);

/// A `live-runs hold` process and the lines it prints.
struct Holder {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

fn hold(dir: &Path, target: &str, exclusive: bool) -> Holder {
    let mut command = Command::new(BIN);
    command
        .args(["live-runs", "hold", "--target", target, "--live-runs-dir"])
        .arg(dir)
        .args(["--exclusive-timeout-s", "60"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if exclusive {
        command.arg("--exclusive");
    }
    let mut child = command.spawn().expect("kvcr-e2e starts");
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Holder {
        child,
        stdin,
        lines,
    }
}

impl Holder {
    /// The next line, which must start with `prefix`; the rest of it.
    fn expect(&self, prefix: &str) -> String {
        let line = self
            .lines
            .recv_timeout(BUDGET)
            .unwrap_or_else(|_| panic!("no line `{prefix} …` within {BUDGET:?}"));
        line.strip_prefix(prefix)
            .unwrap_or_else(|| panic!("expected `{prefix} …`, got `{line}`"))
            .trim()
            .to_string()
    }

    /// No line for a while: still waiting.
    fn silent_for(&self, d: Duration) -> bool {
        self.lines.recv_timeout(d).is_err()
    }

    /// Closes stdin: the holder ends its entry and exits.
    fn release(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("holder exits");
        assert!(status.success(), "{status}");
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn live(dir: &Path) -> Vec<String> {
    let out = Command::new(BIN)
        .args(["live-runs", "list", "--json", "--live-runs-dir"])
        .arg(dir)
        .output()
        .expect("list runs");
    assert!(out.status.success(), "{out:?}");
    let runs: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    runs.iter()
        .map(|r| r["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn poll(what: &str, mut ok: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !ok() {
        assert!(started.elapsed() < BUDGET, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_exclusive_run_waits_for_another_process_and_a_sigkilled_run_leaves_no_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    let first = hold(&dir, "first", false);
    let a = first.expect("registered");
    let second = hold(&dir, "second", true);
    assert_eq!(second.expect("waiting for"), a);
    assert!(second.silent_for(Duration::from_millis(1500)), "it waits");
    assert_eq!(live(&dir), vec![a.clone()], "the waiter is not registered");
    first.release();
    let b = second.expect("registered");
    assert_ne!(a, b);
    // A later, non-exclusive run registers at once, beside the exclusive one.
    let third = hold(&dir, "third", false);
    let c = third.expect("registered");
    assert_eq!(third.expect("beside"), format!("{b} Other"));
    let mut listed = live(&dir);
    listed.sort();
    let mut both = vec![b.clone(), c.clone()];
    both.sort();
    assert_eq!(listed, both);
    // SIGKILL: no teardown runs, the reaper removes the entry.
    let mut second = second;
    second.child.kill().expect("SIGKILL");
    let _ = second.child.wait();
    poll("the reaper to remove the killed run's entry", || {
        live(&dir) == vec![c.clone()]
    });
    third.release();
    assert!(live(&dir).is_empty());
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn two_exclusive_runs_starting_at_once_go_one_after_the_other() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    std::fs::create_dir_all(&dir).unwrap();
    let x = hold(&dir, "x", true);
    let y = hold(&dir, "y", true);
    // Whichever took the registry first registers; the other waits for it.
    let first_line = |h: &Holder| h.lines.recv_timeout(BUDGET).expect("a first line");
    let (lx, ly) = (first_line(&x), first_line(&y));
    let ((winner, won), (loser, waits)) = if lx.starts_with("registered") {
        ((x, lx), (y, ly))
    } else {
        ((y, ly), (x, lx))
    };
    let winner_id = won
        .strip_prefix("registered ")
        .unwrap_or_else(|| panic!("neither registered first: `{won}`, `{waits}`"))
        .to_string();
    assert_eq!(waits, format!("waiting for {winner_id}"), "never both");
    assert!(loser.silent_for(Duration::from_millis(1200)), "it waits");
    assert_eq!(live(&dir), vec![winner_id]);
    winner.release();
    let loser_id = loser.expect("registered");
    assert_eq!(live(&dir), vec![loser_id]);
    loser.release();
    assert!(live(&dir).is_empty());
}

#[test]
fn runs_inside_an_exclusive_session_do_not_wait_for_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    let out = Command::new(BIN)
        .args(["live-runs", "exclusive", "--live-runs-dir"])
        .arg(&dir)
        .args(["--exclusive-timeout-s", "60", "--", BIN])
        .args(["live-runs", "hold", "--exclusive", "--target", "inner"])
        .args(["--exclusive-timeout-s", "5", "--live-runs-dir"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("kvcr-e2e live-runs exclusive runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("registered "), "{stdout}");
    assert!(
        lines.len() == 2 && lines[1].starts_with("beside ") && lines[1].ends_with(" Session"),
        "{stdout}"
    );
    assert!(
        stderr.contains("live-runs exclusive: this machine's kvcr-e2e runs are"),
        "{stderr}"
    );
    assert!(live(&dir).is_empty(), "the session ended its entry");
}
