//! No GPU oversubscribed: the memory fractions a plan puts on each GPU, at
//! any one time, sum to at most [`MAX_FRACTION_PER_GPU`].
//!
//! The check reads any engine's process specs (`CUDA_VISIBLE_DEVICES` and
//! the engine's memory-fraction flag), grouped into the phases of a run:
//! processes of one phase run at the same time; phases follow each other.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::{slots, Engine, LaunchContext, WorkerSlot};
use crate::gpu::preflight::{GpuNeed, GpuShare};
use crate::proc::ProcessSpec;

/// Room left for the CUDA contexts and NCCL buffers outside the fractions.
pub const MAX_FRACTION_PER_GPU: f64 = 0.95;

/// The flags through which engines claim a fraction of each of their GPUs'
/// memory: vLLM, SGLang.
pub const FRACTION_FLAGS: [&str; 2] = ["--gpu-memory-utilization", "--mem-fraction-static"];

/// A process's claim on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuClaim {
    pub process: String,
    /// The node the process runs on (its `DYN_SYSTEM_HOST`, the address the
    /// GPU engines bind their system server to).
    pub node: String,
    pub gpu: u32,
    pub fraction: f64,
    /// False when the spec names GPUs but no fraction (counted as 1.0).
    pub explicit: bool,
}

/// Processes that run at the same time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    pub name: String,
    pub claims: Vec<GpuClaim>,
}

/// When the reference workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceSchedule {
    /// Alone, before the stack starts (and stopped before it does).
    Alone,
    /// Beside the stack's workers.
    WithStack,
}

/// The GPU claims of one process spec (none for a process without
/// `CUDA_VISIBLE_DEVICES`: frontend, Guard).
pub fn claims(spec: &ProcessSpec) -> Vec<GpuClaim> {
    let Some(devices) = spec.env_var("CUDA_VISIBLE_DEVICES") else {
        return Vec::new();
    };
    let fraction = FRACTION_FLAGS
        .iter()
        .find_map(|flag| spec.flag_value(flag))
        .and_then(|v| v.parse::<f64>().ok());
    let node = spec
        .env_var("DYN_SYSTEM_HOST")
        .unwrap_or("local")
        .to_string();
    devices
        .split(',')
        .filter_map(|d| d.trim().parse::<u32>().ok())
        .map(|gpu| GpuClaim {
            process: spec.name.clone(),
            node: node.clone(),
            gpu,
            fraction: fraction.unwrap_or(1.0),
            explicit: fraction.is_some(),
        })
        .collect()
}

fn phase(name: &str, specs: &[ProcessSpec]) -> Phase {
    Phase {
        name: name.into(),
        claims: specs.iter().flat_map(claims).collect(),
    }
}

/// The phases of a run of `engine`: reference workers, the stack, and (with
/// a Guard) the stack after TC-04 replaced worker A.
pub fn phases(engine: &dyn Engine, ctx: &LaunchContext, schedule: ReferenceSchedule) -> Vec<Phase> {
    // Slots as provisioning allots them; their ports do not matter here.
    let references: Vec<ProcessSpec> = engine
        .reference_variants()
        .into_iter()
        .map(|v| {
            let slot = slots::reference_slot(v, &ctx.work_dir, |_| 0);
            engine.reference_worker(ctx, v, &slot)
        })
        .collect();
    let plans = engine.worker_plans();
    let slots = slots::allot(&plans, engine.guard_per_slot(), &ctx.work_dir, |_, _| 0);
    let workers: Vec<ProcessSpec> = slots.iter().map(|s| engine.worker(ctx, s)).collect();
    let mut out = Vec::new();
    match schedule {
        ReferenceSchedule::Alone => {
            out.push(phase("reference", &references));
            // The bare engine's probes run after the references stopped.
            if let Some(bare) = engine.bare_engine(ctx, 0) {
                out.push(phase("bare engine", &[bare]));
            }
            out.push(phase("stack", &workers));
        }
        ReferenceSchedule::WithStack => {
            let mut all = references.clone();
            all.extend(workers.iter().cloned());
            out.push(phase("stack with reference workers", &all));
        }
    }
    if engine.has_guard() {
        if let Some(first) = slots.first() {
            let mut replaced: Vec<ProcessSpec> = workers.into_iter().skip(1).collect();
            let replacement = WorkerSlot {
                generation: 1,
                ..first.clone()
            };
            replaced.push(engine.worker(ctx, &replacement));
            if schedule == ReferenceSchedule::WithStack {
                replaced.extend(references);
            }
            out.push(phase("stack after TC-04's replacement", &replaced));
        }
    }
    out
}

/// When the stack runner starts the reference workers: alone, before the
/// KVCR workers (`Suite::stack`: reference phase, stop, then the workers).
pub const PROVISIONING_SCHEDULE: ReferenceSchedule = ReferenceSchedule::Alone;

