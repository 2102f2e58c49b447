//! Node placement: where each worker slot and its Guard service run.
//!
//! A single-node topology runs everything on this host, as before. A
//! two-node topology gets a namespace node ([`NamespaceNode`]) created for
//! the run: node 0 is this host, reached by node 1 at the host end of the
//! veth; node 1 is the namespace, reached at its end of the veth. Each node
//! has its own scratch on its own `/dev/shm` (Guard socket, pools, ready
//! files); Dynamo's discovery directory lives on a path both nodes see
//! (node 1's `/dev/shm` is private), removed at teardown and by the reaper.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::topology::WorkerPlan;
use crate::engine::WorkerSlot;
use crate::proc::netns::{NamespaceNode, NodeError};
use crate::proc::{reaper, ProcessSpec};

const UCX_NET_DEVICES: &str = "UCX_NET_DEVICES";

/// The nodes of one stack.
pub struct Placement {
    /// Node 1, when the topology has one.
    node: Option<NamespaceNode>,
    /// Node 1's scratch directory as seen from inside it.
    node_scratch: PathBuf,
    /// The directory both nodes see (holds `discovery/`), when two nodes.
    shared_dir: Option<PathBuf>,
}

impl Placement {
    /// Everything on this host.
    pub fn local() -> Self {
        Self {
            node: None,
            node_scratch: PathBuf::new(),
            shared_dir: None,
        }
    }

    /// Creates the nodes `node_count` asks for (a namespace node for node 1).
    pub fn create(
        node_count: usize,
        run_id: &str,
        logs_dir: &Path,
        budget: Duration,
    ) -> Result<Self, NodeError> {
        Self::create_with(node_count, run_id, logs_dir, budget, true)
    }

    /// As [`Placement::create`]; `pid_namespace` false gives node 1 no PID
    /// namespace of its own (the launch fault [`super::provision::NODE_WITHOUT_PID_NAMESPACE`]).
    pub fn create_with(
        node_count: usize,
        run_id: &str,
        logs_dir: &Path,
        budget: Duration,
        pid_namespace: bool,
    ) -> Result<Self, NodeError> {
        if node_count < 2 {
            return Ok(Self::local());
        }
        let node = NamespaceNode::create_with(run_id, logs_dir, budget, pid_namespace)?;
        let shared = std::env::temp_dir().join(format!("kvcr-e2e-{run_id}-shared"));
        reaper::track_path(&shared);
        let node_scratch = PathBuf::from(format!("/dev/shm/kvcr-e2e-{run_id}-node1"));
        let placement = Self {
            node: Some(node),
            node_scratch,
            shared_dir: Some(shared.clone()),
        };
        let setup = || -> std::io::Result<()> {
            std::fs::create_dir_all(shared.join("discovery"))?;
            std::fs::create_dir_all(placement.host_view(1, &placement.node_scratch.join("ready")))
        };
        setup().map_err(|e| {
            NodeError::Setup(format!(
                "cannot create the run's shared directory {} or node 1's scratch: {e}",
                shared.display()
            ))
        })?;
        Ok(placement)
    }

    /// The namespace node, when there is one.
    pub fn namespace_node(&self) -> Option<&NamespaceNode> {
        self.node.as_ref()
    }

    /// The address node 0's components listen on and advertise: the host
    /// end of the veth on two nodes, else `host`.
    pub fn host_address(&self, host: &str) -> String {
        self.node
            .as_ref()
            .map_or_else(|| host.to_string(), |n| n.addresses().host.to_string())
    }

    /// The address components of `node` listen on and advertise.
    pub fn address_of(&self, node: usize, host: &str) -> String {
        match (&self.node, node) {
            (Some(n), 1) => n.addresses().node.to_string(),
            _ => self.host_address(host),
        }
    }

    /// The work directory of the launch context: the shared directory on two
    /// nodes (its `discovery/` is Dynamo's), else the run's scratch.
    pub fn work_dir(&self, scratch: &Path) -> PathBuf {
        self.shared_dir
            .clone()
            .unwrap_or_else(|| scratch.to_path_buf())
    }

    /// Moves `slot`'s node-local files (Guard socket, ready file) to its
    /// node's scratch.
    pub fn place_slot(&self, slot: &mut WorkerSlot, node: usize) {
        if self.is_remote(node) {
            slot.guard_socket = self
                .node_scratch
                .join(format!("{}.sock", slot.guard_service));
            slot.ready_file = self
                .node_scratch
                .join("ready")
                .join(format!("{}.json", slot.process_name()));
        }
    }

