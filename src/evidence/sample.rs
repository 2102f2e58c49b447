//! Sample records for the writers' tests (deterministic: fixed times and ids).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use time::OffsetDateTime;

use super::perf::*;
use super::record::*;
use super::results::Results;
use super::workload::*;
use super::UtcTime;

pub(crate) fn at(secs: i64) -> UtcTime {
    UtcTime(OffsetDateTime::from_unix_timestamp(1_764_438_060 + secs).unwrap())
}

fn case(
    id: &str,
    name: &str,
    outcome: Outcome,
    secs: i64,
    ms: u64,
    evidence: &[&str],
) -> CaseRecord {
    CaseRecord {
        id: id.into(),
        name: name.into(),
        outcome,
        started_at: at(secs),
        duration: Duration::from_millis(ms),
        evidence: evidence.iter().map(PathBuf::from).collect(),
        measurements: BTreeMap::new(),
        retried: Vec::new(),
    }
}

pub(crate) fn run_record() -> RunRecord {
    let mut tc03 = case(
        "TC-03",
        "TC-03::hinted_peer_transfer",
        Outcome::Passed,
        20,
        4_210,
        &["cases/TC-03/telemetry.json"],
    );
    tc03.measure("source_write_blocks", 4);
    tc03.measure(
        super::NOT_CHECKED,
        vec![super::NotChecked::new(
            "interval log vs /metrics as two sources",
            "the cpu engine writes both from one; checked as its consistency",
        )],
    );
    RunRecord {
        run_id: "20251129T174100Z-4242-beef".into(),
        run_dir: PathBuf::from("target/phase1/runs/20251129T174100Z-4242-beef"),
        started_at: at(0),
        label: "cpu/agg/dense".into(),
        settings_digest: "0123abcd".into(),
        stack: Some(StackSummary {
            provisioned: 1,
            attached: false,
            startup: vec![
                StartupTiming { component: "guard".into(), ready: Duration::from_millis(850) },
                StartupTiming { component: "worker-A".into(), ready: Duration::from_millis(4_100) },
                StartupTiming { component: "router".into(), ready: Duration::from_millis(2_300) },
            ],
            total_startup: Duration::from_millis(6_900),
        }),
        reference: Some(ReferenceSummary {
            digest: "feedface".into(),
            from_cache: false,
            computed_by: "ci-host (target/phase1/runs/phase1/sample)".into(),
            computed_unix_s: 1_764_400_000,
            age_s: None,
            prompts: 24,
            probes: BTreeMap::from([("repeat_same_tokens".into(), true), ("prefix_cache_same_tokens".into(), true)]),
            duration: Duration::from_millis(9_500),
            batching: None,
        }),
        cases: vec![
            {
                let mut c = case("TC-01", "TC-01::generation_correctness", Outcome::Passed, 10, 3_120, &[]);
                c.retried.push(RetriedAttempt {
                    message: "dropped out of the router's discovery during the case: worker B (pid 9) is running, but the router no longer lists its instance 7\nmore".into(),
                    clock_events: vec!["the machine's wall clock stepped +40.0 s (seen at 2025-11-29T17:41:12Z)".into()],
                    evidence: vec![PathBuf::from("cases/TC-01-generation_correctness/crashes.json")],
                });
                c
            },
            case("TC-02", "TC-02::local_dram_flow", Outcome::Passed, 14, 5_480, &["cases/TC-02/telemetry.json"]),
            tc03,
            case(
                "TC-04",
                "TC-04::guard_takeover_replacement",
                Outcome::Failed {
                    message: "Guard did not log guard_promoted for index 0 within 10 s\nexpected recovered_blocks ≥ 12, saw none; see cases/TC-04/guard-log-tail.txt".into(),
                },
                25,
                10_400,
                &["cases/TC-04/guard-log-tail.txt", "cases/TC-04/fault.json"],
            ),
            case("TC-05", "TC-05::perf_arms", Outcome::Passed, 36, 21_700, &["cases/TC-05/requests.json"]),
            case(
                "TC-06",
                "TC-06::guard_recovery_timing",
                Outcome::Ignored { reason: "SGLang has no Guard and no disaggregation in KVCR 0.1.1".into(), because: IgnoredBecause::NotApplicable },
                58,
                0,
                &[],
            ),
            {
                let mut c = case("TC-04", "TC-04::worker_killed_under_load", Outcome::Passed, 70, 4_200, &["cases/TC-04-worker_killed_under_load/load.json"]);
                c.measurements.insert(
                    super::report::LOAD_TIMELINE.into(),
                    serde_json::json!({"fault_at_ms": 300.0, "requests": [
                        {"client": 0, "seq": 0, "prompt": "f001v0", "sent_ms": 1.0, "done_ms": 280.0, "outcome": "ok", "worker_id": 7, "detail": null},
                        {"client": 0, "seq": 1, "prompt": "f002v0", "sent_ms": 281.0, "done_ms": 302.0, "outcome": "failed", "worker_id": null, "detail": "stream cut"},
                    ]}),
                );
                c
            },
        ],
        neighbours: Some(neighbours()),
        environment: Default::default(),
        kvcr: None,
        clock_events: vec![crate::proc::clock_watch::ClockEvent {
            kind: crate::proc::clock_watch::ClockEventKind::WallClockStep { seconds: 40.0 },
            seen_at: "2025-11-29T17:41:12Z".into(),
            seen: std::time::Instant::now(),
        }],
        events: events(),
    }
}

