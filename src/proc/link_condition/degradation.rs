//! A condition put on a node's veth end and taken off again, checked.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::counters::{
    listed_rules, parse_qdisc_stats, parse_rule_counter, ConditionCounters, Leftovers,
};
use super::{LinkCondition, Rule, DELAY_QUEUE};
use crate::proc::net_delay::{DelayArgs, DelayStats, BOUND_LINE};
use crate::proc::netns::{NamespaceNode, NodeError};
use crate::proc::{ProcessSpec, Supervised};
use crate::wait::{self, Poll};

/// A condition on node 1's link, until [`Degradation::remove`] (or drop).
pub struct Degradation<'n> {
    node: &'n NamespaceNode,
    /// The node's interface it is on (its veth end).
    iface: String,
    pub condition: LinkCondition,
    rules: Vec<Rule>,
    qdisc_added: bool,
    delayer: Option<Supervised>,
    delayer_stats: Option<PathBuf>,
    removed: bool,
}

impl<'n> Degradation<'n> {
    /// Puts `condition` on `node`'s veth end: starts the delayer (a delay;
    /// `harness` is the `kvcr-e2e` binary, its log and stats in
    /// `logs_dir`) and waits until its queue is bound, then adds the rules
    /// or the qdisc. On an error, whatever was added is taken off again.
    pub fn apply(
        node: &'n NamespaceNode,
        condition: LinkCondition,
        harness: &Path,
        logs_dir: &Path,
    ) -> Result<Self, NodeError> {
        Self::apply_on(node, &node.node_interface(), condition, harness, logs_dir)
    }

    /// [`Degradation::apply`] on the node's interface `iface` (its veth
    /// end; another, such as `lo`, only as a fault of the harness whose
    /// condition must then be found not applied).
    pub fn apply_on(
        node: &'n NamespaceNode,
        iface: &str,
        condition: LinkCondition,
        harness: &Path,
        logs_dir: &Path,
    ) -> Result<Self, NodeError> {
        let iface = iface.to_string();
        let mut applied = Self {
            node,
            iface: iface.clone(),
            condition,
            rules: Vec::new(),
            qdisc_added: false,
            delayer: None,
            delayer_stats: None,
            removed: false,
        };
        let result = applied.add(&iface, harness, logs_dir);
        match result {
            Ok(()) => Ok(applied),
            Err(e) => {
                let _ = applied.remove();
                Err(e)
            }
        }
    }

    fn add(&mut self, iface: &str, harness: &Path, logs_dir: &Path) -> Result<(), NodeError> {
        if let LinkCondition::Delay {
            delay_ms,
            jitter_ms,
        } = self.condition
        {
            let stats = logs_dir.join("net-delay-stats.json");
            let _ = std::fs::remove_file(&stats);
            let args = DelayArgs {
                queue: DELAY_QUEUE,
                delay_ms,
                jitter_ms,
                stats: stats.clone(),
                seed: 14,
            };
            let spec = ProcessSpec::new("net-delay", harness, logs_dir.join("net-delay.log"))
                .arg("net-delay")
                .args(args.to_args());
            let delayer = Supervised::spawn(&self.node.wrap(spec))?;
            self.delayer_stats = Some(stats.clone());
            let pid = delayer.pid();
            self.delayer = Some(delayer);
            let delayer = self.delayer.as_ref().expect("just set");
            wait::until(
                format!("the delayer (pid {pid}) to bind queue {DELAY_QUEUE}"),
                Duration::from_secs(10),
                Duration::from_millis(20),
                || {
                    if let Some(status) = delayer.exit_status() {
                        return Poll::Abort(format!(
                            "it exited ({status}): {}",
                            delayer.log_tail_since_spawn(10)
                        ));
                    }
                    if delayer.log_tail_since_spawn(5).contains(BOUND_LINE)
                        && DelayStats::read(&stats).is_some()
                    {
                        Poll::Ready(())
                    } else {
                        Poll::Pending("no bound line and stats file yet".into())
                    }
                },
            )
            .map_err(|e| NodeError::Setup(e.to_string()))?;
        }
        for rule in self.condition.rules(iface) {
            let args = rule.args("-A");
            self.node.run_in_net("iptables", &as_strs(&args))?;
            self.rules.push(rule);
        }
        if let Some(args) = self.condition.qdisc(iface) {
            self.node.run_in_net("tc", &as_strs(&args))?;
            self.qdisc_added = true;
        }
        Ok(())
    }

