//! `kvcr-e2e replay CASE_DIR REQUEST_ID [--stack PATH | --frontend URL]`:
//! one request a case recorded (`cases/<case>/requests.json`) sent again to
//! a running stack, its tokens compared with the reference.
//!
//! The recorded body and headers are sent as they are, with two changes: a
//! fresh `x-request-id` (so the replay's log lines are its own), and the
//! worker pin. Instance ids differ from stack to stack, so a request pinned
//! to slot A is pinned to that stack's worker A (read from its
//! `stack.json`) the way the suite pins it: the instance header for an
//! aggregated worker, `nvext.prefill_worker_id` / `nvext.decode_worker_id`
//! in a disaggregated stack. The recorded pin and the new one are printed.
//!
//! The reference tokens come from the entry itself (`reference_tokens`),
//! else from the reference cache entry the run used (its `reference.json`
//! digest, its `config.json` cache directory).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use crate::client::{Client, WireRequest, HEADER_REQUEST_ID};
use crate::telemetry::names::dynamo;

use super::requests::SentRequest;

const USAGE: &str =
    "usage: kvcr-e2e replay CASE_DIR REQUEST_ID [--stack PATH | --frontend URL] [--request-timeout-s N]";

/// The request timeout of the default profile and the environment.
fn default_request_timeout() -> Result<Duration, String> {
    let env = crate::config::Env::from_process().map_err(|e| e.to_string())?;
    crate::config::resolve(&crate::config::HarnessArgs::default(), &env)
        .map(|r| r.settings.request_timeout)
        .map_err(|e| e.to_string())
}

/// `kvcr-e2e replay …`; `args` follow `replay`. Exit 0: the same tokens as
/// the reference; 1: different tokens, or the request failed; 2: usage.
pub fn replay(repo_root: &Path, args: &[String]) -> ExitCode {
    let mut positional = Vec::new();
    let (mut stack, mut frontend, mut timeout) = (None, None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let value = |it: &mut std::slice::Iter<String>| it.next().cloned();
        match arg.as_str() {
            "--stack" => match value(&mut it) {
                Some(v) => stack = Some(PathBuf::from(v)),
                None => return usage("--stack needs a path"),
            },
            "--frontend" => match value(&mut it) {
                Some(v) => frontend = Some(v),
                None => return usage("--frontend needs a URL"),
            },
            "--request-timeout-s" => match value(&mut it).and_then(|v| v.parse().ok()) {
                Some(s) => timeout = Some(Duration::from_secs(s)),
                None => return usage("--request-timeout-s needs a number of seconds"),
            },
            flag if flag.starts_with("--") => return usage(&format!("unknown flag {flag}")),
            _ => positional.push(arg.clone()),
        }
    }
    let [case_dir, request_id] = positional.as_slice() else {
        return usage("expected a case directory and a request id");
    };
    if stack.is_some() && frontend.is_some() {
        return usage("--stack and --frontend exclude each other");
    }
    // The run's own budget by default: the profile's and PHASE1_*'s.
    let timeout = match timeout.map_or_else(default_request_timeout, Ok) {
        Ok(timeout) => timeout,
        Err(e) => {
            eprintln!("error: the settings: {e}");
            return ExitCode::from(2);
        }
    };
    match run(
        repo_root,
        Path::new(case_dir),
        request_id,
        stack,
        frontend,
        timeout,
    ) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("error: {message}\n\n{USAGE}");
    ExitCode::from(2)
}

/// Sends the request again and compares; `Ok(true)` when the tokens are the reference's.
fn run(
    repo_root: &Path,
    case_dir: &Path,
    request_id: &str,
    stack: Option<PathBuf>,
    frontend: Option<String>,
    timeout: Duration,
) -> Result<bool, String> {
    let entry = find_request(case_dir, request_id)?;
    let Some(recorded) = entry.sent.clone() else {
        return Err(format!(
            "request {} ({}) was recorded without its body: it was never sent, or the run predates recorded bodies",
            entry.request_id, entry.prompt
        ));
    };
    println!(
        "request {} ({}, {}) from {}",
        entry.request_id,
        entry.prompt,
        if recorded.streams() {
            "streamed"
        } else {
            "not streamed"
        },
        case_dir.display()
    );
    let mut wire = recorded.clone();
    let base = match frontend {
        Some(url) => {
            if let Some(slot) = &entry.pinned_to {
                println!(
                    "pin: worker {slot}: recorded {} kept (--frontend cannot re-pin by slot; pass --stack)",
                    pin_words(recorded_pin(&recorded))
                );
            }
            url
        }
        None => {
            let manifest = stack.unwrap_or_else(|| super::commands::default_manifest(repo_root));
            let target = StackTarget::read(&manifest)?;
            println!(
                "frontend: {} (stack {})",
                target.frontend,
                manifest.display()
            );
            match &entry.pinned_to {
                Some(slot) => {
                    let worker = target.worker(slot).ok_or_else(|| {
                        format!(
                            "the stack in {} has no worker {slot} (it has {})",
                            manifest.display(),
                            target.names()
                        )
                    })?;
                    let was = repin(&mut wire, worker);
                    println!(
                        "pin: worker {slot}: recorded {}, now {}",
                        pin_words(was),
                        pin_words(recorded_pin(&wire))
                    );
                }
                None if recorded_pin(&recorded).is_some() => println!(
                    "pin: recorded {} kept (the case pinned it by id, not by slot)",
                    pin_words(recorded_pin(&recorded))
                ),
                None => println!("pin: none (the router picks, as it did)"),
            }
            target.frontend
        }
    };
    let fresh = crate::client::new_request_id();
    wire.set_header(HEADER_REQUEST_ID, fresh.clone());
    println!(
        "x-request-id of the replay: {fresh} (recorded: {})",
        entry.request_id
    );
    let (reference, source) = reference_tokens(&entry, case_dir, repo_root)?;
    let client = Client::new(base.clone(), timeout).map_err(|e| e.to_string())?;
    let (tokens, worker) = crate::rt::block_on(client.send_recorded(&wire))
        .map_err(|e| format!("the replay failed: {e}"))?;
    let Some(tokens) = tokens else {
        return Err("the response carried no token ids".into());
    };
    println!(
        "reference: {} tokens ({source}); replay: {} tokens from worker {}",
        reference.len(),
        tokens.len(),
        worker.map_or("unknown".to_string(), |w| w.to_string())
    );
    let comparison = compare(&reference, &tokens);
    println!("{comparison}");
    Ok(comparison == Comparison::Same(reference.len()))
}

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

    fn worker(&self, name: &str) -> Option<&SlotWorker> {
        self.workers.iter().find(|w| w.name == name)
    }

    fn names(&self) -> String {
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

fn pin_words(pin: Option<(PinPlace, u64)>) -> String {
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
