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
