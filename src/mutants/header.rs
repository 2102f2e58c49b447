//! The header of a curated KVCR mutant (`fixtures/kvcr-mutants/<name>.diff`).
//!
//! A mutant file is a unified diff against the installed `kvcr` package
//! (paths `a/kvcr/<module>.py`, applied with `patch -p1` from site-packages),
//! preceded by comment lines that `patch` skips:
//!
//! ```text
//! # mutant: source-write-reversed-blocks
//! # models: the source assembles a peer write from its claimed blocks newest-first
//! #   while the target's destinations are in request order.
//! # class: peer-transfer-correctness
//! # caught-by: TC-03::hinted_peer_transfer
//! # message: reference tokens
//! # lanes: cpu,vllm
//! # topology: agg
//! # expect: killed
//! --- a/kvcr/remote_fw_dram.py
//! +++ b/kvcr/remote_fw_dram.py
//! ```
//!
//! A line `#` followed by two or more spaces continues the field above it.
//! `fixtures/kvcr-mutants/README.md` documents every field. The stack is
//! named in the engine room's words: `lanes` are engines (`--engine`),
//! `topology` and `geometry` those of `--topology` and `--geometry`.

use std::fmt;

use crate::engine::{GeometryKind, Kind, StackSpec, Topology};
use crate::lanes::{same_cases, Lane, LANES};

/// What kind of KVCR behaviour a mutant breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MutantClass {
    HostTierCorrectness,
    PeerTransferCorrectness,
    TransferAccounting,
    Hints,
    GuardPromotion,
    HandbackReclaim,
    HybridPages,
    PrefillToDecode,
    PoolPressure,
    Lifecycle,
    Slowdown,
}

impl MutantClass {
    pub const ALL: [MutantClass; 11] = [
        MutantClass::HostTierCorrectness,
        MutantClass::PeerTransferCorrectness,
        MutantClass::TransferAccounting,
        MutantClass::Hints,
        MutantClass::GuardPromotion,
        MutantClass::HandbackReclaim,
        MutantClass::HybridPages,
        MutantClass::PrefillToDecode,
        MutantClass::PoolPressure,
        MutantClass::Lifecycle,
        MutantClass::Slowdown,
    ];

    /// The spelling in a header.
    pub fn as_str(self) -> &'static str {
        match self {
            MutantClass::HostTierCorrectness => "host-tier-correctness",
            MutantClass::PeerTransferCorrectness => "peer-transfer-correctness",
            MutantClass::TransferAccounting => "transfer-accounting",
            MutantClass::Hints => "hints",
            MutantClass::GuardPromotion => "guard-promotion",
            MutantClass::HandbackReclaim => "handback-reclaim",
            MutantClass::HybridPages => "hybrid-pages",
            MutantClass::PrefillToDecode => "p2d",
            MutantClass::PoolPressure => "pool-pressure",
            MutantClass::Lifecycle => "lifecycle",
            MutantClass::Slowdown => "slowdown",
        }
    }

    /// Whether Phase 1 claims to check this behaviour today. Mutants of the
    /// other classes (pool pressure, lifecycle, slowdowns) wait for cases of
    /// their own, so they count apart from the score.
    pub fn phase1_claims_it(self) -> bool {
        !matches!(
            self,
            MutantClass::PoolPressure | MutantClass::Lifecycle | MutantClass::Slowdown
        )
    }

    fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == value)
    }
}

impl fmt::Display for MutantClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the named cases do against the mutant today.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// At least one named case turns red with `message`.
    Killed,
    /// Every named case stays green; `reading` says why (a gap or an
    /// equivalent mutant).
    Survives,
}

impl MutantHeader {
    /// The header as a run on `engine` judges it: its `message` is the
    /// engine's own (`message-vllm` on vLLM).
    pub fn for_engine(mut self, engine: Kind) -> Self {
        if engine == Kind::Vllm {
            if let Some(vllm) = self.message_vllm.take() {
                self.message = Some(vllm);
            }
        }
        self
    }
}

