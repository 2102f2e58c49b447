//! A "second host" made of anonymous namespaces: its own network, PID and
//! mount namespaces with a private tmpfs `/dev/shm`, joined to this host by a
//! veth pair whose addresses the run chooses.
//!
//! Why all three namespaces: with a network namespace alone, NIXL/UCX still
//! reads a peer's memory through `cma` (cross-memory attach); a separate PID
//! namespace is what makes UCX fall back to its TCP transport, as between
//! two real hosts. The private `/dev/shm` keeps node 1's pools and Guard
//! socket out of node 0's sight; a fresh sysfs shows UCX the node's own
//! interfaces.
//!
//! Nothing is named: the namespaces live exactly as long as their first
//! process, which `unshare --kill-child` SIGKILLs when `unshare` dies, and
//! `unshare` is a supervised child (parent-death signal, own process group,
//! the reaper). When the network namespace goes, the veth pair goes with it
//! (its host end too): a SIGKILLed harness leaves no namespace and no link.
//!
//! ```no_run
//! # fn main() -> Result<(), kvcr_e2e::proc::netns::NodeError> {
//! use kvcr_e2e::proc::netns::NamespaceNode;
//! let node = NamespaceNode::create("run42", std::path::Path::new("/tmp"), std::time::Duration::from_secs(10))?;
//! let spec = node.wrap(kvcr_e2e::proc::ProcessSpec::new("w", "python3", "/tmp/w.log"));
//! // spec runs inside node 1; its peers reach it at node.node_addr()
//! # Ok(()) }
//! ```

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{procfs, ProcessSpec, Supervised};
use crate::wait::{self, Poll};

/// Printed by the namespace's first process once its `/dev/shm` is private.
const READY_LINE: &str = "kvcr-e2e-node-ready";
/// The run's addresses come from this /16 (one /30 per node).
const SUBNET_FIRST: u8 = 10;
const SUBNET_SECOND: u8 = 213;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("a namespace node needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN): {0}")]
    NotPermitted(String),
    #[error("cannot start the namespace node: {0}")]
    Spawn(#[from] super::ProcError),
    #[error("namespace node: {0}")]
    Setup(String),
}

/// Whether this process may create namespace nodes; `Err` says why not.
pub fn precondition() -> Result<(), NodeError> {
    let effective = super::procfs::effective_capabilities().map_err(NodeError::NotPermitted)?;
    const CAP_NET_ADMIN: u64 = 1 << 12;
    const CAP_SYS_ADMIN: u64 = 1 << 21;
    let missing: Vec<&str> = [
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
    ]
    .into_iter()
    .filter(|(bit, _)| effective & bit == 0)
    .map(|(_, name)| name)
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(NodeError::NotPermitted(format!(
            "this process lacks {} (CapEff {effective:#x})",
            missing.join(" and ")
        )))
    }
}

/// The addresses of one node's veth pair: a /30 of 10.213.0.0/16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct VethAddresses {
    pub host: Ipv4Addr,
    pub node: Ipv4Addr,
}

impl VethAddresses {
    /// The `index`-th /30 of the run's subnet (index modulo 16384).
    pub fn nth(index: u32) -> Self {
        let base = (index % 16384) * 4;
        let third = (base >> 8) as u8;
        let fourth = (base & 0xff) as u8;
        Self {
            host: Ipv4Addr::new(SUBNET_FIRST, SUBNET_SECOND, third, fourth + 1),
            node: Ipv4Addr::new(SUBNET_FIRST, SUBNET_SECOND, third, fourth + 2),
        }
    }
}

/// One namespace node, up until [`NamespaceNode::stop`] or drop.
pub struct NamespaceNode {
    holder: Supervised,
    /// Host pid of the namespace's first process (pid 1 inside).
    init_pid: u32,
    host_if: String,
    addresses: VethAddresses,
    /// Whether the node has a PID namespace of its own, whose end takes
    /// every process in it.
    pid_namespace: bool,
}

