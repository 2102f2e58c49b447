//! The lane's result: one row per mutant, the scores, and its writers
//! (`mutants.json`, `mutants.html`, the terminal table).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::classify::MutantResult;
use super::control::ControlRun;
use super::generated::coverage::{self, CoverageRunRecord, SkippedLane};
use super::header::Expect;
use crate::drive::{ChildExit, KvcrSeen, ReadRun};

/// Version of the mutants.json layout.
pub const MUTANTS_SCHEMA_VERSION: u32 = 2;

/// One mutant's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutantRow {
    pub name: String,
    pub class: String,
    /// Whether Phase 1 claims to check this class (it counts in the score).
    pub phase1_claims_it: bool,
    /// `killed` or `survives`.
    pub expect: String,
    /// The header's message (a killed mutant's).
    pub expected_message: Option<String>,
    pub target: String,
    pub trials: Vec<String>,
    pub result: MutantResult,
    /// Whether the result is what the header expects.
    pub met: bool,
    #[serde(flatten)]
    pub child: ChildEvidence,
    /// The KVCR build the run reported (the patched one).
    pub kvcr: Option<KvcrSeen>,
    /// A survivor its header reads as equivalent (no verdict can see it):
    /// left out of the score's denominator.
    #[serde(default)]
    pub equivalent: bool,
    /// A generated kill's second run, which must fail the same way for the
    /// kill to count (else the result is `flaky`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<Rerun>,
    /// A generated mutant's lanes it passed, in order, each with its run:
    /// the lanes before `target` for one that ended there, every lane of
    /// the sequence (`target`, the last, included) for a survivor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed: Vec<PassedLane>,
    /// A generated mutant's lanes of the sequence it did not run
    /// (`--coverage`): their coverage run never executed its line. A
    /// survivor that skipped every lane ran no stack: no `target`, no
    /// trials, no command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_by_coverage: Vec<SkippedLane>,
}

/// A lane of a generated mutant's sequence that it passed: every trial
/// there ran and passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassedLane {
    pub target: String,
    pub trials: Vec<String>,
    #[serde(flatten)]
    pub child: ChildEvidence,
    /// The KVCR build the run reported (the patched one).
    pub kvcr: Option<KvcrSeen>,
}

impl PassedLane {
    /// The lane of `row`, a run that passed it.
    pub fn of(row: &MutantRow) -> PassedLane {
        PassedLane {
            target: row.target.clone(),
            trials: row.trials.clone(),
            child: row.child.clone(),
            kvcr: row.kvcr.clone(),
        }
    }
}

impl MutantRow {
    /// Whether the row is a generated mutant's (it has no expectation).
    pub fn is_generated(&self) -> bool {
        self.expect == NO_EXPECTATION
    }

    /// The test targets the mutant passed, in order.
    pub fn lanes_passed(&self) -> Vec<&str> {
        self.passed.iter().map(|p| p.target.as_str()).collect()
    }

    /// The lanes it skipped by coverage, in the sequence's order.
    pub fn lanes_skipped(&self) -> Vec<&str> {
        self.skipped_by_coverage
            .iter()
            .map(|s| s.lane.as_str())
            .collect()
    }

    /// A generated survivor that ran no lane: every lane of its sequence
    /// was skipped by coverage, and no stack started.
    pub fn ran_no_lane(&self) -> bool {
        !self.skipped_by_coverage.is_empty()
            && self.passed.is_empty()
            && self.child.command.is_empty()
    }

    /// Why a row skipped lanes, for the table and the score file:
    /// `kvcr/core.py line 181 ran in none of …` for one that ran no lane,
    /// `phase2 (… not run in its coverage run)` otherwise; `None` without.
    pub fn coverage_note(&self) -> Option<String> {
        match (self.skipped_by_coverage.is_empty(), self.ran_no_lane()) {
            (true, _) => None,
            (false, true) => Some(coverage::none_ran_words(&self.skipped_by_coverage)),
            (false, false) => Some(format!(
                "skipped by coverage: {}",
                coverage::skipped_words(&self.skipped_by_coverage)
            )),
        }
    }

    /// The mutant's time in all: each lane's run, and a kill's second run.
    pub fn wall_s(&self) -> f64 {
        let survivor = matches!(self.result, MutantResult::Survived) && !self.passed.is_empty();
        // A survivor's own run is its last passed lane's.
        let own = if survivor { 0.0 } else { self.child.wall_s };
        own + self.passed.iter().map(|p| p.child.wall_s).sum::<f64>()
            + self.rerun.as_ref().map_or(0.0, |r| r.child.wall_s)
    }

