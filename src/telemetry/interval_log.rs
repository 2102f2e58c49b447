//! vLLM's interval log line, `... KV Transfer metrics: k=v, k=v, ...`.
//!
//! Each line carries the values of ONE stats interval (KVCR resets its
//! stats on every `get_stats()`), so the source *accumulates*: counters
//! (and histogram `_count`/`_sum`) are summed over every line since a log
//! offset, gauges keep their last value. Keys hold Python tuple reprs with
//! commas and quotes (`vllm:kvcr_duration_seconds:('remote_deliver', 'success')_count`),
//! so items are split outside brackets and quotes. A MultiConnector (the
//! prefill and decode workers of vLLM's 2P+1D plan) logs one Python dict
//! per connector instead, `OffloadingConnector={'key': value, ...},
//! NixlPullConnector={...}`: each dict's items are read as the items of a
//! plain line.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::fields::{find_top_level, split_top_level, unquote_python};
use super::names::{meaning_of_interval_key, Counter, Gauge, Meaning, INTERVAL_LOG_MARKER};
use super::problem::ParseProblem;
use super::prometheus::parse_value;
use super::snapshot::{Snapshot, SnapshotSource};
use super::tail::{LogTail, TailError};

/// One `key=value` item of an interval line.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalEntry {
    /// The key as logged.
    pub key: String,
    /// The value for this interval.
    pub value: f64,
    /// Its meaning, when the harness knows the key.
    pub meaning: Option<Meaning>,
}

/// The items of one interval line, and the items that could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalLine {
    /// Readable items.
    pub entries: Vec<IntervalEntry>,
    /// Why each unreadable item was skipped (item text included).
    pub problems: Vec<String>,
}

/// Parses one log line; `None` when it is not an interval line.
pub fn parse_line(line: &str) -> Option<IntervalLine> {
    let start = line.find(INTERVAL_LOG_MARKER)? + INTERVAL_LOG_MARKER.len();
    let body = line[start..].trim();
    let mut out = IntervalLine::default();
    for item in split_top_level(body, |c| c == ',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let Some(eq) = find_top_level(item, '=') else {
            out.problems
                .push(format!("item {item:?} has no `=` outside brackets"));
            continue;
        };
        let key = item[..eq].trim();
        let value_text = item[eq + 1..].trim();
        match value_text
            .strip_prefix('{')
            .and_then(|v| v.strip_suffix('}'))
        {
            Some(dict) => add_connector_dict(&mut out, key, dict),
            None => add_entry(&mut out, key, value_text),
        }
    }
    Some(out)
}

/// One `key`, `value_text` item; a value that is not a number is a problem.
fn add_entry(out: &mut IntervalLine, key: &str, value_text: &str) {
    match parse_value(value_text) {
        Some(value) => out.entries.push(IntervalEntry {
            key: key.to_string(),
            value,
            meaning: meaning_of_interval_key(key),
        }),
        None => out
            .problems
            .push(format!("value {value_text:?} of {key:?} is not a number")),
    }
}

/// The items of `connector`'s dict (`'key': value, ...`, the braces
/// stripped), each read as an item of a plain line.
fn add_connector_dict(out: &mut IntervalLine, connector: &str, dict: &str) {
    for item in split_top_level(dict, |c| c == ',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let parsed = find_top_level(item, ':').and_then(|colon| {
            let key = unquote_python(item[..colon].trim())?;
            Some((key, item[colon + 1..].trim()))
        });
        match parsed {
            Some((key, value_text)) => add_entry(out, &key, value_text),
            None => out.problems.push(format!(
                "item {item:?} of {connector}'s dict is not `'key': value`"
            )),
        }
    }
}

/// Sums interval lines into cumulative values since some starting point.
#[derive(Debug, Clone, Default)]
pub struct IntervalAccumulator {
    counters: BTreeMap<Counter, f64>,
    gauges: BTreeMap<Gauge, f64>,
    unmapped: BTreeMap<String, f64>,
    lines: usize,
    problems: Vec<ParseProblem>,
}

impl IntervalAccumulator {
    /// Adds one log line (non-interval lines are ignored); `at` says where
    /// it came from for problem records. Returns whether it was an interval line.
    pub fn add_line(&mut self, at: &str, line: &str) -> bool {
        let Some(parsed) = parse_line(line) else {
            return false;
        };
        self.lines += 1;
        for e in parsed.entries {
            match e.meaning {
                Some(Meaning::Counter(c)) => *self.counters.entry(c).or_insert(0.0) += e.value,
                Some(Meaning::Gauge(g)) => {
                    self.gauges.insert(g, e.value);
                }
                None => *self.unmapped.entry(e.key).or_insert(0.0) += e.value,
            }
        }
        for reason in parsed.problems {
            self.problems.push(ParseProblem::new(at, reason, line));
        }
        true
    }

