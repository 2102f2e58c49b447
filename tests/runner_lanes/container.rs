//! The container lane: the generated Containerfile is built with `podman
//! build` into the stack image, `FROM` a base image built on this machine
//! from Debian packages (no registry: `kvcr-e2e runner base-image`, reused
//! once built), and the suite (TC-01 and TC-03) runs in that image, started
//! with the generated run command's flags; its evidence comes out through
//! the `/evidence` bind mount.
//!
//! The image holds the userland and the pinned Python env; the suite binary
//! is the one cargo built here (no Rust toolchain is installable into the
//! image without a registry for it), bind-mounted with the repository at
//! its path.

use std::path::Path;
use std::process::{Command, Stdio};

use kvcr_e2e::runner::{self, container::EVIDENCE_IN_CONTAINER};
use kvcr_e2e::wait::{self, Poll};

use super::lanes::{phase1_binary, root, stack_budget};

const PROGRAMS: &[&str] = &["podman", "runc", "catatonit"];
const PACKAGES: &[&str] = &["podman", "runc", "catatonit"];

pub fn available() -> Result<(), super::Unavailable> {
    super::ensure_programs("container", PROGRAMS, PACKAGES)
}

fn spec() -> runner::RunnerSpec {
    let settings = super::lane_settings(&["--cases", "TC-01,TC-03"]);
    runner::RunnerSpec::from_settings(&settings)
}

/// Builds the stack image from the generated Containerfile (the base image
/// first, when podman does not have it); its output goes to
/// `podman-build.log`, its wall time to `podman-build.seconds`.
pub fn build_image(evidence: &Path) -> Result<String, String> {
    let started = std::time::Instant::now();
    runner::base_image::ensure(&root().join("target/tool-envs/base-image"))?;
    let spec = spec();
    let dir = evidence.join("runner");
    let files = runner::artifacts(
        runner::RunnerKind::Container,
        &super::lane_settings(&[]),
        root(),
    )?;
    runner::write_all(&files, &dir).map_err(|e| e.to_string())?;
    let log = evidence.join("podman-build.log");
    let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    eprintln!(
        "[lanes] container: podman build {} (log: {})",
        spec.image,
        log.display()
    );
    let status = runner::base_image::podman()
        .args(["build", "--pull=never", "-f"])
        .arg(dir.join("Containerfile"))
        .args(["-t", &spec.image])
        .arg(root())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| format!("cannot start podman build: {e}"))?;
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::write(
        evidence.join("podman-build.seconds"),
        format!("{seconds:.0}\n"),
    );
    if !status.success() {
        return Err(format!(
            "podman build exited {status}; its output ({}):\n{}",
            log.display(),
            std::fs::read_to_string(&log).unwrap_or_default()
        ));
    }
    eprintln!(
        "[lanes] container: image {} ready in {seconds:.0} s",
        spec.image
    );
    Ok(spec.image)
}

/// The generated `podman run` argv for TC-01 and TC-03 in the built image,
/// with the repository (and the suite binary in it) bind-mounted.
fn argv(evidence: &Path, name: &str) -> Vec<String> {
    let spec = spec();
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
        spec.image.clone(),
        phase1_binary().display().to_string(),
    ]);
    argv
}

/// Runs the suite in the container; passes when TC-01 and TC-03 pass and
/// their JUnit report is on the host.
pub fn suite_in_container(evidence: &Path) -> Result<(), String> {
    build_image(evidence)?;
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
    let status = wait::until(
        "the suite's container to end",
        budget,
        std::time::Duration::from_millis(200),
        || match child.0.try_wait() {
            Ok(Some(status)) => Poll::Ready(status),
            _ => Poll::Pending("still running".into()),
        },
    )
    .ok();
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
