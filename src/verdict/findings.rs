//! The known findings a case checks (docs/kvcr-findings.md), declared once:
//! each one's number and title, the cases (and engines) that show it, and
//! the check that shows it. A case asks the check (a verdict of this
//! directory returning [`Observed`]) and hands the answer to the suite
//! (`CaseCtx::known_finding`): while a finding shows where it is declared,
//! the case ends as an expected failure; when it no longer shows there, the
//! case fails with "unexpected pass: finding N no longer shows: retire it".

use serde::Serialize;

use crate::engine::Kind;

/// A behaviour of KVCR (or of an engine's KVCR tier) that a user would not
/// expect, numbered as in docs/kvcr-findings.md.
#[derive(Debug, PartialEq, Eq)]
pub struct Known {
    /// Its number in docs/kvcr-findings.md.
    pub number: u32,
    /// Its title there, in one line.
    pub title: &'static str,
    /// Where it shows: each case that checks it, on which engines.
    pub shown_in: &'static [ShownIn],
    /// The check that shows it: the verdict and what it reads.
    pub check: &'static str,
}

/// A case that shows a finding, and the engines it shows on.
#[derive(Debug, PartialEq, Eq)]
pub struct ShownIn {
    /// The case's id (`TC-09`).
    pub case: &'static str,
    pub engines: Engines,
}

/// The engines a finding shows on.
#[derive(Debug, PartialEq, Eq)]
pub enum Engines {
    /// Every engine: the finding is KVCR's own.
    Every,
    /// Only these (an engine's own KVCR tier).
    Only(&'static [Kind]),
}

impl Known {
    /// Whether the finding is declared to show in case `case` on `engine`.
    pub fn shows_in(&self, case: &str, engine: Kind) -> bool {
        self.shown_in.iter().any(|s| {
            s.case == case
                && match s.engines {
                    Engines::Every => true,
                    Engines::Only(kinds) => kinds.contains(&engine),
                }
        })
    }
}

/// Finding 2.
pub static LIVE_HOLDER_UNKNOWN: Known = Known {
    number: 2,
    title: "a restarted service grants an index whose holder is still alive",
    shown_in: &[ShownIn {
        case: "TC-08",
        engines: Engines::Every,
    }],
    check: "verdict::service::live_holder_claim: a claim of the live holder's group on its own \
            control port, made to the restarted service, is refused only because the port is \
            taken, not with `is held by another worker`",
};

/// Finding 3.
pub static UNGUARDED_READ_NEVER_COMPLETES: Known = Known {
    number: 3,
    title: "a read hinted at a dead, unguarded endpoint never completes",
    shown_in: &[ShownIn {
        case: "TC-08",
        // On vLLM the read is answered (its connector gives up on its own)
        // and KVCR's close never runs: vLLM force-kills the engine core at
        // the stop (finding 17), so an unresolved pull cannot be seen.
        engines: Engines::Only(&[Kind::Cpu]),
    }],
    check: "verdict::service::unguarded_read: the peer's read of a prefix only the unguarded, \
            dead worker held gets no answer within four operation timeouts, and nothing promoted; \
            or the peer's engine answers on a deadline of its own and its KVCR then refuses to \
            close with the pull unresolved",
};

/// Finding 8.
pub static SERVES_BEFORE_DEATH_SEEN: Known = Known {
    number: 8,
    title: "a heartbeat promotion serves before the holder's death is seen",
    shown_in: &[ShownIn {
        case: "TC-10",
        engines: Engines::Every,
    }],
    check: "verdict::restart::heartbeat_serving_order: the Guard's promotion stages log `serving` \
            with no `death_observed` before it",
};

/// Finding 17.
pub static ENGINE_CORE_NEVER_DRAINS: Known = Known {
    number: 17,
    title: "vLLM's KVCR tier keeps a SIGTERMed engine core from ever finishing its shutdown, \
            so a clean stop looks like a crash",
    shown_in: &[ShownIn {
        case: "TC-09",
        engines: Engines::Only(&[Kind::Vllm]),
    }],
    check: "verdict::restart::forced_engine_stop: the cleanly stopped worker's log has vLLM's \
            `force killing remaining processes` line (its process manager SIGKILLed the engine \
            core that holds KVCR)",
};

/// Every known finding a case checks, by number.
pub static KNOWN: &[&Known] = &[
    &LIVE_HOLDER_UNKNOWN,
    &UNGUARDED_READ_NEVER_COMPLETES,
    &SERVES_BEFORE_DEATH_SEEN,
    &ENGINE_CORE_NEVER_DRAINS,
];

/// What a finding's check saw: whether the finding showed, and what was
/// seen, in words (either way).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observed {
    #[serde(serialize_with = "number")]
    pub finding: &'static Known,
    pub shows: bool,
    pub seen: String,
}

