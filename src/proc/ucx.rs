//! Which UCX transport carried a NIXL transfer, read from UCX's own report
//! (`UCX_PROTO_INFO=y` in the reader's environment).
//!
//! UCX prints one table per protocol it selects; the table of a NIXL READ is
//! headed `remote memory read by ucp_get*...` and its Config column names the
//! transport: `cma/memory` (cross-memory attach: same host), `posix`/`sysv`
//! (shared memory), or `tcp/<interface>` (the network, through that
//! interface). A two-node run whose reads went through shared memory did not
//! cross the network: [`expect_network_read`] fails it.

/// Transports that read a peer's memory without the network.
const SHARED_MEMORY: [&str; 4] = ["cma", "posix", "sysv", "xpmem"];
const READ_TABLE: &str = "remote memory read";

/// The Config cells of every `remote memory read` table in `log`, in order
/// (e.g. `cma/memory`, `tcp/kvh4e81`).
pub fn remote_read_transports(log: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_read_table = false;
    for line in log.lines() {
        let Some(body) = line.split_once('|').map(|(_, rest)| rest) else {
            continue;
        };
        let cells: Vec<&str> = body.split('|').map(str::trim).collect();
        match cells.as_slice() {
            [title, ..] if title.starts_with(READ_TABLE) => in_read_table = true,
            [title, ..] if title.contains(" cfg#") => in_read_table = false,
            [range, _description, config, ..]
                if in_read_table && range.chars().next().is_some_and(|c| c.is_ascii_digit()) =>
            {
                found.push(config.to_string());
            }
            _ => {}
        }
    }
    found
}

/// Every remote read in `log` went over TCP through `interface` (the run's
/// own veth); `Err` names what was seen instead.
pub fn expect_network_read(log: &str, interface: &str) -> Result<Vec<String>, String> {
    let transports = remote_read_transports(log);
    if transports.is_empty() {
        return Err(
            "UCX reported no remote memory read (was UCX_PROTO_INFO=y set for the reader?)".into(),
        );
    }
    let wanted = format!("tcp/{interface}");
    let wrong: Vec<&String> = transports
        .iter()
        .filter(|t| !t.starts_with(&wanted))
        .collect();
    if wrong.is_empty() {
        return Ok(transports);
    }
    let shared = wrong
        .iter()
        .any(|t| SHARED_MEMORY.iter().any(|s| t.starts_with(s)));
    Err(format!(
        "expected every remote read over {wanted}, saw {wrong:?}{}",
        if shared {
            ": the transfer went over shared memory, not the network"
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Abridged from a real UCX 1.19 report of a NIXL READ on one host.
    const SAME_HOST: &str = "\
[1.0] [vm:1:0]   | transport-reader-1 self cfg#0                               |
[1.0] [vm:1:0]   | remote memory write by ucp_put* from host memory to host |
[1.0] [vm:1:0]   | 0..inf | zero-copy   | cma/memory                        |
[1.1] [vm:1:0]   | transport-reader-1 intra-node cfg#1                          |
[1.1] [vm:1:0]   | remote memory read by ucp_get*(multi) into host memory from host |
[1.1] [vm:1:0]   +--------+-------------+-------------------------------------------+
[1.1] [vm:1:0]   | Range  | Description |                  Config                   |
[1.1] [vm:1:0]   +--------+-------------+-------------------------------------------+
[1.1] [vm:1:0]   | 0..inf | zero-copy   | cma/memory                                |
[1.2] [vm:1:0]   | transport-reader-1 intra-node cfg#1                          |
[1.2] [vm:1:0]   | active message by ucp_am_send* from host memory |
[1.2] [vm:1:0]   |   1..16515 | zero-copy          | tcp/lo             |
";

    #[test]
    fn reads_only_the_remote_read_tables() {
        assert_eq!(remote_read_transports(SAME_HOST), ["cma/memory"]);
    }

    #[test]
    fn a_read_over_shared_memory_fails() {
        let err = expect_network_read(SAME_HOST, "kvh1").unwrap_err();
        assert!(err.contains("over shared memory, not the network"), "{err}");
        assert!(err.contains("cma/memory"), "{err}");
    }

    #[test]
    fn a_read_over_the_veth_passes_and_another_interface_fails() {
        let log = SAME_HOST.replace(
            "| 0..inf | zero-copy   | cma/memory  ",
            "| 0..inf | zero-copy   | tcp/kvh1    ",
        );
        assert_eq!(
            expect_network_read(&log, "kvh1"),
            Ok(vec!["tcp/kvh1".to_string()])
        );
        let err = expect_network_read(&log, "kvh2").unwrap_err();
        assert!(
            err.contains("expected every remote read over tcp/kvh2"),
            "{err}"
        );
        assert!(expect_network_read("no tables", "kvh1")
            .unwrap_err()
            .contains("UCX_PROTO_INFO"));
    }
}
