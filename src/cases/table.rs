//! docs/test-plan.md's table of which case runs on which engine and
//! topology, generated from the cases' needs and each engine's answers:
//! the same computation that reports a trial ignored
//! ([`crate::suite::Trial::applicability`]) and records a check "not
//! checked" (`CaseCtx::supports`). The table sits between a begin and an
//! end marker, and [`render`] rewrites what is between them;
//! `tests/applicability_doc.rs` fails when the page is out of step, and
//! rewrites it under `UPDATE_DOCS`.

use crate::engine::{Applicability, Kind, Need, Topology};
use crate::suite::{Case, Trial};

/// The page, from the crate's root.
pub const PAGE: &str = "docs/test-plan.md";

/// How to regenerate the page.
pub const REGENERATE: &str = "UPDATE_DOCS=1 cargo test --test applicability_doc";

/// Opens the generated table.
const BEGIN: &str = "<!-- which case runs where";
/// Closes it.
const END: &str = "<!-- end of which case runs where -->";

/// The test plan's cases (TC-01..TC-12), each once, in test-plan order.
pub fn test_plan_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = super::PHASE1
        .iter()
        .chain(super::PHASE2)
        .chain(super::PHASE2_G3)
        .chain(super::PHASE3)
        .chain(super::PHASE3_TWO_NODE)
        .chain(super::PHASE3_API)
        .copied()
        .collect();
    // Stable: a case's arms keep their order.
    cases.sort_by_key(|c| c.id);
    cases.dedup_by(|a, b| a.id == b.id && a.name == b.name);
    cases
}

/// Every engine on every topology: the table's columns.
pub fn stacks() -> Vec<(Kind, Topology)> {
    Kind::ALL
        .into_iter()
        .flat_map(|k| Topology::ALL.into_iter().map(move |t| (k, t)))
        .collect()
}

/// The reasons the table's cells point at, numbered in order of first use.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    /// The number of `note`, added if new.
    fn number(&mut self, note: String) -> usize {
        match self.0.iter().position(|n| *n == note) {
            Some(i) => i + 1,
            None => {
                self.0.push(note);
                self.0.len()
            }
        }
    }
}

