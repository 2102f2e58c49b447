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

#[cfg(test)]
mod tests {
    #[test]
    fn ports_are_distinct() {
        let mut ports = super::free_ports("127.0.0.1", 8).unwrap();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 8);
    }
}