/// One mutant's header, checked complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantHeader {
    pub name: String,
    /// The plausible real bug it models.
    pub models: String,
    pub class: MutantClass,
    /// Trials to run (besides TC-01), e.g. `TC-03::hinted_peer_transfer`.
    pub caught_by: Vec<String>,
    /// A stable substring of the failure message; `None` for a survivor.
    pub message: Option<String>,
    /// The vLLM lane's message where the same bug fails otherwise there
    /// (e.g. a request that never completes instead of a wrong count).
    pub message_vllm: Option<String>,
    /// The engines it applies to (the header's `lanes`), in its order.
    pub engines: Vec<Kind>,
    pub topology: Topology,
    pub geometry: GeometryKind,
    pub expect: Expect,
    /// Why it survives: equivalent, or which verdict is missing where.
    pub reading: Option<String>,
    /// What must run before the named trials, in words (e.g. TC-04 first).
    pub needs: Option<String>,
    /// The lane whose cases it runs in place of phase 1's (`phase2`,
    /// `phase2_g3`: the production cases' lanes): a lane of [`LANES`] that
    /// runs cases of its own ([`suites`]).
    pub suite: Option<&'static str>,
}

impl MutantHeader {
    /// The stack it runs on with `engine`: its topology and geometry.
    pub fn stack(&self, engine: Kind) -> StackSpec {
        StackSpec::new(engine, self.topology, self.geometry)
    }

    /// The header run on `stack`'s topology and geometry instead of its own
    /// (`kvcr-e2e mutants --stack`): where it names the default stack (agg,
    /// dense) or the same one. A mutant that needs another topology or
    /// geometry would lose what makes it observable, so that is an error.
    pub fn on_stack(mut self, stack: StackSpec) -> Result<Self, String> {
        let own = (self.topology, self.geometry);
        let default = (Topology::Agg, GeometryKind::Dense);
        if own != default && own != (stack.topology, stack.geometry) {
            return Err(format!(
                "{}: its header needs {}, not {stack} (--stack runs mutants written for agg/dense, or for that stack)",
                self.name,
                self.stack(stack.engine)
            ));
        }
        self.topology = stack.topology;
        self.geometry = stack.geometry;
        Ok(self)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("{file}: line {line} of the header is not a `# key: value` comment: `{text}` (the header is the comment lines before the first `--- `)")]
    NotAComment {
        file: String,
        line: usize,
        text: String,
    },
    #[error("{file}: unknown header field `{key}`; known: {known}")]
    UnknownField {
        file: String,
        key: String,
        known: &'static str,
    },
    #[error("{file}: header field `{key}` appears twice")]
    Repeated { file: String, key: String },
    #[error("{file}: header lacks `# {key}: ...`")]
    Missing { file: String, key: &'static str },
    #[error("{file}: `{key}: {value}` is not valid: {why}")]
    Invalid {
        file: String,
        key: &'static str,
        value: String,
        why: String,
    },
    #[error("{file}: no diff after the header (expected `--- a/kvcr/<module>.py`)")]
    NoDiff { file: String },
    #[error("{file}: the diff touches `{path}`; a mutant patches only `kvcr/<module>.py` files, as `--- a/kvcr/...` / `+++ b/kvcr/...`")]
    ForeignPath { file: String, path: String },
}

const KNOWN_FIELDS: &str =
    "mutant, models, class, caught-by, message, message-vllm, lanes, topology, geometry, expect, reading, needs, suite";

/// The lanes a mutant's `suite` may name: those that run cases, other than
/// phase 1's.
pub fn suites() -> impl Iterator<Item = &'static Lane> {
    LANES.iter().filter(|lane| {
        lane.cases()
            .is_some_and(|cases| !same_cases(cases, crate::cases::PHASE1))
    })
}

