//! What a link condition's own mechanisms counted (the rules' packet
//! counters, the qdisc's statistics, the delayer's stats), read from the
//! kernel's listings; whether those counts show the condition took effect;
//! what is left after it came off; and the probes across the link.

use std::time::Duration;

use serde::Serialize;

use super::LinkCondition;
use crate::proc::net_delay::DelayStats;

/// A rule's packet and byte counters, as `iptables -L -v -n -x` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RuleCounter {
    pub packets: u64,
    pub bytes: u64,
}

/// The counters of the rules of `chain_listing` (`iptables -L CHAIN -v -n
/// -x`) that jump to `target` through interface `iface` (either column),
/// summed; `None` when no such rule is listed.
pub fn parse_rule_counter(chain_listing: &str, target: &str, iface: &str) -> Option<RuleCounter> {
    let mut found: Option<RuleCounter> = None;
    for line in chain_listing.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        // pkts bytes target prot opt in out source destination [match...]
        if cols.len() < 9 || cols[2] != target || (cols[5] != iface && cols[6] != iface) {
            continue;
        }
        let (Ok(packets), Ok(bytes)) = (cols[0].parse::<u64>(), cols[1].parse::<u64>()) else {
            continue;
        };
        let sum = found.get_or_insert_with(RuleCounter::default);
        sum.packets += packets;
        sum.bytes += bytes;
    }
    found
}

/// The statistics of a qdisc, as `tc -s qdisc show dev X` prints them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QdiscStats {
    /// `tbf`, `noqueue`, `pfifo_fast`, ...
    pub kind: String,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub dropped: u64,
    pub overlimits: u64,
}

/// The root qdisc of `tc -s qdisc show dev X`'s output; `None` when it
/// lists none.
pub fn parse_qdisc_stats(text: &str) -> Option<QdiscStats> {
    let mut lines = text.lines();
    let head = lines.find(|l| l.trim_start().starts_with("qdisc "))?;
    let kind = head.split_whitespace().nth(1)?.to_string();
    let mut stats = QdiscStats {
        kind,
        ..QdiscStats::default()
    };
    if let Some(sent) = lines.find(|l| l.trim_start().starts_with("Sent ")) {
        // Sent 1234 bytes 12 pkt (dropped 0, overlimits 3 requeues 0)
        let words: Vec<&str> = sent
            .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
            .filter(|w| !w.is_empty())
            .collect();
        let after = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        stats.sent_bytes = after("Sent");
        stats.sent_packets = words
            .iter()
            .position(|w| *w == "pkt")
            .and_then(|i| words.get(i - 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        stats.dropped = after("dropped");
        stats.overlimits = after("overlimits");
    }
    Some(stats)
}

/// What a condition's own mechanism counted so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ConditionCounters {
    /// The rule on `INPUT` (packets coming into node 1).
    pub input_rule: Option<RuleCounter>,
    /// The rule on `OUTPUT` (packets node 1 sends).
    pub output_rule: Option<RuleCounter>,
    /// The qdisc at the root of node 1's veth end.
    pub qdisc: Option<QdiscStats>,
    /// The delayer's own counts.
    pub delayer: Option<DelayStats>,
}

/// What a round of probes across the link measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProbeRound {
    /// TCP connects tried.
    pub tried: u32,
    /// Connects that did not complete within the probe's timeout.
    pub failed: u32,
    /// The median connect time of those that did, ms (one round trip).
    pub median_connect_ms: Option<f64>,
}

