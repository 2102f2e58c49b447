//! Ports chosen by the kernel, never hard-coded: two runs on one machine
//! cannot be handed the same free port at the same time.

use std::net::TcpListener;

/// `count` distinct free TCP ports on `host`. The listeners are held until
/// all are chosen, so the kernel does not hand out one port twice.
pub fn free_ports(host: &str, count: usize) -> std::io::Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind((host, 0)))
        .collect::<std::io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// Ports Dynamo accepts for its system (metrics) server: it parses
/// `DYN_SYSTEM_PORT` as a signed 16-bit integer, so kernel-chosen ephemeral
/// ports (32768 and up on Linux) are refused at startup.
pub const SYSTEM_PORT_RANGE: std::ops::Range<u16> = 20000..32768;

/// `count` distinct free TCP ports on `host` inside `range`, probed from a
/// per-process starting point so that concurrent runs rarely try the same
/// ones; each is held until all are chosen.
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
    let mut held = Vec::new();
    for step in 0..span {
        if held.len() == count {
            break;
        }
        let port = range.start + ((seed.wrapping_add(step * 7919)) % span) as u16;
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
    held.iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ports_in_a_range_are_distinct_and_inside_it() {
        let range = super::SYSTEM_PORT_RANGE;
        let mut ports = super::free_ports_in("127.0.0.1", 6, range.clone()).unwrap();
        assert!(ports.iter().all(|p| range.contains(p)), "{ports:?}");
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 6);
    }

    #[test]
    fn ports_are_distinct() {
        let mut ports = super::free_ports("127.0.0.1", 8).unwrap();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 8);
    }
}