    /// Interval lines added so far.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Summed values of keys the harness has no meaning for (e.g. NIXL's own).
    pub fn unmapped(&self) -> &BTreeMap<String, f64> {
        &self.unmapped
    }

    /// The accumulated values as a snapshot.
    pub fn snapshot(&self, worker: Option<String>, source: SnapshotSource) -> Snapshot {
        let mut s = Snapshot::new(worker, source);
        s.counters = self.counters.clone();
        s.gauges = self.gauges.clone();
        s.problems = self.problems.clone();
        s.unmapped_samples = self.unmapped.len();
        // Interval lines carry only what happened: a family is reported once
        // any of its series showed up.
        s.reported_families = self
            .counters
            .keys()
            .map(|c| c.family_name().to_string())
            .collect();
        s
    }
}

/// A deadline passed before the accumulated values met a condition.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The condition never held.
    #[error("waited {waited:?} for {what} in interval log {path} (from byte {from_offset}, {lines} interval lines seen); last accumulated values:\n{last}")]
    Deadline {
        /// What was awaited, in words.
        what: String,
        /// The log.
        path: PathBuf,
        /// Where accumulation started.
        from_offset: u64,
        /// Interval lines seen.
        lines: usize,
        /// How long it waited.
        waited: Duration,
        /// The last snapshot, rendered.
        last: String,
    },
    /// The log could not be read.
    #[error(transparent)]
    Tail(#[from] TailError),
}

/// Tails a worker's log from a byte offset and accumulates its interval lines.
#[derive(Debug, Clone)]
pub struct IntervalLogReader {
    tail: LogTail,
    from_offset: u64,
    worker: Option<String>,
    acc: IntervalAccumulator,
}

impl IntervalLogReader {
    /// Accumulates lines written at or after byte `offset` of `path`.
    pub fn from_offset(path: impl Into<PathBuf>, offset: u64) -> Self {
        IntervalLogReader {
            tail: LogTail::from_offset(path, offset),
            from_offset: offset,
            worker: None,
            acc: IntervalAccumulator::default(),
        }
    }

    /// Accumulates lines written from now on.
    pub fn from_end(path: impl Into<PathBuf>) -> Result<Self, TailError> {
        let tail = LogTail::from_end(path)?;
        let from_offset = tail.offset();
        Ok(IntervalLogReader {
            tail,
            from_offset,
            worker: None,
            acc: IntervalAccumulator::default(),
        })
    }

    /// Names the worker whose log this is (carried into snapshots).
    pub fn with_worker(mut self, worker: impl Into<String>) -> Self {
        self.worker = Some(worker.into());
        self
    }

    /// Reads what was appended; returns the number of new interval lines.
    pub fn poll(&mut self) -> Result<usize, TailError> {
        let mut n = 0;
        for l in self.tail.read_lines()? {
            let at = format!("{} byte {}", self.tail.path().display(), l.offset);
            if self.acc.add_line(&at, &l.text) {
                n += 1;
            }
        }
        Ok(n)
    }

    /// The accumulator (for unmapped keys and line counts).
    pub fn accumulator(&self) -> &IntervalAccumulator {
        &self.acc
    }

    /// Byte offset read up to (whole lines).
    pub fn offset(&self) -> u64 {
        self.tail.offset()
    }

    /// Values accumulated since the start offset, as of the last [`poll`](Self::poll).
    /// Two of these subtract into a [`Delta`](super::Delta) for a window.
    pub fn snapshot(&self) -> Snapshot {
        self.acc.snapshot(
            self.worker.clone(),
            SnapshotSource::IntervalLog {
                path: self.tail.path().display().to_string(),
                from_offset: self.from_offset,
                to_offset: self.tail.offset(),
                lines: self.acc.lines(),
            },
        )
    }

