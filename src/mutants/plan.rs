//! What one mutant runs: the lane of its stack ([`lane`]), the trials
//! (TC-01 where the lane runs it, then its `caught-by`; a mutant of a
//! production suite, whose lane has no TC-01, its `caught-by` only), and
//! the flags that build it.

use super::curated::Mutant;
use super::header::MutantHeader;
use crate::engine::Kind;
use crate::lanes::Lane;
use crate::suite::Trial;

/// The trial every mutant runs first where its lane runs it: the routed
/// families against the reference.
pub const TC01: &str = "TC-01::generation_correctness";

/// Harness settings the lane sets for each child itself (profile keys).
pub const RESERVED_KEYS: &[&str] = &[
    "kvcr", "run_dir", "junit", "engine", "topology", "geometry", "attach", "cases",
];

/// One mutant's child run, before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantRun {
    /// The test target of its lane (`phase1`, `phase1_vllm_two_node`,
    /// `phase2`, ...).
    pub target: &'static str,
    /// Whole trial names, TC-01 first (where the lane runs it), no repeats.
    pub trials: Vec<String>,
    /// Flags: the user's harness flags, `--include-ignored` where the lane
    /// waits for `--ignored`, then `--kvcr`.
    pub flags: Vec<String>,
}

/// The lane that runs `header`'s trials on `engine`: the lane of the
/// header's stack on that engine that runs phase 1's cases, or its
/// `suite`'s cases. `Err` names the lanes that run them.
pub fn lane(header: &MutantHeader, engine: Kind) -> Result<&'static Lane, String> {
    let cases = match header.suite {
        None => crate::cases::PHASE1,
        Some(suite) => Lane::of(suite)
            .and_then(Lane::cases)
            .ok_or_else(|| format!("{}: suite {suite} is no lane of cases", header.name))?,
    };
    Lane::running(header.stack(engine), cases).map_err(|e| format!("{}: {e}", header.name))
}

/// The run of `mutant` on `engine`, with the user's harness flags.
pub fn plan(mutant: &Mutant, engine: Kind, user_flags: &[String]) -> Result<MutantRun, String> {
    let header = &mutant.header;
    let lane = lane(header, engine)?;
    let runs_tc01 = lane
        .cases()
        .unwrap_or_default()
        .iter()
        .any(|case| Trial::Case(*case).trial_name() == TC01);
    let mut trials = match runs_tc01 {
        true => vec![TC01.to_string()],
        false => Vec::new(),
    };
    for trial in &header.caught_by {
        if !trials.contains(trial) {
            trials.push(trial.clone());
        }
    }
    let mut flags = user_flags.to_vec();
    if lane.ignored {
        flags.push("--include-ignored".into());
    }
    flags.push("--kvcr".into());
    flags.push(mutant.diff.display().to_string());
    Ok(MutantRun {
        target: lane.target,
        trials,
        flags,
    })
}

#[cfg(test)]
mod tests {
    use super::super::header;
    use super::*;

    fn mutant(name: &str, extra: &str) -> Mutant {
        mutant_of("cpu,vllm", name, extra)
    }

    /// A mutant of the engines `lanes`, with header lines `extra`.
    fn mutant_of(lanes: &str, name: &str, extra: &str) -> Mutant {
        let text = format!(
            "# mutant: {name}\n# models: a plausible bug someone could write here\n# class: hybrid-pages\n\
             # caught-by: TC-03::hinted_peer_transfer, TC-01::generation_correctness\n\
             # message: reference tokens\n# lanes: {lanes}\n{extra}# expect: killed\n\
             --- a/kvcr/core.py\n+++ b/kvcr/core.py\n@@ -1 +1 @@\n-a\n+b\n"
        );
        Mutant {
            header: header::parse(name, &text).unwrap(),
            diff: format!("/repo/fixtures/kvcr-mutants/{name}.diff").into(),
        }
    }

    #[test]
    fn each_topology_and_geometry_runs_its_lane_with_tc01_first() {
        let user = vec!["--log-level".to_string(), "debug".to_string()];
        for (extra, engine, target) in [
            ("", Kind::Cpu, "phase1"),
            ("# geometry: hybrid\n", Kind::Cpu, "phase1_hybrid"),
            ("# topology: 2p1d\n", Kind::Cpu, "phase1_2p1d"),
            ("# topology: two-node\n", Kind::Cpu, "phase1_two_node"),
            ("", Kind::Vllm, "phase1_vllm"),
            ("# topology: two-node\n", Kind::Vllm, "phase1_vllm_two_node"),
        ] {
            let m = mutant("m", extra);
            let run = plan(&m, engine, &user).unwrap();
            assert_eq!(run.target, target, "{engine} {extra}");
            assert_eq!(
                run.trials,
                [TC01, "TC-03::hinted_peer_transfer"],
                "TC-01 first, no repeat"
            );
            let mut want: Vec<String> = user.clone();
            want.extend(["--kvcr".into(), "/repo/fixtures/kvcr-mutants/m.diff".into()]);
            assert_eq!(run.flags, want, "{engine} {extra}");
        }
    }

