//! KVCR builds under test, for real but without a stack: `--kvcr` specs
//! resolved into KVCR envs over the CPU stack's `.venv`, each imported
//! through its interpreter, with the import hook's report checked.
//!
//! The source directory is kvcr 0.1.1's sdist (fetched once with pip into
//! `target/kvcr-envs/sdist/`), the wheel is built from it with
//! `pip wheel --no-deps`; patched builds apply small diffs to the default
//! build. `cargo test --test kvcr_builds` (no stack: needs no live-run lock).

use std::path::{Path, PathBuf};
use std::process::Command;

use kvcr_e2e::config::KvcrSpec;
use kvcr_e2e::evidence::KvcrBuild;
use kvcr_e2e::pyenv::{self, guard_cli, import_report, kvcr};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn base_python() -> PathBuf {
    let python = std::env::var_os("PHASE1_PYTHON").map(PathBuf::from);
    pyenv::ensure(root(), python.as_deref())
        .expect("the CPU stack's Python env")
        .python
}

fn sdist_dir() -> PathBuf {
    kvcr::sdist_source_dir(root(), &base_python(), "0.1.1").expect("kvcr 0.1.1's sdist")
}

/// Runs `code` with `python` as a component would and returns the log
/// (stderr, where the hook reports) as a component of the import check.
fn component(dir: &Path, name: &str, python: &Path, code: &str) -> import_report::Component {
    let out = Command::new(python)
        .args(["-c", code])
        .output()
        .expect("the interpreter runs");
    let log = dir.join(format!("{name}.log"));
    std::fs::write(&log, &out.stderr).expect("write log");
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    import_report::Component {
        name: name.into(),
        log,
    }
}

fn diff(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write diff");
    path
}

const GUARD_FLAGS: &[&str] = &[
    "--socket-path",
    "--pool-dir",
    "--guard-count",
    "--pool-sizes-gb",
    "--compatibility-digest",
    "--log-level",
];

fn guard_flags() -> Vec<String> {
    GUARD_FLAGS.iter().map(|f| f.to_string()).collect()
}

#[test]
fn the_default_is_the_base_env_as_it_is_and_reports_its_kvcr() {
    let env = kvcr::resolve(root(), &base_python(), &KvcrSpec::default()).expect("default");
    let b = &env.build;
    assert_eq!((b.spec.as_str(), b.source.as_str()), ("pypi:0.1.1", "pypi"));
    assert_eq!(b.version, "0.1.1");
    assert_eq!(b.derived_env, None, "nothing installed for the default");
    assert!(
        b.location.ends_with("site-packages/kvcr"),
        "{}",
        b.location.display()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let c = component(dir.path(), "worker-A", &env.python, "import kvcr");
    let imports = import_report::check(b, &[c]).expect("the default imports the default");
    assert_eq!(imports[0].files_sha256, b.files_sha256);
}

#[test]
fn a_source_dir_and_a_wheel_made_from_it_shadow_the_base_kvcr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = base_python();
    let source = sdist_dir();
    let from_source = kvcr::resolve(
        root(),
        &base,
        &KvcrSpec::parse(&source.display().to_string()).expect("spec"),
    )
    .expect("the sdist builds and imports");
    let wheels = dir.path().join("wheels");
    let built = Command::new(&base)
        .args([
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
        ])
        .arg(&wheels)
        .arg(&source)
        .output()
        .expect("pip runs");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let wheel = wheels.join("kvcr-0.1.1-py3-none-any.whl");
    let from_wheel = kvcr::resolve(
        root(),
        &base,
        &KvcrSpec::parse(&wheel.display().to_string()).expect("spec"),
    )
    .expect("the wheel installs and imports");
    let default = kvcr::resolve(root(), &base, &KvcrSpec::default()).expect("default");

    for (env, source) in [(&from_source, "source-dir"), (&from_wheel, "wheel")] {
        let b = &env.build;
        assert_eq!(b.source, source);
        assert_eq!(b.version, "0.1.1");
        assert!(b.derived_env.is_some());
        assert!(b.location.starts_with(&env.dir), "{}", b.location.display());
        // The sdist holds the same sources as the release the base env has.
        assert_eq!(b.files_sha256, default.build.files_sha256);
        assert_ne!(b.location, default.build.location);
        // The interpreter imports the build and its metadata, and the
        // Guard's own module, from the derived env.
        let c = component(
            dir.path(),
            source,
            &env.python,
            "import kvcr, kvcr.kvcr_service, importlib.metadata as m, sys; \
             assert m.distribution('kvcr').locate_file('kvcr').samefile(kvcr.__path__[0]), m.distribution('kvcr')._path",
        );
        import_report::check(b, &[c]).expect("the build is what the process imports");
        guard_cli::check(&env.python, b, &guard_flags(), &dir.path().join("help"))
            .expect("0.1.1's Guard takes every flag");
    }
    assert_eq!(
        from_source.build.git, None,
        "an unpacked sdist is no checkout"
    );

    // Reused while nothing changed: no pip, a fraction of a second.
    let again = kvcr::resolve(
        root(),
        &base,
        &KvcrSpec::parse(&source.display().to_string()).expect("spec"),
    )
    .expect("reuse");
    assert!(!again.built);
    assert_eq!(again.dir, from_source.dir);
}

