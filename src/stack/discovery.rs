//! Dynamo's file discovery, read from the outside: which instances are
//! registered, and which of them a given process serves.
//!
//! Each registered endpoint is a JSON file under
//! `<DYN_FILE_KV>/v1/instances/`, e.g.
//! `{"endpoint":"generate","instance_id":16279204466267929842,
//!   "transport":{"tcp":"127.0.0.1:42199/e1eb5a360dda3cf2/dynamo/backend/generate"}, ...}`.
//! The TCP address is the worker's request-plane listener, so the instance of
//! a process is the one whose port the process listens on. This works for
//! every engine (and inside a network namespace, whose table
//! `/proc/<pid>/net/tcp` shows), without any file the engine writes for us.

use std::path::Path;

use serde::Deserialize;

/// The endpoint a serving worker registers.
const SERVING_ENDPOINT: &str = "generate";

/// One registered endpoint instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub instance_id: u64,
    pub component: String,
    /// Host and port of its request-plane listener.
    pub host: String,
    pub port: u16,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    component: String,
    endpoint: String,
    instance_id: u64,
    #[serde(default)]
    transport: Transport,
}

#[derive(Deserialize, Default)]
struct Transport {
    tcp: Option<String>,
}

/// Every `generate` instance registered under `root` (the `DYN_FILE_KV`
/// directory). Files that are not instance records are skipped: Dynamo may
/// be writing one right now.
pub fn serving_instances(root: &Path) -> Result<Vec<Instance>, String> {
    let dir = root.join("v1/instances");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    Ok(entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|text| parse_instance(&text))
        .collect())
}

/// A `generate` instance record, or `None` for anything else.
fn parse_instance(text: &str) -> Option<Instance> {
    let entry: Entry = serde_json::from_str(text).ok()?;
    if entry.endpoint != SERVING_ENDPOINT {
        return None;
    }
    let address = entry.transport.tcp?;
    let host_port = address.split('/').next()?;
    let (host, port) = host_port.rsplit_once(':')?;
    Some(Instance {
        instance_id: entry.instance_id,
        component: entry.component,
        host: host.trim_matches(['[', ']']).to_string(),
        port: port.parse().ok()?,
    })
}

/// The instance whose request-plane port one of `listening` is.
pub fn instance_listening_on(instances: &[Instance], listening: &[u16]) -> Option<Instance> {
    instances
        .iter()
        .find(|i| listening.contains(&i.port))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GENERATE: &str = r#"{"type":"Endpoint","component":"backend","endpoint":"generate","namespace":"dynamo","instance_id":16279204466267929842,"transport":{"tcp":"127.0.0.1:42199/e1eb5a360dda3cf2/dynamo/backend/generate"},"device_type":"cuda","request_plane_codec":"msgpack"}"#;

    #[test]
    fn a_generate_record_gives_its_instance_and_listener() {
        let i = parse_instance(GENERATE).expect("a generate instance");
        assert_eq!(i.instance_id, 16279204466267929842);
        assert_eq!((i.host.as_str(), i.port), ("127.0.0.1", 42199));
        assert_eq!(i.component, "backend");
    }

    #[test]
    fn other_endpoints_and_junk_are_skipped() {
        let other = GENERATE.replace("\"generate\"", "\"clear_kv_blocks\"");
        assert_eq!(parse_instance(&other), None);
        assert_eq!(parse_instance("{\"half\": "), None);
        let no_tcp = GENERATE.replace("\"tcp\"", "\"nats\"");
        assert_eq!(parse_instance(&no_tcp), None);
    }

    #[test]
    fn the_instance_of_a_process_is_the_one_on_its_port() {
        let a = parse_instance(GENERATE).unwrap();
        let b = Instance {
            instance_id: 7,
            port: 5000,
            ..a.clone()
        };
        let all = [a.clone(), b.clone()];
        assert_eq!(instance_listening_on(&all, &[9, 5000]), Some(b));
        assert_eq!(instance_listening_on(&all, &[9]), None);
    }

    #[test]
    fn a_missing_directory_means_nothing_registered_yet() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(serving_instances(dir.path()), Ok(Vec::new()));
        let inst = dir.path().join("v1/instances");
        std::fs::create_dir_all(&inst).unwrap();
        std::fs::write(inst.join("x"), GENERATE).unwrap();
        std::fs::write(inst.join("y"), "not json").unwrap();
        assert_eq!(serving_instances(dir.path()).map(|v| v.len()), Ok(1));
    }
}
