//! A case's evidence: the files it writes under `cases/<case>/`, the
//! measurements that go into its record in results.json, and its token
//! comparisons (`tokens.json`).
//!
//! A write that fails is kept and fails the case on its own ("evidence not
//! written: ..."), so a path named in a message that does not exist is
//! always explained.

use std::cell::RefCell;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::evidence::RunDir;
use crate::verdict::Violation;

use super::{CaseError, CaseResult};

/// What a case wrote and measured, and what it could not write.
pub struct CaseEvidence<'a> {
    run: &'a RunDir,
    /// Evidence directory name (`TC-05-cold`): unique per trial.
    slug: String,
    files: RefCell<Vec<PathBuf>>,
    unwritten: RefCell<Vec<String>>,
    measurements: RefCell<Map<String, Value>>,
    comparisons: RefCell<Vec<Value>>,
}

/// The files written and the measurements taken, for the case record, and
/// the case's result with any evidence that could not be written added.
pub type Closed = (Result<(), String>, Vec<PathBuf>, Map<String, Value>);

impl<'a> CaseEvidence<'a> {
    pub fn new(run: &'a RunDir, slug: String) -> Self {
        Self {
            run,
            slug,
            files: RefCell::new(Vec::new()),
            unwritten: RefCell::new(Vec::new()),
            measurements: RefCell::new(Map::new()),
            comparisons: RefCell::new(Vec::new()),
        }
    }