#[test]
fn processes_of_two_builds_fail_the_check_naming_the_odd_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = base_python();
    let patch = diff(
        dir.path(),
        "marker.diff",
        "kvcr-e2e test: a build that differs from the default by one line\n\
         --- a/kvcr/__init__.py\n+++ b/kvcr/__init__.py\n@@ -1,2 +1,3 @@\n",
    );
    // The first lines of kvcr 0.1.1's __init__.py, as context of the hunk.
    let init = kvcr::resolve(root(), &base, &KvcrSpec::default())
        .expect("default")
        .build
        .location
        .join("__init__.py");
    let head: Vec<String> = std::fs::read_to_string(init)
        .expect("read")
        .lines()
        .take(2)
        .map(String::from)
        .collect();
    let mut text = std::fs::read_to_string(&patch).expect("read");
    text.push_str(&format!(
        " {}\n {}\n+E2E_MARKER = 'patched'\n",
        head[0], head[1]
    ));
    std::fs::write(&patch, text).expect("write");

    let spec = KvcrSpec::patched(KvcrSpec::default(), &patch);
    let patched = kvcr::resolve(root(), &base, &spec).expect("the diff applies");
    let b = &patched.build;
    assert_eq!(
        (b.source.as_str(), b.version.as_str()),
        ("patched", "0.1.1")
    );
    let p = b.patch.as_ref().expect("patch recorded");
    assert_eq!(p.base_spec, "pypi:0.1.1");
    let default = kvcr::resolve(root(), &base, &KvcrSpec::default()).expect("default");
    assert_eq!(p.base_files_sha256, default.build.files_sha256);
    assert_ne!(b.files_sha256, default.build.files_sha256);

    let guard = component(
        dir.path(),
        "guard",
        &patched.python,
        "import kvcr; assert kvcr.E2E_MARKER == 'patched'",
    );
    let worker = component(dir.path(), "worker-B", &default.python, "import kvcr");
    let err = import_report::check(b, &[guard.clone(), worker]).expect_err("two builds");
    assert!(err.contains("worker-B (pid "), "{err}");
    assert!(
        err.contains(&format!("from {}", default.build.location.display())),
        "{err}"
    );
    assert!(!err.contains("guard (pid"), "{err}");
    import_report::check(b, &[guard]).expect("the patched process alone is fine");
}

#[test]
fn a_diff_that_does_not_apply_fails_with_patchs_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let patch = diff(
        dir.path(),
        "stale.diff",
        "--- a/kvcr/core.py\n+++ b/kvcr/core.py\n@@ -1,3 +1,3 @@\n-this line is not in core.py\n+nor is this one\n context\n",
    );
    let spec = KvcrSpec::patched(KvcrSpec::default(), &patch);
    let err = kvcr::resolve(root(), &base_python(), &spec).expect_err("does not apply");
    let text = err.to_string();
    assert!(
        text.contains("the diff") && text.contains("does not apply to pypi:0.1.1"),
        "{text}"
    );
    assert!(
        text.contains("FAILED") || text.contains("malformed"),
        "patch's own output: {text}"
    );
}

#[test]
fn a_build_that_does_not_import_fails_with_pythons_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let patch = diff(
        dir.path(),
        "broken.diff",
        "--- /dev/null\n+++ b/kvcr/kvcr_e2e_broken.py\n@@ -0,0 +1 @@\n+raise ImportError('planted by kvcr_builds')\n",
    );
    // A new module the Guard imports: kvcr_service.py gains one import line.
    let service = kvcr::resolve(root(), &base_python(), &KvcrSpec::default())
        .expect("default")
        .build
        .location
        .join("kvcr_service.py");
    let first = std::fs::read_to_string(service)
        .expect("read")
        .lines()
        .next()
        .map(String::from)
        .expect("a first line");
    let mut text = std::fs::read_to_string(&patch).expect("read");
    text.push_str(&format!(
        "--- a/kvcr/kvcr_service.py\n+++ b/kvcr/kvcr_service.py\n@@ -1 +1,2 @@\n {first}\n+import kvcr.kvcr_e2e_broken\n"
    ));
    std::fs::write(&patch, text).expect("write");
    let spec = KvcrSpec::patched(KvcrSpec::default(), &patch);
    let err = kvcr::resolve(root(), &base_python(), &spec).expect_err("does not import");
    let text = err.to_string();
    assert!(text.contains("does not import with"), "{text}");
    assert!(
        text.contains("ImportError: planted by kvcr_builds"),
        "Python's own error: {text}"
    );
}

#[test]
fn a_guard_flag_the_build_renamed_is_named_before_any_stack_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let default = kvcr::resolve(root(), &base_python(), &KvcrSpec::default()).expect("default");
    let service =
        std::fs::read_to_string(default.build.location.join("kvcr_service.py")).expect("read");
    let (n, line) = service
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("\"--pool-sizes-gb\""))
        .expect("0.1.1 has --pool-sizes-gb");
    let patch = diff(
        dir.path(),
        "renamed-flag.diff",
        &format!(
            "--- a/kvcr/kvcr_service.py\n+++ b/kvcr/kvcr_service.py\n@@ -{0} +{0} @@\n-{line}\n+{1}\n",
            n + 1,
            line.replace("--pool-sizes-gb", "--pool-sizes")
        ),
    );
    let renamed = kvcr::resolve(
        root(),
        &base_python(),
        &KvcrSpec::patched(KvcrSpec::default(), &patch),
    )
    .expect("the renamed build builds");
    let build: &KvcrBuild = &renamed.build;
    let err = guard_cli::check(
        &renamed.python,
        build,
        &guard_flags(),
        &dir.path().join("help"),
    )
    .expect_err("renamed");
    assert!(
        err.contains("--pool-sizes-gb") && err.contains("patched"),
        "{err}"
    );
    assert!(
        err.contains("its --help lists") && err.contains("--pool-sizes "),
        "{err}"
    );
}
