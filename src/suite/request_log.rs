//! The requests one case sends: the case builds each one here, so none is
//! sent unrecorded, and after the case they become `requests.json` and
//! `log-lines.txt` ([`super::requests`]).

use std::cell::RefCell;
use std::path::Path;

use crate::client::{Client, Completion};
use crate::prompts::Prompt;
use crate::stack::Worker;

use super::case_evidence::CaseEvidence;
use super::requests::{log_lines, with_wire, SentRequest};

/// The requests of one case, in the order it built them.
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
        self.sent.borrow_mut().push(SentRequest::new(
            request.request_id.clone(),
            prompt.key(),
            pin.map(|w| w.name().to_string()),
        ));
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

    /// `requests.json` (every request: its id, body and headers as `client`
    /// sent them, a `curl` line, the `reference` tokens of its prompt) and
    /// `log-lines.txt` (the component log lines naming them); a failure
    /// names both and the id of the case's last request.
    pub fn attach_logs(
        &self,
        evidence: &CaseEvidence,
        logs_dir: &Path,
        client: &Client,
        reference: impl Fn(&str) -> Option<Vec<u32>>,
        result: Result<(), String>,
    ) -> Result<(), String> {
        let built = self.sent.borrow().clone();
        let requests = with_wire(built.clone(), &client.sent(), client.base_url(), reference);
        let Some(last) = built.last().or(requests.last()) else {
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
