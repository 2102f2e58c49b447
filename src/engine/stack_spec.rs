//! A stack's identity: which engine, in which topology, with which KV page
//! layout. Lanes, the mutation lane, the runners and `compare` name a stack
//! with this one value, written as the words of `--engine`, `--topology`
//! and `--geometry` joined by `/` (`vllm/two-node/dense`).

use std::fmt;
use std::str::FromStr;

use super::{topology, GeometryKind, Kind, Topology};

/// Engine × topology × geometry: what makes one stack differ from another
/// (a profile tunes a stack, it does not name it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StackSpec {
    pub engine: Kind,
    pub topology: Topology,
    pub geometry: GeometryKind,
}

impl StackSpec {
    pub const fn new(engine: Kind, topology: Topology, geometry: GeometryKind) -> Self {
        Self {
            engine,
            topology,
            geometry,
        }
    }

    /// Whether the engine runs on GPUs: every engine but the CPU engine
    /// stand-in (vLLM's CPU platform is a profile of a GPU engine, and a
    /// scheduler is asked for that engine's resources).
    pub fn on_gpus(self) -> bool {
        self.engine != Kind::Cpu
    }

    /// The GPUs the stack asks of a scheduler on each node: one per worker
    /// the topology places on a node (aggregated: 2, 2P+1D: 3, two nodes:
    /// 1 each) for a GPU engine, none for the CPU engine.
    pub fn gpus_per_node(self) -> u32 {
        if !self.on_gpus() {
            return 0;
        }
        let workers = topology::plan_cpu_workers(self.topology);
        workers.iter().filter(|w| w.node == 0).count() as u32
    }
}

/// `cpu/agg/dense`.
impl fmt::Display for StackSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.engine, self.topology, self.geometry)
    }
}

/// From `ENGINE/TOPOLOGY/GEOMETRY`, each part one of its flag's words.
impl FromStr for StackSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split('/').collect();
        let [engine, topology, geometry] = parts[..] else {
            return Err(format!(
                "stack `{text}`: expected ENGINE/TOPOLOGY/GEOMETRY, e.g. cpu/agg/dense"
            ));
        };
        let context = |e: String| format!("stack `{text}`: {e}");
        Ok(Self {
            engine: engine.parse().map_err(context)?,
            topology: topology.parse().map_err(context)?,
            geometry: geometry.parse().map_err(context)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stack_round_trips_through_its_words() {
        for engine in Kind::ALL {
            for topology in Topology::ALL {
                for geometry in GeometryKind::ALL {
                    let stack = StackSpec::new(engine, topology, geometry);
                    let words = stack.to_string();
                    assert_eq!(words.parse::<StackSpec>(), Ok(stack), "{words}");
                }
            }
        }
        assert_eq!(
            StackSpec::new(Kind::Vllm, Topology::TwoNode, GeometryKind::Dense).to_string(),
            "vllm/two-node/dense"
        );
    }

    #[test]
    fn a_bad_stack_says_which_part_is_wrong() {
        let err = "cpu/ring/dense".parse::<StackSpec>().unwrap_err();
        assert!(
            err.contains("stack `cpu/ring/dense`: unknown topology `ring`")
                && err.contains("agg, 2p1d, two-node"),
            "{err}"
        );
        for text in ["cpu/agg", "cpu/agg/dense/x", ""] {
            let err = text.parse::<StackSpec>().unwrap_err();
            assert!(err.contains("expected ENGINE/TOPOLOGY/GEOMETRY"), "{err}");
        }
    }

    /// One GPU per worker of a node for a GPU engine, as the runners have
    /// always asked; the CPU engine asks for none.
    #[test]
    fn gpus_per_node_follow_the_engine_and_the_topology() {
        let gpus = |engine, topology| {
            StackSpec::new(engine, topology, GeometryKind::Dense).gpus_per_node()
        };
        for topology in Topology::ALL {
            assert_eq!(gpus(Kind::Cpu, topology), 0, "{topology}");
        }
        for engine in [Kind::Vllm, Kind::Sglang] {
            assert_eq!(gpus(engine, Topology::Agg), 2);
            assert_eq!(gpus(engine, Topology::TwoP1D), 3);
            assert_eq!(gpus(engine, Topology::TwoNode), 1);
        }
    }
}
