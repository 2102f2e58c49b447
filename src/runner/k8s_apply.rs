//! `kvcr-e2e runner k8s --apply`: applies the generated objects with
//! `kubectl apply`, after a preflight that names what is missing. Where no
//! cluster can run (no apiserver, no kubelet: the CI machine kind), the
//! preflight fails before anything is applied; the objects are validated
//! offline instead (`tests/runner_k8s_validate.rs`).

use std::path::PathBuf;
use std::process::Command;

/// Something `kubectl apply` needs that is not there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    #[error("no `kubectl` on PATH (install kubectl {0} or newer)")]
    Kubectl(&'static str),
    #[error("no cluster configured: `kubectl config current-context` says {0:?} (set KUBECONFIG or create ~/.kube/config for a cluster)")]
    Context(String),
    #[error("no apiserver answers for context {context}: `kubectl version` says {detail:?}")]
    Apiserver { context: String, detail: String },
}

/// The Kubernetes release the objects are written and validated for.
pub const KUBERNETES: &str = super::validate::KUBERNETES_VERSION;

/// Checks, in order, that `kubectl` exists, a context is configured and its
/// apiserver answers; the first missing thing is the error.
pub fn preflight() -> Result<String, Missing> {
    let kubectl = |args: &[&str]| {
        Command::new("kubectl").args(args).output().map(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            (o.status.success(), text.trim().to_string())
        })
    };
    let Ok((true, _)) = kubectl(&["version", "--client"]) else {
        return Err(Missing::Kubectl(KUBERNETES));
    };
    let context = match kubectl(&["config", "current-context"]) {
        Ok((true, context)) if !context.is_empty() => context,
        Ok((_, detail)) => return Err(Missing::Context(detail)),
        Err(e) => return Err(Missing::Context(e.to_string())),
    };
    match kubectl(&["version", "--request-timeout=10s"]) {
        Ok((true, _)) => Ok(context),
        Ok((false, detail)) => Err(Missing::Apiserver { context, detail }),
        Err(e) => Err(Missing::Apiserver {
            context,
            detail: e.to_string(),
        }),
    }
}

/// `kubectl apply -f` for each of `files`, after [`preflight`].
pub fn apply(files: &[PathBuf]) -> Result<(), String> {
    let context =
        preflight().map_err(|m| format!("cannot `kubectl apply` the Kubernetes objects: {m}"))?;
    for file in files {
        let status = Command::new("kubectl")
            .args(["--context", &context, "apply", "-f"])
            .arg(file)
            .status()
            .map_err(|e| format!("cannot start kubectl: {e}"))?;
        if !status.success() {
            return Err(format!(
                "`kubectl apply -f {}` exited with {status}",
                file.display()
            ));
        }
    }
    Ok(())
}

/// The objects among `written` that `kubectl apply` takes (every JSON file).
pub fn applicable(written: &[PathBuf]) -> Vec<PathBuf> {
    written
        .iter()
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .cloned()
        .collect()
}
