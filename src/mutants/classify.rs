//! Reading one mutant's run: killed, survived or broken, and whether that
//! is what its header expects.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::header::{Expect, MutantHeader};
use crate::drive::{ReadRun, TrialOutcome};

/// What the suite did against a mutant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MutantResult {
    /// A trial turned red.
    Killed {
        /// The first trial that failed, in run order.
        trial: String,
        /// Its failure message.
        message: String,
        /// Whether any failed trial's message contains the header's
        /// `message`.
        message_matches: bool,
        /// Every trial that failed.
        failed: Vec<String>,
        /// Each failed trial's claim ([`claim`]): what a second run must
        /// repeat on one trial for the kill to stand. Empty in a table
        /// written before it was kept.
        #[serde(default)]
        claims: BTreeMap<String, String>,
    },
    /// Every trial ran and passed.
    Survived,
    /// No verdict: the stack or the reference phase did not start, the
    /// child left no results, or a trial did not run. Counted apart.
    Broken { why: String },
    /// A generated mutant's kill that did not repeat: its second run did not
    /// fail the same trial with the same claim ([`same_failure`]). Not a
    /// kill; both runs' outcomes are kept.
    Flaky {
        first: Box<MutantResult>,
        second: Box<MutantResult>,
    },
}

impl MutantResult {
    /// `killed`, `survived`, `broken` or `flaky`.
    pub fn word(&self) -> &'static str {
        match self {
            MutantResult::Killed { .. } => "killed",
            MutantResult::Survived => "survived",
            MutantResult::Broken { .. } => "broken",
            MutantResult::Flaky { .. } => "flaky",
        }
    }

    /// The first run's result and the re-run's, once a kill was run again:
    /// the kill stands when both failed the same way, else it is flaky.
    pub fn confirmed_by(self, second: MutantResult) -> MutantResult {
        match same_failure(&self, &second) {
            true => self,
            false => MutantResult::Flaky {
                first: Box::new(self),
                second: Box::new(second),
            },
        }
    }
}

/// Whether two runs failed the same way: both are kills, and
/// - one trial failed in both with the same claim (the text before the
///   first `:`, its words with digits aside: ids, ports and run
///   directories differ between runs), whichever trial failed first in
///   each; or
/// - their first failures make the same claim and one run's killing trial
///   failed in the other too: a lane's trials share one stack, so a mutant
///   that hangs every request fails whichever trial asks first, and that
///   may be another one in each run, failing with the same claim.
pub fn same_failure(a: &MutantResult, b: &MutantResult) -> bool {
    match (a, b) {
        (
            MutantResult::Killed {
                trial: t1,
                message: m1,
                failed: f1,
                claims: c1,
                ..
            },
            MutantResult::Killed {
                trial: t2,
                message: m2,
                failed: f2,
                claims: c2,
                ..
            },
        ) => {
            let one_trial_repeated = c1.iter().any(|(trial, said)| c2.get(trial) == Some(said));
            let first_claims_repeated =
                (t1 == t2 || f2.contains(t1) || f1.contains(t2)) && claim(m1) == claim(m2);
            one_trial_repeated || first_claims_repeated
        }
        _ => false,
    }
}

