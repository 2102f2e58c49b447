//! Typed client errors. Each says what was sent, what was expected, what
//! was seen, and where to look.

use std::time::Duration;

/// Why a stream did not complete as the contract requires.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StreamFailure {
    /// No first content chunk within the first-chunk deadline.
    #[error("no first chunk within {waited:?} ({events} events so far)")]
    NoFirstChunk {
        /// How long it waited.
        waited: Duration,
        /// SSE events received (none with content).
        events: usize,
    },
    /// The stream went quiet for longer than the idle deadline.
    #[error("no chunk for {idle:?} after {tokens} tokens from {}", worker_words(*.worker))]
    Idle {
        /// The idle deadline that passed.
        idle: Duration,
        /// Tokens received before the stall.
        tokens: usize,
        /// Worker the chunks came from.
        worker: Option<u64>,
    },
    /// The whole stream took longer than the overall deadline.
    #[error("stream not finished within {limit:?}: {tokens} tokens from {} so far", worker_words(*.worker))]
    Overall {
        /// The overall deadline.
        limit: Duration,
        /// Tokens received.
        tokens: usize,
        /// Worker the chunks came from.
        worker: Option<u64>,
    },
    /// A data event that is not the JSON of a completion chunk.
    #[error("chunk {index} is not valid completion JSON ({reason}): {data:?}")]
    MalformedChunk {
        /// 0-based index of the data event.
        index: usize,
        /// The parse error.
        reason: String,
        /// The data (excerpt).
        data: String,
    },
    /// The server sent an error event or an `{"error": ...}` chunk.
    #[error("the server sent an error in the stream after {tokens} tokens: {data}")]
    ServerError {
        /// Tokens received before it.
        tokens: usize,
        /// The error payload (excerpt).
        data: String,
    },
    /// The stream ended without `[DONE]` or without a finish reason.
    #[error("stream ended after {tokens} tokens from {} without {}", worker_words(*.worker), missing_words(*.saw_done, *.saw_finish))]
    Truncated {
        /// Tokens received.
        tokens: usize,
        /// Worker the chunks came from.
        worker: Option<u64>,
        /// Whether `[DONE]` arrived.
        saw_done: bool,
        /// Whether a finish reason arrived.
        saw_finish: bool,
    },
    /// No chunk carried a non-empty `choices`.
    #[error("no chunk carried a non-empty `choices` ({events} events)")]
    EmptyChoices {
        /// Events received.
        events: usize,
    },
    /// The byte stream or SSE framing failed mid-stream.
    #[error("the SSE stream broke after {tokens} tokens: {reason}")]
    Transport {
        /// Tokens received before it.
        tokens: usize,
        /// The transport or framing error.
        reason: String,
    },
}

fn worker_words(w: Option<u64>) -> String {
    match w {
        Some(id) => format!("worker {id}"),
        None => "an unidentified worker".into(),
    }
}

fn missing_words(saw_done: bool, saw_finish: bool) -> &'static str {
    match (saw_done, saw_finish) {
        (false, false) => "a finish_reason or [DONE]",
        (false, true) => "[DONE]",
        (true, false) => "a finish_reason",
        (true, true) => "anything missing",
    }
}

/// A failed request to the frontend.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The client could not be built (bad base URL, TLS setup).
    #[error("cannot build an HTTP client for {base}: {reason}")]
    Setup {
        /// The base URL.
        base: String,
        /// Why.
        reason: String,
    },
    /// No response: refused, reset, or timed out.
    #[error("{request} to {url}: no response ({source}); is the frontend up? see its log")]
    Transport {
        /// The request, described.
        request: String,
        /// The URL.
        url: String,
        /// The transport error.
        #[source]
        source: reqwest::Error,
    },
    /// An HTTP status other than 200.
    #[error("{request} to {url}: expected HTTP 200, got {status}; body starts: {body}")]
    Status {
        /// The request, described.
        request: String,
        /// The URL.
        url: String,
        /// The status.
        status: u16,
        /// The body (excerpt).
        body: String,
    },
    /// A 200 whose body is not what the contract requires (not JSON, no or
    /// empty `choices`).
    #[error("{request} to {url}: HTTP 200 but {reason}; body starts: {body}")]
    BadBody {
        /// The request, described.
        request: String,
        /// The URL.
        url: String,
        /// What was wrong.
        reason: String,
        /// The body (excerpt).
        body: String,
    },
    /// A streaming request that failed after its 200 header.
    #[error("{request} to {url} (streaming): {failure}")]
    Stream {
        /// The request, described.
        request: String,
        /// The URL.
        url: String,
        /// What went wrong.
        failure: StreamFailure,
    },
}

impl ClientError {
    /// The HTTP status, when one was received.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            ClientError::BadBody { .. } | ClientError::Stream { .. } => Some(200),
            _ => None,
        }
    }

    /// The stream failure, for a streaming request.
    pub fn stream_failure(&self) -> Option<&StreamFailure> {
        match self {
            ClientError::Stream { failure, .. } => Some(failure),
            _ => None,
        }
    }
}
