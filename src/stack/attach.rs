//! Attach mode: a stack brought up by another process (`kvcr-e2e stack up`)
//! described by its `stack.json`, used without provisioning or teardown.
//!
//! The owner stops everything when it is told to (`kvcr-e2e stack down`).
//! A destructive case on an attached stack starts its replacement so that
//! it outlives the attaching run, and records it in the same `stack.json`,
//! where the owner finds it at teardown.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use crate::engine::{Engine, LaunchContext, WorkerSlot};
use crate::proc::{procfs, Supervised};

use super::{Layout, Registration, Stack, StackOptions, StartupTimings, Worker};

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("cannot read the stack description {path}: {error}")]
    Read { path: PathBuf, error: String },
    #[error("the stack in {path} {problem}")]
    Mismatch { path: PathBuf, problem: String },
    #[error("the stack in {path} is not running: {what} (pid {pid}) is gone; start one with `cargo run -- stack up`")]
    Gone {
        path: PathBuf,
        what: String,
        pid: u32,
    },
}

#[derive(Deserialize)]
struct ProcessEntry {
    name: String,
    pid: u32,
    log: PathBuf,
}

#[derive(Deserialize)]
struct WorkerEntry {
    slot: WorkerSlot,
    pid: u32,
    log: PathBuf,
    ready: Registration,
}

#[derive(Deserialize)]
struct GuardEntry {
    process: ProcessEntry,
}

#[derive(Deserialize)]
struct FrontendEntry {
    process: ProcessEntry,
}

/// The parts of `stack.json` attach mode reads.
#[derive(Deserialize)]
struct Manifest {
    engine: String,
    geometry: crate::engine::Geometry,
    owner_pid: u32,
    frontend: FrontendEntry,
    guard: Option<GuardEntry>,
    #[serde(default)]
    guards: Vec<ProcessEntry>,
    workers: Vec<WorkerEntry>,
    context: LaunchContext,
    layout: Layout,
    options: StackOptions,
    startup: StartupTimings,
}

/// Reads `stack.json` at `path` and checks the stack is alive and runs what
/// `engine` expects.
pub fn attach(engine: Arc<dyn Engine>, path: &Path) -> Result<Stack, AttachError> {
    let text = std::fs::read_to_string(path).map_err(|e| AttachError::Read {
        path: path.to_path_buf(),
        error: e.to_string(),
    })?;
    let m: Manifest = serde_json::from_str(&text).map_err(|e| AttachError::Read {
        path: path.to_path_buf(),
        error: e.to_string(),
    })?;
    let mismatch = |problem: String| AttachError::Mismatch {
        path: path.to_path_buf(),
        problem,
    };
    if m.engine != engine.name() {
        return Err(mismatch(format!(
            "runs engine {}, the settings ask for {}",
            m.engine,
            engine.name()
        )));
    }
    if m.geometry != engine.geometry() {
        return Err(mismatch(format!(
            "has geometry {}, the settings ask for {}",
            m.geometry.name,
            engine.geometry().name
        )));
    }
    let alive = |what: &str, pid: u32| {
        if procfs::is_alive(pid) {
            Ok(())
        } else {
            Err(AttachError::Gone {
                path: path.to_path_buf(),
                what: what.to_string(),
                pid,
            })
        }
    };
    alive("its owner", m.owner_pid)?;
    alive("the frontend", m.frontend.process.pid)?;
    let workers = m
        .workers
        .into_iter()
        .map(|w| {
            alive(&format!("worker {}", w.slot.name), w.pid)?;
            let process = Supervised::attach(w.slot.process_name(), w.pid, w.log);
            Ok(Arc::new(Worker {
                slot: w.slot,
                process,
                ready: w.ready,
            }))
        })
        .collect::<Result<Vec<_>, AttachError>>()?;
    let guard = m.guard.map(|g| {
        Arc::new(Supervised::attach(
            g.process.name,
            g.process.pid,
            g.process.log,
        ))
    });
    let guards: Vec<Arc<Supervised>> = if m.guards.is_empty() {
        guard.iter().cloned().collect()
    } else {
        m.guards
            .into_iter()
            .map(|g| Arc::new(Supervised::attach(g.name, g.pid, g.log)))
            .collect()
    };
    let slots = workers.iter().map(|w| w.slot.clone()).collect();
    let frontend = Supervised::attach(
        m.frontend.process.name,
        m.frontend.process.pid,
        m.frontend.process.log,
    );
    Ok(Stack {
        engine,
        ctx: m.context,
        layout: m.layout,
        frontend: Mutex::new(Arc::new(frontend)),
        guard,
        guards,
        workers: Mutex::new(workers),
        slots,
        references: Mutex::new(Vec::new()),
        retired: Mutex::new(Vec::new()),
        retired_frontends: Mutex::new(Vec::new()),
        replacement_faults: Mutex::new(Vec::new()),
        timings: Mutex::new(m.startup),
        options: m.options,
        manifest: Mutex::new(Some(path.to_path_buf())),
        attached: true,
        owner_pid: m.owner_pid,
        bare_port: 0,
        started: std::time::Instant::now(),
        placement: super::Placement::local(),
    })
}

/// Pids of the workers a manifest lists (the owner's view after attached
/// runs replaced some).
pub fn manifest_worker_processes(path: &Path) -> Vec<Supervised> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(m) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    m.get("workers")
        .and_then(|w| w.as_array())
        .map(|workers| {
            workers
                .iter()
                .filter_map(|w| {
                    let e: WorkerEntry = serde_json::from_value(w.clone()).ok()?;
                    Some(Supervised::attach(e.slot.process_name(), e.pid, e.log))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Commands a stack description names for faults the harness does not
/// deliver itself, because it did not start the stack: a scheduler's or
/// orchestrator's own kill (`scancel --signal=KILL …`, `kubectl delete pod
/// …`, `podman exec … kill -KILL {pid}`). Each is an argv; `{worker}` (the
/// slot, `A`), `{process}` (`worker-A`) and `{pid}` are filled in.
///
/// ```json
/// "hooks": {"kill_worker": ["podman", "exec", "stack", "kill", "-KILL", "{pid}"]}
/// ```
#[derive(Debug, Clone, Default, serde::Serialize, Deserialize)]
pub struct Hooks {
    pub kill_worker: Option<Vec<String>>,
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
    }
}
