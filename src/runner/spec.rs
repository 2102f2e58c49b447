//! What a runner needs to know, taken from the resolved settings.

use std::time::Duration;

use crate::config::{KvcrSpec, Settings};
use crate::engine::StackSpec;

/// The resolved settings a runner artifact depends on, and the resources
/// the stack needs from the scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerSpec {
    /// The stack the suite makes (engine, topology, geometry).
    pub stack: StackSpec,
    /// The profile layered over the default (`default` when none).
    pub profile: String,
    /// `--cases`: `None` runs every case.
    pub cases: Option<Vec<String>>,
    /// How long the stack may take to start (the user's setting, kept).
    pub startup_timeout: Duration,
    /// GPUs the stack needs on its node (0 for the CPU engine).
    pub gpus: u32,
    /// CPU cores to ask for.
    pub cpus: u32,
    /// Memory to ask for, GiB.
    pub memory_gib: u32,
    /// Size of `/dev/shm`: the host tiers and the Guard pools live there.
    pub shm_mib: u64,
    /// Wall-clock limit of the job, minutes.
    pub time_limit_min: u32,
    /// Image name the container and Kubernetes runners use.
    pub image: String,
    /// The KVCR build under test (`--kvcr`): the suite wherever it runs
    /// builds its KVCR env from it (a path must be visible there).
    pub kvcr: KvcrSpec,
}

impl RunnerSpec {
    pub fn from_settings(settings: &Settings) -> Self {
        let stack = settings.stack();
        let gpu = stack.on_gpus();
        // CPU stack: one Guard pool plus two workers' tiers and scratch.
        let cpu_shm_mib = (settings.cpu_engine.guard_pool_gb * 1024.0).ceil() as u64 + 512;
        RunnerSpec {
            stack,
            profile: settings.profile.clone(),
            cases: settings.cases.clone(),
            startup_timeout: settings.startup_timeout,
            gpus: stack.gpus_per_node(),
            cpus: if gpu { 16 } else { 2 },
            memory_gib: if gpu { 64 } else { 8 },
            shm_mib: if gpu { 16 * 1024 } else { cpu_shm_mib },
            time_limit_min: if gpu { 60 } else { 30 },
            image: if gpu {
                "kvcr-e2e-gpu:local".into()
            } else {
                "localhost/kvcr-e2e-cpu:local".into()
            },
            kvcr: settings.kvcr.clone(),
        }
    }

    pub fn is_gpu(&self) -> bool {
        self.stack.on_gpus()
    }

    /// A short name for jobs and objects, e.g. `kvcr-e2e-cpu-agg`.
    pub fn job_name(&self) -> String {
        format!(
            "kvcr-e2e-{}-{}",
            self.stack.engine.as_str(),
            self.stack.topology.as_str()
        )
    }

    /// The `PHASE1_*` settings that reproduce this run wherever the suite
    /// starts; everything else comes from the profile files in the repo.
    pub fn harness_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "PHASE1_ENGINE".to_string(),
                self.stack.engine.as_str().to_string(),
            ),
            (
                "PHASE1_TOPOLOGY".into(),
                self.stack.topology.as_str().into(),
            ),
            (
                "PHASE1_GEOMETRY".into(),
                self.stack.geometry.as_str().into(),
            ),
        ];
        if self.profile != "default" {
            env.push(("PHASE1_PROFILE".into(), self.profile.clone()));
        }
        if let Some(cases) = &self.cases {
            env.push(("PHASE1_CASES".into(), cases.join(",")));
        }
        env.push((
            "PHASE1_STARTUP_TIMEOUT_S".into(),
            self.startup_timeout.as_secs().to_string(),
        ));
        if !self.kvcr.is_default() {
            env.push(("PHASE1_KVCR".into(), self.kvcr.to_string()));
        }
        env
    }
}
