//! `--kvcr <spec>`: the KVCR build a run tests, installed over the lane's
//! base env.
//!
//! ```no_run
//! use kvcr_e2e::pyenv::KvcrSpec;
//! use kvcr_e2e::pyenv::{self, kvcr};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = std::path::Path::new(".");
//! let base = pyenv::ensure(root, None)?;
//! // The mutation driver's build: the default build with one diff applied.
//! let spec = KvcrSpec::patched(KvcrSpec::default(), "fixtures/kvcr-mutants/example.diff");
//! let env = kvcr::resolve(root, &base.python, &spec)?;
//! // Every component of the stack runs `env.python`; each must report `env.build`.
//! println!("{} -> {}", env.build.one_line(), env.python.display());
//! # Ok(()) }
//! ```
//!
//! [`resolve`] turns a spec into a [`KvcrEnv`] (see [`super::derived`] for
//! the layout on disk):
//! - `pypi:<version>` equal to the base env's kvcr: the base env as it is,
//!   with only the import report hook (no install, nothing copied);
//! - another `pypi:<version>`: the release fetched once into
//!   `target/kvcr-envs/downloads/<version>/`, then installed like a wheel;
//! - a wheel or a source directory: `pip install --no-deps --target` with
//!   the base env's pip (the base env carries kvcr's dependencies; a build
//!   that needs one it lacks fails with `pip check`'s words);
//! - [`KvcrSpec::Patched`]: the base build's installed `kvcr` package (and
//!   its dist-info) copied, then the diff applied with `patch -p1` (paths
//!   `a/kvcr/<module>.py`, or `a/src/kvcr/<module>.py` from a checkout).
//!
//! Each env is keyed by what was installed (the kind, the artifact's or
//! the source tree's digest, the base env's identity) and reused while the
//! key is unchanged. Every new env is imported once (`import kvcr,
//! kvcr.kvcr_service`) before any stack starts: a build that fails to
//! install or import stops the run with pip's or Python's own words.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::KvcrSpec;
use super::{KvcrBuild, PatchState};

use super::derived::{self, EnvDir, ENVS_DIR};
use super::import_report::{self, Report};
use super::kvcr_files;

