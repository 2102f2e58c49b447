//! KVCR's own diagnostics read back and reconciled (TC-22, on a stack with
//! `cpu_engine.kvcr_diagnostics`): KVCR 0.1.1 logs every block-key event
//! (`KVCR_KEY_HISTORY event=... pid=... sequence=... key_sha256=...`) and
//! every query decision (`KVCR_EVENT query_decision request_id=...`) when
//! `KVCR_KEY_HISTORY=1` / `KVCR_DIAGNOSTICS=1` and its logger is at DEBUG.
//!
//! The claims: diagnostics that were asked for are there; each KVCR
//! instance numbers its key-history lines 1, 2, 3, ... (a gap is a lost
//! line); the keys KVCR says its engine accepted as inventory are exactly
//! the keys the engine logged and counted as KVCR inventory; and KVCR
//! decided on each request the case sent, seeing no hint for a request
//! whose hint it refused.

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Checks, Violation};

/// Claim: KVCR's diagnostics are there and agree with the engine.
pub const KEY_HISTORY_RECONCILED: &str =
    "KVCR's key history is complete and agrees with its engine's inventory";

/// Claim: KVCR's query decisions name the requests sent.
pub const QUERY_DECISIONS_NAME_REQUESTS: &str =
    "KVCR logs a query decision for each request, with the hint it saw";

const KEY_HISTORY: &str = "KVCR_KEY_HISTORY ";
const QUERY_DECISION: &str = "KVCR_EVENT query_decision ";
/// The CPU engine's line for a KVCR inventory event
/// (`KVCR inventory stored tier=LOCAL_G2 hashes=h,h`).
const ENGINE_INVENTORY: &str = "KVCR inventory ";

/// One `KVCR_KEY_HISTORY` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyEvent {
    pub event: String,
    /// KVCR's NIXL agent name: each KVCR instance numbers its own lines.
    pub agent: String,
    pub pid: u32,
    pub sequence: u64,
    /// KVCR's tier value (`DRAM`, `G3`, `REMOTE_G2`).
    pub tier: String,
    /// For inventory events: `stored` or `removed`.
    pub reason: String,
    /// `sha256(key)` of each key, hex.
    pub keys: Vec<String>,
}

/// The `key=value` fields of a diagnostics line after `marker`.
fn fields<'a>(line: &'a str, marker: &str) -> Option<BTreeMap<&'a str, &'a str>> {
    let at = line.find(marker)?;
    Some(
        line[at + marker.len()..]
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .collect(),
    )
}

