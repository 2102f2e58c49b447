use std::path::Path;

use super::*;

fn settings(flags: &[&str]) -> crate::config::Settings {
    let argv = std::iter::once("phase1").chain(flags.iter().copied());
    let args = crate::config::split_args(argv).expect("test flags parse").0;
    crate::config::resolve(
        &args,
        &crate::config::Env::from_pairs(Vec::<(String, String)>::new()),
    )
    .expect("test settings resolve")
    .settings
}

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every artifact of `kind`, one after another under its file name.
fn rendered(kind: RunnerKind, flags: &[&str]) -> String {
    artifacts(kind, &settings(flags), repo_root())
        .expect("the shipped profiles plan every engine")
        .iter()
        .map(|a| {
            format!(
                "==> {} ({}) <==\n{}",
                a.name,
                if a.executable { "0755" } else { "0644" },
                a.contents
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn slurm_cpu_agg() {
    insta::assert_snapshot!(rendered(RunnerKind::Slurm, &["--cases", "TC-01,TC-03"]));
}

#[test]
fn slurm_vllm_agg() {
    insta::assert_snapshot!(rendered(RunnerKind::Slurm, &["--engine", "vllm"]));
}

#[test]
fn container_cpu_agg() {
    insta::assert_snapshot!(rendered(RunnerKind::Container, &[]));
}

#[test]
fn container_vllm_agg() {
    insta::assert_snapshot!(rendered(RunnerKind::Container, &["--engine", "vllm"]));
}

#[test]
fn k8s_cpu_agg() {
    insta::assert_snapshot!(rendered(RunnerKind::K8s, &[]));
}

#[test]
fn k8s_vllm_2p1d() {
    insta::assert_snapshot!(rendered(
        RunnerKind::K8s,
        &["--engine", "vllm", "--topology", "2p1d"]
    ));
}

#[test]
fn harness_env_reproduces_the_chosen_settings() {
    let s = settings(&[
        "--geometry",
        "hybrid",
        "--profile",
        "ci",
        "--cases",
        "TC-03",
    ]);
    let env = RunnerSpec::from_settings(&s).harness_env();
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("PHASE1_GEOMETRY"), Some("hybrid"));
    assert_eq!(get("PHASE1_PROFILE"), Some("ci"));
    assert_eq!(get("PHASE1_CASES"), Some("TC-03"));
    assert_eq!(
        get("PHASE1_STARTUP_TIMEOUT_S"),
        Some(s.startup_timeout_s.to_string().as_str())
    );
}

#[test]
fn gpu_objects_ask_for_gpus_and_a_gpu_node() {
    let objects = k8s::objects(&settings(&["--engine", "vllm"]), repo_root()).expect("vllm plans");
    let job = serde_json::to_value(&objects[0]).expect("serializes");
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
    assert_eq!(
        pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "2"
    );
    assert_eq!(pod["volumes"][0]["emptyDir"]["medium"], "Memory");
    let cpu = k8s::objects(&settings(&[]), repo_root()).expect("cpu plans");
    let cpu_job = serde_json::to_value(&cpu[0]).expect("serializes");
    assert!(cpu_job["spec"]["template"]["spec"]["nodeSelector"].is_null());
}

#[test]
fn the_guard_is_a_sidecar_sharing_the_workers_shm() {
    let objects = k8s::objects(&settings(&[]), repo_root()).expect("cpu plans");
    let pod = serde_json::to_value(&objects[1]).expect("serializes");
    let guard = &pod["spec"]["initContainers"][0];
    assert_eq!(guard["restartPolicy"], "Always");
    assert_eq!(guard["volumeMounts"][0]["mountPath"], "/dev/shm");
    let workers: Vec<_> = pod["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with("worker-")))
        .collect();
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert_eq!(
            w["volumeMounts"][0]["name"],
            guard["volumeMounts"][0]["name"]
        );
    }
}

#[test]
fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
    assert_eq!(shell_quote("TC-01,TC-03"), "TC-01,TC-03");
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
    assert_eq!(shell_quote(""), "''");
}

#[test]
fn write_all_marks_scripts_executable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let files = artifacts(RunnerKind::Container, &settings(&[]), repo_root()).expect("plans");
    let written = write_all(&files, dir.path()).expect("writes");
    let mode = |name: &str| {
        let p = written.iter().find(|p| p.ends_with(name)).expect("written");
        std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
    };
    assert_eq!(mode("run.sh"), 0o755);
    assert_eq!(mode("Containerfile"), 0o644);
}

/// Every socket a worker's command names is served by a Guard sidecar.
fn guard_sockets_match(flags: &[&str]) {
    let objects = k8s::objects(&settings(flags), repo_root()).expect("plans");
    let pod = serde_json::to_value(&objects[1]).expect("serializes");
    let words = |c: &serde_json::Value| -> Vec<String> {
        c["command"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|w| w.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let served: Vec<String> = pod["spec"]["initContainers"]
        .as_array()
        .expect("guards")
        .iter()
        .flat_map(&words)
        .filter(|w| w.ends_with(".sock"))
        .collect();
    assert!(!served.is_empty(), "no Guard socket in {flags:?}");
    for c in pod["spec"]["containers"].as_array().expect("containers") {
        for word in words(c) {
            if word.ends_with(".sock") || word.contains(".sock\"") {
                let socket = served.iter().find(|s| word.contains(s.as_str()));
                assert!(
                    socket.is_some(),
                    "{} names {word}, served: {served:?}",
                    c["name"]
                );
            }
        }
    }
}

#[test]
fn every_worker_guard_socket_is_served_by_a_sidecar() {
    guard_sockets_match(&[]);
    guard_sockets_match(&["--engine", "vllm", "--topology", "2p1d"]);
}

/// `--kvcr` reaches the suite wherever a runner starts it: `PHASE1_KVCR`
/// in every artifact, and a local build mounted at its path in the
/// container; the default adds nothing.
#[test]
fn the_kvcr_under_test_is_carried_through_every_runner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wheel = dir.path().join("kvcr-0.2.0-py3-none-any.whl");
    std::fs::write(&wheel, b"zip").expect("write");
    let wheel = wheel.canonicalize().expect("canonical");
    let flags = ["--kvcr", wheel.to_str().expect("utf8")];
    let expected = format!("PHASE1_KVCR={}", wheel.display());
    for kind in RunnerKind::ALL {
        let text = rendered(kind, &flags);
        let carried = text.contains(&expected)
            || (text.contains("\"name\": \"PHASE1_KVCR\"")
                && text.contains(&format!("\"value\": \"{}\"", wheel.display())));
        assert!(carried, "{} carries PHASE1_KVCR:\n{text}", kind.as_str());
        assert!(
            !rendered(kind, &[]).contains("PHASE1_KVCR"),
            "{}",
            kind.as_str()
        );
    }
    let run = rendered(RunnerKind::Container, &flags);
    assert!(
        run.contains(&format!("--volume={0}:{0}:ro", wheel.display())),
        "{run}"
    );
    let env = RunnerSpec::from_settings(&settings(&["--kvcr", "pypi:0.2.0"])).harness_env();
    assert!(env.contains(&("PHASE1_KVCR".into(), "pypi:0.2.0".into())));
}