/// Whether `condition`, between two readings of its counters around probe
/// traffic, visibly took effect: its rules counted packets both ways (a
/// delay's delayer held packets too, and the probes' round trip grew by
/// at least the delay over `clean`), or its qdisc sent and held back
/// packets. `Err` says what did not move.
pub fn expect_applied(
    condition: &LinkCondition,
    before: &ConditionCounters,
    after: &ConditionCounters,
    clean: &ProbeRound,
    probed: &ProbeRound,
) -> Result<(), String> {
    let moved = |b: Option<RuleCounter>, a: Option<RuleCounter>| {
        a.map(|a| a.packets).unwrap_or(0) > b.map(|b| b.packets).unwrap_or(0)
    };
    let mut wrong = Vec::new();
    match condition {
        LinkCondition::Delay { .. } | LinkCondition::Loss { .. } => {
            let what = if matches!(condition, LinkCondition::Delay { .. }) {
                "queued"
            } else {
                "dropped"
            };
            if !moved(before.input_rule, after.input_rule) {
                wrong.push(format!(
                    "the INPUT rule {what} no packet (counter {:?})",
                    after.input_rule
                ));
            }
            if !moved(before.output_rule, after.output_rule) {
                wrong.push(format!(
                    "the OUTPUT rule {what} no packet (counter {:?})",
                    after.output_rule
                ));
            }
        }
        LinkCondition::RateCap { .. } => {
            let b = before.qdisc.clone().unwrap_or_default();
            match &after.qdisc {
                Some(a) if a.kind == "tbf" => {
                    if a.sent_packets <= b.sent_packets {
                        wrong.push(format!("the tbf qdisc sent no packet ({a:?})"));
                    }
                    if a.overlimits <= b.overlimits && a.dropped <= b.dropped {
                        wrong.push(format!(
                            "the tbf qdisc held back no packet: overlimits {} and dropped {} did not move",
                            a.overlimits, a.dropped
                        ));
                    }
                }
                other => wrong.push(format!("no tbf qdisc at the root of the veth: {other:?}")),
            }
        }
    }
    if let LinkCondition::Delay { delay_ms, .. } = condition {
        let held = |s: &Option<DelayStats>| s.as_ref().map_or(0, |s| s.released);
        if held(&after.delayer) <= held(&before.delayer) {
            wrong.push(format!("the delayer held no packet ({:?})", after.delayer));
        }
        match (clean.median_connect_ms, probed.median_connect_ms) {
            (Some(c), Some(p)) if p - c >= f64::from(*delay_ms) => {}
            (c, p) => wrong.push(format!(
                "a TCP connect across the link took {p:?} ms against {c:?} ms on the clean link: not {delay_ms} ms longer"
            )),
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// What was left of a condition after it was taken off; empty is clean.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Leftovers {
    /// Rules still listed (`iptables -S` lines other than policies).
    pub rules: Vec<String>,
    /// A root qdisc of the removed kind still on the veth.
    pub qdisc: Option<String>,
    /// The delayer, still running (its pid).
    pub delayer_pid: Option<u32>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.qdisc.is_none() && self.delayer_pid.is_none()
    }
}

/// The rules of an `iptables -S` listing (the `-A` lines).
pub fn listed_rules(listing: &str) -> Vec<String> {
    listing
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("-A "))
        .map(String::from)
        .collect()
}