/// The KVCR build a run uses and the interpreter that imports it.
#[derive(Debug, Clone)]
pub struct KvcrEnv {
    /// What every component runs: the base interpreter with the build first
    /// on its path (`<env>/bin/python`).
    pub python: PathBuf,
    pub build: KvcrBuild,
    /// The env's directory under `target/kvcr-envs/`.
    pub dir: PathBuf,
    /// Whether this call built (not reused) the env.
    pub built: bool,
    pub seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum KvcrError {
    #[error("cannot fetch kvcr=={version} from the package index for --kvcr pypi:{version}. `{command}` said:\n{output}")]
    Download {
        version: String,
        command: String,
        output: String,
    },
    #[error("pip could not install the KVCR build {spec}. `{command}` said:\n{output}")]
    Install {
        spec: String,
        command: String,
        output: String,
    },
    #[error("the KVCR build {spec} installed no kvcr distribution into {site} ({detail}); is it a KVCR build?")]
    NotKvcr {
        spec: String,
        site: PathBuf,
        detail: String,
    },
    #[error("the KVCR build {spec} (kvcr {version}) needs packages the base env {python} lacks or has in other versions; `pip check` said:\n{output}\nInstall them into the base env, or test a build that fits it")]
    MissingDependency {
        spec: String,
        version: String,
        python: PathBuf,
        output: String,
    },
    #[error("the KVCR build {spec} does not import with {python}. `{command}` said:\n{output}")]
    Import {
        spec: String,
        python: PathBuf,
        command: String,
        output: String,
    },
    #[error("the KVCR build {spec}: {detail}")]
    Report { spec: String, detail: String },
    #[error("the diff {file}: {detail}")]
    Diff { file: PathBuf, detail: String },
    #[error("the diff {file} does not apply to {base} (kvcr files {base_files}); nothing was built. `{command}` said:\n{output}")]
    PatchFailed {
        file: PathBuf,
        base: String,
        base_files: String,
        command: String,
        output: String,
    },
    #[error("`{command}` could not run: {source}")]
    Run {
        command: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Patch(#[from] super::PatchError),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The KVCR env for `spec` over the base interpreter `base_python`, built
/// or reused under `repo_root/target/kvcr-envs/`; older envs are pruned.
pub fn resolve(
    repo_root: &Path,
    base_python: &Path,
    spec: &KvcrSpec,
) -> Result<KvcrEnv, KvcrError> {
    let started = Instant::now();
    let envs = repo_root.join(ENVS_DIR);
    let base_python = interpreter_path(base_python);
    let _lock = derived::lock_envs(&envs)?;
    let base = Base::ensure(&envs, &base_python)?;
    let (env, built) = resolve_locked(&envs, &base, spec)?;
    let dir = EnvDir {
        dir: env.dir.clone(),
    };
    dir.hold()?;
    for removed in derived::prune(&envs, &dir.dir) {
        progress(&format!("pruned the old KVCR env {}", removed.display()));
    }
    let seconds = started.elapsed().as_secs_f64();
    if built {
        progress(&format!(
            "{} ready in {seconds:.1} s ({})",
            env.build.one_line(),
            env.dir.display()
        ));
    }
    Ok(KvcrEnv {
        built,
        seconds,
        ..env
    })
}

/// The base env's identity and its own kvcr, with the hook-only env over it.
struct Base {
    python: PathBuf,
    /// The key of the base env: its interpreter and, for a project venv,
    /// the digest of the lock and patches it was built from.
    key: String,
    env: EnvDir,
    /// The base env's own kvcr, when it has one.
    kvcr: Result<KvcrBuild, String>,
}

impl Base {
    fn ensure(envs: &Path, python: &Path) -> Result<Self, KvcrError> {
        let marker = python
            .parent()
            .and_then(Path::parent)
            .map(|venv| venv.join(super::MARKER))
            .and_then(|m| std::fs::read_to_string(m).ok())
            .unwrap_or_default();
        let key = digest(&["base", &python.display().to_string(), marker.trim()]);
        let env = EnvDir::new(envs, "base", &key);
        let reused = env.is_ready() && read_record(&env).is_some_and(|b| still_installed(&b));
        if !reused {
            env.reset()?;
            env.write_launcher(python)?;
            let kvcr = probe_base(&env, python);
            let record = serde_json::to_string_pretty(&kvcr.as_ref().ok())
                .map_err(|e| io(&env.record(), std::io::Error::other(e)))?;
            write(&env.record(), &record)?;
            env.mark_ready()?;
        }
        // The hook and wrapper follow this harness's version of them.
        env.write_launcher(python)?;
        let kvcr = read_record(&env).ok_or_else(|| {
            std::fs::read_to_string(env.dir.join("probe.txt"))
                .unwrap_or_else(|_| "no kvcr found".into())
        });
        Ok(Self {
            python: python.to_path_buf(),
            key,
            env,
            kvcr,
        })
    }
}

/// Finds (without importing) the base env's kvcr and records it.
fn probe_base(env: &EnvDir, python: &Path) -> Result<KvcrBuild, String> {
    const PROBE: &str = "import importlib.util, importlib.metadata, os\n\
        s = importlib.util.find_spec('kvcr')\n\
        locs = list(s.submodule_search_locations or []) if s else []\n\
        print('locations=%d' % len(locs))\n\
        print('location=' + (os.path.realpath(locs[0]) if len(locs) == 1 else ''))\n\
        print('version=' + importlib.metadata.version('kvcr'))\n";
    let result = (|| {
        // The base env's own kvcr: a PYTHONPATH of the harness's caller
        // would shadow it for this probe, not for what the run records.
        let out = Command::new(env.python())
            .args(["-c", PROBE])
            .env_remove("PYTHONPATH")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", env.python().display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(tail(&String::from_utf8_lossy(&out.stderr), 3));
        }
        let field = |name: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .unwrap_or_default()
                .to_string()
        };
        match field("locations").as_str() {
            "1" => {}
            "0" => return Err("it has no kvcr package".into()),
            "" => return Err(format!("the probe printed nothing: {}", stdout.trim())),
            n => {
                return Err(format!(
                    "its kvcr has {n} package paths (a namespace package)"
                ))
            }
        }
        let location = PathBuf::from(field("location"));
        let files_sha256 = kvcr_files::package_digest(&location)
            .map_err(|e| format!("cannot read {}: {e}", location.display()))?;
        let version = field("version");
        Ok(KvcrBuild {
            spec: format!("pypi:{version}"),
            source: "pypi".into(),
            version,
            files_sha256,
            location,
            derived_env: None,
            artifact_sha256: None,
            git: None,
            patch: None,
            base_python: python.to_path_buf(),
        })
    })();
    if let Err(why) = &result {
        let _ = std::fs::write(env.dir.join("probe.txt"), why);
    }
    result
}

fn resolve_locked(envs: &Path, base: &Base, spec: &KvcrSpec) -> Result<(KvcrEnv, bool), KvcrError> {
    match spec {
        KvcrSpec::Pypi { version } => match &base.kvcr {
            Ok(own) if own.version == *version => Ok((
                KvcrEnv {
                    python: base.env.python(),
                    build: KvcrBuild {
                        spec: spec.to_string(),
                        ..own.clone()
                    },
                    dir: base.env.dir.clone(),
                    built: false,
                    seconds: 0.0,
                },
                false,
            )),
            own => {
                progress(&match own {
                    Ok(own) => format!(
                        "the base env {} has kvcr {}; --kvcr {spec} is installed over it",
                        base.python.display(),
                        own.version
                    ),
                    Err(why) => format!(
                        "the base env {} has no usable kvcr ({why}); --kvcr {spec} is installed over it",
                        base.python.display()
                    ),
                });
                let file = download(envs, &base.python, version)?;
                let sha = sha256_file(&file)?;
                install(envs, base, spec, &file, sha, None)
            }
        },
        KvcrSpec::Wheel { path } => {
            let sha = sha256_file(path)?;
            install(envs, base, spec, path, sha, None)
        }
        KvcrSpec::SourceDir { path } => {
            let sha = kvcr_files::source_digest(path).map_err(|e| io(path, e))?;
            install(envs, base, spec, path, sha, kvcr_files::git_state(path))
        }
        KvcrSpec::Patched {
            base: inner,
            diff: file,
        } => {
            let (inner, _) = resolve_locked(envs, base, inner)?;
            patched(envs, base, &inner.build, spec, file)
        }
    }
}

/// `pip install --no-deps --target` of a wheel, sdist or source tree.
fn install(
    envs: &Path,
    base: &Base,
    spec: &KvcrSpec,
    what: &Path,
    artifact_sha256: String,
    git: Option<super::GitState>,
) -> Result<(KvcrEnv, bool), KvcrError> {
    let kind = spec.kind();
    let key = digest(&[kind, &artifact_sha256, &base.key]);
    let env = EnvDir::new(envs, kind, &key);
    if let Some(reused) = reuse(&env, spec, &base.python) {
        return Ok((reused, false));
    }
    progress(&format!(
        "installing the KVCR build {spec} into {} (pip install --no-deps, over {})",
        env.dir.display(),
        base.python.display()
    ));
    env.reset()?;
    let mut pip = Command::new(&base.python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--no-warn-script-location",
        "--target",
    ])
    .arg(env.site())
    .arg(what);
    let (ok, command, output) = run(&mut pip)?;
    if !ok {
        return Err(KvcrError::Install {
            spec: spec.to_string(),
            command,
            output: tail(&output, 25),
        });
    }
    env.write_launcher(&base.python)?;
    let (version, location) = installed(&env.site(), spec)?;
    check_dependencies(&env, spec, &version, &base.python)?;
    let build = KvcrBuild {
        spec: spec.to_string(),
        source: kind.into(),
        version,
        files_sha256: kvcr_files::package_digest(&location).map_err(|e| io(&location, e))?,
        location,
        derived_env: Some(key),
        artifact_sha256: Some(artifact_sha256),
        git,
        patch: None,
        base_python: base.python.clone(),
    };
    finish(env, build)
}

/// The base build's installed package with `file` applied.
fn patched(
    envs: &Path,
    base: &Base,
    inner: &KvcrBuild,
    spec: &KvcrSpec,
    file: &Path,
) -> Result<(KvcrEnv, bool), KvcrError> {
    let bytes = std::fs::read(file).map_err(|e| io(file, e))?;
    let strip = strip_of(file, &String::from_utf8_lossy(&bytes))?;
    let diff_sha = hex::encode(Sha256::digest(&bytes));
    let key = digest(&["patched", &inner.files_sha256, &diff_sha, &base.key]);
    let env = EnvDir::new(envs, "patched", &key);
    if let Some(reused) = reuse(&env, spec, &base.python) {
        return Ok((reused, false));
    }
    super::patches::require_patch_program()?;
    env.reset()?;
    let site = env.site();
    copy_tree(&inner.location, &site.join("kvcr"))?;
    if let Some(dist_info) = dist_info_of(inner) {
        if let Some(name) = dist_info.file_name() {
            copy_tree(&dist_info, &site.join(name))?;
        }
    }
    let patch = |dry: bool| {
        let mut cmd = Command::new("patch");
        cmd.arg(format!("-p{strip}"))
            .args(["--forward", "--batch", "--no-backup-if-mismatch"]);
        if dry {
            cmd.arg("--dry-run");
        }
        cmd.arg("-d").arg(&site).arg("-i").arg(file);
        cmd
    };
    for dry in [true, false] {
        let (ok, command, output) = run(&mut patch(dry))?;
        if !ok {
            return Err(KvcrError::PatchFailed {
                file: file.to_path_buf(),
                base: inner.spec.clone(),
                base_files: short(&inner.files_sha256).to_string(),
                command,
                output: tail(&output, 30),
            });
        }
    }
    env.write_launcher(&base.python)?;
    let location = site.join("kvcr");
    let build = KvcrBuild {
        spec: spec.to_string(),
        source: "patched".into(),
        version: inner.version.clone(),
        files_sha256: kvcr_files::package_digest(&location).map_err(|e| io(&location, e))?,
        location,
        derived_env: Some(key),
        artifact_sha256: Some(diff_sha.clone()),
        git: None,
        patch: Some(PatchState {
            file: file.to_path_buf(),
            sha256: diff_sha,
            base_spec: inner.spec.clone(),
            base_files_sha256: inner.files_sha256.clone(),
        }),
        base_python: base.python.clone(),
    };
    finish(env, build)
}

/// Imports the new build once, then records it and marks the env ready.
fn finish(env: EnvDir, build: KvcrBuild) -> Result<(KvcrEnv, bool), KvcrError> {
    import_check(&env, &build)?;
    let record = serde_json::to_string_pretty(&build)
        .map_err(|e| io(&env.record(), std::io::Error::other(e)))?;
    write(&env.record(), &record)?;
    env.mark_ready()?;
    Ok((
        KvcrEnv {
            python: env.python(),
            build,
            dir: env.dir,
            built: true,
            seconds: 0.0,
        },
        true,
    ))
}

/// A ready env whose installed files are still what it recorded.
fn reuse(env: &EnvDir, spec: &KvcrSpec, base_python: &Path) -> Option<KvcrEnv> {
    let build = read_record(env).filter(|b| env.is_ready() && still_installed(b))?;
    env.write_launcher(base_python).ok()?;
    Some(KvcrEnv {
        python: env.python(),
        build: KvcrBuild {
            spec: spec.to_string(),
            ..build
        },
        dir: env.dir.clone(),
        built: false,
        seconds: 0.0,
    })
}

fn still_installed(build: &KvcrBuild) -> bool {
    kvcr_files::package_digest(&build.location).is_ok_and(|d| d == build.files_sha256)
}

fn read_record(env: &EnvDir) -> Option<KvcrBuild> {
    let text = std::fs::read_to_string(env.record()).ok()?;
    serde_json::from_str::<Option<KvcrBuild>>(&text)
        .ok()
        .flatten()
}

/// `import kvcr, kvcr.kvcr_service` through the env's interpreter: it must
/// work, and the hook must report exactly this build.
fn import_check(env: &EnvDir, build: &KvcrBuild) -> Result<(), KvcrError> {
    const CODE: &str = "import kvcr, kvcr.kvcr_service";
    let python = env.python();
    let out = Command::new(&python)
        .args(["-c", CODE])
        .env("PYTHONUNBUFFERED", "1")
        .output()
        .map_err(|source| KvcrError::Run {
            command: format!("{} -c '{CODE}'", python.display()),
            source,
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(KvcrError::Import {
            spec: build.spec.clone(),
            python,
            command: format!("python -c '{CODE}'"),
            output: tail(&stderr, 20),
        });
    }
    let component = import_report::Component {
        name: "the import check".into(),
        log: env.dir.join("import-check.log"),
    };
    write(&component.log, &stderr)?;
    match import_report::parse(&stderr).into_iter().next() {
        Some((_, Report::Imported { .. })) => import_report::check(build, &[component])
            .map(drop)
            .map_err(|detail| KvcrError::Report {
                spec: build.spec.clone(),
                detail,
            }),
        Some((_, Report::Error(why))) => Err(KvcrError::Report {
            spec: build.spec.clone(),
            detail: format!("the import hook could not report: {why}"),
        }),
        None => Err(KvcrError::Report {
            spec: build.spec.clone(),
            detail: format!(
                "`{CODE}` worked but the import hook said nothing: another sitecustomize comes first on PYTHONPATH ({})",
                std::env::var("PYTHONPATH").unwrap_or_default()
            ),
        }),
    }
}

/// `pip check` over the base env with the build first: the build's own
/// requirement lines must all be met.
fn check_dependencies(
    env: &EnvDir,
    spec: &KvcrSpec,
    version: &str,
    base_python: &Path,
) -> Result<(), KvcrError> {
    let mut cmd = Command::new(env.python());
    cmd.args(["-m", "pip", "check", "--disable-pip-version-check"]);
    let (_, _, output) = run(&mut cmd)?;
    let ours = format!("kvcr {version} ");
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with(&ours))
        .collect();
    if lines.is_empty() {
        return Ok(());
    }
    Err(KvcrError::MissingDependency {
        spec: spec.to_string(),
        version: version.into(),
        python: base_python.to_path_buf(),
        output: lines.join("\n"),
    })
}

/// The version and package directory pip installed into `site`.
fn installed(site: &Path, spec: &KvcrSpec) -> Result<(String, PathBuf), KvcrError> {
    let not_kvcr = |detail: String| KvcrError::NotKvcr {
        spec: spec.to_string(),
        site: site.to_path_buf(),
        detail,
    };
    let names: Vec<String> = std::fs::read_dir(site)
        .map_err(|e| io(site, e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let dist = names
        .iter()
        .find(|n| n.starts_with("kvcr-") && n.ends_with(".dist-info"))
        .ok_or_else(|| not_kvcr(format!("it holds {}", names.join(", "))))?;
    let metadata = std::fs::read_to_string(site.join(dist).join("METADATA"))
        .map_err(|e| io(&site.join(dist).join("METADATA"), e))?;
    let version = metadata
        .lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| not_kvcr(format!("{dist}/METADATA has no Version")))?;
    let location = site.join("kvcr");
    if !location.join("__init__.py").is_file() {
        return Err(not_kvcr(format!(
            "{dist} is there, but no kvcr/__init__.py"
        )));
    }
    Ok((version, location))
}

/// The `kvcr-<version>.dist-info` beside a build's package.
fn dist_info_of(build: &KvcrBuild) -> Option<PathBuf> {
    let parent = build.location.parent()?;
    std::fs::read_dir(parent)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == format!("kvcr-{}.dist-info", build.version))
        })
}