fn labels(needs: &[Need]) -> String {
    if needs.is_empty() {
        return "—".into();
    }
    needs
        .iter()
        .map(|n| n.label())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The markdown of the table for `cases`: a row per case (arms with the
/// same needs together), a column per engine and topology, `runs` or the
/// number of the reason it is ignored; then the reasons; then what each
/// engine says about the checks a case makes only where given.
pub fn table(cases: &[Case]) -> String {
    let stacks = stacks();
    let mut out = String::from("| case | needs | checks only where given |");
    for (k, t) in &stacks {
        out.push_str(&format!(" {k} {t} |"));
    }
    out.push_str("\n|---|---|---|");
    out.push_str(&"---|".repeat(stacks.len()));
    out.push('\n');
    let mut notes = Notes::default();
    let mut i = 0;
    while i < cases.len() {
        let case = cases[i];
        let arms = cases[i..]
            .iter()
            .take_while(|c| c.id == case.id && c.needs == case.needs && c.optional == case.optional)
            .count();
        let names: Vec<&str> = cases[i..i + arms].iter().map(|c| c.name).collect();
        out.push_str(&format!(
            "| {} {} | {} | {} |",
            case.id,
            names.join(", "),
            labels(case.needs),
            labels(case.optional)
        ));
        for (k, t) in &stacks {
            let cell = match Trial::Case(case).applicability(*k, *t) {
                Applicability::Applies => "runs".to_string(),
                Applicability::Ignored(why) => {
                    let prefix = format!("{} on {k}/{t}: ", case.id);
                    let why = why.strip_prefix(&prefix).unwrap_or(&why).to_string();
                    format!("ignored ({})", notes.number(why))
                }
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
        i += arms;
    }
    out.push('\n');
    for (n, why) in notes.0.iter().enumerate() {
        out.push_str(&format!("{}. {why}\n", n + 1));
    }
    let mut optional: Vec<Need> = cases.iter().flat_map(|c| c.optional).copied().collect();
    optional.sort();
    optional.dedup();
    if !optional.is_empty() {
        out.push_str("\n| a check that needs (on agg) |");
        for k in Kind::ALL {
            out.push_str(&format!(" {k} |"));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(Kind::ALL.len()));
        out.push('\n');
        for need in optional {
            out.push_str(&format!("| {} |", need.label()));
            for k in Kind::ALL {
                let cell = match k.supports(need, Topology::Agg).reason() {
                    None => "checked".to_string(),
                    Some(why) => format!("not checked: {why}"),
                };
                out.push_str(&format!(" {cell} |"));
            }
            out.push('\n');
        }
    }
    out
}

/// `page` with its generated table rewritten from the test plan's cases.
pub fn render(page: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut lines = page.lines();
    let mut found = false;
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        if !line.starts_with(BEGIN) {
            continue;
        }
        found = true;
        if !lines.any(|l| l == END) {
            return Err(format!("{PAGE}: the generated table has no `{END}`"));
        }
        out.push_str(&table(&test_plan_cases()));
        out.push_str(END);
        out.push('\n');
    }
    if found {
        Ok(out)
    } else {
        Err(format!("{PAGE}: no `{BEGIN} …` marker"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_and_stack_has_its_cell() {
        let cases = test_plan_cases();
        let table = table(&cases);
        let header = table.lines().next().unwrap();
        assert_eq!(header.matches(" | ").count() + 1, 3 + stacks().len());
        assert!(header.contains(" cpu agg |") && header.contains(" sglang two-node |"));
        // TC-05's five arms share a row, and its two KVCR benches another;
        // every other case has its own.
        let tc05 = table.lines().find(|l| l.starts_with("| TC-05 ")).unwrap();
        assert!(tc05.starts_with("| TC-05 cold, local_hit, dram_hit, remote_hit, concurrency_sweep | the performance arms' stack |"), "{tc05}");
        assert!(table.contains("| TC-05 kvcr_deliver_bench, kvcr_pull_bench | the performance arms' stack, a KVCR bench |"), "{table}");
        let rows = table.lines().filter(|l| l.starts_with("| TC-")).count();
        assert_eq!(rows, cases.len() - 5);
    }

    #[test]
    fn a_cell_is_the_trials_own_answer() {
        let table = table(&test_plan_cases());
        // TC-03 on SGLang: ignored with the reason numbered below the table.
        let tc03 = table.lines().find(|l| l.starts_with("| TC-03 ")).unwrap();
        let cells: Vec<&str> = tc03.split(" | ").collect();
        // cpu agg, 2p1d, two-node, then vllm's, then sglang's.
        assert_eq!(cells[3..9], ["runs"; 6]);
        let n: usize = cells[9]
            .trim_start_matches("ignored (")
            .trim_end_matches(')')
            .parse()
            .unwrap_or_else(|_| panic!("{}", cells[9]));
        let note = table
            .lines()
            .find(|l| l.starts_with(&format!("{n}. ")))
            .unwrap();
        assert!(
            note.contains("no router_hint in Dynamo 1.6.1's SGLang worker"),
            "{note}"
        );
        assert!(table.contains(
            "| a block ledger | checked | not checked: vllm workers log no KVCR inventory events per block and answer no per-block holding query |"
        ));
    }

    #[test]
    fn a_page_without_the_markers_is_an_error() {
        assert!(render("# nothing here\n").is_err());
        let open = format!("{BEGIN} -->\n| old |\n");
        assert!(render(&open).unwrap_err().contains("no `"));
        let page = format!("before\n{BEGIN} -->\n| old |\n{END}\nafter\n");
        let rendered = render(&page).unwrap();
        assert!(rendered.starts_with("before\n") && rendered.ends_with(&format!("{END}\nafter\n")));
        assert!(!rendered.contains("| old |") && rendered.contains("| TC-12 disk_tier |"));
    }
}
