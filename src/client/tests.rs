//! Client tests against a local canned HTTP server.

use std::time::Duration;

use serde_json::{json, Value};

use super::test_server::{data, http, sse_head, Step, TestServer};
use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn chunk(text: &str, worker: u64, finish: Option<&str>) -> String {
    json!({"id": "cmpl-1", "object": "text_completion",
           "choices": [{"index": 0, "text": text, "finish_reason": finish}],
           "nvext": {"worker_id": {"decode_worker_id": worker, "decode_dp_rank": 0}}})
    .to_string()
}

fn usage_chunk(completion_tokens: u32) -> String {
    json!({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": completion_tokens,
           "prompt_tokens_details": {"cached_tokens": 0}}})
    .to_string()
}

fn limits(first: u64, idle: u64, overall: u64) -> StreamLimits {
    StreamLimits {
        first_chunk: ms(first),
        idle: ms(idle),
        overall: ms(overall),
    }
}

fn req() -> Completion {
    Completion::new("tiny", "hello world")
        .max_tokens(3)
        .seed(1)
        .pin_worker(123)
}

#[tokio::test]
async fn complete_normal() {
    let body = json!({"id": "x", "choices": [{"text": " a b c", "finish_reason": "length", "token_ids": [5, 6, 7]}],
                      "usage": {"prompt_tokens": 2, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 16}},
                      "nvext": {"worker_id": 123, "timing": {"ttft_ms": 1.5}}});
    let srv = TestServer::start(vec![http(200, "application/json", &body.to_string())]).await;
    let client = Client::new(&srv.url).unwrap();
    let out = client
        .complete(&req().token_ids(TokenIdsRequest::ReturnTokenIds))
        .await
        .unwrap();
    assert_eq!(out.status, 200);
    assert_eq!(out.text, " a b c");
    assert_eq!(out.token_ids, Some(vec![5, 6, 7]));
    assert_eq!(out.token_source, TokenSource::Ids);
    assert_eq!(out.worker_id, Some(123));
    assert_eq!(out.usage.unwrap().cached_tokens, Some(16));
    assert_eq!(out.timing.unwrap()["ttft_ms"], 1.5);
    let r = srv.request(0);
    assert!(r.head.starts_with("POST /v1/completions"), "{}", r.head);
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("x-dynamo-worker-instance-id: 123"),
        "{}",
        r.head
    );
    let sent: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(sent["temperature"], 0.0);
    assert_eq!(sent["stream"], false);
    assert_eq!(sent["return_token_ids"], true);
    assert_eq!(
        sent["nvext"]["extra_fields"],
        json!(["worker_id", "timing"])
    );
}

#[tokio::test]
async fn complete_non_200_is_a_typed_error() {
    let srv = TestServer::start(vec![http(
        400,
        "application/json",
        r#"{"error":"unknown worker 123"}"#,
    )])
    .await;
    let err = Client::new(&srv.url)
        .unwrap()
        .complete(&req())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(400));
    let msg = err.to_string();
    assert!(msg.contains("expected HTTP 200, got 400"), "{msg}");
    assert!(msg.contains("unknown worker 123"), "{msg}");
    assert!(msg.contains("pinned to worker 123"), "{msg}");
}

#[tokio::test]
async fn complete_empty_choices_and_non_json() {
    let srv = TestServer::start(vec![
        http(200, "application/json", r#"{"choices": []}"#),
        http(200, "text/plain", "oops"),
    ])
    .await;
    let client = Client::new(&srv.url).unwrap();
    let err = client.complete(&req()).await.unwrap_err();
    assert!(matches!(err, ClientError::BadBody { .. }), "{err}");
    assert!(err.to_string().contains("`choices` is empty"), "{err}");
    let err = client.complete(&req()).await.unwrap_err();
    assert!(err.to_string().contains("not JSON"), "{err}");
}

#[tokio::test]
async fn transport_error_names_the_url() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    let err = Client::new(&url)
        .unwrap()
        .complete(&req())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Transport { .. }));
    assert!(err.to_string().contains(&url), "{err}");
}

