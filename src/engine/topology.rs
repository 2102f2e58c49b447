//! Where the workers of a stack go: how many there are, which role each one
//! plays (aggregated, prefill, decode), on which node and on which GPUs.
//!
//! A topology is data: [`plan_workers`] turns a [`Topology`], the GPUs of a
//! profile and the nodes of a run into one [`WorkerPlan`] per worker slot. The
//! engines turn each plan into a process spec; the stack runner allocates one
//! [`super::WorkerSlot`] per plan.
//!
//! | topology | workers | GPUs (2-GPU runner, 1 GPU per worker) |
//! |---|---|---|
//! | `agg` | A, B aggregated (the CPU engine: more with `cpu_engine.agg_workers`) | A: 0, B: 1 |
//! | `2p1d` | A, B prefill; C decode | A: 0, B: 0 (shared), C: 1 |
//! | `two-node` | A on node 0, B on node 1, aggregated | A: 0, B: 0 (each on its node) |

use serde::{Deserialize, Serialize};

use crate::proc::ProcessSpec;

crate::words::word_enum!(
    /// The shape of a stack (`--topology`).
    Topology, "topology" {
        /// Router + two aggregated workers + the Guard service, one host.
        Agg = "agg",
        /// Two prefill workers and one decode worker, one host.
        TwoP1D = "2p1d",
        /// Two aggregated workers on two hosts, one Guard service per host.
        TwoNode = "two-node",
    }
);

impl Topology {
    /// How many nodes the topology spreads its workers over.
    pub fn node_count(self) -> usize {
        match self {
            Topology::TwoNode => 2,
            Topology::Agg | Topology::TwoP1D => 1,
        }
    }

    /// Why this host cannot make the topology's nodes, when it cannot. An
    /// engine that names no hosts of its own (`hosts` empty: the CPU
    /// engine) gets node 1 as a namespace node on this host, which needs
    /// root, or CAP_SYS_ADMIN and CAP_NET_ADMIN.
    pub fn unavailable_here(self, hosts: &[Node]) -> Option<String> {
        if self.node_count() < 2 || !hosts.is_empty() {
            return None;
        }
        crate::proc::netns::precondition()
            .err()
            .map(|e| e.to_string())
    }

    /// Checks that `nodes` (an engine profile's hosts) fit the topology: a
    /// multi-node topology needs as many nodes, each with an address its
    /// peers can dial (never loopback). No nodes at all is fine: the run
    /// makes its second node itself, a namespace node on this host
    /// ([`Topology::unavailable_here`] says when it cannot).
    pub fn check_nodes(self, nodes: &[Node]) -> Result<(), String> {
        let need = self.node_count();
        if need == 1 || nodes.is_empty() {
            return Ok(());
        }
        if nodes.len() < need {
            return Err(format!(
                "topology {self} needs {need} nodes in the profile (`nodes = [{{ name, address, launcher }}, ...]`), it lists {}",
                nodes.len()
            ));
        }
        match nodes.iter().find(|n| is_loopback(&n.address)) {
            Some(node) => Err(format!(
                "topology {self}: node {} advertises {}, which peers on other hosts cannot reach; use the node's network address",
                node.name, node.address
            )),
            None => Ok(()),
        }
    }

    /// Where a listener on `node` binds: the node's own address on one
    /// host; every interface when peers on other hosts must reach it.
    pub fn bind_host(self, node: &Node) -> String {
        if self.node_count() > 1 {
            "0.0.0.0".into()
        } else {
            node.address.clone()
        }
    }
}

fn is_loopback(address: &str) -> bool {
    address == "localhost"
        || address == "::1"
        || address.starts_with("127.")
        || address == "0.0.0.0"
}

/// What a worker does in a disaggregated (or not) stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkerRole {
    #[default]
    Aggregated,
    Prefill,
    Decode,
}

impl WorkerRole {
    /// The value of Dynamo's `--disaggregation-mode` (dynamo/common/constants.py).
    pub fn disaggregation_mode(self) -> &'static str {
        match self {
            WorkerRole::Aggregated => "agg",
            WorkerRole::Prefill => "prefill",
            WorkerRole::Decode => "decode",
        }
    }
}

/// One host of a run. `address` is what peers on other hosts dial (control
/// endpoints, Dynamo's TCP request plane); `launcher` is the command prefix
/// that runs a process there (`srun --nodelist={node} ...`), empty for the
/// host the harness runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub address: String,
    #[serde(default)]
    pub launcher: Vec<String>,
}

impl Node {
    /// The harness's own host, reached at `address`.
    pub fn local(address: impl Into<String>) -> Self {
        Self {
            name: "local".into(),
            address: address.into(),
            launcher: Vec::new(),
        }
    }

    pub fn is_local(&self) -> bool {
        self.launcher.is_empty()
    }

