//! The gate from fake lanes and real comparisons of recorded runs: the
//! exit code both ways, the summary, gate.json and JUnit.

use std::path::{Path, PathBuf};

use super::*;
use crate::compare::{self, CompareDriveArgs, Comparison, Rule, Written};
use crate::drive::{TrialOutcome, TrialRecord};
use crate::stats::Bootstrap;

const TARGETS: &[&str] = &["phase1", "phase2", "phase2_g3", "phase3"];

fn gate_args(line: &str) -> GateArgs {
    let args: Vec<String> = line.split_whitespace().map(String::from).collect();
    GateArgs::parse(&args, TARGETS, TARGETS).unwrap()
}

fn trial(name: &str, outcome: TrialOutcome) -> TrialRecord {
    TrialRecord {
        name: name.into(),
        outcome,
    }
}

fn green(target: &str) -> LaneResult {
    LaneResult::judge(
        target,
        LaneEvidence {
            exit_code: Some(0),
            run_dir: Some(PathBuf::from(format!("/out/lanes/{target}/run"))),
            trials: vec![
                trial("TC-01::generation_correctness", TrialOutcome::Passed),
                trial(
                    "TC-09::clean_restart",
                    TrialOutcome::ExpectedFailure { findings: vec![2] },
                ),
                trial(
                    "TC-13::link_cut",
                    TrialOutcome::Ignored {
                        reason: "needs root".into(),
                    },
                ),
            ],
            setup_error: None,
        },
        None,
        61.0,
    )
}

fn red(target: &str) -> LaneResult {
    LaneResult::judge(
        target,
        LaneEvidence {
            exit_code: Some(101),
            run_dir: Some(PathBuf::from(format!("/out/lanes/{target}/run"))),
            trials: vec![
                trial("TC-01::generation_correctness", TrialOutcome::Passed),
                trial(
                    "TC-06::guard_recovery_timing",
                    TrialOutcome::Failed {
                        message: "the Guard did not serve within 5 s\nsecond line".into(),
                    },
                ),
            ],
            setup_error: None,
        },
        None,
        70.0,
    )
}

/// Stand-in steps: lanes answer from `lanes`, the comparison is `compare`.
struct Fake {
    lanes: Vec<LaneResult>,
    compare: Option<Result<(Comparison, Written), String>>,
    ran: Vec<String>,
    compare_args: Option<(CompareDriveArgs, PathBuf)>,
}

impl Fake {
    fn new(lanes: Vec<LaneResult>, compare: Result<(Comparison, Written), String>) -> Self {
        Fake {
            lanes,
            compare: Some(compare),
            ran: Vec::new(),
            compare_args: None,
        }
    }
}

impl Steps for Fake {
    fn lane(&mut self, run: &LaneRun) -> LaneResult {
        self.ran
            .push(format!("{} {}", run.target, run.flags.join(" ")));
        self.lanes
            .iter()
            .find(|l| l.target == run.target)
            .cloned()
            .unwrap()
    }

    fn compare(
        &mut self,
        args: &CompareDriveArgs,
        out: &Path,
    ) -> Result<(Comparison, Written), String> {
        self.compare_args = Some((args.clone(), out.to_path_buf()));
        self.compare.take().unwrap()
    }
}

/// A real comparison over two round pairs of the recorded TC-05 + TC-06
/// run, head's Guard promotion and t1 multiplied by `head_factor`.
fn comparison(dir: &Path, head_factor: f64) -> (Comparison, Written) {
    let text = include_str!("../compare/testdata/results-tc05-tc06.json");
    let promotion = "\"promotion_ms\": 11.326";
    let t1 = "\"t1_ms\": 432.819482";
    assert!(text.contains(promotion) && text.contains(t1));
    let head_text = text
        .replace(
            promotion,
            &format!("\"promotion_ms\": {}", 11.326 * head_factor),
        )
        .replace(t1, &format!("\"t1_ms\": {}", 432.819482 * head_factor));
    // ABBA: base 0, head 0, head 1, base 1, each started after the one before.
    let start = "\"started_at\": \"2026-12-01T12:47:16.739922711Z\"";
    assert!(text.contains(start));
    let write = |name: &str, body: &str, second: u32| {
        let path = dir.join(name).join("results.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let at = format!("\"started_at\": \"2026-12-01T13:00:{second:02}Z\"");
        std::fs::write(&path, body.replacen(start, &at, 1)).unwrap();
        path
    };
    let base = vec![write("b0", text, 0), write("b1", text, 3)];
    let head = vec![write("h0", &head_text, 1), write("h1", &head_text, 2)];
    let rule = Rule {
        min_pairs: 2,
        ..Rule::default()
    };
    let bootstrap = Bootstrap {
        resamples: 200,
        ..Bootstrap::default()
    };
    let c = compare::compare_runs(&base, &head, &rule, &bootstrap).unwrap();
    let written = compare::write_outputs(&c, &dir.join("compare")).unwrap();
    (c, written)
}

