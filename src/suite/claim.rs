//! Which clause a case failed on, as a value: every [`CaseError`] carries a
//! [`Claim`] (a verdict's clause, a crash, a request that failed, a series
//! not reported, a wait that ended, a stack that did not start...) and the
//! detail that clause gave. A fault row names the claim it expects
//! ([`Expect`]) and passes only on that claim, never on a word of the
//! message.

use std::fmt;

use crate::client::{ClientError, StreamFailure};
use crate::stack::{ProvisionError, RefusalKind};

use super::CaseError;

/// The clause a case failed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// A clause of the test plan judged by a verdict or a case
    /// (`Violation::claim`, or one of [`clause`]'s names).
    Clause(&'static str),
    /// A component of the stack exited on its own during the case.
    Crashed,
    /// A worker dropped out of the router's discovery during the case.
    DroppedOut,
    /// A request got no answer, or a wrong-shaped one.
    Request(Request),
    /// A counter a verdict reads was not reported (absent is not zero).
    NotReported,
    /// A scrape a verdict reads carries lines that cannot be trusted: a
    /// non-finite value, a result label the harness does not map, a line
    /// that does not parse.
    UntrustedScrape,
    /// A wait for a condition reached its deadline.
    TimedOut,
    /// A wait for a condition gave up: what it waited for cannot come.
    GaveUp,
    /// The case's own deadline passed while it was doing something.
    CaseDeadline,
    /// A stack (a second one, or a replacement worker) did not start.
    Startup(Startup),
    /// The harness could not inject or verify its fault.
    FaultNotApplied,
    /// The stack could not do what the case asked (no such worker, no
    /// replacement).
    Stack,
    /// The case ran out of fresh prompts.
    OutOfPrompts,
    /// A failure the harness names in prose only (`CaseError::new`); no
    /// fault row may expect it.
    Unnamed,
}

/// How a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Refused, reset or timed out: no response.
    NoResponse,
    /// An HTTP status other than 200.
    Status,
    /// A 200 whose body breaks the contract.
    BadBody,
    /// No client could be built.
    Setup,
    /// A stream whose first chunk never came.
    NoFirstChunk,
    /// A stream that stopped sending chunks.
    StreamIdle,
    /// A stream not finished within its overall limit.
    StreamOverall,
    /// A chunk that is not completion JSON.
    MalformedChunk,
    /// The server sent an error in the stream.
    StreamError,
    /// A stream that ended without its finish.
    StreamTruncated,
    /// A stream whose chunks carried no `choices`.
    EmptyChoices,
    /// A stream whose byte stream or framing broke.
    StreamBroken,
}

impl Request {
    /// The kind of `e`.
    pub fn of(e: &ClientError) -> Self {
        match e {
            ClientError::Setup { .. } => Request::Setup,
            ClientError::Transport { .. } => Request::NoResponse,
            ClientError::Status { .. } => Request::Status,
            ClientError::BadBody { .. } => Request::BadBody,
            ClientError::Stream { failure, .. } => match failure {
                StreamFailure::NoFirstChunk { .. } => Request::NoFirstChunk,
                StreamFailure::Idle { .. } => Request::StreamIdle,
                StreamFailure::Overall { .. } => Request::StreamOverall,
                StreamFailure::MalformedChunk { .. } => Request::MalformedChunk,
                StreamFailure::ServerError { .. } => Request::StreamError,
                StreamFailure::Truncated { .. } => Request::StreamTruncated,
                StreamFailure::EmptyChoices { .. } => Request::EmptyChoices,
                StreamFailure::Transport { .. } => Request::StreamBroken,
            },
        }
    }
}

/// How a stack's start failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Startup {
    /// A component was not ready by the startup deadline.
    TimedOut,
    /// The start gave up early: a component exited while starting.
    GaveUp,
    /// KVCR's Guard service refused a worker's claim, for this reason.
    Refused(RefusalKind),
    /// Anything else (directories, spawn, plan, namespace node).
    Failed,
}

impl Startup {
    /// The kind of `e`.
    pub fn of(e: &ProvisionError) -> Self {
        match e {
            ProvisionError::NotReady(n) if n.wait.aborted => Startup::GaveUp,
            ProvisionError::NotReady(_) | ProvisionError::NoDeposit(_) => Startup::TimedOut,
            ProvisionError::ClaimRefused(r) => Startup::Refused(r.kind),
            _ => Startup::Failed,
        }
    }
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Claim::Clause(clause) => f.write_str(&code(clause)),
            Claim::Crashed => f.write_str("a component crashed"),
            Claim::DroppedOut => f.write_str("a worker dropped out of discovery"),
            Claim::Request(how) => write!(f, "a request failed: {}", how.words()),
            Claim::NotReported => f.write_str("a series not reported"),
            Claim::UntrustedScrape => f.write_str("a scrape with untrusted lines"),
            Claim::TimedOut => f.write_str("a wait timed out"),
            Claim::GaveUp => f.write_str("a wait gave up"),
            Claim::CaseDeadline => f.write_str("the case's deadline passed"),
            Claim::Startup(how) => write!(f, "a stack did not start: {}", how.words()),
            Claim::FaultNotApplied => f.write_str("fault not applied"),
            Claim::Stack => f.write_str("a stack error"),
            Claim::OutOfPrompts => f.write_str("out of prompts"),
            Claim::Unnamed => f.write_str("an unnamed failure"),
        }
    }
}