    /// Wraps `spec` so that it runs on this node: the launcher becomes the
    /// program, the original program and arguments follow it. `{node}` in the
    /// launcher is replaced by the node's name. The environment stays on the
    /// spec (srun exports the caller's environment by default).
    pub fn wrap(&self, spec: ProcessSpec) -> ProcessSpec {
        let Some((program, rest)) = self.launcher.split_first() else {
            return spec;
        };
        let fill = |s: &str| s.replace("{node}", &self.name);
        let mut args: Vec<String> = rest.iter().map(|s| fill(s)).collect();
        args.push(spec.program.display().to_string());
        args.extend(spec.args.iter().cloned());
        ProcessSpec {
            program: fill(program).into(),
            args,
            ..spec
        }
    }
}

/// One worker slot of a topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerPlan {
    /// `A`, `B`, `C`: the slot name.
    pub slot: String,
    pub role: WorkerRole,
    /// Index into the run's nodes.
    pub node: usize,
    /// GPU ids of this worker on its node (`CUDA_VISIBLE_DEVICES`).
    pub gpus: Vec<u32>,
    /// How many workers share these GPUs (1 unless the topology co-locates
    /// workers, as 2p1d does on a 2-GPU runner); the engine divides its
    /// memory share by it.
    pub gpu_sharers: u32,
}

