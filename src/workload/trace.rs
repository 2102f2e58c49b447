//! The Mooncake trace format: JSONL, one request per line.
//!
//! ```text
//! {"timestamp":0,"input_length":40,"output_length":16,"hash_ids":[0,1,2]}
//! {"timestamp":250,"input_length":52,"output_length":16,"hash_ids":[0,1,3,4]}
//! ```
//!
//! `timestamp` is the arrival time in milliseconds (non-decreasing down the
//! file), `input_length` and `output_length` are token counts, and `hash_ids`
//! names the prompt's blocks of `block_size` tokens in order. An id names a
//! block *together with everything before it*, so equal ids are a shared
//! prefix: every occurrence of an id follows the same id (or starts the
//! prompt). The last block may be cut short: a request's `input_length` is
//! more than `(len(hash_ids) - 1) × block_size` and at most
//! `len(hash_ids) × block_size`. The block size is not in the file; Mooncake's
//! own traces use 512.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The fields of a request line, in the order they are written.
pub const FIELDS: [&str; 4] = ["timestamp", "input_length", "output_length", "hash_ids"];

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceRequest {
    /// Arrival time, milliseconds.
    pub timestamp: u64,
    /// Prompt tokens.
    pub input_length: u64,
    /// Tokens to generate (`max_tokens`).
    pub output_length: u64,
    /// The prompt's blocks, in order.
    pub hash_ids: Vec<u64>,
}

impl TraceRequest {
    /// Ids of the blocks that are whole (`block_size` tokens): every id but
    /// a last one cut short. Only whole blocks can be cached.
    pub fn full_blocks(&self, block_size: u32) -> &[u64] {
        let whole = (self.input_length / u64::from(block_size)) as usize;
        &self.hash_ids[..whole.min(self.hash_ids.len())]
    }
}

/// A checked trace: requests in arrival order, and the block size its
/// `hash_ids` count in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    block_size: u32,
    requests: Vec<TraceRequest>,
}

/// Why a trace was refused.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot read the trace {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{origin} line {line}: {problem}")]
    Line {
        origin: String,
        line: usize,
        problem: LineProblem,
    },
    #[error("{origin}: no requests (every line is blank)")]
    Empty { origin: String },
    #[error("the block size must be at least 1 token")]
    ZeroBlockSize,
}

/// What is wrong with one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    #[error("not a JSON object ({0})")]
    NotJson(String),
    #[error(
        "missing field `{0}` (a request has timestamp, input_length, output_length and hash_ids)"
    )]
    Missing(&'static str),
    #[error("unknown field `{0}` (a request has only timestamp, input_length, output_length and hash_ids; AIPerf's session_id, delay and text_input are not read here)")]
    Unknown(String),
    #[error("`{field}` is {got}: it must be a non-negative integer")]
    NotCount { field: String, got: String },
    #[error("`hash_ids` is {0}: it must be a list of non-negative integers")]
    NotList(String),
    #[error("`{field}` is 0: a request has at least one {what}")]
    Zero {
        field: &'static str,
        what: &'static str,
    },
    #[error("timestamp {got} ms is before line {previous_line}'s {previous} ms: timestamps must not decrease")]
    Backwards {
        got: u64,
        previous: u64,
        previous_line: usize,
    },
    #[error("input_length {input_length} does not fit {blocks} hash ids of {block_size} tokens: it must be more than {} and at most {}{}",
        blocks.saturating_sub(1) * u64::from(*block_size), blocks * u64::from(*block_size), fitting_sizes(*input_length, *blocks, *block_size))]
    Length {
        input_length: u64,
        blocks: u64,
        block_size: u32,
    },
    #[error("hash id {id} follows {} here but {} on line {earlier_line}: an id names a block with everything before it, so it always follows the same id",
        describe_parent(*parent), describe_parent(*earlier_parent))]
    Parent {
        id: u64,
        parent: Option<u64>,
        earlier_parent: Option<u64>,
        earlier_line: usize,
    },
}

fn describe_parent(parent: Option<u64>) -> String {
    match parent {
        Some(p) => format!("id {p}"),
        None => "the prompt's start".into(),
    }
}

