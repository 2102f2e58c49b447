//! Triage by request id: the requests a case sent (each with its own
//! `x-request-id`, its body and headers exactly as sent, and a `curl` line
//! that sends it again) and the component log lines that name them.
//!
//! Dynamo's frontend (1.6.1) keeps its own id for a request, the one the
//! workers see and log (Dynamo's request plane, and the CPU engine's prefill
//! line `request <id>: N full blocks: …`), and logs the client's
//! `x-request-id` beside it (`request_id=<dynamo id> … x_request_id="<ours>"`).
//! So the lines are found in two hops: the lines naming one of the case's
//! ids, then every line naming a Dynamo `request_id` found on those. After
//! every case they are copied into `cases/<case>/log-lines.txt`, prefixed
//! with their file and line number, so a failure can be followed from JUnit
//! to the exact worker log line.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::client::WireRequest;
use crate::telemetry::strip_ansi;

/// What `requests.json` names a request by when it is not from the prompt
/// set (a case built it itself: an over-long prompt, an unknown model).
pub const NOT_A_PROMPT: &str = "(not from the prompt set)";

/// One request a case sent: `requests.json`, read back by `kvcr-e2e replay`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SentRequest {
    pub request_id: String,
    /// The prompt's key (`f12/v0`).
    pub prompt: String,
    /// The worker slot it was pinned to; `None` when the router picked.
    pub pinned_to: Option<String>,
    /// The frontend it was sent to (base URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<String>,
    /// Method, path, headers and body exactly as sent (`None`: built but
    /// never sent, e.g. cancelled by the case's timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<WireRequest>,
    /// A `curl` line that sends it again (`KVCR_FRONTEND=URL` for another
    /// frontend; the pin names an instance of this run's stack).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curl: Option<String>,
    /// The reference engine's tokens for its prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_tokens: Option<Vec<u32>>,
}

impl SentRequest {
    /// A request built for `prompt` (its key), pinned to slot `pinned_to`.
    pub fn new(request_id: String, prompt: String, pinned_to: Option<String>) -> Self {
        SentRequest {
            request_id,
            prompt,
            pinned_to,
            frontend: None,
            sent: None,
            curl: None,
            reference_tokens: None,
        }
    }
}

/// `built` with what went on the wire (`sent`, matched by `x-request-id`)
/// and the reference tokens of each prompt; requests sent that no entry
/// names come last, as [`NOT_A_PROMPT`].
pub fn with_wire(
    built: Vec<SentRequest>,
    sent: &[WireRequest],
    frontend: &str,
    reference: impl Fn(&str) -> Option<Vec<u32>>,
) -> Vec<SentRequest> {
    let id_of = |w: &WireRequest| {
        w.header(crate::client::HEADER_REQUEST_ID)
            .unwrap_or_default()
            .to_string()
    };
    let complete = |mut r: SentRequest, wire: Option<&WireRequest>| {
        if let Some(wire) = wire {
            r.frontend = Some(frontend.to_string());
            r.curl = Some(wire.curl(frontend));
            r.sent = Some(wire.clone());
        }
        r.reference_tokens = reference(&r.prompt);
        r
    };
    let mut out: Vec<SentRequest> = built
        .into_iter()
        .map(|r| {
            let wire = sent.iter().find(|w| id_of(w) == r.request_id);
            complete(r, wire)
        })
        .collect();
    for wire in sent {
        let id = id_of(wire);
        if !out.iter().any(|r| r.request_id == id) {
            out.push(complete(
                SentRequest::new(id, NOT_A_PROMPT.into(), None),
                Some(wire),
            ));
        }
    }
    out
}

