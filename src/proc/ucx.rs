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

/// One protocol table of UCX's report: the endpoint configuration it is
/// for (`inter-node cfg#1`, `intra-node cfg#0`, `self cfg#0`), the
/// operation (`remote memory write by ucp_put* ...`) and the Config cell of
/// each range.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProtocolTable {
    pub endpoint: String,
    pub operation: String,
    pub transports: Vec<String>,
}

impl ProtocolTable {
    /// A table of an operation that moves data between memories (a NIXL
    /// READ or WRITE), not a message.
    pub fn moves_data(&self) -> bool {
        self.operation.starts_with("remote memory read")
            || self.operation.starts_with("remote memory write")
    }

    /// UCX's own verdict that the peer is on another node.
    pub fn inter_node(&self) -> bool {
        self.endpoint.contains("inter-node")
    }
}

/// Every protocol table in `log`, in order.
pub fn protocol_tables(log: &str) -> Vec<ProtocolTable> {
    let mut tables: Vec<ProtocolTable> = Vec::new();
    let mut endpoint: Option<String> = None;
    for line in log.lines() {
        let Some(body) = line.split_once('|').map(|(_, rest)| rest) else {
            continue;
        };
        let cells: Vec<&str> = body
            .trim_end()
            .trim_end_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        match cells.as_slice() {
            [title, ..] if title.contains(" cfg#") => {
                // `<name> inter-node cfg#1`: keep the kind and the number.
                let kind = title.split_whitespace().skip(1).collect::<Vec<_>>();
                endpoint = Some(kind.join(" "));
            }
            [title] if !title.is_empty() => {
                if let Some(ep) = endpoint.take() {
                    tables.push(ProtocolTable {
                        endpoint: ep,
                        operation: title.to_string(),
                        transports: Vec::new(),
                    });
                }
            }
            [range, _description, config, ..]
                if range.chars().next().is_some_and(|c| c.is_ascii_digit()) =>
            {
                if let Some(table) = tables.last_mut() {
                    table.transports.push(config.to_string());
                }
            }
            _ => {}
        }
    }
    tables
}

/// Every data-moving protocol UCX selected towards a peer on another node
/// went over TCP through `interface`, and there was at least one; `Err`
/// says what was seen instead. Same-node endpoints (to the node's own Guard,
/// to itself) may use shared memory and are not judged; a peer that UCX
/// took for a same-node one is what this catches.
pub fn expect_network_transfer(log: &str, interface: &str) -> Result<Vec<String>, String> {
    let data: Vec<ProtocolTable> = protocol_tables(log)
        .into_iter()
        .filter(ProtocolTable::moves_data)
        .collect();
    if data.is_empty() {
        return Err(
            "UCX reported no remote memory read or write (was UCX_PROTO_INFO=y set?)".into(),
        );
    }
    let wanted = format!("tcp/{interface}");
    let across: Vec<String> = data
        .iter()
        .filter(|t| t.inter_node())
        .flat_map(|t| t.transports.iter().cloned())
        .collect();
    if across.is_empty() {
        let seen: Vec<String> = data
            .iter()
            .flat_map(|t| {
                t.transports
                    .iter()
                    .map(move |x| format!("{} {x}", t.endpoint))
            })
            .collect();
        let shared = seen
            .iter()
            .any(|t| SHARED_MEMORY.iter().any(|s| t.contains(&format!(" {s}"))));
        return Err(format!(
            "expected a remote memory read or write to an inter-node peer over {wanted}, \
             UCX saw only same-node peers: {seen:?}{}",
            if shared {
                ": the transfer went over shared memory, not the network"
            } else {
                ""
            }
        ));
    }
    let wrong: Vec<&String> = across.iter().filter(|t| !t.starts_with(&wanted)).collect();
    if wrong.is_empty() {
        Ok(across)
    } else {
        Err(format!(
            "expected every inter-node remote memory read or write over {wanted}, saw {wrong:?}"
        ))
    }
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

    /// Abridged from worker A's log of a two-node run: the Guard and itself
    /// over `cma`, the peer on node 1 over the veth.
    const TWO_NODE_WRITER: &str = "\
[1.0] [vm:1:0]   | cpu-engine-A-1 intra-node cfg#0                          |
[1.0] [vm:1:0]   | remote memory write by ucp_put* from host memory to host |
[1.0] [vm:1:0]   | 0..inf | zero-copy   | cma/memory                        |
[1.1] [vm:1:0]   | cpu-engine-A-1 inter-node cfg#1                          |
[1.1] [vm:1:0]   | remote memory write by ucp_put* from host memory to host |
[1.1] [vm:1:0]   +--------+-------------+-----------------------------------+
[1.1] [vm:1:0]   | Range  | Description |              Config               |
[1.1] [vm:1:0]   +--------+-------------+-----------------------------------+
[1.1] [vm:1:0]   | 0..inf | zero-copy   | tcp/kvh2629                       |
[1.2] [vm:1:0]   | cpu-engine-A-1 inter-node cfg#1                 |
[1.2] [vm:1:0]   | active message by ucp_am_send* from host memory |
[1.2] [vm:1:0]   |          0 | short                | tcp/kvh2629 |
";

    #[test]
    fn tables_carry_their_endpoint_and_operation() {
        let tables = protocol_tables(TWO_NODE_WRITER);
        assert_eq!(tables.len(), 3);
        assert_eq!(tables[1].endpoint, "inter-node cfg#1");
        assert!(tables[1].moves_data() && tables[1].inter_node());
        assert!(!tables[2].moves_data());
        assert_eq!(tables[0].transports, ["cma/memory"]);
    }

    #[test]
    fn an_inter_node_write_over_the_veth_passes() {
        assert_eq!(
            expect_network_transfer(TWO_NODE_WRITER, "kvh2629"),
            Ok(vec!["tcp/kvh2629".to_string()])
        );
        let err = expect_network_transfer(TWO_NODE_WRITER, "kvh1").unwrap_err();
        assert!(err.contains("expected every inter-node"), "{err}");
    }

    #[test]
    fn a_peer_reached_over_shared_memory_fails() {
        let same_node = TWO_NODE_WRITER.replace("inter-node", "intra-node").replace(
            "| 0..inf | zero-copy   | tcp/kvh2629 ",
            "| 0..inf | zero-copy   | cma/memory  ",
        );
        let err = expect_network_transfer(&same_node, "kvh2629").unwrap_err();
        assert!(err.contains("over shared memory, not the network"), "{err}");
        assert!(expect_network_transfer(SAME_HOST, "kvh1").is_err());
        assert!(expect_network_transfer("nothing", "kvh1")
            .unwrap_err()
            .contains("UCX_PROTO_INFO"));
    }
}