#[test]
fn every_lane_runs_with_the_build_then_the_comparison_and_all_green_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let args = gate_args("--kvcr pypi:0.1.2 --lanes phase1,phase2 --rounds 4 --log-level debug");
    let mut fake = Fake::new(
        vec![green("phase1"), green("phase2")],
        Ok(comparison(tmp.path(), 1.0)),
    );
    let report = run_gate(&mut fake, &args, Path::new("/out"));
    assert_eq!(
        fake.ran,
        [
            "phase1 --log-level debug --kvcr pypi:0.1.2",
            "phase2 --log-level debug --kvcr pypi:0.1.2"
        ]
    );
    let (compare_args, compare_out) = fake.compare_args.unwrap();
    assert_eq!(compare_out, PathBuf::from("/out/compare"));
    assert_eq!(
        (
            compare_args.base.to_string(),
            compare_args.head.to_string(),
            compare_args.rounds
        ),
        ("pypi:0.1.1".to_string(), "pypi:0.1.2".to_string(), 4)
    );
    assert_eq!(report.verdict(), GateVerdict::Pass);
    assert_eq!(report.verdict().exit_code(), 0);
    assert!(report.reasons().is_empty(), "{:?}", report.reasons());
    let summary = render_summary(&report);
    assert!(summary.ends_with("gate: PASS (exit 0)\n"), "{summary}");
    assert!(
        summary.contains("lane phase1               passed     1 passed, 1 expected failures, 0 failed, 1 ignored in 61 s"),
        "{summary}"
    );
}

#[test]
fn a_failed_lane_fails_the_gate_and_skips_the_comparison() {
    let args = gate_args("--kvcr pypi:0.1.2 --lanes phase1,phase2");
    let mut fake = Fake::new(vec![red("phase1"), green("phase2")], Err("unused".into()));
    let report = run_gate(&mut fake, &args, Path::new("/out"));
    assert_eq!(fake.ran.len(), 2, "every lane runs");
    assert!(
        fake.compare_args.is_none(),
        "no comparison after a red lane"
    );
    assert_eq!(report.verdict(), GateVerdict::Fail);
    assert_eq!(report.verdict().exit_code(), 1);
    let reasons = report.reasons();
    assert_eq!(
        reasons[0],
        "lane phase1 failed: TC-06::guard_recovery_timing: the Guard did not serve within 5 s"
    );
    assert!(
        reasons[1].starts_with("compare: not run: lane(s) phase1 failed"),
        "{reasons:?}"
    );
    let xml = junit_report(&report).to_string().unwrap();
    assert!(
        xml.contains("testcase name=\"phase1::TC-06::guard_recovery_timing\""),
        "{xml}"
    );
    assert!(
        xml.contains("<skipped message=\"lane(s) phase1 failed"),
        "{xml}"
    );
}

#[test]
fn with_keep_going_a_failed_lane_is_still_compared_and_still_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let args = gate_args("--kvcr pypi:0.1.2 --lanes phase1 --keep-going");
    let mut fake = Fake::new(vec![red("phase1")], Ok(comparison(tmp.path(), 1.0)));
    let report = run_gate(&mut fake, &args, Path::new("/out"));
    assert!(fake.compare_args.is_some());
    assert_eq!(report.compare.gate(), Some(compare::Gate::Pass));
    assert_eq!(report.verdict().exit_code(), 1);
}

