//! A degraded link between the two nodes (TC-14): delay with jitter, loss,
//! or a rate cap on node 1's end of the run's veth, one at a time, built
//! from what this kernel has (no `netem`):
//!
//! - **delay ± jitter**: iptables `NFQUEUE` rules in node 1's namespace
//!   (`INPUT -i <veth>` and `OUTPUT -o <veth>`: both directions) hand the
//!   packets to the delayer ([`super::net_delay`]), started inside the node,
//!   which holds each for `delay ± jitter`; a round trip gains about twice
//!   the delay;
//! - **loss**: iptables `statistic --mode random` `DROP` rules on the same
//!   two chains: each direction loses the given share of its packets;
//! - **rate cap**: a `tbf` qdisc at the root of node 1's end of the veth:
//!   what node 1 sends (a peer transfer's data, source B → target A) is
//!   shaped to the rate.
//!
//! Everything lives in node 1's own network namespace, on the run's own
//! veth: never this host's interfaces or tables. [`Degradation::counters`]
//! reads the kernel's own counts (the rules' packet counters, the qdisc's
//! statistics) and the delayer's; [`Degradation::remove`] takes the
//! condition off and checks that nothing of it is left.

mod counters;
mod degradation;

use serde::Serialize;

pub use counters::{
    expect_applied, listed_rules, parse_qdisc_stats, parse_rule_counter, probe_connects,
    ConditionCounters, Leftovers, ProbeRound, QdiscStats, RuleCounter,
};
pub use degradation::Degradation;

/// The NFQUEUE queue the delayer serves (the node's namespace is the run's
/// own, so no other program uses it).
pub const DELAY_QUEUE: u16 = 14;

/// One condition of a degraded link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LinkCondition {
    /// Each packet, either way, held `delay_ms ± jitter_ms` (uniform).
    Delay { delay_ms: u32, jitter_ms: u32 },
    /// Each packet, either way, dropped with probability `percent` / 100.
    Loss { percent: f64 },
    /// What node 1 sends shaped to `kbit` kbit/s (`tbf`).
    RateCap { kbit: u32 },
}

impl LinkCondition {
    /// A short name for file names and tables: `delay`, `loss`, `rate_cap`.
    pub fn slug(&self) -> &'static str {
        match self {
            LinkCondition::Delay { .. } => "delay",
            LinkCondition::Loss { .. } => "loss",
            LinkCondition::RateCap { .. } => "rate_cap",
        }
    }

    /// What it does, for people: `delay 20 ± 10 ms each way`.
    pub fn label(&self) -> String {
        match self {
            LinkCondition::Delay {
                delay_ms,
                jitter_ms,
            } => format!("delay {delay_ms} ± {jitter_ms} ms each way"),
            LinkCondition::Loss { percent } => format!("loss {percent} % each way"),
            LinkCondition::RateCap { kbit } => format!("rate cap {kbit} kbit/s out of node 1"),
        }
    }

    /// The iptables rules (chain and rule specification, without `-A`/`-D`)
    /// that build it on the node's veth `iface`; none for a rate cap.
    pub fn rules(&self, iface: &str) -> Vec<Rule> {
        let target: Vec<String> = match self {
            LinkCondition::Delay { .. } => [
                "-j",
                "NFQUEUE",
                "--queue-num",
                &DELAY_QUEUE.to_string(),
                "--queue-bypass",
            ]
            .map(String::from)
            .to_vec(),
            LinkCondition::Loss { percent } => vec![
                "-m".into(),
                "statistic".into(),
                "--mode".into(),
                "random".into(),
                "--probability".into(),
                format!("{:.4}", percent / 100.0),
                "-j".into(),
                "DROP".into(),
            ],
            LinkCondition::RateCap { .. } => return Vec::new(),
        };
        [("INPUT", "-i"), ("OUTPUT", "-o")]
            .into_iter()
            .map(|(chain, side)| Rule {
                chain,
                spec: [side.to_string(), iface.to_string()]
                    .into_iter()
                    .chain(target.iter().cloned())
                    .collect(),
            })
            .collect()
    }

    /// `tc qdisc add` arguments of a rate cap on `iface`; `None` for the
    /// other conditions. The burst (4 KiB) holds two full-size packets, so
    /// any reply of a few KiB already waits for tokens; a packet that would
    /// wait past 400 ms is dropped.
    pub fn qdisc(&self, iface: &str) -> Option<Vec<String>> {
        match self {
            LinkCondition::RateCap { kbit } => Some(
                [
                    "qdisc",
                    "add",
                    "dev",
                    iface,
                    "root",
                    "tbf",
                    "rate",
                    &format!("{kbit}kbit"),
                    "burst",
                    "4kb",
                    "latency",
                    "400ms",
                ]
                .map(String::from)
                .to_vec(),
            ),
            _ => None,
        }
    }

    /// The iptables target its rules jump to.
    fn target(&self) -> Option<&'static str> {
        match self {
            LinkCondition::Delay { .. } => Some("NFQUEUE"),
            LinkCondition::Loss { .. } => Some("DROP"),
            LinkCondition::RateCap { .. } => None,
        }
    }
}

/// One iptables rule: its chain and its specification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub chain: &'static str,
    pub spec: Vec<String>,
}

impl Rule {
    fn args(&self, op: &str) -> Vec<String> {
        [op.to_string(), self.chain.to_string()]
            .into_iter()
            .chain(self.spec.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_condition_builds_its_own_rules_or_qdisc_both_ways() {
        let delay = LinkCondition::Delay {
            delay_ms: 20,
            jitter_ms: 10,
        };
        let rules = delay.rules("kvn1f");
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules[0].args("-A").join(" "),
            "-A INPUT -i kvn1f -j NFQUEUE --queue-num 14 --queue-bypass"
        );
        assert_eq!(
            rules[1].args("-D").join(" "),
            "-D OUTPUT -o kvn1f -j NFQUEUE --queue-num 14 --queue-bypass"
        );
        assert!(delay.qdisc("kvn1f").is_none());
        let loss = LinkCondition::Loss { percent: 3.0 };
        assert_eq!(
            loss.rules("kvn1f")[1].args("-A").join(" "),
            "-A OUTPUT -o kvn1f -m statistic --mode random --probability 0.0300 -j DROP"
        );
        let rate = LinkCondition::RateCap { kbit: 1000 };
        assert!(rate.rules("kvn1f").is_empty());
        assert_eq!(
            rate.qdisc("kvn1f").unwrap().join(" "),
            "qdisc add dev kvn1f root tbf rate 1000kbit burst 4kb latency 400ms"
        );
        assert_eq!(delay.label(), "delay 20 ± 10 ms each way");
        assert_eq!(
            [delay.slug(), loss.slug(), rate.slug()],
            ["delay", "loss", "rate_cap"]
        );
    }
}
