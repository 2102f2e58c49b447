//! `--kvcr <spec>`: which KVCR build a run tests.
//!
//! A spec is one of
//! - `pypi:<version>`: that release from the package index (`pypi:0.1.1`,
//!   the locks' pin, is the default and uses the base env as it is);
//! - a wheel file (`*.whl`);
//! - a source directory: a git checkout or an unpacked sdist (it holds
//!   `pyproject.toml`, `setup.py` or `setup.cfg`);
//! - `<spec>+<file.diff>`: that build with a unified diff applied to its
//!   installed sources (a bare `<file.diff>` is the default build with it);
//!   the mutation lane's builds.
//!
//! Paths are made absolute when parsed (relative to the current directory,
//! which `cargo test` sets to the repository root), so the spec means the
//! same thing in `config.json`, runner artifacts and derived-env keys.
//! Parsing is all this module does; [`super::kvcr`] builds the env.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};

/// The version of the locks' pin: `pypi:0.1.1` is the default spec.
pub const DEFAULT_VERSION: &str = "0.1.1";

/// What `--kvcr` accepts, for help and errors.
pub const ACCEPTED: &str =
    "pypi:<version> (a release on PyPI; pypi:0.1.1 is the default, the locks' pin), \
     a wheel file (*.whl), or a KVCR source directory (a git checkout or an unpacked sdist, \
     holding pyproject.toml, setup.py or setup.cfg), or SPEC+FILE.diff (that build with a diff applied; \
     a bare FILE.diff applies it to the default)";

/// `value` of a command's flag `flag` (`--base`, `--head`, `--kvcr`) as a
/// build; the error names the flag, the value and what is accepted.
pub fn parse_flag(flag: &str, value: &str) -> Result<KvcrSpec, String> {
    KvcrSpec::parse(value).map_err(|why| format!("{flag} {value:?}: {why}; expected {ACCEPTED}"))
}

/// The KVCR build under test, as the user named it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KvcrSpec {
    /// A release on the package index.
    Pypi { version: String },
    /// A wheel file.
    Wheel { path: PathBuf },
    /// A source tree pip can build (a checkout or an unpacked sdist).
    SourceDir { path: PathBuf },
    /// `base` with a unified diff applied to its installed sources: the
    /// mutation driver's builds (`<base>+<file.diff>`).
    Patched { base: Box<KvcrSpec>, diff: PathBuf },
}

impl Default for KvcrSpec {
    fn default() -> Self {
        KvcrSpec::Pypi {
            version: DEFAULT_VERSION.to_string(),
        }
    }
}

impl KvcrSpec {
    /// Parses a flag, environment or profile value; `Err` says what was
    /// wrong with it (the caller adds [`ACCEPTED`]).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the value is empty".into());
        }
        let is_diff = |p: &str| p.ends_with(".diff") || p.ends_with(".patch");
        if let Some((base, diff)) = text.rsplit_once('+').filter(|(_, d)| is_diff(d)) {
            return Ok(KvcrSpec::patched(Self::parse(base)?, diff_file(diff)?));
        }
        if is_diff(text) {
            return Ok(KvcrSpec::patched(KvcrSpec::default(), diff_file(text)?));
        }
        if let Some(version) = text.strip_prefix("pypi:") {
            return parse_version(version).map(|version| KvcrSpec::Pypi { version });
        }
        let path = absolute(Path::new(text));
        if text.ends_with(".whl") {
            if !path.is_file() {
                return Err(format!("the wheel {} does not exist", path.display()));
            }
            return Ok(KvcrSpec::Wheel { path });
        }
        if path.is_dir() {
            let buildable = ["pyproject.toml", "setup.py", "setup.cfg"]
                .iter()
                .any(|f| path.join(f).is_file());
            if !buildable {
                return Err(format!(
                    "the directory {} holds no pyproject.toml, setup.py or setup.cfg: not a source tree pip can build",
                    path.display()
                ));
            }
            return Ok(KvcrSpec::SourceDir { path });
        }
        if path.exists() {
            return Err(format!(
                "{} is neither a wheel (*.whl) nor a directory",
                path.display()
            ));
        }
        if text.contains('/') || text.starts_with('.') {
            return Err(format!("{} does not exist", path.display()));
        }
        Err(format!(
            "`{text}` is not a spec (a release is written pypi:{text})"
        ))
    }

    /// The base build with `diff` applied to its installed sources.
    pub fn patched(base: KvcrSpec, diff: impl Into<PathBuf>) -> Self {
        KvcrSpec::Patched {
            base: Box::new(base),
            diff: diff.into(),
        }
    }

    /// `pypi`, `wheel`, `source-dir` or `patched`.
    pub fn kind(&self) -> &'static str {
        match self {
            KvcrSpec::Pypi { .. } => "pypi",
            KvcrSpec::Wheel { .. } => "wheel",
            KvcrSpec::SourceDir { .. } => "source-dir",
            KvcrSpec::Patched { .. } => "patched",
        }
    }

    /// Whether this is the default spec (the locks' pin).
    pub fn is_default(&self) -> bool {
        *self == KvcrSpec::default()
    }

    /// Local files the spec reads (a runner mounts them where the suite runs).
    pub fn local_paths(&self) -> Vec<PathBuf> {
        match self {
            KvcrSpec::Pypi { .. } => Vec::new(),
            KvcrSpec::Wheel { path } | KvcrSpec::SourceDir { path } => vec![path.clone()],
            KvcrSpec::Patched { base, diff } => {
                let mut paths = base.local_paths();
                paths.push(diff.clone());
                paths
            }
        }
    }
}

