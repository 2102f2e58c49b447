//! The curated set on disk, and which of it a lane runs.

use std::path::{Path, PathBuf};

use super::header::{self, MutantHeader};
use crate::engine::Kind;

/// One curated mutant: its header and its diff file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutant {
    pub header: MutantHeader,
    /// The `.diff` file (absolute when `dir` was).
    pub diff: PathBuf,
}

/// Every `*.diff` under `dir`, headers checked, in name order.
pub fn load_all(dir: &Path) -> Result<Vec<Mutant>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut mutants = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".diff"))
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let header = header::parse(stem, &text).map_err(|e| e.to_string())?;
        mutants.push(Mutant { header, diff: path });
    }
    mutants.sort_by(|a, b| a.header.name.cmp(&b.header.name));
    Ok(mutants)
}

/// The mutants a batch on `engine` runs: those named by `only` (each must
/// exist and apply to the engine), or by default every one whose `lanes`
/// include it.
pub fn select(
    all: Vec<Mutant>,
    only: Option<&[String]>,
    engine: Kind,
) -> Result<Vec<Mutant>, String> {
    let Some(names) = only else {
        return Ok(all
            .into_iter()
            .filter(|m| m.header.engines.contains(&engine))
            .collect());
    };
    let mut chosen = Vec::new();
    for name in names {
        let Some(found) = all.iter().find(|m| &m.header.name == name) else {
            let known: Vec<&str> = all.iter().map(|m| m.header.name.as_str()).collect();
            return Err(format!(
                "no curated mutant `{name}`; known: {}",
                known.join(", ")
            ));
        };
        if !found.header.engines.contains(&engine) {
            let engines: Vec<&str> = found.header.engines.iter().map(|e| e.as_str()).collect();
            return Err(format!(
                "`{name}` does not apply to the {engine} lane (its lanes: {})",
                engines.join(",")
            ));
        }
        if !chosen.contains(found) {
            chosen.push(found.clone());
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_set() -> Vec<Mutant> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(super::super::MUTANTS_DIR);
        load_all(&dir).unwrap()
    }

    #[test]
    fn the_curated_set_loads_in_name_order() {
        let all = repo_set();
        assert!(all.len() >= 20, "{}", all.len());
        let names: Vec<&str> = all.iter().map(|m| m.header.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert!(all
            .iter()
            .all(|m| m.diff.extension().is_some_and(|e| e == "diff")));
    }

    #[test]
    fn by_default_a_lane_runs_every_mutant_that_applies_to_it() {
        let all = repo_set();
        let cpu = select(all.clone(), None, Kind::Cpu).unwrap();
        let vllm = select(all.clone(), None, Kind::Vllm).unwrap();
        assert_eq!(
            cpu.len(),
            all.iter()
                .filter(|m| m.header.engines.contains(&Kind::Cpu))
                .count()
        );
        assert!(vllm.len() < cpu.len());
        assert!(vllm.iter().all(|m| m.header.engines.contains(&Kind::Vllm)));
    }

    #[test]
    fn only_names_known_mutants_of_the_lane_in_the_given_order() {
        let all = repo_set();
        let only = [
            "source-write-bytes-double-counted".to_string(),
            "local-deliver-pages-reversed".to_string(),
        ];
        let chosen = select(all.clone(), Some(&only), Kind::Cpu).unwrap();
        let names: Vec<&str> = chosen.iter().map(|m| m.header.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "source-write-bytes-double-counted",
                "local-deliver-pages-reversed"
            ]
        );

        let err = select(all.clone(), Some(&["no-such".to_string()]), Kind::Cpu).unwrap_err();
        assert!(err.contains("no curated mutant `no-such`"), "{err}");
        // A multi-page mutant is CPU-lane only.
        let err = select(
            all,
            Some(&["local-deliver-pages-reversed".to_string()]),
            Kind::Vllm,
        )
        .unwrap_err();
        assert!(err.contains("does not apply to the vllm lane"), "{err}");
    }
}