    /// The pool directory of Guard service `service` on `node`, created;
    /// `None` for node 0 (the layout's).
    pub fn pool_dir(&self, node: usize, service: &str) -> std::io::Result<Option<PathBuf>> {
        if !self.is_remote(node) {
            return Ok(None);
        }
        let dir = self.node_scratch.join(format!("pool-{service}"));
        std::fs::create_dir_all(self.host_view(node, &dir))?;
        Ok(Some(dir))
    }

    /// `spec`, run on `node`, its UCX confined to the run's own devices.
    pub fn wrap(&self, node: usize, spec: ProcessSpec) -> ProcessSpec {
        let spec = self.confine_ucx(node, spec);
        match (&self.node, node) {
            (Some(n), 1) => n.wrap(spec),
            _ => spec,
        }
    }

    /// UCX uses every network interface it finds. Other runs on this
    /// machine create and delete veth pairs; a UCX endpoint that picked one
    /// of theirs breaks when it goes (seen as `NIXL_ERR_REMOTE_DISCONNECT`
    /// on a worker's deposits into its own pool). So a process of the stack
    /// gets loopback and its node's end of the run's own veth only, unless
    /// the user set `UCX_NET_DEVICES` (a GPU host's RDMA devices, say).
    fn confine_ucx(&self, node: usize, spec: ProcessSpec) -> ProcessSpec {
        if std::env::var_os(UCX_NET_DEVICES).is_some()
            || spec.env.iter().any(|(k, _)| k == UCX_NET_DEVICES)
        {
            return spec;
        }
        let devices = match self.interface_of(node) {
            Some(veth) => format!("lo,{veth}"),
            None => "lo".to_string(),
        };
        spec.env(UCX_NET_DEVICES, devices)
    }

    /// A path of `node`'s file system as this host sees it (through the
    /// namespace's first process's root).
    pub fn host_view(&self, node: usize, path: &Path) -> PathBuf {
        match (&self.node, node) {
            (Some(n), 1) => {
                let relative = path.strip_prefix("/").unwrap_or(path);
                PathBuf::from(format!("/proc/{}/root", n.init_pid())).join(relative)
            }
            _ => path.to_path_buf(),
        }
    }

    /// The interface a reader on `node` uses to reach the other node.
    pub fn interface_of(&self, node: usize) -> Option<String> {
        self.node.as_ref().map(|n| match node {
            1 => n.node_interface(),
            _ => n.host_interface().to_string(),
        })
    }

    fn is_remote(&self, node: usize) -> bool {
        self.node.is_some() && node == 1
    }

    /// Ends node 1 (its processes and veth go with it) and removes the
    /// shared directory.
    pub fn stop(&self) {
        if let Some(node) = &self.node {
            node.stop();
        }
        if let Some(dir) = &self.shared_dir {
            if std::fs::remove_dir_all(dir).is_ok() || !dir.exists() {
                reaper::forget_path(dir);
            }
        }
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The node of slot `slot` among `plans` (0 when no plan names it).
pub fn node_of(plans: &[WorkerPlan], slot: &str) -> usize {
    plans.iter().find(|p| p.slot == slot).map_or(0, |p| p.node)
}

/// Two workers on different nodes: what a transfer between them must show.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Crossing {
    pub source: Side,
    pub reader: Side,
}

/// One end of a [`Crossing`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct Side {
    pub worker: String,
    pub address: String,
    /// The interface this side's node reaches the other node through.
    pub interface: String,
    /// Its log, where UCX prints its protocol tables.
    pub log: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_node_placement_changes_nothing() {
        let p = Placement::local();
        assert_eq!(p.host_address("127.0.0.1"), "127.0.0.1");
        assert_eq!(p.address_of(1, "127.0.0.1"), "127.0.0.1");
        assert_eq!(p.work_dir(Path::new("/s")), PathBuf::from("/s"));
        assert_eq!(
            p.host_view(1, Path::new("/dev/shm/x")),
            PathBuf::from("/dev/shm/x")
        );
        let spec = ProcessSpec::new("w", "python3", "/tmp/w.log");
        assert_eq!(p.wrap(1, spec.clone()).command_line(), spec.command_line());
        assert!(p.interface_of(0).is_none());
    }

    #[test]
    fn ucx_stays_on_loopback_on_one_node_unless_the_user_chose() {
        if std::env::var_os(UCX_NET_DEVICES).is_some() {
            return; // the user's choice is kept: nothing to check here
        }
        let p = Placement::local();
        let spec = p.wrap(0, ProcessSpec::new("w", "python3", "/tmp/w.log"));
        assert_eq!(spec.env, [(UCX_NET_DEVICES.to_string(), "lo".to_string())]);
        let chosen =
            ProcessSpec::new("w", "python3", "/tmp/w.log").env(UCX_NET_DEVICES, "mlx5_0:1");
        assert_eq!(p.wrap(0, chosen).env.len(), 1);
    }
}