/// `-p1` for paths `a/kvcr/...`, `-p2` for `a/src/kvcr/...`.
pub fn strip_of(file: &Path, text: &str) -> Result<u32, KvcrError> {
    let bad = |detail: String| KvcrError::Diff {
        file: file.to_path_buf(),
        detail,
    };
    let paths: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("+++ ").or_else(|| l.strip_prefix("--- ")))
        .map(|rest| rest.split('\t').next().unwrap_or(rest).trim())
        .filter(|p| *p != "/dev/null")
        .collect();
    if paths.is_empty() {
        return Err(bad(
            "it holds no file header (`--- a/kvcr/<module>.py` / `+++ b/kvcr/<module>.py`)".into(),
        ));
    }
    let mut strips = paths.iter().map(|p| {
        let rest = p.split_once('/').map_or("", |(_, rest)| rest);
        if rest.starts_with("kvcr/") {
            Ok(1)
        } else if rest.starts_with("src/kvcr/") {
            Ok(2)
        } else {
            Err(bad(format!(
                "it changes `{p}`; expected paths a/kvcr/<module>.py (relative to the directory that holds the kvcr package) or a/src/kvcr/<module>.py (a source checkout)"
            )))
        }
    });
    let first = strips.next().unwrap_or(Ok(1))?;
    for other in strips {
        if other? != first {
            return Err(bad("it mixes a/kvcr/... and a/src/kvcr/... paths".into()));
        }
    }
    Ok(first)
}