impl NamespaceNode {
    /// Creates the namespaces, a private tmpfs `/dev/shm` and a veth pair;
    /// waits (within `budget`) until the node's address answers routing
    /// checks from this host.
    pub fn create(tag: &str, logs_dir: &Path, budget: Duration) -> Result<Self, NodeError> {
        Self::create_with(tag, logs_dir, budget, true)
    }

    /// As [`NamespaceNode::create`]; with `pid_namespace` false the node
    /// shares this host's PID namespace (a harness launch fault: UCX then
    /// takes a peer on the other "node" for a same-host one and reads it
    /// through `cma`, which TC-03 must catch).
    pub fn create_with(
        tag: &str,
        logs_dir: &Path,
        budget: Duration,
        pid_namespace: bool,
    ) -> Result<Self, NodeError> {
        precondition()?;
        // sysfs too: UCX checks `/sys/class/net/<if>` before it uses an
        // interface, and the host's sysfs does not list the node's veth (UCX
        // then finds no transport to a peer on the other node).
        // 4 GiB is a ceiling, not an allocation: a vLLM CPU worker's engine
        // core alone asks for 160 MiB of shared memory beside its Guard's
        // and its own pools, which 512 MiB did not hold.
        let script = format!(
            "mount -t tmpfs -o size=4g,mode=1777 tmpfs /dev/shm && mount -t sysfs sysfs /sys \
             && echo {READY_LINE} && exec sleep infinity"
        );
        let spec = ProcessSpec::new(
            format!("node1-{tag}"),
            "unshare",
            logs_dir.join(format!("node1-{tag}.log")),
        )
        .args(["--net", "--mount"])
        .args(if pid_namespace {
            vec!["--pid", "--mount-proc"]
        } else {
            Vec::new()
        })
        .args([
            "--fork",
            "--kill-child",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ]);
        let holder = Supervised::spawn(&spec)?;
        let init_pid = match await_init(&holder, budget) {
            Ok(pid) => pid,
            Err(e) => {
                holder.stop(Duration::from_secs(2));
                return Err(e);
            }
        };
        let mut node = Self {
            holder,
            init_pid,
            host_if: String::new(),
            addresses: VethAddresses::nth(0),
            pid_namespace,
        };
        if let Err(e) = node.link(tag) {
            node.stop();
            return Err(e);
        }
        Ok(node)
    }

    /// Adds the veth pair (its node end created inside the namespace, so no
    /// moment exists where both ends sit on this host), addresses it with a
    /// /30 no interface here uses yet, and checks the route.
    fn link(&mut self, tag: &str) -> Result<(), NodeError> {
        let suffix = format!("{:x}", self.init_pid);
        self.host_if = format!("kvh{suffix}");
        let node_if = self.node_interface();
        let init = self.init_pid.to_string();
        run(
            "ip",
            &[
                "link",
                "add",
                &self.host_if,
                "type",
                "veth",
                "peer",
                "name",
                &node_if,
                "netns",
                &init,
            ],
        )?;
        self.addresses = free_addresses(self.init_pid ^ tag_seed(tag))?;
        let (host, node) = (self.addresses.host, self.addresses.node);
        run(
            "ip",
            &["addr", "add", &format!("{host}/30"), "dev", &self.host_if],
        )?;
        run("ip", &["link", "set", &self.host_if, "up"])?;
        let inside = |args: &[&str]| {
            let mut all = vec!["--target", init.as_str(), "--net", "--", "ip"];
            all.extend_from_slice(args);
            run("nsenter", &all)
        };
        inside(&["addr", "add", &format!("{node}/30"), "dev", &node_if])?;
        inside(&["link", "set", &node_if, "up"])?;
        inside(&["link", "set", "lo", "up"])?;
        self.expect_route()
    }

    /// From the root namespace, a connect to an address not routed to our
    /// veth may be accepted by the sandbox and then hang: check the route.
    pub fn expect_route(&self) -> Result<(), NodeError> {
        let node = self.addresses.node.to_string();
        let route = run("ip", &["-o", "route", "get", &node])?;
        if route.contains(&format!("dev {} ", self.host_if)) {
            Ok(())
        } else {
            Err(NodeError::Setup(format!(
                "{node} is not routed to this run's veth {}: `ip route get` says {route:?}",
                self.host_if
            )))
        }
    }