/// Before any process starts: the plan of `engine` on this host (`host`, the
/// address the local node's workers advertise) must not oversubscribe a
/// GPU; returns what the local GPUs must give (for the NVML preflight).
/// `with_reference`: whether this run starts the reference workers (not
/// when the reference cache holds their results).
pub fn preflight_need(
    engine: &dyn Engine,
    host: &str,
    with_reference: bool,
) -> Result<GpuNeed, String> {
    let ctx = LaunchContext::unlaunched(host);
    let phases: Vec<Phase> = if with_reference {
        phases(engine, &ctx, PROVISIONING_SCHEDULE)
    } else {
        phases(engine, &ctx, ReferenceSchedule::Alone)
            .into_iter()
            .filter(|p| p.name != "reference")
            .collect()
    };
    check(&phases).map_err(|over| {
        format!(
            "GPU placement: the {} plan oversubscribes {} (memory fractions at one time must sum to at most {MAX_FRACTION_PER_GPU}):\n  {}",
            engine.name(),
            if over.len() == 1 { "a GPU".to_string() } else { format!("{} GPUs", over.len()) },
            over.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  ")
        )
    })?;
    Ok(need_on(&phases, host, engine.name()))
}

/// One GPU whose claims in one phase sum above the limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Oversubscribed {
    pub phase: String,
    pub node: String,
    pub gpu: u32,
    pub total: f64,
    pub claims: Vec<GpuClaim>,
}

impl fmt::Display for Oversubscribed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .claims
            .iter()
            .map(|c| {
                let note = if c.explicit {
                    ""
                } else {
                    " (no fraction flag)"
                };
                format!("{} {}{note}", c.process, c.fraction)
            })
            .collect();
        write!(
            f,
            "GPU {} on {} in phase `{}`: {} = {:.2} > {MAX_FRACTION_PER_GPU}",
            self.gpu,
            self.node,
            self.phase,
            parts.join(" + "),
            self.total
        )
    }
}

/// Sums each phase's claims per node and GPU.
fn totals(phase: &Phase) -> BTreeMap<(String, u32), Vec<GpuClaim>> {
    let mut per_gpu: BTreeMap<(String, u32), Vec<GpuClaim>> = BTreeMap::new();
    for c in &phase.claims {
        per_gpu
            .entry((c.node.clone(), c.gpu))
            .or_default()
            .push(c.clone());
    }
    per_gpu
}

/// Every GPU of every phase within [`MAX_FRACTION_PER_GPU`], else all the
/// GPUs that are not.
pub fn check(phases: &[Phase]) -> Result<(), Vec<Oversubscribed>> {
    let mut over = Vec::new();
    for phase in phases {
        for ((node, gpu), claims) in totals(phase) {
            let total: f64 = claims.iter().map(|c| c.fraction).sum();
            // A hair of slack for sums such as 0.4 + 0.4 + 0.15 in binary.
            if total > MAX_FRACTION_PER_GPU + 1e-9 {
                over.push(Oversubscribed {
                    phase: phase.name.clone(),
                    node,
                    gpu,
                    total,
                    claims,
                });
            }
        }
    }
    if over.is_empty() {
        Ok(())
    } else {
        Err(over)
    }
}