/// The release file for `version`, fetched once with the base env's pip.
fn download(envs: &Path, base_python: &Path, version: &str) -> Result<PathBuf, KvcrError> {
    let dir = envs.join("downloads").join(version);
    if let Some(file) = release_file(&dir) {
        return Ok(file);
    }
    let tmp = envs
        .join("downloads")
        .join(format!(".{version}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    progress(&format!("fetching kvcr=={version} from the package index"));
    let mut pip = Command::new(base_python);
    pip.args([
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-d",
    ])
    .arg(&tmp)
    .arg(format!("kvcr=={version}"));
    let (ok, command, output) = run(&mut pip)?;
    if !ok || release_file(&tmp).is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(KvcrError::Download {
            version: version.into(),
            command,
            output: tail(&output, 15),
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir).map_err(|e| io(&dir, e))?;
    release_file(&dir).ok_or_else(|| KvcrError::Download {
        version: version.into(),
        command: "pip download".into(),
        output: format!("{} holds no kvcr release file", dir.display()),
    })
}

/// A wheel, else an sdist, of kvcr in `dir`.
fn release_file(dir: &Path) -> Option<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.to_ascii_lowercase().starts_with("kvcr-")
                    && (n.ends_with(".whl") || n.ends_with(".tar.gz") || n.ends_with(".zip"))
            })
        })
        .collect();
    files.sort_by_key(|p| !p.to_string_lossy().ends_with(".whl"));
    files.into_iter().next()
}

