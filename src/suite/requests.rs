//! Triage by request id: the requests a case sent (each with its own
//! `x-request-id`) and the component log lines that name them.
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

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::client::Completion;
use crate::prompts::Prompt;
use crate::stack::Worker;

use super::case_evidence::CaseEvidence;

/// One request a case sent.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SentRequest {
    pub request_id: String,
    /// The prompt's key (`f12/v0`).
    pub prompt: String,
    /// The worker slot it was pinned to; `None` when the router picked.
    pub pinned_to: Option<String>,
}

/// The requests of one case: it builds each one, so none is sent unrecorded.
pub struct RequestLog {
    model: String,
    max_tokens: u32,
    sent: RefCell<Vec<SentRequest>>,
}

impl RequestLog {
    pub fn new(model: String, max_tokens: u32) -> Self {
        Self {
            model,
            max_tokens,
            sent: RefCell::new(Vec::new()),
        }
    }

    /// The request for `prompt`, pinned to `worker` when given (a prefill
    /// worker through its prefill pin, any other through the instance header).
    pub fn request(&self, prompt: &Prompt, pin: Option<&Worker>) -> Completion {
        let request = crate::reference::request(&self.model, prompt, self.max_tokens);
        self.sent.borrow_mut().push(SentRequest {
            request_id: request.request_id.clone(),
            prompt: prompt.key(),
            pinned_to: pin.map(|w| w.name().to_string()),
        });
        match pin {
            Some(worker) => worker.pin(request),
            None => request,
        }
    }

    /// The id of the last request sent for `prompt` (its key, `f12/v0`).
    pub fn id_of(&self, prompt: &str) -> Option<String> {
        self.sent
            .borrow()
            .iter()
            .rev()
            .find(|r| r.prompt == prompt)
            .map(|r| r.request_id.clone())
    }

    /// `requests.json` (every request and its id) and `log-lines.txt` (the
    /// component log lines naming them); a failure names both and the id
    /// of the case's last request.
    pub fn attach_logs(
        &self,
        evidence: &CaseEvidence,
        logs_dir: &Path,
        result: Result<(), String>,
    ) -> Result<(), String> {
        let requests = self.sent.borrow().clone();
        let Some(last) = requests.last() else {
            return result;
        };
        let ids: Vec<&str> = requests.iter().map(|r| r.request_id.as_str()).collect();
        let lines = log_lines(logs_dir, &ids);
        evidence.record("requests.json", &requests);
        let log_path = evidence.record_text("log-lines.txt", &(lines.join("\n") + "\n"));
        result.map_err(|message| {
            format!(
                "{message} [last request: x-request-id {} ({}); {} log lines of the case's {} requests: {}]",
                last.request_id,
                last.prompt,
                lines.len(),
                requests.len(),
                log_path.display()
            )
        })
    }
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
    // Hop 1: the ids Dynamo gave the case's requests.
    let mut wanted: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    for (_, text) in &logs {
        for line in text.lines().filter(|l| ids.iter().any(|id| l.contains(id))) {
            for linked in dynamo_request_ids(line) {
                if !wanted.contains(&linked) {
                    wanted.push(linked);
                }
            }
        }
    }
    // Hop 2: every line naming any of them.
    let mut found = Vec::new();
    for (name, text) in &logs {
        for (n, line) in text.lines().enumerate() {
            if wanted.iter().any(|id| line.contains(id.as_str())) {
                found.push(format!("{name}:{}: {line}", n + 1));
            }
        }
    }
    found
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

/// `line` without ANSI escape sequences (the colours of Dynamo's logs).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