/// A `KVCR_KEY_HISTORY` line, if `line` is one.
pub fn parse_key_event(line: &str) -> Option<KeyEvent> {
    let f = fields(line, KEY_HISTORY)?;
    let keys = f.get("key_sha256")?;
    Some(KeyEvent {
        event: f.get("event")?.to_string(),
        agent: f.get("agent")?.to_string(),
        pid: f.get("pid")?.parse().ok()?,
        sequence: f.get("sequence")?.parse().ok()?,
        tier: f.get("tier")?.to_string(),
        reason: f.get("reason").unwrap_or(&"-").to_string(),
        keys: keys
            .split(',')
            .filter(|k| !k.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// One `KVCR_EVENT query_decision` line: the request, whether KVCR saw a
/// hint for it, and which of the request's queries it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueryDecision {
    pub request_id: String,
    pub hint_present: bool,
    /// KVCR's NIXL agent name: each KVCR instance numbers its own queries.
    pub agent: String,
    /// `query_ordinal`: the request's 1st, 2nd, ... query.
    pub ordinal: u32,
    /// `sample_cap`: how many queries of a request KVCR says it logs.
    pub sample_cap: u32,
}

/// Whether `line` is a query decision line (parsed or not).
pub fn is_query_decision(line: &str) -> bool {
    line.contains(QUERY_DECISION)
}

/// A query decision line, if `line` is one.
pub fn parse_query_decision(line: &str) -> Option<QueryDecision> {
    let f = fields(line, QUERY_DECISION)?;
    Some(QueryDecision {
        request_id: f.get("request_id")?.to_string(),
        hint_present: *f.get("hint_present")? == "True",
        agent: f.get("agent")?.to_string(),
        ordinal: f.get("query_ordinal")?.parse().ok()?,
        sample_cap: f.get("sample_cap")?.parse().ok()?,
    })
}

/// One engine inventory line: `(tier, stored|removed)` and its block hashes.
pub fn parse_engine_inventory(line: &str) -> Option<((String, String), Vec<u64>)> {
    let at = line.find(ENGINE_INVENTORY)?;
    let mut words = line[at + ENGINE_INVENTORY.len()..].split_whitespace();
    let kind = words.next()?;
    if kind != "stored" && kind != "removed" {
        return None;
    }
    let f: BTreeMap<&str, &str> = words.filter_map(|kv| kv.split_once('=')).collect();
    let hashes = f
        .get("hashes")?
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| h.parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    Some(((f.get("tier")?.to_string(), kind.to_string()), hashes))
}

/// The key KVCR logs for an engine block hash: sha256 of the key's bytes
/// (the CPU engine's KVCR key is the hash's 8 bytes, big-endian).
pub fn key_digest(hash: u64) -> String {
    hex::encode(Sha256::digest(hash.to_be_bytes()))
}

/// KVCR's tier value as the engine names the tier (`CacheTier.name`).
fn engine_tier(kvcr_value: &str) -> &str {
    match kvcr_value {
        "DRAM" => "LOCAL_G2",
        other => other,
    }
}

/// Keys by `(tier, stored|removed)`, each with its count (a multiset).
pub type KeysByEvent = BTreeMap<(String, String), BTreeMap<String, u64>>;

/// What one worker's log says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KeyHistoryReading {
    pub worker: String,
    pub key_history_lines: u64,
    /// Per KVCR instance (`agent pid N`): its lines' sequence numbers, in
    /// log order.
    #[serde(skip)]
    pub sequences: BTreeMap<String, Vec<u64>>,
    /// Per KVCR instance: how many key-history lines it logged.
    pub lines_per_instance: BTreeMap<String, u64>,
    /// `inventory_accepted` keys, by engine tier and kind.
    #[serde(skip)]
    pub accepted: KeysByEvent,
    /// The engine's own inventory lines, as keys.
    #[serde(skip)]
    pub engine_logged: KeysByEvent,
    /// Blocks per `(tier, kind)`: KVCR's accepted, the engine's lines, the
    /// engine's counter (`cpu_engine_kvcr_inventory_blocks`).
    pub accepted_blocks: BTreeMap<String, u64>,
    pub engine_logged_blocks: BTreeMap<String, u64>,
    pub engine_counted_blocks: BTreeMap<String, u64>,
    /// Events KVCR logged as not reaching the engine
    /// (`inventory_failed`, `inventory_no_callback`).
    pub inventory_not_accepted: u64,
}

/// Tiers whose inventory the CPU engine takes (KVCR's own residency).
const ENGINE_TIERS: &[&str] = &["LOCAL_G2", "G3"];

impl KeyHistoryReading {
    /// Reads `log` (a worker's whole log) of `worker`; `counted` is the
    /// engine's inventory counter per `(tier, kind)`.
    pub fn read(worker: &str, log: &str, counted: BTreeMap<(String, String), u64>) -> Self {
        let mut r = KeyHistoryReading {
            worker: worker.to_string(),
            ..Default::default()
        };
        for line in log.lines() {
            if let Some(e) = parse_key_event(line) {
                r.key_history_lines += 1;
                let instance = format!("{} pid {}", e.agent, e.pid);
                r.sequences.entry(instance).or_default().push(e.sequence);
                let tier = engine_tier(&e.tier).to_string();
                if !ENGINE_TIERS.contains(&tier.as_str()) {
                    continue;
                }
                match e.event.as_str() {
                    "inventory_accepted" => {
                        let keys = r.accepted.entry((tier, e.reason)).or_default();
                        for k in e.keys {
                            *keys.entry(k).or_default() += 1;
                        }
                    }
                    "inventory_failed" | "inventory_no_callback" => {
                        r.inventory_not_accepted += 1;
                    }
                    _ => {}
                }
            } else if let Some((event, hashes)) = parse_engine_inventory(line) {
                let keys = r.engine_logged.entry(event).or_default();
                for h in hashes {
                    *keys.entry(key_digest(h)).or_default() += 1;
                }
            }
        }
        let total = |m: &KeysByEvent| -> BTreeMap<String, u64> {
            m.iter()
                .map(|((t, k), keys)| (format!("{t}/{k}"), keys.values().sum()))
                .collect()
        };
        r.lines_per_instance = r
            .sequences
            .iter()
            .map(|(i, s)| (i.clone(), s.len() as u64))
            .collect();
        r.accepted_blocks = total(&r.accepted);
        r.engine_logged_blocks = total(&r.engine_logged);
        r.engine_counted_blocks = counted
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|((t, k), n)| (format!("{t}/{k}"), n))
            .collect();
        r
    }

    /// KVCR instances whose sequence numbers do not run 1, 2, 3, ...: each
    /// with the first break.
    pub fn sequence_breaks(&self) -> Vec<String> {
        let mut breaks = Vec::new();
        for (instance, seqs) in &self.sequences {
            let mut sorted = seqs.clone();
            sorted.sort_unstable();
            let first_break = sorted
                .iter()
                .enumerate()
                .find(|(i, &s)| s != *i as u64 + 1)
                .map(|(i, &s)| (i as u64 + 1, s));
            if let Some((expected, found)) = first_break {
                breaks.push(format!(
                    "{instance}: {} lines, sequence {expected} expected, {found} found \
                     (numbers {}..={})",
                    seqs.len(),
                    sorted.first().copied().unwrap_or(0),
                    sorted.last().copied().unwrap_or(0)
                ));
            }
        }
        breaks
    }
}

/// Keys one side has more often than the other, as `sha…×n` (at most 4).
fn surplus(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<String> {
    a.iter()
        .filter_map(|(k, n)| {
            let m = b.get(k).copied().unwrap_or(0);
            (*n > m).then(|| format!("{}…×{}", &k[..k.len().min(12)], n - m))
        })
        .take(4)
        .collect()
}

/// Where one worker's key history disagrees with itself or its engine:
/// lost lines, inventory events the engine did not accept, accepted keys
/// the engine did not log or count (empty when it agrees).
pub fn disagreements(r: &KeyHistoryReading) -> Vec<String> {
    let w = &r.worker;
    let mut found: Vec<String> = r
        .sequence_breaks()
        .into_iter()
        .map(|b| format!("worker {w}: key history lost lines: {b}"))
        .collect();
    if r.inventory_not_accepted > 0 {
        found.push(format!(
            "worker {w}: KVCR logged {} inventory events its engine did not accept",
            r.inventory_not_accepted
        ));
    }
    let empty = BTreeMap::new();
    let events: std::collections::BTreeSet<_> =
        r.accepted.keys().chain(r.engine_logged.keys()).collect();
    for event in events {
        let kvcr = r.accepted.get(event).unwrap_or(&empty);
        let engine = r.engine_logged.get(event).unwrap_or(&empty);
        if kvcr != engine {
            found.push(format!(
                "worker {w}: {}/{}: KVCR's key history says the engine accepted {} blocks, the \
                 engine logged {}; only in KVCR's: {:?}, only in the engine's: {:?}",
                event.0,
                event.1,
                kvcr.values().sum::<u64>(),
                engine.values().sum::<u64>(),
                surplus(kvcr, engine),
                surplus(engine, kvcr)
            ));
        }
    }
    if r.engine_counted_blocks != r.accepted_blocks {
        found.push(format!(
            "worker {w}: KVCR's key history says the engine accepted {:?} blocks, its counter \
             cpu_engine_kvcr_inventory_blocks says {:?}",
            r.accepted_blocks, r.engine_counted_blocks
        ));
    }
    found
}

/// The diagnostics were seen on the stack's workers, each worker's key
/// history is gap-free and agrees with its engine, and some inventory was
/// accepted (a source that keeps its blocks in engine memory may have no
/// key history of its own).
pub fn expect_key_history_reconciled(readings: &[KeyHistoryReading]) -> Result<(), Violation> {
    let mut c = Checks::new(KEY_HISTORY_RECONCILED);
    let workers: Vec<&str> = readings.iter().map(|r| r.worker.as_str()).collect();
    let lines: u64 = readings.iter().map(|r| r.key_history_lines).sum();
    if lines == 0 {
        c.check(false, || {
            format!(
                "KVCR's diagnostics were asked for (cpu_engine.kvcr_diagnostics: \
                 KVCR_KEY_HISTORY=1, its logger at DEBUG) and no worker's log ({}) has a \
                 KVCR_KEY_HISTORY line",
                workers.join(", ")
            )
        });
        return c.verdict();
    }
    for r in readings {
        for d in disagreements(r) {
            c.check(false, || d);
        }
    }
    c.check(readings.iter().any(|r| !r.accepted.is_empty()), || {
        format!(
            "{lines} key-history lines on {} and no inventory_accepted event: the case's reads \
             never made KVCR publish inventory",
            workers.join(", ")
        )
    });
    c.verdict()
}

/// Requests the case sent, as KVCR's query decisions saw them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecidedRequest {
    /// The case's name for it (a row).
    pub name: String,
    pub x_request_id: String,
    /// Whether the case's request carried a hint KVCR should have kept.
    pub hint_expected: bool,
    /// The query decisions among the request's log lines.
    pub decisions: Vec<QueryDecision>,
}

/// KVCR decided on each request, and saw its hint exactly when it should.
pub fn expect_query_decisions(requests: &[DecidedRequest]) -> Result<(), Violation> {
    let mut c = Checks::new(QUERY_DECISIONS_NAME_REQUESTS);
    c.check(!requests.is_empty(), || "no request was sent".into());
    for r in requests {
        c.check(!r.decisions.is_empty(), || {
            format!(
                "{} (x-request-id {}): no KVCR_EVENT query_decision names it",
                r.name, r.x_request_id
            )
        });
        let wrong: Vec<_> = r
            .decisions
            .iter()
            .filter(|d| d.hint_present != r.hint_expected)
            .collect();
        c.check(wrong.is_empty(), || {
            format!(
                "{} (x-request-id {}): KVCR decided with hint_present={} where {} was expected",
                r.name, r.x_request_id, wrong[0].hint_present, r.hint_expected
            )
        });
    }
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(event: &str, seq: u64, reason: &str, hashes: &[u64]) -> String {
        let keys: Vec<String> = hashes.iter().map(|h| key_digest(*h)).collect();
        format!(
            "2026-12-06 10:00:00,000 B kvcr.core DEBUG KVCR_KEY_HISTORY event={event} agent=kvcr-b \
             pid=77 sequence={seq} batch_offset=0 tier=DRAM reason={reason} key_sha256={} \
             request_id=None op=None",
            keys.join(",")
        )
    }

    fn engine(hashes: &[u64]) -> String {
        let hs: Vec<String> = hashes.iter().map(u64::to_string).collect();
        format!(
            "2026-12-06 10:00:00,001 B cpu_engine.engine INFO KVCR inventory stored \
             tier=LOCAL_G2 hashes={}",
            hs.join(",")
        )
    }

    fn counted(n: u64) -> BTreeMap<(String, String), u64> {
        BTreeMap::from([(("LOCAL_G2".into(), "stored".into()), n)])
    }

    fn good_log() -> String {
        [
            history("ready", 1, "-", &[1, 2]),
            history("inventory_accepted", 2, "stored", &[1, 2]),
            engine(&[1, 2]),
            history("ready", 3, "-", &[3]),
            history("inventory_accepted", 4, "stored", &[3]),
            engine(&[3]),
        ]
        .join("\n")
    }

    #[test]
    fn key_digest_is_sha256_of_the_big_endian_hash() {
        // sha256 of eight zero bytes.
        assert_eq!(
            key_digest(0),
            "af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc"
        );
    }

    #[test]
    fn parses_kvcr_and_engine_lines() {
        let e = parse_key_event(&history("inventory_accepted", 9, "stored", &[5])).unwrap();
        assert_eq!(
            (e.event.as_str(), e.pid, e.sequence),
            ("inventory_accepted", 77, 9)
        );
        assert_eq!((e.tier.as_str(), e.reason.as_str()), ("DRAM", "stored"));
        assert_eq!(e.keys, vec![key_digest(5)]);
        let (event, hashes) = parse_engine_inventory(&engine(&[7, 8])).unwrap();
        assert_eq!(event, ("LOCAL_G2".to_string(), "stored".to_string()));
        assert_eq!(hashes, vec![7, 8]);
        let d = parse_query_decision(
            "x DEBUG KVCR_EVENT query_decision request_id=abc-1 agent=a keys=3 \
             query_ordinal=2 sample_cap=4 sample_scope=request_lru128 local_ready=0 \
             local_filling=0 g3_fetchable=0 remote_fetchable=0 misses=3 opportunistic=False \
             hint_present=False hint_failed=None",
        )
        .unwrap();
        assert_eq!(d.request_id, "abc-1");
        assert!(!d.hint_present);
        assert_eq!((d.agent.as_str(), d.ordinal, d.sample_cap), ("a", 2, 4));
        assert_eq!(
            parse_key_event("KVCR inventory stored tier=G3 hashes=1"),
            None
        );
        assert_eq!(parse_engine_inventory("KVCR inventory sink failed"), None);
    }

    #[test]
    fn a_complete_agreeing_history_passes() {
        let r = KeyHistoryReading::read("B", &good_log(), counted(3));
        assert_eq!(r.key_history_lines, 4);
        assert_eq!(
            expect_key_history_reconciled(std::slice::from_ref(&r)),
            Ok(())
        );
    }

    #[test]
    fn no_key_history_at_all_fails_saying_it_was_asked_for() {
        let r = KeyHistoryReading::read("B", &engine(&[1]), counted(1));
        let e = expect_key_history_reconciled(std::slice::from_ref(&r)).unwrap_err();
        assert!(e.detail.contains("diagnostics were asked for"), "{e}");
    }

    #[test]
    fn a_source_without_key_history_beside_a_target_with_it_passes() {
        let source = KeyHistoryReading::read("A", "no diagnostics line", BTreeMap::new());
        let target = KeyHistoryReading::read("B", &good_log(), counted(3));
        assert_eq!(expect_key_history_reconciled(&[source, target]), Ok(()));
    }

    #[test]
    fn history_without_any_accepted_inventory_fails() {
        let log = history("ready", 1, "-", &[1]);
        let e =
            expect_key_history_reconciled(&[KeyHistoryReading::read("B", &log, BTreeMap::new())])
                .unwrap_err();
        assert!(e.detail.contains("no inventory_accepted event"), "{e}");
    }

    #[test]
    fn a_lost_line_fails() {
        let log = good_log().replace("sequence=3 ", "sequence=5 ");
        let e = expect_key_history_reconciled(&[KeyHistoryReading::read("B", &log, counted(3))])
            .unwrap_err();
        assert!(e.detail.contains("lost lines: kvcr-b pid 77"), "{e}");
        assert!(e.detail.contains("sequence 3 expected, 4 found"), "{e}");
    }

    #[test]
    fn a_history_that_does_not_start_at_one_fails() {
        let log = good_log().replace("sequence=1 ", "sequence=9 ");
        let r = KeyHistoryReading::read("B", &log, counted(3));
        assert_eq!(r.sequence_breaks().len(), 1);
    }

    #[test]
    fn an_inventory_event_with_the_wrong_key_fails() {
        let log = good_log().replacen(&key_digest(3), &key_digest(4), 2);
        let e = expect_key_history_reconciled(&[KeyHistoryReading::read("B", &log, counted(3))])
            .unwrap_err();
        assert!(e.detail.contains("LOCAL_G2/stored"), "{e}");
        assert!(e.detail.contains("only in the engine's"), "{e}");
    }

    #[test]
    fn a_counter_that_disagrees_fails() {
        let e =
            expect_key_history_reconciled(&[KeyHistoryReading::read("B", &good_log(), counted(4))])
                .unwrap_err();
        assert!(e.detail.contains("its counter"), "{e}");
    }

    #[test]
    fn an_event_the_engine_did_not_accept_fails() {
        let log = format!(
            "{}\n{}",
            good_log(),
            history("inventory_failed", 5, "stored", &[9])
        );
        let e = expect_key_history_reconciled(&[KeyHistoryReading::read("B", &log, counted(3))])
            .unwrap_err();
        assert!(e.detail.contains("did not accept"), "{e}");
    }

    #[test]
    fn query_decisions_must_name_each_request_with_the_right_hint() {
        let decided = |hint_present| DecidedRequest {
            name: "no_retain".into(),
            x_request_id: "x1".into(),
            hint_expected: false,
            decisions: vec![QueryDecision {
                request_id: "d1".into(),
                hint_present,
                agent: "a".into(),
                ordinal: 1,
                sample_cap: 4,
            }],
        };
        assert_eq!(expect_query_decisions(&[decided(false)]), Ok(()));
        let e = expect_query_decisions(&[decided(true)]).unwrap_err();
        assert!(e.detail.contains("hint_present=true"), "{e}");
        let none = DecidedRequest {
            decisions: vec![],
            ..decided(false)
        };
        assert!(expect_query_decisions(&[none]).is_err());
        assert!(expect_query_decisions(&[]).is_err());
    }

    /// A hint KVCR must accept (TC-22's `hash_beyond_63_bits`) is seen.
    #[test]
    fn a_request_whose_hint_must_be_kept_needs_hint_present() {
        let accepted = |hint_present| DecidedRequest {
            name: "hash_beyond_63_bits".into(),
            x_request_id: "x2".into(),
            hint_expected: true,
            decisions: vec![QueryDecision {
                request_id: "d2".into(),
                hint_present,
                agent: "b".into(),
                ordinal: 1,
                sample_cap: 4,
            }],
        };
        assert_eq!(expect_query_decisions(&[accepted(true)]), Ok(()));
        let e = expect_query_decisions(&[accepted(false)]).unwrap_err();
        assert!(
            e.detail.contains(
                "hash_beyond_63_bits (x-request-id x2): KVCR decided with \
                 hint_present=false where true was expected"
            ),
            "{e}"
        );
    }
}
