//! The short mutation set: a few curated KVCR mutants, one of each class the
//! suite claims to check, each run through the mutants driver
//! (`kvcr_e2e::mutants::run_lane`, as `kvcr-e2e mutants --only NAME` does)
//! on a fresh stack and asserted killed by a trial its header's
//! `caught-by` names, with its header's `message`.
//!
//! ```sh
//! cargo test --test kvcr_mutants_short                     # the CPU set, ~8 stacks one after another
//! cargo test --test kvcr_mutants_short -- cpu::hints       # one mutant
//! cargo test --test kvcr_mutants_short -- --ignored vllm:: # the vLLM set (heavy: real vLLM workers)
//! ```
//!
//! Each mutant is one trial; trials run one at a time (one stack at a
//! time). Like every batch of the driver, a trial first runs its control:
//! the unmutated build with the same trials on the same target, which must
//! pass, or the trial fails without running the mutant (a kill is only a
//! kill beside a green base build). Evidence (the driver's `mutants.json`, `mutants.html`, each
//! child's run directory and log) goes to
//! `target/phase1/lanes/kvcr_mutants_short/<pid>-<time>/<lane>/<mutant>/`.

#[path = "../lanes/mod.rs"]
mod lanes;

mod set;

use std::process::ExitCode;

use kvcr_e2e::engine::Kind;
use kvcr_e2e::mutants::{self, MutantResult, MutantRow, MutantsArgs};
use libtest_mimic::{Arguments, Failed, Trial};

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // One stack at a time, whatever --test-threads says.
    args.test_threads = Some(1);
    let evidence = std::sync::OnceLock::new();
    let evidence = std::sync::Arc::new(evidence);
    let mut trials = vec![Trial::test("set::well_formed", || {
        let all = mutants::curated::load_all(&lanes::root().join(mutants::MUTANTS_DIR))?;
        let mut problems = set::problems(&all);
        let doc = lanes::root().join("docs/kvcr-under-test.md");
        let doc = std::fs::read_to_string(&doc).map_err(|e| format!("{}: {e}", doc.display()))?;
        problems.extend(set::doc_problems(&doc));
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n").into())
        }
    })];
    for (lane, set, ignored) in [(Kind::Cpu, set::CPU, false), (Kind::Vllm, set::VLLM, true)] {
        for entry in set {
            let evidence = evidence.clone();
            let name = format!("{}::{}::{}", lane.as_str(), entry.class_key, entry.mutant);
            let mutant = entry.mutant;
            let trial = Trial::test(name, move || {
                let base = evidence
                    .get_or_init(|| lanes::evidence_dir("kvcr_mutants_short"))
                    .clone();
                run_mutant(lane, mutant, &base)
            })
            .with_ignored_flag(ignored);
            trials.push(trial);
        }
    }
    libtest_mimic::run(&args, trials).exit_code()
}

/// Runs one mutant through the driver and checks it was killed as its
/// header says.
fn run_mutant(lane: Kind, mutant: &str, base: &std::path::Path) -> Result<(), Failed> {
    let args = MutantsArgs {
        only: Some(vec![mutant.to_string()]),
        engine: lane,
        stack: None,
        out: Some(base.join(lane.as_str()).join(mutant)),
        record: None,
        generated: None,
        harness: Vec::new(),
    };
    // A red control is an error of run_lane (nothing is a kill then).
    let (report, out) = mutants::run_lane(lanes::root(), &args)?;
    if report.control.is_empty() || !report.scored() {
        return Err(format!(
            "the batch has no green control: {}",
            report.refused.as_deref().unwrap_or("none ran")
        )
        .into());
    }
    let [row] = report.mutants.as_slice() else {
        return Err(format!("the driver ran {} mutants, not 1", report.mutants.len()).into());
    };
    let caught_by = caught_by(mutant)?;
    verdict(row, &caught_by).map_err(|why| {
        Failed::from(format!(
            "{why}\n  driver output: {}\n  child log: {}\n  command: {}",
            out.display(),
            row.child.log.display(),
            row.child.command
        ))
    })
}

/// The header's `caught-by` trials of `mutant`.
fn caught_by(mutant: &str) -> Result<Vec<String>, String> {
    let all = mutants::curated::load_all(&lanes::root().join(mutants::MUTANTS_DIR))?;
    all.into_iter()
        .find(|m| m.header.name == mutant)
        .map(|m| m.header.caught_by)
        .ok_or_else(|| format!("no curated mutant `{mutant}`"))
}

/// `Ok` when `row` is a kill by one of `caught_by`, whose message holds the
/// header's, of the mutated build (the run reported a kvcr built from the
/// mutant's diff).
fn verdict(row: &MutantRow, caught_by: &[String]) -> Result<(), String> {
    let want = row.expected_message.as_deref().unwrap_or("-");
    let (failed, message) = match &row.result {
        MutantResult::Killed {
            failed, message, ..
        } => (failed, message),
        MutantResult::Survived => {
            return Err(format!(
                "{} SURVIVED: every trial passed ({}); expected a kill by {} with \"{want}\"",
                row.name,
                row.trials.join(", "),
                caught_by.join(" or ")
            ))
        }
        MutantResult::Broken { why } => {
            return Err(format!("{} is BROKEN (no verdict): {why}", row.name))
        }
        MutantResult::Flaky { .. } => {
            return Err(format!(
                "{} is FLAKY: its kill did not repeat ({})",
                row.name,
                row.result.word()
            ))
        }
    };
    if !failed.iter().any(|t| caught_by.contains(t)) {
        return Err(format!(
            "{} was killed by {} only, not by its header's {}: {message}",
            row.name,
            failed.join(", "),
            caught_by.join(" or ")
        ));
    }
    if !row.met {
        return Err(format!(
            "{} was killed, but no failed trial's message contains its header's \"{want}\" \
             (the header is out of date, or another check caught it); first message: {message}",
            row.name
        ));
    }
    let diff = format!("{}.diff", row.name);
    match &row.kvcr {
        Some(kvcr) if kvcr.spec.contains(&diff) => Ok(()),
        Some(kvcr) => Err(format!(
            "{} ran kvcr `{}`, not a build of {diff}",
            row.name, kvcr.spec
        )),
        None => Err(format!(
            "{}: the run reported no KVCR build (absent is not the mutant)",
            row.name
        )),
    }
}