/// Parses the header of `text`, the whole `.diff` file named `file_stem`.diff.
pub fn parse(file_stem: &str, text: &str) -> Result<MutantHeader, HeaderError> {
    let file = format!("{file_stem}.diff");
    let fields = fields(&file, text)?;
    let get = |key: &'static str| -> Result<&str, HeaderError> {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or(HeaderError::Missing {
                file: file.clone(),
                key,
            })
    };
    let optional = |key: &'static str| fields.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let invalid = |key: &'static str, value: &str, why: String| HeaderError::Invalid {
        file: file.clone(),
        key,
        value: value.to_string(),
        why,
    };

    let name = get("mutant")?.to_string();
    if name != file_stem {
        return Err(invalid(
            "mutant",
            &name,
            format!("it must equal the file name without `.diff` (`{file_stem}`)"),
        ));
    }
    let models = get("models")?.to_string();
    if models.split_whitespace().count() < 5 {
        return Err(invalid(
            "models",
            &models,
            "say in a sentence or two which real bug this models".into(),
        ));
    }
    let class_text = get("class")?;
    let class = MutantClass::parse(class_text).ok_or_else(|| {
        invalid(
            "class",
            class_text,
            format!(
                "expected one of {}",
                MutantClass::ALL.map(MutantClass::as_str).join(", ")
            ),
        )
    })?;
    let caught_text = get("caught-by")?;
    let caught_by: Vec<String> = caught_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if caught_by.is_empty() {
        return Err(invalid(
            "caught-by",
            caught_text,
            "name at least one trial".into(),
        ));
    }
    if let Some(bad) = caught_by.iter().find(|t| !is_trial_name(t)) {
        return Err(invalid(
            "caught-by",
            caught_text,
            format!("`{bad}` is not a trial name such as TC-03::hinted_peer_transfer"),
        ));
    }
    let expect_text = get("expect")?;
    let expect = match expect_text {
        "killed" => Expect::Killed,
        "survives" => Expect::Survives,
        other => {
            return Err(invalid(
                "expect",
                other,
                "expected `killed` or `survives`".into(),
            ))
        }
    };
    let message_text = get("message")?;
    let message = match (expect, message_text) {
        (Expect::Killed, "-") => {
            return Err(invalid(
                "message",
                message_text,
                "a killed mutant names a stable substring of its failure message".into(),
            ))
        }
        (Expect::Survives, "-") => None,
        (Expect::Survives, m) => {
            return Err(invalid(
                "message",
                m,
                "a survivor has no failure message; write `-`".into(),
            ))
        }
        (Expect::Killed, m) => Some(m.to_string()),
    };
    let message_vllm = optional("message-vllm").cloned();
    if message_vllm.is_some() && message.is_none() {
        return Err(invalid(
            "message-vllm",
            message_text,
            "a survivor has no failure message on any lane".into(),
        ));
    }
    let reading = optional("reading").cloned();
    match (expect, &reading) {
        (Expect::Survives, None) => {
            return Err(HeaderError::Missing {
                file: file.clone(),
                key: "reading",
            })
        }
        (Expect::Killed, Some(r)) => {
            return Err(invalid(
                "reading",
                r,
                "only a survivor has a reading".into(),
            ))
        }
        _ => {}
    }
    if let Some(r) = &reading {
        if !(r.starts_with("gap.") || r.starts_with("equivalent.")) {
            return Err(invalid(
                "reading",
                r,
                "start with `gap.` (then which verdict is missing, in which case) or `equivalent.` (then why)".into(),
            ));
        }
    }
    let lanes_text = get("lanes")?;
    let mut engines = Vec::new();
    for word in lanes_text.split(',').map(str::trim) {
        let engine: Kind = word
            .parse()
            .map_err(|why| invalid("lanes", lanes_text, why))?;
        if engines.contains(&engine) {
            return Err(invalid(
                "lanes",
                lanes_text,
                "an engine is listed twice".into(),
            ));
        }
        engines.push(engine);
    }
    let word = |key: &'static str| optional(key).map(String::as_str);
    let topology = match word("topology") {
        None => Topology::Agg,
        Some(given) => given
            .parse()
            .map_err(|why| invalid("topology", given, why))?,
    };
    let geometry = match word("geometry") {
        None => GeometryKind::Dense,
        Some(given) => given
            .parse()
            .map_err(|why| invalid("geometry", given, why))?,
    };
    let suite = match word("suite") {
        None => None,
        Some(given) => match suites().find(|lane| lane.target == given) {
            Some(lane) => Some(lane.target),
            None => {
                let known: Vec<&str> = suites().map(|lane| lane.target).collect();
                return Err(invalid(
                    "suite",
                    given,
                    format!(
                        "expected a lane of cases other than phase 1's: {}",
                        known.join(", ")
                    ),
                ));
            }
        },
    };
    let header = MutantHeader {
        name,
        models,
        class,
        caught_by,
        message,
        message_vllm,
        engines,
        topology,
        geometry,
        expect,
        reading,
        needs: optional("needs").cloned(),
        suite,
    };
    check_diff_paths(&file, text)?;
    Ok(header)
}

