//! The container lane: the suite (TC-01 and TC-03) runs inside a podman
//! container started with the generated run command's flags, and its
//! evidence comes out through the `/evidence` bind mount.
//!
//! No registry is reachable, so no base image can be pulled: the container's
//! root filesystem is this machine's own (`--rootfs /:O`, an overlay whose
//! writes are thrown away), with the repository bind-mounted at its path.

use std::path::Path;
use std::process::{Command, Stdio};

use kvcr_e2e::runner::{self, container::EVIDENCE_IN_CONTAINER};

use super::lanes::{phase1_binary, root, stack_budget};

const PROGRAMS: &[&str] = &["podman", "runc", "catatonit"];
const PACKAGES: &[&str] = &["podman", "runc", "catatonit"];

pub fn available() -> Result<(), super::Unavailable> {
    super::ensure_programs("container", PROGRAMS, PACKAGES)
}

/// The generated `podman run` argv for TC-01 and TC-03, made runnable here.
fn argv(evidence: &Path, name: &str) -> Vec<String> {
    let settings = super::lane_settings(&["--cases", "TC-01,TC-03"]);
    let spec = runner::RunnerSpec::from_settings(&settings);
    let mut argv = runner::container_run_argv(&spec);
    let image = argv.pop();
    assert_eq!(
        image.as_deref(),
        Some(spec.image.as_str()),
        "the image ends the run argv"
    );
    for word in &mut argv {
        *word = word.replace("$EVIDENCE", &evidence.display().to_string());
        if word.starts_with("--name=") {
            *word = format!("--name={name}");
        }
    }
    let repo = root().display().to_string();
    argv.extend([
        format!("--volume={repo}:{repo}"),
        format!("--workdir={repo}"),
        format!("--env=PHASE1_RUN_DIR={EVIDENCE_IN_CONTAINER}/runs"),
        "--rootfs".into(),
        "/:O".into(),
        phase1_binary().display().to_string(),
    ]);
    argv
}

/// Runs the suite in the container; passes when TC-01 and TC-03 pass and
/// their JUnit report is on the host.
pub fn suite_in_container(evidence: &Path) -> Result<(), String> {
    let name = format!("kvcr-e2e-lane-{}", std::process::id());
    let argv = argv(evidence, &name);
    std::fs::write(evidence.join("podman-run.argv"), argv.join("\n")).map_err(|e| e.to_string())?;
    let log = evidence.join("podman-run.log");
    let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut child = super::lanes::Owned(
        Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start podman: {e}"))?,
    );
    let budget = stack_budget() * 2;
    let started = std::time::Instant::now();
    let status = loop {
        if let Ok(Some(status)) = child.0.try_wait() {
            break Some(status);
        }
        if started.elapsed() > budget {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    // Whatever happened, no container of ours stays.
    let _ = Command::new("podman")
        .args([
            "--runtime=runc",
            "--cgroup-manager=cgroupfs",
            "rm",
            "-f",
            "--ignore",
            &name,
        ])
        .output();
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let Some(status) = status else {
        return Err(format!(
            "the container {name} still ran after {budget:?} (removed); its output ({}):\n{output}",
            log.display()
        ));
    };
    if !status.success() {
        return Err(format!(
            "podman run exited {status}; its output ({}):\n{output}",
            log.display()
        ));
    }
    super::expect_junit(&evidence.join("runs"), &["TC-01", "TC-03"])
}