/// An unpacked sdist of a kvcr release (for tests and for building a source
/// tree to try): fetched with `pip download --no-binary :all:` and unpacked
/// under `target/kvcr-envs/sdist/`, once.
pub fn sdist_source_dir(
    repo_root: &Path,
    base_python: &Path,
    version: &str,
) -> Result<PathBuf, KvcrError> {
    let envs = repo_root.join(ENVS_DIR);
    let root = envs.join("sdist");
    let dir = root.join(format!("kvcr-{version}"));
    if dir.join("pyproject.toml").is_file() {
        return Ok(dir);
    }
    let _lock = derived::lock_envs(&envs)?;
    if dir.join("pyproject.toml").is_file() {
        return Ok(dir);
    }
    let fetched = root.join(format!(".fetch-{version}"));
    let _ = std::fs::remove_dir_all(&fetched);
    std::fs::create_dir_all(&fetched).map_err(|e| io(&fetched, e))?;
    let mut pip = Command::new(base_python);
    pip.args([
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-d",
    ])
    .arg(&fetched)
    .arg(format!("kvcr=={version}"));
    let (ok, command, output) = run(&mut pip)?;
    let sdist = fetched.join(format!("kvcr-{version}.tar.gz"));
    if !ok || !sdist.is_file() {
        return Err(KvcrError::Download {
            version: version.into(),
            command,
            output: tail(&output, 15),
        });
    }
    let mut tar = Command::new("tar");
    tar.arg("-xzf").arg(&sdist).arg("-C").arg(&root);
    let (ok, command, output) = run(&mut tar)?;
    if !ok || !dir.join("pyproject.toml").is_file() {
        return Err(KvcrError::Download {
            version: version.into(),
            command,
            output: tail(&output, 15),
        });
    }
    let _ = std::fs::remove_dir_all(&fetched);
    Ok(dir)
}