/// The run's events: the stack ready and a neighbour before the trials,
/// TC-01 run again after a clock step, TC-04 restoring the stack, and the
/// evidence written at the end.
pub(crate) fn events() -> Vec<crate::events::Event> {
    use crate::events::{ClockKind, ComponentReady, Event, Moment, RunEvent, TrialOutcome};
    let event = |secs: i64, kind: RunEvent| Event { at: at(secs), kind };
    let started = |secs: i64, trial: &str| {
        event(
            secs,
            RunEvent::TrialStarted {
                trial: trial.into(),
            },
        )
    };
    let finished = |secs: i64, trial: &str, outcome: TrialOutcome, detail: Option<&str>| {
        event(
            secs,
            RunEvent::TrialFinished {
                trial: trial.into(),
                outcome,
                duration_ms: 3_120,
                detail: detail.map(Into::into),
            },
        )
    };
    vec![
        event(1, RunEvent::NeighbourSeen {
            when: Moment::Start,
            relation: "another live run".into(),
            pid: 5151,
            target: "fault_matrix".into(),
            run: "pid 5151 fault_matrix (own stack) since 2025-11-29T17:30:00Z".into(),
        }),
        event(8, RunEvent::StackReady {
            total_ms: 6_900,
            components: vec![ComponentReady { component: "worker-A".into(), ready_ms: 4_100 }],
            restarts: Vec::new(),
        }),
        started(10, "TC-01::generation_correctness"),
        event(12, RunEvent::MachineClock { kind: ClockKind::WallClockStep, seconds: 40.0, seen_at: "2025-11-29T17:41:12Z".into() }),
        event(12, RunEvent::Retry {
            trial: "TC-01::generation_correctness".into(),
            attempt: 2,
            why: "attempt failed while the machine's wall clock stepped +40.0 s (seen at 2025-11-29T17:41:12Z): dropped out of the router's discovery during the case".into(),
        }),
        finished(13, "TC-01::generation_correctness", TrialOutcome::Passed, None),
        started(25, "TC-04::guard_takeover_replacement"),
        event(34, RunEvent::Restore { trial: "TC-04::guard_takeover_replacement".into() }),
        event(35, RunEvent::WorkerReplaced { worker: "B".into(), reason: "worker B <pid 9> latched its KVCR source off".into() }),
        finished(35, "TC-04::guard_takeover_replacement", TrialOutcome::Failed, Some("Guard did not log guard_promoted for index 0 within 10 s")),
        event(80, RunEvent::EvidenceWritten {
            path: "target/phase1/runs/20251129T174100Z-4242-beef".into(),
            junit: "target/phase1/runs/20251129T174100Z-4242-beef/junit.xml".into(),
        }),
    ]
}

