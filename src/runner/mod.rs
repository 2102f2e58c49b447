//! Runners as data: the artifacts that run the suite through a batch
//! scheduler, a container engine or a Kubernetes cluster, generated from the
//! resolved settings (`kvcr-e2e runner {slurm,container,k8s}`).
//!
//! ```text
//! let files = runner::artifacts(RunnerKind::Slurm, &settings, repo_root)?;
//! runner::write_all(&files, Path::new("target/runners/slurm"))?;
//! ```
//!
//! Every artifact is built from typed values (an sbatch script's directives
//! and steps, Containerfile instructions, Kubernetes objects as serde
//! structs) and snapshotted in `snapshots/`, so a change in what users run
//! shows up in review. The Kubernetes objects are also validated strictly
//! against a pinned Kubernetes schema (`tests/runner_k8s_validate.rs`).

pub mod base_image;
pub mod container;
mod k8s;
pub mod k8s_apply;
mod slurm;
mod spec;
pub mod validate;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::config::Settings;

pub use container::{container_run_argv, Containerfile, Instruction};
pub use k8s::{objects as k8s_objects, K8sObject};
pub use slurm::SbatchScript;
pub use spec::RunnerSpec;

/// Which runner to write artifacts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerKind {
    Slurm,
    Container,
    K8s,
}

impl RunnerKind {
    pub const ALL: [RunnerKind; 3] = [RunnerKind::Slurm, RunnerKind::Container, RunnerKind::K8s];

    pub fn as_str(self) -> &'static str {
        match self {
            RunnerKind::Slurm => "slurm",
            RunnerKind::Container => "container",
            RunnerKind::K8s => "k8s",
        }
    }

    pub fn from_word(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == word)
    }
}

/// One generated file: its name inside the output directory and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub name: String,
    pub contents: String,
    /// Written with mode 0755 (scripts).
    pub executable: bool,
}

/// Every artifact of `kind` for the resolved `settings`; `repo_root` is the
/// checkout whose engine profiles plan the stack. Fails only when the
/// engine cannot be planned (e.g. a missing GPU engine profile).
pub fn artifacts(
    kind: RunnerKind,
    settings: &Settings,
    repo_root: &Path,
) -> Result<Vec<Artifact>, String> {
    let spec = &RunnerSpec::from_settings(settings);
    Ok(match kind {
        RunnerKind::Slurm => vec![Artifact {
            name: "phase1.sbatch".into(),
            contents: SbatchScript::for_suite(spec).render(),
            executable: true,
        }],
        RunnerKind::Container => container::artifacts(spec),
        RunnerKind::K8s => k8s::objects(settings, repo_root)?
            .into_iter()
            .map(|o| Artifact {
                name: o.file_name(),
                contents: o.to_json(),
                executable: false,
            })
            .collect(),
    })
}

/// Writes `files` into `dir` (created if missing); returns the paths written.
pub fn write_all(files: &[Artifact], dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for file in files {
        let path = dir.join(&file.name);
        std::fs::write(&path, &file.contents)?;
        let mode = if file.executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        written.push(path);
    }
    Ok(written)
}

/// Quotes `word` for a POSIX shell when it needs it.
pub(crate) fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