/// `n` TCP connects to `address` (across the link), each given `timeout`:
/// how many failed and the median time of those that completed.
pub fn probe_connects(address: std::net::SocketAddr, n: u32, timeout: Duration) -> ProbeRound {
    let mut times: Vec<f64> = Vec::new();
    let mut failed = 0;
    for _ in 0..n {
        let started = std::time::Instant::now();
        match std::net::TcpStream::connect_timeout(&address, timeout) {
            Ok(_) => times.push(started.elapsed().as_secs_f64() * 1000.0),
            Err(_) => failed += 1,
        }
    }
    ProbeRound {
        tried: n,
        failed,
        median_connect_ms: crate::stats::quantile(&mut times, 0.5),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT_CHAIN: &str = "\
Chain OUTPUT (policy ACCEPT 120 packets, 9840 bytes)
    pkts      bytes target     prot opt in     out     source               destination
       3      252 DROP       0    --  *      kvn1f    0.0.0.0/0            0.0.0.0/0            statistic mode random probability 0.02999999980
       9      900 ACCEPT     0    --  *      lo       0.0.0.0/0            0.0.0.0/0
";
    const INPUT_CHAIN: &str = "\
Chain INPUT (policy ACCEPT 0 packets, 0 bytes)
    pkts      bytes target     prot opt in     out     source               destination
      41     4020 NFQUEUE    all  --  kvn1f  *       0.0.0.0/0            0.0.0.0/0            NFQUEUE num 14 bypass
";

    #[test]
    fn rule_counters_are_read_for_the_target_and_interface() {
        assert_eq!(
            parse_rule_counter(OUTPUT_CHAIN, "DROP", "kvn1f"),
            Some(RuleCounter {
                packets: 3,
                bytes: 252
            })
        );
        assert_eq!(
            parse_rule_counter(INPUT_CHAIN, "NFQUEUE", "kvn1f").map(|c| c.packets),
            Some(41)
        );
        assert_eq!(parse_rule_counter(OUTPUT_CHAIN, "DROP", "kvh1f"), None);
        assert_eq!(parse_rule_counter(OUTPUT_CHAIN, "NFQUEUE", "kvn1f"), None);
        assert_eq!(parse_rule_counter("", "DROP", "kvn1f"), None);
    }

    const TBF: &str = "\
qdisc tbf 8002: root refcnt 2 rate 1Mbit burst 16Kb lat 400ms
 Sent 123456 bytes 321 pkt (dropped 2, overlimits 57 requeues 0)
 backlog 0b 0p requeues 0
";

    #[test]
    fn qdisc_statistics_are_read_from_tc() {
        assert_eq!(
            parse_qdisc_stats(TBF),
            Some(QdiscStats {
                kind: "tbf".into(),
                sent_bytes: 123456,
                sent_packets: 321,
                dropped: 2,
                overlimits: 57
            })
        );
        assert_eq!(
            parse_qdisc_stats("qdisc noqueue 0: root refcnt 2\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)\n")
                .map(|q| q.kind),
            Some("noqueue".into())
        );
        assert_eq!(parse_qdisc_stats(""), None);
    }

    #[test]
    fn only_the_rules_of_a_listing_are_leftovers() {
        let listing = "-P INPUT ACCEPT\n-P OUTPUT ACCEPT\n-A OUTPUT -o kvn1f -j DROP\n";
        assert_eq!(listed_rules(listing), vec!["-A OUTPUT -o kvn1f -j DROP"]);
        assert!(listed_rules("-P INPUT ACCEPT\n").is_empty());
        assert!(Leftovers::default().is_empty());
        assert!(!Leftovers {
            delayer_pid: Some(7),
            ..Leftovers::default()
        }
        .is_empty());
    }

    fn rules(input: u64, output: u64) -> ConditionCounters {
        ConditionCounters {
            input_rule: Some(RuleCounter {
                packets: input,
                bytes: input * 60,
            }),
            output_rule: Some(RuleCounter {
                packets: output,
                bytes: output * 60,
            }),
            ..ConditionCounters::default()
        }
    }

    fn probe(ms: f64) -> ProbeRound {
        ProbeRound {
            tried: 10,
            failed: 0,
            median_connect_ms: Some(ms),
        }
    }

    #[test]
    fn a_loss_whose_rules_counted_both_ways_is_applied_else_not() {
        let loss = LinkCondition::Loss { percent: 3.0 };
        assert!(
            expect_applied(&loss, &rules(0, 0), &rules(2, 1), &probe(0.2), &probe(0.2)).is_ok()
        );
        let one_way = expect_applied(&loss, &rules(0, 0), &rules(0, 4), &probe(0.2), &probe(0.2))
            .unwrap_err();
        assert!(
            one_way.contains("the INPUT rule dropped no packet"),
            "{one_way}"
        );
        let none = expect_applied(
            &loss,
            &ConditionCounters::default(),
            &ConditionCounters::default(),
            &probe(0.2),
            &probe(0.2),
        )
        .unwrap_err();
        assert!(none.contains("OUTPUT rule dropped no packet"), "{none}");
    }

    #[test]
    fn a_delay_needs_queued_packets_a_busy_delayer_and_a_longer_round_trip() {
        let delay = LinkCondition::Delay {
            delay_ms: 20,
            jitter_ms: 10,
        };
        let held = |n| DelayStats {
            released: n,
            ..DelayStats::default()
        };
        let before = ConditionCounters {
            delayer: Some(held(0)),
            ..rules(0, 0)
        };
        let after = ConditionCounters {
            delayer: Some(held(40)),
            ..rules(20, 20)
        };
        assert!(expect_applied(&delay, &before, &after, &probe(0.3), &probe(40.5)).is_ok());
        let not_slower =
            expect_applied(&delay, &before, &after, &probe(0.3), &probe(5.0)).unwrap_err();
        assert!(not_slower.contains("not 20 ms longer"), "{not_slower}");
        let idle = ConditionCounters {
            delayer: Some(held(0)),
            ..rules(20, 20)
        };
        assert!(
            expect_applied(&delay, &before, &idle, &probe(0.3), &probe(40.0))
                .unwrap_err()
                .contains("the delayer held no packet")
        );
    }

    #[test]
    fn a_rate_cap_needs_a_tbf_that_sent_and_held_back() {
        let rate = LinkCondition::RateCap { kbit: 1000 };
        let tbf = |sent, over| ConditionCounters {
            qdisc: Some(QdiscStats {
                kind: "tbf".into(),
                sent_packets: sent,
                overlimits: over,
                ..QdiscStats::default()
            }),
            ..ConditionCounters::default()
        };
        assert!(expect_applied(&rate, &tbf(0, 0), &tbf(300, 12), &probe(0.2), &probe(0.2)).is_ok());
        assert!(
            expect_applied(&rate, &tbf(0, 0), &tbf(300, 0), &probe(0.2), &probe(0.2))
                .unwrap_err()
                .contains("held back no packet")
        );
        let gone = ConditionCounters {
            qdisc: Some(QdiscStats {
                kind: "noqueue".into(),
                ..QdiscStats::default()
            }),
            ..ConditionCounters::default()
        };
        assert!(
            expect_applied(&rate, &tbf(0, 0), &gone, &probe(0.2), &probe(0.2))
                .unwrap_err()
                .contains("no tbf qdisc")
        );
    }
}
