//! Kubernetes objects for the suite, as serde structs (the subset of the
//! `batch/v1` and `v1` schemas the runner uses; field names are the API's).
//!
//! - `suite-job.json`: a Job whose single pod runs the harness and the whole
//!   stack (every address `127.0.0.1`), evidence on a volume.
//! - `stack-pod.json`: the stack alone, one container per component, the
//!   Guard as a native sidecar (an init container with `restartPolicy:
//!   Always`, Kubernetes 1.29+) sharing the workers' `/dev/shm` volume, so
//!   the pool it keeps survives a worker's death.
//! - `stack-service.json`: the frontend's port for a suite attached from
//!   outside the pod.
//!
//! GPU knobs: `nodeSelector` (`nvidia.com/gpu.present: "true"`),
//! `resources.limits["nvidia.com/gpu"]`, and the `/dev/shm` size
//! (`emptyDir.sizeLimit`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::RunnerSpec;
use crate::engine::slots::{self, Port};
use crate::engine::{self, LaunchContext};
use crate::proc::ProcessSpec;

/// Where the repository (and the stack's Python env) live in the image.
const REPO: &str = super::container::REPO_IN_IMAGE;
const FRONTEND_PORT: u16 = 8000;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ResourceRequirements {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    pub name: String,
    pub container_port: u16,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    pub resources: ResourceRequirements,
    pub volume_mounts: Vec<VolumeMount>,
    /// `Always` on an init container makes it a native sidecar.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyDirVolumeSource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub medium: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_limit: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimVolumeSource {
    pub claim_name: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub restart_policy: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    pub containers: Vec<Container>,
    pub volumes: Vec<Volume>,
    pub termination_grace_period_seconds: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PodTemplateSpec {
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    pub backoff_limit: i32,
    pub active_deadline_seconds: i64,
    pub template: PodTemplateSpec,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    pub name: String,
    pub port: u16,
    pub target_port: u16,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServiceSpec {
    pub selector: BTreeMap<String, String>,
    pub ports: Vec<ServicePort>,
}

/// A Kubernetes object the runner writes.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind")]
pub enum K8sObject {
    Job {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: ObjectMeta,
        spec: JobSpec,
    },
    Pod {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: ObjectMeta,
        spec: PodSpec,
    },
    Service {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: ObjectMeta,
        spec: ServiceSpec,
    },
}

impl K8sObject {
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            K8sObject::Job { metadata, .. }
            | K8sObject::Pod { metadata, .. }
            | K8sObject::Service { metadata, .. } => metadata,
        }
    }

    /// `suite-job.json`, `stack-pod.json`, `stack-service.json`.
    pub fn file_name(&self) -> String {
        let role = self
            .metadata()
            .labels
            .get("app.kubernetes.io/component")
            .map(String::as_str)
            .unwrap_or("object");
        let kind = match self {
            K8sObject::Job { .. } => "job",
            K8sObject::Pod { .. } => "pod",
            K8sObject::Service { .. } => "service",
        };
        format!("{role}-{kind}.json")
    }

    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            // Serializing plain structs of strings and numbers cannot fail.
            format!("{{\"error\": \"{e}\"}}")
        });
        text.push('\n');
        text
    }
}

fn meta(spec: &RunnerSpec, component: &str) -> ObjectMeta {
    let labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "kvcr-e2e".to_string()),
        ("app.kubernetes.io/component".into(), component.into()),
        ("kvcr-e2e/stack".into(), spec.job_name()),
    ]);
    ObjectMeta {
        name: format!("{}-{component}", spec.job_name()),
        labels,
    }
}

fn env_vars(pairs: impl IntoIterator<Item = (String, String)>) -> Vec<EnvVar> {
    pairs
        .into_iter()
        .map(|(name, value)| EnvVar { name, value })
        .collect()
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
    }
}

fn dshm(spec: &RunnerSpec) -> Volume {
    Volume {
        name: "dshm".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: Some(format!("{}Mi", spec.shm_mib)),
        }),
        persistent_volume_claim: None,
    }
}

