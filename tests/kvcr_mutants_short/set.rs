//! The short set, in one place: which curated mutants each lane runs. The
//! trial, message and lanes of each are its header's
//! (`fixtures/kvcr-mutants/<name>.diff`). The trial `set::well_formed` (no
//! stack) checks that every name exists, applies to its lane and is expected
//! killed, that the CPU set covers every class the suite claims to check,
//! and that docs/kvcr-under-test.md's table of the set lists each trial.

/// One mutant of the short set.
pub struct Entry {
    /// The class it stands for, as the trial name's middle part.
    pub class_key: &'static str,
    /// The curated mutant's name.
    pub mutant: &'static str,
}

const fn e(class_key: &'static str, mutant: &'static str) -> Entry {
    Entry { class_key, mutant }
}

/// CPU engine: one mutant per class the suite claims to check, the fastest
/// of each that its header expects killed (7-27 s a stack in the hand
/// validation).
pub const CPU: &[Entry] = &[
    e("host_tier", "local-deliver-pages-reversed"),
    e("peer_transfer", "write-done-indices-one-based"),
    e("transfer_accounting", "source-write-bytes-double-counted"),
    e("hints", "hint-parser-drops-last-hash"),
    e("guard_promotion", "guard-promoted-event-one-based"),
    e("handback_reclaim", "handback-keeps-only-accessed"),
    e("hybrid_pages", "peer-pull-drops-part-pages"),
    e("p2d", "source-refuses-second-target"),
];

/// vLLM engine (`phase1_vllm`, aggregated dense): mutants whose `lanes`
/// include vllm, one for each of TC-02, TC-03 and TC-05 (vLLM has no fault
/// switches, so these are those cases' rows there). Ignored by default: a
/// vLLM stack takes minutes.
pub const VLLM: &[Entry] = &[
    e("host_tier", "local-deliver-skips-last-block"),
    e("transfer_accounting", "source-write-bytes-double-counted"),
    e("hints", "hint-parser-reads-renamed-source-field"),
    e("dram_hit_arm", "local-deliver-blocks-counted-per-op"),
];

/// The checks of `set::well_formed`, as one message per problem.
pub fn problems(all: &[kvcr_e2e::mutants::curated::Mutant]) -> Vec<String> {
    use kvcr_e2e::engine::Kind;
    use kvcr_e2e::mutants::{Expect, MutantClass};
    let mut problems = Vec::new();
    for (lane, set) in [(Kind::Cpu, CPU), (Kind::Vllm, VLLM)] {
        for entry in set {
            let Some(m) = all.iter().find(|m| m.header.name == entry.mutant) else {
                problems.push(format!("{}: no such curated mutant", entry.mutant));
                continue;
            };
            let h = &m.header;
            if !h.engines.contains(&lane) {
                problems.push(format!("{}: its lanes exclude {}", h.name, lane.as_str()));
            }
            if h.expect != Expect::Killed {
                problems.push(format!("{}: its header expects it to survive", h.name));
            }
            if h.message.is_none() {
                problems.push(format!("{}: its header names no message", h.name));
            }
        }
    }
    for class in MutantClass::ALL
        .into_iter()
        .filter(|c| c.phase1_claims_it())
    {
        let covered = CPU.iter().any(|entry| {
            all.iter()
                .any(|m| m.header.name == entry.mutant && m.header.class == class)
        });
        if !covered {
            problems.push(format!("the CPU set has no mutant of class {class}"));
        }
    }
    problems
}

/// The short set's table in `doc` (docs/kvcr-under-test.md): a row
/// ``| `LANE::CLASS::…` … | `MUTANT` | …`` for each entry and no other, so
/// the page cannot drift from the set.
pub fn doc_problems(doc: &str) -> Vec<String> {
    let rows: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("| `cpu::") || l.starts_with("| `vllm::"))
        .collect();
    let mut problems = Vec::new();
    let mut listed = 0;
    for (lane, set) in [("cpu", CPU), ("vllm", VLLM)] {
        for entry in set {
            let trial = format!("| `{lane}::{}::…`", entry.class_key);
            let mutant = format!("| `{}` |", entry.mutant);
            match rows.iter().find(|r| r.starts_with(&trial)) {
                Some(row) if row.contains(&mutant) => listed += 1,
                Some(row) => problems.push(format!(
                    "the docs' row of {lane}::{} names another mutant than {}: {row}",
                    entry.class_key, entry.mutant
                )),
                None => problems.push(format!(
                    "the docs' short-set table has no row `{lane}::{}::…` ({})",
                    entry.class_key, entry.mutant
                )),
            }
        }
    }
    if rows.len() != listed {
        problems.push(format!(
            "the docs' short-set table has {} rows, the set {} trials",
            rows.len(),
            CPU.len() + VLLM.len()
        ));
    }
    problems
}
