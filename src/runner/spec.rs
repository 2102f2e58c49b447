//! What a runner needs to know, taken from the resolved settings.

use crate::config::{Engine, Geometry, KvcrSpec, Settings, Topology};

/// The resolved settings a runner artifact depends on, and the resources
/// the stack needs from the scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerSpec {
    pub engine: Engine,
    pub topology: Topology,
    pub geometry: Geometry,
    /// The profile layered over the default (`default` when none).
    pub profile: String,
    /// `--cases`: `None` runs every case.
    pub cases: Option<Vec<String>>,
    /// Seconds the stack may take to start (the user's setting, kept).
    pub startup_timeout_s: u64,
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
        let gpu = settings.engine != Engine::Cpu;
        let gpus = match (settings.engine, settings.topology) {
            (Engine::Cpu, _) => 0,
            (_, Topology::TwoPrefillOneDecode) => 3,
            (_, Topology::TwoNode) => 1,
            _ => 2,
        };
        // CPU stack: one Guard pool plus two workers' tiers and scratch.
        let cpu_shm_mib = (settings.cpu_engine.guard_pool_gb * 1024.0).ceil() as u64 + 512;
        RunnerSpec {
            engine: settings.engine,
            topology: settings.topology,
            geometry: settings.geometry,
            profile: settings.profile.clone(),
            cases: settings.cases.clone(),
            startup_timeout_s: settings.startup_timeout_s,
            gpus,
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
        self.engine != Engine::Cpu
    }

    /// A short name for jobs and objects, e.g. `kvcr-e2e-cpu-agg`.
    pub fn job_name(&self) -> String {
        format!(
            "kvcr-e2e-{}-{}",
            self.engine.as_str(),
            self.topology.as_str()
        )
    }

    /// The `PHASE1_*` settings that reproduce this run wherever the suite
    /// starts; everything else comes from the profile files in the repo.
    pub fn harness_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "PHASE1_ENGINE".to_string(),
                self.engine.as_str().to_string(),
            ),
            ("PHASE1_TOPOLOGY".into(), self.topology.as_str().into()),
            ("PHASE1_GEOMETRY".into(), self.geometry.as_str().into()),
        ];
        if self.profile != "default" {
            env.push(("PHASE1_PROFILE".into(), self.profile.clone()));
        }
        if let Some(cases) = &self.cases {
            env.push(("PHASE1_CASES".into(), cases.join(",")));
        }
        env.push((
            "PHASE1_STARTUP_TIMEOUT_S".into(),
            self.startup_timeout_s.to_string(),
        ));
        if !self.kvcr.is_default() {
            env.push(("PHASE1_KVCR".into(), self.kvcr.to_string()));
        }
        env
    }
}