/// One other live run at the start, none at the end.
pub(crate) fn neighbours() -> Neighbourhood {
    use crate::proc::live_runs::{Entry, Neighbour, Relation, RunKind, Surroundings};
    let other = Entry {
        id: "5151-900-0".into(),
        pid: 5151,
        start_time: 900,
        pid_namespace: Some("pid:[4026531836]".into()),
        uid: 1000,
        target: "fault_matrix".into(),
        run_dir: PathBuf::from(
            "/home/u/kvcr-e2e/target/phase1/runs/fault_matrix/20251129T173000Z-5151-cafe",
        ),
        started_at: "2025-11-29T17:30:00Z".into(),
        kind: RunKind::Provisions,
        exclusive: false,
        host_pid: None,
        session: None,
    };
    Neighbourhood {
        registry: PathBuf::from("/tmp/kvcr-e2e-live"),
        exclusive: false,
        waited_s: 0.0,
        at_start: Surroundings {
            at: "2025-11-29T17:41:00Z".into(),
            load_average: Some([3.52, 2.10, 1.05]),
            neighbours: vec![Neighbour {
                run: other,
                relation: Relation::Other,
            }],
        },
        at_end: Some(Surroundings {
            at: "2025-11-29T17:42:10Z".into(),
            load_average: Some([1.20, 1.80, 1.00]),
            neighbours: Vec::new(),
        }),
    }
}

fn req(arm: Option<Arm>, conc: Option<u32>, ttft: f64, tpot: f64, worker: u64) -> RequestRecord {
    RequestRecord {
        case: "TC-05".into(),
        arm,
        concurrency: conc,
        ttft_ms: Some(ttft),
        tpot_ms: Some(tpot),
        itl_ms: vec![tpot; 3],
        e2el_ms: Some(ttft + 15.0 * tpot),
        prompt_tokens: 72,
        output_tokens: 16,
        worker_id: Some(worker),
        ok: true,
        error: None,
        request_id: None,
        first_token_monotonic_ns: None,
        first_token_offset_ms: None,
        sent_at_ms: None,
        rate_per_s: None,
        schedule: None,
        kvcr_ops: Vec::new(),
    }
}

pub(crate) fn requests() -> Vec<RequestRecord> {
    let mut out = Vec::new();
    for (arm, base) in [
        (Arm::Cold, 24.0),
        (Arm::LocalHit, 3.5),
        (Arm::DramHit, 6.0),
        (Arm::RemoteHit, 9.0),
    ] {
        for i in 0..3 {
            out.push(req(
                Some(arm),
                None,
                base + f64::from(i) * 0.7,
                1.05 + f64::from(i) * 0.01,
                7_587_890_412_930,
            ));
        }
    }
    for c in [1u32, 2, 4, 8] {
        for i in 0..4 {
            out.push(req(
                None,
                Some(c),
                20.0 + 4.0 * f64::from(c) + f64::from(i),
                1.0 + 0.1 * f64::from(c),
                1,
            ));
        }
    }
    out
}

pub(crate) fn perf() -> PerfSummary {
    let reqs = requests();
    let baseline = Baseline {
        cold_ttft_ms: percentiles(&[22.0, 23.0, 25.0]),
        warm_ttft_ms: percentiles(&[3.0, 3.2, 3.4]),
    };
    let arms = Arm::ALL
        .iter()
        .map(|a| ArmSummary::from_requests(*a, &reqs, Some(&baseline)))
        .collect();
    let sweep = [1u32, 2, 4, 8]
        .iter()
        .map(|c| {
            let level: Vec<RequestRecord> = reqs
                .iter()
                .filter(|r| r.concurrency == Some(*c))
                .cloned()
                .collect();
            SweepLevel::from_requests(*c, &level, 0.2 * 4.0 / f64::from(*c).sqrt())
        })
        .collect();
    PerfSummary {
        metric_definitions: Some(
            "TTFT: time from sending the request to the first content chunk.\n\
             TPOT: (E2EL − TTFT) / (output tokens − 1).\n\
             ITL: time between consecutive content chunks.\n\
             E2EL: time from sending the request to the last chunk."
                .into(),
        ),
        baseline: Some(baseline),
        arms,
        sweep,
        recovery: Some(RecoveryTimeline {
            t1_ms: Some(1_412.0),
            t2_ms: Some(5_230.0),
            promotion_ms: Some(310.0),
            guard_pool_bytes: None,
            attempts: (0..22)
                .map(|i| RecoveryAttempt {
                    at_ms: if i < 21 {
                        100.0 * f64::from(i)
                    } else {
                        5_100.0
                    },
                    target: if i < 21 { "B".into() } else { "A'".into() },
                    outcome: match i {
                        0..=12 => "error: connection refused".into(),
                        13..=20 => "guard_served".into(),
                        _ => "replacement_served".into(),
                    },
                })
                .collect(),
            no_t1_reason: None,
            promotion_stages: None,
            t1_kvcr_ops: Vec::new(),
        }),
        ttft_accuracy: vec![
            TtftAccuracy {
                case: "TC-05::cold".into(),
                engine: "cpu".into(),
                source: "the CPU engine's log".into(),
                offset_ms: Some(OffsetStats {
                    n: 3,
                    min: 0.41,
                    p50: 0.52,
                    p99: 0.93,
                    max: 0.93,
                }),
                unavailable: None,
            },
            TtftAccuracy {
                case: "TC-05::local_hit".into(),
                engine: "vllm".into(),
                source: "none".into(),
                offset_ms: None,
                unavailable: Some("vLLM reports no per-request first-token instant".into()),
            },
        ],
        workload: Some(workload()),
        kvcr_bench: Vec::new(),
        kvcr_pull_bench: Vec::new(),
        g3_read_bench: Vec::new(),
    }
}

