//! A reviewed diff against the installed `kvcr` package (a curated mutant,
//! a fix, a policy bug): where it applies and whether it applies exactly as
//! it was reviewed. Nothing is modified; `--kvcr <file.diff>` itself is
//! built by [`super::kvcr::resolve`].
//!
//! ```no_run
//! use std::path::Path;
//! use kvcr_e2e::pyenv::kvcr_diff;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (version, site) = kvcr_diff::installed_site(Path::new(".venv/bin/python"))?;
//! assert_eq!(version, "0.1.1");
//! kvcr_diff::applies_exactly(&site, Path::new("fixtures/kvcr-mutants/lru-evicts-newest.diff"))?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use super::kvcr::{strip_of, KvcrError};

#[derive(Debug, thiserror::Error)]
pub enum DiffCheckError {
    #[error(transparent)]
    Diff(#[from] KvcrError),
    #[error("`{command}` could not run: {source}")]
    Run {
        command: String,
        source: std::io::Error,
    },
    #[error("cannot read which kvcr {python} has installed: {detail}")]
    Probe { python: PathBuf, detail: String },
    #[error(
        "the diff {file} does not apply to the kvcr under {site}: `{command}` said:\n{output}"
    )]
    DoesNotApply {
        file: PathBuf,
        site: PathBuf,
        command: String,
        output: String,
    },
    #[error("the diff {file} applies to the kvcr under {site} only with an offset or fuzz, so a hunk would land elsewhere than reviewed (it was written against another kvcr): `{command}` said:\n{output}")]
    Inexact {
        file: PathBuf,
        site: PathBuf,
        command: String,
        output: String,
    },
}

/// The kvcr version `python` has installed and the site-packages directory
/// that holds it (where a diff's `a/kvcr/...` paths resolve), read with
/// `importlib.metadata` and `sysconfig`, without importing kvcr.
pub fn installed_site(python: &Path) -> Result<(String, PathBuf), DiffCheckError> {
    const CODE: &str = "import importlib.metadata as m, sysconfig; \
                        print(m.version('kvcr')); print(sysconfig.get_path('purelib'))";
    let mut command = Command::new(python);
    command.args(["-c", CODE]);
    let (ok, _, stdout, stderr) = run(&mut command)?;
    let mut lines = stdout.lines().map(str::trim);
    match (ok, lines.next(), lines.next()) {
        (true, Some(version), Some(site)) if !version.is_empty() && !site.is_empty() => {
            Ok((version.to_string(), PathBuf::from(site)))
        }
        _ => Err(DiffCheckError::Probe {
            python: python.to_path_buf(),
            detail: format!("{}{}", stdout.trim(), stderr.trim()),
        }),
    }
}

/// Checks that the diff `file` applies to the kvcr package under `site`
/// exactly: `patch --dry-run` at the diff's strip succeeds, and no hunk
/// needs an offset or fuzz.
pub fn applies_exactly(site: &Path, file: &Path) -> Result<(), DiffCheckError> {
    let text = std::fs::read_to_string(file).map_err(|source| {
        DiffCheckError::Diff(KvcrError::Io {
            path: file.to_path_buf(),
            source,
        })
    })?;
    let strip = strip_of(file, &text)?;
    let mut command = Command::new("patch");
    command
        .arg(format!("-p{strip}"))
        .args(["--dry-run", "--batch", "--forward", "-d"])
        .arg(site)
        .arg("-i")
        .arg(std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()));
    let (ok, shown, stdout, stderr) = run(&mut command)?;
    let output = format!("{stdout}{stderr}").trim_end().to_string();
    let (file, site) = (file.to_path_buf(), site.to_path_buf());
    if !ok {
        return Err(DiffCheckError::DoesNotApply {
            file,
            site,
            command: shown,
            output,
        });
    }
    if output.contains("offset") || output.contains("fuzz") {
        return Err(DiffCheckError::Inexact {
            file,
            site,
            command: shown,
            output,
        });
    }
    Ok(())
}

/// Runs a command: (success, the command line, stdout, stderr).
fn run(command: &mut Command) -> Result<(bool, String, String, String), DiffCheckError> {
    let shown = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = command.output().map_err(|source| DiffCheckError::Run {
        command: shown.clone(),
        source,
    })?;
    Ok((
        out.status.success(),
        shown,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "def f():\n    a = 1\n    b = 2\n    c = 3\n    return a + b + c\n";

    /// A site-packages with `kvcr/m.py` holding `module`, and a diff file.
    fn site_with(module: &str, diff: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("site/kvcr")).expect("mkdir");
        std::fs::write(dir.path().join("site/kvcr/m.py"), module).expect("write module");
        let file = dir.path().join("bug.diff");
        std::fs::write(&file, diff).expect("write diff");
        (dir, file)
    }

    const DIFF: &str = "# policy-bug: example\n--- a/kvcr/m.py\n+++ b/kvcr/m.py\n@@ -2,3 +2,3 @@\n     a = 1\n-    b = 2\n+    b = 3\n     c = 3\n";

    #[test]
    fn a_diff_written_against_the_installed_file_applies_and_changes_nothing() {
        let (dir, file) = site_with(MODULE, DIFF);
        let site = dir.path().join("site");
        applies_exactly(&site, &file).expect("applies");
        let after = std::fs::read_to_string(site.join("kvcr/m.py")).expect("read");
        assert_eq!(after, MODULE, "a dry run modified the package");
    }

    #[test]
    fn a_hunk_that_lands_at_an_offset_is_not_exact() {
        let shifted = format!("\"\"\"a docstring\"\"\"\n\n{MODULE}");
        let (dir, file) = site_with(&shifted, DIFF);
        let err = applies_exactly(&dir.path().join("site"), &file).expect_err("an offset");
        assert!(matches!(err, DiffCheckError::Inexact { .. }), "{err}");
        assert!(err.to_string().contains("offset"), "{err}");
    }

    #[test]
    fn a_diff_for_other_lines_does_not_apply() {
        let other = MODULE.replace("b = 2", "b = 20");
        let (dir, file) = site_with(&other, DIFF);
        let err = applies_exactly(&dir.path().join("site"), &file).expect_err("fails");
        assert!(matches!(err, DiffCheckError::DoesNotApply { .. }), "{err}");
    }

    #[test]
    fn a_diff_of_another_package_is_refused_before_patch_runs() {
        let (dir, file) = site_with(MODULE, "--- a/vllm/m.py\n+++ b/vllm/m.py\n");
        let err = applies_exactly(&dir.path().join("site"), &file).expect_err("not kvcr");
        assert!(
            err.to_string().contains("it changes `a/vllm/m.py`"),
            "{err}"
        );
    }

    #[test]
    fn an_interpreter_without_kvcr_is_a_probe_error() {
        let err = installed_site(Path::new("/bin/false")).expect_err("no kvcr");
        assert!(matches!(err, DiffCheckError::Probe { .. }), "{err}");
    }
}