/// The `(key, value)` pairs of the header, continuation lines joined.
fn fields(file: &str, text: &str) -> Result<Vec<(String, String)>, HeaderError> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("--- ") {
            return Ok(fields);
        }
        let not_a_comment = || HeaderError::NotAComment {
            file: file.to_string(),
            line: i + 1,
            text: line.to_string(),
        };
        let Some(rest) = line.strip_prefix('#') else {
            return Err(not_a_comment());
        };
        if rest.starts_with("  ") && !rest.trim().is_empty() {
            let Some((_, value)) = fields.last_mut() else {
                return Err(not_a_comment());
            };
            value.push(' ');
            value.push_str(rest.trim());
            continue;
        }
        let Some((key, value)) = rest.trim().split_once(':') else {
            return Err(not_a_comment());
        };
        let key = key.trim();
        if !KNOWN_FIELDS.split(", ").any(|k| k == key) {
            return Err(HeaderError::UnknownField {
                file: file.to_string(),
                key: key.to_string(),
                known: KNOWN_FIELDS,
            });
        }
        if fields.iter().any(|(k, _)| k == key) {
            return Err(HeaderError::Repeated {
                file: file.to_string(),
                key: key.to_string(),
            });
        }
        fields.push((key.to_string(), value.trim().to_string()));
    }
    Err(HeaderError::NoDiff {
        file: file.to_string(),
    })
}