impl fmt::Display for KvcrSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvcrSpec::Pypi { version } => write!(f, "pypi:{version}"),
            KvcrSpec::Wheel { path } | KvcrSpec::SourceDir { path } => {
                write!(f, "{}", path.display())
            }
            KvcrSpec::Patched { base, diff } => write!(f, "{base}+{}", diff.display()),
        }
    }
}

impl Serialize for KvcrSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// A PEP 440 version as a user writes it: digits first, then digits,
/// letters, dots, `+`, `-`, `!` (no spaces, no operators).
fn parse_version(version: &str) -> Result<String, String> {
    let ok = version.chars().next().is_some_and(|c| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+-!_".contains(c));
    if ok {
        Ok(version.to_string())
    } else {
        Err(format!(
            "`{version}` is not a version (write a release, e.g. pypi:0.1.1; no operators)"
        ))
    }
}

fn diff_file(text: &str) -> Result<PathBuf, String> {
    let path = absolute(Path::new(text.trim()));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("the diff {} does not exist", path.display()))
    }
}

fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    joined.canonicalize().unwrap_or(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_locks_pin() {
        assert_eq!(KvcrSpec::default().to_string(), "pypi:0.1.1");
        assert!(KvcrSpec::parse("pypi:0.1.1").expect("parses").is_default());
        assert!(!KvcrSpec::parse("pypi:0.2.0").expect("parses").is_default());
        // The locks pin the same version.
        for lock in [
            "fixtures/python/requirements.lock",
            "fixtures/python/requirements-vllm.lock",
        ] {
            let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(lock))
                .expect("lock");
            assert!(
                text.lines().any(|l| l.split_whitespace().next()
                    == Some(format!("kvcr=={DEFAULT_VERSION}").as_str())),
                "{lock} pins kvcr=={DEFAULT_VERSION}"
            );
        }
    }

    #[test]
    fn pypi_versions() {
        for v in ["0.1.1", "0.2.0rc1", "1.0.0.post2", "0.3.0+local.1", "1!2.0"] {
            assert_eq!(
                KvcrSpec::parse(&format!("pypi:{v}")),
                Ok(KvcrSpec::Pypi { version: v.into() })
            );
        }
        for bad in ["pypi:", "pypi:>=0.1", "pypi:latest", "pypi:0.1 .1"] {
            let err = KvcrSpec::parse(bad).expect_err(bad);
            assert!(err.contains("is not a version"), "{bad}: {err}");
        }
    }

    #[test]
    fn wheels_and_source_dirs_must_exist_and_become_absolute() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wheel = dir.path().join("kvcr-0.1.1-py3-none-any.whl");
        std::fs::write(&wheel, b"zip").expect("write");
        let spec = KvcrSpec::parse(&wheel.display().to_string()).expect("wheel");
        assert_eq!(spec.kind(), "wheel");
        assert_eq!(spec.local_paths(), vec![wheel.canonicalize().expect("c")]);

        let src = dir.path().join("kvcr-src");
        std::fs::create_dir(&src).expect("mkdir");
        let err = KvcrSpec::parse(&src.display().to_string()).expect_err("no pyproject");
        assert!(err.contains("holds no pyproject.toml"), "{err}");
        std::fs::write(src.join("pyproject.toml"), "[project]\nname='kvcr'\n").expect("write");
        let spec = KvcrSpec::parse(&src.display().to_string()).expect("source dir");
        assert_eq!(spec.kind(), "source-dir");
        assert!(spec.to_string().starts_with('/'), "{spec}");

        let missing = dir.path().join("nope.whl");
        let err = KvcrSpec::parse(&missing.display().to_string()).expect_err("missing");
        assert!(err.contains("does not exist"), "{err}");
        let err = KvcrSpec::parse("./no-such-dir").expect_err("missing dir");
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn a_bare_word_says_how_a_release_is_written() {
        let err = KvcrSpec::parse("0.1.1").expect_err("bare");
        assert!(err.contains("pypi:0.1.1"), "{err}");
        assert!(KvcrSpec::parse("  ").is_err());
    }

    #[test]
    fn a_diff_after_a_spec_is_a_patched_build_and_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let diff = dir.path().join("m01.diff");
        std::fs::write(&diff, "--- a/kvcr/x.py\n").expect("write");
        let diff = diff.canonicalize().expect("canonical");
        let spec =
            KvcrSpec::parse(&format!("pypi:0.3.0+local+{}", diff.display())).expect("patched");
        assert_eq!(
            spec,
            KvcrSpec::patched(
                KvcrSpec::Pypi {
                    version: "0.3.0+local".into()
                },
                &diff
            )
        );
        assert_eq!(KvcrSpec::parse(&spec.to_string()), Ok(spec));
        let bare = KvcrSpec::parse(&diff.display().to_string()).expect("bare diff");
        assert_eq!(bare, KvcrSpec::patched(KvcrSpec::default(), &diff));
        let err = KvcrSpec::parse("pypi:0.1.1+/no/such.diff").expect_err("missing");
        assert!(
            err.contains("the diff /no/such.diff does not exist"),
            "{err}"
        );
        let err = KvcrSpec::parse(&format!("pypi:x+{}", diff.display())).expect_err("bad base");
        assert!(err.contains("is not a version"), "{err}");
    }

    #[test]
    fn patched_specs_name_their_base_and_diff() {
        let spec = KvcrSpec::patched(KvcrSpec::default(), "/m/x.diff");
        assert_eq!(spec.kind(), "patched");
        assert_eq!(spec.to_string(), "pypi:0.1.1+/m/x.diff");
        assert_eq!(spec.local_paths(), vec![PathBuf::from("/m/x.diff")]);
    }
}
