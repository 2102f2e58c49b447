//! `kvcr-e2e mutants`: the curated KVCR mutants, each on a fresh stack.

use std::path::Path;
use std::process::ExitCode;

use super::USAGE;

/// `kvcr-e2e mutants …`; `args` follow `mutants`.
pub fn mutants(repo_root: &Path, args: &[String]) -> ExitCode {
    use crate::mutants;
    let parsed = match mutants::MutantsArgs::parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: mutants: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let lane = match &parsed.generated {
        Some(generated) => mutants::generated::run_generated(repo_root, &parsed, generated),
        None => mutants::run_lane(repo_root, &parsed),
    };
    let (report, out) = match lane {
        Ok(done) => done,
        // An unknown `--only` name or a mutant of another lane: usage.
        Err(mutants::driver::LaneError::Usage(e)) => {
            eprintln!("error: mutants: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
        // The unmutated build failed its trials: what ran is written, no score.
        Err(mutants::driver::LaneError::NotScored(e)) => {
            eprintln!("error: mutants: {e}");
            return ExitCode::from(3);
        }
        Err(e) => {
            eprintln!("error: mutants: {e}");
            return ExitCode::FAILURE;
        }
    };
    if parsed.generated.as_ref().is_some_and(|g| g.draw_only) {
        println!("drawn, not run: {}", out.join("sample.json").display());
        return ExitCode::SUCCESS;
    }
    println!();
    print!("{}", report.table());
    match report.write(&out) {
        Ok(written) => {
            println!("{}", written.json.display());
            println!("{}", written.report.display());
        }
        Err(e) => {
            eprintln!("error: mutants: {e}");
            return ExitCode::FAILURE;
        }
    }
    if parsed.generated.is_some() {
        // No expectations: list the survivors for reading; exit 0 when
        // every mutant reached a verdict.
        let survivors: Vec<&str> = report
            .mutants
            .iter()
            .filter(|r| r.result == mutants::MutantResult::Survived)
            .map(|r| r.name.as_str())
            .collect();
        println!(
            "generated mutants have no expectation (`met` = a verdict was reached); {} survivor(s) to read against their diffs in {}:",
            survivors.len(),
            out.join("diffs").display()
        );
        for name in survivors {
            println!("  {name}");
        }
    }
    if report.all_met {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