/// A base interpreter's path, absolute, with its directory's symlinks
/// resolved but not its own: a venv's `bin/python` links to the system
/// interpreter, and running that link is what makes it the venv.
fn interpreter_path(python: &Path) -> PathBuf {
    let absolute = if python.is_absolute() {
        python.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(python))
            .unwrap_or_else(|_| python.to_path_buf())
    };
    match (absolute.parent(), absolute.file_name()) {
        (Some(dir), Some(name)) => dir.canonicalize().map(|d| d.join(name)).unwrap_or(absolute),
        _ => absolute,
    }
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), KvcrError> {
    std::fs::create_dir_all(to).map_err(|e| io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| io(from, e))? {
        let entry = entry.map_err(|e| io(from, e))?;
        let path = entry.path();
        let name = entry.file_name();
        if name == "__pycache__" {
            continue;
        }
        let target = to.join(&name);
        if path.is_dir() {
            copy_tree(&path, &target)?;
        } else if path.is_file() {
            std::fs::copy(&path, &target).map_err(|e| io(&path, e))?;
        }
    }
    Ok(())
}

fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    h.update(b"kvcr-e2e kvcr env v1");
    for part in parts {
        h.update(b"\0");
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

fn sha256_file(path: &Path) -> Result<String, KvcrError> {
    kvcr_files::file_sha256(path).map_err(|e| io(path, e))
}

/// Runs a command; (success, the command line, stdout and stderr).
fn run(command: &mut Command) -> Result<(bool, String, String), KvcrError> {
    let shown = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = command.output().map_err(|source| KvcrError::Run {
        command: shown.clone(),
        source,
    })?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), shown, text.trim_end().to_string()))
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

