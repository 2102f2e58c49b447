//! The ready file a worker writes once it is registered and serving
//! (docs/cpu-engine.md).

use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadyFile {
    pub name: String,
    pub pid: u32,
    pub instance_id: u64,
    pub model: String,
    pub control_endpoint: Option<String>,
    pub metrics_url: String,
    pub guard_index: Option<u32>,
    pub kvcr: bool,
    #[serde(default)]
    pub geometry: serde_json::Value,
    /// Aggregated, prefill or decode (older ready files: aggregated).
    #[serde(default)]
    pub role: crate::engine::topology::WorkerRole,
}

impl ReadyFile {
    /// `Ok(None)` while the file does not exist yet; an error if it exists
    /// but is not a ready file.
    pub fn read(path: &Path) -> Result<Option<Self>, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("{} is not a valid ready file ({e}): {text}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }
}