    /// Polls every `every` until `cond` holds on the accumulated snapshot,
    /// or `timeout` passes; the error names `what` and shows the last values.
    pub async fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        every: Duration,
        cond: impl Fn(&Snapshot) -> bool,
    ) -> Result<Snapshot, WaitError> {
        let start = Instant::now();
        loop {
            self.poll()?;
            let snap = self.snapshot();
            if cond(&snap) {
                return Ok(snap);
            }
            if start.elapsed() >= timeout {
                return Err(WaitError::Deadline {
                    what: what.to_string(),
                    path: self.tail.path().to_path_buf(),
                    from_offset: self.from_offset,
                    lines: self.acc.lines(),
                    waited: start.elapsed(),
                    last: snap.to_string(),
                });
            }
            tokio::time::sleep(every).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::names::{OpResult, Resource, Scope, Tier};
    use proptest::prelude::*;
    use std::io::Write;

    const SOURCE_LINE: &str = "INFO 11-29 17:41:00 [loggers.py:257] KV Transfer metrics: vllm:kvcr_duration_seconds:('transfer', 'success')_count=1, vllm:kvcr_duration_seconds:('source_write', 'success')_count=1, vllm:kvcr_duration_seconds:('source_write', 'success')_sum=0.0123, vllm:kvcr_transfer_blocks:('source_write',)=41, vllm:kvcr_transfer_bytes:('source_write',)=300941312, vllm:kvcr_state:('block_records',)=41";
    const TARGET_LINE: &str = "(EngineCore_DP1 pid=77) INFO 11-29 17:41:01 [loggers.py:257] KV Transfer metrics: vllm:kvcr_duration_seconds:('remote_deliver', 'success')_count=1, vllm:kvcr_transfer_blocks:('remote_deliver',)=41, vllm:kv_offload_tiering_read_bytes:('1:kvcr',)=300941312, Avg xfer time (ms)=1.5, vllm:kv_offload_tiering_cascade_job_failures=2";

    #[test]
    fn parses_the_quick_start_lines() {
        let l = parse_line(SOURCE_LINE).unwrap();
        assert!(l.problems.is_empty(), "{:?}", l.problems);
        assert_eq!(l.entries.len(), 6);
        assert_eq!(
            l.entries[1].meaning,
            Some(Meaning::Counter(Counter::OpCount(
                Scope::SourceWrite,
                OpResult::Success
            )))
        );
        assert_eq!(l.entries[4].value, 300941312.0);
        let t = parse_line(TARGET_LINE).unwrap();
        assert_eq!(t.entries.len(), 5);
        assert_eq!(
            t.entries[2].meaning,
            Some(Meaning::Counter(Counter::TieringReadBytes(Tier::Kvcr)))
        );
        assert_eq!(t.entries[3].meaning, None, "NIXL key kept but unmapped");
        assert_eq!(
            t.entries[4].meaning,
            Some(Meaning::Counter(Counter::TieringCascadeJobFailures))
        );
        assert!(parse_line("INFO nothing to see").is_none());
    }

    /// A MultiConnector's line, as vLLM 0.32 logged it on a prefill worker
    /// of the 2P+1D plan (shortened): one dict per connector; the KVCR
    /// tier's counters in the OffloadingConnector's, NIXL's own figures in
    /// NixlPullConnector's.
    #[test]
    fn parses_a_multiconnector_line() {
        let line = r#"(MainProcess pid=1110) INFO 12-03 07:49:42 [distributed/.../v1/metrics.py:103] KV Transfer metrics: OffloadingConnector={'vllm:kv_offload_cpu_cache_usage_perc': 0.0, "vllm:kvcr_state:('block_records',)": 130, "vllm:kvcr_duration_seconds:('source_write', 'success')_count": 1, "vllm:kvcr_transfer_blocks:('source_write',)": 2, "vllm:kvcr_transfer_bytes:('source_write',)": 262144}, NixlPullConnector={'Num successful transfers': 1, 'Avg xfer time (ms)': 17.923, 'Num failed transfers': 0}"#;
        let parsed = parse_line(line).unwrap();
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        let value = |c: Counter| {
            parsed
                .entries
                .iter()
                .find(|e| e.meaning == Some(Meaning::Counter(c.clone())))
                .map(|e| e.value)
        };
        assert_eq!(
            value(Counter::TransferBlocks(Scope::SourceWrite)),
            Some(2.0)
        );
        assert_eq!(
            value(Counter::TransferBytes(Scope::SourceWrite)),
            Some(262144.0)
        );
        assert_eq!(
            value(Counter::OpCount(Scope::SourceWrite, OpResult::Success)),
            Some(1.0)
        );
        let unmapped: Vec<&str> = parsed
            .entries
            .iter()
            .filter(|e| e.meaning.is_none())
            .map(|e| e.key.as_str())
            .collect();
        assert!(
            unmapped.contains(&"Num successful transfers"),
            "{unmapped:?}"
        );
        let broken = parse_line("KV Transfer metrics: NixlPullConnector={'a' 1, 'b': x}").unwrap();
        assert_eq!(broken.problems.len(), 2, "{:?}", broken.problems);
    }

    #[test]
    fn bad_items_are_problems_not_losses() {
        let l = parse_line(
            "KV Transfer metrics: a=1, b=x, c, vllm:kvcr_transfer_blocks:('local_fill',)=3,",
        )
        .unwrap();
        assert_eq!(l.entries.len(), 2);
        assert_eq!(l.problems.len(), 2, "{:?}", l.problems);
    }

    #[test]
    fn accumulates_counters_and_keeps_last_gauge() {
        let mut acc = IntervalAccumulator::default();
        assert!(acc.add_line("l1", SOURCE_LINE));
        assert!(!acc.add_line("l2", "INFO other line"));
        assert!(acc.add_line(
            "l3",
            "KV Transfer metrics: vllm:kvcr_transfer_blocks:('source_write',)=2, vllm:kvcr_state:('block_records',)=43"
        ));
        let s = acc.snapshot(Some("A".into()), SnapshotSource::Empty);
        assert_eq!(
            s.counter(&Counter::TransferBlocks(Scope::SourceWrite)),
            Some(43.0)
        );
        assert_eq!(s.gauge(&Gauge::State(Resource::BlockRecords)), Some(43.0));
        assert_eq!(acc.lines(), 2);
    }

    #[tokio::test]
    async fn reader_tails_from_offset_and_windows_subtract() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.log");
        let mut f = std::fs::File::create(&path).unwrap();
        writeln!(f, "{SOURCE_LINE}").unwrap();
        let mut r = IntervalLogReader::from_end(&path).unwrap().with_worker("A");
        assert_eq!(
            r.poll().unwrap(),
            0,
            "lines before the offset are not counted"
        );
        let before = r.snapshot();
        writeln!(f, "noise\n{SOURCE_LINE}").unwrap();
        write!(f, "{SOURCE_LINE}").unwrap(); // no newline yet: held back
        let after = r
            .wait_for(
                "source_write blocks",
                Duration::from_secs(2),
                Duration::from_millis(10),
                |s| {
                    s.counter(&Counter::TransferBlocks(Scope::SourceWrite))
                        .is_some()
                },
            )
            .await
            .unwrap();
        let d = crate::telemetry::Delta::between(&before, &after).unwrap();
        assert_eq!(d.count(&Counter::TransferBlocks(Scope::SourceWrite)), 41);
        assert_eq!(
            d.count(&Counter::TransferBytes(Scope::SourceWrite)),
            300941312
        );
        let err = r
            .wait_for(
                "remote_deliver blocks",
                Duration::from_millis(30),
                Duration::from_millis(10),
                |s| {
                    s.counter(&Counter::TransferBlocks(Scope::RemoteDeliver))
                        .is_some()
                },
            )
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("remote_deliver blocks") && msg.contains("worker.log"),
            "{msg}"
        );
    }

    /// Number of random inputs each property below runs on.
    const PROPTEST_CASES: u32 = 2048;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(PROPTEST_CASES))]

        #[test]
        fn never_panics_on_arbitrary_text(s in "\\PC*") {
            let mut acc = IntervalAccumulator::default();
            acc.add_line("p", &s);
            acc.add_line("p", &format!("KV Transfer metrics: {s}"));
        }

        #[test]
        fn never_panics_on_key_like_text(
            s in "KV Transfer metrics: ((vllm:[a-z_]{0,6}(:\\(('[a-z_:]{0,4}'?,? ?){0,3}\\)?)?(_count|_sum)?)?=?[-0-9.eInfa]{0,5}(, )?){0,5}"
        ) {
            let l = parse_line(&s);
            prop_assert!(l.is_some());
        }

        #[test]
        fn sums_match_what_was_written(values in proptest::collection::vec(0u32..1_000_000, 0..20)) {
            let mut acc = IntervalAccumulator::default();
            for v in &values {
                acc.add_line("p", &format!("X KV Transfer metrics: vllm:kvcr_transfer_blocks:('remote_deliver',)={v}, vllm:kvcr_duration_seconds:('remote_deliver', 'partial')_count=0"));
            }
            let s = acc.snapshot(None, SnapshotSource::Empty);
            let want: u64 = values.iter().map(|v| u64::from(*v)).sum();
            let got = s.counter(&Counter::TransferBlocks(Scope::RemoteDeliver)).unwrap_or(0.0);
            prop_assert_eq!(got as u64, want);
        }
    }
}