/// What the GPUs of node `node` must give: per GPU, the largest sum over
/// the phases (the preflight's input).
pub fn need_on(phases: &[Phase], node: &str, plan: &str) -> GpuNeed {
    let mut shares: BTreeMap<u32, GpuShare> = BTreeMap::new();
    for phase in phases {
        for ((n, gpu), claims) in totals(phase) {
            if n != node {
                continue;
            }
            let total: f64 = claims.iter().map(|c| c.fraction).sum();
            let entry = shares.entry(gpu).or_insert_with(|| GpuShare {
                gpu,
                fraction: 0.0,
                processes: Vec::new(),
            });
            if total > entry.fraction {
                entry.fraction = total;
                entry.processes = claims.iter().map(|c| c.process.clone()).collect();
            }
        }
    }
    GpuNeed {
        plan: plan.into(),
        shares: shares.into_values().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::sglang::{SglangEngine, SglangProfile};
    use super::super::testing::{example_context, two_nodes};
    use super::super::topology::Topology;
    use super::super::vllm::{VllmEngine, VllmProfile};
    use super::super::{GeometryKind, Kind, Setup};
    use super::*;

    fn context(topology: Topology) -> LaunchContext {
        match topology {
            Topology::TwoNode => LaunchContext {
                host: "10.0.0.1".into(),
                ..example_context()
            },
            _ => example_context(),
        }
    }

    fn sglang(topology: Topology) -> SglangEngine {
        let mut profile = SglangProfile::default();
        if topology == Topology::TwoNode {
            profile.nodes = two_nodes();
        }
        SglangEngine::new(profile, topology).expect("the default SGLang profile fits")
    }

    fn render(over: Vec<Oversubscribed>) -> String {
        over.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn every_sglang_plan_fits_its_gpus() {
        for topology in [Topology::Agg, Topology::TwoNode] {
            let e = sglang(topology);
            let phases = phases(&e, &context(topology), ReferenceSchedule::Alone);
            assert!(
                phases.iter().all(|p| !p.claims.is_empty()),
                "{topology}: every phase claims GPUs: {phases:#?}"
            );
            if let Err(over) = check(&phases) {
                panic!("sglang {topology}:\n{}", render(over));
            }
        }
    }

    /// The same plans with the reference workers beside the stack do not fit:
    /// the check can fail, and says where.
    #[test]
    fn reference_workers_beside_the_stack_oversubscribe_and_are_named() {
        let e = sglang(Topology::Agg);
        let err = check(&phases(
            &e,
            &example_context(),
            ReferenceSchedule::WithStack,
        ))
        .expect_err("0.8 + 0.8 on one GPU");
        let text = render(err);
        assert!(
            text.contains("GPU 0 on 127.0.0.1 in phase `stack with reference workers`: reference 0.8 + worker-A 0.8 = 1.60 > 0.95"),
            "{text}"
        );
    }

    #[test]
    fn a_gpu_without_a_fraction_counts_whole() {
        let spec = ProcessSpec::new("w", "python", "w.log").env("CUDA_VISIBLE_DEVICES", "2,3");
        let c = claims(&spec);
        assert_eq!(
            c.iter()
                .map(|c| (c.gpu, c.fraction, c.explicit))
                .collect::<Vec<_>>(),
            [(2, 1.0, false), (3, 1.0, false)]
        );
        let over = check(&[Phase {
            name: "p".into(),
            claims: c,
        }])
        .expect_err("1.0 > 0.95");
        assert!(render(over).contains("w 1 (no fraction flag)"));
    }

    #[test]
    fn the_preflight_need_takes_the_largest_phase_per_gpu() {
        let e = sglang(Topology::Agg);
        let need = need_on(
            &phases(&e, &example_context(), ReferenceSchedule::Alone),
            "127.0.0.1",
            "sglang agg",
        );
        let shares: Vec<_> = need.shares.iter().map(|s| (s.gpu, s.fraction)).collect();
        assert_eq!(shares, [(0, 0.8), (1, 0.8)]);
    }

    #[test]
    fn the_run_preflight_refuses_an_oversubscribing_plan_and_passes_the_cpu_engine() {
        let greedy = SglangProfile {
            mem_fraction_static: 0.96,
            ..SglangProfile::default()
        };
        let e = SglangEngine::new(greedy, Topology::Agg).expect("the plan builds");
        let err = preflight_need(&e, "127.0.0.1", false).expect_err("0.96 > 0.95");
        assert!(
            err.starts_with("GPU placement: the sglang plan oversubscribes 2 GPUs")
                && err.contains("GPU 0 on 127.0.0.1 in phase `stack`: worker-A 0.96 = 0.96 > 0.95"),
            "{err}"
        );
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let knobs = super::super::cpu::CpuEngineProfile::shipped();
        let setup = Setup::new(Topology::Agg, GeometryKind::Dense, &knobs, None, root);
        let cpu = Kind::Cpu.build(&setup).expect("the CPU engine");
        let need =
            preflight_need(cpu.as_ref(), "127.0.0.1", true).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            need.shares.is_empty(),
            "the CPU engine claims no GPU: {need:?}"
        );
        // The shipped SGLang plan, references first and alone: it fits.
        for with_reference in [true, false] {
            let need = preflight_need(&sglang(Topology::Agg), "127.0.0.1", with_reference)
                .unwrap_or_else(|e| panic!("{e}"));
            let shares: Vec<_> = need.shares.iter().map(|s| (s.gpu, s.fraction)).collect();
            assert_eq!(shares, [(0, 0.8), (1, 0.8)]);
        }
    }

    /// The vLLM CPU lane (`--profile vllm-cpu`) hides every GPU: no claim,
    /// nothing for the preflight to refuse.
    #[test]
    fn the_vllm_cpu_lane_claims_no_gpu() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let knobs = super::super::cpu::CpuEngineProfile::shipped();
        let lane = std::path::Path::new("fixtures/engines/vllm-cpu.toml");
        let setup = Setup::new(Topology::Agg, GeometryKind::Dense, &knobs, Some(lane), root);
        let e = Kind::Vllm.build(&setup).unwrap_or_else(|e| panic!("{e}"));
        let need = preflight_need(e.as_ref(), "127.0.0.1", true).unwrap_or_else(|e| panic!("{e}"));
        assert!(need.shares.is_empty(), "{need:?}");
    }

    #[test]
    fn every_vllm_plan_fits_its_gpus() {
        for topology in Topology::ALL {
            let nodes = if topology == Topology::TwoNode {
                two_nodes()
            } else {
                Vec::new()
            };
            let profile = VllmProfile {
                nodes,
                ..VllmProfile::default()
            };
            let e = VllmEngine::new(profile, topology).expect("the default vLLM profile fits");
            if let Err(over) = check(&phases(&e, &context(topology), ReferenceSchedule::Alone)) {
                panic!("vllm {topology}:\n{}", render(over));
            }
        }
    }
}
