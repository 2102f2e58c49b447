//! Every generated Kubernetes object passes strict offline schema
//! validation against the pinned Kubernetes release, and a broken object
//! fails it (so the check can fail).

use std::path::{Path, PathBuf};

use kvcr_e2e::config;
use kvcr_e2e::runner::{self, validate, RunnerKind};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn settings(flags: &[&str]) -> config::Settings {
    let argv = std::iter::once("phase1").chain(flags.iter().copied());
    let args = config::split_args(argv).expect("flags parse").0;
    config::resolve(
        &args,
        &config::Env::from_pairs(Vec::<(String, String)>::new()),
    )
    .expect("settings resolve")
    .settings
}

/// Engine and topology combinations the shipped profiles support.
const COMBINATIONS: &[&[&str]] = &[
    &[],
    &["--geometry", "hybrid"],
    &["--engine", "vllm"],
    &["--engine", "vllm", "--topology", "2p1d"],
    &["--engine", "sglang"],
];

fn tool() -> PathBuf {
    validate::ensure_tool(root()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_generated_object_passes_strict_validation() {
    let tool = tool();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    for (i, flags) in COMBINATIONS.iter().enumerate() {
        let s = settings(flags);
        for kind in RunnerKind::ALL {
            let artifacts = runner::artifacts(kind, &s, root())
                .unwrap_or_else(|e| panic!("{} runner for {flags:?}: {e}", kind.as_str()));
            assert!(!artifacts.is_empty(), "{} wrote nothing", kind.as_str());
            let written = runner::write_all(
                &artifacts,
                &dir.path().join(format!("{i}/{}", kind.as_str())),
            )
            .expect("writes artifacts");
            if kind == RunnerKind::K8s {
                files.extend(written);
            }
        }
    }
    assert_eq!(
        files.len(),
        COMBINATIONS.len() * 3,
        "a Job, a stack pod and a service each"
    );
    validate::validate_strict(&tool, &files).unwrap_or_else(|e| panic!("{e}"));
}

/// The generated suite Job with `edit` applied.
fn broken_job(edit: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
    let artifacts = runner::artifacts(RunnerKind::K8s, &settings(&[]), root()).expect("plans");
    let job = artifacts
        .iter()
        .find(|a| a.name == "suite-job.json")
        .expect("a suite job");
    let mut value: serde_json::Value = serde_json::from_str(&job.contents).expect("json");
    edit(&mut value);
    value
}

fn rejected(value: &serde_json::Value) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broken.json");
    std::fs::write(&path, value.to_string()).expect("write");
    match validate::validate_strict(&tool(), &[path]) {
        Ok(()) => panic!("strict validation accepted a broken object:\n{value:#}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_misspelled_field_is_rejected() {
    let job = broken_job(|v| {
        let pod = &mut v["spec"]["template"]["spec"];
        let policy = pod["restartPolicy"].take();
        pod.as_object_mut()
            .expect("pod spec")
            .remove("restartPolicy");
        pod["restartPolcy"] = policy;
    });
    let report = rejected(&job);
    assert!(
        report.contains("restartPolcy"),
        "report names the field: {report}"
    );
}

#[test]
fn a_string_where_an_integer_belongs_is_rejected() {
    let job = broken_job(|v| v["spec"]["backoffLimit"] = "0".into());
    let report = rejected(&job);
    assert!(
        report.contains("backoffLimit") && report.contains("integer"),
        "{report}"
    );
}

/// Without a cluster, `runner k8s --apply` must stop in its preflight,
/// before applying anything, naming what is missing. The child gets no
/// cluster whatever this machine has: its `KUBECONFIG` names a file that
/// does not exist (so no current context), so the check runs everywhere.
#[test]
fn apply_without_a_cluster_fails_its_preflight_naming_what_is_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kvcr-e2e"))
        .args(["runner", "k8s", "--apply", "--out"])
        .arg(dir.path())
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
        .current_dir(root())
        .output()
        .expect("kvcr-e2e runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "--apply succeeded without a cluster: {stderr}"
    );
    assert!(
        stderr.contains("cannot `kubectl apply` the Kubernetes objects")
            && (stderr.contains("no `kubectl` on PATH")
                || stderr.contains("no cluster configured")),
        "the preflight names what is missing: {stderr}"
    );
}
