//! The lanes a generated mutant runs, in order (`--lanes a,b`): each a
//! `cargo test` target of the engine's cases, run on a fresh stack of its
//! own. A mutant goes on to the next lane only while it passes; the first
//! lane that does not pass (a kill, a flaky kill, a stack that did not
//! start) decides its outcome, and it survives only when every lane passed.

use crate::cases;
use crate::engine::Kind;
use crate::lanes::Lane;
use crate::mutants::classify::MutantResult;
use crate::suite::{Case, Trial};

/// The CPU engine's sequence without `--lanes`: phase 1's cases first
/// (they kill most mutants, and a mutant that cannot start KVCR is broken
/// there, in seconds), then the lanes that reach the KVCR code phase 1
/// never runs, most first: a full pool's capacity waiters and the Guard's
/// lifecycle (`phase2`), a peer read served from engine memory through
/// framework pins, `KVCR.fetch` and a source closed mid-write
/// (`phase3_api`), deposits meeting a FILLING block and a paused source's
/// probes (`phase3`), the disk tier (`phase2_g3`). None needs root.
pub const CPU_LANES: &[&str] = &["phase1", "phase2", "phase3_api", "phase3", "phase2_g3"];

/// One lane of the sequence: its target and the trials a mutant runs there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceLane {
    /// The test target (`phase2`).
    pub target: &'static str,
    /// Whole trial names, in case-number order.
    pub trials: Vec<String>,
    /// The lane waits for `--ignored`: its children get `--include-ignored`.
    pub ignored: bool,
}

impl SequenceLane {
    /// The sequence's lane of test target `target`.
    pub fn of(lane: &'static Lane) -> SequenceLane {
        SequenceLane {
            target: lane.target,
            trials: trials(lane.cases().unwrap_or_default()),
            ignored: lane.ignored,
        }
    }

    /// The user's harness flags with what this lane adds before `--kvcr`.
    pub fn flags(&self, harness: &[String]) -> Vec<String> {
        let mut flags = harness.to_vec();
        if self.ignored {
            flags.push("--include-ignored".into());
        }
        flags
    }
}

/// Every trial of `cases` with a verdict on KVCR's behaviour, in
/// case-number order (a case's own trials keep their order). TC-05's
/// performance arms are left out: they record figures, and take as long
/// as the rest of phase 1 together.
pub fn trials(cases: &[Case]) -> Vec<String> {
    let perf_arms = cases::tc05_performance_arms::COLD.id;
    let mut chosen: Vec<Case> = cases
        .iter()
        .filter(|case| case.id != perf_arms)
        .copied()
        .collect();
    chosen.sort_by_key(|case| case.id);
    chosen
        .into_iter()
        .map(|case| Trial::Case(case).trial_name())
        .collect()
}

/// The sequence without `--lanes`: [`CPU_LANES`] on the CPU engine; on
/// another, its lane of phase 1's cases on the aggregated dense stack only
/// (a vLLM mutant takes minutes a lane).
pub fn default_targets(engine: Kind) -> Result<Vec<&'static str>, String> {
    match engine {
        Kind::Cpu => Ok(CPU_LANES.to_vec()),
        other => super::lane::target(other).map(|t| vec![t]),
    }
}

/// Whether a mutant of `engine` can run on `lane`: a lane of cases on that
/// engine that does not set its own `--kvcr` when it starts (the KVCR
/// source-tree lane) nor narrow its cases with `--cases`.
pub fn can_run(lane: &Lane, engine: Kind) -> bool {
    lane.cases().is_some()
        && lane.stack.engine == engine
        && lane.flags_at_start.is_none()
        && !lane.flags.contains(&"--cases")
}

/// `--lanes a,b` for `engine`: known lanes a mutant can run on, each once,
/// in the given order.
pub fn parse_targets(value: &str, engine: Kind) -> Result<Vec<&'static str>, String> {
    let usable: Vec<&str> = crate::lanes::LANES
        .iter()
        .filter(|lane| can_run(lane, engine))
        .map(|lane| lane.target)
        .collect();
    let mut targets: Vec<&'static str> = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let lane = Lane::of(name).ok_or_else(|| {
            format!(
                "--lanes: no lane has the test target {name:?}; the lanes a {} mutant can run on are {}",
                engine.as_str(),
                usable.join(", ")
            )
        })?;
        if !can_run(lane, engine) {
            return Err(format!(
                "--lanes: a {} mutant cannot run on {name:?} (its fault rows, another engine, or \
                 a lane that sets its own --kvcr or --cases); the lanes it can run on are {}",
                engine.as_str(),
                usable.join(", ")
            ));
        }
        if targets.contains(&lane.target) {
            return Err(format!("--lanes: {name:?} is named twice"));
        }
        targets.push(lane.target);
    }
    if targets.is_empty() {
        return Err("--lanes needs at least one lane (e.g. phase1)".into());
    }
    Ok(targets)
}