    /// Runs a short command (`tc`, `iptables`) in the node's network
    /// namespace only; its stdout, or an error quoting its stderr.
    pub fn run_in_net(&self, program: &str, args: &[&str]) -> Result<String, NodeError> {
        let init = self.init_pid.to_string();
        let mut all = vec!["--target", init.as_str(), "--net", "--", program];
        all.extend_from_slice(args);
        run("nsenter", &all)
    }

    /// Host pid of the namespace's first process.
    pub fn init_pid(&self) -> u32 {
        self.init_pid
    }

    /// Host pid of `unshare`, the supervised process that owns the node.
    pub fn holder_pid(&self) -> u32 {
        self.holder.pid()
    }

    /// The host end of the veth pair.
    pub fn host_interface(&self) -> &str {
        &self.host_if
    }

    /// The node end of the veth pair (inside the namespace).
    pub fn node_interface(&self) -> String {
        format!("kvn{:x}", self.init_pid)
    }

    pub fn addresses(&self) -> VethAddresses {
        self.addresses
    }

    /// The command prefix that runs a program inside the node.
    pub fn launcher(&self) -> Vec<String> {
        [
            "nsenter",
            "--target",
            &self.init_pid.to_string(),
            "--net",
            "--pid",
            "--mount",
            "--",
        ]
        .map(String::from)
        .to_vec()
    }

    /// `spec`, run inside the node, in its own working directory: entering
    /// the mount namespace, nsenter would otherwise start it in the node's
    /// first process's directory (a relative `--model` path then names no
    /// directory).
    pub fn wrap(&self, spec: ProcessSpec) -> ProcessSpec {
        // nsenter dies of the SIGTERM that stops the component, and a CPU
        // engine worker that dies with its parent would then be SIGKILLed
        // before its own shutdown (KVCR's close, coverage data). Inside a
        // PID namespace it need not: the node's end takes it (and the node's
        // holder dies with the harness).
        let spec = if self.pid_namespace {
            spec.env(super::supervised::OUTLIVE_PARENT_ENV, "1")
        } else {
            spec
        };
        let mut args: Vec<String> = self.launcher().split_off(1);
        if let Some(dir) = &spec.cwd {
            let separator = args.pop();
            args.push(format!("--wd={}", dir.display()));
            args.extend(separator);
        }
        args.push(spec.program.display().to_string());
        args.extend(spec.args.iter().cloned());
        ProcessSpec {
            program: "nsenter".into(),
            args,
            // nsenter leads the group now and forwards no SIGTERM.
            term_leader_only: false,
            ..spec
        }
    }

    /// Takes the host end of the veth down (`up = false`: node 1 is cut off
    /// the network, as a pulled cable) or up again; then waits (within
    /// `budget`) until both ends report that state, and after `up`, until
    /// the node's address is routed through the veth again.
    pub fn set_link(&self, up: bool, budget: Duration) -> Result<(), NodeError> {
        let state = if up { "up" } else { "down" };
        run("ip", &["link", "set", &self.host_if, state])?;
        wait::until(
            format!("node 1's veth {} to be {state}", self.host_if),
            budget,
            Duration::from_millis(20),
            || {
                let now = self.link_state();
                let done = if up {
                    now.is_up() && self.expect_route().is_ok()
                } else {
                    !now.host_end_up() && !now.node_end_up()
                };
                if done {
                    Poll::Ready(())
                } else {
                    Poll::Pending(now.to_string())
                }
            },
        )
        .map_err(|e| NodeError::Setup(e.to_string()))
    }