/// The block sizes that would fit a line, as a hint that the trace was
/// read with the wrong one.
fn fitting_sizes(input_length: u64, blocks: u64, block_size: u32) -> String {
    if blocks == 0 || input_length == 0 {
        return String::new();
    }
    let low = input_length.div_ceil(blocks);
    let high = if blocks == 1 {
        u64::MAX
    } else {
        (input_length - 1) / (blocks - 1)
    };
    if low > high {
        return String::new();
    }
    if (low..=high).contains(&512) && block_size != 512 {
        return "; a block size of 512 (Mooncake's) fits: is this a trace of 512-token blocks?"
            .into();
    }
    if high == u64::MAX {
        format!("; block sizes of {low} or more fit this line: is the block size right?")
    } else if low == high {
        format!("; a block size of {low} fits this line: is the block size right?")
    } else {
        format!("; block sizes {low} to {high} fit this line: is the block size right?")
    }
}

impl Trace {
    /// A trace from checked parts; the generator's and the tests' way in.
    /// Runs the same checks as [`Trace::parse`]; a request's line is its
    /// number from 1.
    pub fn new(block_size: u32, requests: Vec<TraceRequest>) -> Result<Self, TraceError> {
        if block_size == 0 {
            return Err(TraceError::ZeroBlockSize);
        }
        let mut checker = Checker::new(block_size);
        for (i, r) in requests.iter().enumerate() {
            checker
                .check(r, i + 1)
                .map_err(|problem| TraceError::Line {
                    origin: "the trace".into(),
                    line: i + 1,
                    problem,
                })?;
        }
        if requests.is_empty() {
            return Err(TraceError::Empty {
                origin: "the trace".into(),
            });
        }
        Ok(Trace {
            block_size,
            requests,
        })
    }

    /// Reads and checks a trace file of `block_size`-token blocks.
    pub fn read(path: &Path, block_size: u32) -> Result<Self, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, block_size, &path.display().to_string())
    }

    /// Parses and checks JSONL text; `origin` names it in errors. Blank
    /// lines are skipped; line numbers count every line from 1.
    pub fn parse(text: &str, block_size: u32, origin: &str) -> Result<Self, TraceError> {
        if block_size == 0 {
            return Err(TraceError::ZeroBlockSize);
        }
        let mut checker = Checker::new(block_size);
        let mut requests = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line = i + 1;
            let request = parse_line(raw)
                .and_then(|r| checker.check(&r, line).map(|()| r))
                .map_err(|problem| TraceError::Line {
                    origin: origin.to_string(),
                    line,
                    problem,
                })?;
            requests.push(request);
        }
        if requests.is_empty() {
            return Err(TraceError::Empty {
                origin: origin.to_string(),
            });
        }
        Ok(Trace {
            block_size,
            requests,
        })
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    pub fn requests(&self) -> &[TraceRequest] {
        &self.requests
    }

    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The trace as JSONL: one compact object per line, fields in the
    /// format's order, a newline after each.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for r in &self.requests {
            out.push_str(&serde_json::to_string(r).expect("a request serializes"));
            out.push('\n');
        }
        out
    }

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.to_jsonl())
    }

    /// A digest of the trace's requests and block size (a cache key for
    /// anything derived from the trace, such as reference tokens).
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.block_size.to_le_bytes());
        h.update(self.to_jsonl().as_bytes());
        hex::encode(h.finalize())
    }

    /// When to send each request, from the first request's arrival, with
    /// the trace's gaps divided by `rate_factor` (2.0: twice as fast).
    pub fn schedule(
        &self,
        rate_factor: f64,
    ) -> impl Iterator<Item = (Duration, &TraceRequest)> + '_ {
        assert!(
            rate_factor.is_finite() && rate_factor > 0.0,
            "a rate factor is a positive number, not {rate_factor}"
        );
        let first = self.requests.first().map_or(0, |r| r.timestamp);
        self.requests.iter().map(move |r| {
            let ms = (r.timestamp - first) as f64 / rate_factor;
            (Duration::from_secs_f64(ms / 1000.0), r)
        })
    }
}

/// The checks that span lines: timestamps, lengths, and each id's parent.
struct Checker {
    block_size: u32,
    previous: Option<(u64, usize)>,
    /// Each id's parent and the line it was first seen on.
    parents: HashMap<u64, (Option<u64>, usize)>,
}

impl Checker {
    fn new(block_size: u32) -> Self {
        Checker {
            block_size,
            previous: None,
            parents: HashMap::new(),
        }
    }

