//! What a Python env really holds, as one digest: the reference cache's key
//! for the packages a reference run imports.
//!
//! The lock says what should be installed; this reads what is: every
//! distribution the interpreter sees (`name==version`, sorted), and the
//! digest of the reviewed patches the harness applied to the venv (its
//! marker file), so a user's own interpreter, a rebuilt env or a changed
//! patch each give another key. Read once per interpreter and run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use once_cell::sync::Lazy;
use sha2::{Digest, Sha256};

/// Prints the interpreter's distributions, one `name==version` a line.
const LIST_DISTRIBUTIONS: &str = "import importlib.metadata as m\n\
names = sorted({f\"{(d.metadata['Name'] or '?').lower()}=={d.version}\" for d in m.distributions()})\n\
print('\\n'.join(names))";

static SEEN: Lazy<Mutex<HashMap<PathBuf, String>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// `packages=<sha256 of the distribution list> patches=<the venv's patch
/// digest, or none>` for `python`. An interpreter that cannot list its
/// packages is an error: a key that silently ignored them would reuse
/// references computed with other packages.
pub fn env_identity(python: &Path) -> Result<String, String> {
    if let Some(known) = SEEN.lock().ok().and_then(|s| s.get(python).cloned()) {
        return Ok(known);
    }
    let out = Command::new(python)
        .args(["-I", "-c", LIST_DISTRIBUTIONS])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} could not list its packages ({}): {}",
            python.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let identity = identity_of(&out.stdout, patch_marker(python).as_deref());
    if let Ok(mut seen) = SEEN.lock() {
        seen.insert(python.to_path_buf(), identity.clone());
    }
    Ok(identity)
}

fn identity_of(distributions: &[u8], patches: Option<&str>) -> String {
    format!(
        "packages={} patches={}",
        hex::encode(Sha256::digest(distributions)),
        patches.unwrap_or("none")
    )
}

/// The venv's record of the lock and patches it was built from, when the
/// harness built it (`<venv>/bin/python` → `<venv>/kvcr-e2e-lock.sha256`).
fn patch_marker(python: &Path) -> Option<String> {
    let venv = python.parent()?.parent()?;
    let text = std::fs::read_to_string(venv.join(super::MARKER)).ok()?;
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_package_version_or_patch_is_another_identity() {
        let base = identity_of(b"torch==2.5.0\nvllm==0.32.0", Some("abc"));
        assert_ne!(
            base,
            identity_of(b"torch==2.5.0\nvllm==0.32.1", Some("abc"))
        );
        assert_ne!(
            base,
            identity_of(b"torch==2.5.0\nvllm==0.32.0", Some("abd"))
        );
        assert_ne!(base, identity_of(b"torch==2.5.0\nvllm==0.32.0", None));
        assert_eq!(
            base,
            identity_of(b"torch==2.5.0\nvllm==0.32.0", Some("abc"))
        );
    }

    #[test]
    fn an_interpreter_that_cannot_list_its_packages_is_an_error() {
        let err = env_identity(Path::new("/nonexistent/bin/python")).unwrap_err();
        assert!(err.contains("cannot run /nonexistent/bin/python"), "{err}");
    }
}