/// The sequence of `targets` (each checked by [`parse_targets`] or
/// [`default_targets`]).
pub fn plan(targets: &[&str]) -> Result<Vec<SequenceLane>, String> {
    targets
        .iter()
        .map(|target| {
            Lane::of(target)
                .map(SequenceLane::of)
                .ok_or_else(|| format!("no lane has the test target {target:?}"))
        })
        .collect()
}

/// Whether a lane's judged result lets the mutant go on to the next lane:
/// only a pass does. A kill (confirmed or flaky) ends it there; so does a
/// lane whose stack did not start or whose trial did not run (broken: no
/// verdict on that lane, so the mutant cannot be said to survive).
pub fn goes_on(result: &MutantResult) -> bool {
    matches!(result, MutantResult::Survived)
}

/// Runs `lanes` in order through `run` (one lane's judged result and
/// whatever it carries), stopping at the first that does not pass:
/// the passed lanes' runs and the deciding one (the last lane for a
/// survivor). `run` is never called for a lane after the deciding one.
pub fn walk<R, E>(
    lanes: &[SequenceLane],
    mut run: impl FnMut(usize, &SequenceLane) -> Result<R, E>,
    result_of: impl Fn(&R) -> &MutantResult,
) -> Result<(Vec<R>, Option<R>), E> {
    let mut passed = Vec::new();
    for (i, lane) in lanes.iter().enumerate() {
        let ran = run(i, lane)?;
        if !goes_on(result_of(&ran)) {
            return Ok((passed, Some(ran)));
        }
        passed.push(ran);
    }
    // A survivor: its last lane decided nothing, but it is where it ended.
    let last = passed.pop();
    Ok((passed, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn killed(trial: &str) -> MutantResult {
        MutantResult::Killed {
            trial: trial.into(),
            message: "claim: numbers".into(),
            message_matches: false,
            claims: Default::default(),
            failed: vec![trial.into()],
        }
    }

    /// The default CPU sequence in its order: each a lane a CPU mutant can
    /// run on, none ignored, phase 1 first.
    #[test]
    fn the_cpu_sequence_is_phase1_then_the_lanes_that_reach_more_of_kvcr() {
        let targets = default_targets(Kind::Cpu).unwrap();
        assert_eq!(
            targets,
            ["phase1", "phase2", "phase3_api", "phase3", "phase2_g3"]
        );
        let lanes = plan(&targets).unwrap();
        for lane in &lanes {
            assert!(
                can_run(Lane::of(lane.target).unwrap(), Kind::Cpu),
                "{}",
                lane.target
            );
            assert!(!lane.ignored && !lane.trials.is_empty(), "{}", lane.target);
        }
        assert_eq!(lanes[0].trials, crate::mutants::generated::trials());
        assert_eq!(
            lanes[1].trials,
            [
                "TC-07::pool_pressure_and_eviction",
                "TC-08::guard_service_crash_and_restart",
                "TC-09::clean_restart",
                "TC-10::heartbeat_promotion",
                "TC-11::source_stall_latch",
                "TC-21::custom_and_hostile_placement_policy",
                "TC-23::recovery_journal_faults",
            ],
            "case-number order"
        );
        assert_eq!(
            lanes[4].trials,
            [
                "TC-12::g3_read_bench",
                "TC-12::disk_tier",
                "TC-20::full_tiers",
                "TC-24::deadline_storm"
            ]
        );
        assert_eq!(default_targets(Kind::Vllm).unwrap(), ["phase1_vllm"]);
    }

    #[test]
    fn lanes_are_checked_in_the_given_order_each_once() {
        assert_eq!(
            parse_targets("phase2_g3, phase1", Kind::Cpu).unwrap(),
            ["phase2_g3", "phase1"]
        );
        for (value, engine, want) in [
            (
                "phase9",
                Kind::Cpu,
                "no lane has the test target \"phase9\"",
            ),
            ("fault_matrix", Kind::Cpu, "cannot run on \"fault_matrix\""),
            ("phase1_kvcr_source", Kind::Cpu, "its own --kvcr"),
            ("phase1_vllm", Kind::Cpu, "cannot run on \"phase1_vllm\""),
            ("phase2", Kind::Vllm, "cannot run on \"phase2\""),
            ("phase1,phase1", Kind::Cpu, "named twice"),
            (",", Kind::Cpu, "at least one lane"),
        ] {
            let err = parse_targets(value, engine).unwrap_err();
            assert!(err.contains(want), "{value}: {err}");
        }
        let err = parse_targets("phase9", Kind::Cpu).unwrap_err();
        assert!(
            err.contains("phase3_api") && !err.contains("fault_matrix"),
            "{err}"
        );
        // An ignored lane runs with --include-ignored.
        let scale = plan(&parse_targets("phase3_scale", Kind::Cpu).unwrap()).unwrap();
        assert!(scale[0].ignored);
        assert_eq!(
            scale[0].flags(&["--log-level".into(), "debug".into()]),
            ["--log-level", "debug", "--include-ignored"]
        );
    }

    /// Lane after lane while it passes; the first kill decides, and no
    /// later lane runs.
    #[test]
    fn a_mutant_stops_at_the_first_lane_that_kills_it() {
        let lanes = plan(CPU_LANES).unwrap();
        let mut ran = Vec::new();
        let (passed, decided) = walk(
            &lanes,
            |_, lane| {
                ran.push(lane.target);
                Ok::<_, ()>(match lane.target {
                    "phase3_api" => (lane.target, killed("TC-18::engine_memory_peer_read")),
                    _ => (lane.target, MutantResult::Survived),
                })
            },
            |(_, result)| result,
        )
        .unwrap();
        assert_eq!(ran, ["phase1", "phase2", "phase3_api"]);
        let passed: Vec<&str> = passed.iter().map(|(t, _)| *t).collect();
        assert_eq!(passed, ["phase1", "phase2"]);
        let (lane, result) = decided.unwrap();
        assert_eq!(lane, "phase3_api");
        assert_eq!(result.word(), "killed");
    }

    /// A survivor passed every lane; its last lane is where it ended.
    #[test]
    fn a_survivor_passed_every_lane() {
        let lanes = plan(CPU_LANES).unwrap();
        let (passed, last) = walk(
            &lanes,
            |_, lane| Ok::<_, ()>((lane.target, MutantResult::Survived)),
            |(_, r)| r,
        )
        .unwrap();
        let passed: Vec<&str> = passed.iter().map(|(t, _)| *t).collect();
        assert_eq!(passed, ["phase1", "phase2", "phase3_api", "phase3"]);
        assert_eq!(last.unwrap().0, "phase2_g3");
    }

    /// A lane whose stack did not start, or whose kill did not repeat, ends
    /// the sequence too: no verdict there, so never a survivor.
    #[test]
    fn a_broken_or_flaky_lane_ends_the_sequence_without_a_survivor() {
        let lanes = plan(CPU_LANES).unwrap();
        let broken = MutantResult::Broken {
            why: "setup failed (setup-error.txt): guard exited".into(),
        };
        let flaky = MutantResult::Flaky {
            first: Box::new(killed("TC-07::pool_pressure_and_eviction")),
            second: Box::new(MutantResult::Survived),
        };
        for (at, result) in [
            ("phase1", broken.clone()),
            ("phase2", broken),
            ("phase2", flaky),
        ] {
            let mut ran = 0;
            let (passed, decided) = walk(
                &lanes,
                |_, lane| {
                    ran += 1;
                    Ok::<_, ()>(match lane.target == at {
                        true => (lane.target, result.clone()),
                        false => (lane.target, MutantResult::Survived),
                    })
                },
                |(_, r)| r,
            )
            .unwrap();
            assert_eq!(ran, passed.len() + 1, "{at}");
            let (lane, got) = decided.unwrap();
            assert_eq!((lane, got.word()), (at, result.word()));
            assert!(!goes_on(&got));
        }
        assert!(goes_on(&MutantResult::Survived));
    }

    /// An error running a lane (not a verdict) stops the walk.
    #[test]
    fn an_error_stops_the_walk() {
        let lanes = plan(CPU_LANES).unwrap();
        let got = walk(
            &lanes,
            |i, _| match i {
                0 => Ok(MutantResult::Survived),
                _ => Err("no binary"),
            },
            |r| r,
        );
        assert_eq!(got.unwrap_err(), "no binary");
    }
}
