//! What `kvcr-e2e replay` stands on: a recorded request found in its case
//! directory, the stack it goes to (its workers read from `stack.json`), its
//! worker pin moved to that stack's worker, the reference tokens, and the
//! comparison of the replay's tokens with them.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::client::WireRequest;
use crate::telemetry::names::dynamo;

use super::requests::SentRequest;

/// The entry of `requests.json` in `case_dir` whose id is `id`, or starts
/// with it (unique prefix).
pub fn find_request(case_dir: &Path, id: &str) -> Result<SentRequest, String> {
    let path = case_dir.join("requests.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let entries: Vec<SentRequest> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(exact) = entries.iter().find(|e| e.request_id == id) {
        return Ok(exact.clone());
    }
    let matching: Vec<&SentRequest> = entries
        .iter()
        .filter(|e| e.request_id.starts_with(id))
        .collect();
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "{} has no request {id} (it has {})",
            path.display(),
            entries
                .iter()
                .map(|e| format!("{} {}", e.request_id, e.prompt))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        many => Err(format!(
            "{id} names {} requests of {}; give more of the id",
            many.len(),
            path.display()
        )),
    }
}

/// A worker of a stack description, as a pin needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotWorker {
    pub name: String,
    pub instance_id: u64,
    /// `aggregated`, `prefill` or `decode`.
    pub role: String,
}

/// The frontend and workers a `stack.json` describes.
#[derive(Debug, Clone, PartialEq)]
pub struct StackTarget {
    pub frontend: String,
    pub workers: Vec<SlotWorker>,
}

impl StackTarget {
    /// Reads `stack.json` at `path`.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read the stack description {}: {e} (start one with `kvcr-e2e stack up`, or pass --frontend URL)",
                path.display()
            )
        })?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_description(&v).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn from_description(v: &Value) -> Result<Self, String> {
        let frontend = v["frontend"]["url"]
            .as_str()
            .ok_or("no frontend.url")?
            .to_string();
        let workers = v["workers"]
            .as_array()
            .ok_or("no workers")?
            .iter()
            .filter_map(|w| {
                let ready = &w["ready"];
                Some(SlotWorker {
                    name: ready["name"].as_str()?.to_string(),
                    instance_id: crate::client::response::as_u64(&ready["instance_id"])?,
                    role: ready["role"].as_str().unwrap_or("aggregated").to_string(),
                })
            })
            .collect();
        Ok(StackTarget { frontend, workers })
    }

    pub fn worker(&self, name: &str) -> Option<&SlotWorker> {
        self.workers.iter().find(|w| w.name == name)
    }

    pub fn names(&self) -> String {
        let names: Vec<&str> = self.workers.iter().map(|w| w.name.as_str()).collect();
        names.join(", ")
    }
}

/// Where a pin sits and the instance it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinPlace {
    /// `x-dynamo-worker-instance-id` (an aggregated worker).
    Header,
    /// `nvext.prefill_worker_id`.
    Prefill,
    /// `nvext.decode_worker_id`.
    Decode,
}

const PREFILL_FIELD: &str = "prefill_worker_id";
const DECODE_FIELD: &str = "decode_worker_id";

/// The pin `wire` carries, if any.
pub fn recorded_pin(wire: &WireRequest) -> Option<(PinPlace, u64)> {
    if let Some(id) = wire
        .header(dynamo::HEADER_WORKER_INSTANCE_ID)
        .and_then(|v| v.trim().parse().ok())
    {
        return Some((PinPlace::Header, id));
    }
    let nvext = &wire.body["nvext"];
    let field = |name| crate::client::response::as_u64(&nvext[name]);
    field(PREFILL_FIELD)
        .map(|id| (PinPlace::Prefill, id))
        .or_else(|| field(DECODE_FIELD).map(|id| (PinPlace::Decode, id)))
}

/// Pins `wire` to `worker` as the suite pins a worker of its role,
/// removing any earlier pin; returns the earlier one.
pub fn repin(wire: &mut WireRequest, worker: &SlotWorker) -> Option<(PinPlace, u64)> {
    let was = recorded_pin(wire);
    wire.remove_header(dynamo::HEADER_WORKER_INSTANCE_ID);
    if let Some(nvext) = wire.body.get_mut("nvext").and_then(Value::as_object_mut) {
        nvext.remove(PREFILL_FIELD);
        nvext.remove(DECODE_FIELD);
    }
    let field = match worker.role.as_str() {
        "prefill" => Some(PREFILL_FIELD),
        "decode" => Some(DECODE_FIELD),
        _ => None,
    };
    match field {
        None => wire.set_header(
            dynamo::HEADER_WORKER_INSTANCE_ID,
            worker.instance_id.to_string(),
        ),
        Some(field) => {
            if let Some(body) = wire.body.as_object_mut() {
                let nvext = body
                    .entry("nvext")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(nvext) = nvext.as_object_mut() {
                    nvext.insert(field.into(), Value::from(worker.instance_id));
                }
            }
        }
    }
    was
}

