//! The model's files as part of an engine's identity (the reference cache
//! key): a local model directory is hashed file by file, so rebuilt or
//! edited weights are another model; a hub id stands for itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use once_cell::sync::Lazy;
use sha2::{Digest, Sha256};

/// Read once per model and process: a GPU model directory can be gigabytes.
static SEEN: Lazy<Mutex<HashMap<String, String>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// `files=<sha256>` over every file under `model` (names and contents, in
/// path order) when it is a local directory, `hub=<model>` otherwise.
pub fn digest(model: &str) -> String {
    if let Some(known) = SEEN.lock().ok().and_then(|s| s.get(model).cloned()) {
        return known;
    }
    let digest = digest_now(model);
    if let Ok(mut seen) = SEEN.lock() {
        seen.insert(model.to_string(), digest.clone());
    }
    digest
}

fn digest_now(model: &str) -> String {
    let dir = Path::new(model);
    if !dir.is_dir() {
        return format!("hub={model}");
    }
    let mut files = Vec::new();
    collect(dir, &mut files);
    files.sort();
    let mut h = Sha256::new();
    for file in &files {
        h.update(
            file.strip_prefix(dir)
                .unwrap_or(file)
                .as_os_str()
                .as_encoded_bytes(),
        );
        h.update([0]);
        match std::fs::read(file) {
            Ok(bytes) => h.update(bytes),
            Err(e) => h.update(format!("unreadable: {e}")),
        }
    }
    format!("files={}", hex::encode(h.finalize()))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.is_dir() {
            collect(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_weight_file_is_another_model_and_a_hub_id_stands_for_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("config.json"), "{}").expect("write");
        std::fs::write(dir.path().join("sub/model.safetensors"), "w1").expect("write");
        let model = dir.path().display().to_string();
        let first = digest_now(&model);
        assert!(first.starts_with("files="), "{first}");
        assert_eq!(first, digest(&model));
        std::fs::write(dir.path().join("sub/model.safetensors"), "w2").expect("write");
        assert_ne!(first, digest_now(&model));
        assert_eq!(digest("Qwen/Qwen3-0.6B"), "hub=Qwen/Qwen3-0.6B");
    }
}