fn number<S: serde::Serializer>(k: &&'static Known, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u32(k.number)
}

impl Observed {
    /// `finding` showed: `seen` is what showed it.
    pub fn shows(finding: &'static Known, seen: impl Into<String>) -> Self {
        Self {
            finding,
            shows: true,
            seen: seen.into(),
        }
    }

    /// `finding` did not show: `seen` is what was seen instead.
    pub fn absent(finding: &'static Known, seen: impl Into<String>) -> Self {
        Self {
            finding,
            shows: false,
            seen: seen.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_finding_is_declared_once_with_a_case_and_a_check() {
        let mut numbers: Vec<u32> = KNOWN.iter().map(|k| k.number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), KNOWN.len(), "a number declared twice");
        for k in KNOWN {
            assert!(!k.shown_in.is_empty(), "finding {} shows nowhere", k.number);
            assert!(k.check.starts_with("verdict::"), "{}", k.check);
            assert!(!k.title.is_empty());
        }
    }

    #[test]
    fn the_table_matches_docs_kvcr_findings() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/kvcr-findings.md"),
        )
        .unwrap();
        for k in KNOWN {
            let row = format!("| {} | {} |", k.number, k.title);
            assert!(
                doc.contains(&row),
                "docs/kvcr-findings.md has no row `{row}`"
            );
        }
    }

    /// Each reviewed KVCR fix (`fixtures/kvcr-fixes/*.diff`) names a
    /// declared finding and a trial of a case that shows it.
    #[test]
    fn each_kvcr_fix_names_a_declared_finding_and_its_case() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/kvcr-fixes");
        let mut fixes = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "diff") {
                continue;
            }
            fixes += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let field = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(&format!("# {name}: ")))
                    .unwrap_or_else(|| panic!("{} has no `# {name}:`", path.display()))
                    .to_string()
            };
            let fixes_field = field("fixes");
            let number: u32 = fixes_field
                .strip_prefix("docs/kvcr-findings.md ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{}: `# fixes: {fixes_field}`", path.display()));
            let known = KNOWN
                .iter()
                .find(|k| k.number == number)
                .unwrap_or_else(|| panic!("finding {number} is not declared"));
            let trial = field("caught-by");
            assert!(
                known
                    .shown_in
                    .iter()
                    .any(|s| trial.starts_with(&format!("{}::", s.case))),
                "{trial} is not a case that shows finding {number}"
            );
            assert!(field("message").starts_with(&format!(
                "unexpected pass: finding {number} no longer shows"
            )));
            let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
            let name = path.file_name().unwrap().to_string_lossy();
            assert!(readme.contains(&format!("`{name}`")), "README lacks {name}");
        }
        assert!(fixes > 0, "no fix in {}", dir.display());
    }

    #[test]
    fn an_engine_only_finding_is_declared_there_only() {
        assert!(ENGINE_CORE_NEVER_DRAINS.shows_in("TC-09", Kind::Vllm));
        assert!(!ENGINE_CORE_NEVER_DRAINS.shows_in("TC-09", Kind::Cpu));
        assert!(!ENGINE_CORE_NEVER_DRAINS.shows_in("TC-08", Kind::Vllm));
        assert!(SERVES_BEFORE_DEATH_SEEN.shows_in("TC-10", Kind::Cpu));
        assert!(SERVES_BEFORE_DEATH_SEEN.shows_in("TC-10", Kind::Vllm));
    }
}
