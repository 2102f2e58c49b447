//! After a run on a production-size Guard pool (1 GiB or more): what the
//! pool cost at its size, from every log of the run (workers' registrations,
//! the Guard services' promotions and handbacks) and the teardown (each
//! Guard service's shutdown and the pool files left), judged against KVCR's
//! own deadlines; written to `guard-costs.json` with the latest row of each
//! other lane that measured one, for the report's table and chart.

use std::path::Path;

use crate::evidence::guard_costs::{GuardCosts, PoolCostRow, FILE};
use crate::evidence::RunDir;
use crate::proc::StopReport;
use crate::telemetry::guard_costs::{LoggedCosts, Shutdown};
use crate::verdict::scale::{
    expect_clean_shutdown, expect_seen_steps_within_deadlines, KvcrDeadlines, StepCosts,
};
use crate::verdict::Violation;

/// A Guard pool from this size on is a production-size one.
const PRODUCTION_POOL_BYTES: u64 = 1 << 30;
/// KVCR's operation timeout when the engine does not set one.
const KVCR_DEFAULT_OPERATION_TIMEOUT_MS: u64 = 5000;

/// The run's Guard pool costs and the violations of KVCR's deadlines and of
/// a clean shutdown (`operation_timeout_ms`: the workers' KVCR operation
/// timeout, as the engine sets it); `None` on a pool smaller than a
/// production one. Every engine's stack is judged so: the vLLM stacks'
/// Guard pools are 4 GiB.
pub(super) fn collect(
    operation_timeout_ms: Option<u64>,
    run: &RunDir,
    target: &str,
    stops: &[StopReport],
) -> Option<(GuardCosts, Vec<Violation>)> {
    let logs = run.logs_dir();
    let (logged, registrations_ms) = read_logs(&logs);
    if logged.pool_bytes() < PRODUCTION_POOL_BYTES {
        return None;
    }
    let left: Vec<String> =
        std::fs::read_to_string(logs.join(crate::stack::POOL_FILES_AFTER_SHUTDOWN))
            .ok()
            .and_then(|text| serde_json::from_str::<Vec<std::path::PathBuf>>(&text).ok())
            .unwrap_or_default()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
    let shutdowns = shutdowns(stops, &left, &logged.pools_left_in_use);
    let deadlines = KvcrDeadlines::kvcr_0_1_1(
        operation_timeout_ms.unwrap_or(KVCR_DEFAULT_OPERATION_TIMEOUT_MS),
    );
    let steps = StepCosts {
        registration_ms: registrations_ms.clone(),
        promotion_ms: logged.promotions.iter().map(|s| s.ms).collect(),
        handback_ms: logged.handbacks.iter().map(|s| s.ms).collect(),
    };
    let violations: Vec<Violation> =
        std::iter::once(expect_seen_steps_within_deadlines(&steps, &deadlines))
            .chain(
                shutdowns
                    .iter()
                    .map(|s| expect_clean_shutdown(s, &deadlines)),
            )
            .filter_map(Result::err)
            .collect();
    let mut row = PoolCostRow::of(target, run.run_id(), &logged, &registrations_ms, &shutdowns);
    row.violations = violations.iter().map(ToString::to_string).collect();
    let mut rows = vec![row];
    rows.extend(other_lanes_rows(run.base(), target));
    let costs = GuardCosts {
        rows,
        logged,
        registrations_ms,
        shutdowns,
    };
    let _ = run.write_root_json(FILE, &costs);
    Some((costs, violations))
}

/// Every log of the run: the Guard services' costs merged, and the workers'
/// registrations.
fn read_logs(logs: &Path) -> (LoggedCosts, Vec<f64>) {
    let mut merged = LoggedCosts::default();
    let mut registrations = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(logs)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let costs = LoggedCosts::parse(&text);
        registrations.extend(costs.registrations.iter().map(|s| s.ms));
        if merged.pool_sizes_bytes.is_empty() {
            merged.pool_sizes_bytes = costs.pool_sizes_bytes;
        }
        merged.promotions.extend(costs.promotions);
        merged.handbacks.extend(costs.handbacks);
        merged.pools_left_in_use.extend(costs.pools_left_in_use);
    }
    (merged, registrations)
}

