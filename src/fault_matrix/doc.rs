//! docs/fault-matrix.md's tables of rows, generated from the rows: each
//! table sits between a begin marker naming its matrix and an end marker,
//! and [`render`] rewrites what is between them; the prose around the
//! tables is written by hand. `tests/fault_matrix_doc.rs` fails when the
//! page is out of step, and rewrites it under [`UPDATE_VAR`].

use crate::suite::FaultRow;

use super::{agg, p2d, p2d_vllm, phase2, phase3, two_node, workload};

/// The page, from the crate's root.
pub const PAGE: &str = "docs/fault-matrix.md";

/// The environment variable that makes the doc test rewrite the page.
pub const UPDATE_VAR: &str = "UPDATE_DOCS";

/// How to regenerate the page.
pub const REGENERATE: &str = "UPDATE_DOCS=1 cargo test --test fault_matrix_doc";

/// Opens a generated table: `<!-- rows of <matrix> ... -->`.
const BEGIN: &str = "<!-- rows of ";
/// Closes it.
const END: &str = "<!-- end of rows -->";

/// Every matrix, by the name its begin marker gives, with its rows.
pub fn matrices() -> [(&'static str, &'static [FaultRow]); 7] {
    [
        ("fault_matrix::agg", agg::ROWS),
        ("fault_matrix::p2d", p2d::ROWS),
        ("fault_matrix::p2d_vllm", p2d_vllm::ROWS),
        ("fault_matrix::two_node", two_node::ROWS),
        ("fault_matrix::phase2", phase2::ROWS),
        ("fault_matrix::workload", workload::ROWS),
        ("fault_matrix::phase3", phase3::ROWS),
    ]
}

/// The rows of the matrix named `name`.
fn rows_of(name: &str) -> Option<&'static [FaultRow]> {
    matrices()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, rows)| rows)
}

/// The markdown table of `rows`, in the order they run.
pub fn table(rows: &[FaultRow]) -> String {
    let mut out = String::from(
        "| row | fault (how it is injected) | case that must catch it | the failure it must end with | message it must give |\n\
         |---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| `{}::{}` | {} | {} | {} | {} |\n",
            row.case.id, row.name, row.doc.fault, row.doc.caught_by, row.expect, row.doc.message
        ));
    }
    out
}

/// `page` with every generated table rewritten from its matrix's rows.
pub fn render(page: &str) -> Result<String, String> {
    render_with(page, rows_of)
}

fn render_with(
    page: &str,
    rows_of: impl Fn(&str) -> Option<&'static [FaultRow]>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        let Some(marked) = line.strip_prefix(BEGIN) else {
            continue;
        };
        let name = marked.split_whitespace().next().unwrap_or_default();
        let rows = rows_of(name).ok_or_else(|| format!("{PAGE}: no matrix named `{name}`"))?;
        if !lines.any(|l| l == END) {
            return Err(format!("{PAGE}: the rows of {name} have no `{END}`"));
        }
        out.push_str(&table(rows));
        out.push_str(END);
        out.push('\n');
    }
    Ok(out)
}

