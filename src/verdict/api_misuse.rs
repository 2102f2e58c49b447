//! An engine that misuses KVCR's public API (TC-18): calls KVCR must
//! refuse, made by the CPU engine on its own live KVCR
//! (`POST /kvcr/probe/api_misuse`, `cpu_engine.api_misuse_probe`). KVCR must
//! refuse each in its own words (an exception of the right type), fail each
//! block it cannot serve, answer a release or abort it cannot honour with
//! `false`, and keep nothing of a refused call: its state gauges and the
//! engine's pending operations and pins as they were before the first call.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Checks, Violation};

/// One attempt of the probe, as the engine saw KVCR answer it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MisuseAttempt {
    /// The attempt's name (`descriptors_not_a_list`, `fetch_resident`, ...).
    pub attempt: String,
    /// The KVCR call made (`deliver`, `fetch`, `release`, ...).
    pub call: String,
    /// `raised`, `completed`, `returned`, `no_completion` or `skipped`.
    pub outcome: String,
    /// The exception's type name (`raised`).
    #[serde(default)]
    pub exception: Option<String>,
    /// KVCR's words (`raised`), or why there is no outcome.
    #[serde(default)]
    pub message: Option<String>,
    /// Each block's status by hash (`completed`).
    #[serde(default)]
    pub results: Option<BTreeMap<String, String>>,
    /// Release handles the completion carried (`completed`).
    #[serde(default)]
    pub claims: Option<u64>,
    /// The call's value (`returned`; `null` for a call that returns nothing).
    #[serde(default)]
    pub value: Value,
}

/// The probe's answer: every attempt, and KVCR's state around them.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MisuseReport {
    /// The block the case named as held in KVCR's pool.
    pub resident: Option<u64>,
    /// Where KVCR held it when the probe began (`local` for a usable one).
    pub resident_was: Option<String>,
    /// A block KVCR does not hold and no hint offers (the bad calls' block).
    pub absent: u64,
    /// The page labels of a block: the layout a fetch expects.
    pub layout: Vec<String>,
    pub attempts: Vec<MisuseAttempt>,
    pub state_before: BTreeMap<String, f64>,
    pub state_after: BTreeMap<String, f64>,
}

/// Which block a completed operation must name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Block {
    /// The report's `absent` block.
    Absent,
    /// The report's `resident` block.
    Resident,
}

/// What KVCR must do with an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Expected {
    /// Raise this exception type, its message containing these words.
    Raised(&'static str, &'static str),
    /// Complete the operation with no block in it.
    NoBlocks,
    /// Complete the operation with this block failed, no claim.
    Failed(Block),
    /// Complete the operation with this block served and one claim on it
    /// (the control: without it a KVCR that fails every fetch would pass).
    Served(Block),
    /// Complete the operation with this block a SUCCESS and no claim (the
    /// control of a deposit: without it a KVCR that fails every deposit of
    /// a held block would pass).
    Succeeded(Block),
    /// Return this value (JSON).
    Returns(&'static str),
}

/// One attempt: its name, what it does wrong, what KVCR must answer.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Attempt {
    pub name: &'static str,
    pub misuse: &'static str,
    pub expected: Expected,
}

const fn attempt(name: &'static str, misuse: &'static str, expected: Expected) -> Attempt {
    Attempt {
        name,
        misuse,
        expected,
    }
}

const NOT_A_LIST: Expected = Expected::Raised("TypeError", "block descriptors must be a list");
const NO_MEMORY_REF: Expected =
    Expected::Raised("ValueError", "each block requires at least one MemoryRef");
const OTHER_AGENT: Expected =
    Expected::Raised("ValueError", "memory reference has the wrong owning agent");
const BAD_LAYOUT: Expected =
    Expected::Raised("ValueError", "expected layout must use configured pools");

