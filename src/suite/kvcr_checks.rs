//! The KVCR build under test, checked around the stack: before any process
//! starts, that its Guard takes the flags the harness passes; once the
//! stack serves, that every Guard and worker imported it; after a reference
//! phase, that the KVCR-off references imported no KVCR at all.

use std::path::{Path, PathBuf};

use crate::engine::Engine;
use crate::evidence::{ComponentImport, KvcrBuild};
use crate::pyenv::{guard_cli, import_report};
use crate::stack::Stack;
use crate::telemetry::names::kvcr_cli::GUARD_MODULE;

/// Every `--flag` the engine's Guard command lines pass to the Guard
/// service (read from the commands it builds, so nothing can drift).
pub(super) fn guard_flags(engine: &dyn Engine) -> Vec<String> {
    let ctx = crate::engine::LaunchContext::unlaunched("127.0.0.1");
    let mut flags: Vec<String> = engine
        .guards(&ctx)
        .iter()
        .flat_map(|spec| {
            let after = spec
                .args
                .iter()
                .position(|a| a == GUARD_MODULE)
                .map_or(spec.args.len(), |i| i + 1);
            spec.args[after..]
                .iter()
                .filter(|a| a.starts_with("--"))
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

/// Fails, naming the flags, when the build's Guard does not take one the
/// harness passes.
pub(super) fn preflight_guard(
    engine: &dyn Engine,
    python: &Path,
    build: &KvcrBuild,
    repo_root: &Path,
) -> Result<(), String> {
    if !engine.has_guard() {
        return Ok(());
    }
    let cache = repo_root
        .join(crate::pyenv::derived::ENVS_DIR)
        .join("guard-help");
    guard_cli::check(python, build, &guard_flags(engine), &cache)
}

/// The stack's KVCR processes: every Guard service and every worker.
fn kvcr_components(stack: &Stack) -> Vec<import_report::Component> {
    let guards = stack.guards.iter().map(|g| import_report::Component {
        name: g.name().to_string(),
        log: g.log_path().to_path_buf(),
    });
    let workers = stack.workers();
    let workers = workers.iter().map(|w| import_report::Component {
        name: w.process.name().to_string(),
        log: w.process.log_path().to_path_buf(),
    });
    guards.chain(workers).collect()
}

/// Every Guard and worker reported importing `build`, or the error naming
/// those that did not.
pub(super) fn check_imports(
    stack: &Stack,
    build: &KvcrBuild,
) -> Result<Vec<ComponentImport>, String> {
    import_report::check(build, &kvcr_components(stack))
}

/// The reference engines' logs in `logs_dir` (`reference*.log`, the bare
/// engine's `bare-*.log`).
fn reference_components(logs_dir: &Path) -> Result<Vec<import_report::Component>, String> {
    let entries = std::fs::read_dir(logs_dir).map_err(|e| {
        format!(
            "cannot read the logs directory {} to check the KVCR-off references: {e}",
            logs_dir.display()
        )
    })?;
    let mut logs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                (n.starts_with("reference") || n.starts_with("bare-")) && n.ends_with(".log")
            })
        })
        .collect();
    logs.sort();
    Ok(logs
        .into_iter()
        .map(|log| import_report::Component {
            name: log
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            log,
        })
        .collect())
}

/// After a reference phase that ran: KVCR-off references left the build
/// out of the cache key, so they must not have imported KVCR. A phase that
/// left no reference log, or one that cannot be read, fails: no log read is
/// no evidence that nothing imported KVCR.
pub(super) fn check_references(engine: &dyn Engine, logs_dir: &Path) -> Result<(), String> {
    if engine.reference_imports_kvcr() {
        return Ok(());
    }
    let components = reference_components(logs_dir)?;
    if components.is_empty() {
        return Err(format!(
            "no reference log (reference*.log, bare-*.log) in {}: cannot show that the KVCR-off references imported no KVCR",
            logs_dir.display()
        ));
    }
    import_report::check_none(&components)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_flags_are_read_from_the_engines_command_lines() {
        let engine = crate::config::testing::phase1_engine();
        assert_eq!(
            guard_flags(engine.as_ref()),
            [
                "--compatibility-digest",
                "--guard-count",
                "--log-level",
                "--pool-dir",
                "--pool-sizes-gb",
                "--socket-path"
            ]
        );
    }

    #[test]
    fn reference_logs_are_found_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "reference.log",
            "reference-nocache.log",
            "bare-vllm.log",
            "worker-A.log",
            "guard.log",
        ] {
            std::fs::write(dir.path().join(name), "").expect("write");
        }
        let names: Vec<String> = reference_components(dir.path())
            .expect("listed")
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["bare-vllm", "reference-nocache", "reference"]);
    }

    #[test]
    fn references_without_a_log_fail_the_check() {
        let engine = crate::config::testing::phase1_engine();
        assert!(
            !engine.reference_imports_kvcr(),
            "the CPU engine's references run without KVCR"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("worker-A.log"), "").expect("write");
        let err = check_references(engine.as_ref(), dir.path()).unwrap_err();
        assert!(err.starts_with("no reference log"), "{err}");
        let err = check_references(engine.as_ref(), &dir.path().join("gone")).unwrap_err();
        assert!(err.contains("cannot read the logs directory"), "{err}");
        std::fs::write(dir.path().join("reference.log"), "engine ready\n").expect("write");
        assert_eq!(check_references(engine.as_ref(), dir.path()), Ok(()));
        // A reference log that cannot be read (a directory by that name).
        std::fs::create_dir(dir.path().join("reference-nocache.log")).expect("mkdir");
        let err = check_references(engine.as_ref(), dir.path()).unwrap_err();
        assert!(err.contains("reference-nocache"), "{err}");
    }
}