/// The names of the matrices whose tables `page` holds, in its order.
pub fn tables_in(page: &str) -> Vec<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix(BEGIN))
        .filter_map(|m| m.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row whose fault turns on a CPU-engine switch says it needs the
    /// switches, so an engine without them reports it ignored.
    #[test]
    fn a_row_that_switches_the_engine_needs_the_switches() {
        for (matrix, rows) in matrices() {
            for row in rows {
                if row.fault.switches_the_engine() {
                    assert!(
                        row.needs.contains(&crate::engine::Need::FaultSwitches),
                        "{matrix}: {} switches the engine but does not need fault switches",
                        row.name
                    );
                }
            }
        }
    }
    use crate::suite::{Claim, Expect, Fault, RowDoc};

    fn row(name: &'static str, expect: Expect) -> FaultRow {
        FaultRow {
            case: crate::cases::tc01_generation_correctness::CASE,
            name,
            fault: Fault::KillFrontend,
            needs: &[],
            expect,
            doc: RowDoc {
                fault: "SIGKILL of the frontend",
                caught_by: "TC-01",
                message: "`request f… failed: … no response`",
            },
        }
    }

    fn one_row(name: &str) -> Option<&'static [FaultRow]> {
        static ONE: std::sync::OnceLock<Vec<FaultRow>> = std::sync::OnceLock::new();
        let rows = ONE.get_or_init(|| {
            vec![row(
                "dead_router_is_caught",
                Expect::claim(Claim::Request(crate::suite::claim::Request::NoResponse)),
            )]
        });
        (name == "m").then_some(rows.as_slice())
    }

    #[test]
    fn a_row_renders_with_its_expected_claim_and_message() {
        let t = table(&[row(
            "underreported_blocks_are_caught",
            Expect::clause("peer transfer reconciles", "remote_deliver blocks 3"),
        )]);
        assert_eq!(
            t.lines().nth(2).unwrap(),
            "| `TC-01::underreported_blocks_are_caught` | SIGKILL of the frontend | TC-01 | `peer transfer reconciles`, naming `remote_deliver blocks 3` | `request f… failed: … no response` |"
        );
        let fenced = table(&[row(
            "r",
            Expect::clause("Guard promotion after SIGKILL", "no `guard_promoted` event"),
        )]);
        assert!(
            fenced.contains("naming `` no `guard_promoted` event ``"),
            "{fenced}"
        );
    }

    #[test]
    fn render_rewrites_only_between_the_markers() {
        let page = "# Title\nprose\n<!-- rows of m (generated) -->\n| stale |\n<!-- end of rows -->\nafter\n";
        let out = render_with(page, one_row).unwrap();
        assert!(out.starts_with("# Title\nprose\n<!-- rows of m (generated) -->\n| row |"));
        assert!(out.contains("| `TC-01::dead_router_is_caught` |"));
        assert!(!out.contains("stale"));
        assert!(out.ends_with("<!-- end of rows -->\nafter\n"));
        // Rendering is a fixed point: a page in step renders to itself.
        assert_eq!(render_with(&out, one_row).unwrap(), out);
        assert_eq!(tables_in(&out), ["m"]);
    }

    #[test]
    fn render_refuses_an_unknown_matrix_or_an_open_table() {
        let unknown = "<!-- rows of nope -->\n<!-- end of rows -->\n";
        assert!(render_with(unknown, one_row).unwrap_err().contains("nope"));
        let open = "<!-- rows of m -->\n| row |\n";
        assert!(render_with(open, one_row)
            .unwrap_err()
            .contains("end of rows"));
    }

    #[test]
    fn every_row_expects_a_named_claim_and_documents_its_detail() {
        for (matrix, rows) in matrices() {
            for row in rows {
                let name = format!("{matrix} {}", row.name);
                assert_ne!(row.expect.claim, Claim::Unnamed, "{name}");
                // The documented message is a run's: it names the detail.
                let message = row.doc.message.replace("\\`", "`");
                if let Some(detail) = row.expect.detail {
                    assert!(
                        message.contains(detail),
                        "{name}: the message it documents does not name `{detail}`: {message}"
                    );
                }
                for cell in [row.doc.fault, row.doc.caught_by, row.doc.message] {
                    assert!(
                        !cell.contains('|'),
                        "{name}: a `|` breaks the table: {cell}"
                    );
                }
                if let Fault::Engine(_, switch) = row.fault {
                    let word = switch.to_string();
                    let word = word.split('=').next().unwrap_or_default();
                    assert!(
                        row.doc.fault.contains(word),
                        "{name}: its fault is `{switch}`, its doc says {}",
                        row.doc.fault
                    );
                }
            }
        }
    }
}