    /// The operational state of both ends of the veth, as the kernel reports
    /// it (`/sys/class/net/<if>/operstate`, node 1's through its own sysfs).
    pub fn link_state(&self) -> LinkState {
        let read = |path: String| {
            std::fs::read_to_string(&path)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|e| format!("unknown ({path}: {e})"))
        };
        LinkState {
            host_if: self.host_if.clone(),
            host_end: read(format!("/sys/class/net/{}/operstate", self.host_if)),
            node_if: self.node_interface(),
            node_end: read(format!(
                "/proc/{}/root/sys/class/net/{}/operstate",
                self.init_pid,
                self.node_interface()
            )),
        }
    }

    /// Ends the node: SIGKILL of `unshare` takes its namespaces, their
    /// processes and the veth pair with it. Waits until the namespace's first
    /// process is gone.
    pub fn stop(&self) {
        self.holder.stop(Duration::from_millis(200));
        let _ = wait::until(
            format!("namespace node {} to end", self.init_pid),
            Duration::from_secs(5),
            Duration::from_millis(20),
            || {
                if procfs::is_alive(self.init_pid) {
                    Poll::Pending("its first process is alive".into())
                } else {
                    Poll::Ready(())
                }
            },
        );
    }
}

impl Drop for NamespaceNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Both ends of a node's veth, as the kernel reports them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LinkState {
    pub host_if: String,
    /// `operstate` of the host end: `up`, `down`, `lowerlayerdown`, ...
    pub host_end: String,
    pub node_if: String,
    pub node_end: String,
}

impl LinkState {
    pub fn host_end_up(&self) -> bool {
        self.host_end == "up"
    }

    pub fn node_end_up(&self) -> bool {
        self.node_end == "up"
    }

    pub fn is_up(&self) -> bool {
        self.host_end_up() && self.node_end_up()
    }
}

impl std::fmt::Display for LinkState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (this host) is {}, {} (node 1) is {}",
            self.host_if, self.host_end, self.node_if, self.node_end
        )
    }
}

/// Waits for the ready line and returns the host pid of `unshare`'s child.
fn await_init(holder: &Supervised, budget: Duration) -> Result<u32, NodeError> {
    wait::until(
        format!(
            "the namespace node's private /dev/shm ({READY_LINE} in {})",
            holder.log_path().display()
        ),
        budget,
        Duration::from_millis(20),
        || {
            if let Some(status) = holder.exit_status() {
                return Poll::Abort(format!(
                    "unshare exited ({status}): {}",
                    holder.log_tail(10)
                ));
            }
            if !holder.log_tail(20).contains(READY_LINE) {
                return Poll::Pending("no ready line yet".into());
            }
            match procfs::children(holder.pid()).first() {
                Some(pid) => Poll::Ready(*pid),
                None => Poll::Pending("unshare has no child yet".into()),
            }
        },
    )
    .map_err(|e| NodeError::Setup(e.to_string()))
}

/// A /30 near `seed` that no interface of this host holds yet.
fn free_addresses(seed: u32) -> Result<VethAddresses, NodeError> {
    for step in 0..64 {
        let candidate = VethAddresses::nth(seed.wrapping_add(step));
        let used = run(
            "ip",
            &[
                "-o",
                "addr",
                "show",
                "to",
                &format!("{}/30", candidate.host),
            ],
        )?;
        if used.trim().is_empty() {
            return Ok(candidate);
        }
    }
    Err(NodeError::Setup(format!(
        "no free /30 in {SUBNET_FIRST}.{SUBNET_SECOND}.0.0/16 near index {seed}"
    )))
}

fn tag_seed(tag: &str) -> u32 {
    tag.bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
}

/// Runs a short setup command; its stdout, or an error quoting stderr.
fn run(program: &str, args: &[&str]) -> Result<String, NodeError> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| NodeError::Setup(format!("cannot run {program}: {e}")))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(NodeError::Setup(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_a_slash_30_of_the_run_subnet() {
        assert_eq!(
            VethAddresses::nth(0),
            VethAddresses {
                host: Ipv4Addr::new(10, 213, 0, 1),
                node: Ipv4Addr::new(10, 213, 0, 2)
            }
        );
        let last = VethAddresses::nth(16383);
        assert_eq!(last.host, Ipv4Addr::new(10, 213, 255, 253));
        assert_eq!(VethAddresses::nth(16384), VethAddresses::nth(0));
    }
}
