//! What one mutant runs: the test target its header implies, the trials
//! (TC-01 plus its `caught-by`; a mutant of a production suite, whose
//! target has no TC-01, its `caught-by` only), and the flags that build it.

use super::curated::Mutant;
use super::header::Lane;

/// The trial every mutant runs first: the routed families against the
/// reference.
pub const TC01: &str = "TC-01::generation_correctness";

/// Harness settings the lane sets for each child itself (profile keys).
pub const RESERVED_KEYS: &[&str] = &[
    "kvcr", "run_dir", "junit", "engine", "topology", "geometry", "attach", "cases",
];

/// One mutant's child run, before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantRun {
    /// `phase1`, `phase1_hybrid`, `phase1_2p1d`, `phase1_two_node`,
    /// `phase1_vllm`, or a production suite's `phase2` / `phase2_g3`.
    pub target: &'static str,
    /// Whole trial names, TC-01 first (but on a production suite), no
    /// repeats.
    pub trials: Vec<String>,
    /// Harness flags: the user's, then the target's own and `--kvcr`.
    pub flags: Vec<String>,
}

/// The run of `mutant` on `lane`, with the user's harness flags.
pub fn plan(mutant: &Mutant, lane: Lane, user_flags: &[String]) -> Result<MutantRun, String> {
    let header = &mutant.header;
    let target = match (lane, header.target()) {
        (Lane::Vllm, target) if header.suite.is_some() => {
            return Err(format!(
                "{}: the vLLM lane does not run the production suite {target} (CPU engine only)",
                header.name
            ))
        }
        (Lane::Cpu, target) => target,
        (Lane::Vllm, "phase1") => "phase1_vllm",
        (Lane::Vllm, other) => {
            return Err(format!(
                "{}: the vLLM lane runs only aggregated dense stacks; this mutant needs {other}",
                header.name
            ))
        }
    };
    // The production suites' targets have no TC-01.
    let mut trials = match header.suite {
        Some(_) => Vec::new(),
        None => vec![TC01.to_string()],
    };
    for trial in &header.caught_by {
        if !trials.contains(trial) {
            trials.push(trial.clone());
        }
    }
    let mut flags = user_flags.to_vec();
    flags.extend(header.harness_flags().into_iter().map(String::from));
    flags.push("--kvcr".into());
    flags.push(mutant.diff.display().to_string());
    Ok(MutantRun {
        target,
        trials,
        flags,
    })
}

#[cfg(test)]
mod tests {
    use super::super::header;
    use super::*;

    fn mutant(name: &str, extra: &str) -> Mutant {
        let text = format!(
            "# mutant: {name}\n# models: a plausible bug someone could write here\n# class: hybrid-pages\n\
             # caught-by: TC-03::hinted_peer_transfer, TC-01::generation_correctness\n\
             # message: reference tokens\n# lanes: cpu,vllm\n{extra}# expect: killed\n\
             --- a/kvcr/core.py\n+++ b/kvcr/core.py\n@@ -1 +1 @@\n-a\n+b\n"
        );
        Mutant {
            header: header::parse(name, &text).unwrap(),
            diff: format!("/repo/fixtures/kvcr-mutants/{name}.diff").into(),
        }
    }

    #[test]
    fn each_topology_and_geometry_runs_its_target_with_tc01_first() {
        let user = vec!["--log-level".to_string(), "debug".to_string()];
        for (extra, target, target_flags) in [
            ("", "phase1", &[][..]),
            ("# geometry: hybrid\n", "phase1_hybrid", &[][..]),
            ("# topology: 2p1d\n", "phase1_2p1d", &[][..]),
            (
                "# topology: 2p1d\n# geometry: hybrid\n",
                "phase1_2p1d",
                &["--geometry", "hybrid"][..],
            ),
            ("# topology: two-node\n", "phase1_two_node", &[][..]),
        ] {
            let m = mutant("m", extra);
            let run = plan(&m, Lane::Cpu, &user).unwrap();
            assert_eq!(run.target, target, "{extra}");
            assert_eq!(
                run.trials,
                [TC01, "TC-03::hinted_peer_transfer"],
                "no repeat of TC-01"
            );
            let mut want: Vec<String> = user.clone();
            want.extend(target_flags.iter().map(|f| f.to_string()));
            want.extend(["--kvcr".into(), "/repo/fixtures/kvcr-mutants/m.diff".into()]);
            assert_eq!(run.flags, want, "{extra}");
        }
    }

    #[test]
    fn a_production_suite_mutant_runs_its_caught_by_trials_on_its_suite() {
        let m = mutant("m", "# suite: phase2\n");
        let run = plan(&m, Lane::Cpu, &[]).unwrap();
        assert_eq!(run.target, "phase2");
        assert_eq!(
            run.trials,
            ["TC-03::hinted_peer_transfer", TC01],
            "its caught-by only, in its order"
        );
        let err = plan(&m, Lane::Vllm, &[]).unwrap_err();
        assert!(err.contains("production suite phase2"), "{err}");
    }

    #[test]
    fn the_vllm_lane_runs_phase1_vllm_and_only_aggregated_dense() {
        assert_eq!(
            plan(&mutant("m", ""), Lane::Vllm, &[]).unwrap().target,
            "phase1_vllm"
        );
        let err = plan(&mutant("m", "# topology: 2p1d\n"), Lane::Vllm, &[]).unwrap_err();
        assert!(err.contains("only aggregated dense"), "{err}");
    }
}