    /// The kernel's and the delayer's counts now.
    pub fn counters(&self) -> ConditionCounters {
        let iface = self.iface.clone();
        let rule = |chain: &str| {
            let target = self.condition.target()?;
            let listing = self
                .node
                .run_in_net("iptables", &["-L", chain, "-v", "-n", "-x"])
                .ok()?;
            parse_rule_counter(&listing, target, &iface)
        };
        ConditionCounters {
            input_rule: rule("INPUT"),
            output_rule: rule("OUTPUT"),
            qdisc: self
                .node
                .run_in_net("tc", &["-s", "qdisc", "show", "dev", &iface])
                .ok()
                .and_then(|t| parse_qdisc_stats(&t)),
            delayer: self.delayer_stats.as_deref().and_then(DelayStats::read),
        }
    }

    /// Takes the condition off (rules first, so no packet is queued to a
    /// delayer that is stopping; then the delayer, which accepts what it
    /// holds; then the qdisc) and checks that nothing of it is left.
    /// `Err` lists what is.
    pub fn remove(&mut self) -> Result<Leftovers, NodeError> {
        self.removed = true;
        let iface = self.iface.clone();
        let mut errors = Vec::new();
        for rule in std::mem::take(&mut self.rules) {
            if let Err(e) = self.node.run_in_net("iptables", &as_strs(&rule.args("-D"))) {
                errors.push(e.to_string());
            }
        }
        let mut delayer_pid = None;
        if let Some(delayer) = self.delayer.take() {
            let report = delayer.stop(Duration::from_secs(5));
            if report.needed_sigkill {
                errors.push(format!(
                    "the delayer (pid {}) needed SIGKILL to stop",
                    report.pid
                ));
            }
            if delayer.is_running() {
                delayer_pid = Some(report.pid);
            }
            let exited = self
                .delayer_stats
                .as_deref()
                .and_then(DelayStats::read)
                .is_some_and(|s| s.exited);
            if !exited && !report.needed_sigkill {
                errors.push(format!(
                    "the delayer (pid {}) did not record its exit (it did not release what it held)",
                    report.pid
                ));
            }
        }
        if std::mem::take(&mut self.qdisc_added) {
            if let Err(e) = self
                .node
                .run_in_net("tc", &["qdisc", "del", "dev", &iface, "root"])
            {
                errors.push(e.to_string());
            }
        }
        let leftovers = Leftovers {
            rules: self
                .node
                .run_in_net("iptables", &["-S"])
                .map(|l| listed_rules(&l))
                .map_err(|e| errors.push(e.to_string()))
                .unwrap_or_default(),
            qdisc: self
                .node
                .run_in_net("tc", &["qdisc", "show", "dev", &iface])
                .ok()
                .and_then(|t| parse_qdisc_stats(&t))
                .map(|q| q.kind)
                .filter(|k| k == "tbf"),
            delayer_pid,
        };
        if !leftovers.is_empty() {
            errors.push(format!("left behind: {leftovers:?}"));
        }
        if errors.is_empty() {
            Ok(leftovers)
        } else {
            Err(NodeError::Setup(format!(
                "taking off {}: {}",
                self.condition.label(),
                errors.join("; ")
            )))
        }
    }

    /// The delayer's stats file, when the condition has one.
    pub fn delayer_stats_path(&self) -> Option<&Path> {
        self.delayer_stats.as_deref()
    }
}

impl Drop for Degradation<'_> {
    fn drop(&mut self) {
        if !self.removed {
            if let Err(e) = self.remove() {
                tracing::warn!("{e}");
            }
        }
    }
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
