//! The KVCR Guard service's log (and `KVCR_EVENT` lines of KVCR core in
//! worker logs) as typed events. The Guard emits no metrics; this is its
//! evidence.
//!
//! Lines carry any logger prefix (`INFO:kvcr.guard:`, `2025-.. kvcr.guard
//! INFO ...`); markers are found anywhere in the line. Unknown lines are
//! ignored; a known line with a missing or malformed field becomes a
//! [`ParseProblem`], never a panic.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::fields::{kv_fields, parse_python_tuple};
use super::names::kvcr_log as n;
use super::problem::ParseProblem;
use super::tail::{LogTail, TailError};

/// `KVCR service ready: socket=... guards=N pool_sizes_bytes=(...) journal_bytes=N`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceReady {
    /// The service's Unix socket.
    pub socket: String,
    /// Number of Guard groups.
    pub guards: u32,
    /// Pool sizes in bytes, one per pool layout.
    pub pool_sizes_bytes: Vec<u64>,
    /// Recovery journal size, when logged.
    pub journal_bytes: Option<u64>,
}

/// `KVCR_EVENT guard_promoted ...`: the Guard serves a dead primary's pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Promotion {
    /// Guard group index.
    pub guard: u32,
    /// Pool id (`pool_0`).
    pub pool: String,
    /// Blocks recovered from the journal.
    pub recovered_blocks: u64,
    /// NIXL agent name the Guard serves as (`None` when logged as `None`).
    pub agent: Option<String>,
    /// Control endpoint `host:port` (`unbound` when none).
    pub control: String,
    /// Draining/recovery time.
    pub recovery_ms: f64,
    /// Setup time.
    pub setup_ms: f64,
    /// Core start time.
    pub start_ms: f64,
    /// Total promotion time as the Guard measured it.
    pub promotion_ms: f64,
}

/// `KVCR_EVENT guard_promotion_stage stage=... guard=N pool=... ...` (DEBUG).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromotionStage {
    /// Stage name (`death_observed`, `records_recovered`, `records_adopted`,
    /// `serving`, `handback_start`, `core_closed`, `handback_done`, ...).
    pub stage: String,
    /// Guard group index.
    pub guard: u32,
    /// Pool id.
    pub pool: Option<String>,
    /// The Guard's `time.monotonic_ns()` at the stage, when logged.
    pub monotonic_ns: Option<u64>,
}

/// `KVCR_EVENT primary_attached guard=N pool=... control=host:port` (DEBUG).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrimaryAttached {
    /// Guard group index.
    pub guard: u32,
    /// Pool id.
    pub pool: String,
    /// Control endpoint `host:port`.
    pub control: String,
}

/// `KVCR_EVENT source_transfer_requested|completed op=.. source_op=.. target=.. blocks=N bytes=N [result=..]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceTransfer {
    /// Operation handle.
    pub op: u64,
    /// Source operation id.
    pub source_op: u64,
    /// Target agent.
    pub target: String,
    /// Blocks.
    pub blocks: u64,
    /// Bytes.
    pub bytes: u64,
    /// Result (`success`/`failed`), on completion only.
    pub result: Option<String>,
}

/// A Guard or KVCR event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum GuardEvent {
    /// The service is ready.
    ServiceReady(ServiceReady),
    /// A Guard promoted.
    Promoted(Promotion),
    /// A promotion or handback stage.
    PromotionStage(PromotionStage),
    /// A primary claimed its Guard group.
    PrimaryAttached(PrimaryAttached),
    /// A source transfer was requested.
    SourceTransferRequested(SourceTransfer),
    /// A source transfer completed.
    SourceTransferCompleted(SourceTransfer),
    /// `KVCR Guard N promoted after heartbeat timeout` (warning).
    PromotedAfterHeartbeatTimeout {
        /// Guard group index.
        guard: u32,
    },
    /// `KVCR Guard N failed` (critical): fail the case.
    GuardFailed {
        /// Guard group index.
        guard: u32,
    },
    /// `KVCR pool recovery disabled; ...` (warning): fail the case.
    PoolRecoveryDisabled {
        /// The reason logged after the colon.
        detail: String,
    },
    /// Any other `KVCR_EVENT name k=v ...` line, fields kept verbatim.
    Other {
        /// Event name.
        name: String,
        /// Its fields.
        fields: BTreeMap<String, String>,
    },
}

