//! Which KVCR ran: the build the run resolved (`--kvcr`) and what each KVCR
//! process reported importing. Rendered into `results.json` (`kvcr`), JUnit
//! properties (`kvcr.*`), the report and the summary.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A resolved KVCR build: what every KVCR process of the run must import.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvcrBuild {
    /// The spec as resolved (`pypi:0.1.1`, a wheel path, a source directory,
    /// `BASE+DIFF` for a patched build).
    pub spec: String,
    /// `pypi`, `wheel`, `source-dir` or `patched`.
    pub source: String,
    /// The distribution's version (its `importlib.metadata` version).
    pub version: String,
    /// SHA-256 over the installed `kvcr` package's files (paths and contents,
    /// `__pycache__` left out): the same digest each process reports.
    pub files_sha256: String,
    /// The `kvcr` package directory the run's processes import.
    pub location: PathBuf,
    /// The derived env's key, or `None` when the base env is used as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_env: Option<String>,
    /// SHA-256 of what was installed: the wheel or sdist file, or the
    /// source tree (its files as git lists them, or every file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_sha256: Option<String>,
    /// A source directory that is a git checkout: its commit and whether
    /// its tree differs from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitState>,
    /// A patched build: the diff applied to the base build's sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<PatchState>,
    /// The interpreter of the base env the build is layered over.
    pub base_python: PathBuf,
}

/// A git checkout's state when its build was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitState {
    pub commit: String,
    /// Tracked files changed, or untracked files not ignored.
    pub dirty: bool,
}

/// The diff of a patched build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchState {
    pub file: PathBuf,
    pub sha256: String,
    /// The build the diff was applied to.
    pub base_spec: String,
    pub base_files_sha256: String,
}

/// What one process said it imported (`kvcr-e2e: kvcr … from … digest=…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentImport {
    /// The component whose log holds the line (`guard`, `worker-A`).
    pub component: String,
    pub pid: u32,
    pub version: String,
    pub location: PathBuf,
    pub files_sha256: String,
}

/// The KVCR of a run: the resolved build and every import the run checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvcrProvenance {
    #[serde(flatten)]
    pub build: KvcrBuild,
    /// Each KVCR process's report, checked equal to the build at startup.
    #[serde(default)]
    pub imports: Vec<ComponentImport>,
}

impl KvcrBuild {
    /// `source-dir` as people say it.
    pub fn source_label(&self) -> &str {
        match self.source.as_str() {
            "source-dir" => "source dir",
            other => other,
        }
    }

    /// One line: `kvcr 0.1.1 (pypi: pypi:0.1.1) files 1a2b3c4d5e6f`, with the
    /// commit of a checkout and the diff of a patched build.
    pub fn one_line(&self) -> String {
        let mut line = format!(
            "kvcr {} ({}: {}) files {}",
            self.version,
            self.source_label(),
            self.spec,
            short(&self.files_sha256)
        );
        if let Some(git) = &self.git {
            line.push_str(&format!(
                ", git {}{}",
                short(&git.commit),
                if git.dirty { " (dirty)" } else { "" }
            ));
        }
        match &self.derived_env {
            Some(digest) => line.push_str(&format!(", derived env {}", short(digest))),
            None => line.push_str(", base env as is"),
        }
        line
    }

    /// Whether a process's report is this build (version, files, place).
    pub fn is_imported_by(&self, import: &ComponentImport) -> bool {
        let canon = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        import.version == self.version
            && import.files_sha256 == self.files_sha256
            && (import.location == self.location
                || canon(&import.location) == canon(&self.location))
    }

    /// `kvcr.*` JUnit properties (and `environment` keys of results.json).
    pub fn properties(&self) -> Vec<(String, String)> {
        let mut props = vec![
            ("kvcr.spec".to_string(), self.spec.clone()),
            ("kvcr.source".into(), self.source.clone()),
            ("kvcr.version".into(), self.version.clone()),
            ("kvcr.files_sha256".into(), self.files_sha256.clone()),
            ("kvcr.location".into(), self.location.display().to_string()),
            (
                "kvcr.derived_env".into(),
                self.derived_env
                    .clone()
                    .unwrap_or_else(|| "none (base env as is)".into()),
            ),
        ];
        if let Some(sha) = &self.artifact_sha256 {
            props.push(("kvcr.artifact_sha256".into(), sha.clone()));
        }
        if let Some(git) = &self.git {
            props.push(("kvcr.git_commit".into(), git.commit.clone()));
            props.push(("kvcr.git_dirty".into(), git.dirty.to_string()));
        }
        if let Some(patch) = &self.patch {
            props.push(("kvcr.patch".into(), patch.file.display().to_string()));
            props.push(("kvcr.patch_sha256".into(), patch.sha256.clone()));
        }
        props
    }
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

#[cfg(test)]
pub(crate) fn sample_build() -> KvcrBuild {
    KvcrBuild {
        spec: "/src/kvcr".into(),
        source: "source-dir".into(),
        version: "0.1.1".into(),
        files_sha256: "ab".repeat(32),
        location: PathBuf::from("/repo/target/kvcr-envs/source-dir-0123/site/kvcr"),
        derived_env: Some("cd".repeat(32)),
        artifact_sha256: Some("ef".repeat(32)),
        git: Some(GitState {
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            dirty: true,
        }),
        patch: None,
        base_python: PathBuf::from("/repo/.venv/bin/python"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_names_source_version_digest_and_commit() {
        assert_eq!(
            sample_build().one_line(),
            "kvcr 0.1.1 (source dir: /src/kvcr) files abababababab, git 0123456789ab (dirty), derived env cdcdcdcdcdcd"
        );
    }

    #[test]
    fn properties_carry_every_fact() {
        let props = sample_build().properties();
        let get = |k: &str| {
            props
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("kvcr.source"), Some("source-dir"));
        assert_eq!(get("kvcr.version"), Some("0.1.1"));
        assert_eq!(get("kvcr.git_dirty"), Some("true"));
        assert_eq!(
            get("kvcr.git_commit"),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
        assert!(get("kvcr.patch").is_none());
    }

    #[test]
    fn a_process_imports_the_build_only_with_the_same_version_files_and_place() {
        let b = sample_build();
        let mut seen = ComponentImport {
            component: "worker-A".into(),
            pid: 1,
            version: b.version.clone(),
            location: b.location.clone(),
            files_sha256: b.files_sha256.clone(),
        };
        assert!(b.is_imported_by(&seen));
        seen.files_sha256 = "00".repeat(32);
        assert!(!b.is_imported_by(&seen));
        seen.files_sha256 = b.files_sha256.clone();
        seen.location = "/elsewhere/kvcr".into();
        assert!(!b.is_imported_by(&seen));
        seen.location = b.location.clone();
        seen.version = "0.2.0".into();
        assert!(!b.is_imported_by(&seen));
    }

    #[test]
    fn provenance_json_is_flat() {
        let p = KvcrProvenance {
            build: sample_build(),
            imports: vec![],
        };
        let v = serde_json::to_value(&p).expect("json");
        assert_eq!(v["source"], "source-dir");
        assert_eq!(v["git"]["dirty"], true);
        let back: KvcrProvenance = serde_json::from_value(v).expect("round trip");
        assert_eq!(back, p);
    }
}
