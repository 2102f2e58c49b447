//! A foreign peer on a worker's KVCR control channel (TC-22): a client
//! that speaks the channel's transport (ZeroMQ's ZMTP 3.0, as a PUSH socket
//! with the NULL mechanism) but sends what no KVCR 0.1.1 peer sends, as a
//! peer of another KVCR version or a stray client would: bytes that are not
//! msgpack, a message of an unknown type, and KVCR's own message types with
//! fields missing or of the wrong kind.
//!
//! The channel carries msgpack maps with a `type` (`start_write`,
//! `target_metadata`, ...). KVCR must drop each such message and keep
//! serving its real peers. Only standard sockets are used: the harness has
//! no ZeroMQ library, and the few bytes of the handshake are fixed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde::Serialize;

use crate::telemetry::names::kvcr_log::MALFORMED_START_WRITE_OP;

/// One foreign message: what it is, its bytes, and whether KVCR reads its
/// type (a msgpack map with a known `type`: KVCR counts it handled,
/// `control_<type>`, whatever its fields; the others it drops unread).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForeignMessage {
    pub what: &'static str,
    #[serde(skip)]
    pub bytes: Vec<u8>,
    /// The `type` KVCR dispatches on, where it does.
    pub typed: Option<&'static str>,
    /// The operation handle of a `start_write` KVCR must refuse as
    /// malformed, naming it (`KVCR malformed start_write op=<handle>`).
    pub malformed_start_write: Option<i64>,
}

/// The messages a foreign peer sends, one of each kind.
pub fn foreign_messages() -> Vec<ForeignMessage> {
    use Mp::{Bin, Int, Str};
    let typed = |what, kind: &'static str, mut fields: Vec<(&'static str, Mp)>| {
        fields.insert(0, ("type", Str(kind.into())));
        ForeignMessage {
            what,
            bytes: Mp::Map(fields).encode(),
            typed: Some(kind),
            malformed_start_write: None,
        }
    };
    // A start_write under `handle` that KVCR must refuse as malformed.
    let malformed = |what, handle: i64, mut fields: Vec<(&'static str, Mp)>| {
        fields.insert(0, ("op_handle", Int(handle)));
        ForeignMessage {
            malformed_start_write: Some(handle),
            ..typed(what, "start_write", fields)
        }
    };
    let untyped = |what, bytes| ForeignMessage {
        what,
        bytes,
        typed: None,
        malformed_start_write: None,
    };
    // Operation handles far from the ones real peers count up from.
    let handle = |n: i64| (1 << 40) + n;
    vec![
        untyped("bytes that are not msgpack", vec![0xc1]),
        untyped("a msgpack array", Mp::Arr(vec![Int(1), Int(2)]).encode()),
        untyped(
            "a map whose type is a number",
            Mp::Map(vec![("type", Int(7))]).encode(),
        ),
        untyped(
            "a map of an unknown type",
            Mp::Map(vec![("type", Str("kvcr_e2e_hello".into()))]).encode(),
        ),
        typed(
            "start_write whose op_handle is a string",
            "start_write",
            vec![("op_handle", Str("one".into()))],
        ),
        malformed(
            "start_write with a negative timeout",
            handle(1),
            vec![("remaining_timeout_ms", Int(-1))],
        ),
        malformed(
            "start_write whose allow_layout_subset is a string",
            handle(2),
            vec![
                ("remaining_timeout_ms", Int(1000)),
                ("allow_layout_subset", Str("yes".into())),
            ],
        ),
        malformed(
            "start_write for no blocks",
            handle(3),
            vec![
                ("remaining_timeout_ms", Int(1000)),
                ("keys", Mp::Arr(vec![])),
                ("dst_descriptors", Mp::Arr(vec![])),
            ],
        ),
        malformed(
            "start_write for a block without a destination",
            handle(4),
            vec![
                ("remaining_timeout_ms", Int(1000)),
                ("keys", Mp::Arr(vec![Bin(b"kvcr-e2e-block".to_vec())])),
                ("dst_descriptors", Mp::Arr(vec![])),
            ],
        ),
        typed(
            "write_refused for an operation nobody started",
            "write_refused",
            vec![
                ("sender_control_endpoint", Str("tcp://127.0.0.1:9".into())),
                ("op_handle", Int(handle(5))),
            ],
        ),
        typed(
            "target_metadata whose NIXL metadata does not decode",
            "target_metadata",
            vec![
                ("target_agent", Str("kvcr-e2e-foreign-peer".into())),
                ("target_agent_metadata", Bin(b"not NIXL metadata".to_vec())),
            ],
        ),
        typed("write_probe without fields", "write_probe", vec![]),
        typed("write_probe_ack without fields", "write_probe_ack", vec![]),
        typed("write_refused without fields", "write_refused", vec![]),
        typed(
            "target_metadata_ack without fields",
            "target_metadata_ack",
            vec![],
        ),
    ]
}