    /// Where a generated mutant ended, for the table: `killed on phase2`,
    /// `passed phase1, phase2`; empty for a curated row.
    pub fn lane_words(&self) -> String {
        if !self.is_generated() {
            return String::new();
        }
        if self.ran_no_lane() {
            return format!(
                "no lane run: {}",
                coverage::none_ran_words(&self.skipped_by_coverage)
            );
        }
        let skipped = match self.skipped_by_coverage.is_empty() {
            true => String::new(),
            false => format!(
                "; skipped by coverage: {}",
                coverage::skipped_words(&self.skipped_by_coverage)
            ),
        };
        match &self.result {
            MutantResult::Survived => {
                format!("passed {}{skipped}", self.lanes_passed().join(", "))
            }
            other => {
                let passed = self.lanes_passed();
                let before = match (passed.is_empty(), skipped.is_empty()) {
                    (true, true) => String::new(),
                    (true, false) => format!(" ({})", &skipped[2..]),
                    (false, _) => format!(" (passed {}{skipped})", passed.join(", ")),
                };
                format!("{} on {}{before}", other.word(), self.target)
            }
        }
    }
}

/// The evidence of a kill's second run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rerun {
    pub result: MutantResult,
    #[serde(flatten)]
    pub child: ChildEvidence,
}

/// What one child run left behind: a mutant's, its second run's or a
/// control's. Flattened into each, so the JSON keeps the fields inline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildEvidence {
    /// The child's command line.
    pub command: String,
    /// The child's run directory, when it made one.
    pub run_dir: Option<PathBuf>,
    /// The child's output.
    pub log: PathBuf,
    pub exit_code: Option<i32>,
    pub wall_s: f64,
}

impl ChildEvidence {
    /// The evidence of a child run by `command`, its output in `log`, ended
    /// as `exit`, whose run directory read as `read` (when it could).
    pub fn new(command: String, read: Option<&ReadRun>, log: PathBuf, exit: &ChildExit) -> Self {
        Self {
            command,
            run_dir: read.map(|r| r.root.clone()),
            log,
            exit_code: exit.code,
            wall_s: exit.wall.as_secs_f64(),
        }
    }
}

/// Counts of one group of mutants. The score is killed / judged, where
/// judged = killed + survived + flaky: a flaky kill is not a kill, broken
/// mutants (no verdict) and survivors read as equivalent are left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Score {
    pub killed: u32,
    /// Survivors not read as equivalent.
    pub survived: u32,
    /// Kills that did not repeat on a second run.
    pub flaky: u32,
    /// No verdict; not in the score.
    pub broken: u32,
    /// Survivors whose header reads them as equivalent; not in the score.
    #[serde(default)]
    pub equivalent: u32,
}

impl Score {
    /// Counts `row`'s result.
    pub fn add(&mut self, row: &MutantRow) {
        match &row.result {
            MutantResult::Killed { .. } => self.killed += 1,
            MutantResult::Survived if row.equivalent => self.equivalent += 1,
            MutantResult::Survived => self.survived += 1,
            MutantResult::Flaky { .. } => self.flaky += 1,
            MutantResult::Broken { .. } => self.broken += 1,
        }
    }

    /// The sum of two groups.
    pub fn plus(self, other: Score) -> Score {
        Score {
            killed: self.killed + other.killed,
            survived: self.survived + other.survived,
            flaky: self.flaky + other.flaky,
            broken: self.broken + other.broken,
            equivalent: self.equivalent + other.equivalent,
        }
    }

    /// The denominator: killed + survived + flaky.
    pub fn judged(&self) -> u32 {
        self.killed + self.survived + self.flaky
    }

    /// killed / judged; `None` when nothing was judged.
    pub fn rate(&self) -> Option<f64> {
        let judged = self.judged();
        (judged > 0).then(|| f64::from(self.killed) / f64::from(judged))
    }

    /// `26/30 killed (87 %), 1 flaky (not a kill), 1 broken (not scored)`.
    pub fn words(&self) -> String {
        let rate = match self.rate() {
            Some(r) => format!(" ({:.0} %)", r * 100.0),
            None => String::new(),
        };
        let mut tail = String::new();
        for (n, what) in [
            (self.flaky, "flaky (not a kill)"),
            (self.broken, "broken (not scored)"),
            (self.equivalent, "equivalent (not scored)"),
        ] {
            if n > 0 {
                tail.push_str(&format!(", {n} {what}"));
            }
        }
        format!("{}/{} killed{rate}{tail}", self.killed, self.judged())
    }
}

/// The whole lane.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneReport {
    pub schema_version: u32,
    pub started_at: String,
    /// `cpu` or `vllm`.
    pub engine: String,
    /// The user's harness flags, given to every child.
    pub harness_flags: Vec<String>,
    /// A generated batch's lanes, in the order each mutant runs them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<Vec<String>>,
    /// A generated batch's coverage runs (`--coverage`): a mutant skipped
    /// each lane whose run never executed its line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub coverage_runs: Vec<CoverageRunRecord>,
    /// The unmutated base build on each target, run before any mutant.
    pub control: Vec<ControlRun>,
    /// Why the batch is not scored (a control not green), when it is not.
    pub refused: Option<String>,
    pub mutants: Vec<MutantRow>,
    /// The classes Phase 1 claims to check.
    pub score_phase1_claimed: Score,
    /// Pool pressure, lifecycle and slowdowns, beyond Phase 1's claims (the
    /// phase2 cases and `kvcr-e2e compare` look at them).
    pub score_not_yet_claimed: Score,
    /// Every mutant met its header's `expect`.
    pub all_met: bool,
}