/// The probe's attempts, in its order, with KVCR 0.1.1's answer to each
/// (`core.py`'s `_normalize_descriptors`, `_validate_block_layout`,
/// `deliver`, `deposit`, `fetch`, `release`, `abort`, `align_sequence`;
/// `progress.py`'s `_resolve_region`; `local_dram.py`'s `deposit`, `fetch`
/// and `release`).
pub const ATTEMPTS: [Attempt; 25] = [
    attempt(
        "descriptors_not_a_list",
        "a deliver whose block's descriptors are a tuple",
        NOT_A_LIST,
    ),
    attempt(
        "no_descriptors",
        "a deliver whose block has no descriptor",
        NO_MEMORY_REF,
    ),
    attempt(
        "descriptor_of_wrong_type",
        "a deliver whose descriptor is no MemoryRef",
        NO_MEMORY_REF,
    ),
    attempt(
        "descriptor_of_another_agent",
        "a deliver into memory of another agent",
        OTHER_AGENT,
    ),
    attempt(
        "descriptor_label_not_a_string",
        "a deliver whose descriptor's label is a number",
        Expected::Raised("ValueError", "memory reference label must be a string"),
    ),
    attempt(
        "descriptor_of_an_unknown_pool",
        "a deliver into a region nobody registered",
        Expected::Raised("ValueError", "no framework registration for 'no-such-pool'"),
    ),
    attempt(
        "descriptor_outside_its_region",
        "a deliver into the element just past its region",
        Expected::Raised(
            "ValueError",
            "memory reference element_index is outside its region",
        ),
    ),
    attempt(
        "deposit_descriptor_of_another_agent",
        "a deposit from memory of another agent",
        OTHER_AGENT,
    ),
    attempt(
        "deliver_no_blocks",
        "a deliver of no block",
        Expected::NoBlocks,
    ),
    attempt("layout_empty", "a fetch expecting no page", BAD_LAYOUT),
    attempt(
        "layout_of_an_unknown_pool",
        "a fetch expecting a page of an unknown pool",
        BAD_LAYOUT,
    ),
    attempt(
        "layout_part_star",
        "a fetch expecting the part `*` (reserved for registration)",
        BAD_LAYOUT,
    ),
    attempt(
        "layout_part_empty",
        "a fetch expecting an empty part label",
        BAD_LAYOUT,
    ),
    attempt(
        "layout_part_repeated",
        "a fetch expecting one part label twice",
        Expected::Raised("ValueError", "block part labels must be unique"),
    ),
    attempt("fetch_no_keys", "a fetch of no block", Expected::NoBlocks),
    attempt(
        "fetch_not_resident_nor_offered",
        "a fetch of a block KVCR does not hold and no hint offers",
        Expected::Failed(Block::Absent),
    ),
    attempt(
        "fetch_resident_of_another_layout",
        "a fetch of a held block expecting another layout",
        Expected::Failed(Block::Resident),
    ),
    attempt(
        "deposit_resident_of_another_layout",
        "a deposit of a held block from pages of another layout",
        Expected::Failed(Block::Resident),
    ),
    attempt(
        "deposit_resident",
        "a deposit of a held block with its layout (the control)",
        Expected::Succeeded(Block::Resident),
    ),
    attempt(
        "fetch_resident",
        "a fetch of a held block with its layout (the control)",
        Expected::Served(Block::Resident),
    ),
    attempt(
        "release_claim",
        "a release of that fetch's claim",
        Expected::Returns("[true]"),
    ),
    attempt(
        "release_claim_again",
        "a second release of the same claim",
        Expected::Returns("[false]"),
    ),
    attempt(
        "release_never_given",
        "a release of a handle KVCR never gave",
        Expected::Returns("[false]"),
    ),
    attempt(
        "abort_unknown_op",
        "an abort of an operation KVCR never started",
        Expected::Returns("false"),
    ),
    attempt(
        "align_unknown_block",
        "an alignment of a block KVCR does not hold",
        Expected::Returns("null"),
    ),
];

/// Every attempt was made and refused as KVCR 0.1.1 must: its exception in
/// its words, the block failed, or `false`. A report without an attempt,
/// or with one that was skipped or never completed, fails: no evidence.
pub fn expect_misuse_refused(report: &MisuseReport) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR refuses an engine's misuse of its API");
    for expected in &ATTEMPTS {
        let Some(seen) = report.attempts.iter().find(|a| a.attempt == expected.name) else {
            c.check(false, || {
                format!("`{}` was not attempted (no evidence)", expected.name)
            });
            continue;
        };
        if let Some(detail) = mismatch(report, expected, seen) {
            c.check(false, || {
                format!("`{}` ({}): {detail}", expected.name, expected.misuse)
            });
        }
    }
    c.verdict()
}