pub fn pin_words(pin: Option<(PinPlace, u64)>) -> String {
    match pin {
        None => "no pin".into(),
        Some((PinPlace::Header, id)) => {
            format!("instance {id} ({})", dynamo::HEADER_WORKER_INSTANCE_ID)
        }
        Some((PinPlace::Prefill, id)) => format!("instance {id} (nvext.{PREFILL_FIELD})"),
        Some((PinPlace::Decode, id)) => format!("instance {id} (nvext.{DECODE_FIELD})"),
    }
}

/// The reference tokens of the entry's prompt, and where they came from.
pub fn reference_tokens(
    entry: &SentRequest,
    case_dir: &Path,
    repo_root: &Path,
) -> Result<(Vec<u32>, String), String> {
    if let Some(tokens) = &entry.reference_tokens {
        return Ok((tokens.clone(), "recorded in requests.json".into()));
    }
    // cases/<case>/ → the run directory.
    let run_dir = case_dir
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} is not inside a run directory", case_dir.display()))?;
    let read = |name: &str| -> Result<Value, String> {
        let path = run_dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "no reference tokens in requests.json, and {}: {e}",
                path.display()
            )
        })?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let digest = read("reference.json")?["digest"]
        .as_str()
        .map(str::to_string)
        .ok_or("reference.json names no digest")?;
    let cache = read("config.json")?["reference_cache"]
        .as_str()
        .map(PathBuf::from)
        .ok_or("config.json names no reference_cache")?;
    let path = repo_root.join(cache).join(format!("{digest}.json"));
    let entry_text = std::fs::read_to_string(&path)
        .map_err(|e| format!("the run's reference cache entry {}: {e}", path.display()))?;
    let refs: Value =
        serde_json::from_str(&entry_text).map_err(|e| format!("{}: {e}", path.display()))?;
    let tokens = refs["tokens"][&entry.prompt]
        .as_array()
        .ok_or_else(|| {
            format!(
                "{} has no tokens for prompt {}",
                path.display(),
                entry.prompt
            )
        })?
        .iter()
        .map(|t| t.as_u64().and_then(|t| u32::try_from(t).ok()))
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(|| {
            format!(
                "{}: tokens of {} are not token ids",
                path.display(),
                entry.prompt
            )
        })?;
    Ok((tokens, format!("reference cache {}", path.display())))
}

/// The replay's tokens against the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    /// Equal, this many tokens.
    Same(usize),
    /// The first position where they differ (`None`: one ended there).
    Differs {
        at: usize,
        reference: Option<u32>,
        replay: Option<u32>,
    },
}