impl Request {
    fn words(&self) -> &'static str {
        match self {
            Request::NoResponse => "no response",
            Request::Status => "an error status",
            Request::BadBody => "a 200 with a bad body",
            Request::Setup => "no HTTP client",
            Request::NoFirstChunk => "no first chunk",
            Request::StreamIdle => "the stream stalled",
            Request::StreamOverall => "the stream overran its limit",
            Request::MalformedChunk => "a malformed chunk",
            Request::StreamError => "an error in the stream",
            Request::StreamTruncated => "the stream ended unfinished",
            Request::EmptyChoices => "no choices in the stream",
            Request::StreamBroken => "the stream broke",
        }
    }
}

impl Startup {
    fn words(&self) -> String {
        match self {
            Startup::TimedOut => "timed out".into(),
            Startup::GaveUp => "gave up (a component exited)".into(),
            Startup::Refused(kind) => format!("KVCR refused a claim ({kind:?})"),
            Startup::Failed => "failed".into(),
        }
    }
}

/// `text` as a markdown code span (fenced wider when it holds a backtick).
fn code(text: &str) -> String {
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// The names of the clauses that cases (not verdicts) judge.
pub mod clause {
    /// TC-04: an attempt pinned to B is served from A's endpoint after the kill.
    pub const TAKEOVER: &str = "takeover through the Guard";
    /// TC-06: the Guard serves an attempt (t1).
    pub const NO_T1: &str = "no t1";
    /// TC-02's arrangement: the fillers pushed the device cache out.
    pub const EVICTION_NOT_PROVEN: &str = "eviction not proven";
    /// TC-03: the interval log line agrees with `/metrics`.
    pub const INTERVAL_LOG: &str = "interval log agrees with /metrics";
    /// TC-05: every request has a client and an engine first-token instant.
    pub const TTFT_ACCURACY: &str = "TTFT accuracy";
    /// TC-03 on two nodes: UCX moved the pages over the network.
    pub const CROSSED_THE_NETWORK: &str = "a peer transfer between nodes crossed the network";
}

/// The failure a fault row expects: its claim, and optionally a detail that
/// claim's own detail must name (which token, which component, which
/// sub-check of the clause).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    pub claim: Claim,
    pub detail: Option<&'static str>,
}

impl Expect {
    /// A failure of `claim`, whatever its detail.
    pub const fn claim(claim: Claim) -> Self {
        Expect {
            claim,
            detail: None,
        }
    }

    /// A failure of `claim` whose detail names `detail`.
    pub const fn with(claim: Claim, detail: &'static str) -> Self {
        Expect {
            claim,
            detail: Some(detail),
        }
    }

    /// A failure of the clause `clause` whose detail names `detail`.
    pub const fn clause(clause: &'static str, detail: &'static str) -> Self {
        Expect::with(Claim::Clause(clause), detail)
    }

    /// Whether `failure` is the expected one: the same claim, and the
    /// detail named in that claim's detail (not anywhere in the message).
    pub fn is_met_by(&self, failure: &CaseError) -> bool {
        failure.claim == self.claim
            && match self.detail {
                Some(detail) => failure.detail.contains(detail),
                None => true,
            }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.claim)?;
        if let Some(detail) = self.detail {
            write!(f, ", naming {}", code(detail))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Violation;

    fn violation(claim: &'static str, detail: &str) -> CaseError {
        CaseError::from(Violation {
            claim,
            detail: detail.into(),
        })
    }

    #[test]
    fn the_expected_clause_with_its_detail_meets_the_expectation() {
        let e = violation("P→D transfer reconciles", "decode read bytes 9 ≠ prefill 8");
        assert!(Expect::clause("P→D transfer reconciles", "decode read bytes").is_met_by(&e));
        assert!(Expect::claim(Claim::Clause("P→D transfer reconciles")).is_met_by(&e));
    }

    #[test]
    fn another_clause_with_the_same_words_does_not() {
        // The message names the expected clause, but the clause that failed
        // is another one.
        let e = violation(
            "reference tokens",
            "P→D transfer reconciles: decode read bytes 9",
        );
        assert!(e.message.contains("P→D transfer reconciles"));
        assert!(!Expect::clause("P→D transfer reconciles", "decode read bytes").is_met_by(&e));
    }

    #[test]
    fn the_clause_without_the_detail_does_not() {
        let e = violation(
            "load within its budget",
            "5 requests failed, more than the budget of 2",
        );
        assert!(!Expect::clause("load within its budget", "returned wrong tokens").is_met_by(&e));
    }

    #[test]
    fn the_detail_is_read_in_the_claims_detail_not_in_the_context() {
        let e = violation("host-tier (DRAM) hit", "3 blocks loaded");
        let wrapped = CaseError {
            message: format!("t2: replacement A' did not reclaim the pool: {}", e.message),
            ..e
        };
        assert_eq!(wrapped.claim, Claim::Clause("host-tier (DRAM) hit"));
        assert!(!Expect::clause("host-tier (DRAM) hit", "did not reclaim").is_met_by(&wrapped));
        assert!(Expect::clause("host-tier (DRAM) hit", "3 blocks loaded").is_met_by(&wrapped));
    }

    #[test]
    fn an_unnamed_failure_meets_no_named_claim() {
        let e = CaseError::new("request f1 failed: no response");
        assert_eq!(e.claim, Claim::Unnamed);
        assert!(!Expect::claim(Claim::Request(Request::NoResponse)).is_met_by(&e));
    }

    #[test]
    fn a_request_failure_is_typed_by_its_client_error() {
        let e = ClientError::Status {
            request: "completion of f1".into(),
            url: "http://h/v1".into(),
            status: 503,
            body: "{}".into(),
        };
        let failure = CaseError::request(&e, "request f1 failed");
        assert_eq!(failure.claim, Claim::Request(Request::Status));
        assert_eq!(failure.message, format!("request f1 failed: {e}"));
        assert!(!Expect::claim(Claim::Request(Request::NoResponse)).is_met_by(&failure));
    }
}
