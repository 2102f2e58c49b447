//! A degraded link between the two nodes as a case's fault (TC-14): one
//! [`LinkCondition`] on node 1's veth end, verified before the case relies
//! on it, and taken off (checked: no rule, qdisc or delayer left) by
//! [`LinkDegradation::remove`] or on drop.
//!
//! Verification: probe traffic across the link to a listener on node 1
//! (TCP connects, and an HTTP GET of its metrics, large enough to exceed a
//! rate cap's burst) until the condition's own counters moved: both
//! rules' packet counters (loss, delay), the delayer's count of packets
//! held and a round trip longer by the delay (delay), the `tbf` qdisc's
//! sent and overlimit counters (rate cap). A condition whose counters did
//! not move within [`VERIFY_BUDGET`] is "fault not applied".

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::proc::link_condition::{
    expect_applied, probe_connects, ConditionCounters, Degradation, LinkCondition, ProbeRound,
};
use crate::stack::Stack;
use crate::wait::{self, Poll};

use super::CaseError;

/// How long probe traffic may take to show the condition in its counters.
pub const VERIFY_BUDGET: Duration = Duration::from_secs(20);
/// Connects per probe round, and how long each may take.
const PROBES: u32 = 8;
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Set while [`ConditionsOffTheLink`] lives.
static OFF_THE_LINK: AtomicBool = AtomicBool::new(false);

/// A fault of the harness itself, for the fault matrix: while this lives,
/// every condition goes on node 1's loopback instead of its veth, so it
/// takes no effect on the link and must be found "not applied".
pub struct ConditionsOffTheLink(());

impl ConditionsOffTheLink {
    pub fn now() -> Self {
        OFF_THE_LINK.store(true, Ordering::SeqCst);
        ConditionsOffTheLink(())
    }
}

impl Drop for ConditionsOffTheLink {
    fn drop(&mut self) {
        OFF_THE_LINK.store(false, Ordering::SeqCst);
    }
}

/// A condition on node 1's link, verified; taken off on [`Self::remove`]
/// or drop.
pub struct LinkDegradation<'a> {
    inner: Degradation<'a>,
    /// What verified it.
    pub applied: AppliedCondition,
}

/// The evidence that a condition took effect.
#[derive(Debug, Clone, Serialize)]
pub struct AppliedCondition {
    pub condition: LinkCondition,
    pub label: String,
    /// Connects to node 1 before the condition.
    pub clean_probe: ProbeRound,
    /// The probe round that showed it.
    pub probe: ProbeRound,
    /// Its counters right after it was put on, and once verified.
    pub counters_at_start: ConditionCounters,
    pub counters_verified: ConditionCounters,
}

/// What was counted while a condition was on, and that it came off clean.
#[derive(Debug, Clone, Serialize)]
pub struct RemovedCondition {
    pub label: String,
    /// Its counters just before it was taken off.
    pub counters_at_end: ConditionCounters,
    /// Connects to node 1 after it came off.
    pub probe_after: ProbeRound,
}

impl<'a> LinkDegradation<'a> {
    /// Puts `condition` on node 1's veth and verifies it with traffic to
    /// `listener` (an address on node 1) and `bulk_url` (a URL node 1
    /// serves, fetched for bulk data).
    pub fn now(
        stack: &'a Stack,
        condition: LinkCondition,
        listener: SocketAddr,
        bulk_url: &str,
        logs_dir: PathBuf,
    ) -> Result<Self, CaseError> {
        let node = stack.namespace_node().ok_or_else(|| {
            CaseError::new("this fault needs a two-node stack (--topology two-node)")
        })?;
        let harness = crate::proc::net_delay::harness_binary()
            .map_err(|e| CaseError::fault_not_applied(format!("{}: {e}", condition.label())))?;
        let clean_probe = probe_connects(listener, PROBES, PROBE_TIMEOUT);
        let iface = match OFF_THE_LINK.load(Ordering::SeqCst) {
            true => "lo".to_string(),
            false => node.node_interface(),
        };
        let inner = Degradation::apply_on(node, &iface, condition, &harness, &logs_dir)
            .map_err(|e| CaseError::fault_not_applied(format!("{}: {e}", condition.label())))?;
        let counters_at_start = inner.counters();
        let mut last = (ProbeRound::default(), ConditionCounters::default());
        let verified = wait::until(
            format!("{} to show in its counters", condition.label()),
            VERIFY_BUDGET,
            Duration::from_millis(10),
            || {
                let probe = probe_connects(listener, PROBES, PROBE_TIMEOUT);
                fetch(bulk_url);
                let now = inner.counters();
                let verdict =
                    expect_applied(&condition, &counters_at_start, &now, &clean_probe, &probe);
                last = (probe, now);
                match verdict {
                    Ok(()) => Poll::Ready(()),
                    Err(missing) => Poll::Pending(missing),
                }
            },
        );
        let (probe, counters_verified) = last;
        // On an error `inner` is dropped here, which takes the condition off.
        verified.map_err(|e| CaseError::fault_not_applied(e.to_string()))?;
        Ok(Self {
            applied: AppliedCondition {
                condition,
                label: condition.label(),
                clean_probe,
                probe,
                counters_at_start,
                counters_verified,
            },
            inner,
        })
    }

    /// The condition's counters now.
    pub fn counters(&self) -> ConditionCounters {
        self.inner.counters()
    }

    /// Takes the condition off and checks nothing of it is left; probes the
    /// link once more (`listener`).
    pub fn remove(mut self, listener: SocketAddr) -> Result<RemovedCondition, CaseError> {
        let counters_at_end = self.inner.counters();
        self.inner.remove().map_err(|e| {
            CaseError::new(format!("the degraded link was not cleanly restored: {e}"))
        })?;
        Ok(RemovedCondition {
            label: self.applied.label.clone(),
            counters_at_end,
            probe_after: probe_connects(listener, PROBES, PROBE_TIMEOUT),
        })
    }
}

/// One GET of `url`, its body read and dropped (probe traffic; a failure
/// under loss is expected and counts as traffic too).
fn fetch(url: &str) {
    let url = url.to_string();
    let _ = crate::rt::block_on(async move {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| e.to_string())?;
        let response = client.get(&url).send().await.map_err(|e| e.to_string())?;
        response.bytes().await.map_err(|e| e.to_string())
    });
}

/// The socket address of a worker's admin URL (`http://10.213.0.2:8123`).
pub fn listener_of(admin_url: &str) -> Result<SocketAddr, CaseError> {
    let url = reqwest::Url::parse(admin_url)
        .map_err(|e| CaseError::new(format!("admin URL {admin_url}: {e}")))?;
    let addrs = url
        .socket_addrs(|| None)
        .map_err(|e| CaseError::new(format!("admin URL {admin_url}: {e}")))?;
    addrs
        .first()
        .copied()
        .ok_or_else(|| CaseError::new(format!("admin URL {admin_url} names no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_admin_url_gives_the_probe_address() {
        assert_eq!(
            listener_of("http://10.213.0.2:8123").unwrap(),
            "10.213.0.2:8123".parse::<SocketAddr>().unwrap()
        );
        assert!(listener_of("not a url").is_err());
    }
}