fn write(path: &Path, contents: &str) -> Result<(), KvcrError> {
    std::fs::write(path, contents).map_err(|e| io(path, e))
}

pub(super) fn io(path: &Path, source: std::io::Error) -> KvcrError {
    KvcrError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn progress(message: &str) {
    crate::events::emit(crate::events::RunEvent::SetupStep {
        part: crate::events::SetupPart::KvcrBuild,
        message: message.to_string(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strip_follows_the_paths_of_the_diff() {
        let f = Path::new("m.diff");
        let site = "header: a planted bug\n--- a/kvcr/local_dram.py\n+++ b/kvcr/local_dram.py\n@@ -1 +1 @@\n";
        assert_eq!(strip_of(f, site).expect("site layout"), 1);
        let checkout = "--- a/src/kvcr/core.py\t2026-01-01\n+++ b/src/kvcr/core.py\n";
        assert_eq!(strip_of(f, checkout).expect("checkout layout"), 2);
        let new_file = "--- /dev/null\n+++ b/kvcr/extra.py\n";
        assert_eq!(strip_of(f, new_file).expect("new file"), 1);
        let err = strip_of(f, "--- a/vllm/x.py\n+++ b/vllm/x.py\n").expect_err("not kvcr");
        assert!(
            err.to_string().contains("it changes `a/vllm/x.py`"),
            "{err}"
        );
        let err = strip_of(f, "just text\n").expect_err("no header");
        assert!(err.to_string().contains("no file header"), "{err}");
        let mixed = "--- a/kvcr/a.py\n+++ b/kvcr/a.py\n--- a/src/kvcr/b.py\n+++ b/src/kvcr/b.py\n";
        assert!(strip_of(f, mixed).is_err());
    }

    #[test]
    fn keys_differ_by_every_part() {
        let a = digest(&["wheel", "abc", "base1"]);
        assert_ne!(a, digest(&["wheel", "abc", "base2"]));
        assert_ne!(a, digest(&["wheel", "abd", "base1"]));
        assert_ne!(a, digest(&["source-dir", "abc", "base1"]));
        // Parts are separated: moving a character between them changes the key.
        assert_ne!(digest(&["ab", "c"]), digest(&["a", "bc"]));
    }

    #[test]
    fn the_interpreter_path_keeps_the_venv_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("venv/bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::os::unix::fs::symlink("/usr/bin/python3", bin.join("python")).expect("link");
        let path = interpreter_path(&bin.join("python"));
        assert!(path.ends_with("venv/bin/python"), "{}", path.display());
    }

    #[test]
    fn a_release_prefers_the_wheel() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(release_file(dir.path()), None);
        std::fs::write(dir.path().join("kvcr-0.2.0.tar.gz"), "").expect("write");
        assert!(release_file(dir.path()).is_some_and(|p| p.ends_with("kvcr-0.2.0.tar.gz")));
        std::fs::write(dir.path().join("kvcr-0.2.0-py3-none-any.whl"), "").expect("write");
        assert!(
            release_file(dir.path()).is_some_and(|p| p.ends_with("kvcr-0.2.0-py3-none-any.whl"))
        );
    }
}
