//! The reviewed KVCR diffs of a fixtures folder (curated mutants, policy
//! bugs), shared by the tests that check their headers.

use std::path::{Path, PathBuf};

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `*.diff` of `dir` (relative to the repository root), sorted.
pub fn diff_files(dir: &str) -> Vec<PathBuf> {
    let dir = root().join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "diff"))
        .collect();
    files.sort();
    files
}

pub fn stem(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .expect("a UTF-8 file name")
        .to_string()
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The pinned env's interpreter and its site-packages, after checking it
/// holds kvcr `version` (`what` says whose diffs need it).
pub fn pinned_kvcr(version: &str, what: &str) -> (PathBuf, PathBuf) {
    let user = std::env::var_os("PHASE1_PYTHON").map(PathBuf::from);
    let env = kvcr_e2e::pyenv::ensure(root(), user.as_deref()).expect("the pinned Python env");
    let (found, site) =
        kvcr_e2e::pyenv::kvcr_diff::installed_site(&env.python).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        found,
        version,
        "{what} are diffs against kvcr {version}; {} has kvcr {found:?}",
        env.python.display()
    );
    (env.python, site)
}