impl WorkerPlan {
    /// `0,1` for `CUDA_VISIBLE_DEVICES`.
    pub fn cuda_visible_devices(&self) -> String {
        self.gpus
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The default plan of an engine that knows no topologies: two aggregated
/// workers `A` and `B` on the local node, no GPUs.
pub fn default_workers() -> Vec<WorkerPlan> {
    ["A", "B"]
        .into_iter()
        .map(|slot| WorkerPlan {
            slot: slot.into(),
            role: WorkerRole::Aggregated,
            node: 0,
            gpus: Vec::new(),
            gpu_sharers: 1,
        })
        .collect()
}

/// Lays out the workers of `topology` over `gpu_ids` (the GPUs of one node,
/// in order), `gpus_per_worker` each.
///
/// Errors when the node has too few GPUs for the topology.
pub fn plan_workers(
    topology: Topology,
    gpu_ids: &[u32],
    gpus_per_worker: u32,
) -> Result<Vec<WorkerPlan>, String> {
    let per = gpus_per_worker.max(1) as usize;
    let take = |index: usize| -> Result<Vec<u32>, String> {
        gpu_ids.get(index * per..(index + 1) * per).map(<[u32]>::to_vec).ok_or_else(|| {
            format!(
                "topology {topology} needs {} GPUs per node ({per} per worker), the profile lists {:?}",
                (index + 1) * per,
                gpu_ids
            )
        })
    };
    slots(topology)
        .into_iter()
        .map(|s| {
            Ok(WorkerPlan {
                gpus: take(s.gpu_index)?,
                ..s.plan
            })
        })
        .collect()
}

/// The workers of `topology` without GPUs (the CPU engine).
pub fn plan_cpu_workers(topology: Topology) -> Vec<WorkerPlan> {
    slots(topology).into_iter().map(|s| s.plan).collect()
}

/// `n` aggregated workers on the local node, slots `A`, `B`, `C`, ...: the
/// CPU engine's `agg` topology with more workers than its two (at least 2,
/// at most 26).
pub fn plan_agg_workers(n: u32) -> Vec<WorkerPlan> {
    (b'A'..=b'Z')
        .take(n.max(2) as usize)
        .map(|letter| WorkerPlan {
            slot: char::from(letter).to_string(),
            role: WorkerRole::Aggregated,
            node: 0,
            gpus: Vec::new(),
            gpu_sharers: 1,
        })
        .collect()
}

/// One slot of a topology's shape: its plan (GPU list empty) and which
/// GPU group of its node it takes.
struct Shape {
    plan: WorkerPlan,
    gpu_index: usize,
}

fn slots(topology: Topology) -> Vec<Shape> {
    let shape = |slot: &str, role, node, gpu_index, gpu_sharers| Shape {
        plan: WorkerPlan {
            slot: slot.into(),
            role,
            node,
            gpus: Vec::new(),
            gpu_sharers,
        },
        gpu_index,
    };
    match topology {
        Topology::Agg => vec![
            shape("A", WorkerRole::Aggregated, 0, 0, 1),
            shape("B", WorkerRole::Aggregated, 0, 1, 1),
        ],
        Topology::TwoP1D => vec![
            shape("A", WorkerRole::Prefill, 0, 0, 2),
            shape("B", WorkerRole::Prefill, 0, 0, 2),
            shape("C", WorkerRole::Decode, 0, 1, 1),
        ],
        Topology::TwoNode => vec![
            shape("A", WorkerRole::Aggregated, 0, 0, 1),
            shape("B", WorkerRole::Aggregated, 1, 0, 1),
        ],
    }
}

/// Sets `key` to `value`, replacing an earlier setting of the same key (so
/// the spec, and its snapshot, carries one value per key).
pub fn set_env(mut spec: ProcessSpec, key: &str, value: impl Into<String>) -> ProcessSpec {
    let value = value.into();
    match spec.env.iter_mut().find(|(k, _)| k == key) {
        Some(entry) => entry.1 = value,
        None => spec.env.push((key.to_string(), value)),
    }
    spec
}

/// The plan of `slot` among `plans`, by slot name (the first plan for a slot
/// the topology does not name, e.g. a reference worker's).
pub fn plan_for(plans: &[WorkerPlan], slot: &super::WorkerSlot, gpu_ids: &[u32]) -> WorkerPlan {
    plans
        .iter()
        .find(|p| p.slot == slot.name)
        .or_else(|| plans.first())
        .cloned()
        .unwrap_or_else(|| WorkerPlan {
            slot: slot.name.clone(),
            role: WorkerRole::Aggregated,
            node: 0,
            gpus: gpu_ids.to_vec(),
            gpu_sharers: 1,
        })
}

/// The node a plan runs on: one of `nodes`, or this host when none are set.
pub fn node_of(nodes: &[Node], ctx: &super::LaunchContext, plan: &WorkerPlan) -> Node {
    nodes_or_local(nodes, ctx)
        .get(plan.node)
        .cloned()
        .unwrap_or_else(|| Node::local(&ctx.host))
}

/// The configured nodes, or this host alone.
pub fn nodes_or_local(nodes: &[Node], ctx: &super::LaunchContext) -> Vec<Node> {
    if nodes.is_empty() {
        vec![Node::local(&ctx.host)]
    } else {
        nodes.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topologies_round_trip_their_names() {
        for t in Topology::ALL {
            assert_eq!(t.as_str().parse(), Ok(t));
        }
        assert_eq!(
            "3p1d".parse::<Topology>(),
            Err("unknown topology `3p1d`: expected one of agg, 2p1d, two-node".into())
        );
    }

    #[test]
    fn two_p_one_d_shares_gpu_zero_between_the_prefill_workers() {
        let plans = plan_workers(Topology::TwoP1D, &[0, 1], 1).expect("two GPUs are enough");
        let roles: Vec<_> = plans
            .iter()
            .map(|p| (p.slot.as_str(), p.role, p.cuda_visible_devices()))
            .collect();
        assert_eq!(
            roles,
            [
                ("A", WorkerRole::Prefill, "0".to_string()),
                ("B", WorkerRole::Prefill, "0".to_string()),
                ("C", WorkerRole::Decode, "1".to_string()),
            ]
        );
        assert_eq!(plans[0].gpu_sharers, 2);
        assert_eq!(plans[2].gpu_sharers, 1);
    }

    #[test]
    fn two_node_puts_one_worker_on_each_node() {
        let plans = plan_workers(Topology::TwoNode, &[0], 1).expect("one GPU per node is enough");
        assert_eq!(plans.iter().map(|p| p.node).collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn more_aggregated_workers_take_the_next_slots_on_the_local_node() {
        let plans = plan_agg_workers(3);
        assert_eq!(
            plans.iter().map(|p| p.slot.as_str()).collect::<Vec<_>>(),
            ["A", "B", "C"]
        );
        assert!(plans
            .iter()
            .all(|p| p.role == WorkerRole::Aggregated && p.node == 0 && p.gpus.is_empty()));
        assert_eq!(plan_agg_workers(2), plan_cpu_workers(Topology::Agg));
        assert_eq!(plan_agg_workers(40).len(), 26);
    }

    #[test]
    fn too_few_gpus_is_an_error_naming_the_need() {
        let err = plan_workers(Topology::Agg, &[0], 1).expect_err("agg needs two GPUs");
        assert!(err.contains("needs 2 GPUs"), "{err}");
    }

    #[test]
    fn a_launcher_wraps_the_command_and_keeps_the_env() {
        let node = Node {
            name: "gpu-b".into(),
            address: "10.0.0.2".into(),
            launcher: vec![
                "srun".into(),
                "--nodelist={node}".into(),
                "--ntasks=1".into(),
            ],
        };
        let spec = ProcessSpec::new("w", "/venv/bin/python", "/tmp/w.log")
            .args(["-m", "x"])
            .env("K", "V");
        let wrapped = node.wrap(spec);
        assert_eq!(
            wrapped.command_line(),
            "srun --nodelist=gpu-b --ntasks=1 /venv/bin/python -m x"
        );
        assert_eq!(wrapped.env, [("K".to_string(), "V".to_string())]);
    }

    #[test]
    fn set_env_replaces_instead_of_appending() {
        let spec = ProcessSpec::new("w", "p", "l").env("H", "127.0.0.1");
        let spec = set_env(set_env(spec, "H", "10.0.0.1"), "N", "1");
        assert_eq!(
            spec.env,
            [("H".into(), "10.0.0.1".into()), ("N".into(), "1".into())]
        );
    }
}
