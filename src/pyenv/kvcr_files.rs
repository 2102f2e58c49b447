//! Digests of KVCR files: an installed `kvcr` package, a source tree, a git
//! checkout's state.
//!
//! [`package_digest`] is the digest every KVCR process reports for the
//! package it imported (the import hook computes it the same way, in
//! Python): SHA-256 over `<relative path>\0<sha256 of the file>\n` for every
//! file under the package directory in path order, `__pycache__` and `*.pyc`
//! left out.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::GitState;

/// Directories a source tree's digest leaves out when it is not a git
/// checkout (build outputs and caches, not sources).
const NOT_SOURCES: &[&str] = &[
    ".git",
    "__pycache__",
    "build",
    "dist",
    ".tox",
    ".nox",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
];

/// The digest of an installed package directory (see the module doc).
pub fn package_digest(dir: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    walk(dir, Path::new(""), &["__pycache__"], &mut files)?;
    files_digest(dir, &files)
}

/// The digest of the files `files` (relative to `root`), in path order.
pub fn files_digest(root: &Path, files: &[String]) -> std::io::Result<String> {
    let mut sorted: Vec<&String> = files.iter().collect();
    sorted.sort();
    let mut hasher = Sha256::new();
    for rel in sorted {
        let content = std::fs::read(root.join(rel))?;
        hasher.update(rel.as_bytes());
        hasher.update(b"\0");
        hasher.update(hex::encode(Sha256::digest(&content)).as_bytes());
        hasher.update(b"\n");
    }
    Ok(hex::encode(hasher.finalize()))
}

/// SHA-256 of one file.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    Ok(hex::encode(Sha256::digest(std::fs::read(path)?)))
}

/// The files of a source tree, relative to `dir`: what git lists (tracked,
/// and untracked but not ignored) in a checkout, else every file outside
/// build outputs and caches.
pub fn source_files(dir: &Path) -> std::io::Result<Vec<String>> {
    if let Some(listed) = git_files(dir) {
        return Ok(listed
            .into_iter()
            .filter(|rel| dir.join(rel).is_file())
            .collect());
    }
    let mut files = Vec::new();
    walk(dir, Path::new(""), NOT_SOURCES, &mut files)?;
    Ok(files)
}

/// The digest of a source tree ([`source_files`]).
pub fn source_digest(dir: &Path) -> std::io::Result<String> {
    files_digest(dir, &source_files(dir)?)
}

/// The commit and dirty flag of a directory that git tracks files in;
/// `None` for a directory git does not track (an unpacked sdist, a
/// directory ignored by an enclosing repository).
pub fn git_state(dir: &Path) -> Option<GitState> {
    git_files(dir)?;
    let commit = git(dir, &["rev-parse", "HEAD"])?;
    let status = git(
        dir,
        &[
            "status",
            "--porcelain",
            "--untracked-files=normal",
            "--",
            ".",
        ],
    )?;
    Some(GitState {
        commit: commit.trim().to_string(),
        dirty: !status.trim().is_empty(),
    })
}

/// `git ls-files` of `dir` when git tracks files in it.
fn git_files(dir: &Path) -> Option<Vec<String>> {
    let tracked = git(dir, &["ls-files", "-z", "--cached", "--", "."])?;
    if tracked.is_empty() {
        return None;
    }
    let all = git(
        dir,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            ".",
        ],
    )?;
    let mut files: Vec<String> = all
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    files.sort();
    files.dedup();
    Some(files)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn walk(root: &Path, rel: &Path, skip: &[&str], out: &mut Vec<String>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(root.join(rel))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(String::from) else {
            continue;
        };
        let child = rel.join(&name);
        if path.is_dir() {
            if !skip.contains(&name.as_str()) && !name.ends_with(".egg-info") {
                walk(root, &child, skip, out)?;
            }
        } else if path.is_file() && !name.ends_with(".pyc") {
            out.push(child.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &Path, files: &[(&str, &str)]) {
        for (rel, text) in files {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
    }

    #[test]
    fn package_digest_follows_contents_and_names_not_bytecode() {
        let a = tempfile::tempdir().expect("tempdir");
        tree(
            a.path(),
            &[("__init__.py", "x = 1\n"), ("sub/core.py", "y = 2\n")],
        );
        let first = package_digest(a.path()).expect("digest");
        tree(
            a.path(),
            &[
                ("__pycache__/core.cpython-311.pyc", "bytes"),
                ("sub/x.pyc", "b"),
            ],
        );
        assert_eq!(package_digest(a.path()).expect("digest"), first);
        tree(a.path(), &[("sub/core.py", "y = 3\n")]);
        assert_ne!(package_digest(a.path()).expect("digest"), first);
    }

    /// The digest is defined independently of the walk: this is its value
    /// for one known file, as the import hook computes it.
    #[test]
    fn package_digest_has_a_fixed_definition() {
        let a = tempfile::tempdir().expect("tempdir");
        tree(a.path(), &[("__init__.py", "")]);
        let empty = hex::encode(Sha256::digest(b""));
        let expected = hex::encode(Sha256::digest(format!("__init__.py\0{empty}\n").as_bytes()));
        assert_eq!(package_digest(a.path()).expect("digest"), expected);
    }

    #[test]
    fn a_source_tree_leaves_out_build_outputs() {
        let a = tempfile::tempdir().expect("tempdir");
        tree(
            a.path(),
            &[
                ("pyproject.toml", "[project]\n"),
                ("src/kvcr/__init__.py", ""),
            ],
        );
        let first = source_digest(a.path()).expect("digest");
        tree(
            a.path(),
            &[
                ("build/lib/kvcr/__init__.py", ""),
                ("src/kvcr.egg-info/PKG-INFO", ""),
                ("dist/kvcr.whl", ""),
            ],
        );
        assert_eq!(source_digest(a.path()).expect("digest"), first);
        assert_eq!(git_state(a.path()), None);
    }

    #[test]
    fn a_git_checkout_has_a_commit_and_a_dirty_flag() {
        let a = tempfile::tempdir().expect("tempdir");
        tree(
            a.path(),
            &[
                ("pyproject.toml", "[project]\n"),
                (".gitignore", "ignored/\n"),
            ],
        );
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(a.path())
                .args(args)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .output()
                .expect("git runs")
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        run(&["init", "-q"]);
        run(&["add", "."]);
        run(&["commit", "-q", "-m", "init"]);
        let clean = git_state(a.path()).expect("a checkout");
        assert!(!clean.dirty);
        assert_eq!(clean.commit.len(), 40);
        let digest = source_digest(a.path()).expect("digest");
        tree(a.path(), &[("ignored/big.bin", "x")]);
        assert_eq!(
            source_digest(a.path()).expect("digest"),
            digest,
            "ignored files are not sources"
        );
        assert!(!git_state(a.path()).expect("checkout").dirty);
        tree(a.path(), &[("new.py", "x")]);
        assert!(git_state(a.path()).expect("checkout").dirty);
        assert_ne!(source_digest(a.path()).expect("digest"), digest);
    }
}
