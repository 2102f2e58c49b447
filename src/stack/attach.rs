//! Attach mode: a stack brought up by another process (`kvcr-e2e stack up`)
//! described by its `stack.json`, used without provisioning or teardown.
//!
//! The owner stops everything when it is told to (`kvcr-e2e stack down`).
//! A destructive case on an attached stack starts its replacement so that
//! it outlives the attaching run, and records it in the same `stack.json`,
//! where the owner finds it at teardown.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::engine::{Engine, LaunchContext, WorkerSlot};
use crate::proc::{procfs, Supervised};

use super::{
    ByHooks, Control, Layout, Parts, Placement, Reach, Registration, Stack, StackOptions,
    StackPlan, StartupTimings, Worker,
};

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("cannot read the stack description {path}: {error}")]
    Read { path: PathBuf, error: String },
    #[error("the stack in {path} {problem}")]
    Mismatch { path: PathBuf, problem: String },
    #[error("the stack in {path} runs in another PID namespace and {what} does not answer at {address}; is it running, and is {address} reachable from here?")]
    Unreachable {
        path: PathBuf,
        what: String,
        address: String,
    },
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
    /// The owner's PID namespace; absent in descriptions before it was kept.
    #[serde(default)]
    pid_namespace: Option<String>,
    #[serde(default)]
    logs_url: Option<String>,
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
///
/// A stack in another PID namespace (its description names another one) is
/// attached through URLs only: its frontend and workers must answer at
/// their URLs, and its logs are mirrored into `mirror_dir` from the URL its
/// owner serves them at.
pub fn attach(
    engine: Arc<dyn Engine>,
    path: &Path,
    mirror_dir: &Path,
) -> Result<Stack, AttachError> {
    attach_with(engine, path, mirror_dir, false)
}

/// [`attach`] to a stack some of whose workers died, to replace them
/// (`kvcr-e2e stack replace-worker`): a dead worker is kept, not an error.
pub fn attach_to_repair(engine: Arc<dyn Engine>, path: &Path) -> Result<Stack, AttachError> {
    attach_with(engine, path, Path::new("/nonexistent"), true)
}