#[test]
fn a_regression_with_every_lane_green_fails_the_gate_naming_the_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let args = gate_args("--kvcr pypi:0.1.2 --lanes phase1");
    let mut fake = Fake::new(vec![green("phase1")], Ok(comparison(tmp.path(), 3.0)));
    let report = run_gate(&mut fake, &args, Path::new("/out"));
    assert_eq!(report.verdict(), GateVerdict::Fail);
    assert_eq!(report.verdict().exit_code(), 1);
    let reasons = report.reasons().join("\n");
    assert!(
        reasons.contains("compare: regression TC-06::guard_recovery_timing::promotion (+200.0 %)"),
        "{reasons}"
    );
    assert!(
        reasons.contains("TC-06::guard_recovery_timing::t1"),
        "{reasons}"
    );
    let xml = junit_report(&report).to_string().unwrap();
    assert!(xml.contains("testsuite name=\"gate.lanes\""), "{xml}");
    assert!(xml.contains("testsuite name=\"compare\""), "{xml}");
    assert!(
        xml.contains("testcase name=\"TC-06::guard_recovery_timing::promotion\""),
        "{xml}"
    );
    let json: serde_json::Value = serde_json::from_str(&render_json(&report)).unwrap();
    assert_eq!(json["exit_code"], 1);
    assert_eq!(json["verdict"], "fail");
    assert_eq!(json["compare"]["status"], "compared");
    assert_eq!(json["compare"]["gate"], "FAIL");
    assert_eq!(json["lanes"][0]["status"], "passed");
}

#[test]
fn nothing_compared_is_2_and_a_lane_without_evidence_is_3() {
    let args = gate_args("--kvcr pypi:0.1.2 --lanes phase1");
    let mut fake = Fake::new(vec![green("phase1")], Err("cargo failed".into()));
    let report = run_gate(&mut fake, &args, Path::new("/out"));
    assert_eq!(report.verdict().exit_code(), 2);
    assert_eq!(report.reasons(), ["compare: not compared: cargo failed"]);

    let tmp = tempfile::tempdir().unwrap();
    let lost = LaneResult::judge(
        "phase1",
        LaneEvidence {
            exit_code: Some(0),
            run_dir: None,
            trials: vec![],
            setup_error: None,
        },
        None,
        1.0,
    );
    let mut fake = Fake::new(vec![lost], Ok(comparison(tmp.path(), 1.0)));
    let report = run_gate(&mut fake, &args, Path::new("/out"));
    assert_eq!(report.verdict(), GateVerdict::NoVerdict);
    assert_eq!(report.verdict().exit_code(), 3);
    assert_eq!(
        report.reasons(),
        ["lane phase1 has no verdict: its run exited 0 and left no run directory of its own"]
    );
    let xml = junit_report(&report).to_string().unwrap();
    assert!(xml.contains("testcase name=\"phase1\""), "{xml}");
}

#[test]
fn a_lane_is_green_only_with_exit_0_its_own_run_and_a_trial_that_ran() {
    let evidence = |code: Option<i32>, dir: bool, trials: Vec<TrialRecord>, setup: Option<&str>| {
        LaneResult::judge(
            "phase2",
            LaneEvidence {
                exit_code: code,
                run_dir: dir.then(|| PathBuf::from("/r")),
                trials,
                setup_error: setup.map(String::from),
            },
            None,
            0.0,
        )
    };
    let passed = || vec![trial("TC-07::full_pool", TrialOutcome::Passed)];
    let ignored = || {
        vec![trial(
            "TC-13::link_cut",
            TrialOutcome::Ignored {
                reason: "needs root".into(),
            },
        )]
    };
    let g = evidence(Some(0), true, passed(), None);
    assert_eq!((g.status, g.problem), (LaneStatus::Passed, None));
    let all_ignored = evidence(Some(0), true, ignored(), None);
    assert_eq!(all_ignored.status, LaneStatus::NoVerdict);
    assert_eq!(
        all_ignored.problem.as_deref(),
        Some("every trial was ignored (the first: needs root)")
    );
    let setup = evidence(
        Some(101),
        true,
        vec![],
        Some("the Guard did not start\nmore"),
    );
    assert_eq!(setup.status, LaneStatus::Failed);
    assert_eq!(
        setup.problem.as_deref(),
        Some("its stack did not start: the Guard did not start")
    );
    let signal = evidence(None, true, passed(), None);
    assert_eq!(signal.status, LaneStatus::Failed);
    assert_eq!(
        signal.problem.as_deref(),
        Some("its run was ended by a signal with no failed trial recorded (see its log)")
    );
    let no_dir = evidence(Some(101), false, vec![], None);
    assert_eq!(no_dir.status, LaneStatus::NoVerdict);
}

