//! A tiny HTTP server for client tests: each accepted connection plays the
//! next canned script (bytes, pauses, hang) and records the request.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One step of a canned response.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes.
    Send(Vec<u8>),
    /// Pause.
    Sleep(Duration),
    /// Keep the connection open without writing (a stalled server).
    Hang,
}

/// A request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub head: String,
    pub body: String,
}

pub struct TestServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).to_string();
    Some(Recorded { head, body })
}

impl TestServer {
    /// Serves one script per connection, in order.
    pub async fn start(scripts: Vec<Vec<Step>>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let rec = requests.clone();
        tokio::spawn(async move {
            for script in scripts {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let rec = rec.clone();
                tokio::spawn(async move {
                    if let Some(r) = read_request(&mut sock).await {
                        rec.lock().unwrap().push(r);
                    }
                    for step in script {
                        match step {
                            Step::Send(b) => {
                                if sock.write_all(&b).await.is_err() {
                                    return;
                                }
                                let _ = sock.flush().await;
                            }
                            Step::Sleep(d) => tokio::time::sleep(d).await,
                            Step::Hang => {
                                tokio::time::sleep(Duration::from_secs(3600)).await;
                            }
                        }
                    }
                    let _ = sock.shutdown().await;
                });
            }
        });
        TestServer { url, requests }
    }

    pub fn request(&self, i: usize) -> Recorded {
        self.requests.lock().unwrap()[i].clone()
    }
}

/// A whole HTTP response with a body.
pub fn http(status: u16, content_type: &str, body: &str) -> Vec<Step> {
    vec![Step::Send(
        format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )]
}

/// The head of an SSE response (body delimited by close).
pub fn sse_head() -> Step {
    Step::Send(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
            .to_vec(),
    )
}

/// One SSE data event.
pub fn data(payload: &str) -> Step {
    Step::Send(format!("data: {payload}\n\n").into_bytes())
}