    fn check(&mut self, r: &TraceRequest, line: usize) -> Result<(), LineProblem> {
        if let Some((previous, previous_line)) = self.previous {
            if r.timestamp < previous {
                return Err(LineProblem::Backwards {
                    got: r.timestamp,
                    previous,
                    previous_line,
                });
            }
        }
        if r.input_length == 0 {
            return Err(LineProblem::Zero {
                field: "input_length",
                what: "prompt token",
            });
        }
        if r.output_length == 0 {
            return Err(LineProblem::Zero {
                field: "output_length",
                what: "generated token",
            });
        }
        let blocks = r.hash_ids.len() as u64;
        let size = u64::from(self.block_size);
        let fits = blocks > 0
            && r.input_length <= blocks.saturating_mul(size)
            && r.input_length > (blocks - 1).saturating_mul(size);
        if !fits {
            return Err(LineProblem::Length {
                input_length: r.input_length,
                blocks,
                block_size: self.block_size,
            });
        }
        // Check every parent before recording any, so a refused line leaves
        // nothing behind.
        let mut new: HashMap<u64, Option<u64>> = HashMap::new();
        let mut parent = None;
        for &id in &r.hash_ids {
            let earlier = self
                .parents
                .get(&id)
                .copied()
                .or_else(|| new.get(&id).map(|&p| (p, line)));
            match earlier {
                Some((earlier_parent, earlier_line)) if earlier_parent != parent => {
                    return Err(LineProblem::Parent {
                        id,
                        parent,
                        earlier_parent,
                        earlier_line,
                    });
                }
                Some(_) => {}
                None => {
                    new.insert(id, parent);
                }
            }
            parent = Some(id);
        }
        self.parents
            .extend(new.into_iter().map(|(id, p)| (id, (p, line))));
        self.previous = Some((r.timestamp, line));
        Ok(())
    }
}

/// One line's fields, each checked for its type.
fn parse_line(raw: &str) -> Result<TraceRequest, LineProblem> {
    let value: serde_json::Value =
        serde_json::from_str(raw).map_err(|e| LineProblem::NotJson(e.to_string()))?;
    let serde_json::Value::Object(map) = value else {
        return Err(LineProblem::NotJson(format!("found {}", kind_of(&value))));
    };
    if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(LineProblem::Unknown(unknown.clone()));
    }
    let field = |name: &'static str| map.get(name).ok_or(LineProblem::Missing(name));
    let count = |name: &'static str| {
        let value = field(name)?;
        as_count(value).ok_or_else(|| LineProblem::NotCount {
            field: name.to_string(),
            got: shown(value),
        })
    };
    let timestamp = count("timestamp")?;
    let input_length = count("input_length")?;
    let output_length = count("output_length")?;
    let ids = field("hash_ids")?;
    let serde_json::Value::Array(items) = ids else {
        return Err(LineProblem::NotList(shown(ids)));
    };
    let hash_ids = items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            as_count(v).ok_or_else(|| LineProblem::NotCount {
                field: format!("hash_ids[{i}]"),
                got: shown(v),
            })
        })
        .collect::<Result<Vec<u64>, _>>()?;
    Ok(TraceRequest {
        timestamp,
        input_length,
        output_length,
        hash_ids,
    })
}