/// Compares token by token.
pub fn compare(reference: &[u32], replay: &[u32]) -> Comparison {
    let at = reference
        .iter()
        .zip(replay)
        .position(|(a, b)| a != b)
        .unwrap_or(reference.len().min(replay.len()));
    if at == reference.len() && at == replay.len() {
        Comparison::Same(at)
    } else {
        Comparison::Differs {
            at,
            reference: reference.get(at).copied(),
            replay: replay.get(at).copied(),
        }
    }
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let token = |t: &Option<u32>| t.map_or("the end".to_string(), |t| format!("token {t}"));
        match self {
            Comparison::Same(n) => write!(f, "same as the reference ({n} tokens)"),
            Comparison::Differs {
                at,
                reference,
                replay,
            } => write!(
                f,
                "differs at position {at}: the reference has {}, the replay {}",
                token(reference),
                token(replay)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Completion;

    fn worker(name: &str, id: u64, role: &str) -> SlotWorker {
        SlotWorker {
            name: name.into(),
            instance_id: id,
            role: role.into(),
        }
    }

    #[test]
    fn a_pin_moves_to_the_same_slot_of_another_stack() {
        let mut wire = Completion::new("tiny", vec![1u32])
            .pin_worker(17114828166582755834)
            .wire(true);
        let was = repin(&mut wire, &worker("A", 42, "aggregated"));
        assert_eq!(was, Some((PinPlace::Header, 17114828166582755834)));
        assert_eq!(recorded_pin(&wire), Some((PinPlace::Header, 42)));
        assert_eq!(wire.header(dynamo::HEADER_WORKER_INSTANCE_ID), Some("42"));
        // A prefill pin of a disaggregated stack stays a prefill pin; the
        // rest of the body is untouched.
        let mut p = Completion::new("tiny", vec![1u32])
            .pin_prefill_worker(7)
            .wire(false);
        let before = p.body.clone();
        assert_eq!(
            repin(&mut p, &worker("A", 8, "prefill")),
            Some((PinPlace::Prefill, 7))
        );
        assert_eq!(p.body["nvext"][PREFILL_FIELD], 8);
        assert_eq!(p.header(dynamo::HEADER_WORKER_INSTANCE_ID), None);
        let mut unpinned = p.body.clone();
        unpinned["nvext"][PREFILL_FIELD] = before["nvext"][PREFILL_FIELD].clone();
        assert_eq!(unpinned, before);
        let mut d = Completion::new("tiny", vec![1u32])
            .pin_decode_worker(5)
            .wire(false);
        repin(&mut d, &worker("C", 6, "decode"));
        assert_eq!(recorded_pin(&d), Some((PinPlace::Decode, 6)));
        assert_eq!(d.body["nvext"].get(PREFILL_FIELD), None);
    }

    #[test]
    fn the_stack_description_names_each_slots_instance() {
        let v = serde_json::json!({
            "frontend": {"url": "http://127.0.0.1:23537"},
            "workers": [
                {"ready": {"name": "A", "instance_id": 17114828166582755834u64, "role": "aggregated"}},
                {"ready": {"name": "B", "instance_id": 11258544033347442035u64}},
            ]
        });
        let t = StackTarget::from_description(&v).unwrap();
        assert_eq!(t.frontend, "http://127.0.0.1:23537");
        assert_eq!(
            t.worker("A"),
            Some(&worker("A", 17114828166582755834, "aggregated"))
        );
        assert_eq!(t.worker("B").map(|w| w.role.as_str()), Some("aggregated"));
        assert!(StackTarget::from_description(&serde_json::json!({})).is_err());
    }

    #[test]
    fn tokens_compare_same_or_at_the_first_difference() {
        assert_eq!(compare(&[1, 2, 3], &[1, 2, 3]), Comparison::Same(3));
        let d = compare(&[1, 2, 3], &[1, 9, 3]);
        assert_eq!(
            d,
            Comparison::Differs {
                at: 1,
                reference: Some(2),
                replay: Some(9)
            }
        );
        assert_eq!(
            d.to_string(),
            "differs at position 1: the reference has token 2, the replay token 9"
        );
        assert_eq!(
            compare(&[1, 2], &[1, 2, 3]).to_string(),
            "differs at position 2: the reference has the end, the replay token 3"
        );
        assert_eq!(
            Comparison::Same(16).to_string(),
            "same as the reference (16 tokens)"
        );
    }

    #[test]
    fn a_request_is_found_by_id_or_prefix_and_its_reference_in_the_runs_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("runs/phase1/r1");
        let case = run.join("cases/TC-03-hinted_peer_transfer");
        std::fs::create_dir_all(&case).unwrap();
        let c = Completion::new("tiny", vec![1u32, 2]);
        let mut recorded =
            SentRequest::new("3a06d055-aaaa".into(), "f12v1".into(), Some("B".into()));
        recorded.sent = Some(c.wire(false));
        let other = SentRequest::new("3a07ffff-bbbb".into(), "f12v0".into(), Some("A".into()));
        std::fs::write(
            case.join("requests.json"),
            serde_json::to_string(&vec![recorded.clone(), other]).unwrap(),
        )
        .unwrap();
        assert_eq!(find_request(&case, "3a06d055-aaaa").unwrap(), recorded);
        assert_eq!(find_request(&case, "3a06").unwrap(), recorded);
        assert!(find_request(&case, "3a0")
            .unwrap_err()
            .contains("names 2 requests"));
        assert!(find_request(&case, "ffff")
            .unwrap_err()
            .contains("has no request ffff"));
        // No tokens in the entry: the run's cache entry.
        std::fs::write(run.join("reference.json"), r#"{"digest": "d1"}"#).unwrap();
        std::fs::write(run.join("config.json"), r#"{"reference_cache": "cache"}"#).unwrap();
        std::fs::create_dir_all(tmp.path().join("cache")).unwrap();
        std::fs::write(
            tmp.path().join("cache/d1.json"),
            r#"{"tokens": {"f12v1": [5, 6, 7]}}"#,
        )
        .unwrap();
        let (tokens, source) = reference_tokens(&recorded, &case, tmp.path()).unwrap();
        assert_eq!(tokens, vec![5, 6, 7]);
        assert!(source.starts_with("reference cache "), "{source}");
        recorded.reference_tokens = Some(vec![9]);
        assert_eq!(
            reference_tokens(&recorded, &case, tmp.path()).unwrap(),
            (vec![9], "recorded in requests.json".to_string())
        );
        let mut unknown = recorded.clone();
        unknown.reference_tokens = None;
        unknown.prompt = "f99v0".into();
        assert!(reference_tokens(&unknown, &case, tmp.path())
            .unwrap_err()
            .contains("no tokens for prompt f99v0"));
    }
}
