//! What a Guard pool costs, read from KVCR's own log lines: how long a
//! worker's KVCR took to register the pool with NIXL when it started (the
//! worker's log; the CPU engine logs `kvcr.progress` at DEBUG), each
//! promotion and each handback to a replacement (the Guard service's log,
//! DEBUG as the harness starts it); and, from the harness's clock, how the
//! service's shutdown went and which of its pool files it left behind.
//!
//! The lines (kvcr 0.1.1):
//!
//! ```text
//! … kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=memory registration agent=… tid=… monotonic_ns=… thread_cpu_ns=…
//! … kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=agent metadata capture agent=… tid=… monotonic_ns=… thread_cpu_ns=…
//! INFO:kvcr.guard:KVCR_EVENT guard_promoted guard=0 pool=pool_0 recovered_blocks=… promotion_ms=…
//! DEBUG:kvcr.guard:KVCR_EVENT guard_promotion_stage stage=handback_start guard=0 pool=pool_0 tid=… monotonic_ns=…
//! DEBUG:kvcr.guard:KVCR_EVENT guard_promotion_stage stage=handback_done guard=0 pool=pool_0 tid=… monotonic_ns=…
//! ```
//!
//! A registration is the time from an agent's `memory registration` stage
//! to its `agent metadata capture`, the stage that follows it at once in a
//! core that starts (a worker's). A Guard's core registers when a primary
//! claims its group and then waits, unlogged, until a promotion starts it
//! (`backend initialization` follows): no span is read from that. A
//! handback is the time from `handback_start` to `handback_done` of the
//! same Guard.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::guard_log::{self, GuardEvent};
use super::names::kvcr_log as n;

/// `progress_startup_stage`: a KVCR core's progress thread starting.
pub const STARTUP_STAGE: &str = "progress_startup_stage";
/// The stage that registers the pool's memory with NIXL.
pub const MEMORY_REGISTRATION: &str = "memory registration";
/// The stage that follows a registration at once in a core that starts.
pub const METADATA_CAPTURE: &str = "agent metadata capture";
/// `Leaving KVCR pool still in use: <path>` (the service, at start).
const POOL_LEFT_IN_USE: &str = "Leaving KVCR pool still in use:";
/// The stages that bound a Guard's handback to the next primary.
pub const HANDBACK_START: &str = "handback_start";
pub const HANDBACK_DONE: &str = "handback_done";

/// One timed step of one Guard (or one Guard core's agent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The Guard index, or the agent name of a core at start.
    pub who: String,
    pub ms: f64,
}

/// The costs one Guard service's log shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoggedCosts {
    /// Pool bytes of each Guard (each pool kind), from the `ready` line.
    pub pool_sizes_bytes: Vec<u64>,
    /// Each KVCR core's pool registration as it started (a worker's).
    pub registrations: Vec<Step>,
    /// Each promotion, as the Guard logged its `promotion_ms`.
    pub promotions: Vec<Step>,
    /// Each handback to a replacement (`handback_start` → `handback_done`).
    pub handbacks: Vec<Step>,
    /// Pool files a restarted service found still mapped by live workers
    /// and left (`Leaving KVCR pool still in use: <path>`): a killed
    /// service's pools, which only the next start reclaims
    /// (docs/kvcr-findings.md 1).
    pub pools_left_in_use: Vec<String>,
}

