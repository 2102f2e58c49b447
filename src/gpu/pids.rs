//! Which GPU processes belong to which component of the run.
//!
//! NVML reports pids of the host's PID namespace. A component is a process
//! tree rooted at the pid the harness started; its descendants include the
//! processes of PID namespaces the run created itself (`unshare --pid`),
//! which the harness sees under their outer pids. Their namespace-local pids
//! (`NSpid` in `/proc/<pid>/status`) are kept beside them for the logs.

use std::collections::HashMap;
use std::fs;

use serde::{Deserialize, Serialize};

use super::source::GpuProcess;

/// pid → parent pid of every live process.
pub type ParentMap = HashMap<u32, u32>;

/// Reads the parent of every process in `/proc`.
pub fn parent_map() -> ParentMap {
    let Ok(entries) = fs::read_dir("/proc") else {
        return ParentMap::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect()
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command: state, ppid, ...
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `root` and all its descendants.
pub fn tree(root: u32, parents: &ParentMap) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &ppid) in parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = vec![root];
    let mut next = 0;
    while let Some(&pid) = out.get(next) {
        next += 1;
        if let Some(kids) = children.get(&pid) {
            out.extend(kids.iter().copied().filter(|k| *k != root));
        }
    }
    out
}

/// The pids of `pid` in each PID namespace, outermost first (`NSpid`); just
/// `[pid]` outside any nested namespace.
pub fn namespace_pids(pid: u32) -> Vec<u32> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("NSpid:").map(|rest| {
                    rest.split_whitespace()
                        .filter_map(|p| p.parse().ok())
                        .collect()
                })
            })
        })
        .unwrap_or_else(|| vec![pid])
}

/// GPU memory of one component's process on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentMemory {
    pub component: String,
    pub gpu: u32,
    pub pid: u32,
    /// The pid inside the innermost PID namespace, when it differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_pid: Option<u32>,
    pub memory_bytes: Option<u64>,
}

/// Splits the GPU processes into those of the run's components (by process
/// tree) and the others. `namespace_pid` maps a pid to its innermost pid.
pub fn attribute(
    processes: &[GpuProcess],
    components: &[(String, u32)],
    parents: &ParentMap,
    namespace_pid: impl Fn(u32) -> Option<u32>,
) -> (Vec<ComponentMemory>, Vec<GpuProcess>) {
    let trees: Vec<(&str, Vec<u32>)> = components
        .iter()
        .map(|(name, root)| (name.as_str(), tree(*root, parents)))
        .collect();
    let mut ours = Vec::new();
    let mut others = Vec::new();
    for p in processes {
        match trees.iter().find(|(_, pids)| pids.contains(&p.pid)) {
            Some((name, _)) => ours.push(ComponentMemory {
                component: (*name).to_string(),
                gpu: p.gpu,
                pid: p.pid,
                namespace_pid: namespace_pid(p.pid).filter(|n| *n != p.pid),
                memory_bytes: p.memory_bytes,
            }),
            None => others.push(p.clone()),
        }
    }
    (ours, others)
}

/// The innermost namespace pid of `pid`, read from `/proc`.
pub fn innermost_pid(pid: u32) -> Option<u32> {
    namespace_pids(pid).last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(gpu: u32, pid: u32, bytes: u64) -> GpuProcess {
        GpuProcess {
            gpu,
            pid,
            memory_bytes: Some(bytes),
        }
    }

    #[test]
    fn a_component_owns_its_whole_tree_including_namespaced_children() {
        // worker-A (100) → unshare (101) → python in a PID namespace (102, ns pid 1)
        let parents: ParentMap = [(100, 1), (101, 100), (102, 101), (200, 1), (300, 1)].into();
        let gpus = [process(0, 102, 7), process(1, 200, 9), process(1, 300, 5)];
        let components = [("worker-A".to_string(), 100), ("worker-B".to_string(), 200)];
        let (ours, others) = attribute(&gpus, &components, &parents, |pid| {
            (pid == 102).then_some(1)
        });
        assert_eq!(
            ours,
            [
                ComponentMemory {
                    component: "worker-A".into(),
                    gpu: 0,
                    pid: 102,
                    namespace_pid: Some(1),
                    memory_bytes: Some(7),
                },
                ComponentMemory {
                    component: "worker-B".into(),
                    gpu: 1,
                    pid: 200,
                    namespace_pid: None,
                    memory_bytes: Some(9),
                },
            ]
        );
        assert_eq!(
            others,
            [process(1, 300, 5)],
            "a stranger stays unattributed"
        );
    }

    #[test]
    fn reads_this_process_from_proc() {
        let me = std::process::id();
        let parents = parent_map();
        assert!(parents.contains_key(&me));
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep runs");
        let parents = parent_map();
        assert!(tree(me, &parents).contains(&child.id()));
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(namespace_pids(me).first(), Some(&me));
    }
}