impl LaneReport {
    /// The report over `rows`, after `control`.
    pub fn new(
        started_at: String,
        engine: &str,
        harness_flags: Vec<String>,
        control: Vec<ControlRun>,
        rows: Vec<MutantRow>,
    ) -> Self {
        let (mut claimed, mut other) = (Score::default(), Score::default());
        for row in &rows {
            match row.phase1_claims_it {
                true => claimed.add(row),
                false => other.add(row),
            }
        }
        let refused = refusal(&control);
        LaneReport {
            schema_version: MUTANTS_SCHEMA_VERSION,
            started_at,
            engine: engine.to_string(),
            harness_flags,
            lanes: None,
            coverage_runs: Vec::new(),
            all_met: refused.is_none() && rows.iter().all(|r| r.met),
            control,
            refused,
            mutants: rows,
            score_phase1_claimed: claimed,
            score_not_yet_claimed: other,
        }
    }

    /// The report of a generated batch whose mutants run `lanes` in order.
    pub fn with_lanes(mut self, lanes: &[&str]) -> Self {
        self.lanes = Some(lanes.iter().map(|l| l.to_string()).collect());
        self
    }

    /// The report of a generated batch guided by `runs` (`--coverage`).
    pub fn with_coverage(mut self, runs: &[CoverageRunRecord]) -> Self {
        self.coverage_runs = runs.to_vec();
        self
    }

    /// Both groups together.
    pub fn score_all(&self) -> Score {
        self.score_phase1_claimed.plus(self.score_not_yet_claimed)
    }

    /// Whether the batch may be scored: a control ran and each was green.
    pub fn scored(&self) -> bool {
        self.refused.is_none()
    }

    /// The terminal table and the scores.
    pub fn table(&self) -> String {
        let mut lines = vec![format!(
            "{:<40} {:<26} {:<9} {:<9} {:<4} {:>6}  {}",
            "mutant", "class", "expect", "result", "met", "s", "trial / why"
        )];
        for row in &self.mutants {
            let detail = match &row.result {
                MutantResult::Killed {
                    trial,
                    message_matches,
                    ..
                } => match message_matches {
                    true => trial.clone(),
                    false => format!("{trial} (message lacks the header's)"),
                },
                MutantResult::Survived if row.equivalent => "equivalent (its reading)".into(),
                MutantResult::Survived => String::new(),
                MutantResult::Broken { why } => why.chars().take(100).collect(),
                MutantResult::Flaky { first, second } => {
                    format!("did not repeat: {}; then {}", short(first), short(second))
                }
            };
            let detail = match (row.is_generated(), &row.result) {
                (false, _) => detail,
                (true, MutantResult::Survived) => row.lane_words(),
                (true, _) if row.passed.is_empty() => format!("{}: {detail}", row.target),
                (true, _) => format!(
                    "{} (after {}): {detail}",
                    row.target,
                    row.lanes_passed().join(", ")
                ),
            };
            let detail = match (row.is_generated(), &row.result) {
                (true, MutantResult::Survived) | (false, _) => detail,
                (true, _) => match row.coverage_note() {
                    Some(note) => format!("{detail} [{note}]"),
                    None => detail,
                },
            };
            lines.push(format!(
                "{:<40} {:<26} {:<9} {:<9} {:<4} {:>6.0}  {}",
                row.name,
                row.class,
                row.expect,
                row.result.word(),
                if row.met { "yes" } else { "NO" },
                row.wall_s(),
                detail
            ));
        }
        lines.push(String::new());
        for control in &self.control {
            lines.push(format!("control (unmutated build): {}", control.words()));
        }
        if let Some(lanes) = &self.lanes {
            lines.push(format!(
                "lanes, in order (each mutant until one does not pass): {}",
                lanes.join(" → ")
            ));
        }
        for run in &self.coverage_runs {
            lines.push(format!(
                "coverage run of {} (a mutant skips it when its line did not run there): {}",
                run.lane,
                run.run_dir.display()
            ));
        }
        if let Some(why) = &self.refused {
            lines.push(format!("NOT SCORED: {why}"));
            return lines.join("\n") + "\n";
        }
        lines.push(format!(
            "score (classes Phase 1 claims to check): {}",
            self.score_phase1_claimed.words()
        ));
        lines.push(format!(
            "pool pressure, lifecycle, slowdowns (beyond Phase 1; counted apart): {}",
            self.score_not_yet_claimed.words()
        ));
        lines.push(format!("all mutants: {}", self.score_all().words()));
        let unmet = self.mutants.iter().filter(|r| !r.met).count();
        let generated =
            !self.mutants.is_empty() && self.mutants.iter().all(|r| r.expect == NO_EXPECTATION);
        lines.push(match (generated, unmet) {
            (true, 0) => "generated mutants (no expectation): every one reached a verdict".into(),
            (true, n) => format!("generated mutants (no expectation): {n} broken, no verdict"),
            (false, 0) => "every mutant met its header's expect".to_string(),
            (false, n) => format!("{n} mutant(s) did not meet their header's expect"),
        });
        lines.join("\n") + "\n"
    }