fn gpu_node_selector(spec: &RunnerSpec) -> BTreeMap<String, String> {
    if spec.is_gpu() {
        BTreeMap::from([("nvidia.com/gpu.present".to_string(), "true".to_string())])
    } else {
        BTreeMap::new()
    }
}

fn resources(spec: &RunnerSpec, gpus: u32) -> ResourceRequirements {
    let mut r = ResourceRequirements::default();
    r.requests.insert("cpu".into(), spec.cpus.to_string());
    r.requests
        .insert("memory".into(), format!("{}Gi", spec.memory_gib));
    r.limits
        .insert("memory".into(), format!("{}Gi", spec.memory_gib));
    if gpus > 0 {
        r.limits.insert("nvidia.com/gpu".into(), gpus.to_string());
    }
    r
}

/// A stack component asks only for its GPUs; the pod's node has the rest.
fn gpu_limits(gpus: u32) -> ResourceRequirements {
    let mut r = ResourceRequirements::default();
    if gpus > 0 {
        r.limits.insert("nvidia.com/gpu".into(), gpus.to_string());
    }
    r
}

/// The Job that runs the suite and its whole stack in one pod.
fn suite_job(spec: &RunnerSpec) -> K8sObject {
    let metadata = meta(spec, "suite");
    // Evidence is written straight onto the evidence volume.
    let mut env = spec.harness_env();
    env.push(("PHASE1_RUN_DIR".into(), "/evidence/runs".into()));
    let container = Container {
        name: "phase1".into(),
        image: spec.image.clone(),
        command: ["cargo", "test", "--test", "phase1"]
            .map(String::from)
            .to_vec(),
        working_dir: Some(REPO.into()),
        env: env_vars(env),
        ports: Vec::new(),
        resources: resources(spec, spec.gpus),
        volume_mounts: vec![mount("dshm", "/dev/shm"), mount("evidence", "/evidence")],
        restart_policy: None,
    };
    let evidence = Volume {
        name: "evidence".into(),
        empty_dir: None,
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: "kvcr-e2e-evidence".into(),
        }),
    };
    K8sObject::Job {
        api_version: "batch/v1".into(),
        metadata: metadata.clone(),
        spec: JobSpec {
            backoff_limit: 0,
            active_deadline_seconds: i64::from(spec.time_limit_min) * 60,
            template: PodTemplateSpec {
                metadata,
                spec: PodSpec {
                    restart_policy: "Never".into(),
                    node_selector: gpu_node_selector(spec),
                    init_containers: Vec::new(),
                    containers: vec![container],
                    volumes: vec![dshm(spec), evidence],
                    termination_grace_period_seconds: 30,
                },
            },
        },
    }
}

/// Fixed paths and ports of the stack inside its pod.
fn pod_context(spec: &RunnerSpec) -> LaunchContext {
    let work = PathBuf::from("/dev/shm/kvcr-e2e");
    LaunchContext {
        python: PathBuf::from(if spec.is_gpu() {
            "/usr/bin/python3"
        } else {
            "/opt/kvcr-e2e/venv/bin/python"
        }),
        repo_root: PathBuf::from(REPO),
        logs_dir: PathBuf::from("/evidence/logs"),
        guard_socket: slots::guard_socket(&work),
        pool_dir: work.join("pools"),
        work_dir: work,
        host: "127.0.0.1".into(),
        frontend_port: FRONTEND_PORT,
        compatibility_digest: format!("{}-k8s", spec.job_name()),
        guard_count: 2,
    }
}

/// A component's container from its launch plan: the plan's argv and
/// environment; stdout is the component's log (`kubectl logs`).
fn component(spec: &RunnerSpec, name: &str, plan: &ProcessSpec, gpus: u32) -> Container {
    let mut command = vec![plan.program.display().to_string()];
    command.extend(plan.args.iter().cloned());
    Container {
        name: name.into(),
        image: spec.image.clone(),
        command,
        working_dir: plan.cwd.as_ref().map(|p| p.display().to_string()),
        env: env_vars(plan.env.clone()),
        ports: Vec::new(),
        resources: gpu_limits(gpus),
        volume_mounts: vec![mount("dshm", "/dev/shm")],
        restart_policy: None,
    }
}

