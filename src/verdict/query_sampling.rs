//! KVCR's query decisions as a sample (TC-22, on a stack with
//! `cpu_engine.kvcr_diagnostics`): KVCR 0.1.1 logs a request's first four
//! queries (`KVCR_EVENT query_decision ... query_ordinal=N sample_cap=4
//! sample_scope=request_lru128`), numbered 1 to 4, and none after; each
//! KVCR instance counts per request id, the counts kept for its 128 most
//! recent request ids (a request evicted from them is counted afresh).
//!
//! The claims: every line declares the cap of 4 and an ordinal within it;
//! each request's ordinals on each KVCR instance run 1, 2, ... without a
//! gap, each once unless the instance saw more request ids than it keeps;
//! and a request the case queried more often than the cap has exactly the
//! ordinals 1 to 4. That request is what makes the check bite: without
//! it, or with none of its lines, the check fails.

use std::collections::BTreeMap;

use serde::Serialize;

use super::key_history::{is_query_decision, parse_query_decision};
use super::{Checks, Violation};

/// Claim: KVCR samples each request's query decisions as its line says.
pub const QUERY_DECISIONS_SAMPLED: &str =
    "KVCR logs the first four query decisions of each request, numbered 1 to 4, and no more";

/// The sample cap KVCR 0.1.1 declares (`sample_cap=4`).
pub const SAMPLE_CAP: u32 = 4;
/// How many request ids each KVCR instance keeps a count for
/// (`sample_scope=request_lru128`).
pub const SAMPLE_SCOPE: usize = 128;

/// One worker's query decision lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QuerySampling {
    pub worker: String,
    /// Per KVCR instance (its agent), per request id: the ordinals logged,
    /// in log order.
    pub ordinals: BTreeMap<String, BTreeMap<String, Vec<u32>>>,
    /// Each `sample_cap` value declared, with its number of lines.
    pub sample_caps: BTreeMap<u32, u64>,
    /// Query decision lines that do not parse.
    pub unreadable: Vec<String>,
}

impl QuerySampling {
    /// Reads `log`, the whole log of `worker`.
    pub fn read(worker: &str, log: &str) -> Self {
        let mut r = QuerySampling {
            worker: worker.to_string(),
            ..Default::default()
        };
        for line in log.lines().filter(|l| is_query_decision(l)) {
            let Some(d) = parse_query_decision(line) else {
                r.unreadable.push(line.to_string());
                continue;
            };
            *r.sample_caps.entry(d.sample_cap).or_default() += 1;
            r.ordinals
                .entry(d.agent)
                .or_default()
                .entry(d.request_id)
                .or_default()
                .push(d.ordinal);
        }
        r
    }

    /// How many query decision lines were read.
    pub fn lines(&self) -> u64 {
        self.sample_caps.values().sum::<u64>() + self.unreadable.len() as u64
    }

    /// The ordinals logged for `request_id`, on any KVCR instance of this
    /// worker, in log order.
    pub fn ordinals_of(&self, request_id: &str) -> Vec<u32> {
        self.ordinals
            .values()
            .filter_map(|requests| requests.get(request_id))
            .flatten()
            .copied()
            .collect()
    }
}

/// What is wrong with one request's `ordinals` on one KVCR instance
/// (`may_repeat`: the instance saw more request ids than it keeps, so a
/// request may have been counted afresh).
fn ordinal_fault(ordinals: &[u32], may_repeat: bool) -> Option<String> {
    if let Some(out) = ordinals.iter().find(|&&o| o == 0 || o > SAMPLE_CAP) {
        return Some(format!(
            "ordinal {out} is outside 1..={SAMPLE_CAP}, the sample cap"
        ));
    }
    // Lines of concurrent queries may be logged out of order: count them.
    let count = |o: u32| ordinals.iter().filter(|&&x| x == o).count();
    if let Some(gap) = (2..=SAMPLE_CAP).find(|&o| count(o) > count(o - 1)) {
        return Some(format!(
            "ordinal {gap} logged {} times, ordinal {} {} times",
            count(gap),
            gap - 1,
            count(gap - 1)
        ));
    }
    if !may_repeat && count(1) > 1 {
        return Some(format!(
            "ordinal 1 logged {} times, though KVCR kept every request's count",
            count(1)
        ));
    }
    None
}

