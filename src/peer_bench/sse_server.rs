//! A deterministic OpenAI-compatible SSE server for client benchmarks.
//!
//! `POST .../completions` streams [`Shape::chunks`] completion chunks of
//! [`Shape::chunk_bytes`] text each, [`Shape::gap`] apart (none: as fast as
//! the client reads), then a usage chunk and `data: [DONE]`. `GET` answers a
//! model list. One OS thread per connection, blocking writes with
//! `TCP_NODELAY`, `connection: close`: nothing is shared with the client
//! during a stream. Every stream is recorded as [`Served`]: when its request
//! was read, and the [`monotonic_ns`] stamp taken just before each chunk's
//! `write`. Each chunk's text starts with `<id>` (the stream's number), so a
//! client's output names the stream it read.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::clock::monotonic_ns;

/// What every stream looks like, set per phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// Content chunks per stream.
    pub chunks: usize,
    /// Pause before each chunk; zero streams as fast as the client reads.
    #[serde(with = "micros")]
    pub gap: Duration,
    /// Bytes of text per chunk (at least the `<id>` tag).
    pub chunk_bytes: usize,
}

mod micros {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_micros() as u64)
    }
}

/// One stream as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Served {
    /// Stream number, also the `<id>` tag of its text.
    pub id: u64,
    /// When the request had been read in full.
    pub arrived_ns: u64,
    /// Just before each content chunk's write.
    pub sends_ns: Vec<u64>,
}

#[derive(Default)]
struct Shared {
    shape: Option<Shape>,
    next_id: u64,
    served: Vec<Served>,
}

/// The running server; it lives until the process ends.
pub struct SseServer {
    url: String,
    shared: Arc<Mutex<Shared>>,
}

impl SseServer {
    /// Listens on `127.0.0.1:0` and streams `shape`.
    pub fn start(shape: Shape) -> std::io::Result<SseServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Mutex::new(Shared {
            shape: Some(shape),
            ..Shared::default()
        }));
        let accept_shared = shared.clone();
        thread::Builder::new()
            .name("sse-accept".into())
            .spawn(move || {
                for sock in listener.incoming().flatten() {
                    let shared = accept_shared.clone();
                    let _ = thread::Builder::new()
                        .name("sse-conn".into())
                        .spawn(move || serve(sock, &shared));
                }
            })?;
        Ok(SseServer { url, shared })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Streams from now on look like `shape`.
    pub fn set_shape(&self, shape: Shape) {
        self.shared.lock().expect("server state").shape = Some(shape);
    }

    /// The streams finished since the last call, in order of arrival.
    pub fn take_served(&self) -> Vec<Served> {
        let mut served = std::mem::take(&mut self.shared.lock().expect("server state").served);
        served.sort_by_key(|s| s.arrived_ns);
        served
    }
}

/// The `<id>` tag at the start of a stream's text, if any.
pub fn tag_of(text: &str) -> Option<u64> {
    let rest = text.strip_prefix('<')?;
    rest[..rest.find('>')?].parse().ok()
}

fn chunk_text(id: u64, bytes: usize) -> String {
    let mut text = format!("<{id}>");
    while text.len() < bytes {
        text.push('x');
    }
    text
}

fn event(body: serde_json::Value) -> Vec<u8> {
    format!("data: {body}\n\n").into_bytes()
}

fn content_chunk(text: &str, finish: Option<&str>) -> Vec<u8> {
    event(json!({
        "id": "cmpl-bench", "object": "text_completion", "created": 1_764_441_600u64, "model": "tiny",
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": null}],
        "usage": null,
    }))
}

/// One HTTP/1.1 request as a test server reads it.
pub struct Request {
    /// Lower case, e.g. `post`.
    pub method: String,
    pub path: String,
    pub body: String,
}

/// Reads one request head and its content-length body from a blocking
/// socket; `None` on EOF or a read error.
pub fn read_request(sock: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut piece = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut piece).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&piece[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut piece).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&piece[..n]);
    }
    let mut first = head.lines().next()?.split_whitespace();
    Some(Request {
        method: first.next()?.to_string(),
        path: first.next()?.to_string(),
        body: String::from_utf8_lossy(&buf[head_end..]).into_owned(),
    })
}

fn serve(mut sock: TcpStream, shared: &Mutex<Shared>) {
    let Some(Request { method, path, .. }) = read_request(&mut sock) else {
        return;
    };
    let arrived_ns = monotonic_ns();
    let _ = sock.set_nodelay(true);
    if method != "post" || !path.ends_with("completions") {
        let body =
            json!({"object": "list", "data": [{"id": "tiny", "object": "model"}]}).to_string();
        let _ = write!(
            sock,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let (shape, id) = {
        let mut s = shared.lock().expect("server state");
        s.next_id += 1;
        (s.shape.expect("a shape is set at start"), s.next_id)
    };
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    if sock.write_all(head).is_err() {
        return;
    }
    // Payloads are built up front so a stamp is followed by the write alone.
    let text = chunk_text(id, shape.chunk_bytes);
    let body = content_chunk(&text, None);
    let last = content_chunk(&text, Some("length"));
    let mut sends_ns = Vec::with_capacity(shape.chunks);
    for i in 0..shape.chunks {
        if !shape.gap.is_zero() {
            thread::sleep(shape.gap);
        }
        let payload = if i + 1 == shape.chunks { &last } else { &body };
        let at = monotonic_ns();
        if sock.write_all(payload).is_err() {
            return;
        }
        sends_ns.push(at);
    }
    let usage = event(json!({
        "id": "cmpl-bench", "object": "text_completion", "created": 1_764_441_600u64, "model": "tiny",
        "choices": [],
        "usage": {"prompt_tokens": 1, "completion_tokens": shape.chunks, "total_tokens": shape.chunks + 1},
    }));
    if sock.write_all(&usage).is_err() {
        return;
    }
    // Recorded before `[DONE]`: once a client has its stream, so has the server.
    shared.lock().expect("server state").served.push(Served {
        id,
        arrived_ns,
        sends_ns,
    });
    let _ = sock.write_all(b"data: [DONE]\n\n");
    let _ = sock.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_names_itself_and_is_recorded() {
        let server = SseServer::start(Shape {
            chunks: 3,
            gap: Duration::ZERO,
            chunk_bytes: 8,
        })
        .unwrap();
        let mut sock = TcpStream::connect(server.url().trim_start_matches("http://")).unwrap();
        let body = r#"{"prompt":"hi","stream":true}"#;
        write!(
            sock,
            "POST /v1/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        sock.read_to_string(&mut out).unwrap();
        assert_eq!(out.matches("\"text\":\"<1>xxxxx\"").count(), 3, "{out}");
        assert!(out.ends_with("data: [DONE]\n\n"));
        let served = server.take_served();
        assert_eq!(served.len(), 1);
        assert_eq!(served[0].sends_ns.len(), 3);
        assert!(served[0].sends_ns[0] >= served[0].arrived_ns);
        assert_eq!(tag_of("<17>xx"), Some(17));
        assert_eq!(tag_of("17"), None);
    }
}