/// What is wrong with `seen` against `expected`, if anything.
fn mismatch(report: &MisuseReport, expected: &Attempt, seen: &MisuseAttempt) -> Option<String> {
    let message = seen.message.as_deref().unwrap_or("");
    match seen.outcome.as_str() {
        "skipped" => return Some(format!("skipped, no evidence: {message}")),
        "no_completion" => return Some(format!("KVCR never completed it: {message}")),
        _ => {}
    }
    let seen_as = || describe(seen);
    match expected.expected {
        Expected::Raised(exception, words) => {
            let raised = seen.outcome == "raised"
                && seen.exception.as_deref() == Some(exception)
                && message.contains(words);
            (!raised).then(|| format!("KVCR {}, not {exception} `{words}`", seen_as()))
        }
        Expected::NoBlocks => {
            let empty =
                seen.outcome == "completed" && seen.results.as_ref().is_some_and(|r| r.is_empty());
            (!empty).then(|| format!("KVCR {}, not a completion of no block", seen_as()))
        }
        Expected::Failed(block) | Expected::Served(block) | Expected::Succeeded(block) => {
            let (status, claims) = match expected.expected {
                Expected::Served(_) => ("SUCCESS", 1),
                Expected::Succeeded(_) => ("SUCCESS", 0),
                _ => ("FAILED", 0),
            };
            let Some(hash) = block_of(report, block) else {
                return Some("the report names no such block (no evidence)".to_string());
            };
            let only = BTreeMap::from([(hash.to_string(), status.to_string())]);
            let ok = seen.outcome == "completed"
                && seen.results.as_ref() == Some(&only)
                && seen.claims == Some(claims);
            (!ok).then(|| {
                format!(
                    "KVCR {}, not block {hash} {status} with {claims} claim(s)",
                    seen_as()
                )
            })
        }
        Expected::Returns(json) => {
            let want: Value = serde_json::from_str(json).expect("an expected value is JSON");
            let ok = seen.outcome == "returned" && seen.value == want;
            (!ok).then(|| format!("KVCR {}, not a return of {json}", seen_as()))
        }
    }
}

fn block_of(report: &MisuseReport, block: Block) -> Option<u64> {
    match block {
        Block::Absent => Some(report.absent),
        Block::Resident => report.resident,
    }
}

/// An attempt's outcome in words.
fn describe(seen: &MisuseAttempt) -> String {
    match seen.outcome.as_str() {
        "raised" => format!(
            "raised {} `{}`",
            seen.exception.as_deref().unwrap_or("?"),
            seen.message.as_deref().unwrap_or("")
        ),
        "completed" => format!(
            "completed it with {} and {} claim(s)",
            serde_json::to_string(&seen.results).unwrap_or_default(),
            seen.claims.unwrap_or(0)
        ),
        "returned" => format!("returned {}", seen.value),
        other => format!("answered `{other}`"),
    }
}

/// What a refused call must leave as it was: KVCR's state gauges (block
/// records, operations in flight, framework pins, its pool's slots) and the
/// engine's pending operations and pins.
pub const UNCHANGED: [&str; 9] = [
    "block_records",
    "in_flight_ops",
    "framework_pins",
    "pinned_keys",
    "local_g2_allocated_slots",
    "local_g2_free_slots",
    "local_g2_evictable_slots",
    "engine_pending_ops",
    "engine_held_pins",
];

