//! cosmic-ray, from its own pinned env ([`crate::pyenv::MUTGEN`]), over
//! the pristine KVCR the stack's base env holds: the sites of the chosen
//! modules, and the mutated module of each drawn site.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;

use super::sample::Site;
use crate::pyenv;

/// `cosmic_ray_sites.py`: written next to the lane's outputs and run there.
const SCRIPT: &str = include_str!("cosmic_ray_sites.py");

/// The pinned tool and the KVCR it mutates.
pub struct Tool {
    /// The `mutgen` env's interpreter.
    pub python: PathBuf,
    /// The directory holding the pristine `kvcr/` package (site-packages of
    /// the base env).
    pub kvcr_root: PathBuf,
    /// The pristine package's version (`0.1.1`).
    pub kvcr_version: String,
    /// The script's copy in the lane's output directory.
    script: PathBuf,
}

/// A drawn site with cosmic-ray's answer: the mutated module, or why not.
#[derive(Debug, Clone, Deserialize)]
pub struct Drawn {
    #[serde(flatten)]
    pub site: Site,
    #[serde(default)]
    pub mutated: Option<String>,
    #[serde(default)]
    pub skipped: Option<String>,
}

impl Tool {
    /// Builds or reuses the `mutgen` env (saying so: the first build
    /// downloads cosmic-ray from the package index), finds the base env's
    /// pristine kvcr, and writes the script into `out`.
    pub fn ready(repo_root: &Path, out: &Path) -> Result<Tool, String> {
        let venv = repo_root.join(pyenv::MUTGEN.venv_dir);
        if !venv.join("bin/python").exists() {
            println!(
                "generated mutants need cosmic-ray: building the `mutgen` env ({}) from {} \
                 (once; `kvcr-e2e python-env --env mutgen` does the same)",
                pyenv::MUTGEN.venv_dir,
                pyenv::MUTGEN.lock
            );
        }
        let tool = pyenv::ensure_env(repo_root, &pyenv::MUTGEN, None).map_err(|e| {
            format!(
                "the mutation tool's env (`mutgen`, cosmic-ray) is not ready: {e}. \
                 Build it with `kvcr-e2e python-env --env mutgen`"
            )
        })?;
        let pristine = PristineKvcr::find(repo_root)?;
        std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
        let script = out.join("cosmic_ray_sites.py");
        std::fs::write(&script, SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
        Ok(Tool {
            python: tool.python,
            kvcr_root: pristine.root,
            kvcr_version: pristine.version,
            script,
        })
    }

    /// Every site of `modules` (names like `local_dram`), as JSON lines.
    pub fn sites(&self, modules: &[String]) -> Result<String, String> {
        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.script).arg("sites").arg(&self.kvcr_root);
        for module in modules {
            cmd.arg(format!("kvcr/{module}.py"));
        }
        run(&mut cmd)
    }

    /// Walks `order` and returns its sites up to the `want`-th that makes a
    /// valid module that differs, each with its mutated module or why not.
    pub fn mutate(&self, order: &[Site], want: u32) -> Result<Vec<Drawn>, String> {
        let input = serde_json::to_vec(order).map_err(|e| e.to_string())?;
        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .arg("mutate")
            .arg(&self.kvcr_root)
            .arg(want.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.python.display()))?;
        let mut stdin = child.stdin.take().ok_or("no stdin to cosmic-ray")?;
        // The script reads its whole input before it writes: no deadlock.
        stdin
            .write_all(&input)
            .map_err(|e| format!("writing the draw to cosmic-ray: {e}"))?;
        drop(stdin);
        let output = child
            .wait_with_output()
            .map_err(|e| format!("cosmic-ray: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "cosmic-ray's mutate step failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        serde_json::from_slice(&output.stdout)
            .map_err(|e| format!("cosmic-ray's mutate step printed no draw: {e}"))
    }

    /// The pristine text of `module` (`kvcr/local_dram.py`).
    pub fn pristine(&self, module: &str) -> Result<String, String> {
        let path = self.kvcr_root.join(module);
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// The base env's pristine kvcr: the build every generated mutant's diff
/// is applied to.
pub struct PristineKvcr {
    /// The base env's interpreter.
    pub python: PathBuf,
    /// The directory holding the `kvcr/` package (site-packages).
    pub root: PathBuf,
    /// Its version (`0.1.1`).
    pub version: String,
}

impl PristineKvcr {
    /// Asks the base env's interpreter where its kvcr is.
    pub fn find(repo_root: &Path) -> Result<PristineKvcr, String> {
        let base = pyenv::ensure(repo_root, None).map_err(|e| e.to_string())?;
        let probe = run(Command::new(&base.python).args([
            "-c",
            "import importlib.metadata as m, os, kvcr\n\
             print(os.path.dirname(os.path.dirname(os.path.abspath(kvcr.__file__))))\n\
             print(m.version('kvcr'))",
        ]))?;
        let mut lines = probe.lines();
        let (Some(root), Some(version)) = (lines.next(), lines.next()) else {
            return Err(format!(
                "{} did not say where its kvcr is: {probe}",
                base.python.display()
            ));
        };
        Ok(PristineKvcr {
            python: base.python,
            root: PathBuf::from(root.trim()),
            version: version.trim().to_string(),
        })
    }

    /// The files digest of the package, as every KVCR process of a run of
    /// this build reports it ([`pyenv::kvcr_files::package_digest`]).
    pub fn files_sha256(&self) -> Result<String, String> {
        let dir = self.root.join("kvcr");
        pyenv::kvcr_files::package_digest(&dir).map_err(|e| format!("{}: {e}", dir.display()))
    }
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    let output = cmd
        .output()
        .map_err(|e| format!("`{shown}` could not run: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{shown}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
