//! Worker slots: a worker's seat in the stack (its Guard group, ports and
//! files), allotted once per stack from the engine's worker plans. The
//! stack runner allots them from free ports, the Kubernetes runner from
//! its pod's fixed ports; both name the files the same way.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::topology::WorkerPlan;
use super::ReferenceVariant;

/// One worker's seat in the stack. A replacement takes the same slot: the
/// same Guard index and control port, so it can claim the dead worker's pool.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WorkerSlot {
    /// `A`, `B`, ...
    pub name: String,
    /// The slot's group in its Guard service.
    pub guard_index: u32,
    /// The process name of the Guard service holding the slot's pool
    /// (`guard`, or `guard-A` where each slot has its own).
    pub guard_service: String,
    /// That service's socket, which the worker's KVCR tier connects to.
    pub guard_socket: PathBuf,
    pub control_port: u16,
    pub metrics_port: u16,
    pub ready_file: PathBuf,
    /// 0 for the first start, 1 for the first replacement, ...
    pub generation: u32,
    /// ZMQ port the engine publishes its KV events on (GPU engines).
    pub kv_events_port: u16,
    /// NIXL side-channel port of a disaggregated vLLM worker (GPU engines).
    pub side_channel_port: u16,
}

impl WorkerSlot {
    /// The name a process of this slot is logged under (`worker-A`, `worker-A.1`).
    pub fn process_name(&self) -> String {
        match self.generation {
            0 => format!("worker-{}", self.name),
            n => format!("worker-{}.{n}", self.name),
        }
    }
}
/// The ports of one slot, as an allotment asks for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// The KVCR control listener (kept by a replacement).
    Control,
    /// The engine's Prometheus `/metrics` (Dynamo's system server).
    Metrics,
    /// The ZMQ publisher of the engine's KV events.
    KvEvents,
    /// NIXL's side channel of a disaggregated worker.
    SideChannel,
}

/// The file a process of the stack writes when it is ready.
pub fn ready_file(scratch: &Path, process_name: &str) -> PathBuf {
    scratch.join("ready").join(format!("{process_name}.json"))
}

/// The socket of the Guard service shared by every slot.
pub fn guard_socket(scratch: &Path) -> PathBuf {
    scratch.join("guard.sock")
}

/// The socket of Guard service `service` when each slot has its own.
pub fn guard_socket_of(scratch: &Path, service: &str) -> PathBuf {
    scratch.join(format!("{service}.sock"))
}

/// One slot per plan, in the plans' order: its Guard (one shared service
/// with a group per slot, or one service per slot when `guard_per_slot`),
/// its files under `scratch`, and its ports from `port` (asked with the
/// slot's position, control, metrics, KV events, side channel in turn).
pub fn allot(
    plans: &[WorkerPlan],
    guard_per_slot: bool,
    scratch: &Path,
    mut port: impl FnMut(Port, usize) -> u16,
) -> Vec<WorkerSlot> {
    plans
        .iter()
        .enumerate()
        .map(|(i, plan)| {
            let (guard_service, guard_socket, guard_index) = if guard_per_slot {
                let service = format!("guard-{}", plan.slot);
                let socket = guard_socket_of(scratch, &service);
                (service, socket, 0)
            } else {
                ("guard".to_string(), guard_socket(scratch), i as u32)
            };
            WorkerSlot {
                ready_file: ready_file(scratch, &format!("worker-{}", plan.slot)),
                name: plan.slot.clone(),
                guard_index,
                guard_service,
                guard_socket,
                control_port: port(Port::Control, i),
                metrics_port: port(Port::Metrics, i),
                kv_events_port: port(Port::KvEvents, i),
                side_channel_port: port(Port::SideChannel, i),
                generation: 0,
            }
        })
        .collect()
}

/// The slot of a reference worker: named after its variant, no Guard and
/// no control port (KVCR is off), its other ports from `port`.
pub fn reference_slot(
    variant: ReferenceVariant,
    scratch: &Path,
    mut port: impl FnMut(Port) -> u16,
) -> WorkerSlot {
    WorkerSlot {
        name: variant.label().into(),
        guard_index: 0,
        guard_service: String::new(),
        guard_socket: PathBuf::new(),
        control_port: 0,
        metrics_port: port(Port::Metrics),
        kv_events_port: port(Port::KvEvents),
        side_channel_port: port(Port::SideChannel),
        ready_file: ready_file(scratch, variant.label()),
        generation: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::topology::{plan_cpu_workers, Topology};
    use super::*;

    #[test]
    fn a_shared_guard_gives_each_slot_a_group_and_per_slot_guards_a_service() {
        let plans = plan_cpu_workers(Topology::TwoP1D);
        let scratch = Path::new("/dev/shm/s");
        let shared = allot(&plans, false, scratch, |_, i| 100 + i as u16);
        assert_eq!(
            shared
                .iter()
                .map(|s| (s.name.as_str(), s.guard_service.as_str(), s.guard_index))
                .collect::<Vec<_>>(),
            [("A", "guard", 0), ("B", "guard", 1), ("C", "guard", 2)]
        );
        assert_eq!(
            shared[1].guard_socket,
            PathBuf::from("/dev/shm/s/guard.sock")
        );
        assert_eq!(
            shared[2].ready_file,
            PathBuf::from("/dev/shm/s/ready/worker-C.json")
        );
        let own = allot(&plans, true, scratch, |_, _| 0);
        assert_eq!(own[1].guard_service, "guard-B");
        assert_eq!(
            own[1].guard_socket,
            PathBuf::from("/dev/shm/s/guard-B.sock")
        );
        assert!(own.iter().all(|s| s.guard_index == 0));
    }

    #[test]
    fn ports_are_asked_per_slot_in_turn() {
        let plans = plan_cpu_workers(Topology::Agg);
        let mut asked = Vec::new();
        let slots = allot(&plans, false, Path::new("/s"), |p, i| {
            asked.push((p, i));
            asked.len() as u16
        });
        assert_eq!(
            asked,
            [
                (Port::Control, 0),
                (Port::Metrics, 0),
                (Port::KvEvents, 0),
                (Port::SideChannel, 0),
                (Port::Control, 1),
                (Port::Metrics, 1),
                (Port::KvEvents, 1),
                (Port::SideChannel, 1),
            ]
        );
        assert_eq!((slots[1].control_port, slots[1].side_channel_port), (5, 8));
    }
}