/// The pod's own ports (it has a network namespace of its own): control
/// 17771.., metrics 18101.., KV events 20081.., side channel 5601.., one
/// each per slot in order.
fn pod_port(port: Port, slot: usize) -> u16 {
    let base = match port {
        Port::Control => 17771,
        Port::Metrics => 18101,
        Port::KvEvents => 20081,
        Port::SideChannel => 5601,
    };
    base + slot as u16
}

/// The stack pod: frontend and workers as containers, the Guard as a
/// native sidecar; all share `/dev/shm` (discovery, sockets, pools).
fn stack_pod(spec: &RunnerSpec, engine: &dyn engine::Engine) -> K8sObject {
    let ctx = pod_context(spec);
    let mut containers = Vec::new();
    let mut frontend = component(spec, "frontend", &engine.frontend(&ctx), 0);
    frontend.ports.push(ContainerPort {
        name: "http".into(),
        container_port: FRONTEND_PORT,
    });
    containers.push(frontend);
    let plans = engine.worker_plans();
    // Slots as the stack runner allots them, under the pod's /dev/shm.
    let slots = slots::allot(&plans, engine.guard_per_slot(), &ctx.work_dir, pod_port);
    for (plan, slot) in plans.iter().zip(&slots) {
        let gpus = plan.gpus.len() as u32;
        let mut worker = component(
            spec,
            &format!("worker-{}", plan.slot.to_lowercase()),
            &engine.worker(&ctx, slot),
            if spec.is_gpu() { gpus.max(1) } else { 0 },
        );
        worker.ports.push(ContainerPort {
            name: format!("metrics-{}", plan.slot.to_lowercase()),
            container_port: slot.metrics_port,
        });
        containers.push(worker);
    }
    // One Guard shared by every slot, or one per slot: as the stack runner
    // starts them (each its own socket and pool directory).
    let guard_contexts: Vec<(String, LaunchContext)> = if engine.guard_per_slot() {
        slots
            .iter()
            .map(|slot| {
                let pools = ctx.work_dir.join(format!("pool-{}", slot.guard_service));
                (
                    slot.guard_service.clone(),
                    ctx.for_guard(slot.guard_socket.clone(), pools, 1),
                )
            })
            .collect()
    } else {
        vec![("guard".to_string(), ctx.clone())]
    };
    let init_containers = guard_contexts
        .iter()
        .filter_map(|(name, guard_ctx)| {
            let plan = engine.guard(guard_ctx)?;
            let mut guard = component(spec, name, &plan, 0);
            guard.restart_policy = Some("Always".into());
            Some(guard)
        })
        .collect();
    K8sObject::Pod {
        api_version: "v1".into(),
        metadata: meta(spec, "stack"),
        spec: PodSpec {
            restart_policy: "Never".into(),
            node_selector: gpu_node_selector(spec),
            init_containers,
            containers,
            volumes: vec![dshm(spec)],
            termination_grace_period_seconds: 30,
        },
    }
}

fn stack_service(spec: &RunnerSpec) -> K8sObject {
    let selector = meta(spec, "stack").labels;
    K8sObject::Service {
        api_version: "v1".into(),
        metadata: meta(spec, "stack"),
        spec: ServiceSpec {
            selector,
            ports: vec![ServicePort {
                name: "http".into(),
                port: FRONTEND_PORT,
                target_port: FRONTEND_PORT,
            }],
        },
    }
}

/// Every object for `settings`. The stack pod's containers come from the
/// engine's launch plans (GPU engines read `repo_root`'s engine profiles).
pub fn objects(
    settings: &crate::config::Settings,
    repo_root: &Path,
) -> Result<Vec<K8sObject>, String> {
    let spec = &RunnerSpec::from_settings(settings);
    let engine = settings.build_engine(repo_root)?;
    Ok(vec![
        suite_job(spec),
        stack_pod(spec, engine.as_ref()),
        stack_service(spec),
    ])
}
