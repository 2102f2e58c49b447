//! A short `kvcr-e2e compare`, for real: base = head = the default KVCR
//! build, 2 rounds (one AB pair, the minimum) of TC-05 only, with a small
//! TC-05 (6 prompts per arm, sweep levels 1 and 2). Asserts that the
//! comparison completes with no verdict (exit 3: at one pair every figure
//! is inconclusive, and the summary names each one), that compare.json,
//! junit.xml and compare.html
//! exist, that every TC-05 figure has samples from both builds, and that
//! each round's arms and sweep levels carry n and their intervals. Nothing
//! about speed. Starts two stacks, one after the other: on a shared machine
//! run it alone (about 90 s on 2 cores).
//!
//! ```sh
//! cargo test --test compare_short
//! ```

mod lanes;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kvcr-e2e");

/// The small TC-05 each round runs.
const REPEATS: u32 = 6;
const LEVELS: [u32; 2] = [1, 2];

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} is not readable: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The figure ids a TC-05-only comparison must hold.
fn expected_figures() -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for arm in kvcr_e2e::evidence::Arm::ALL {
        for m in ["ttft_p50", "ttft_p90", "tpot_p50", "itl_p50"] {
            ids.insert(format!("TC-05::{arm}::{m}"));
        }
    }
    for trial in kvcr_e2e::evidence::Arm::ALL
        .iter()
        .map(|arm| arm.to_string())
        .chain(["concurrency_sweep".to_string()])
    {
        for m in ["failed_requests", "wrong_tokens"] {
            ids.insert(format!("TC-05::{trial}::{m}"));
        }
    }
    for c in LEVELS {
        for m in ["throughput", "ttft_p50"] {
            ids.insert(format!("TC-05::concurrency_sweep::c{c}::{m}"));
        }
    }
    // The deliver bench's KVCR local_deliver (the CPU engine's stack).
    ids.insert("TC-05::kvcr_deliver_bench::local_deliver".to_string());
    // The pull bench's KVCR remote_deliver and its pulls' p10.
    ids.insert("TC-05::kvcr_pull_bench::remote_deliver".to_string());
    ids.insert("TC-05::kvcr_pull_bench::pull_p10".to_string());
    ids
}

#[test]
fn compare_of_the_default_build_against_itself_completes_with_every_figure() {
    // Build the suite binary first, so the rounds' time is the stacks'.
    lanes::phase1_binary();
    let out = lanes::evidence_dir("compare_short");
    let build = lanes::settings().kvcr.to_string();
    let levels = LEVELS.map(|l| l.to_string()).join(",");
    let repeats = REPEATS.to_string();
    let started = std::time::Instant::now();
    let output = Command::new(BIN)
        .args(["compare", "--base", &build, "--head", &build])
        .args(["--rounds", "2", "--trials", "TC-05", "--out"])
        .arg(&out)
        .args([
            "--perf-repeats",
            &repeats,
            "--perf-concurrency-levels",
            &levels,
        ])
        .args(["--perf-sweep-requests", "6"])
        .current_dir(lanes::root())
        .output()
        .expect("kvcr-e2e compare starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(out.join("compare.log"), &text).expect("log written");
    eprintln!(
        "compare took {:.1} s; evidence: {}",
        started.elapsed().as_secs_f64(),
        out.display()
    );
    // One pair is too few for any verdict: the comparison completes and
    // says so with its own exit code, not a pass and not a regression.
    assert_eq!(
        output.status.code(),
        Some(i32::from(kvcr_e2e::compare::Gate::NoVerdict.exit_code())),
        "compare of {build} against itself did not end with no verdict:\n{text}"
    );
    assert!(
        text.contains("NO VERDICT (exit 3)"),
        "the summary names the conclusion:\n{text}"
    );

    for name in ["compare.json", "junit.xml", "compare.html"] {
        assert!(
            out.join(name).is_file(),
            "{name} was not written in {}",
            out.display()
        );
    }
    let comparison = read_json(&out.join("compare.json"));
    let figures = comparison["figures"].as_array().expect("figures");
    let ids: BTreeSet<String> = figures
        .iter()
        .filter_map(|f| f["id"].as_str().map(String::from))
        .collect();
    let missing: Vec<_> = expected_figures().difference(&ids).cloned().collect();
    assert!(
        missing.is_empty(),
        "figures absent from compare.json: {missing:?}"
    );
    for f in figures {
        let id = f["id"].as_str().unwrap_or("?");
        for side in ["base", "head"] {
            let n = f[side].as_array().map_or(0, Vec::len);
            assert!(n > 0, "{id}: no {side} samples");
        }
        assert_eq!(f["pairs"], 1, "{id}: one round pair");
        assert!(f["difference"].is_object(), "{id}: no difference computed");
        assert_eq!(
            f["verdict"], "inconclusive",
            "{id}: one pair gives no verdict"
        );
        assert!(
            text.contains(&format!("inconclusive {id}: ")),
            "the summary names {id} as without a verdict:\n{text}"
        );
    }
    let junit = std::fs::read_to_string(out.join("junit.xml")).expect("junit.xml");
    assert_eq!(
        junit.matches("<testcase").count(),
        figures.len(),
        "one JUnit testcase per figure"
    );

    // Each round's own evidence: n and intervals per arm and level.
    let rounds = comparison["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 2);
    for round in rounds {
        let source = round["source"].as_str().expect("round source");
        let results = read_json(Path::new(source));
        let perf = &results["perf"];
        for arm in perf["arms"].as_array().expect("arms") {
            let name = &arm["arm"];
            assert_eq!(arm["n"], REPEATS, "{source}: {name}: n");
            let i = &arm["ttft_p50_interval_ms"];
            let number = |v: &Value, what: &str| {
                v.as_f64()
                    .unwrap_or_else(|| panic!("{source}: {name}: no {what} ({v})"))
            };
            let (lo, hi) = (
                number(&i["lo"], "p50 interval"),
                number(&i["hi"], "p50 interval"),
            );
            let p50 = number(&arm["ttft_ms"]["p50"], "TTFT p50");
            assert!(
                lo <= p50 && p50 <= hi,
                "{source}: {name}: p50 {p50} outside its interval [{lo}, {hi}]"
            );
        }
        let sweep = perf["sweep"].as_array().expect("sweep");
        assert_eq!(sweep.len(), LEVELS.len(), "{source}: sweep levels");
        for level in sweep {
            let i = &level["request_throughput_interval_per_s"];
            assert!(
                i["lo"].is_f64() && i["hi"].is_f64(),
                "{source}: level {} has no throughput interval",
                level["concurrency"]
            );
        }
    }
}
