//! Triage by request id: the requests a case sent (each with its own
//! `x-request-id`) and the component log lines that name them.
//!
//! Dynamo's frontend adopts a UUID `x-request-id` as the request's id, and
//! the workers log it (Dynamo's request plane, and the CPU engine's prefill
//! line `request <id>: N full blocks: …`). After every case the lines of
//! every component log that mention one of the case's ids are copied into
//! `cases/<case>/log-lines.txt`, prefixed with their file and line number,
//! so a failure can be followed from JUnit to the exact log line.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// One request a case sent.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SentRequest {
    pub request_id: String,
    /// The prompt's key (`f12/v0`).
    pub prompt: String,
    /// The worker slot it was pinned to; `None` when the router picked.
    pub pinned_to: Option<String>,
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
    let mut found = Vec::new();
    for file in files {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        for (n, line) in text.lines().enumerate() {
            if ids.iter().any(|id| line.contains(id)) {
                found.push(format!("{name}:{}: {}", n + 1, strip_ansi(line)));
            }
        }
    }
    found
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
        std::fs::write(dir.path().join("frontend.log"), "nothing here\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), format!("{id}\n")).unwrap();
        let lines = log_lines(dir.path(), &[id]);
        assert_eq!(
            lines,
            vec![
                format!("worker-A.log:2: 2026-11-30T06:44:32Z request received request_id={id}"),
                format!("worker-A.log:3: request {id}: 4 full blocks: device=0 host=0 kvcr=4 computed=0"),
            ]
        );
        assert!(log_lines(dir.path(), &[]).is_empty());
    }
}