    /// A vLLM-only mutant of two nodes runs on the vLLM two-node lane.
    #[test]
    fn a_vllm_two_node_header_plans_phase1_vllm_two_node_with_tc01_first() {
        let m = mutant_of("vllm", "m", "# topology: two-node\n");
        assert_eq!(m.header.engines, [Kind::Vllm]);
        let run = plan(&m, Kind::Vllm, &[]).unwrap();
        assert_eq!(run.target, "phase1_vllm_two_node");
        assert_eq!(run.trials, [TC01, "TC-03::hinted_peer_transfer"]);
        assert_eq!(run.flags, ["--kvcr", "/repo/fixtures/kvcr-mutants/m.diff"]);
    }

    /// The vLLM 2P+1D lane waits for `--ignored`: its child asks for it.
    #[test]
    fn a_vllm_2p1d_mutant_runs_phase1_vllm_2p1d_with_its_ignored_trials() {
        let run = plan(
            &mutant_of("vllm", "m", "# topology: 2p1d\n"),
            Kind::Vllm,
            &[],
        )
        .unwrap();
        assert_eq!(run.target, "phase1_vllm_2p1d");
        assert_eq!(run.trials[0], TC01);
        assert_eq!(
            run.flags,
            [
                "--include-ignored",
                "--kvcr",
                "/repo/fixtures/kvcr-mutants/m.diff"
            ]
        );
    }

    #[test]
    fn a_production_suite_mutant_runs_its_caught_by_trials_on_its_suite() {
        let m = mutant("m", "# suite: phase2\n");
        let run = plan(&m, Kind::Cpu, &[]).unwrap();
        assert_eq!(run.target, "phase2");
        assert_eq!(
            run.trials,
            ["TC-03::hinted_peer_transfer", TC01],
            "its caught-by only, in its order"
        );
        let err = plan(&m, Kind::Vllm, &[]).unwrap_err();
        assert!(
            err.starts_with(
                "m: no lane runs TC-07, TC-08, TC-09, TC-10, TC-11, TC-21, TC-23 on vllm/agg/dense"
            ) && err.ends_with("the lanes that run them: phase2 (cpu/agg/dense)"),
            "{err}"
        );
    }

    /// A stack no lane makes is an error naming the lanes of phase 1.
    #[test]
    fn a_stack_without_a_lane_is_an_error_listing_the_lanes() {
        let m = mutant("m", "# topology: 2p1d\n# geometry: hybrid\n");
        let err = plan(&m, Kind::Cpu, &[]).unwrap_err();
        assert!(
            err.starts_with(
                "m: no lane runs TC-01, TC-02, TC-03, TC-04, TC-05, TC-06 on cpu/2p1d/hybrid"
            ) && err.contains("phase1_2p1d (cpu/2p1d/dense)")
                && err.contains("phase1_vllm_two_node (vllm/two-node/dense)"),
            "{err}"
        );
        let err = plan(&mutant("m", ""), Kind::Sglang, &[]).unwrap_err();
        assert!(err.contains("on sglang/agg/dense"), "{err}");
    }

    /// Every curated mutant plans on a lane on each engine its header
    /// names, and every agg/dense one also on the vLLM two-node lane
    /// through `--stack`.
    #[test]
    fn every_curated_mutant_plans_on_each_of_its_engines() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(super::super::MUTANTS_DIR);
        let all = super::super::curated::load_all(&dir).unwrap();
        let mut planned = Vec::new();
        for m in &all {
            for engine in &m.header.engines {
                let run = plan(m, *engine, &[]).unwrap_or_else(|e| panic!("{e}"));
                planned.push((m.header.name.as_str(), run.target));
            }
        }
        assert!(planned.contains(&("source-write-reversed-blocks", "phase1_vllm")));
        let two_node: crate::engine::StackSpec = "vllm/two-node/dense".parse().unwrap();
        for m in all
            .iter()
            .filter(|m| m.header.engines.contains(&Kind::Vllm))
        {
            let Ok(header) = m.header.clone().on_stack(two_node) else {
                continue;
            };
            let moved = Mutant {
                header,
                diff: m.diff.clone(),
            };
            if moved.header.suite.is_none() {
                assert_eq!(
                    plan(&moved, Kind::Vllm, &[]).unwrap().target,
                    "phase1_vllm_two_node"
                );
            }
        }
    }

    /// `--stack` moves a mutant written for agg/dense; one that needs
    /// another stack is refused with what it needs.
    #[test]
    fn a_mutant_moves_to_another_stack_only_from_agg_dense() {
        let two_node: crate::engine::StackSpec = "vllm/two-node/dense".parse().unwrap();
        let moved = mutant("m", "").header.on_stack(two_node).unwrap();
        assert_eq!(moved.stack(Kind::Vllm).to_string(), "vllm/two-node/dense");
        let same = mutant("m", "# topology: two-node\n")
            .header
            .on_stack(two_node);
        assert!(same.is_ok());
        let err = mutant("m", "# topology: 2p1d\n")
            .header
            .on_stack(two_node)
            .unwrap_err();
        assert!(
            err.contains("its header needs vllm/2p1d/dense, not vllm/two-node/dense"),
            "{err}"
        );
    }

    /// `TC01` is TC-01's trial name.
    #[test]
    fn tc01_is_the_first_cases_trial() {
        let case = crate::cases::tc01_generation_correctness::CASE;
        assert_eq!(Trial::Case(case).trial_name(), TC01);
    }
}