#[test]
fn each_lane_gets_the_build_and_a_run_directory_of_its_own() {
    let args = gate_args("--kvcr pypi:0.1.2 --exclusive");
    let runs = lane_runs(&args, Path::new("/out"));
    let targets: Vec<&str> = runs.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(targets, DEFAULT_LANES);
    for run in &runs {
        assert_eq!(run.flags.join(" "), "--exclusive --kvcr pypi:0.1.2");
        assert_eq!(run.run_base, Path::new("/out/lanes").join(&run.target));
    }
}

/// A stand-in lane binary: records its arguments, writes `results` into a
/// run directory under its `--run-dir` and exits `code`.
fn fake_lane(dir: &Path, results: &str, code: u8) -> PathBuf {
    let results_file = dir.join("fake-results.json");
    std::fs::write(&results_file, results).unwrap();
    let binary = dir.join("lane-fake");
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {calls}\nwhile [ \"$1\" != --run-dir ]; do shift; done\n\
         run=\"$2/phase1/20261201T000000Z-1-abcd\"\nmkdir -p \"$run\"\ncp {results} \"$run/results.json\"\n\
         exit {code}\n",
        calls = dir.join("calls").display(),
        results = results_file.display(),
    );
    std::fs::write(&binary, script).unwrap();
    let mut perms = std::fs::metadata(&binary).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&binary, perms).unwrap();
    binary
}

#[test]
fn a_lane_child_runs_every_trial_with_the_build_and_is_judged_by_what_it_left() {
    let tmp = tempfile::tempdir().unwrap();
    let results = r#"{"run": {"cases": [
        {"name": "TC-01::generation_correctness", "outcome": "passed"},
        {"name": "TC-02::local_dram_flow", "outcome": "failed", "message": "blocks came from nowhere"}
    ]}}"#;
    let run = LaneRun {
        target: "phase1".into(),
        flags: vec!["--kvcr".into(), "pypi:0.1.2".into()],
        run_base: tmp.path().join("out/lanes/phase1"),
    };
    let binary = fake_lane(tmp.path(), results, 101);
    let r = run_lane_child(&binary, tmp.path(), &run);
    let calls = std::fs::read_to_string(tmp.path().join("calls")).unwrap();
    assert_eq!(
        calls.trim(),
        format!("--kvcr pypi:0.1.2 --run-dir {}", run.run_base.display()),
        "no trial filter: every trial of the lane"
    );
    assert_eq!(r.status, LaneStatus::Failed);
    assert_eq!(
        r.problem.as_deref(),
        Some("TC-02::local_dram_flow: blocks came from nowhere")
    );
    assert_eq!(r.exit_code, Some(101));
    assert!(r
        .log
        .as_ref()
        .unwrap()
        .ends_with("out/lanes/phase1/child.log"));

    // The same directory again: the earlier run is not this one's.
    let silent = tmp.path().join("silent");
    std::fs::write(&silent, "#!/bin/sh\nexit 0\n").unwrap();
    let mut perms = std::fs::metadata(&silent).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&silent, perms).unwrap();
    let again = run_lane_child(&silent, tmp.path(), &run);
    assert_eq!(again.status, LaneStatus::NoVerdict);
}

#[test]
fn the_outputs_are_written_and_the_page_names_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let args = gate_args("--kvcr pypi:0.1.2 --lanes phase1");
    let mut fake = Fake::new(vec![green("phase1")], Ok(comparison(tmp.path(), 3.0)));
    let report = run_gate(&mut fake, &args, Path::new("/out"));
    let written = write_outputs(&report, &tmp.path().join("gate")).unwrap();
    let page = std::fs::read_to_string(&written.page).unwrap();
    assert!(page.contains("<h1>gate: FAIL (exit 1)</h1>"), "{page}");
    assert!(page.contains("compare.html"), "{page}");
    assert!(written.json.is_file() && written.junit.is_file());
}

#[test]
fn compare_switches_and_the_method_go_to_the_comparison_only() {
    let args = gate_args("--kvcr pypi:0.1.2 --early-stop --method pooled --log-level debug");
    assert!(args.compare.early_stop);
    assert_eq!(args.compare.rule.method, compare::Method::Pooled);
    assert_eq!(args.harness, ["--log-level", "debug"]);
}