/// KVCR kept nothing of the misuse: each of [`UNCHANGED`] reported before
/// and after, and equal. A state not reported fails (absent is not zero).
pub fn expect_nothing_leaked(report: &MisuseReport) -> Result<(), Violation> {
    let mut c = Checks::new("KVCR keeps nothing of a refused call");
    for name in UNCHANGED {
        match (report.state_before.get(name), report.state_after.get(name)) {
            (Some(before), Some(after)) => {
                c.check(before == after, || {
                    format!("{name} was {before} before the misuse and {after} after")
                });
            }
            (before, _) => {
                let when = if before.is_none() { "before" } else { "after" };
                c.check(false, || {
                    format!("{name} was not reported {when} the misuse (no evidence)")
                });
            }
        }
    }
    c.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESIDENT: u64 = 4242;
    const ABSENT: u64 = 7743485952474115938;

    fn as_kvcr_answers() -> MisuseReport {
        let attempts = ATTEMPTS
            .iter()
            .map(|a| {
                let mut seen = MisuseAttempt {
                    attempt: a.name.into(),
                    call: "deliver".into(),
                    outcome: "completed".into(),
                    exception: None,
                    message: None,
                    results: None,
                    claims: Some(0),
                    value: Value::Null,
                };
                let block = |b| match b {
                    Block::Absent => ABSENT,
                    Block::Resident => RESIDENT,
                };
                match a.expected {
                    Expected::Raised(exception, words) => {
                        seen.outcome = "raised".into();
                        seen.exception = Some(exception.into());
                        seen.message = Some(words.into());
                    }
                    Expected::NoBlocks => seen.results = Some(BTreeMap::new()),
                    Expected::Failed(b) => {
                        seen.results =
                            Some(BTreeMap::from([(block(b).to_string(), "FAILED".into())]))
                    }
                    Expected::Served(b) => {
                        seen.results =
                            Some(BTreeMap::from([(block(b).to_string(), "SUCCESS".into())]));
                        seen.claims = Some(1);
                    }
                    Expected::Succeeded(b) => {
                        seen.results =
                            Some(BTreeMap::from([(block(b).to_string(), "SUCCESS".into())]))
                    }
                    Expected::Returns(json) => {
                        seen.outcome = "returned".into();
                        seen.value = serde_json::from_str(json).unwrap();
                    }
                }
                seen
            })
            .collect();
        let state: BTreeMap<String, f64> = UNCHANGED.iter().map(|n| (n.to_string(), 2.0)).collect();
        MisuseReport {
            resident: Some(RESIDENT),
            resident_was: Some("local".into()),
            absent: ABSENT,
            layout: vec!["kv".into(), "kv".into()],
            attempts,
            state_before: state.clone(),
            state_after: state,
        }
    }

    fn with(name: &str, change: impl FnOnce(&mut MisuseAttempt)) -> MisuseReport {
        let mut report = as_kvcr_answers();
        change(
            report
                .attempts
                .iter_mut()
                .find(|a| a.attempt == name)
                .unwrap(),
        );
        report
    }

    #[test]
    fn kvcrs_answers_pass() {
        let report = as_kvcr_answers();
        assert_eq!(expect_misuse_refused(&report), Ok(()));
        assert_eq!(expect_nothing_leaked(&report), Ok(()));
    }

    /// The CPU engine's probe against KVCR 0.1.1 in its unit tests' process
    /// (`fixtures/cpu-engine/tests/test_kvcr_api_misuse.py`, no Guard), and
    /// against the same KVCR with a curated mutant applied.
    fn recorded(name: &str) -> MisuseReport {
        let text = match name {
            "kvcr-0.1.1" => include_str!("testdata/api-misuse-kvcr-0.1.1.json"),
            "p3-layout-star-part-accepted" => {
                include_str!("testdata/api-misuse-p3-layout-star-part-accepted.json")
            }
            "p3-release-twice-accepted" => {
                include_str!("testdata/api-misuse-p3-release-twice-accepted.json")
            }
            other => panic!("no recorded report {other}"),
        };
        serde_json::from_str(text).expect("a recorded report parses")
    }

    #[test]
    fn kvcr_0_1_1_as_the_probe_recorded_it_passes() {
        let report = recorded("kvcr-0.1.1");
        assert_eq!(report.attempts.len(), ATTEMPTS.len());
        assert_eq!(expect_misuse_refused(&report), Ok(()));
        assert_eq!(expect_nothing_leaked(&report), Ok(()));
    }

    #[test]
    fn the_curated_mutants_as_the_probe_recorded_them_fail() {
        let e = expect_misuse_refused(&recorded("p3-layout-star-part-accepted")).unwrap_err();
        assert!(e.detail.starts_with("`layout_part_star`"), "{e}");
        assert!(e.detail.contains("completed it with"), "{e}");
        let e = expect_misuse_refused(&recorded("p3-release-twice-accepted")).unwrap_err();
        assert!(e.detail.contains("`release_claim_again`"), "{e}");
        assert!(e.detail.contains("`release_never_given`"), "{e}");
    }

    #[test]
    fn an_empty_table_fails_for_want_of_evidence() {
        let mut report = as_kvcr_answers();
        report.attempts.clear();
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(
            e.detail
                .contains("`descriptors_not_a_list` was not attempted"),
            "{e}"
        );
        assert!(
            e.detail.contains("`align_unknown_block` was not attempted"),
            "{e}"
        );
    }

    #[test]
    fn a_skipped_or_unfinished_attempt_fails() {
        let report = with("fetch_resident", |a| {
            a.outcome = "skipped".into();
            a.message = Some("no block resident in KVCR's pool was named".into());
        });
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(e.detail.contains("`fetch_resident`"), "{e}");
        assert!(e.detail.contains("skipped, no evidence"), "{e}");
        let report = with("fetch_no_keys", |a| a.outcome = "no_completion".into());
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(e.detail.contains("never completed"), "{e}");
    }

    #[test]
    fn an_accepted_bad_descriptor_fails() {
        let report = with("descriptor_outside_its_region", |a| {
            a.outcome = "completed".into();
            a.results = Some(BTreeMap::from([(ABSENT.to_string(), "FAILED".into())]));
        });
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(
            e.detail
                .contains("not ValueError `memory reference element_index is outside its region`"),
            "{e}"
        );
    }

    #[test]
    fn other_words_or_another_exception_fail() {
        let report = with("layout_part_star", |a| {
            a.message = Some("block part labels must be unique".into())
        });
        assert!(expect_misuse_refused(&report).is_err());
        let report = with("descriptors_not_a_list", |a| {
            a.exception = Some("ValueError".into())
        });
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(e.detail.contains("raised ValueError"), "{e}");
    }

    #[test]
    fn a_block_served_where_kvcr_must_fail_it_fails() {
        let report = with("fetch_resident_of_another_layout", |a| {
            a.results = Some(BTreeMap::from([(RESIDENT.to_string(), "SUCCESS".into())]));
            a.claims = Some(1);
        });
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(e.detail.contains("not block 4242 FAILED"), "{e}");
    }

    #[test]
    fn a_control_fetch_that_fails_fails() {
        let report = with("fetch_resident", |a| {
            a.results = Some(BTreeMap::from([(RESIDENT.to_string(), "FAILED".into())]));
            a.claims = Some(0);
        });
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(
            e.detail.contains("not block 4242 SUCCESS with 1 claim"),
            "{e}"
        );
    }

    #[test]
    fn a_deposit_of_another_layout_kvcr_accepts_fails() {
        let report = with("deposit_resident_of_another_layout", |a| {
            a.results = Some(BTreeMap::from([(RESIDENT.to_string(), "SUCCESS".into())]));
        });
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(
            e.detail.starts_with("`deposit_resident_of_another_layout`"),
            "{e}"
        );
        assert!(
            e.detail.contains("not block 4242 FAILED with 0 claim"),
            "{e}"
        );
    }

    #[test]
    fn a_control_deposit_that_fails_or_claims_fails() {
        let report = with("deposit_resident", |a| {
            a.results = Some(BTreeMap::from([(RESIDENT.to_string(), "FAILED".into())]));
        });
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(e.detail.starts_with("`deposit_resident`"), "{e}");
        assert!(
            e.detail.contains("not block 4242 SUCCESS with 0 claim"),
            "{e}"
        );
        let report = with("deposit_resident", |a| a.claims = Some(1));
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(e.detail.contains("`deposit_resident`"), "{e}");
    }

    #[test]
    fn a_claim_released_twice_fails() {
        let report = with("release_claim_again", |a| {
            a.value = serde_json::json!([true])
        });
        let e = expect_misuse_refused(&report).unwrap_err();
        assert!(
            e.detail
                .contains("returned [true], not a return of [false]"),
            "{e}"
        );
    }

    #[test]
    fn a_leaked_claim_or_a_missing_gauge_fails() {
        let mut report = as_kvcr_answers();
        report
            .state_after
            .insert("local_g2_evictable_slots".into(), 1.0);
        report.state_before.remove("in_flight_ops");
        let e = expect_nothing_leaked(&report).unwrap_err();
        assert!(
            e.detail
                .contains("local_g2_evictable_slots was 2 before the misuse and 1 after"),
            "{e}"
        );
        assert!(
            e.detail.contains("in_flight_ops was not reported before"),
            "{e}"
        );
    }

    #[test]
    fn the_attempts_match_the_probes() {
        crate::verdict::assert_probe_order("api_misuse.py", ATTEMPTS.iter().map(|a| a.name));
        let probe = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/cpu-engine/cpu_engine/api_misuse.py"),
        )
        .unwrap();
        for name in UNCHANGED.iter().take(7) {
            assert!(
                probe.contains(&format!("\"{name}\"")),
                "{name} not read by the probe"
            );
        }
    }
}
