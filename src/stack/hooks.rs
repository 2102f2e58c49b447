//! The deployer's own tooling, named in a stack description's `hooks`: the
//! harness runs these commands for what it cannot do itself on a stack it
//! did not start (kill a worker, start a replacement).

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Commands a stack description names for what the harness does not do
/// itself, because it did not start the stack. Each is an argv whose
/// placeholders are filled in:
///
/// - `kill_worker`: a scheduler's or orchestrator's own kill (`scancel
///   --signal=KILL …`, `kubectl delete pod …`, `podman exec … kill -KILL
///   {pid}`). `{worker}` (the slot, `A`), `{process}` (`worker-A`) and
///   `{pid}` (as the stack's description lists it, in the stack's own PID
///   namespace) are filled in.
/// - `replace_worker`: starts a replacement worker in a dead worker's slot
///   (same ports, same Guard group) and returns; the harness then finds the
///   replacement through the frontend's `/health` and the slot's metrics
///   URL. `{worker}` (`A`), `{process}` (the replacement, `worker-A.1`) and
///   `{generation}` (`1`) are filled in.
///
/// ```json
/// "hooks": {"kill_worker": ["podman", "exec", "stack", "kill", "-KILL", "{pid}"],
///           "replace_worker": ["podman", "exec", "stack", "kvcr-e2e", "stack",
///                              "replace-worker", "--worker", "{worker}"]}
/// ```
#[derive(Debug, Clone, Default, serde::Serialize, Deserialize)]
pub struct Hooks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_worker: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_worker: Option<Vec<String>>,
}

/// The pid the stack description at `path` lists for the worker in slot
/// `slot` (in the stack's own PID namespace; for hooks only).
pub fn described_pid(path: &Path, slot: &str) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value
        .get("workers")?
        .as_array()?
        .iter()
        .find(|w| w.pointer("/slot/name").and_then(|n| n.as_str()) == Some(slot))
        .and_then(|w| w.get("pid")?.as_u64())
        .map(|pid| pid as u32)
}

/// The `hooks` of the stack description at `path`, if it names any.
pub fn hooks(path: &Path) -> Option<Hooks> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    serde_json::from_value(value.get("hooks")?.clone()).ok()
}

/// What a hook did: the command as run, its exit status and output.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HookRun {
    pub argv: Vec<String>,
    pub status: String,
    pub output: String,
    pub elapsed_ms: u128,
}

/// Runs `template` with its placeholders filled from `vars`, waiting at
/// most `budget`. A hook that fails, or runs past its budget (it is then
/// killed), is an error that quotes its output.
pub fn run_hook(
    template: &[String],
    vars: &[(&str, String)],
    budget: std::time::Duration,
) -> Result<HookRun, String> {
    let argv: Vec<String> = template
        .iter()
        .map(|word| {
            vars.iter().fold(word.clone(), |w, (name, value)| {
                w.replace(&format!("{{{name}}}"), value)
            })
        })
        .collect();
    let Some((program, args)) = argv.split_first() else {
        return Err("the hook is an empty command".into());
    };
    let started = std::time::Instant::now();
    let log = tempfile_path();
    let out =
        std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", argv.join(" ")))?;
    let waited = crate::wait::until(
        format!("the hook `{}` to finish", argv.join(" ")),
        budget,
        std::time::Duration::from_millis(20),
        || match child.try_wait() {
            Ok(Some(status)) => crate::wait::Poll::Ready(status),
            Ok(None) => crate::wait::Poll::Pending("still running".into()),
            Err(e) => crate::wait::Poll::Abort(e.to_string()),
        },
    );
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let status = match waited {
        Ok(status) => status,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{e}; output: {}", output.trim()));
        }
    };
    let run = HookRun {
        argv: argv.clone(),
        status: status.to_string(),
        output: output.trim().to_string(),
        elapsed_ms: started.elapsed().as_millis(),
    };
    if status.success() {
        Ok(run)
    } else {
        Err(format!(
            "`{}` exited with {status}; output: {}",
            argv.join(" "),
            run.output
        ))
    }
}

fn tempfile_path() -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("kvcr-e2e-hook-{}-{n}.log", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_hook_gets_its_placeholders_filled() {
        let run = run_hook(
            &argv(&["sh", "-c", "echo killing {process} {pid} of slot {worker}"]),
            &[
                ("worker", "A".into()),
                ("process", "worker-A".into()),
                ("pid", "42".into()),
            ],
            Duration::from_secs(10),
        )
        .expect("echo succeeds");
        assert_eq!(run.output, "killing worker-A 42 of slot A");
    }

    #[test]
    fn a_failing_hook_is_an_error_with_its_output() {
        let e = run_hook(
            &argv(&["sh", "-c", "echo no such pod >&2; exit 3"]),
            &[],
            Duration::from_secs(10),
        )
        .expect_err("exit 3 fails");
        assert!(
            e.contains("exit status: 3") && e.contains("no such pod"),
            "{e}"
        );
    }

    #[test]
    fn a_hook_past_its_budget_is_killed_and_reported() {
        let e = run_hook(&argv(&["sleep", "30"]), &[], Duration::from_millis(300))
            .expect_err("sleep outlives the budget");
        assert!(e.contains("the hook `sleep 30` to finish"), "{e}");
    }

    #[test]
    fn hooks_are_read_from_the_description() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stack.json");
        std::fs::write(
            &path,
            r#"{"hooks": {"kill_worker": ["kill", "-KILL", "{pid}"]}}"#,
        )
        .expect("write");
        assert_eq!(
            hooks(&path).and_then(|h| h.kill_worker),
            Some(argv(&["kill", "-KILL", "{pid}"]))
        );
        std::fs::write(&path, r#"{"owner_pid": 1}"#).expect("write");
        assert!(hooks(&path).is_none());
        std::fs::write(
            &path,
            r#"{"hooks": {"replace_worker": ["up", "{worker}"]},
                "workers": [{"slot": {"name": "A"}, "pid": 7}]}"#,
        )
        .expect("write");
        let read = hooks(&path).expect("hooks");
        assert_eq!(read.replace_worker, Some(argv(&["up", "{worker}"])));
        assert!(read.kill_worker.is_none());
        assert_eq!(described_pid(&path, "A"), Some(7));
        assert_eq!(described_pid(&path, "B"), None);
    }
}