/// A workload trace replayed, KVCR on and off, with a rate sweep: 400
/// requests 0.3 s apart; KVCR on serves more of each prompt from cache,
/// so more of its requests meet the TTFT target.
pub(crate) fn workload() -> WorkloadSummary {
    let slo = Slo {
        ttft_ms: 180.0,
        tpot_ms: 15.0,
        attainment: 0.75,
    };
    let replay = |kvcr: bool| {
        let requests: Vec<ReplayedRequest> = (0..400u32)
            .map(|i| {
                let cached: u64 = match (kvcr, i % 4) {
                    (_, 0) => 0,
                    (true, k) => [0, 640, 960, 1120][k as usize],
                    (false, k) => [0, 0, 320, 640][k as usize],
                };
                let at = f64::from(i) * 0.3;
                let ttft = 40.0 + (1200 - cached) as f64 * 0.12 + f64::from(i % 7) * 3.0;
                let tpot = 12.0 + f64::from(i % 5) * 0.5;
                let e2el = ttft + 31.0 * tpot;
                ReplayedRequest {
                    intended_s: at,
                    schedule_delay_ms: 0.2 + f64::from(i % 3) * 0.1,
                    prompt_tokens: 1200,
                    answer: Some(Answer {
                        ttft_ms: ttft,
                        tpot_ms: Some(tpot),
                        e2el_ms: e2el,
                        finished_s: at + e2el / 1000.0,
                        cached_tokens: cached,
                        reference_tokens: true,
                    }),
                }
            })
            .collect();
        let mut s = ReplaySummary::of(kvcr, 1.0, &slo, &requests);
        let c = s.cached_tokens_reported;
        s.tiers = match kvcr {
            true => TierTokens {
                device: c * 40 / 100,
                dram: c * 45 / 100,
                peer: c - c * 40 / 100 - c * 45 / 100,
                disk: 0,
            },
            false => TierTokens {
                device: c,
                ..TierTokens::default()
            },
        };
        s.hit_rate = TierRates::of(&s.tiers, s.prompt_tokens);
        s
    };
    let on = replay(true);
    let point = |factor: f64, attainment: f64, ttft_p50: f64| SweepPoint {
        rate_factor: factor,
        offered_rate_per_s: on.offered_rate_per_s * factor,
        requests: 400,
        ok: 400,
        slo_met: (400.0 * attainment) as u32,
        goodput_per_s: on.offered_rate_per_s * factor * attainment,
        slo_attainment: attainment,
        ttft_p50_ms: Some(ttft_p50),
        ttft_p90_ms: Some(ttft_p50 * 1.6),
        sustained: attainment >= slo.attainment,
    };
    let mut sweep = vec![point(0.5, 0.78, 80.0), on.sweep_point(&slo)];
    sweep.extend([point(2.0, 0.6, 150.0), point(4.0, 0.3, 480.0)]);
    WorkloadSummary {
        trace: TraceInfo {
            name: "multi-turn-small.jsonl".into(),
            sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
            requests: 400,
            block_size: 16,
            duration_s: 119.7,
        },
        slo,
        max_sustained_rate_per_s: max_sustained_rate(&sweep),
        off: Some(replay(false)),
        on,
        sweep,
    }
}

pub(crate) fn results() -> Results {
    Results::new(run_record(), requests(), perf())
}