    /// The run directory it writes into.
    pub fn run(&self) -> &'a RunDir {
        self.run
    }

    /// The evidence directory's name (`TC-05-cold`).
    pub fn slug(&self) -> &str {
        &self.slug
    }

    /// The case as its trial is named: `TC-05::cold` (from the evidence
    /// directory name `TC-05-cold` and the case id `TC-05`).
    pub fn case_name(&self, id: &str) -> String {
        match self.slug.strip_prefix(id) {
            Some(rest) => format!("{id}::{}", rest.trim_start_matches('-')),
            None => self.slug.clone(),
        }
    }

    /// This case's evidence directory.
    pub fn dir(&self) -> PathBuf {
        self.run.case_dir(&self.slug)
    }

    /// Writes `value` as `cases/<case>/<name>` and returns its path.
    pub fn record(&self, name: &str, value: &impl Serialize) -> PathBuf {
        let written = self.run.write_json(&self.slug, name, value);
        self.keep(name, written.map_err(|e| e.to_string()))
    }

    /// Writes `text` as `cases/<case>/<name>` and returns its path.
    pub fn record_text(&self, name: &str, text: &str) -> PathBuf {
        let written = self.run.write_text(&self.slug, name, text);
        self.keep(name, written.map_err(|e| e.to_string()))
    }

    fn keep(&self, name: &str, written: Result<PathBuf, String>) -> PathBuf {
        match written {
            Ok(path) => {
                self.files.borrow_mut().push(path.clone());
                path
            }
            Err(e) => {
                self.unwritten.borrow_mut().push(e);
                self.run.case_file(&self.slug, name)
            }
        }
    }

    /// Adds a measurement to the case's record in results.json.
    pub fn measure(&self, key: &str, value: impl Serialize) {
        self.measurements.borrow_mut().insert(
            key.to_string(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
    }

    /// A clause the case cannot check on this stack, and why: the case
    /// stays green, its summary line and the report say so.
    pub fn not_checked(&self, check: &str, why: &str) {
        let entry = serde_json::to_value(crate::evidence::NotChecked::new(check, why))
            .unwrap_or(Value::Null);
        self.append(crate::evidence::NOT_CHECKED, entry);
    }

    /// Records the check of a known finding (docs/kvcr-findings.md): the
    /// measurement `kvcr_findings` (a list), from which the case's outcome
    /// follows (an expected failure, or an unexpected pass) and which the
    /// summary shows under the case.
    pub fn known_finding(&self, check: &crate::evidence::expected::FindingCheck) {
        let entry = serde_json::to_value(check).unwrap_or(Value::Null);
        self.append(crate::evidence::expected::KVCR_FINDINGS, entry);
    }

    /// Appends the text `line` to the list measurement `key`, once.
    pub fn note(&self, key: &str, line: &str) {
        self.append(key, Value::String(line.to_string()));
    }

    /// Appends `entry` to the list measurement `key`, once.
    fn append(&self, key: &str, entry: Value) {
        let mut measurements = self.measurements.borrow_mut();
        let list = measurements
            .entry(key.to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            if !list.contains(&entry) {
                list.push(entry);
            }
        }
    }

    /// Checks a verdict after recording `observed` as evidence file `name`.
    pub fn check(
        &self,
        name: &str,
        observed: &impl Serialize,
        verdict: Result<(), Violation>,
    ) -> CaseResult {
        let path = self.record(name, observed);
        verdict.map_err(|v| CaseError::from(v).with_evidence(path))
    }

    /// A failed verdict, pointed at the evidence file `name` of this case.
    pub fn fail(&self, violation: Violation, name: &str) -> CaseError {
        self.flush_comparisons();
        CaseError::from(violation).with_evidence(self.run.case_file(&self.slug, name))
    }

    /// One token comparison, for `tokens.json`.
    pub fn compared(&self, comparison: Value) {
        self.comparisons.borrow_mut().push(comparison);
    }

    /// Writes `tokens.json` when the case compared tokens.
    pub fn flush_comparisons(&self) {
        let comparisons = self.comparisons.borrow().clone();
        if !comparisons.is_empty() {
            self.record("tokens.json", &comparisons);
        }
    }

    /// The files and measurements, and `result` with the evidence writes
    /// that failed added to it.
    pub fn close(self, result: Result<(), String>) -> Closed {
        let mut files = self.files.into_inner();
        files.sort();
        files.dedup();
        let result = with_unwritten(result, &self.unwritten.into_inner());
        (result, files, self.measurements.into_inner())
    }
}

/// A case's result with the evidence writes that failed added to it.
fn with_unwritten(result: Result<(), String>, unwritten: &[String]) -> Result<(), String> {
    if unwritten.is_empty() {
        return result;
    }
    let unwritten = unwritten.join("; ");
    match result {
        Ok(()) => Err(format!("evidence not written: {unwritten}")),
        Err(message) => Err(format!(
            "{message}; also, evidence not written (files named above may be missing): {unwritten}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_evidence_write_fails_the_case_on_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(tmp.path(), crate::config::Redactor::none()).unwrap();
        // A file where the case directory should be: the write must fail.
        std::fs::write(run.case_dir("TC-01-x"), "not a directory").unwrap();
        let err = run
            .write_json("TC-01-x", "tokens.json", &json!({}))
            .unwrap_err()
            .to_string();
        let passed = with_unwritten(Ok(()), std::slice::from_ref(&err)).unwrap_err();
        assert!(
            passed.starts_with("evidence not written: cannot create"),
            "{passed}"
        );
        let failed = with_unwritten(Err("token 2 of 16 differs".into()), &[err]).unwrap_err();
        assert!(
            failed.starts_with("token 2 of 16 differs; also, evidence not written"),
            "{failed}"
        );
        assert_eq!(with_unwritten(Ok(()), &[]), Ok(()));
    }

    #[test]
    fn the_case_name_is_the_trial_name() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(tmp.path(), crate::config::Redactor::none()).unwrap();
        let evidence = CaseEvidence::new(&run, "TC-05-cold".into());
        assert_eq!(evidence.case_name("TC-05"), "TC-05::cold");
        let nested = CaseEvidence::new(&run, format!("{}-shm", evidence.slug()));
        assert_eq!(nested.case_name("TC-05"), "TC-05::cold-shm");
    }
}