    /// The lane's section of its report page: the scores, and per mutant
    /// its class, what its header expects, the outcome, the killing trial
    /// and its message, and links to its run (relative to `base`, the
    /// lane's output directory, where the run lies under it).
    pub fn section(&self, base: &Path) -> String {
        let link = |path: &Path| {
            esc(&path
                .strip_prefix(base)
                .unwrap_or(path)
                .display()
                .to_string())
        };
        // A generated batch's lane sequence adds a row's lane and the lanes
        // it passed.
        let sequence = self.lanes.is_some();
        let mut rows = String::new();
        for row in &self.mutants {
            let flaky;
            let (trial, message) = match &row.result {
                MutantResult::Killed { trial, message, .. } => (trial.as_str(), message.as_str()),
                MutantResult::Broken { why } => ("", why.as_str()),
                MutantResult::Survived => match row.coverage_note() {
                    Some(note) => {
                        flaky = note;
                        ("", flaky.as_str())
                    }
                    None => ("", ""),
                },
                MutantResult::Flaky { first, second } => {
                    flaky = format!(
                        "did not repeat: first run {}; second run {}",
                        short(first),
                        short(second)
                    );
                    ("", flaky.as_str())
                }
            };
            let rerun = row
                .rerun
                .as_ref()
                .map(|r| {
                    let run = r
                        .child
                        .run_dir
                        .as_ref()
                        .map(|d| {
                            format!(" <a href=\"{}\">re-run</a>", link(&d.join("report.html")))
                        })
                        .unwrap_or_default();
                    format!("{run} <a href=\"{}\">re-run log</a>", link(&r.child.log))
                })
                .unwrap_or_default();
            let run = row
                .child
                .run_dir
                .as_ref()
                .map(|d| format!("<a href=\"{}\">run</a>", link(&d.join("report.html"))))
                .unwrap_or_default();
            // A generated mutant's passed lanes, each with its run and log
            // (a survivor's last one is the row's own run).
            let survivor = matches!(row.result, MutantResult::Survived);
            let earlier: String = row
                .passed
                .iter()
                .take(row.passed.len() - usize::from(survivor && !row.passed.is_empty()))
                .map(|p| {
                    let run = p
                        .child
                        .run_dir
                        .as_ref()
                        .map(|d| {
                            format!(
                                " <a href=\"{}\">{} run</a>",
                                link(&d.join("report.html")),
                                esc(&p.target)
                            )
                        })
                        .unwrap_or_default();
                    format!(
                        "{run} <a href=\"{}\">{} log</a>",
                        link(&p.child.log),
                        esc(&p.target)
                    )
                })
                .collect();
            rows.push_str(&format!(
                "<tr class=\"{met}\"><td><code>{name}</code></td><td>{class}</td><td>{expect}</td>\
                 <td>{result}</td><td>{met_word}</td>{lane}<td><code>{trial}</code></td><td>{message}</td>\
                 <td>{expected}</td>{passed}<td class=\"num\">{wall:.0}</td><td>{evidence}</td></tr>\n",
                met = if row.met { "met" } else { "unmet" },
                name = esc(&row.name),
                class = esc(&row.class),
                expect = esc(&row.expect),
                result = row.result.word(),
                met_word = if row.met { "yes" } else { "NO" },
                trial = esc(trial),
                message = esc(message),
                expected = esc(row.expected_message.as_deref().unwrap_or("")),
                lane = match sequence {
                    true => format!("<td>{}</td>", esc(&row.target)),
                    false => String::new(),
                },
                passed = match (sequence, row.skipped_by_coverage.is_empty()) {
                    (true, true) => format!("<td>{}</td>", esc(&row.lanes_passed().join(", "))),
                    (true, false) => format!(
                        "<td>{}{}<i>skipped by coverage:</i> {}</td>",
                        esc(&row.lanes_passed().join(", ")),
                        if row.passed.is_empty() { "" } else { "; " },
                        esc(&row.lanes_skipped().join(", "))
                    ),
                    (false, _) => String::new(),
                },
                wall = row.wall_s(),
                evidence = match row.ran_no_lane() {
                    true => "no stack: no lane could kill it".to_string(),
                    false => format!(
                        "{run} <a href=\"{}\">log</a>{rerun}{earlier}",
                        link(&row.child.log)
                    ),
                },
            ));
        }
        let mut controls = String::new();
        for c in &self.control {
            let run = c
                .child
                .run_dir
                .as_ref()
                .map(|d| format!("<a href=\"{}\">run</a> ", link(&d.join("report.html"))))
                .unwrap_or_default();
            controls.push_str(&format!(
                "<li class=\"{class}\">{words} ({wall:.0} s) {run}<a href=\"{log}\">log</a></li>\n",
                class = if c.is_green() { "met" } else { "unmet" },
                words = esc(&c.words()),
                wall = c.child.wall_s,
                log = link(&c.child.log),
            ));
        }
        let score = match &self.refused {
            Some(why) => format!("<p><b>Not scored</b>: {}</p>\n", esc(why)),
            None => format!(
                "<p>Score, classes Phase 1 claims to check: <b>{claimed}</b>. Pool pressure, lifecycle, slowdowns (beyond Phase 1, counted apart): {other}. All mutants: <b>{all}</b>.</p>\n",
                claimed = esc(&self.score_phase1_claimed.words()),
                other = esc(&self.score_not_yet_claimed.words()),
                all = esc(&self.score_all().words()),
            ),
        };
        format!(
            "<section id=\"mutants\"><h2>KVCR mutants ({engine} lane)</h2>\n\
             <p>Control, the unmutated build on each target before any mutant:</p><ul>\n{controls}</ul>\n{score}{sequence_note}{coverage_note}\
             <table><tr><th>mutant</th><th>class</th><th>expected</th><th>outcome</th><th>met</th>{lane_th}<th>killing trial</th>\
             <th>message</th><th>header's message</th>{passed_th}<th class=\"num\">s</th><th>evidence</th></tr>\n{rows}</table></section>\n",
            engine = esc(&self.engine),
            lane_th = if sequence { "<th>lane</th>" } else { "" },
            passed_th = if sequence { "<th>lanes passed</th>" } else { "" },
            sequence_note = self
                .lanes
                .as_ref()
                .map(|lanes| format!(
                    "<p>Each generated mutant ran these lanes in order, each on a fresh stack, \
                     and stopped at the first that did not pass: {}. <i>lane</i> is where it \
                     ended (a survivor's last lane); <i>lanes passed</i> are those it passed.</p>\n",
                    esc(&lanes.join(" → "))
                ))
                .unwrap_or_default(),
            coverage_note = match self.coverage_runs.is_empty() {
                true => String::new(),
                false => format!(
                    "<p>Coverage-guided (<code>--coverage</code>): a mutant skipped each lane whose \
                     coverage run of the base build never executed its line, and one that skipped \
                     every lane survived without a stack. Coverage runs: {}.</p>\n",
                    self.coverage_runs
                        .iter()
                        .map(|r| format!(
                            "{} <code>{}</code>",
                            esc(&r.lane),
                            esc(&r.run_dir.display().to_string())
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
        )
    }

    /// The lane's report page (`report.html`, and `mutants.html` for the
    /// links made before the page existed): its mutants section.
    pub fn html(&self, base: &Path) -> String {
        crate::evidence::render_page(
            &format!("kvcr-e2e mutants · {} lane", self.engine),
            &format!(
                "started {} · harness flags: {}",
                self.started_at,
                match self.harness_flags.is_empty() {
                    true => "none".to_string(),
                    false => self.harness_flags.join(" "),
                }
            ),
            &self.section(base),
        )
    }

    /// Writes mutants.json, report.html and mutants.html into `dir`.
    pub fn write(&self, dir: &Path) -> Result<Written, String> {
        let written = Written {
            json: dir.join("mutants.json"),
            report: dir.join("report.html"),
            page: dir.join("mutants.html"),
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&written.json, text))
            .map_err(|e| format!("cannot write {}: {e}", written.json.display()))?;
        let html = self.html(dir);
        for path in [&written.report, &written.page] {
            std::fs::write(path, &html)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok(written)
    }
}

/// Why a batch with `control` may not be scored, or `None` when it may.
pub fn refusal(control: &[ControlRun]) -> Option<String> {
    if control.is_empty() {
        return Some("no control ran: a score needs the unmutated build beside its mutants".into());
    }
    let bad: Vec<String> = control
        .iter()
        .filter(|c| !c.is_green())
        .map(ControlRun::words)
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "the control (the unmutated build, same trials) is not green, so no kill can be told from the base build: {}",
            bad.join("; ")
        )
    })
}

/// A result in a few words, for a flaky row.
fn short(result: &MutantResult) -> String {
    let text = match result {
        MutantResult::Killed { trial, message, .. } => format!("killed by {trial}: {message}"),
        other => other.word().to_string(),
    };
    text.chars().take(100).collect()
}

/// The `expect` of a generated mutant: it has no header.
pub const NO_EXPECTATION: &str = "unknown";

/// The files [`LaneReport::write`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub json: PathBuf,
    /// The lane's report page, with its mutants section.
    pub report: PathBuf,
    /// The same page under its older name.
    pub page: PathBuf,
}