/// Every line of the `*.log` files in `logs_dir` that names one of `ids`,
/// as `<file>:<line>: <text>` (terminal colours removed), file by file.
pub fn log_lines(logs_dir: &Path, ids: &[&str]) -> Vec<String> {
    if ids.is_empty() {
        return Vec::new();
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(logs_dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let logs: Vec<(String, String)> = files
        .iter()
        .filter_map(|file| {
            let bytes = std::fs::read(file).ok()?;
            let name = file.file_name()?.to_string_lossy().into_owned();
            Some((name, strip_ansi(&String::from_utf8_lossy(&bytes))))
        })
        .collect();
    // One automaton per hop: a scan is linear in the logs whatever the
    // number of ids (a case of a hundred requests, logs of thousands of
    // lines: testing each id on each line took tens of seconds).
    let Some(ours) = matcher(ids.iter().copied()) else {
        return Vec::new();
    };
    // Hop 1: the ids Dynamo gave the case's requests.
    let mut wanted: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    let mut seen: std::collections::HashSet<String> = wanted.iter().cloned().collect();
    for (_, text) in &logs {
        for line in text.lines().filter(|l| ours.is_match(l)) {
            for linked in dynamo_request_ids(line) {
                if seen.insert(linked.clone()) {
                    wanted.push(linked);
                }
            }
        }
    }
    // Hop 2: every line naming any of them.
    let Some(any) = matcher(wanted.iter().map(String::as_str)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (name, text) in &logs {
        for (n, line) in text.lines().enumerate() {
            if any.is_match(line) {
                found.push(format!("{name}:{}: {line}", n + 1));
            }
        }
    }
    found
}

/// A matcher of any of `ids` as a substring; `None` when it cannot be built
/// (no ids, or too many for the automaton).
fn matcher<'a>(ids: impl Iterator<Item = &'a str>) -> Option<aho_corasick::AhoCorasick> {
    let ids: Vec<&str> = ids.filter(|id| !id.is_empty()).collect();
    if ids.is_empty() {
        return None;
    }
    aho_corasick::AhoCorasick::new(ids).ok()
}

/// What Dynamo's frontend (1.6.1) logs, beside the request's
/// `x_request_id`, when a worker's stream ends before the generation did
/// (`migration retries exhausted … migration.from_worker_id=<instance>`).
pub const STREAM_CUT_ON_WORKER: &str = "migration.from_worker_id=";

/// For each of `ids` (`x-request-id`s) whose stream the frontend saw cut
/// by a worker's disconnect, that worker's instance id, from the `*.log`
/// files of `logs_dir`. A failed request's response names no worker; this
/// is how the router saw it.
pub fn streams_cut_on_worker(
    logs_dir: &Path,
    ids: &[&str],
) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for line in log_lines(logs_dir, ids) {
        let Some(at) = line.find(STREAM_CUT_ON_WORKER) else {
            continue;
        };
        let instance: String = line[at + STREAM_CUT_ON_WORKER.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let ours = ids
            .iter()
            .find(|id| line.contains(&format!("x_request_id=\"{id}\"")));
        if let (Ok(instance), Some(ours)) = (instance.parse::<u64>(), ours) {
            out.entry(ours.to_string()).or_insert(instance);
        }
    }
    out
}

/// The marker of the CPU engine's first-token stamp: `request <id>: first
/// token sent monotonic_ns=N realtime_ns=M`.
pub const FIRST_TOKEN_STAMP: &str = ": first token sent monotonic_ns=";

/// The engine's first-token stamps (CLOCK_MONOTONIC ns) of the requests
/// sent with `ids` (`x-request-id`s), found in the `*.log` files of
/// `logs_dir` in two hops as [`log_lines`]: the frontend's line naming our
/// id gives Dynamo's request id, which the worker's stamp line names.
/// Requests with no stamp are absent.
pub fn first_token_stamps(
    logs_dir: &Path,
    ids: &[&str],
) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    let lines = log_lines(logs_dir, ids);
    // Our id for each id a line names: ours, and Dynamo's beside it.
    let mut ours_of: Vec<(String, String)> = Vec::new();
    for line in &lines {
        for id in ids.iter().filter(|id| line.contains(**id)) {
            ours_of.push((id.to_string(), id.to_string()));
            for linked in dynamo_request_ids(line) {
                ours_of.push((linked, id.to_string()));
            }
        }
    }
    for line in &lines {
        let Some(at) = line.find(FIRST_TOKEN_STAMP) else {
            continue;
        };
        let Some(named) = line[..at].rsplit("request ").next() else {
            continue;
        };
        let ns: String = line[at + FIRST_TOKEN_STAMP.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let (Ok(ns), Some((_, ours))) = (
            ns.parse::<u64>(),
            ours_of.iter().find(|(id, _)| id == named.trim()),
        ) else {
            continue;
        };
        out.entry(ours.clone()).or_insert(ns);
    }
    out
}

/// The UUIDs after `request_id=` (quoted or not) on a log line; not those
/// after `x_request_id=`, which are the client's own.
fn dynamo_request_ids(line: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("request_id=") {
        let own = !rest[..at].ends_with("x_");
        let value = rest[at + "request_id=".len()..].trim_start_matches('"');
        let id: String = value
            .chars()
            .take_while(|c| c.is_ascii_hexdigit() || *c == '-')
            .collect();
        if own && id.len() == 36 && !ids.contains(&id) {
            ids.push(id);
        }
        rest = &rest[at + "request_id=".len()..];
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_cut_by_a_worker_is_attributed_from_the_frontends_log() {
        let dir = tempfile::tempdir().unwrap();
        let cut = "11111111-2222-3333-4444-555555555555";
        let served = "66666666-7777-8888-9999-000000000000";
        std::fs::write(
            dir.path().join("frontend.log"),
            format!(
                "request received request_id=aaaaaaaa-0000-0000-0000-000000000000 x_request_id=\"{served}\"\n\
                 \x1b[33m WARN\x1b[0m request_span: migration retries exhausted migration.reason=\"disconnected\" \
                 migration.from_worker_id=14248667766910942182 migration.tokens_completed=15 method=POST \
                 x_request_id=\"{cut}\" request_id=bbbbbbbb-0000-0000-0000-000000000000\n"
            ),
        )
        .unwrap();
        let found = streams_cut_on_worker(dir.path(), &[cut, served]);
        assert_eq!(found.get(cut), Some(&14248667766910942182));
        assert_eq!(found.get(served), None, "a request that was not cut");
    }

    #[test]
    fn each_request_is_recorded_as_sent_with_a_curl_line_and_its_reference() {
        use crate::client::Completion;
        let pinned = Completion::new("tiny", vec![3u32, 4, 5]).pin_worker(42);
        let never_sent = Completion::new("tiny", vec![6u32]);
        let direct = Completion::new("no-such-model", "hello");
        let built = vec![
            SentRequest::new(pinned.request_id.clone(), "f1v0".into(), Some("A".into())),
            SentRequest::new(never_sent.request_id.clone(), "f2v0".into(), None),
        ];
        let sent = [pinned.wire(true), direct.wire(false)];
        let reference = |p: &str| (p == "f1v0").then(|| vec![7, 8]);
        let out = with_wire(built, &sent, "http://127.0.0.1:9", reference);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].sent.as_ref(), Some(&sent[0]));
        assert_eq!(out[0].frontend.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(
            out[0].curl.as_deref(),
            Some(sent[0].curl("http://127.0.0.1:9").as_str())
        );
        assert_eq!(out[0].reference_tokens, Some(vec![7, 8]));
        assert_eq!(out[0].pinned_to.as_deref(), Some("A"));
        assert!(
            out[1].sent.is_none() && out[1].curl.is_none(),
            "built, never sent"
        );
        assert_eq!(out[2].prompt, NOT_A_PROMPT);
        assert_eq!(out[2].request_id, direct.request_id);
        assert_eq!(out[2].sent.as_ref(), Some(&sent[1]));
        // requests.json reads back as written (what `kvcr-e2e replay` does).
        let text = serde_json::to_string_pretty(&out).unwrap();
        let back: Vec<SentRequest> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, out);
        assert_eq!(
            back[0].sent.as_ref().unwrap().body_bytes(),
            sent[0].body_bytes()
        );
        // An older requests.json (ids only) still reads.
        let old: Vec<SentRequest> =
            serde_json::from_str(r#"[{"request_id": "x", "prompt": "f1v0", "pinned_to": null}]"#)
                .unwrap();
        assert!(old[0].sent.is_none());
    }

    #[test]
    fn the_lines_naming_a_case_request_are_found_in_every_log() {
        let dir = tempfile::tempdir().unwrap();
        let id = "5b0c9f6e-3c1d-4a7e-9f00-0000000000a1";
        std::fs::write(
            dir.path().join("worker-A.log"),
            format!(
                "startup\n\u{1b}[2m2026-11-30T06:44:32Z\u{1b}[0m request received \u{1b}[3mrequest_id\u{1b}[0m={id}\nrequest {id}: 4 full blocks: device=0 host=0 kvcr=4 computed=0\nrequest other: 1 full blocks\n"
            ),
        )
        .unwrap();
        let dynamo = "df0c38a5-9ff8-4c71-b9ea-a3aecd9f8d29";
        std::fs::write(
            dir.path().join("frontend.log"),
            format!("nothing here\nrequest received request_id={dynamo} model=tiny x_request_id=\"{id}\"\n"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("worker-B.log"),
            format!("request {dynamo}: 4 full blocks: device=0 host=0 kvcr=4 computed=0\n"),
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), format!("{id}\n")).unwrap();
        let lines = log_lines(dir.path(), &[id]);
        assert_eq!(
            lines,
            vec![
                format!("frontend.log:2: request received request_id={dynamo} model=tiny x_request_id=\"{id}\""),
                format!("worker-A.log:2: 2026-11-30T06:44:32Z request received request_id={id}"),
                format!("worker-A.log:3: request {id}: 4 full blocks: device=0 host=0 kvcr=4 computed=0"),
                format!("worker-B.log:1: request {dynamo}: 4 full blocks: device=0 host=0 kvcr=4 computed=0"),
            ]
        );
        assert!(log_lines(dir.path(), &[]).is_empty());
        let mut b = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("worker-B.log"))
            .unwrap();
        use std::io::Write;
        writeln!(
            b,
            "2026-11-30 08:26:01,824 B cpu_engine INFO request {dynamo}: first token sent monotonic_ns=1234567 realtime_ns=99"
        )
        .unwrap();
        drop(b);
        let stamps = first_token_stamps(dir.path(), &[id, "no-such-request"]);
        assert_eq!(stamps.get(id), Some(&1_234_567));
        assert_eq!(stamps.len(), 1);
    }
}
