//! The stack as data: its description (`stack.json`, kept up to date
//! while it runs, with the deployer's hooks), its components, and where
//! its logs are read.

use std::path::{Path, PathBuf};

use crate::proc::{procfs, Supervised};

use super::hooks::{self, Hooks};
use super::{log_url, Stack};

impl Stack {
    /// Serves the stack's logs over HTTP on its host (for runs attached
    /// through URLs) and names the URL in the stack description.
    pub fn serve_logs(&self) -> std::io::Result<String> {
        let url = log_url::serve(self.plan.ctx.logs_dir.clone(), &self.plan.ctx.host)?;
        if let Ok(mut logs_url) = self.logs_url.lock() {
            *logs_url = Some(url.clone());
        }
        self.try_write_manifest()?;
        Ok(url)
    }

    /// Where this run reads the log named `file` of the stack: the
    /// owner's file, or, attached through URLs, a local mirror of it kept
    /// up to date from the owner's log URL.
    pub(super) fn log_of(&self, file: &str) -> PathBuf {
        let url = self.logs_url.lock().ok().and_then(|u| u.clone());
        match (url, self.control.mirror_dir()) {
            (Some(url), Some(dir)) => {
                let local = dir.join(file);
                if let Err(e) = log_url::mirror(&url, file, &local) {
                    tracing::warn!("cannot mirror {url}/{file}: {e}");
                }
                local
            }
            _ => self.plan.ctx.logs_dir.join(file),
        }
    }

    /// Keeps `path` (a `stack.json`) up to date with the running processes.
    pub fn set_manifest(&self, path: &Path) -> std::io::Result<()> {
        if let Ok(mut manifest) = self.manifest.lock() {
            *manifest = Some(path.to_path_buf());
        }
        self.try_write_manifest()
    }

    pub(super) fn manifest_path(&self) -> Option<PathBuf> {
        self.manifest.lock().ok().and_then(|m| m.clone())
    }

    pub(super) fn try_write_manifest(&self) -> std::io::Result<()> {
        let Some(path) = self.manifest_path() else {
            return Ok(());
        };
        let mut description = self.describe();
        // Hooks are written by whoever deployed the stack; keep them.
        if let (Some(hooks), Some(object)) = (hooks::hooks(&path), description.as_object_mut()) {
            object.insert(
                "hooks".into(),
                serde_json::to_value(hooks).map_err(std::io::Error::other)?,
            );
        }
        let text = serde_json::to_string_pretty(&description).map_err(std::io::Error::other)?;
        // Write then rename: an attaching run never reads half a file.
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)
    }

    pub(super) fn write_manifest(&self) {
        if let Err(e) = self.try_write_manifest() {
            tracing::warn!("cannot update the stack description: {e}");
        }
    }

    /// The stack description's hooks, when attached to a stack that names any.
    pub(super) fn hooks(&self) -> Option<Hooks> {
        self.manifest_path().and_then(|path| hooks::hooks(&path))
    }

    /// Every running component by name and pid (for the GPU sampler).
    pub fn components(&self) -> Vec<(String, u32)> {
        let mut out = vec![{
            let f = self.frontend();
            (f.name().to_string(), f.pid())
        }];
        out.extend(self.guard.iter().map(|g| (g.name().to_string(), g.pid())));
        out.extend(
            self.workers()
                .iter()
                .map(|w| (w.process.name().to_string(), w.process.pid())),
        );
        if let Ok(refs) = self.references.lock() {
            out.extend(
                refs.iter()
                    .map(|(_, w)| (w.process.name().to_string(), w.process.pid())),
            );
        }
        out
    }

    /// The stack as data, for `stack.json`.
    pub fn describe(&self) -> serde_json::Value {
        let proc = |p: &Supervised| serde_json::json!({"name": p.name(), "pid": p.pid(), "log": p.log_path(), "rss_kib": procfs::rss_kib(p.pid()), "group_rss_kib": procfs::group_rss_kib(p.pid())});
        serde_json::json!({
            "owner_pid": self.plan.owner_pid,
            "pid_namespace": procfs::pid_namespace(),
            "logs_url": self.logs_url.lock().ok().and_then(|u| u.clone()),
            "layout": self.plan.layout,
            "options": self.plan.options,
            "engine": self.plan.engine.name(),
            "model": self.plan.engine.model(),
            "geometry": self.plan.engine.geometry(),
            "frontend": {"url": self.frontend_url(), "process": proc(&self.frontend())},
            "guard": self.guard.as_ref().map(|g| serde_json::json!({
                "process": proc(g), "socket": self.plan.ctx.guard_socket, "pool_dir": self.plan.ctx.pool_dir,
                "compatibility_digest": self.plan.ctx.compatibility_digest})),
            "guards": self.guards.iter().map(|g| proc(g)).collect::<Vec<_>>(),
            "workers": self.workers().iter().map(|w| w.describe()).collect::<Vec<_>>(),
            "context": self.plan.ctx,
            "startup": self.timings(),
        })
    }
}