/// The `expect` word of a header.
pub fn expect_word(expect: Expect) -> &'static str {
    match expect {
        Expect::Killed => "killed",
        Expect::Survives => "survives",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::control::{sample, ControlOutcome};

    fn green() -> ControlRun {
        sample(ControlOutcome::Green)
    }

    fn row(name: &str, claimed: bool, expect: &str, result: MutantResult, met: bool) -> MutantRow {
        MutantRow {
            name: name.into(),
            class: if claimed { "hints" } else { "slowdown" }.into(),
            phase1_claims_it: claimed,
            expect: expect.into(),
            expected_message: None,
            target: "phase1".into(),
            trials: vec!["TC-01::generation_correctness".into()],
            result,
            met,
            child: ChildEvidence {
                command: "phase1 --kvcr m.diff".into(),
                run_dir: Some("/out/runs/m/phase1/r".into()),
                log: "/out/runs/m/child.log".into(),
                exit_code: Some(101),
                wall_s: 12.0,
            },
            kvcr: None,
            equivalent: false,
            rerun: None,
            passed: vec![],
            skipped_by_coverage: vec![],
        }
    }

    fn killed(message: &str) -> MutantResult {
        MutantResult::Killed {
            trial: "TC-03::hinted_peer_transfer".into(),
            message: message.into(),
            message_matches: true,
            claims: Default::default(),
            failed: vec!["TC-03::hinted_peer_transfer".into()],
        }
    }

    fn report() -> LaneReport {
        LaneReport::new(
            "2026-12-01T16:00:00Z".into(),
            "cpu",
            vec![],
            vec![green()],
            vec![
                row("a", true, "killed", killed("bytes <0> & more"), true),
                row("b", true, "killed", killed("x"), true),
                row("c", true, "survives", MutantResult::Survived, true),
                row(
                    "d",
                    true,
                    "killed",
                    MutantResult::Broken {
                        why: "setup failed".into(),
                    },
                    false,
                ),
                row("e", false, "survives", MutantResult::Survived, true),
            ],
        )
    }

    #[test]
    fn scores_count_claimed_classes_apart_and_leave_broken_out() {
        let r = report();
        assert_eq!(
            r.score_phase1_claimed,
            Score {
                killed: 2,
                survived: 1,
                broken: 1,
                ..Score::default()
            }
        );
        assert_eq!(
            r.score_not_yet_claimed,
            Score {
                survived: 1,
                ..Score::default()
            }
        );
        assert_eq!(
            r.score_phase1_claimed.words(),
            "2/3 killed (67 %), 1 broken (not scored)"
        );
        assert_eq!(r.score_not_yet_claimed.words(), "0/1 killed (0 %)");
        assert_eq!(
            r.score_all().words(),
            "2/4 killed (50 %), 1 broken (not scored)"
        );
        assert!(r.table().contains("all mutants: 2/4 killed"));
        assert_eq!(Score::default().rate(), None);
        assert!(!r.all_met, "d is broken");
    }

    #[test]
    fn the_score_is_killed_over_killed_survived_and_flaky() {
        let flaky = MutantResult::Flaky {
            first: Box::new(killed("worker-A.1 gave up waiting to register")),
            second: Box::new(MutantResult::Survived),
        };
        let mut equivalent = row("eq", true, "survives", MutantResult::Survived, true);
        equivalent.equivalent = true;
        let r = LaneReport::new(
            "t".into(),
            "cpu",
            vec![],
            vec![green()],
            vec![
                row("k1", true, "killed", killed("a"), true),
                row("k2", true, "killed", killed("b"), true),
                row("k3", true, "killed", killed("c"), true),
                row("s", true, "killed", MutantResult::Survived, false),
                row("f", true, "unknown", flaky, false),
                row(
                    "b",
                    true,
                    "killed",
                    MutantResult::Broken { why: "x".into() },
                    false,
                ),
                equivalent,
            ],
        );
        let s = r.score_phase1_claimed;
        assert_eq!(
            s,
            Score {
                killed: 3,
                survived: 1,
                flaky: 1,
                broken: 1,
                equivalent: 1
            }
        );
        assert_eq!(s.judged(), 5, "killed + survived + flaky");
        assert_eq!(s.rate(), Some(0.6));
        assert_eq!(
            s.words(),
            "3/5 killed (60 %), 1 flaky (not a kill), 1 broken (not scored), 1 equivalent (not scored)"
        );
        assert_eq!(r.score_all(), s);
        assert!(
            r.table().contains("did not repeat: killed by TC-03"),
            "{}",
            r.table()
        );
    }

    #[test]
    fn a_batch_whose_control_is_not_green_or_absent_is_not_scored() {
        assert!(report().scored());
        for control in [
            vec![],
            vec![sample(ControlOutcome::Red {
                failed: vec![(
                    "TC-03::hinted_peer_transfer".into(),
                    "peer transfer reconciles: x".into(),
                )],
            })],
            vec![
                green(),
                sample(ControlOutcome::Broken {
                    why: "setup failed".into(),
                }),
            ],
        ] {
            let r = LaneReport::new(
                "t".into(),
                "cpu",
                vec![],
                control,
                vec![row("a", true, "killed", killed("x"), true)],
            );
            let why = r.refused.clone().expect("refused");
            assert!(!r.scored() && !r.all_met, "{why}");
            let table = r.table();
            assert!(table.contains("NOT SCORED"), "{table}");
            assert!(
                !table.contains("score (classes"),
                "no score is printed: {table}"
            );
            let page = r.html(Path::new("/out"));
            assert!(page.contains("<b>Not scored</b>"), "{page}");
        }
    }

    #[test]
    fn the_table_names_results_and_unmet_rows() {
        let table = report().table();
        assert!(
            table.contains("score (classes Phase 1 claims to check): 2/3 killed (67 %)"),
            "{table}"
        );
        let d = table.lines().find(|l| l.starts_with("d ")).unwrap();
        assert!(
            d.contains("broken") && d.contains("NO") && d.contains("setup failed"),
            "{d}"
        );
        assert!(table.contains("1 mutant(s) did not meet"), "{table}");
    }

    #[test]
    fn a_generated_table_says_there_is_no_expectation() {
        let mut r = report();
        for row in &mut r.mutants {
            row.expect = NO_EXPECTATION.into();
        }
        let table = r.table();
        assert!(
            table.contains("generated mutants (no expectation): 1 broken, no verdict"),
            "{table}"
        );
    }

    /// The child's evidence is flattened: its fields stand inline in the
    /// row and its re-run, in the order they always had, and read back.
    #[test]
    fn a_rows_child_evidence_is_inline_and_reads_back() {
        let mut r = row("m", true, "killed", killed("boom"), true);
        r.rerun = Some(Rerun {
            result: killed("boom"),
            child: r.child.clone(),
        });
        let text = serde_json::to_string(&r).unwrap();
        let keys = [
            "\"met\":",
            "\"command\":",
            "\"run_dir\":",
            "\"log\":",
            "\"exit_code\":",
            "\"wall_s\":",
            "\"kvcr\":",
            "\"equivalent\":",
            "\"rerun\":{\"result\":",
        ];
        let at: Vec<usize> = keys
            .iter()
            .map(|k| text.find(k).unwrap_or_else(|| panic!("{k} in {text}")))
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(!text.contains("\"child\""), "{text}");
        let rerun = &text[at[8]..];
        assert!(
            rerun.contains("\"command\":") && rerun.contains("\"wall_s\":"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<MutantRow>(&text).unwrap(), r);
    }

    #[test]
    fn json_and_html_are_written_and_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let written = report().write(dir.path()).unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&written.json).unwrap()).unwrap();
        assert_eq!(doc["schema_version"], 2);
        assert_eq!(doc["control"][0]["outcome"]["kind"], "green");
        assert_eq!(doc["control"][0]["kvcr"]["spec"], "pypi:0.1.1");
        assert!(doc["refused"].is_null());
        assert_eq!(doc["mutants"][0]["result"]["kind"], "killed");
        assert_eq!(doc["mutants"][0]["result"]["message_matches"], true);
        assert_eq!(doc["mutants"][3]["result"]["why"], "setup failed");
        assert_eq!(doc["score_phase1_claimed"]["killed"], 2);
        let page = std::fs::read_to_string(&written.page).unwrap();
        assert!(page.contains("bytes &lt;0&gt; &amp; more"));
        assert!(page.contains("<tr class=\"unmet\"><td><code>d</code>"));
        assert_eq!(std::fs::read_to_string(&written.report).unwrap(), page);
    }

    /// The lane's report page has the mutants as a section of the report's
    /// own page, with each run linked relative to the lane's directory.
    #[test]
    fn the_report_page_has_a_mutants_section_with_relative_run_links() {
        let page = report().html(Path::new("/out"));
        assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
        assert!(
            page.contains("<header><h1>kvcr-e2e mutants · cpu lane</h1>"),
            "{page}"
        );
        let section = page
            .split("<section id=\"mutants\">")
            .nth(1)
            .expect("a mutants section");
        for column in [
            "mutant",
            "class",
            "expected",
            "outcome",
            "killing trial",
            "message",
        ] {
            assert!(section.contains(&format!("<th>{column}</th>")), "{column}");
        }
        assert!(section.contains("<b>2/3 killed (67 %), 1 broken (not scored)</b>"));
        assert!(
            section.contains("<a href=\"runs/m/phase1/r/report.html\">run</a> <a href=\"runs/m/child.log\">log</a>"),
            "{section}"
        );
        assert!(section.contains("<code>TC-03::hinted_peer_transfer</code>"));
    }

    /// A generated row that passed `passed` and ended on `target` with
    /// `result`.
    fn generated(name: &str, target: &str, passed: &[&str], result: MutantResult) -> MutantRow {
        let mut r = row(name, true, NO_EXPECTATION, result, true);
        r.class = "generated:guard".into();
        r.target = target.into();
        r.child.run_dir = Some(format!("/out/runs/{name}/{target}/{target}/r").into());
        r.passed = passed
            .iter()
            .map(|lane| PassedLane {
                target: lane.to_string(),
                trials: vec!["TC-01::generation_correctness".into()],
                child: ChildEvidence {
                    command: format!("{lane} --kvcr m.diff"),
                    run_dir: Some(format!("/out/runs/{name}/{lane}/{lane}/r").into()),
                    log: format!("/out/runs/{name}/{lane}/child.log").into(),
                    exit_code: Some(0),
                    wall_s: 50.0,
                },
                kvcr: None,
            })
            .collect();
        if matches!(r.result, MutantResult::Survived) {
            r.passed.push(PassedLane::of(&r));
        }
        r
    }

    /// The table, mutants.json, the page and the score file name the lane
    /// of each kill and the lanes each mutant passed.
    #[test]
    fn a_generated_batch_names_the_lane_of_each_kill_and_the_lanes_passed() {
        let lanes = ["phase1", "phase2", "phase3"];
        let r = LaneReport::new(
            "t".into(),
            "cpu",
            vec![],
            vec![green()],
            vec![
                generated("k", "phase2", &["phase1"], killed("claim: 1 ≠ 2")),
                generated("s", "phase3", &["phase1", "phase2"], MutantResult::Survived),
                generated(
                    "b",
                    "phase3",
                    &["phase1", "phase2"],
                    MutantResult::Broken {
                        why: "setup failed".into(),
                    },
                ),
            ],
        )
        .with_lanes(&lanes);
        let table = r.table();
        let line = |name: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap()
                .to_string()
        };
        assert!(
            line("k").ends_with("phase2 (after phase1): TC-03::hinted_peer_transfer"),
            "{table}"
        );
        assert!(
            line("s").ends_with("passed phase1, phase2, phase3"),
            "{table}"
        );
        assert!(
            line("s").contains(" 112  "),
            "50 + 50 + its last lane's 12 s: {table}"
        );
        assert!(
            line("b").ends_with("phase3 (after phase1, phase2): setup failed"),
            "{table}"
        );
        assert!(
            table.contains(
                "lanes, in order (each mutant until one does not pass): phase1 → phase2 → phase3"
            ),
            "{table}"
        );

        let doc: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(doc["lanes"], serde_json::json!(lanes));
        assert_eq!(doc["mutants"][0]["target"], "phase2");
        assert_eq!(doc["mutants"][0]["passed"][0]["target"], "phase1");
        assert_eq!(
            doc["mutants"][0]["passed"][0]["log"],
            "/out/runs/k/phase1/child.log"
        );
        let survivor: Vec<&str> = doc["mutants"][1]["passed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["target"].as_str().unwrap())
            .collect();
        assert_eq!(survivor, lanes);

        let page = r.html(Path::new("/out"));
        assert!(page.contains("<th>lane</th>") && page.contains("<th>lanes passed</th>"));
        assert!(
            page.contains("<td>phase2</td><td><code>TC-03::hinted_peer_transfer</code>"),
            "{page}"
        );
        assert!(page.contains("<td>phase1, phase2, phase3</td>"), "{page}");
        assert!(
            page.contains("<a href=\"runs/k/phase1/child.log\">phase1 log</a>"),
            "{page}"
        );
        assert!(page.contains("phase1 → phase2 → phase3"), "{page}");

        let start = crate::mutants::score::BatchStart::now(Path::new(env!("CARGO_MANIFEST_DIR")));
        let file = crate::mutants::score::ScoreFile::new(
            &r,
            Path::new("/out"),
            "generated",
            "x".into(),
            &start,
            true,
        );
        assert_eq!(
            file.lanes.as_deref(),
            Some(&["phase1".to_string(), "phase2".into(), "phase3".into()][..])
        );
        assert_eq!(file.mutants[0].lane.as_deref(), Some("phase2"));
        assert_eq!(file.mutants[0].lanes_passed, ["phase1"]);
        assert_eq!(file.mutants[1].lanes_passed, lanes);
    }

    /// A curated row says nothing of lanes: its JSON and score line are as
    /// they were.
    #[test]
    fn a_curated_row_has_no_lane_fields() {
        let r = report();
        let doc: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert!(doc.get("lanes").is_none());
        assert!(doc["mutants"][0].get("passed").is_none());
        let page = r.html(Path::new("/out"));
        assert!(!page.contains("<th>lane</th>") && !page.contains("lanes passed"));
        assert_eq!(r.mutants[0].lane_words(), "");
        let start = crate::mutants::score::BatchStart::now(Path::new(env!("CARGO_MANIFEST_DIR")));
        let file = crate::mutants::score::ScoreFile::new(
            &r,
            Path::new("/out"),
            "curated",
            "x".into(),
            &start,
            true,
        );
        let text = serde_json::to_string(&file).unwrap();
        assert!(!text.contains("\"lane"), "{text}");
    }
}