/// Where one worker's query decisions break KVCR's sampling (empty when
/// they keep to it).
pub fn sampling_faults(r: &QuerySampling) -> Vec<String> {
    let w = &r.worker;
    let mut found: Vec<String> = r
        .sample_caps
        .iter()
        .filter(|(cap, _)| **cap != SAMPLE_CAP)
        .map(|(cap, n)| format!("worker {w}: {n} lines declare sample_cap={cap}"))
        .collect();
    if let Some(line) = r.unreadable.first() {
        found.push(format!(
            "worker {w}: {} query decision lines do not parse, the first: {line}",
            r.unreadable.len()
        ));
    }
    for (agent, requests) in &r.ordinals {
        let may_repeat = requests.len() > SAMPLE_SCOPE;
        for (request, ordinals) in requests {
            if let Some(fault) = ordinal_fault(ordinals, may_repeat) {
                found.push(format!(
                    "worker {w}, {agent}, request {request}: ordinals {ordinals:?}: {fault}"
                ));
            }
        }
    }
    found
}

/// A request the case queried KVCR for, under its own id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SampledRequest {
    pub worker: String,
    pub request_id: String,
    /// How many queries the engine answered for it.
    pub queries: u32,
}

/// Each worker's query decisions keep to KVCR's sampling, and `sampled`,
/// queried past the cap, logged exactly ordinals 1 to 4.
pub fn expect_query_sampling(
    readings: &[QuerySampling],
    sampled: &SampledRequest,
) -> Result<(), Violation> {
    let mut c = Checks::new(QUERY_DECISIONS_SAMPLED);
    let lines: u64 = readings.iter().map(QuerySampling::lines).sum();
    c.check(lines > 0, || {
        "no worker's log has a KVCR_EVENT query_decision line".into()
    });
    for r in readings {
        for fault in sampling_faults(r) {
            c.check(false, || fault);
        }
    }
    c.check(sampled.queries > SAMPLE_CAP, || {
        format!(
            "request {} was queried {} times: no more than the sample cap of {SAMPLE_CAP}, so \
             nothing tests the cap",
            sampled.request_id, sampled.queries
        )
    });
    let logged = readings
        .iter()
        .find(|r| r.worker == sampled.worker)
        .map(|r| r.ordinals_of(&sampled.request_id))
        .unwrap_or_default();
    let expected: Vec<u32> = (1..=sampled.queries.min(SAMPLE_CAP)).collect();
    let mut sorted = logged.clone();
    sorted.sort_unstable();
    c.check(sorted == expected, || {
        format!(
            "request {} was queried {} times on worker {}: KVCR logged ordinals {logged:?}, \
             {expected:?} expected",
            sampled.request_id, sampled.queries, sampled.worker
        )
    });
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(agent: &str, request: &str, ordinal: u32) -> String {
        format!(
            "2026-12-06 10:00:00,000 B kvcr.core DEBUG KVCR_EVENT query_decision \
             request_id={request} agent={agent} keys=1 query_ordinal={ordinal} sample_cap=4 \
             sample_scope=request_lru128 local_ready=0 local_filling=0 g3_fetchable=0 \
             remote_fetchable=0 misses=1 opportunistic=False hint_present=False hint_failed=None"
        )
    }

    fn log(lines: &[(&str, &str, u32)]) -> String {
        lines
            .iter()
            .map(|(a, r, o)| line(a, r, *o))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn sampled(queries: u32) -> SampledRequest {
        SampledRequest {
            worker: "B".into(),
            request_id: "probe".into(),
            queries,
        }
    }

    /// KVCR 0.1.1 on a probe queried six times, beside a one-query request
    /// and the engine's own queries without a request id.
    fn good_log() -> String {
        log(&[
            ("b", "None", 1),
            ("b", "r1", 1),
            ("b", "None", 2),
            ("b", "probe", 1),
            ("b", "probe", 2),
            ("b", "None", 3),
            ("b", "probe", 3),
            ("b", "probe", 4),
            ("b", "None", 4),
        ])
    }

    #[test]
    fn a_sample_within_the_cap_passes() {
        let r = QuerySampling::read("B", &good_log());
        assert_eq!(r.lines(), 9);
        assert_eq!(r.ordinals_of("probe"), vec![1, 2, 3, 4]);
        assert_eq!(expect_query_sampling(&[r], &sampled(6)), Ok(()));
    }

    #[test]
    fn a_probe_logged_past_the_cap_fails() {
        // `if ordinal != 4`: the fourth query is not logged, the fifth and
        // sixth are, as ordinal 5.
        let text = log(&[
            ("b", "probe", 1),
            ("b", "probe", 2),
            ("b", "probe", 3),
            ("b", "probe", 5),
            ("b", "probe", 5),
        ]);
        let e = expect_query_sampling(&[QuerySampling::read("B", &text)], &sampled(6)).unwrap_err();
        assert!(e.detail.contains("ordinal 5 is outside 1..=4"), "{e}");
        assert!(e.detail.contains("[1, 2, 3, 4] expected"), "{e}");
    }

    #[test]
    fn a_probe_logged_only_from_its_fifth_query_fails() {
        let text = format!("{}\n{}", line("b", "r1", 1), log(&[("b", "probe", 5)]));
        let e = expect_query_sampling(&[QuerySampling::read("B", &text)], &sampled(6)).unwrap_err();
        assert!(e.detail.contains("ordinals [5]"), "{e}");
    }

    #[test]
    fn a_probe_without_lines_or_within_the_cap_fails() {
        let r = QuerySampling::read("B", &line("b", "r1", 1));
        let e = expect_query_sampling(std::slice::from_ref(&r), &sampled(6)).unwrap_err();
        assert!(e.detail.contains("logged ordinals []"), "{e}");
        let probe = log(&[("b", "probe", 1), ("b", "probe", 2)]);
        let e =
            expect_query_sampling(&[QuerySampling::read("B", &probe)], &sampled(2)).unwrap_err();
        assert!(e.detail.contains("nothing tests the cap"), "{e}");
    }

    #[test]
    fn no_line_at_all_fails() {
        let e = expect_query_sampling(&[QuerySampling::read("B", "")], &sampled(6)).unwrap_err();
        assert!(e.detail.contains("no worker's log"), "{e}");
    }

    #[test]
    fn a_gap_a_repeat_or_another_cap_fails() {
        let gap = QuerySampling::read("B", &log(&[("b", "None", 1), ("b", "None", 3)]));
        assert_eq!(
            sampling_faults(&gap).len(),
            1,
            "{:?}",
            sampling_faults(&gap)
        );
        let repeat = QuerySampling::read("B", &log(&[("b", "r1", 1), ("b", "r1", 1)]));
        assert!(sampling_faults(&repeat)[0].contains("ordinal 1 logged 2 times"));
        let cap = QuerySampling::read("B", &line("b", "r1", 1).replace("cap=4", "cap=5"));
        assert!(sampling_faults(&cap)[0].contains("sample_cap=5"));
        let torn = QuerySampling::read("B", "x KVCR_EVENT query_decision request_id=r1");
        assert!(sampling_faults(&torn)[0].contains("do not parse"));
    }

    #[test]
    fn instances_count_apart_and_out_of_order_lines_pass() {
        // A restarted worker's new KVCR (another agent) counts afresh;
        // concurrent queries may log 2 before 1.
        let text = log(&[("b-1", "None", 1), ("b-2", "None", 2), ("b-2", "None", 1)]);
        assert!(sampling_faults(&QuerySampling::read("B", &text)).is_empty());
    }

    #[test]
    fn a_request_counted_afresh_passes_only_past_the_scope() {
        let mut lines = vec![("b", "None".to_string(), 1), ("b", "None".to_string(), 2)];
        let restart = || ("b", "None".to_string(), 1);
        let within: Vec<_> = lines.iter().cloned().chain([restart()]).collect();
        let text = |ls: &[(&str, String, u32)]| {
            ls.iter()
                .map(|(a, r, o)| line(a, r, *o))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(!sampling_faults(&QuerySampling::read("B", &text(&within))).is_empty());
        lines.extend((0..SAMPLE_SCOPE).map(|i| ("b", format!("r{i}"), 1)));
        lines.push(restart());
        assert!(sampling_faults(&QuerySampling::read("B", &text(&lines))).is_empty());
    }
}