/// Each Guard service that was running at teardown, and how its shutdown
/// went; one killed by a case before is no shutdown.
fn shutdowns(stops: &[StopReport], left: &[String], killed_pools: &[String]) -> Vec<Shutdown> {
    stops
        .iter()
        .filter(|s| s.name.starts_with("guard") && !s.already_exited)
        .map(|s| Shutdown {
            service: s.name.clone(),
            stop_ms: s.stop_ms as f64,
            needed_sigkill: s.needed_sigkill,
            exit: s.exit.clone(),
            pool_files_left: left.to_vec(),
            killed_service_pools: killed_pools.to_vec(),
        })
        .collect()
}

/// The latest row of each other lane's run that measured its pool.
fn other_lanes_rows(base: &Path, target: &str) -> Vec<PoolCostRow> {
    let mut rows: Vec<PoolCostRow> = std::fs::read_dir(base)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy() != target)
        .filter_map(|e| std::fs::read_to_string(e.path().join("latest").join(FILE)).ok())
        .filter_map(|text| serde_json::from_str::<GuardCosts>(&text).ok())
        .filter_map(|costs| costs.rows.into_iter().next())
        .collect();
    rows.sort_by(|a, b| a.target.cmp(&b.target));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(name: &str, already_exited: bool, exit: &str) -> StopReport {
        StopReport {
            name: name.into(),
            pid: 1,
            already_exited,
            needed_sigkill: false,
            exit: Some(exit.into()),
            stop_ms: 700,
        }
    }

    #[test]
    fn only_services_running_at_teardown_shut_down() {
        let stops = [
            stop("A", false, "exit status: 0"),
            stop("guard", true, "signal: 9 (SIGKILL)"),
            stop("guard.2", false, "exit status: 0"),
        ];
        let s = shutdowns(&stops, &["/p/kvcr-x".into()], &["/p/kvcr-x".into()]);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].service, "guard.2");
        assert_eq!(s[0].stop_ms, 700.0);
        assert_eq!(s[0].pool_files_left, ["/p/kvcr-x"]);
        assert_eq!(s[0].killed_service_pools, ["/p/kvcr-x"]);
    }

    #[test]
    fn logs_merge_and_other_lanes_rows_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(
            logs.join("guard.log"),
            "INFO:kvcr.kvcr_service:KVCR service ready: socket=/s guards=2 pool_sizes_bytes=(4294967296,) journal_bytes=1\n\
             INFO:kvcr.guard:KVCR_EVENT guard_promoted guard=0 pool=pool_0 recovered_blocks=4 agent=x control=127.0.0.1:1 recovery_ms=1 setup_ms=1 start_ms=1 promotion_ms=75.5\n",
        )
        .unwrap();
        std::fs::write(
            logs.join("A.log"),
            "t A kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=memory registration agent=a tid=1 monotonic_ns=1000000 thread_cpu_ns=1\n\
             t A kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=agent metadata capture agent=a tid=1 monotonic_ns=401000000 thread_cpu_ns=1\n",
        )
        .unwrap();
        std::fs::write(logs.join("notes.txt"), "promotion_ms=1").unwrap();
        let (logged, registrations) = read_logs(&logs);
        assert_eq!(logged.pool_bytes(), 4 << 30);
        assert_eq!(logged.promotions.len(), 1);
        assert_eq!(registrations, vec![400.0]);

        // Another lane's latest run, and this lane's own, under one base.
        let base = dir.path().join("runs");
        let other = base.join("phase3_scale").join("latest");
        std::fs::create_dir_all(&other).unwrap();
        let row = PoolCostRow::of("phase3_scale", "r1", &logged, &registrations, &[]);
        let costs = GuardCosts {
            rows: vec![row.clone()],
            ..GuardCosts::default()
        };
        std::fs::write(other.join(FILE), serde_json::to_string(&costs).unwrap()).unwrap();
        let own = base.join("phase3_scale_4g").join("latest");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join(FILE), serde_json::to_string(&costs).unwrap()).unwrap();
        assert_eq!(other_lanes_rows(&base, "phase3_scale_4g"), vec![row]);
        // Each lane sees the other's, not its own; a third sees both.
        assert_eq!(other_lanes_rows(&base, "phase3_scale").len(), 1);
        assert_eq!(other_lanes_rows(&base, "phase1").len(), 2);
    }
}