fn is_trial_name(trial: &str) -> bool {
    let Some((case, name)) = trial.split_once("::") else {
        return false;
    };
    let number = case.strip_prefix("TC-").unwrap_or("");
    number.len() == 2
        && number.bytes().all(|b| b.is_ascii_digit())
        && !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Every file the diff touches is a module of the kvcr package.
fn check_diff_paths(file: &str, text: &str) -> Result<(), HeaderError> {
    let mut any = false;
    for line in text.lines() {
        let path = match (line.strip_prefix("--- "), line.strip_prefix("+++ ")) {
            (Some(p), _) => p.strip_prefix("a/"),
            (_, Some(p)) => p.strip_prefix("b/"),
            _ => continue,
        };
        any = true;
        let path_ok = path.map(|p| p.split('\t').next().unwrap_or(p)).filter(|p| {
            p.strip_prefix("kvcr/")
                .is_some_and(|m| m.ends_with(".py") && !m.contains("..") && !m.starts_with('/'))
        });
        if path_ok.is_none() {
            return Err(HeaderError::ForeignPath {
                file: file.to_string(),
                path: line[4..].to_string(),
            });
        }
    }
    if any {
        Ok(())
    } else {
        Err(HeaderError::NoDiff {
            file: file.to_string(),
        })
    }
}

/// The modules a mutant patches (`kvcr/<module>.py`), in diff order.
pub fn patched_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("+++ b/"))
        .map(|p| p.split('\t').next().unwrap_or(p).to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "--- a/kvcr/core.py\n+++ b/kvcr/core.py\n@@ -1,1 +1,1 @@\n-a\n+b\n";

    fn killed() -> String {
        format!(
            "# mutant: m\n\
             # models: the source writes the blocks in\n\
             #   reverse order of the destinations.\n\
             # class: peer-transfer-correctness\n\
             # caught-by: TC-03::hinted_peer_transfer, TC-04::guard_takeover_and_replacement\n\
             # message: reference tokens\n\
             # lanes: cpu,vllm\n\
             # expect: killed\n{DIFF}"
        )
    }

    #[test]
    fn a_complete_header_parses() {
        let h = parse("m", &killed()).unwrap();
        assert_eq!(h.name, "m");
        assert_eq!(
            h.models,
            "the source writes the blocks in reverse order of the destinations."
        );
        assert_eq!(h.class, MutantClass::PeerTransferCorrectness);
        assert_eq!(
            h.caught_by,
            [
                "TC-03::hinted_peer_transfer",
                "TC-04::guard_takeover_and_replacement"
            ]
        );
        assert_eq!(h.message.as_deref(), Some("reference tokens"));
        assert_eq!(h.engines, [Kind::Cpu, Kind::Vllm]);
        assert_eq!(
            (h.topology, h.geometry),
            (Topology::Agg, GeometryKind::Dense)
        );
        assert_eq!(h.stack(Kind::Vllm).to_string(), "vllm/agg/dense");
        assert_eq!(h.expect, Expect::Killed);
        assert_eq!(h.suite, None);
        assert_eq!(patched_modules(&killed()), ["kvcr/core.py"]);
    }

    #[test]
    fn every_missing_required_field_is_named() {
        for key in [
            "mutant",
            "models",
            "class",
            "caught-by",
            "message",
            "lanes",
            "expect",
        ] {
            let text: String = killed()
                .lines()
                .filter(|l| !l.starts_with(&format!("# {key}:")))
                .filter(|l| !(key == "models" && l.starts_with("#  ")))
                .map(|l| format!("{l}\n"))
                .collect();
            let err = parse("m", &text).unwrap_err();
            assert_eq!(
                err,
                HeaderError::Missing {
                    file: "m.diff".into(),
                    key
                },
                "{key}"
            );
            assert!(err.to_string().contains(&format!("lacks `# {key}: ...`")));
        }
    }

    #[test]
    fn a_survivor_needs_a_reading_and_no_message() {
        let survivor = killed()
            .replace("# expect: killed", "# expect: survives")
            .replace("# message: reference tokens", "# message: -");
        assert_eq!(
            parse("m", &survivor).unwrap_err(),
            HeaderError::Missing {
                file: "m.diff".into(),
                key: "reading"
            }
        );
        let with_reading = survivor.replace(
            "# expect: survives",
            "# expect: survives\n# reading: gap. TC-03 reads no such counter.",
        );
        let h = parse("m", &with_reading).unwrap();
        assert_eq!(h.expect, Expect::Survives);
        assert_eq!(h.message, None);
        assert_eq!(
            h.reading.as_deref(),
            Some("gap. TC-03 reads no such counter.")
        );
        let unjudged = with_reading.replace("reading: gap.", "reading: maybe.");
        assert!(parse("m", &unjudged)
            .unwrap_err()
            .to_string()
            .contains("start with `gap.`"));
        let with_message = with_reading.replace("# message: -", "# message: x");
        assert!(parse("m", &with_message)
            .unwrap_err()
            .to_string()
            .contains("a survivor has no failure message"));
    }

    #[test]
    fn the_vllm_lane_judges_by_its_own_message() {
        let text = killed().replace(
            "# message: reference tokens",
            "# message: reference tokens\n# message-vllm: no response",
        );
        let h = parse("m", &text).unwrap();
        assert_eq!(
            h.clone().for_engine(Kind::Cpu).message.as_deref(),
            Some("reference tokens")
        );
        assert_eq!(
            h.for_engine(Kind::Vllm).message.as_deref(),
            Some("no response")
        );
        let plain = parse("m", &killed()).unwrap();
        assert_eq!(
            plain.for_engine(Kind::Vllm).message.as_deref(),
            Some("reference tokens")
        );
    }

    #[test]
    fn a_killed_mutant_needs_a_message() {
        let text = killed().replace("# message: reference tokens", "# message: -");
        assert!(parse("m", &text)
            .unwrap_err()
            .to_string()
            .contains("names a stable substring"));
    }

    #[test]
    fn bad_values_say_what_is_accepted() {
        let cases = [
            (
                "# class: peer-transfer-correctness",
                "# class: speed",
                "expected one of host-tier-correctness",
            ),
            (
                "# lanes: cpu,vllm",
                "# lanes: cpu,gpu",
                "unknown engine `gpu`: expected one of cpu, vllm",
            ),
            ("# lanes: cpu,vllm", "# lanes: cpu,cpu", "listed twice"),
            (
                "# caught-by: TC-03::hinted_peer_transfer,",
                "# caught-by: TC-3,",
                "not a trial name",
            ),
            (
                "# expect: killed",
                "# expect: maybe",
                "`killed` or `survives`",
            ),
            ("# mutant: m", "# mutant: other", "must equal the file name"),
            (
                "# models: the source writes the blocks in\n#   reverse order of the destinations.",
                "# models: bug",
                "which real bug",
            ),
            (
                "# expect: killed",
                "# expect: killed\n# topology: ring",
                "unknown topology `ring`: expected one of agg, 2p1d, two-node",
            ),
            (
                "# expect: killed",
                "# expect: killed\n# geometry: sparse",
                "unknown geometry `sparse`: expected one of dense, hybrid",
            ),
            (
                "# expect: killed",
                "# expect: killed\n# colour: red",
                "unknown header field `colour`",
            ),
            (
                "# expect: killed",
                "# expect: killed\n# class: hints",
                "appears twice",
            ),
            (
                "# expect: killed",
                "# expect: killed\nnot a comment",
                "is not a `# key: value` comment",
            ),
        ];
        for (from, to, expected) in cases {
            let text = killed().replacen(from, to, 1);
            assert_ne!(text, killed(), "{from}");
            let err = parse("m", &text).unwrap_err().to_string();
            assert!(err.contains(expected), "{to}: {err}");
        }
    }

    /// `topology` and `geometry` are read in the words of `--topology` and
    /// `--geometry`; `suite` names a lane of cases other than phase 1's.
    #[test]
    fn topology_geometry_and_suite_name_the_stack() {
        let with = |extra: &str| {
            parse(
                "m",
                &killed().replace("# expect: killed", &format!("# expect: killed\n{extra}")),
            )
        };
        let stack = |extra: &str| with(extra).unwrap().stack(Kind::Vllm).to_string();
        let plain = parse("m", &killed()).unwrap();
        assert_eq!(plain.stack(Kind::Vllm).to_string(), "vllm/agg/dense");
        assert_eq!(stack("# geometry: hybrid"), "vllm/agg/hybrid");
        assert_eq!(stack("# topology: 2p1d"), "vllm/2p1d/dense");
        assert_eq!(stack("# topology: two-node"), "vllm/two-node/dense");
        assert_eq!(with("# suite: phase2").unwrap().suite, Some("phase2"));
        assert_eq!(with("# suite: phase2_g3").unwrap().suite, Some("phase2_g3"));
        for not_a_suite in ["phase4", "phase1", "fault_matrix"] {
            let err = with(&format!("# suite: {not_a_suite}"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("expected a lane of cases other than phase 1's: phase2, phase2_g3, workload, phase3"),
                "{not_a_suite}: {err}"
            );
        }
    }

    #[test]
    fn a_header_without_a_diff_or_with_a_foreign_path_fails() {
        let text = killed().replace(DIFF, "");
        assert!(matches!(
            parse("m", &text).unwrap_err(),
            HeaderError::NoDiff { .. }
        ));
        let foreign = killed().replace("a/kvcr/core.py", "a/vllm/core.py");
        let err = parse("m", &foreign).unwrap_err().to_string();
        assert!(err.contains("touches `a/vllm/core.py`"), "{err}");
        let escape = killed().replace("b/kvcr/core.py", "b/kvcr/../x.py");
        assert!(matches!(
            parse("m", &escape).unwrap_err(),
            HeaderError::ForeignPath { .. }
        ));
    }

    #[test]
    fn only_the_named_classes_are_claimed_by_phase1() {
        let unclaimed: Vec<_> = MutantClass::ALL
            .into_iter()
            .filter(|c| !c.phase1_claims_it())
            .map(MutantClass::as_str)
            .collect();
        assert_eq!(unclaimed, ["pool-pressure", "lifecycle", "slowdown"]);
    }
}
