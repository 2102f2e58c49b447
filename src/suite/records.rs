//! From case records to the run's summaries: perf data moved out of case
//! measurements, stack and reference summaries.

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::evidence::{
    ArmSummary, CaseRecord, KvcrBench, PerfSummary, RecoveryTimeline, ReferenceSummary,
    RequestRecord, StackSummary, StartupTiming, SweepLevel, WorkloadSummary,
};
use crate::reference::References;
use crate::stack::Stack;

/// Measurement keys the perf cases use (see `suite::perf`).
pub const REQUESTS: &str = "requests";
pub const ARM: &str = "arm";
pub const SWEEP: &str = "sweep";
pub const RECOVERY: &str = "recovery";
pub const TTFT_ACCURACY: &str = "ttft_accuracy";
pub const WORKLOAD: &str = "workload";
pub const KVCR_BENCH: &str = "kvcr_bench";
pub const KVCR_PULL_BENCH: &str = "kvcr_pull_bench";
pub const G3_READ_BENCH: &str = "g3_read_bench";

fn take<T: DeserializeOwned>(case: &mut CaseRecord, key: &str, keep: bool) -> Option<T> {
    let value = if keep {
        case.measurements.get(key).cloned()
    } else {
        case.measurements.remove(key)
    }?;
    serde_json::from_value(value).ok()
}

/// Gathers every request record, arm summary, sweep level and recovery
/// timeline from the cases. Request lists move to the top level of
/// results.json (they would be duplicated otherwise).
pub fn collect_perf(
    cases: &mut [CaseRecord],
    references: Option<&References>,
) -> (Vec<RequestRecord>, PerfSummary) {
    let mut requests = Vec::new();
    let mut perf = PerfSummary {
        metric_definitions: Some(crate::client::timing::DEFINITIONS.to_string()),
        baseline: references.map(|r| r.baseline.clone()),
        ..PerfSummary::default()
    };
    for case in cases.iter_mut() {
        requests.extend(take::<Vec<RequestRecord>>(case, REQUESTS, false).unwrap_or_default());
        perf.arms.extend(take::<ArmSummary>(case, ARM, true));
        perf.sweep
            .extend(take::<Vec<SweepLevel>>(case, SWEEP, true).unwrap_or_default());
        if let Some(timeline) = take::<RecoveryTimeline>(case, RECOVERY, true) {
            perf.recovery = Some(timeline);
        }
        if let Some(workload) = take::<WorkloadSummary>(case, WORKLOAD, false) {
            perf.workload = Some(workload);
        }
        perf.kvcr_bench
            .extend(take::<KvcrBench>(case, KVCR_BENCH, true));
        perf.kvcr_pull_bench
            .extend(take::<KvcrBench>(case, KVCR_PULL_BENCH, true));
        perf.g3_read_bench
            .extend(take::<KvcrBench>(case, G3_READ_BENCH, true));
        perf.ttft_accuracy
            .extend(take::<crate::evidence::TtftAccuracy>(
                case,
                TTFT_ACCURACY,
                true,
            ));
    }
    (requests, perf)
}

pub fn stack_summary(stack: &Stack, provisioned: u32) -> StackSummary {
    let t = &stack.timings();
    let ms = |v: u128| Duration::from_millis(v as u64);
    let mut startup = Vec::new();
    if let Some(guard) = t.guard_ready_ms {
        startup.push(StartupTiming {
            component: "guard".into(),
            ready: ms(guard),
        });
    }
    startup.push(StartupTiming {
        component: "workers".into(),
        ready: ms(t.workers_ready_ms),
    });
    startup.push(StartupTiming {
        component: "router".into(),
        ready: ms(t.frontend_ready_ms),
    });
    startup.push(StartupTiming {
        component: "first_completion".into(),
        ready: ms(t.first_completion_ms),
    });
    StackSummary {
        provisioned,
        attached: !stack.control().owns(),
        startup,
        total_startup: ms(t.total_ms),
    }
}

/// The event of a stack that serves: its total startup, each stage (as
/// [`stack_summary`]) and each worker from spawn to serving.
pub fn stack_ready(t: &crate::stack::StartupTimings) -> crate::events::RunEvent {
    let ready = |component: &str, ms: u128| crate::events::ComponentReady {
        component: component.to_string(),
        ready_ms: ms as u64,
    };
    let stages = t
        .guard_ready_ms
        .map(|ms| ready("guard", ms))
        .into_iter()
        .chain([
            ready("workers", t.workers_ready_ms),
            ready("router", t.frontend_ready_ms),
            ready("first_completion", t.first_completion_ms),
        ]);
    let each = t.per_component_ms.iter().map(|(name, ms)| ready(name, *ms));
    crate::events::RunEvent::StackReady {
        total_ms: t.total_ms as u64,
        components: stages.chain(each).collect(),
        restarts: t.restarts.clone(),
    }
}