fn attach_with(
    engine: Arc<dyn Engine>,
    path: &Path,
    mirror_dir: &Path,
    dead_workers_ok: bool,
) -> Result<Stack, AttachError> {
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
    // Pids mean something here only in the stack's own PID namespace.
    let control = ByHooks::new(Reach::of(
        m.pid_namespace.as_deref(),
        procfs::pid_namespace().as_deref(),
        mirror_dir,
    ));
    let sees_processes = control.sees_processes();
    let logs_url = m.logs_url.clone();
    // A log of the stack as this run reads it: its mirror from the log URL
    // when attached through URLs (without one, the owner's path, which the
    // readers then report as unreadable).
    let mirrored = |log: &Path| -> PathBuf {
        let (Some(url), Some(file)) = (&logs_url, log.file_name().and_then(|f| f.to_str())) else {
            return log.to_path_buf();
        };
        let local = mirror_dir.join(file);
        match super::log_url::mirror(url, file, &local) {
            Ok(()) => local,
            Err(e) => {
                tracing::warn!("cannot mirror {url}/{file}: {e}");
                log.to_path_buf()
            }
        }
    };
    let handle = |what: &str, name: String, pid: u32, log: PathBuf, url: Option<&str>| {
        if sees_processes {
            let dead_ok = dead_workers_ok && what.starts_with("worker ");
            return if dead_ok || procfs::is_alive(pid) {
                Ok(Supervised::attach(name, pid, log))
            } else {
                Err(AttachError::Gone {
                    path: path.to_path_buf(),
                    what: what.to_string(),
                    pid,
                })
            };
        }
        // Seen only through the network: the URL must answer, and the log
        // is read from the owner's log URL.
        let address = url.map(host_port).unwrap_or_default();
        let log = mirrored(&log);
        let process = Supervised::remote(name, address.clone(), log);
        if process.is_running() {
            Ok(process)
        } else {
            Err(AttachError::Unreachable {
                path: path.to_path_buf(),
                what: what.to_string(),
                address,
            })
        }
    };
    if sees_processes {
        handle(
            "its owner",
            "owner".into(),
            m.owner_pid,
            PathBuf::new(),
            None,
        )?;
    }
    let frontend_url = m.context.frontend_url();
    let frontend = handle(
        "the frontend",
        m.frontend.process.name,
        m.frontend.process.pid,
        m.frontend.process.log,
        Some(&frontend_url),
    )?;
    let workers = m
        .workers
        .into_iter()
        .map(|w| {
            let process = handle(
                &format!("worker {}", w.slot.name),
                w.slot.process_name(),
                w.pid,
                w.log,
                Some(&w.ready.metrics_url),
            )?;
            Ok(Arc::new(Worker {
                slot: w.slot,
                process,
                ready: w.ready,
            }))
        })
        .collect::<Result<Vec<_>, AttachError>>()?;
    // A Guard listens on no port of its own (only on a dead worker's
    // control port): seen through URLs, its liveness is unknown.
    let guard_handle = |g: ProcessEntry| {
        Arc::new(if sees_processes {
            Supervised::attach(g.name, g.pid, g.log)
        } else {
            Supervised::remote(g.name, String::new(), mirrored(&g.log))
        })
    };
    // Descriptions before `guards` was kept name the first Guard only.
    let guards: Vec<Arc<Supervised>> = if m.guards.is_empty() {
        m.guard
            .map(|g| guard_handle(g.process))
            .into_iter()
            .collect()
    } else {
        m.guards.into_iter().map(guard_handle).collect()
    };
    let slots = workers.iter().map(|w| w.slot.clone()).collect();
    Ok(Stack::new(Parts {
        plan: StackPlan {
            engine,
            ctx: m.context,
            layout: m.layout,
            slots,
            placement: Placement::local(),
            options: m.options,
            owner_pid: m.owner_pid,
            bare_port: 0,
            started: std::time::Instant::now(),
        },
        control: Box::new(control),
        frontend,
        guards,
        workers,
        timings: m.startup,
        manifest: Some(path.to_path_buf()),
        logs_url: m.logs_url,
    }))
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
                    // Pid 0: a worker a hook started, which this process
                    // never saw (signalling group 0 would hit our own).
                    if e.pid == 0 {
                        return None;
                    }
                    Some(Supervised::attach(e.slot.process_name(), e.pid, e.log))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `host:port` of a URL such as `http://127.0.0.1:8123/metrics`.
fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::plan::tests::{example_options, phase1_engine};

    /// A description of a stack with no worker and no Guard: its owner and
    /// frontend are `pid` in PID namespace `namespace`, its frontend
    /// listens on `port`.
    fn description(
        engine: &dyn Engine,
        dir: &Path,
        pid: u32,
        namespace: Option<String>,
        port: u16,
    ) -> PathBuf {
        let mut context = crate::engine::testing::example_context();
        context.frontend_port = port;
        let description = serde_json::json!({
            "engine": engine.name(),
            "geometry": engine.geometry(),
            "owner_pid": pid,
            "pid_namespace": namespace,
            "frontend": {"process": {"name": "frontend", "pid": pid, "log": dir.join("frontend.log")}},
            "guard": null,
            "workers": [],
            "context": context,
            "layout": Layout {logs_dir: dir.to_path_buf(), scratch_dir: dir.to_path_buf()},
            "options": example_options(dir),
            "startup": StartupTimings::default(),
        });
        let path = dir.join("stack.json");
        std::fs::write(&path, description.to_string()).expect("write stack.json");
        path
    }

    /// A port nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    }

    #[test]
    fn a_stack_in_this_pid_namespace_is_attached_by_its_processes_and_never_torn_down() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = phase1_engine();
        // Its owner and frontend: a process of its own group, alive.
        let mut owner = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let path = description(
            engine.as_ref(),
            dir.path(),
            owner.id(),
            procfs::pid_namespace(),
            closed_port(),
        );
        let attached = attach(engine, &path, dir.path());
        let stops = attached.as_ref().ok().map(|stack| stack.teardown());
        let alive = procfs::is_alive(owner.id());
        let _ = owner.kill();
        let _ = owner.wait();
        let stack = attached.unwrap_or_else(|e| panic!("{e}"));
        assert!(!stack.control().owns());
        assert!(stack.control().sees_processes());
        assert_eq!(stack.control().mirror_dir(), None);
        // The owner tears it down: this run stops nothing.
        assert!(stops.is_some_and(|s| s.is_empty()));
        assert!(alive, "the owner's frontend was stopped by an attached run");
    }

    #[test]
    fn a_stack_in_this_pid_namespace_whose_owner_is_gone_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = phase1_engine();
        let mut gone = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = gone.id();
        gone.wait().expect("wait");
        let path = description(
            engine.as_ref(),
            dir.path(),
            pid,
            procfs::pid_namespace(),
            closed_port(),
        );
        match attach(engine, &path, dir.path()) {
            Err(AttachError::Gone { what, .. }) => assert_eq!(what, "its owner"),
            Err(e) => panic!("expected the owner gone, got: {e}"),
            Ok(_) => panic!("attached to a stack whose owner is gone"),
        }
    }

    #[test]
    fn a_stack_in_another_pid_namespace_is_reached_through_its_urls() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = phase1_engine();
        let port = closed_port();
        // Pid 1 of another namespace: never looked up here, only its URL.
        let path = description(engine.as_ref(), dir.path(), 1, Some("pid:[1]".into()), port);
        match attach(engine.clone(), &path, dir.path()) {
            Err(AttachError::Unreachable { what, address, .. }) => {
                assert_eq!(what, "the frontend");
                assert_eq!(address, format!("127.0.0.1:{port}"));
            }
            Err(e) => panic!("expected the frontend's URL to be tried, got: {e}"),
            Ok(_) => panic!("attached to a frontend nothing listens for"),
        }
        // With the frontend's port answering, the run attaches by URLs.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let path = description(engine.as_ref(), dir.path(), 1, Some("pid:[1]".into()), port);
        let mirror = dir.path().join("mirror");
        let stack = attach(engine, &path, &mirror).unwrap_or_else(|e| panic!("{e}"));
        assert!(!stack.control().owns());
        assert!(!stack.control().sees_processes());
        assert_eq!(stack.control().mirror_dir(), Some(mirror.as_path()));
        assert!(stack.teardown().is_empty());
    }
}
