//! OpenAI completions against the Dynamo frontend: non-streaming
//! [`Client::complete`], streaming [`Client::stream`] with per-chunk
//! monotonic timestamps and [`StreamTimings`] (defined once, in
//! [`timing`]), worker pinning and identity, `/health` and `/v1/models`.
//!
//! ```no_run
//! # async fn case() -> Result<(), kvcr_e2e::client::ClientError> {
//! use kvcr_e2e::client::{Client, Completion, TokenIdsRequest};
//! let client = Client::new("http://127.0.0.1:8000")?;
//! let Some(&worker) = client.health().await?.instance_ids_for("generate").first() else {
//!     return Ok(()); // a case reports "no worker registered" here
//! };
//! let req = Completion::new("tiny", "The quick brown fox")
//!     .max_tokens(16)
//!     .seed(1)
//!     .pin_worker(worker)
//!     .token_ids(TokenIdsRequest::ReturnTokenIds);
//! let out = client.complete(&req).await?; // 200 + non-empty choices, or a typed error
//! println!("{:?} from worker {:?} ({:?})", out.token_ids, out.worker_id, out.token_source);
//! let s = client.stream(&req).await?;      // stalls and truncation are errors
//! if let Some(t) = &s.timings {
//!     println!("ttft {:?} tpot {:?} itl {:?}", t.ttft, t.tpot, t.itl);
//! }
//! # Ok(()) }
//! ```

pub mod error;
pub mod frontend;
pub mod request;
pub mod request_id;
pub mod response;
pub mod stream;
pub mod timing;

#[cfg(test)]
mod test_server;
#[cfg(test)]
mod tests;

pub use error::{ClientError, StreamFailure};
pub use frontend::{Client, Health, Instance};
pub use request::{shell_quote, Completion, Prompt, TokenIdsRequest, WireRequest};
pub use request_id::{new_request_id, HEADER_REQUEST_ID};
pub use response::{CompletionOutcome, TokenSource, Usage, WorkerIdentity};
pub use stream::{Chunk, StreamLimits, StreamOutcome};
pub use timing::{StreamTimings, DEFINITIONS};
