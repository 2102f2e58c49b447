//! `kvcr-e2e gate`: a KVCR build's functional lanes, then `compare`
//! against its base; one summary, one JUnit file, one exit code.

use std::path::Path;
use std::process::ExitCode;

use super::USAGE;

/// `kvcr-e2e gate …`; `args` follow `gate`.
pub fn gate(repo_root: &Path, args: &[String]) -> ExitCode {
    use crate::gate;
    let lanes = crate::lanes::LANES;
    let targets: Vec<&str> = lanes.iter().map(|l| l.target).collect();
    let gateable: Vec<&str> = lanes
        .iter()
        .filter(|l| gate::takes_a_build(l))
        .map(|l| l.target)
        .collect();
    let parsed = match gate::GateArgs::parse(args, &targets, &gateable).and_then(|p| {
        let lanes = super::compare::lane_trials();
        p.compare.check_trials(&lanes).map(|()| p)
    }) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: gate: {e}\n\n{USAGE}");
            return ExitCode::from(crate::compare::EXIT_NOT_COMPARED);
        }
    };
    let out = parsed.out.clone().unwrap_or_else(|| {
        let stamp = crate::mutants::driver::stamp(time::OffsetDateTime::now_utc());
        repo_root.join("target/gate").join(stamp)
    });
    let session = match gate::hold_machine(repo_root, &parsed.harness, &out) {
        Ok(session) => session,
        Err(e) => {
            eprintln!("error: gate: {e}");
            return ExitCode::from(crate::compare::EXIT_NOT_COMPARED);
        }
    };
    let report = match gate::LocalSteps::prepare(repo_root, &parsed) {
        Ok(mut steps) => Some(gate::run_gate(&mut steps, &parsed, &out)),
        Err(e) => {
            eprintln!("error: gate: {e} (no lane ran)");
            None
        }
    };
    if let Some(session) = session {
        session.end();
        crate::proc::reaper::finish();
    }
    let Some(report) = report else {
        return ExitCode::from(crate::compare::EXIT_NOT_COMPARED);
    };
    println!();
    print!("{}", gate::render_summary(&report));
    match gate::write_outputs(&report, &out) {
        Ok(written) => {
            for path in [&written.json, &written.junit, &written.page] {
                println!("{}", path.display());
            }
        }
        Err(e) => eprintln!("error: gate: {e}"),
    }
    ExitCode::from(report.verdict().exit_code())
}
