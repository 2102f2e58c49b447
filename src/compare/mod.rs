//! Comparing two KVCR builds: interleaved rounds, bootstrap intervals of
//! head − base per figure, a verdict per figure, and the writers over the
//! result (`compare.json`, JUnit, `compare.html`, the terminal summary).
//! The statistics it judges with are [`crate::stats`].
//!
//! ```no_run
//! use kvcr_e2e::compare::{self, Collector, RoundPlan, Rule, RunResults};
//! use kvcr_e2e::stats::Bootstrap;
//! # fn run_phase1(_: compare::Build) -> std::path::PathBuf { todo!() }
//! # fn main() -> Result<(), compare::CompareError> {
//! let plan = RoundPlan::abba(6)?;                        // A B B A A B
//! let mut collector = Collector::default();
//! for round in plan.rounds() {
//!     let run_dir = run_phase1(round.build);              // TC-05 + TC-06 on that build
//!     let (results, file) = RunResults::read(&run_dir)?;
//!     collector.add_round(*round, &results, file.display().to_string());
//! }
//! let comparison = collector.compare(&Rule::default(), &Bootstrap::default());
//! compare::write_outputs(&comparison, "target/compare".as_ref())?;
//! print!("{}", compare::render_summary(&comparison));
//! std::process::exit(comparison.gate().exit_code().into());
//! # }
//! ```

mod cli;
mod comparison;
mod driver;
mod errors;
mod figures;
mod gate;
mod junit;
mod page;
mod rounds;
mod summary;

#[cfg(test)]
mod simulation;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::stats::Bootstrap;

pub use cli::CompareArgs;
pub use comparison::{
    largest_unexcluded_change, verdict, Collector, Comparison, Counts, FigureResult, Method,
    RoundRecord, Rule, Sample, Verdict, COMPARE_SCHEMA_VERSION, DEFAULT_MIN_PAIRS, PATH_SHARE,
};
pub use driver::{
    round_runs, run_compare, CompareDriveArgs, RoundRun, DEFAULT_ROUNDS, DEFAULT_TRIALS,
    DISK_TIER_TARGET,
};
pub use errors::CompareError;
pub use figures::{
    Better, Family, FigureSpec, FigureValues, Judged, RequestFault, RunInfo, RunResults,
};
pub use gate::{Gate, EXIT_NOT_COMPARED};
pub use junit::{junit_report, junit_xml, SUITE};
pub use page::render_page;
pub use rounds::{Build, Round, RoundPlan};
pub use summary::render_summary;

/// The files [`write_outputs`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// `compare.json`.
    pub json: PathBuf,
    /// `junit.xml`.
    pub junit: PathBuf,
    /// `compare.html`.
    pub page: PathBuf,
}

/// Writes `compare.json`, `junit.xml` and `compare.html` into `dir`
/// (created if needed).
pub fn write_outputs(c: &Comparison, dir: &Path) -> Result<Written, CompareError> {
    let write = |name: &str, text: &str| -> Result<PathBuf, CompareError> {
        let path = dir.join(name);
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| CompareError::Write {
                path: path.clone(),
                message: e.to_string(),
            })?;
        Ok(path)
    };
    let json = serde_json::to_string_pretty(c).map_err(|e| CompareError::Write {
        path: dir.join("compare.json"),
        message: e.to_string(),
    })?;
    let xml = junit_xml(c).map_err(|e| CompareError::Write {
        path: dir.join("junit.xml"),
        message: e.to_string(),
    })?;
    Ok(Written {
        json: write("compare.json", &json)?,
        junit: write("junit.xml", &xml)?,
        page: write("compare.html", &render_page(c)?)?,
    })
}

/// Compares existing phase1 runs: `base[i]` and `head[i]` form round pair
/// i (paths are run directories or their results.json). What
/// `kvcr-e2e compare-results` does. The runs must have started in the
/// order of the ABBA plan ([`check_interleaved`]).
pub fn compare_runs(
    base: &[PathBuf],
    head: &[PathBuf],
    rule: &Rule,
    bootstrap: &Bootstrap,
) -> Result<Comparison, CompareError> {
    if base.len() != head.len() || base.is_empty() {
        return Err(CompareError::Unpaired {
            base: base.len(),
            head: head.len(),
        });
    }
    let rule = rule.checked()?;
    if bootstrap.resamples == 0 {
        return Err(CompareError::Setting(
            "the bootstrap needs at least 1 resample (2000 by default)".into(),
        ));
    }
    let plan = RoundPlan::abba(2 * base.len() as u32)?;
    let (mut next_base, mut next_head) = (base.iter(), head.iter());
    let mut read = Vec::new();
    for round in plan.rounds() {
        let path = match round.build {
            Build::Base => next_base.next(),
            Build::Head => next_head.next(),
        };
        // The plan has exactly base.len() rounds of each build.
        let Some(path) = path else { continue };
        let (results, file) = RunResults::read(path)?;
        read.push((*round, results, file));
    }
    check_interleaved(&read)?;
    let mut collector = Collector::default();
    for (round, results, file) in &read {
        collector.add_round(*round, results, file.display().to_string());
    }
    Ok(collector.compare(&rule, bootstrap))
}

/// Refuses rounds whose runs did not start in the plan's order (ABBA…:
/// base 0, head 0, head 1, base 1, …), or that do not say when they
/// started: rounds run as a block of one build and then a block of the
/// other are no pairs (a drift of the machine between the blocks would pass
/// for a difference between the builds).
pub fn check_interleaved(rounds: &[(Round, RunResults, PathBuf)]) -> Result<(), CompareError> {
    let name = |(round, _, file): &(Round, RunResults, PathBuf)| {
        format!(
            "round {} ({}, {})",
            round.index,
            round.build.as_str(),
            file.display()
        )
    };
    let mut earlier: Option<(&(Round, RunResults, PathBuf), time::OffsetDateTime)> = None;
    for r in rounds {
        let started = r.1.run.started().ok_or_else(|| CompareError::Interleave {
            message: format!(
                "{} has no readable run.started_at, so its place in time is unknown",
                name(r)
            ),
        })?;
        if let Some((before, at)) = earlier {
            if started <= at {
                return Err(CompareError::Interleave {
                    message: format!(
                        "{} started at {}, not after {} at {}",
                        name(r),
                        r.1.run.started_at.as_deref().unwrap_or_default(),
                        name(before),
                        before.1.run.started_at.as_deref().unwrap_or_default()
                    ),
                });
            }
        }
        earlier = Some((r, started));
    }
    Ok(())
}