pub fn reference_summary(r: &References) -> ReferenceSummary {
    ReferenceSummary {
        digest: r.digest.clone(),
        from_cache: r.from_cache,
        computed_by: r.computed_by.clone(),
        computed_unix_s: r.computed_unix_s,
        age_s: (r.computed_unix_s > 0).then(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
                .saturating_sub(r.computed_unix_s)
        }),
        prompts: r.tokens.len(),
        probes: r.probes.iter().map(|p| (p.clone(), true)).collect(),
        duration: Duration::from_secs_f64(r.seconds),
        batching: Some({
            let b = crate::reference::Batching::of(r.batching.as_ref());
            format!("{} in flight: {}", b.concurrency, b.reason)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{ComponentReady, RunEvent};

    #[test]
    fn a_deliver_bench_measurement_reaches_the_perf_summary() {
        let bench = KvcrBench {
            worker: "A".into(),
            ops: 400,
            failed: 0,
            blocks_per_op: 4,
            wall_seconds: 2.1,
            first_failure: None,
            kvcr_ops: Vec::new(),
            op_seconds: Vec::new(),
        };
        let mut case = CaseRecord::start("TC-05", "TC-05::kvcr_deliver_bench");
        case.measurements
            .insert(KVCR_BENCH.into(), serde_json::to_value(&bench).unwrap());
        let mut other = CaseRecord::start("TC-05", "TC-05::cold");
        let (_, perf) = collect_perf(std::slice::from_mut(&mut case), None);
        assert_eq!(perf.kvcr_bench, vec![bench]);
        assert!(
            case.measurements.contains_key(KVCR_BENCH),
            "kept in the case"
        );
        let (_, none) = collect_perf(std::slice::from_mut(&mut other), None);
        assert!(none.kvcr_bench.is_empty());
    }

    #[test]
    fn a_pull_bench_measurement_reaches_its_own_perf_list() {
        let bench = KvcrBench {
            worker: "B".into(),
            ops: 400,
            failed: 0,
            blocks_per_op: 4,
            wall_seconds: 4.2,
            first_failure: None,
            kvcr_ops: Vec::new(),
            op_seconds: vec![0.01],
        };
        let mut case = CaseRecord::start("TC-05", "TC-05::kvcr_pull_bench");
        case.measurements.insert(
            KVCR_PULL_BENCH.into(),
            serde_json::to_value(&bench).unwrap(),
        );
        let (_, perf) = collect_perf(std::slice::from_mut(&mut case), None);
        assert_eq!(perf.kvcr_pull_bench, vec![bench]);
        assert!(perf.kvcr_bench.is_empty(), "no deliver bench of it");
        assert!(case.measurements.contains_key(KVCR_PULL_BENCH));
    }

    #[test]
    fn a_g3_read_bench_measurement_reaches_the_perf_summary_apart_from_the_deliver_bench() {
        let bench = KvcrBench {
            worker: "A".into(),
            ops: 400,
            failed: 0,
            blocks_per_op: 4,
            wall_seconds: 1.3,
            first_failure: None,
            kvcr_ops: Vec::new(),
            op_seconds: vec![0.003],
        };
        let mut case = CaseRecord::start("TC-12", "TC-12::g3_read_bench");
        case.measurements
            .insert(G3_READ_BENCH.into(), serde_json::to_value(&bench).unwrap());
        let (_, perf) = collect_perf(std::slice::from_mut(&mut case), None);
        assert_eq!(perf.g3_read_bench, vec![bench]);
        assert!(perf.kvcr_bench.is_empty(), "not a deliver bench");
        assert!(case.measurements.contains_key(G3_READ_BENCH));
    }

    #[test]
    fn a_stack_ready_event_carries_each_stage_and_each_worker() {
        let timings = crate::stack::StartupTimings {
            guard_ready_ms: None,
            workers_ready_ms: 4_000,
            frontend_ready_ms: 2_000,
            first_completion_ms: 6_500,
            total_ms: 6_949,
            per_component_ms: vec![("worker-A".into(), 3_900)],
            per_component_registered_ms: Vec::new(),
            restarts: vec!["worker-B: restarted once".into()],
        };
        let ready = |c: &str, ms: u64| ComponentReady {
            component: c.into(),
            ready_ms: ms,
        };
        assert_eq!(
            stack_ready(&timings),
            RunEvent::StackReady {
                total_ms: 6_949,
                components: vec![
                    ready("workers", 4_000),
                    ready("router", 2_000),
                    ready("first_completion", 6_500),
                    ready("worker-A", 3_900),
                ],
                restarts: vec!["worker-B: restarted once".into()],
            }
        );
        let with_guard = crate::stack::StartupTimings {
            guard_ready_ms: Some(800),
            ..timings
        };
        let RunEvent::StackReady { components, .. } = stack_ready(&with_guard) else {
            panic!("a stack ready event");
        };
        assert_eq!(components[0], ready("guard", 800));
    }
}
