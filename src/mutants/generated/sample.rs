//! The mutation sites cosmic-ray enumerates, their stable names, and the
//! seeded draw: the same sites and seed give the same order on any machine.

use serde::{Deserialize, Serialize};

/// One mutation site: an operator's `occurrence`-th match in a module, as
/// `cosmic_ray_sites.py sites` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    /// Relative to site-packages: `kvcr/local_dram.py`.
    pub module: String,
    /// cosmic-ray's operator name: `core/ReplaceComparisonOperator_Lt_LtE`.
    pub operator: String,
    /// Counts per module and operator, in cosmic-ray's walk order.
    pub occurrence: u32,
    /// `[line, column]`, 1-based line.
    pub start: [u32; 2],
    pub end: [u32; 2],
    /// The enclosing function or class, when there is one.
    #[serde(default)]
    pub definition: Option<String>,
}

impl Site {
    /// `local_dram` for `kvcr/local_dram.py`.
    pub fn module_name(&self) -> &str {
        let file = self.module.rsplit('/').next().unwrap_or(&self.module);
        file.strip_suffix(".py").unwrap_or(file)
    }

    /// `gen-local_dram-ReplaceComparisonOperator_Lt_LtE-3-L412`: module,
    /// operator, occurrence and line; stable for one kvcr and cosmic-ray
    /// version, and a file name.
    pub fn name(&self) -> String {
        let operator = self
            .operator
            .strip_prefix("core/")
            .unwrap_or(&self.operator)
            .replace(|c: char| !(c.is_ascii_alphanumeric() || c == '_'), "_");
        format!(
            "gen-{}-{operator}-{}-L{}",
            self.module_name(),
            self.occurrence,
            self.start[0]
        )
    }
}

/// Parses the `sites` output: one JSON object per line.
pub fn parse_sites(jsonl: &str) -> Result<Vec<Site>, String> {
    jsonl
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .map_err(|e| format!("site line {}: {e}: {}", i + 1, truncate(line)))
        })
        .collect()
}

/// Every site in draw order for `seed`: sorted by (module, operator,
/// occurrence) first, so the order cosmic-ray walks them in does not
/// matter, then shuffled by a seeded Fisher-Yates. The driver takes the
/// first N that make a valid module.
pub fn draw_order(sites: &[Site], seed: u64) -> Vec<Site> {
    let mut order = sites.to_vec();
    order.sort_by(|a, b| {
        (&a.module, &a.operator, a.occurrence).cmp(&(&b.module, &b.operator, b.occurrence))
    });
    order.dedup_by(|a, b| {
        a.module == b.module && a.operator == b.operator && a.occurrence == b.occurrence
    });
    let mut rng = SplitMix64(seed);
    for i in (1..order.len()).rev() {
        // A modulo draw: its bias (< n / 2^64) does not matter here.
        let j = (rng.next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// SplitMix64 (Steele, Lea, Flood 2014): a fixed, tiny generator, so the
/// draw does not depend on a crate's choice of algorithm.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn truncate(line: &str) -> String {
    line.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(module: &str, operator: &str, occurrence: u32, line: u32) -> Site {
        Site {
            module: format!("kvcr/{module}.py"),
            operator: format!("core/{operator}"),
            occurrence,
            start: [line, 4],
            end: [line, 5],
            definition: None,
        }
    }

    fn sites() -> Vec<Site> {
        let mut all = Vec::new();
        for (m, module) in ["core", "guard", "local_dram"].iter().enumerate() {
            for (o, op) in ["AddNot", "NumberReplacer", "ReplaceAndWithOr"]
                .iter()
                .enumerate()
            {
                for occ in 0..7 {
                    all.push(site(module, op, occ, (m * 100 + o * 10) as u32 + occ));
                }
            }
        }
        all
    }

    #[test]
    fn the_draw_is_fixed_by_the_seed_not_by_the_input_order() {
        let all = sites();
        let a = draw_order(&all, 1);
        let mut reversed = all.clone();
        reversed.reverse();
        assert_eq!(a, draw_order(&reversed, 1), "input order does not matter");
        assert_eq!(a, draw_order(&all, 1), "same seed, same order");
        assert_ne!(a, draw_order(&all, 2), "another seed, another order");
        assert_eq!(a.len(), all.len(), "a permutation: nothing lost");
        let mut names: Vec<String> = a.iter().map(Site::name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "names are unique");
    }

    #[test]
    fn the_draw_is_the_same_on_every_machine() {
        // Pinned: a change of this order changes every recorded sample.
        let first: Vec<String> = draw_order(&sites(), 1)
            .iter()
            .take(4)
            .map(Site::name)
            .collect();
        assert_eq!(
            first,
            [
                "gen-local_dram-ReplaceAndWithOr-5-L225",
                "gen-core-ReplaceAndWithOr-1-L21",
                "gen-core-ReplaceAndWithOr-5-L25",
                "gen-local_dram-AddNot-0-L200",
            ]
        );
        let mut rng = SplitMix64(0);
        assert_eq!(
            rng.next(),
            0xE220_A839_7B1D_CDAF,
            "SplitMix64's reference value"
        );
    }

    #[test]
    fn names_carry_module_operator_occurrence_and_line() {
        let s = site(
            "remote_fw_dram",
            "ReplaceComparisonOperator_NotEq_LtE",
            12,
            901,
        );
        assert_eq!(s.module_name(), "remote_fw_dram");
        assert_eq!(
            s.name(),
            "gen-remote_fw_dram-ReplaceComparisonOperator_NotEq_LtE-12-L901"
        );
    }

    #[test]
    fn sites_parse_from_json_lines_and_bad_lines_are_named() {
        let text = r#"{"module": "kvcr/hint_parser.py", "operator": "core/AddNot", "occurrence": 0, "start": [33, 4], "end": [33, 5], "definition": "parse"}

{"module": "kvcr/hint_parser.py", "operator": "core/AddNot", "occurrence": 1, "start": [40, 8], "end": [40, 9], "definition": null}
"#;
        let parsed = parse_sites(text).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].definition.as_deref(), Some("parse"));
        assert_eq!(parsed[1].name(), "gen-hint_parser-AddNot-1-L40");
        let err = parse_sites("{\"module\": 3}\n").unwrap_err();
        assert!(err.starts_with("site line 1:"), "{err}");
    }
}