impl GuardEvent {
    /// Whether this event means the Guard is not protecting a pool (a case fails on it).
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            GuardEvent::GuardFailed { .. } | GuardEvent::PoolRecoveryDisabled { .. }
        )
    }
}

/// One event and where it was logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardLogEntry {
    /// Byte offset of the line in its log.
    pub offset: u64,
    /// Log level when the prefix shows one (`INFO`, `DEBUG`, `WARNING`, ...).
    pub level: Option<String>,
    /// The event.
    pub event: GuardEvent,
}

const LEVELS: &[&str] = &["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];

fn level_of(line: &str, marker_at: usize) -> Option<String> {
    let prefix = &line[..marker_at];
    prefix
        .split(|c: char| c == ':' || c.is_whitespace() || c == '[' || c == ']')
        .find(|t| LEVELS.contains(t))
        .map(str::to_string)
}

struct Fields<'a> {
    event: &'a str,
    map: BTreeMap<&'a str, &'a str>,
}

impl<'a> Fields<'a> {
    fn new(event: &'a str, text: &'a str) -> Self {
        Fields {
            event,
            map: kv_fields(text)
                .into_iter()
                .filter(|(k, _)| !k.is_empty())
                .collect(),
        }
    }
    fn str(&self, k: &str) -> Result<String, String> {
        self.map
            .get(k)
            .map(|v| v.to_string())
            .ok_or_else(|| format!("{} line without `{k}=`", self.event))
    }
    fn opt(&self, k: &str) -> Option<String> {
        self.map.get(k).map(|v| v.to_string())
    }
    fn num<T: std::str::FromStr>(&self, k: &str) -> Result<T, String> {
        let v = self.str(k)?;
        v.parse::<T>()
            .map_err(|_| format!("{} field `{k}={v}` is not a number", self.event))
    }
    fn opt_num<T: std::str::FromStr>(&self, k: &str) -> Result<Option<T>, String> {
        match self.map.get(k) {
            None => Ok(None),
            Some(_) => self.num(k).map(Some),
        }
    }
}

fn parse_event(name: &str, rest: &str) -> Result<GuardEvent, String> {
    let f = Fields::new(name, rest);
    Ok(match name {
        n::EV_GUARD_PROMOTED => GuardEvent::Promoted(Promotion {
            guard: f.num("guard")?,
            pool: f.str("pool")?,
            recovered_blocks: f.num("recovered_blocks")?,
            agent: f.opt("agent").filter(|a| a != "None"),
            control: f.str("control")?,
            recovery_ms: f.num("recovery_ms")?,
            setup_ms: f.num("setup_ms")?,
            start_ms: f.num("start_ms")?,
            promotion_ms: f.num("promotion_ms")?,
        }),
        n::EV_PROMOTION_STAGE => GuardEvent::PromotionStage(PromotionStage {
            stage: f.str("stage")?,
            guard: f.num("guard")?,
            pool: f.opt("pool"),
            monotonic_ns: f.opt_num("monotonic_ns")?,
        }),
        n::EV_PRIMARY_ATTACHED => GuardEvent::PrimaryAttached(PrimaryAttached {
            guard: f.num("guard")?,
            pool: f.str("pool")?,
            control: f.str("control")?,
        }),
        n::EV_SOURCE_TRANSFER_REQUESTED | n::EV_SOURCE_TRANSFER_COMPLETED => {
            let t = SourceTransfer {
                op: f.num("op")?,
                source_op: f.num("source_op")?,
                target: f.str("target")?,
                blocks: f.num("blocks")?,
                bytes: f.num("bytes")?,
                result: f.opt("result"),
            };
            if name == n::EV_SOURCE_TRANSFER_REQUESTED {
                GuardEvent::SourceTransferRequested(t)
            } else {
                GuardEvent::SourceTransferCompleted(t)
            }
        }
        other => GuardEvent::Other {
            name: other.to_string(),
            fields: f
                .map
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        },
    })
}

