//! The container runner's base image, built on this machine from Debian
//! packages alone (no image registry): `mmdebstrap` bootstraps Debian 12
//! with Python 3.11 into a tarball, `podman import` makes it the local image
//! [`BASE_IMAGE`], the Containerfile's default `BASE_IMAGE`. Built on first
//! use with its progress shown, reused while the image exists.
//!
//! ```text
//! kvcr-e2e runner base-image       # build it if missing, print its name
//! ```

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The local image the generated Containerfile builds `FROM` by default.
pub const BASE_IMAGE: &str = "localhost/kvcr-e2e-base:bookworm";
/// Debian release and mirror the rootfs comes from.
pub const SUITE: &str = "bookworm";
pub const MIRROR: &str = "http://deb.debian.org/debian";
/// What the stack image needs on top of `apt`'s minimal system: Python with
/// venv (pip comes with it) and the CA store pip verifies PyPI with.
pub const PACKAGES: &[&str] = &["python3", "python3-venv", "ca-certificates"];
/// Local CA certificates of this machine (a TLS-inspecting egress proxy's
/// CA, for one), copied into the image so that `pip` inside a build trusts
/// what the host trusts.
const LOCAL_CAS: &str = "/usr/local/share/ca-certificates";

/// podman with the flags this kind of host needs (docs/ci.md).
pub fn podman() -> Command {
    let mut command = Command::new("podman");
    command.args(["--runtime=runc", "--cgroup-manager=cgroupfs"]);
    command
}

/// Whether podman holds `image` locally.
pub fn image_exists(image: &str) -> bool {
    podman()
        .args(["image", "exists", image])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The `mmdebstrap` argv that writes the base rootfs to `tarball`.
pub fn mmdebstrap_argv(tarball: &Path, local_cas: bool) -> Vec<String> {
    let mut argv = vec![
        "mmdebstrap".to_string(),
        "--variant=apt".into(),
        format!("--include={}", PACKAGES.join(",")),
    ];
    if local_cas {
        argv.push(format!(
            "--customize-hook=copy-in {LOCAL_CAS} /usr/local/share"
        ));
        argv.push("--customize-hook=chroot \"$1\" update-ca-certificates".into());
    }
    argv.extend([
        SUITE.to_string(),
        tarball.display().to_string(),
        MIRROR.to_string(),
    ]);
    argv
}

/// Builds [`BASE_IMAGE`] unless podman has it; `work` holds the tarball
/// while it is imported. Installs `mmdebstrap` with apt-get when missing
/// (root only). Progress goes to stderr.
pub fn ensure(work: &Path) -> Result<&'static str, String> {
    if image_exists(BASE_IMAGE) {
        say(format!("base image {BASE_IMAGE}: present, reused"));
        return Ok(BASE_IMAGE);
    }
    let started = Instant::now();
    say(format!(
        "base image {BASE_IMAGE}: not present, building it (3 steps, a few minutes)"
    ));
    if !have("mmdebstrap") {
        say("base image step 1/3: apt-get install mmdebstrap".into());
        if effective_uid() != 0 {
            return Err(
                "mmdebstrap is not installed and this is not root: apt-get install mmdebstrap"
                    .into(),
            );
        }
        run(Command::new("apt-get")
            .args([
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "mmdebstrap",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    } else {
        say("base image step 1/3: mmdebstrap present".into());
    }
    std::fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let tarball = work.join("rootfs.tar");
    let _ = std::fs::remove_file(&tarball);
    let local_cas = std::fs::read_dir(LOCAL_CAS).is_ok_and(|mut d| d.next().is_some());
    let argv = mmdebstrap_argv(&tarball, local_cas);
    say(format!(
        "base image step 2/3: {} (Debian {SUITE} from {MIRROR})",
        argv.join(" ")
    ));
    run(Command::new(&argv[0]).args(&argv[1..]))?;
    say(format!(
        "base image step 3/3: podman import {} {BASE_IMAGE}",
        tarball.display()
    ));
    run(podman()
        .args(["import", "--change", "CMD [\"/bin/bash\"]"])
        .arg(&tarball)
        .arg(BASE_IMAGE))?;
    let _ = std::fs::remove_file(&tarball);
    say(format!(
        "base image {BASE_IMAGE}: built in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(BASE_IMAGE)
}

/// The effective uid, from /proc (no unsafe libc call needed).
fn effective_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `command` with its output on this process's stderr (the progress).
fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let status = command
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| format!("cannot start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} exited with {status}"))
    }
}

/// A step of the build, as the run's event (the console prints it).
fn say(message: String) {
    crate::events::emit(crate::events::RunEvent::SetupStep {
        part: crate::events::SetupPart::BaseImage,
        message,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rootfs_comes_from_debian_with_python_and_the_local_cas() {
        let argv = mmdebstrap_argv(Path::new("/tmp/rootfs.tar"), true);
        assert_eq!(argv[0], "mmdebstrap");
        assert!(argv.contains(&"--include=python3,python3-venv,ca-certificates".to_string()));
        assert!(argv.iter().any(|a| a.contains("update-ca-certificates")));
        assert_eq!(
            argv[argv.len() - 3..],
            [
                "bookworm",
                "/tmp/rootfs.tar",
                "http://deb.debian.org/debian"
            ]
        );
        assert!(!mmdebstrap_argv(Path::new("/x.tar"), false)
            .iter()
            .any(|a| a.contains("customize")));
    }
}
