//! `kvcr-e2e compare-results` (two builds' runs compared) and `kvcr-e2e
//! compare` (a lane's perf trials run on two builds, ABBA, and compared).

use std::path::Path;
use std::process::ExitCode;

use super::USAGE;

/// `kvcr-e2e compare-results …`; `args` follow `compare-results`.
pub fn compare_results(repo_root: &Path, args: &[String]) -> ExitCode {
    use crate::compare;
    let parsed = match compare::CompareArgs::parse(args, repo_root.join("target/compare")) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: compare-results: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let compared =
        compare::compare_runs(&parsed.base, &parsed.head, &parsed.rule, &parsed.bootstrap)
            .and_then(|c| compare::write_outputs(&c, &parsed.out).map(|w| (c, w)));
    report_comparison("compare-results", compared)
}

/// Prints a comparison's summary and files; the exit code is the
/// comparison's conclusion (`compare::Gate`), or 2 when nothing was compared.
pub fn report_comparison<E: std::fmt::Display>(
    command: &str,
    compared: Result<(crate::compare::Comparison, crate::compare::Written), E>,
) -> ExitCode {
    match compared {
        Ok((comparison, written)) => {
            print!("{}", crate::compare::render_summary(&comparison));
            for path in [&written.json, &written.junit, &written.page] {
                println!("{}", path.display());
            }
            ExitCode::from(comparison.gate().exit_code())
        }
        Err(e) => {
            eprintln!("error: {command}: {e}");
            ExitCode::from(crate::compare::EXIT_NOT_COMPARED)
        }
    }
}

/// `kvcr-e2e compare …`; `args` follow `compare`.
pub fn compare(repo_root: &Path, args: &[String]) -> ExitCode {
    use crate::compare;
    let targets: Vec<&str> = crate::lanes::LANES.iter().map(|l| l.target).collect();
    let parsed = match compare::CompareDriveArgs::parse(args, &targets)
        .and_then(|p| p.check_trials(&lane_trials()).map(|()| p))
    {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: compare: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let out = parsed.out.clone().unwrap_or_else(|| {
        let stamp = crate::mutants::driver::stamp(time::OffsetDateTime::now_utc());
        repo_root.join("target/compare").join(stamp)
    });
    report_comparison("compare", compare::run_compare(repo_root, &parsed, &out))
}

/// Every lane's test target and trial names, for
/// [`crate::compare::CompareDriveArgs::check_trials`].
pub fn lane_trials() -> Vec<(&'static str, Vec<String>)> {
    crate::lanes::LANES
        .iter()
        .map(|lane| {
            let names = lane
                .trials
                .trials()
                .iter()
                .map(|t| t.trial_name())
                .collect();
            (lane.target, names)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::lane_trials;
    use crate::compare::CompareDriveArgs;

    #[test]
    fn the_documented_comparisons_pass_the_trial_check_and_tc12_on_phase1_does_not() {
        let lanes = lane_trials();
        let targets: Vec<&str> = lanes.iter().map(|(t, _)| *t).collect();
        let check = |line: &str| {
            let args: Vec<String> = line.split_whitespace().map(String::from).collect();
            CompareDriveArgs::parse(&args, &targets)
                .unwrap()
                .check_trials(&lanes)
        };
        for line in [
            "--base pypi:0.1.1 --head pypi:0.1.1",
            "--base pypi:0.1.1 --head pypi:0.1.1 --target phase2_g3",
            "--base pypi:0.1.1 --head pypi:0.1.1 --target workload",
            "--base pypi:0.1.1 --head pypi:0.1.1 --profile scale --cases TC-06",
            "--base pypi:0.1.1 --head pypi:0.1.1 --trials TC-06,TC-05::dram_hit",
        ] {
            assert_eq!(check(line), Ok(()), "{line}");
        }
        let err = check("--base pypi:0.1.1 --head pypi:0.1.1 --profile phase2-g3 --cases TC-12")
            .unwrap_err();
        assert!(
            err.contains("no trial of the phase1 lane") && err.contains("phase2_g3"),
            "{err}"
        );
    }
}