fn parse_ready(rest: &str) -> Result<GuardEvent, String> {
    let f = Fields::new("service ready", rest);
    let sizes = f.str("pool_sizes_bytes")?;
    let pool_sizes_bytes = parse_python_tuple(&sizes)
        .ok_or_else(|| format!("pool_sizes_bytes={sizes} is not a tuple or list"))?
        .iter()
        .map(|s| s.parse::<u64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("pool_sizes_bytes={sizes} holds a non-integer"))?;
    Ok(GuardEvent::ServiceReady(ServiceReady {
        socket: f.str("socket")?,
        guards: f.num("guards")?,
        pool_sizes_bytes,
        journal_bytes: f.opt_num("journal_bytes")?,
    }))
}

/// `KVCR Guard N <suffix>`: the guard index, when the line has that shape.
fn guard_with_suffix(line: &str, suffix: &str) -> Option<Result<u32, String>> {
    let start = line.find(n::GUARD_PREFIX)? + n::GUARD_PREFIX.len();
    let rest = &line[start..];
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let tail = rest[digits_end..].trim_end();
    if tail != suffix.trim_end() {
        return None;
    }
    Some(
        rest[..digits_end]
            .parse::<u32>()
            .map_err(|_| format!("guard index {:?} is not a number", &rest[..digits_end])),
    )
}

/// Parses one line: `None` for lines that are not Guard/KVCR events,
/// `Some(Err(reason))` for known lines that are malformed.
pub fn parse_line(line: &str) -> Option<Result<(Option<String>, GuardEvent), String>> {
    let line = line.trim_end();
    if let Some(at) = line.find(n::EVENT_MARKER) {
        let after = &line[at + n::EVENT_MARKER.len()..];
        if after.trim().is_empty() {
            return Some(Err("KVCR_EVENT without an event name".into()));
        }
        // `KVCR_EVENT` must be followed by whitespace and a name.
        if !after.starts_with(char::is_whitespace) {
            return None;
        }
        let after = after.trim_start();
        let (name, rest) = after.split_once(char::is_whitespace).unwrap_or((after, ""));
        return Some(parse_event(name, rest).map(|e| (level_of(line, at), e)));
    }
    if let Some(at) = line.find(n::SERVICE_READY) {
        let rest = &line[at + n::SERVICE_READY.len()..];
        return Some(parse_ready(rest).map(|e| (level_of(line, at), e)));
    }
    if let Some(at) = line.find(n::POOL_RECOVERY_DISABLED) {
        let rest = &line[at + n::POOL_RECOVERY_DISABLED.len()..];
        let detail = rest
            .split_once(':')
            .map(|(_, d)| d.trim())
            .unwrap_or(rest.trim_start_matches(';').trim())
            .to_string();
        return Some(Ok((
            level_of(line, at),
            GuardEvent::PoolRecoveryDisabled { detail },
        )));
    }
    if let Some(at) = line.find(n::GUARD_PREFIX) {
        let level = level_of(line, at);
        if let Some(r) = guard_with_suffix(line, n::GUARD_FAILED_SUFFIX) {
            return Some(r.map(|guard| (level, GuardEvent::GuardFailed { guard })));
        }
        if let Some(r) = guard_with_suffix(line, n::HEARTBEAT_PROMOTED_SUFFIX) {
            return Some(
                r.map(|guard| (level, GuardEvent::PromotedAfterHeartbeatTimeout { guard })),
            );
        }
    }
    None
}