impl LoggedCosts {
    /// The costs in a Guard service's log text.
    pub fn parse(text: &str) -> Self {
        let mut costs = LoggedCosts::default();
        // agent → the monotonic_ns of its `memory registration` stage.
        let mut registering: BTreeMap<String, u64> = BTreeMap::new();
        // guard → the monotonic_ns of its `handback_start`.
        let mut handing_back: BTreeMap<u32, u64> = BTreeMap::new();
        for line in text.lines() {
            if let Some(stage) = startup_stage(line) {
                let started = registering.remove(&stage.agent);
                if let (Some(started), METADATA_CAPTURE) = (started, stage.stage.as_str()) {
                    costs.registrations.push(Step {
                        who: stage.agent.clone(),
                        ms: ms_between(started, stage.monotonic_ns),
                    });
                }
                if stage.stage == MEMORY_REGISTRATION {
                    registering.insert(stage.agent, stage.monotonic_ns);
                }
                continue;
            }
            if let Some((_, path)) = line.split_once(POOL_LEFT_IN_USE) {
                costs.pools_left_in_use.push(path.trim().to_string());
                continue;
            }
            match guard_log::parse_line(line) {
                Some(Ok((_, GuardEvent::ServiceReady(ready)))) => {
                    costs.pool_sizes_bytes = ready.pool_sizes_bytes;
                }
                Some(Ok((_, GuardEvent::Promoted(p)))) => costs.promotions.push(Step {
                    who: p.guard.to_string(),
                    ms: p.promotion_ms,
                }),
                Some(Ok((_, GuardEvent::PromotionStage(s)))) => {
                    let Some(at) = s.monotonic_ns else { continue };
                    if s.stage == HANDBACK_START {
                        handing_back.insert(s.guard, at);
                    } else if s.stage == HANDBACK_DONE {
                        if let Some(started) = handing_back.remove(&s.guard) {
                            costs.handbacks.push(Step {
                                who: s.guard.to_string(),
                                ms: ms_between(started, at),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        costs
    }

    /// Bytes of one Guard's pools together.
    pub fn pool_bytes(&self) -> u64 {
        self.pool_sizes_bytes.iter().sum()
    }
}

/// How a Guard service's shutdown went, by the harness's clock: SIGTERM,
/// then its exit, and the pool files it left behind in `/dev/shm` (the
/// harness removes them after; KVCR's own shutdown must have).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shutdown {
    /// The service's process name (`guard`, `guard.2` for a restarted one).
    pub service: String,
    /// SIGTERM to exit.
    pub stop_ms: f64,
    pub needed_sigkill: bool,
    /// The exit status, as the harness saw it (`exit status: 0`).
    pub exit: Option<String>,
    /// Pool files in the service's pool directory once it was gone.
    pub pool_files_left: Vec<String>,
    /// Of those, the pools of a service killed earlier that this one found
    /// still mapped at its start and left (KVCR reclaims them only at the
    /// next start, docs/kvcr-findings.md 1): not this shutdown's to remove.
    pub killed_service_pools: Vec<String>,
}

/// One `progress_startup_stage` line.
#[derive(Debug, PartialEq)]
struct StartupStage {
    stage: String,
    agent: String,
    monotonic_ns: u64,
}

/// A `progress_startup_stage` line's stage (which may hold spaces: `stage=memory
/// registration agent=…`), agent and monotonic time; `None` for other lines.
fn startup_stage(line: &str) -> Option<StartupStage> {
    let at = line.find(n::EVENT_MARKER)?;
    let rest = line[at + n::EVENT_MARKER.len()..].trim_start();
    let rest = rest.strip_prefix(STARTUP_STAGE)?.trim_start();
    let rest = rest.strip_prefix("stage=")?;
    let (stage, rest) = rest.split_once(" agent=")?;
    let (agent, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let monotonic_ns = rest
        .split_whitespace()
        .find_map(|f| f.strip_prefix("monotonic_ns="))?
        .parse()
        .ok()?;
    Some(StartupStage {
        stage: stage.to_string(),
        agent: agent.to_string(),
        monotonic_ns,
    })
}

fn ms_between(from_ns: u64, to_ns: u64) -> f64 {
    to_ns.saturating_sub(from_ns) as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
INFO:kvcr.kvcr_service:KVCR service ready: socket=/dev/shm/x/guard.sock guards=2 pool_sizes_bytes=(1073741824,) journal_bytes=104857600
DEBUG:kvcr.progress:KVCR_EVENT progress_startup_stage stage=NIXL agent initialization agent=KVCR-Guard-g tid=7 monotonic_ns=900000000 thread_cpu_ns=1
DEBUG:kvcr.progress:KVCR_EVENT progress_startup_stage stage=memory registration agent=KVCR-Guard-g tid=7 monotonic_ns=950000000 thread_cpu_ns=1
2026-12-05 23:00:00,000 A kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=backend initialization agent=a tid=7 monotonic_ns=1000000000 thread_cpu_ns=1
2026-12-05 23:00:00,100 A kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=memory registration agent=a tid=7 monotonic_ns=1100000000 thread_cpu_ns=1
2026-12-05 23:00:00,150 B kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=memory registration agent=b tid=8 monotonic_ns=1150000000 thread_cpu_ns=1
2026-12-05 23:00:00,350 A kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=agent metadata capture agent=a tid=7 monotonic_ns=1350500000 thread_cpu_ns=2
2026-12-05 23:00:00,450 B kvcr.progress DEBUG KVCR_EVENT progress_startup_stage stage=agent metadata capture agent=b tid=8 monotonic_ns=1450000000 thread_cpu_ns=2
DEBUG:kvcr.guard:KVCR_EVENT guard_promotion_stage stage=death_observed guard=0 pool=pool_0 tid=12 monotonic_ns=5000000000 thread_cpu_ns=5
INFO:kvcr.guard:KVCR_EVENT guard_promoted guard=0 pool=pool_0 recovered_blocks=64 agent=KVCR-Guard-c control=127.0.0.1:27771 recovery_ms=10.0 setup_ms=2.0 start_ms=30.5 promotion_ms=42.5
DEBUG:kvcr.guard:KVCR_EVENT guard_promotion_stage stage=handback_start guard=0 pool=pool_0 tid=12 monotonic_ns=9000000000 thread_cpu_ns=5
DEBUG:kvcr.guard:KVCR_EVENT guard_promotion_stage stage=core_closed guard=0 pool=pool_0 tid=12 monotonic_ns=9100000000 thread_cpu_ns=5
DEBUG:kvcr.guard:KVCR_EVENT guard_promotion_stage stage=handback_done guard=0 pool=pool_0 tid=12 monotonic_ns=9250000000 thread_cpu_ns=5
INFO:kvcr.kvcr_service:Leaving KVCR pool still in use: /dev/shm/kvcr-e2e-x/pool/kvcr-pool_0-0123
";

    #[test]
    fn reads_registration_promotion_and_handback() {
        // The Guard core's registration waits for a promotion after it
        // (`backend initialization` comes then): not a registration's cost.
        let c = LoggedCosts::parse(LOG);
        assert_eq!(c.pool_sizes_bytes, vec![1 << 30]);
        assert_eq!(c.pool_bytes(), 1 << 30);
        assert_eq!(
            c.registrations,
            vec![
                Step {
                    who: "a".into(),
                    ms: 250.5
                },
                Step {
                    who: "b".into(),
                    ms: 300.0
                },
            ]
        );
        assert_eq!(
            c.promotions,
            vec![Step {
                who: "0".into(),
                ms: 42.5
            }]
        );
        assert_eq!(
            c.handbacks,
            vec![Step {
                who: "0".into(),
                ms: 250.0
            }]
        );
        assert_eq!(
            c.pools_left_in_use,
            vec!["/dev/shm/kvcr-e2e-x/pool/kvcr-pool_0-0123".to_string()]
        );
    }

    #[test]
    fn an_unfinished_step_is_no_cost() {
        // Registration started, never followed by another stage; a handback
        // that never finished; a stage line without its monotonic time.
        let log = "\
DEBUG:kvcr.progress:KVCR_EVENT progress_startup_stage stage=memory registration agent=KVCR-Guard-a tid=7 monotonic_ns=1 thread_cpu_ns=1
DEBUG:kvcr.guard:KVCR_EVENT guard_promotion_stage stage=handback_start guard=1 pool=pool_1 tid=12 monotonic_ns=9 thread_cpu_ns=5
DEBUG:kvcr.progress:KVCR_EVENT progress_startup_stage stage=ready agent=KVCR-Guard-b tid=7 thread_cpu_ns=1
";
        let c = LoggedCosts::parse(log);
        assert!(c.registrations.is_empty() && c.handbacks.is_empty() && c.promotions.is_empty());
        assert!(c.pools_left_in_use.is_empty());
        assert_eq!(c.pool_bytes(), 0);
    }

    #[test]
    fn a_stage_with_spaces_is_read_whole() {
        let s = startup_stage(
            "DEBUG:kvcr.progress:KVCR_EVENT progress_startup_stage stage=agent metadata capture agent=A tid=1 monotonic_ns=7 thread_cpu_ns=1",
        )
        .unwrap();
        assert_eq!(s.stage, "agent metadata capture");
        assert_eq!(s.agent, "A");
        assert_eq!(s.monotonic_ns, 7);
        assert!(startup_stage("INFO:kvcr.guard:KVCR_EVENT guard_promoted guard=0").is_none());
    }
}