/// A JSON integer ≥ 0 (not a float, even a whole one: traces write integers).
fn as_count(value: &serde_json::Value) -> Option<u64> {
    match value {
        serde_json::Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// A value as it reads in an error: short, with its kind when not a number.
fn shown(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let text = if text.chars().count() > 40 {
        format!("{}…", text.chars().take(40).collect::<String>())
    } else {
        text
    };
    match value {
        serde_json::Value::Number(_) => text,
        other => format!("{text} (a {})", kind_of(other)),
    }
}

fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "list",
        serde_json::Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(problem_text: &str) -> (usize, LineProblem) {
        match Trace::parse(problem_text, 16, "t.jsonl") {
            Err(TraceError::Line { line, problem, .. }) => (line, problem),
            other => panic!("expected a line error, got {other:?}"),
        }
    }

    const GOOD: &str = r#"{"timestamp": 0, "input_length": 40, "output_length": 8, "hash_ids": [0, 1, 2]}
{"timestamp": 0, "input_length": 48, "output_length": 8, "hash_ids": [0, 1, 3]}

{"timestamp": 250, "input_length": 17, "output_length": 4, "hash_ids": [0, 4]}
"#;

    #[test]
    fn reads_a_good_trace_and_writes_it_back() {
        let t = Trace::parse(GOOD, 16, "t.jsonl").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.block_size(), 16);
        assert_eq!(
            t.requests()[2],
            TraceRequest {
                timestamp: 250,
                input_length: 17,
                output_length: 4,
                hash_ids: vec![0, 4]
            }
        );
        let text = t.to_jsonl();
        assert!(text.starts_with(
            "{\"timestamp\":0,\"input_length\":40,\"output_length\":8,\"hash_ids\":[0,1,2]}\n"
        ));
        assert_eq!(Trace::parse(&text, 16, "again").unwrap(), t);
        assert_eq!(Trace::new(16, t.requests().to_vec()).unwrap(), t);
    }

    #[test]
    fn a_file_reads_and_a_missing_file_names_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.jsonl");
        std::fs::write(&path, GOOD).unwrap();
        assert_eq!(Trace::read(&path, 16).unwrap().len(), 3);
        let err = Trace::read(&dir.path().join("none.jsonl"), 16).unwrap_err();
        assert!(err.to_string().contains("none.jsonl"), "{err}");
    }

    #[test]
    fn full_blocks_leave_out_a_last_block_cut_short() {
        let t = Trace::parse(GOOD, 16, "t").unwrap();
        assert_eq!(t.requests()[0].full_blocks(16), &[0, 1]);
        assert_eq!(t.requests()[1].full_blocks(16), &[0, 1, 3]);
        assert_eq!(t.requests()[2].full_blocks(16), &[0]);
    }

    #[test]
    fn a_missing_field_is_named_with_its_line() {
        let text = "{\"timestamp\":0,\"input_length\":16,\"output_length\":1,\"hash_ids\":[0]}\n\
                    {\"timestamp\":1,\"input_length\":16,\"hash_ids\":[0]}";
        let (n, p) = line(text);
        assert_eq!((n, p.clone()), (2, LineProblem::Missing("output_length")));
        let err = Trace::parse(text, 16, "t.jsonl").unwrap_err().to_string();
        assert!(
            err.starts_with("t.jsonl line 2: missing field `output_length`"),
            "{err}"
        );
    }

    #[test]
    fn numbers_must_be_non_negative_integers() {
        let (_, p) = line(r#"{"timestamp":-5,"input_length":16,"output_length":1,"hash_ids":[0]}"#);
        assert!(
            p.to_string()
                .starts_with("`timestamp` is -5: it must be a non-negative integer"),
            "{p}"
        );
        let (_, p) =
            line(r#"{"timestamp":0,"input_length":16.5,"output_length":1,"hash_ids":[0]}"#);
        assert!(
            matches!(p, LineProblem::NotCount { ref field, .. } if field == "input_length"),
            "{p}"
        );
        let (_, p) =
            line(r#"{"timestamp":0,"input_length":16,"output_length":"3","hash_ids":[0]}"#);
        assert!(p.to_string().contains("\"3\" (a string)"), "{p}");
        let (_, p) =
            line(r#"{"timestamp":0,"input_length":16,"output_length":1,"hash_ids":[0,-1]}"#);
        assert!(p.to_string().starts_with("`hash_ids[1]` is -1"), "{p}");
        let (_, p) = line(r#"{"timestamp":0,"input_length":16,"output_length":1,"hash_ids":"0"}"#);
        assert!(matches!(p, LineProblem::NotList(_)), "{p}");
        let (_, p) = line(r#"{"timestamp":0,"input_length":16,"output_length":0,"hash_ids":[0]}"#);
        assert!(
            matches!(
                p,
                LineProblem::Zero {
                    field: "output_length",
                    ..
                }
            ),
            "{p}"
        );
    }

    #[test]
    fn not_an_object_and_unknown_fields_are_refused() {
        let (n, p) = line(
            "{\"timestamp\":0,\"input_length\":16,\"output_length\":1,\"hash_ids\":[0]}\n[1,2]",
        );
        assert_eq!(n, 2);
        assert!(p.to_string().contains("found list"), "{p}");
        let (_, p) = line("{\"timestamp\":0,");
        assert!(matches!(p, LineProblem::NotJson(_)), "{p}");
        let (_, p) = line(
            r#"{"timestamp":0,"input_length":16,"output_length":1,"hash_ids":[0],"session_id":"a"}"#,
        );
        assert_eq!(p, LineProblem::Unknown("session_id".into()));
    }

    #[test]
    fn timestamps_going_backwards_name_both_lines() {
        let text = "{\"timestamp\":10,\"input_length\":16,\"output_length\":1,\"hash_ids\":[0]}\n\
                    {\"timestamp\":10,\"input_length\":16,\"output_length\":1,\"hash_ids\":[0]}\n\
                    {\"timestamp\":9,\"input_length\":16,\"output_length\":1,\"hash_ids\":[0]}";
        let (n, p) = line(text);
        assert_eq!(n, 3);
        assert_eq!(
            p.to_string(),
            "timestamp 9 ms is before line 2's 10 ms: timestamps must not decrease"
        );
    }

    #[test]
    fn input_length_must_fit_the_blocks() {
        let at = |input: u64, ids: &str| {
            format!(
                r#"{{"timestamp":0,"input_length":{input},"output_length":1,"hash_ids":{ids}}}"#
            )
        };
        // 3 blocks of 16: 33..=48 tokens.
        assert!(Trace::parse(&at(33, "[0,1,2]"), 16, "t").is_ok());
        assert!(Trace::parse(&at(48, "[0,1,2]"), 16, "t").is_ok());
        let (_, p) = line(&at(32, "[0,1,2]"));
        assert!(p.to_string().starts_with("input_length 32 does not fit 3 hash ids of 16 tokens: it must be more than 32 and at most 48"), "{p}");
        let (_, p) = line(&at(49, "[0,1,2]"));
        assert!(matches!(
            p,
            LineProblem::Length {
                input_length: 49,
                ..
            }
        ));
        let (_, p) = line(&at(5, "[]"));
        assert!(p.to_string().contains("at most 0"), "{p}");
        let (_, p) = line(&at(0, "[]"));
        assert!(matches!(
            p,
            LineProblem::Zero {
                field: "input_length",
                ..
            }
        ));
        // Read with the wrong block size, a Mooncake line says so.
        let (_, p) = line(&at(6755, "[0,1,2,3,4,5,6,7,8,9,10,11,12,13]"));
        assert!(p.to_string().contains("512 (Mooncake's) fits"), "{p}");
        let (_, p) = line(&at(200, "[0,1,2]"));
        assert!(p.to_string().contains("block sizes 67 to 99 fit"), "{p}");
    }

    #[test]
    fn an_id_always_follows_the_same_parent() {
        let text = "{\"timestamp\":0,\"input_length\":32,\"output_length\":1,\"hash_ids\":[5,7]}\n\
                    {\"timestamp\":1,\"input_length\":32,\"output_length\":1,\"hash_ids\":[6,7]}";
        let (n, p) = line(text);
        assert_eq!(n, 2);
        assert_eq!(
            p.to_string(),
            "hash id 7 follows id 6 here but id 5 on line 1: an id names a block with everything before it, so it always follows the same id"
        );
        // Also within one line, and at the prompt's start.
        let (_, p) =
            line(r#"{"timestamp":0,"input_length":32,"output_length":1,"hash_ids":[3,3]}"#);
        assert!(
            p.to_string()
                .contains("follows id 3 here but the prompt's start"),
            "{p}"
        );
    }

    #[test]
    fn an_empty_trace_and_a_zero_block_size_are_refused() {
        assert!(matches!(
            Trace::parse("\n \n", 16, "t"),
            Err(TraceError::Empty { .. })
        ));
        assert!(matches!(
            Trace::parse(GOOD, 0, "t"),
            Err(TraceError::ZeroBlockSize)
        ));
    }

    #[test]
    fn the_schedule_scales_gaps_from_the_first_arrival() {
        let t = Trace::parse(
            &GOOD
                .replace("\"timestamp\": 0,", "\"timestamp\": 100,")
                .replace("250", "350"),
            16,
            "t",
        )
        .unwrap();
        let at: Vec<Duration> = t.schedule(2.0).map(|(d, _)| d).collect();
        assert_eq!(
            at,
            [Duration::ZERO, Duration::ZERO, Duration::from_millis(125)]
        );
        assert_eq!(
            t.schedule(1.0).last().unwrap().0,
            Duration::from_millis(250)
        );
    }

    #[test]
    fn the_digest_follows_requests_and_block_size() {
        let t = Trace::parse(GOOD, 16, "t").unwrap();
        let mut other = t.requests().to_vec();
        other[2].output_length = 5;
        assert_eq!(t.digest(), Trace::parse(GOOD, 16, "u").unwrap().digest());
        assert_ne!(t.digest(), Trace::new(16, other).unwrap().digest());
        let wider = Trace {
            block_size: 17,
            requests: t.requests().to_vec(),
        };
        assert_ne!(t.digest(), wider.digest());
    }
}