/// A deadline passed before an awaited Guard event was logged.
#[derive(Debug, thiserror::Error)]
pub enum GuardWaitError {
    /// The event never came.
    #[error("waited {waited:?} for {what} in Guard log {path} (from byte {from_offset}); {seen} events seen since, last: {last}")]
    Deadline {
        /// What was awaited, in words.
        what: String,
        /// The log.
        path: PathBuf,
        /// Where reading started.
        from_offset: u64,
        /// Events seen.
        seen: usize,
        /// The last event seen, rendered.
        last: String,
        /// How long it waited.
        waited: Duration,
    },
    /// The log could not be read.
    #[error(transparent)]
    Tail(#[from] TailError),
}

/// Tails a Guard (or worker) log from an offset and collects its events.
#[derive(Debug, Clone)]
pub struct GuardLogReader {
    tail: LogTail,
    from_offset: u64,
    events: Vec<GuardLogEntry>,
    problems: Vec<ParseProblem>,
}

impl GuardLogReader {
    /// Reads events logged at or after byte `offset` of `path`.
    pub fn from_offset(path: impl Into<PathBuf>, offset: u64) -> Self {
        GuardLogReader {
            tail: LogTail::from_offset(path, offset),
            from_offset: offset,
            events: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Reads events logged from now on.
    pub fn from_end(path: impl Into<PathBuf>) -> Result<Self, TailError> {
        let tail = LogTail::from_end(path)?;
        let from_offset = tail.offset();
        Ok(GuardLogReader {
            tail,
            from_offset,
            events: Vec::new(),
            problems: Vec::new(),
        })
    }

    /// Reads what was appended; returns the number of new events.
    pub fn poll(&mut self) -> Result<usize, TailError> {
        let before = self.events.len();
        for l in self.tail.read_lines()? {
            match parse_line(&l.text) {
                None => {}
                Some(Ok((level, event))) => self.events.push(GuardLogEntry {
                    offset: l.offset,
                    level,
                    event,
                }),
                Some(Err(reason)) => self.problems.push(ParseProblem::new(
                    format!("{} byte {}", self.tail.path().display(), l.offset),
                    reason,
                    &l.text,
                )),
            }
        }
        Ok(self.events.len() - before)
    }

    /// Every event since the start offset.
    pub fn events(&self) -> &[GuardLogEntry] {
        &self.events
    }

    /// Known lines that could not be read.
    pub fn problems(&self) -> &[ParseProblem] {
        &self.problems
    }

    /// Byte offset read up to.
    pub fn offset(&self) -> u64 {
        self.tail.offset()
    }

    /// The first promotion of Guard group `guard`.
    pub fn promotion(&self, guard: u32) -> Option<&Promotion> {
        self.events.iter().find_map(|e| match &e.event {
            GuardEvent::Promoted(p) if p.guard == guard => Some(p),
            _ => None,
        })
    }

    /// The first `primary_attached` of Guard group `guard`.
    pub fn attached(&self, guard: u32) -> Option<&PrimaryAttached> {
        self.events.iter().find_map(|e| match &e.event {
            GuardEvent::PrimaryAttached(p) if p.guard == guard => Some(p),
            _ => None,
        })
    }

    /// Events that mean the Guard is not protecting a pool.
    pub fn failures(&self) -> impl Iterator<Item = &GuardLogEntry> {
        self.events.iter().filter(|e| e.event.is_failure())
    }

    /// Polls every `every` until some event satisfies `pick` (returning its
    /// value) or `timeout` passes; the error names `what`.
    pub async fn wait_for<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        every: Duration,
        pick: impl Fn(&GuardEvent) -> Option<T>,
    ) -> Result<T, GuardWaitError> {
        let start = Instant::now();
        loop {
            self.poll()?;
            if let Some(v) = self.events.iter().find_map(|e| pick(&e.event)) {
                return Ok(v);
            }
            if start.elapsed() >= timeout {
                return Err(GuardWaitError::Deadline {
                    what: what.to_string(),
                    path: self.tail.path().to_path_buf(),
                    from_offset: self.from_offset,
                    seen: self.events.len(),
                    last: self
                        .events
                        .last()
                        .map(|e| format!("{:?}", e.event))
                        .unwrap_or_else(|| "none".into()),
                    waited: start.elapsed(),
                });
            }
            tokio::time::sleep(every).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    const LOG: &str = "\
INFO:kvcr.kvcr_service:KVCR service ready: socket=/tmp/s.sock guards=2 pool_sizes_bytes=(104857, 52428) journal_bytes=104857600
DEBUG:kvcr.guard:KVCR_EVENT primary_attached guard=0 pool=pool_0 control=127.0.0.1:27771
DEBUG:kvcr.remote_fw_dram:KVCR_EVENT source_transfer_requested op=3 source_op=1 target=agent-b blocks=1 bytes=28672
DEBUG:kvcr.remote_fw_dram:KVCR_EVENT source_transfer_completed op=3 source_op=1 target=agent-b blocks=1 bytes=28672 result=success
some unrelated line
DEBUG:kvcr.guard:KVCR_EVENT guard_promotion_stage stage=death_observed guard=0 pool=pool_0 tid=12 monotonic_ns=123456789 thread_cpu_ns=5
INFO:kvcr.guard:KVCR_EVENT guard_promoted guard=0 pool=pool_0 recovered_blocks=1 agent=kvcr-guard-0 control=127.0.0.1:27771 recovery_ms=0.149 setup_ms=0.519 start_ms=6.061 promotion_ms=6.729
WARNING:kvcr.guard:KVCR Guard 1 promoted after heartbeat timeout
WARNING:kvcr.guard:KVCR pool recovery disabled; claimable but cold if this primary dies: [Errno 28] No space left
CRITICAL:kvcr.guard:KVCR Guard 1 failed
INFO:kvcr.guard:KVCR Guard 0 answers on 127.0.0.1:27771
DEBUG:kvcr.core:KVCR_EVENT query_decision request_id=r1 agent=a keys=3
INFO:kvcr.guard:KVCR_EVENT guard_promoted guard=x pool=pool_0
DEBUG:kvcr.guard:KVCR_EVENT
";

    #[test]
    fn parses_every_known_line() {
        let events: Vec<_> = LOG.lines().filter_map(parse_line).collect();
        insta::assert_debug_snapshot!(events);
    }

    #[tokio::test]
    async fn reader_collects_and_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard.log");
        let mut f = std::fs::File::create(&path).unwrap();
        writeln!(f, "INFO:kvcr.guard:KVCR_EVENT guard_promoted guard=0 pool=pool_0 recovered_blocks=9 agent=old control=h:1 recovery_ms=1 setup_ms=1 start_ms=1 promotion_ms=3").unwrap();
        let mut r = GuardLogReader::from_end(&path).unwrap();
        write!(f, "{LOG}").unwrap();
        let p = r
            .wait_for(
                "guard 0 promotion",
                Duration::from_secs(1),
                Duration::from_millis(5),
                |e| match e {
                    GuardEvent::Promoted(p) if p.guard == 0 => Some(p.clone()),
                    _ => None,
                },
            )
            .await
            .unwrap();
        assert_eq!(
            p.recovered_blocks, 1,
            "the event before the offset is not seen"
        );
        assert_eq!(p.promotion_ms, 6.729);
        assert_eq!(r.attached(0).unwrap().control, "127.0.0.1:27771");
        assert_eq!(r.failures().count(), 2);
        assert_eq!(r.problems().len(), 2, "{:?}", r.problems());
        let err = r
            .wait_for(
                "guard 5 promotion",
                Duration::from_millis(20),
                Duration::from_millis(5),
                |e| match e {
                    GuardEvent::Promoted(p) if p.guard == 5 => Some(()),
                    _ => None,
                },
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("guard 5 promotion"), "{err}");
    }

    /// Number of random inputs each property below runs on.
    const PROPTEST_CASES: u32 = 2048;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(PROPTEST_CASES))]

        #[test]
        fn never_panics_on_arbitrary_text(s in "\\PC*") {
            let _ = parse_line(&s);
            let _ = parse_line(&format!("INFO:kvcr.guard:KVCR_EVENT {s}"));
            let _ = parse_line(&format!("KVCR service ready: {s}"));
            let _ = parse_line(&format!("KVCR Guard {s}"));
        }

        #[test]
        fn never_panics_on_event_like_text(
            s in "(INFO|DEBUG):kvcr\\.guard:KVCR_EVENT (guard_promoted|primary_attached|guard_promotion_stage|source_transfer_completed)( [a-z_]{1,16}=[-0-9a-z.:()]{0,8}){0,10}"
        ) {
            prop_assert!(parse_line(&s).is_some());
        }
    }
}
