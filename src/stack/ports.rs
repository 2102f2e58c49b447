//! The stack's ports: probed free, never hard-coded, and outside the
//! kernel's ephemeral range.
//!
//! A port the kernel hands out for `bind(0)` lies in the ephemeral range
//! (`net.ipv4.ip_local_port_range`, 32768-60999 by default), which is also
//! where every outgoing connection takes its source port. A component that
//! binds its port tens of seconds after the harness chose it (a vLLM worker
//! binds its KV-events socket ~40 s after spawn) can find it taken by some
//! connection in between: `zmq.error.ZMQError: Address already in use`.
//! Ports below the range are never taken that way.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

use crate::engine::slots::Port;

/// Where the stack's ports come from: below the ephemeral range, and a
/// range Dynamo accepts for its system (metrics) server (it parses
/// `DYN_SYSTEM_PORT` as a signed 16-bit integer, refusing 32768 and up).
pub const STACK_PORT_RANGE: std::ops::Range<u16> = 20000..32768;

/// Every port [`free_ports_in`] has handed out in this process. A port is
/// free only until its component binds it, seconds later; attempts started
/// side by side (TC-16's) would otherwise be handed the same one.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// `count` distinct free TCP ports on `host` inside `range`, probed from a
/// per-process starting point so that concurrent runs rarely try the same
/// ones; each is held until all are chosen, and none is one this process
/// handed out before.
pub fn free_ports_in(
    host: &str,
    count: usize,
    range: std::ops::Range<u16>,
) -> std::io::Result<Vec<u16>> {
    let span = u32::from(range.end - range.start);
    let seed = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut held = Vec::new();
    for step in 0..span {
        if held.len() == count {
            break;
        }
        let port = range.start + ((seed.wrapping_add(step * 7919)) % span) as u16;
        if handed_out.contains(&port) {
            continue;
        }
        if let Ok(listener) = TcpListener::bind((host, port)) {
            held.push(listener);
        }
    }
    if held.len() < count {
        return Err(std::io::Error::other(format!(
            "only {} of {count} free ports in {range:?} on {host}",
            held.len()
        )));
    }
    let ports = held
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<Vec<u16>>>()?;
    handed_out.extend(&ports);
    Ok(ports)
}

/// The ports of one stack, probed free at once: the frontend's and the
/// bare engine's, then each worker slot's and reference slot's, metrics
/// ports (Dynamo's system server) from a share of their own.
pub struct StackPorts {
    general: std::vec::IntoIter<u16>,
    metrics: std::vec::IntoIter<u16>,
}

impl StackPorts {
    /// Enough for the frontend, the bare engine, `workers` worker slots
    /// (control, metrics, KV events, side channel each) and up to three
    /// reference workers.
    pub fn probe(host: &str, workers: usize) -> std::io::Result<Self> {
        let metrics = workers + 3;
        let mut general = free_ports_in(host, 2 + 4 * workers + 2 * 3 + metrics, STACK_PORT_RANGE)?;
        let metrics = general.split_off(general.len() - metrics);
        Ok(Self {
            general: general.into_iter(),
            metrics: metrics.into_iter(),
        })
    }

    /// The next free port (0 once all are taken, which the probe's counts
    /// rule out).
    pub fn next(&mut self) -> u16 {
        self.general.next().unwrap_or(0)
    }

    /// The next free port for a slot's `port`.
    pub fn for_slot(&mut self, port: Port) -> u16 {
        match port {
            Port::Metrics => self.metrics.next().unwrap_or(0),
            Port::Control | Port::KvEvents | Port::SideChannel => self.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ports_in_a_range_are_distinct_and_inside_it() {
        let range = super::STACK_PORT_RANGE;
        let mut ports = super::free_ports_in("127.0.0.1", 6, range.clone()).unwrap();
        assert!(ports.iter().all(|p| range.contains(p)), "{ports:?}");
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 6);
    }

    #[test]
    fn a_port_is_handed_out_once_in_a_process() {
        // A range of four free ports: the second call must not get the
        // first's two back, though the first's were never bound.
        let start = (30000..32000u16)
            .step_by(4)
            .find(|&p| (p..p + 4).all(|q| std::net::TcpListener::bind(("127.0.0.1", q)).is_ok()))
            .expect("four free ports in a row");
        let range = start..start + 4;
        let first = super::free_ports_in("127.0.0.1", 2, range.clone()).unwrap();
        let second = super::free_ports_in("127.0.0.1", 2, range.clone()).unwrap();
        assert!(
            first.iter().all(|p| !second.contains(p)),
            "{first:?} {second:?}"
        );
        assert!(super::free_ports_in("127.0.0.1", 1, range).is_err());
    }

    #[test]
    fn the_stack_range_lies_below_this_machines_ephemeral_range() {
        let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
        let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
        assert!(
            super::STACK_PORT_RANGE.end <= low,
            "ephemeral ports start at {low}"
        );
    }
}