/// `peer transfer reconciles` of `peer transfer reconciles: target read …`,
/// each word holding a digit read as `#` (`request f004v1 failed` and
/// `request f002v2 failed` make one claim).
fn claim(message: &str) -> String {
    let head = message.split(':').next().unwrap_or(message);
    head.split_whitespace()
        .map(|word| match word.chars().any(|c| c.is_ascii_digit()) {
            true => "#",
            false => word,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Classifies a mutant's run. `run` is `Err` (why) when the child left no
/// run directory; `trials` are the trials it was asked to run.
pub fn classify(
    header: &MutantHeader,
    trials: &[String],
    run: Result<&ReadRun, String>,
) -> MutantResult {
    classify_run(header.message.as_deref(), trials, run)
}

/// [`classify`] for a mutant with or without a header: `expected_message` is the
/// header's expected message (`None` for a generated mutant, which has no
/// expectation; its kills then have `message_matches` false).
pub fn classify_run(
    expected_message: Option<&str>,
    trials: &[String],
    run: Result<&ReadRun, String>,
) -> MutantResult {
    let run = match run {
        Ok(run) => run,
        Err(why) => return MutantResult::Broken { why },
    };
    if let Some(error) = &run.setup_error {
        let headline = error.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return MutantResult::Broken {
            why: format!("setup failed (setup-error.txt): {}", headline.trim()),
        };
    }
    if !run.has_results {
        return MutantResult::Broken {
            why: format!("the run wrote no results.json ({})", run.root.display()),
        };
    }
    let failed: Vec<(&str, &str)> = run
        .trials
        .iter()
        .filter(|t| trials.contains(&t.name))
        .filter_map(|t| match &t.outcome {
            TrialOutcome::Failed { message } => Some((t.name.as_str(), message.as_str())),
            _ => None,
        })
        .collect();
    if let Some((trial, message)) = failed.first() {
        let message_matches =
            expected_message.is_some_and(|want| failed.iter().any(|(_, m)| m.contains(want)));
        return MutantResult::Killed {
            trial: trial.to_string(),
            message: message.to_string(),
            message_matches,
            failed: failed.iter().map(|(t, _)| t.to_string()).collect(),
            claims: failed
                .iter()
                .map(|(t, m)| (t.to_string(), claim(m)))
                .collect(),
        };
    }
    for trial in trials {
        match run.trial(trial).map(|t| &t.outcome) {
            // A failure was a kill above.
            // An expected failure is green: the mutant survived it.
            Some(
                TrialOutcome::Passed
                | TrialOutcome::ExpectedFailure { .. }
                | TrialOutcome::Failed { .. },
            ) => {}
            Some(TrialOutcome::Ignored { reason }) => {
                return MutantResult::Broken {
                    why: format!("{trial} did not run: {reason}"),
                }
            }
            None => {
                return MutantResult::Broken {
                    why: format!("{trial} is not in the run's results (no such trial?)"),
                }
            }
        }
    }
    MutantResult::Survived
}

/// Whether `result` is what the header expects: `killed` needs a kill whose
/// message contains the header's `message` (another check catching it means
/// the header is out of date); `survives` needs a survivor. Broken never
/// meets an expectation.
pub fn meets_expectation(header: &MutantHeader, result: &MutantResult) -> bool {
    match (header.expect, result) {
        (
            Expect::Killed,
            MutantResult::Killed {
                message_matches, ..
            },
        ) => *message_matches,
        (Expect::Survives, MutantResult::Survived) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::header;
    use super::*;

    fn header(expect: &str) -> MutantHeader {
        let (message, reading) = match expect {
            "killed" => ("reference tokens", ""),
            _ => ("-", "# reading: gap. nothing reads it yet\n"),
        };
        let text = format!(
            "# mutant: m\n# models: a plausible bug someone could write here\n\
             # class: host-tier-correctness\n# caught-by: TC-02::local_dram_flow\n\
             # message: {message}\n# lanes: cpu\n# expect: {expect}\n{reading}\
             --- a/kvcr/core.py\n+++ b/kvcr/core.py\n@@ -1 +1 @@\n-a\n+b\n"
        );
        header::parse("m", &text).unwrap()
    }

    fn trials() -> Vec<String> {
        vec![
            "TC-01::generation_correctness".into(),
            "TC-02::local_dram_flow".into(),
        ]
    }

    fn run(outcomes: &[(&str, TrialOutcome)]) -> ReadRun {
        ReadRun::with_outcomes("/runs/m/phase1/r", outcomes, None)
    }

    fn failed(message: &str) -> TrialOutcome {
        TrialOutcome::Failed {
            message: message.into(),
        }
    }

    #[test]
    fn a_failed_trial_kills_and_its_message_is_matched() {
        let r = run(&[
            ("TC-01::generation_correctness", TrialOutcome::Passed),
            (
                "TC-02::local_dram_flow",
                failed("reference tokens: token 0 of 16 differs"),
            ),
        ]);
        let result = classify(&header("killed"), &trials(), Ok(&r));
        assert_eq!(
            result,
            MutantResult::Killed {
                trial: "TC-02::local_dram_flow".into(),
                message: "reference tokens: token 0 of 16 differs".into(),
                message_matches: true,
                claims: [(
                    "TC-02::local_dram_flow".to_string(),
                    "reference tokens".to_string()
                )]
                .into(),
                failed: vec!["TC-02::local_dram_flow".into()],
            }
        );
        assert!(meets_expectation(&header("killed"), &result));
        assert!(!meets_expectation(&header("survives"), &result));
    }

    #[test]
    fn a_kill_by_another_message_is_reported_and_misses_the_expectation() {
        let r = run(&[
            (
                "TC-01::generation_correctness",
                failed("cold pass: cached_tokens Some(0)"),
            ),
            (
                "TC-02::local_dram_flow",
                failed("host-tier (DRAM) hit: 0 blocks"),
            ),
        ]);
        let result = classify(&header("killed"), &trials(), Ok(&r));
        let MutantResult::Killed {
            trial,
            message_matches,
            failed,
            ..
        } = &result
        else {
            panic!("{result:?}");
        };
        assert_eq!(
            trial, "TC-01::generation_correctness",
            "the first failure in run order"
        );
        assert!(!message_matches);
        assert_eq!(failed.len(), 2);
        assert!(!meets_expectation(&header("killed"), &result));
    }

    #[test]
    fn all_trials_passing_is_a_survivor() {
        let r = run(&[
            ("TC-01::generation_correctness", TrialOutcome::Passed),
            ("TC-02::local_dram_flow", TrialOutcome::Passed),
        ]);
        let result = classify(&header("survives"), &trials(), Ok(&r));
        assert_eq!(result, MutantResult::Survived);
        assert!(meets_expectation(&header("survives"), &result));
        assert!(!meets_expectation(&header("killed"), &result));
    }

    fn kill(trial: &str, message: &str) -> MutantResult {
        MutantResult::Killed {
            trial: trial.into(),
            message: message.into(),
            message_matches: false,
            claims: Default::default(),
            failed: vec![trial.into()],
        }
    }

    #[test]
    fn a_kill_that_repeats_the_same_way_stands_and_one_that_does_not_is_flaky() {
        let first = kill(
            "TC-03::hinted_peer_transfer",
            "peer transfer reconciles: target read bytes 0 ≠ source_write bytes 32768",
        );
        let same = kill(
            "TC-03::hinted_peer_transfer",
            "peer transfer reconciles: target read bytes 0 ≠ source_write bytes 24576",
        );
        assert_eq!(
            first.clone().confirmed_by(same),
            first,
            "numbers may differ"
        );

        // A registration timeout once, a pass the second time: a flake.
        let flake = kill(
            "TC-04::guard_takeover_and_replacement",
            "worker-A.1 gave up waiting for worker-A.1 to register in Dynamo's discovery",
        );
        for second in [
            MutantResult::Survived,
            MutantResult::Broken {
                why: "setup failed".into(),
            },
            kill(
                "TC-04::guard_takeover_and_replacement",
                "takeover through the Guard: none of 6 attempts",
            ),
            kill(
                "TC-01::generation_correctness",
                "worker-A.1 gave up waiting for worker-A.1 to register",
            ),
        ] {
            let result = flake.clone().confirmed_by(second.clone());
            assert_eq!(
                result,
                MutantResult::Flaky {
                    first: Box::new(flake.clone()),
                    second: Box::new(second),
                }
            );
            assert_eq!(result.word(), "flaky");
            assert!(!meets_expectation(&header("killed"), &result));
        }
        assert!(!same_failure(
            &MutantResult::Survived,
            &MutantResult::Survived
        ));
    }

    #[test]
    fn a_kill_that_repeats_on_a_trial_run_earlier_stands() {
        // Every request hangs: the first run's first failure is TC-03, the
        // re-run's TC-01, and TC-03 failed again the same way.
        let hang = |trial: &str, id: &str| {
            format!("request {id} failed: completion of \"tiny\" for {trial}: no response")
        };
        let first = MutantResult::Killed {
            trial: "TC-03::hinted_peer_transfer".into(),
            message: hang("TC-03", "f004v1"),
            message_matches: false,
            claims: Default::default(),
            failed: vec!["TC-03::hinted_peer_transfer".into(), "TC-04::x".into()],
        };
        let second = MutantResult::Killed {
            trial: "TC-01::generation_correctness".into(),
            message: hang("TC-01", "f002v2"),
            message_matches: false,
            claims: Default::default(),
            failed: vec![
                "TC-01::generation_correctness".into(),
                "TC-03::hinted_peer_transfer".into(),
            ],
        };
        assert_eq!(first.clone().confirmed_by(second.clone()), first);
        // Either way round.
        assert_eq!(second.clone().confirmed_by(first.clone()), second);
        // The same registration give-up, in each run's own directory.
        let gave_up = |dir: &str| {
            MutantResult::Killed {
            trial: "TC-04::guard_takeover_and_replacement".into(),
            message: format!("worker-A.1 gave up waiting for worker-A.1 to register in Dynamo's discovery (/dev/shm/kvcr-e2e-{dir}/discovery) on a port it listens on"),
            message_matches: false,
            claims: Default::default(),
            failed: vec!["TC-04::guard_takeover_and_replacement".into()],
        }
        };
        let once = gave_up("20261206T070538Z-30992-221b");
        assert_eq!(
            once.clone()
                .confirmed_by(gave_up("20261206T070611Z-31308-e947")),
            once
        );
        // Without TC-03 among the re-run's failures it is a flake.
        let elsewhere = MutantResult::Killed {
            trial: "TC-01::generation_correctness".into(),
            message: hang("TC-01", "f002v2"),
            message_matches: false,
            claims: Default::default(),
            failed: vec!["TC-01::generation_correctness".into()],
        };
        assert_eq!(first.clone().confirmed_by(elsewhere).word(), "flaky");
        assert_eq!(claim("request f004v1 failed: x"), "request # failed");
    }

    #[test]
    fn a_kill_whose_first_failure_differs_stands_when_one_trial_repeats_its_claim() {
        // The first run failed TC-02 first; the re-run failed TC-01 first
        // (a check that passed once) and TC-02 again, the same way.
        let dram = "host-tier (DRAM) hit: 0 blocks loaded from host memory";
        let cached = "cached pass reused the cache: f000v1 repeated: cached_tokens Some(0)";
        let first = classify_run(
            None,
            &trials(),
            Ok(&run(&[
                ("TC-01::generation_correctness", TrialOutcome::Passed),
                ("TC-02::local_dram_flow", failed(dram)),
            ])),
        );
        let second = classify_run(
            None,
            &trials(),
            Ok(&run(&[
                ("TC-01::generation_correctness", failed(cached)),
                ("TC-02::local_dram_flow", failed(dram)),
            ])),
        );
        assert_eq!(first.clone().confirmed_by(second), first);
        // TC-02 failing the second time with another claim is no repeat.
        let other = classify_run(
            None,
            &trials(),
            Ok(&run(&[
                ("TC-01::generation_correctness", failed(cached)),
                (
                    "TC-02::local_dram_flow",
                    failed("reference tokens: token 2 of 16 differs"),
                ),
            ])),
        );
        assert_eq!(first.confirmed_by(other).word(), "flaky");
    }

    #[test]
    fn a_setup_error_no_results_or_a_trial_that_did_not_run_is_broken() {
        let mut setup = run(&[("TC-01::generation_correctness", failed("setup failed: x"))]);
        setup.setup_error = Some("\nthe frontend did not become ready in 60 s\n(details)".into());
        let result = classify(&header("killed"), &trials(), Ok(&setup));
        assert_eq!(
            result,
            MutantResult::Broken {
                why: "setup failed (setup-error.txt): the frontend did not become ready in 60 s"
                    .into()
            }
        );
        assert!(!meets_expectation(&header("killed"), &result));

        let mut none = run(&[]);
        none.has_results = false;
        let result = classify(&header("survives"), &trials(), Ok(&none));
        assert!(matches!(&result, MutantResult::Broken { why } if why.contains("no results.json")));
        assert!(!meets_expectation(&header("survives"), &result));

        let ignored = run(&[
            ("TC-01::generation_correctness", TrialOutcome::Passed),
            (
                "TC-02::local_dram_flow",
                TrialOutcome::Ignored {
                    reason: "needs two nodes".into(),
                },
            ),
        ]);
        let result = classify(&header("survives"), &trials(), Ok(&ignored));
        assert!(
            matches!(&result, MutantResult::Broken { why } if why.contains("did not run: needs two nodes"))
        );

        let missing = run(&[("TC-01::generation_correctness", TrialOutcome::Passed)]);
        let result = classify(&header("survives"), &trials(), Ok(&missing));
        assert!(
            matches!(&result, MutantResult::Broken { why } if why.contains("not in the run's results"))
        );

        let result = classify(&header("killed"), &trials(), Err("no run directory".into()));
        assert_eq!(
            result,
            MutantResult::Broken {
                why: "no run directory".into()
            }
        );
    }
}