/// The messages of `messages` KVCR must refuse as malformed start_writes
/// that none of `lines` (the worker's log lines since they were sent)
/// refuses, naming the operation: `KVCR malformed start_write op=<handle>`,
/// the handle whole.
pub fn not_refused_as_malformed(
    messages: &[ForeignMessage],
    lines: &[String],
) -> Vec<&'static str> {
    let refused = |handle: i64| {
        let named = format!("{MALFORMED_START_WRITE_OP}{handle}");
        lines.iter().any(|line| {
            line.match_indices(&named)
                .any(|(at, _)| !line[at + named.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
    };
    messages
        .iter()
        .filter(|m| m.malformed_start_write.is_some_and(|h| !refused(h)))
        .map(|m| m.what)
        .collect()
}

/// A `target_metadata` message that names `agent`, a real peer's NIXL
/// agent, with metadata that is not NIXL's: as from a peer that took over
/// that name, or a stray client that spoofs it.
pub fn spoofed_metadata(agent: &str) -> ForeignMessage {
    ForeignMessage {
        what: "target_metadata naming a real peer's agent, with metadata that is not NIXL's",
        bytes: Mp::Map(vec![
            ("type", Mp::Str("target_metadata".into())),
            ("target_agent", Mp::Str(agent.into())),
            (
                "target_agent_metadata",
                Mp::Bin(b"spoofed metadata".to_vec()),
            ),
        ])
        .encode(),
        typed: Some("target_metadata"),
        malformed_start_write: None,
    }
}

/// Connects to `endpoint` (`tcp://host:port`) as a ZeroMQ PUSH peer and
/// sends `messages`, one single-frame message each. Errors say which step
/// failed; a peer that is no ZeroMQ PULL socket is one.
pub fn send(endpoint: &str, messages: &[ForeignMessage]) -> Result<(), String> {
    let address = endpoint
        .strip_prefix("tcp://")
        .ok_or_else(|| format!("{endpoint} is not a tcp:// endpoint"))?;
    let timeout = Some(Duration::from_secs(5));
    let mut stream =
        TcpStream::connect(address).map_err(|e| format!("connect to {endpoint}: {e}"))?;
    stream
        .set_read_timeout(timeout)
        .and_then(|()| stream.set_write_timeout(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(&greeting())
        .map_err(|e| format!("ZMTP greeting to {endpoint}: {e}"))?;
    let mut theirs = [0u8; 64];
    stream
        .read_exact(&mut theirs)
        .map_err(|e| format!("ZMTP greeting from {endpoint}: {e}"))?;
    check_greeting(&theirs).map_err(|e| format!("{endpoint}: {e}"))?;
    stream
        .write_all(&frame(COMMAND, &ready_body("PUSH")))
        .map_err(|e| format!("ZMTP READY to {endpoint}: {e}"))?;
    let ready = read_frame(&mut stream).map_err(|e| format!("ZMTP READY from {endpoint}: {e}"))?;
    check_ready(&ready, "PULL").map_err(|e| format!("{endpoint}: {e}"))?;
    for m in messages {
        stream
            .write_all(&frame(0, &m.bytes))
            .map_err(|e| format!("sending {} to {endpoint}: {e}", m.what))?;
    }
    stream.flush().map_err(|e| e.to_string())
}

const COMMAND: u8 = 0x04;
const LONG: u8 = 0x02;

/// ZMTP 3.0's greeting: signature, version 3.0, the NULL mechanism, client.
fn greeting() -> [u8; 64] {
    let mut g = [0u8; 64];
    g[0] = 0xff;
    g[9] = 0x7f;
    g[10] = 3;
    g[12..16].copy_from_slice(b"NULL");
    g
}

fn check_greeting(g: &[u8; 64]) -> Result<(), String> {
    if g[0] != 0xff || g[9] != 0x7f {
        return Err("the peer's greeting has no ZMTP signature".into());
    }
    if g[10] < 3 {
        return Err(format!("the peer speaks ZMTP {}, not 3", g[10]));
    }
    if &g[12..16] != b"NULL" {
        return Err("the peer asks for a security mechanism other than NULL".into());
    }
    Ok(())
}

/// A READY command's body: the command name, then the `Socket-Type` property.
fn ready_body(socket_type: &str) -> Vec<u8> {
    let mut body = vec![5];
    body.extend_from_slice(b"READY");
    body.push(11);
    body.extend_from_slice(b"Socket-Type");
    body.extend_from_slice(&(socket_type.len() as u32).to_be_bytes());
    body.extend_from_slice(socket_type.as_bytes());
    body
}

fn check_ready(body: &[u8], socket_type: &str) -> Result<(), String> {
    if !body.starts_with(b"\x05READY") {
        return Err("the peer's first command is not READY".into());
    }
    let mut property = vec![11];
    property.extend_from_slice(b"Socket-Type");
    property.extend_from_slice(&(socket_type.len() as u32).to_be_bytes());
    property.extend_from_slice(socket_type.as_bytes());
    if !body
        .windows(property.len())
        .any(|w| w == property.as_slice())
    {
        return Err(format!(
            "the peer is not a ZeroMQ {socket_type} socket (its READY: {:?})",
            String::from_utf8_lossy(body)
        ));
    }
    Ok(())
}

/// One frame: flags, then a one-byte or eight-byte size, then the body.
fn frame(flags: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 9);
    if body.len() <= 255 {
        out.extend_from_slice(&[flags, body.len() as u8]);
    } else {
        out.push(flags | LONG);
        out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    }
    out.extend_from_slice(body);
    out
}

fn read_frame(stream: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut flags = [0u8; 1];
    stream.read_exact(&mut flags)?;
    let size = if flags[0] & LONG != 0 {
        let mut size = [0u8; 8];
        stream.read_exact(&mut size)?;
        u64::from_be_bytes(size) as usize
    } else {
        let mut size = [0u8; 1];
        stream.read_exact(&mut size)?;
        size[0] as usize
    };
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body)?;
    Ok(body)
}

/// The msgpack values the foreign messages need.
#[derive(Debug, Clone, PartialEq)]
enum Mp {
    Str(String),
    Int(i64),
    Bin(Vec<u8>),
    Arr(Vec<Mp>),
    Map(Vec<(&'static str, Mp)>),
}

impl Mp {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Mp::Str(s) => {
                assert!(s.len() < 256, "a str 8 at most");
                if s.len() < 32 {
                    out.push(0xa0 | s.len() as u8);
                } else {
                    out.extend_from_slice(&[0xd9, s.len() as u8]);
                }
                out.extend_from_slice(s.as_bytes());
            }
            Mp::Int(n) if (0..128).contains(n) => out.push(*n as u8),
            Mp::Int(n) if (-32..0).contains(n) => out.push(*n as i8 as u8),
            Mp::Int(n) => {
                out.push(0xd3);
                out.extend_from_slice(&n.to_be_bytes());
            }
            Mp::Bin(b) => {
                assert!(b.len() < 256, "a bin 8 only");
                out.extend_from_slice(&[0xc4, b.len() as u8]);
                out.extend_from_slice(b);
            }
            Mp::Arr(items) => {
                assert!(items.len() < 16, "a fixarray only");
                out.push(0x90 | items.len() as u8);
                items.iter().for_each(|i| i.write(out));
            }
            Mp::Map(fields) => {
                assert!(fields.len() < 16, "a fixmap only");
                out.push(0x80 | fields.len() as u8);
                for (k, v) in fields {
                    Mp::Str(k.to_string()).write(out);
                    v.write(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn msgpack_is_encoded_as_the_spec_says() {
        let m = Mp::Map(vec![("type", Mp::Str("ab".into())), ("n", Mp::Int(-1))]).encode();
        assert_eq!(m, b"\x82\xa4type\xa2ab\xa1n\xff");
        assert_eq!(Mp::Int(1 << 40).encode()[0], 0xd3);
        assert_eq!(Mp::Int(1000).encode(), b"\xd3\0\0\0\0\0\0\x03\xe8");
        assert_eq!(Mp::Bin(vec![1, 2]).encode(), b"\xc4\x02\x01\x02");
        assert_eq!(Mp::Arr(vec![]).encode(), b"\x90");
        let long = Mp::Str("x".repeat(40)).encode();
        assert_eq!(&long[..2], &[0xd9, 40]);
        let spoof = spoofed_metadata("cpu-engine-B-1234").bytes;
        assert!(spoof.windows(17).any(|w| w == b"cpu-engine-B-1234"));
    }

    #[test]
    fn a_malformed_start_write_counts_refused_only_under_its_whole_handle() {
        let messages = foreign_messages();
        let handles: Vec<i64> = messages
            .iter()
            .filter_map(|m| m.malformed_start_write)
            .collect();
        assert_eq!(handles.len(), 4, "{handles:?}");
        let line = |h: i64| {
            format!("2026-12-07 11:34:48,652 A kvcr.core WARNING KVCR malformed start_write op={h}: invalid keys")
        };
        let all: Vec<String> = handles.iter().map(|&h| line(h)).collect();
        assert!(not_refused_as_malformed(&messages, &all).is_empty());
        // One handle missing; a line naming a longer number is not it.
        let mut some = all.clone();
        let last = some.pop().unwrap();
        some.push(line(handles[3] * 10));
        assert_eq!(
            not_refused_as_malformed(&messages, &some),
            vec!["start_write for a block without a destination"]
        );
        assert!(last.ends_with("invalid keys"));
        assert_eq!(not_refused_as_malformed(&messages, &[]).len(), 4);
    }

    #[test]
    fn every_kind_of_message_is_sent_once_and_the_typed_ones_name_kvcrs_types() {
        let messages = foreign_messages();
        let typed: Vec<_> = messages.iter().filter_map(|m| m.typed).collect();
        assert_eq!(typed.len(), 11);
        for t in [
            "start_write",
            "target_metadata",
            "write_probe",
            "write_probe_ack",
            "write_refused",
            "target_metadata_ack",
        ] {
            assert!(typed.contains(&t), "{t}");
        }
        assert_eq!(messages.len() - typed.len(), 4);
        assert_eq!(messages[0].bytes, vec![0xc1]);
    }

    #[test]
    fn frames_carry_short_and_long_sizes() {
        assert_eq!(frame(0, b"ab"), b"\0\x02ab");
        let long = frame(0, &[7; 300]);
        assert_eq!(&long[..9], &[LONG, 0, 0, 0, 0, 0, 0, 1, 44]);
        assert_eq!(read_frame(&mut &long[..]).unwrap().len(), 300);
        let ready = frame(COMMAND, &ready_body("PULL"));
        let body = read_frame(&mut &ready[..]).unwrap();
        assert_eq!(check_ready(&body, "PULL"), Ok(()));
        assert!(check_ready(&body, "PUSH")
            .unwrap_err()
            .contains("not a ZeroMQ PUSH"));
    }

    /// A fake PULL peer: the handshake, then every frame received.
    fn pull_peer(socket_type: &'static str) -> (String, std::thread::JoinHandle<Vec<Vec<u8>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("tcp://{}", listener.local_addr().unwrap());
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut g = [0u8; 64];
            s.read_exact(&mut g).unwrap();
            assert_eq!(check_greeting(&g), Ok(()));
            s.write_all(&greeting()).unwrap();
            let ready = read_frame(&mut s).unwrap();
            assert_eq!(check_ready(&ready, "PUSH"), Ok(()));
            s.write_all(&frame(COMMAND, &ready_body(socket_type)))
                .unwrap();
            let mut frames = Vec::new();
            while let Ok(f) = read_frame(&mut s) {
                frames.push(f);
            }
            frames
        });
        (endpoint, peer)
    }

    #[test]
    fn a_pull_peer_receives_every_message() {
        let (endpoint, peer) = pull_peer("PULL");
        let messages = foreign_messages();
        send(&endpoint, &messages).unwrap();
        let frames = peer.join().unwrap();
        let sent: Vec<_> = messages.into_iter().map(|m| m.bytes).collect();
        assert_eq!(frames, sent);
    }

    #[test]
    fn a_peer_that_is_no_pull_socket_is_refused() {
        let (endpoint, peer) = pull_peer("PUB");
        let e = send(&endpoint, &foreign_messages()).unwrap_err();
        assert!(e.contains("not a ZeroMQ PULL socket"), "{e}");
        assert!(peer.join().unwrap().is_empty());
    }

    #[test]
    fn an_endpoint_that_is_not_tcp_is_refused() {
        let e = send("ipc:///tmp/x", &[]).unwrap_err();
        assert!(e.contains("not a tcp:// endpoint"), "{e}");
    }
}