#[tokio::test]
async fn sse_normal() {
    let script = vec![
        sse_head(),
        data(&json!({"choices": [{"index": 0, "text": "", "finish_reason": null}]}).to_string()),
        Step::Sleep(ms(30)),
        data(&chunk(" a", 123, None)),
        Step::Sleep(ms(20)),
        data(&chunk(" b", 123, None)),
        Step::Sleep(ms(20)),
        data(&chunk(" c", 123, Some("length"))),
        data(&usage_chunk(3)),
        Step::Send(b": keep-alive comment\n\n".to_vec()),
        data("[DONE]"),
    ];
    let srv = TestServer::start(vec![script]).await;
    let out = Client::new(&srv.url).unwrap().stream(&req()).await.unwrap();
    assert_eq!(out.text, " a b c");
    assert_eq!(out.finish_reason.as_deref(), Some("length"));
    assert_eq!(out.worker_id, Some(123));
    assert_eq!(out.worker_ids_seen, vec![123]);
    assert_eq!(out.token_source, TokenSource::TextOnly);
    assert_eq!(out.usage.unwrap().completion_tokens, 3);
    assert_eq!(out.chunks.len(), 5);
    let t = out.timings.unwrap();
    assert_eq!(t.tokens, 3);
    assert_eq!(t.itl.len(), 2);
    assert!(t.ttft >= ms(25), "{t:?}");
    assert!(t.itl.iter().all(|g| *g >= ms(15)), "{t:?}");
    assert!(t.tpot.unwrap() >= ms(15), "{t:?}");
    let sent: Value = serde_json::from_str(&srv.request(0).body).unwrap();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn sse_token_ids_per_chunk() {
    let c = |text: &str, id: u32, fin: Option<&str>| {
        json!({"choices": [{"text": text, "token_ids": [id], "finish_reason": fin}], "nvext": {"worker_id": 9}})
            .to_string()
    };
    let script = vec![
        sse_head(),
        data(&c("x", 1, None)),
        data(&c("y", 2, Some("stop"))),
        data("[DONE]"),
    ];
    let srv = TestServer::start(vec![script]).await;
    let out = Client::new(&srv.url).unwrap().stream(&req()).await.unwrap();
    assert_eq!(out.token_ids, Some(vec![1, 2]));
    assert_eq!(out.token_source, TokenSource::Ids);
    assert_eq!(out.worker_id, Some(9));
}

#[tokio::test]
async fn sse_malformed_chunk() {
    let script = vec![
        sse_head(),
        data(&chunk(" a", 123, None)),
        data("{not json"),
        data("[DONE]"),
    ];
    let srv = TestServer::start(vec![script]).await;
    let err = Client::new(&srv.url)
        .unwrap()
        .stream(&req())
        .await
        .unwrap_err();
    match err.stream_failure() {
        Some(StreamFailure::MalformedChunk { index: 1, .. }) => {}
        other => panic!("{other:?}: {err}"),
    }
}

#[tokio::test]
async fn sse_truncated() {
    let srv = TestServer::start(vec![
        vec![
            sse_head(),
            data(&chunk(" a", 123, None)),
            data(&chunk(" b", 123, None)),
        ],
        vec![sse_head(), data(&chunk(" a", 7, None)), data("[DONE]")],
    ])
    .await;
    let client = Client::new(&srv.url).unwrap();
    let err = client.stream(&req()).await.unwrap_err();
    assert!(
        err.to_string().contains(
            "stream ended after 2 tokens from worker 123 without a finish_reason or [DONE]"
        ),
        "{err}"
    );
    let err = client.stream(&req()).await.unwrap_err();
    assert_eq!(
        err.stream_failure(),
        Some(&StreamFailure::Truncated {
            tokens: 1,
            worker: Some(7),
            saw_done: true,
            saw_finish: false
        })
    );
}

#[tokio::test]
async fn sse_stall_hits_the_idle_deadline() {
    let script = vec![
        sse_head(),
        data(&chunk(" a", 123, None)),
        data(&chunk(" b", 123, None)),
        Step::Hang,
    ];
    let srv = TestServer::start(vec![script]).await;
    let client = Client::new(&srv.url)
        .unwrap()
        .with_stream_limits(limits(2000, 200, 10_000));
    let start = std::time::Instant::now();
    let err = client.stream(&req()).await.unwrap_err();
    assert!(start.elapsed() < ms(2000), "took {:?}", start.elapsed());
    assert!(
        err.to_string()
            .contains("no chunk for 200ms after 2 tokens from worker 123"),
        "{err}"
    );
}

#[tokio::test]
async fn sse_no_first_chunk_and_overall() {
    let srv = TestServer::start(vec![
        vec![sse_head(), Step::Hang],
        vec![
            sse_head(),
            data(&chunk(" a", 5, None)),
            Step::Sleep(ms(100)),
            data(&chunk(" b", 5, None)),
            Step::Sleep(ms(100)),
            data(&chunk(" c", 5, None)),
            Step::Hang,
        ],
    ])
    .await;
    let client = Client::new(&srv.url)
        .unwrap()
        .with_stream_limits(limits(150, 150, 10_000));
    let err = client.stream(&req()).await.unwrap_err();
    assert!(
        matches!(
            err.stream_failure(),
            Some(StreamFailure::NoFirstChunk { .. })
        ),
        "{err}"
    );
    // The overall limit ends a stream that keeps sending and never
    // finishes; how many of the 3 tokens arrived first depends on the
    // machine's load, so any count from 1 passes.
    let client = client.with_stream_limits(limits(1000, 1000, 250));
    let err = client.stream(&req()).await.unwrap_err();
    assert!(
        matches!(
            err.stream_failure(),
            Some(StreamFailure::Overall {
                tokens: 1..=3,
                worker: Some(5),
                ..
            })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn sse_error_event_and_non_200() {
    let srv = TestServer::start(vec![
        vec![
            sse_head(),
            data(&chunk(" a", 1, None)),
            Step::Send(b"event: error\ndata: worker died\n\n".to_vec()),
        ],
        vec![sse_head(), data(r#"{"error": {"message": "boom"}}"#)],
        http(500, "text/plain", "internal"),
    ])
    .await;
    let client = Client::new(&srv.url).unwrap();
    let err = client.stream(&req()).await.unwrap_err();
    assert!(err.to_string().contains("worker died"), "{err}");
    let err = client.stream(&req()).await.unwrap_err();
    assert!(
        matches!(
            err.stream_failure(),
            Some(StreamFailure::ServerError { .. })
        ),
        "{err}"
    );
    let err = client.stream(&req()).await.unwrap_err();
    assert_eq!(err.status(), Some(500));
}

#[tokio::test]
async fn sse_only_usage_is_empty_choices() {
    let srv = TestServer::start(vec![vec![
        sse_head(),
        data(&usage_chunk(0)),
        data("[DONE]"),
    ]])
    .await;
    let err = Client::new(&srv.url)
        .unwrap()
        .stream(&req())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.stream_failure(),
            Some(StreamFailure::EmptyChoices { events: 1 })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn health_and_models() {
    let health = json!({"status": "healthy", "uptime": 3,
    "endpoints": ["dyn://kvcr-e2e.cpu.generate"],
    "instances": [
        {"component": "cpu", "endpoint": "generate", "instance_id": 7587890412930u64, "namespace": "kvcr-e2e", "transport": {"tcp": "x"}},
        {"component": "cpu", "endpoint": "clear_kv_blocks", "instance_id": 7587890412930u64, "namespace": "kvcr-e2e"},
        {"component": "cpu", "endpoint": "generate", "instance_id": 5683645024925323515u64, "namespace": "kvcr-e2e"},
        {"component": "weird"}
    ]});
    let models =
        json!({"object": "list", "data": [{"id": "tiny", "object": "model", "owned_by": "x"}]});
    let srv = TestServer::start(vec![
        http(200, "application/json", &health.to_string()),
        http(200, "application/json", &models.to_string()),
        http(
            503,
            "application/json",
            r#"{"status": "unhealthy", "instances": []}"#,
        ),
    ])
    .await;
    let client = Client::new(&srv.url).unwrap();
    let h = client.health().await.unwrap();
    assert!(h.is_healthy());
    assert_eq!(h.instance_ids(), vec![7587890412930, 5683645024925323515]);
    assert_eq!(h.instance_ids_for("clear_kv_blocks"), vec![7587890412930]);
    assert_eq!(client.models().await.unwrap(), vec!["tiny".to_string()]);
    let h = client.health().await.unwrap();
    assert!(!h.is_healthy());
    assert_eq!(h.http_status, 503);
}

/// The head's headers, lower-cased names, in order.
fn head_headers(head: &str) -> Vec<(String, String)> {
    head.lines()
        .skip(1)
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_ascii_lowercase(), v.trim().to_string()))
        })
        .collect()
}

#[tokio::test]
async fn a_recording_client_keeps_each_request_exactly_as_sent_and_sends_it_again() {
    let body = json!({"choices": [{"text": " a", "finish_reason": "length", "token_ids": [5, 6]}],
                      "nvext": {"worker_id": 123}});
    let c = |text: &str, id: u32, fin: Option<&str>| {
        json!({"choices": [{"text": text, "token_ids": [id], "finish_reason": fin}], "nvext": {"worker_id": 9}})
            .to_string()
    };
    let stream = vec![
        sse_head(),
        data(&c("x", 1, None)),
        data(&c("y", 2, Some("stop"))),
        data("[DONE]"),
    ];
    let srv = TestServer::start(vec![
        http(200, "application/json", &body.to_string()),
        stream.clone(),
        http(200, "application/json", &body.to_string()),
        stream,
    ])
    .await;
    let client = Client::new(&srv.url).unwrap().recording();
    let clone = client.clone();
    let plain = req().token_ids(TokenIdsRequest::NvextField("completion_token_ids".into()));
    client.complete(&plain).await.unwrap();
    let streamed = req();
    clone.stream(&streamed).await.unwrap();
    let sent = client.sent();
    assert_eq!(sent.len(), 2, "clones record into the same list");
    assert_eq!(sent[0], plain.wire(false));
    assert_eq!(sent[1], streamed.wire(true));
    assert!(!sent[0].streams() && sent[1].streams());
    for (i, wire) in sent.iter().enumerate() {
        let got = srv.request(i);
        assert_eq!(
            got.body.as_bytes(),
            wire.body_bytes().as_slice(),
            "the exact bytes"
        );
        let received = head_headers(&got.head);
        for header in &wire.headers {
            assert!(received.contains(header), "{header:?} not in {received:?}");
        }
    }
    assert_eq!(
        sent[0].headers[..2],
        [
            ("content-type".to_string(), "application/json".to_string()),
            ("x-request-id".to_string(), plain.request_id.clone())
        ]
    );
    // Sent again as recorded (the replay): the same bytes, as a stream when
    // the body asks for one.
    let replayer = Client::new(&srv.url).unwrap();
    let (tokens, worker) = replayer.send_recorded(&sent[0]).await.unwrap();
    assert_eq!((tokens, worker), (Some(vec![5, 6]), Some(123)));
    let (tokens, worker) = replayer.send_recorded(&sent[1]).await.unwrap();
    assert_eq!((tokens, worker), (Some(vec![1, 2]), Some(9)));
    assert_eq!(srv.request(2).body, srv.request(0).body);
    assert_eq!(srv.request(3).body, srv.request(1).body);
    assert!(
        replayer.sent().is_empty(),
        "only a recording client keeps them"
    );
}

#[test]
fn the_curl_line_quotes_every_word_for_the_shell() {
    assert_eq!(shell_quote("plain"), "'plain'");
    assert_eq!(shell_quote("it's $HOME `x`"), r#"'it'\''s $HOME `x`'"#);
    let wire = Completion::new("tiny", "it's \"quoted\" $HOME")
        .max_tokens(2)
        .pin_worker(17114828166582755834)
        .wire(false);
    let line = wire.curl("http://127.0.0.1:23537/");
    assert!(
        line.starts_with("curl -sS -N -X 'POST' \"${KVCR_FRONTEND:-http://127.0.0.1:23537}\"'/v1/completions' -H 'content-type: application/json' -H 'x-request-id: "),
        "{line}"
    );
    assert!(
        line.contains(" -H 'x-dynamo-worker-instance-id: 17114828166582755834' --data-binary '{"),
        "{line}"
    );
    // What a POSIX shell makes of it: the same words, the body byte for byte.
    let script = format!(
        "set -- {}; for w in \"$@\"; do printf '%s\\n' \"$w\"; done",
        &line[5..]
    );
    let words = std::process::Command::new("sh")
        .args(["-c", &script])
        .env_remove("KVCR_FRONTEND")
        .output()
        .expect("sh runs");
    let words = String::from_utf8(words.stdout).unwrap();
    let words: Vec<&str> = words.lines().collect();
    assert_eq!(words[..4], ["-sS", "-N", "-X", "POST"]);
    assert_eq!(words[4], "http://127.0.0.1:23537/v1/completions");
    assert_eq!(
        words.last().unwrap().as_bytes(),
        wire.body_bytes().as_slice()
    );
    let body: Value = serde_json::from_str(words.last().unwrap()).unwrap();
    assert_eq!(body["prompt"], "it's \"quoted\" $HOME");
    // $KVCR_FRONTEND points it at another frontend.
    let elsewhere = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("KVCR_FRONTEND", "http://10.0.0.2:8000")
        .output()
        .expect("sh runs");
    assert!(String::from_utf8_lossy(&elsewhere.stdout)
        .lines()
        .any(|w| w == "http://10.0.0.2:8000/v1/completions"));
}
