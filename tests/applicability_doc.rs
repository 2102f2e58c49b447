//! docs/test-plan.md's table of which case runs where is generated from the
//! cases' needs and the engines' answers (`kvcr_e2e::cases::table`), the
//! same computation that reports a trial ignored: the page must be what the
//! generator makes of it. Run with `UPDATE_DOCS=1` to rewrite the page.
//! A toy case shows that a new case is one declaration: its ignored
//! reasons on every engine and topology, and its row of the table, follow
//! from its needs.

mod generated_page;

use kvcr_e2e::cases::table::{self, PAGE, REGENERATE};
use kvcr_e2e::engine::{Applicability, Kind, Need, Topology};
use kvcr_e2e::suite::{Case, CaseCtx, CaseResult, Trial};

fn page_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE)
}

#[test]
fn the_page_is_what_the_needs_generate() {
    let page = std::fs::read_to_string(page_path()).unwrap();
    let rendered = table::render(&page).unwrap_or_else(|e| panic!("{e}"));
    generated_page::check(&page_path(), &page, &rendered, "cases' needs", REGENERATE);
}

fn toy_run(_: &CaseCtx) -> CaseResult {
    Ok(())
}

/// A case that is declared here and nowhere else: it needs a Guard and
/// router hints, and checks the block ledger where the stack keeps one.
const TOY: Case = Case {
    id: "TC-99",
    name: "toy_takeover",
    destructive: true,
    needs: &[Need::Guard, Need::RouterHints],
    optional: &[Need::BlockLedger],
    run: toy_run,
};

#[test]
fn a_new_case_gets_its_applicability_and_its_row_from_its_needs() {
    let trial = Trial::Case(TOY);
    // Runs wherever a Guard and router hints are given...
    for t in Topology::ALL {
        assert_eq!(
            trial.applicability(Kind::Cpu, t),
            Applicability::Applies,
            "cpu/{t}"
        );
        assert_eq!(
            trial.applicability(Kind::Vllm, t),
            Applicability::Applies,
            "vllm/{t}"
        );
    }
    // ... and is ignored elsewhere with the engine's reason, in context.
    assert_eq!(
        trial.applicability(Kind::Sglang, Topology::Agg),
        Applicability::Ignored(
            "TC-99 on sglang/agg: SGLang has no Guard and no disaggregation in KVCR 0.1.1".into()
        )
    );
    // Its row of the table comes from the same answers.
    let with_toy = table::table(&[TOY]);
    let row = with_toy
        .lines()
        .find(|l| l.starts_with("| TC-99 "))
        .expect("the toy case's row");
    assert_eq!(
        row,
        "| TC-99 toy_takeover | a Guard, router hints | a block ledger | runs | runs | runs | runs | runs | runs | ignored (1) | ignored (1) | ignored (1) |"
    );
    assert!(with_toy.contains("\n1. SGLang has no Guard and no disaggregation in KVCR 0.1.1\n"));
    assert!(with_toy.contains(
        "| a block ledger | checked | not checked: vllm workers log no KVCR inventory events per block and answer no per-block holding query |"
    ));
    // Registered beside the test plan's cases, it adds its row and nothing
    // else changes in the others'.
    let mut cases = table::test_plan_cases();
    let before = table::table(&cases);
    cases.push(TOY);
    let after = table::table(&cases);
    let case_rows = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("| TC-"))
            .map(str::to_string)
            .collect()
    };
    let (before_rows, after_rows) = (case_rows(&before), case_rows(&after));
    assert_eq!(after_rows.len(), before_rows.len() + 1);
    assert_eq!(after_rows[..before_rows.len()], before_rows[..]);
    assert!(after_rows
        .last()
        .unwrap()
        .starts_with("| TC-99 toy_takeover | a Guard, router hints |"));
}
