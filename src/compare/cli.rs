//! `kvcr-e2e compare-results`: compare existing phase1 runs of two builds.

use std::path::PathBuf;

use super::comparison::{Method, Rule};
use crate::stats::Bootstrap;

/// Parsed arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareArgs {
    /// Base runs, in pair order.
    pub base: Vec<PathBuf>,
    /// Head runs, in pair order.
    pub head: Vec<PathBuf>,
    /// Output directory.
    pub out: PathBuf,
    /// The verdict rule.
    pub rule: Rule,
    /// The bootstrap settings.
    pub bootstrap: Bootstrap,
}

impl CompareArgs {
    /// Parses the arguments after `compare-results`; `default_out` is used
    /// without `--out`.
    pub fn parse(args: &[String], default_out: PathBuf) -> Result<Self, String> {
        let mut parsed = CompareArgs {
            base: Vec::new(),
            head: Vec::new(),
            out: default_out,
            rule: Rule::default(),
            bootstrap: Bootstrap::default(),
        };
        let mut heads = false;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if arg == "--head" {
                heads = true;
                continue;
            }
            if !arg.starts_with("--") {
                let list = if heads {
                    &mut parsed.head
                } else {
                    &mut parsed.base
                };
                list.push(PathBuf::from(arg));
                continue;
            }
            let value = it
                .next()
                .ok_or_else(|| format!("{arg} needs a value"))?
                .as_str();
            match arg.as_str() {
                "--out" => parsed.out = PathBuf::from(value),
                _ => {
                    if !apply_statistics_flag(arg, value, &mut parsed.rule, &mut parsed.bootstrap)?
                    {
                        return Err(format!("unknown flag {arg}"));
                    }
                }
            }
        }
        if parsed.base.is_empty() || parsed.head.is_empty() {
            return Err("give at least one base run and, after --head, one head run".into());
        }
        parsed.rule = parsed.rule.checked().map_err(|e| e.to_string())?;
        Ok(parsed)
    }
}

/// Applies one of the statistics flags shared by `compare-results` and
/// `compare` (`--resamples`, `--seed`, `--confidence`, `--min-change`,
/// `--min-pairs`, `--scope`, `--method`);
/// `Ok(false)` when `arg` is none of them.
pub fn apply_statistics_flag(
    arg: &str,
    value: &str,
    rule: &mut Rule,
    bootstrap: &mut Bootstrap,
) -> Result<bool, String> {
    let bad = |what: &str| format!("{arg} {value:?}: {what}");
    match arg {
        "--resamples" => {
            bootstrap.resamples = value
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| bad("not a count above 0"))?
        }
        "--seed" => bootstrap.seed = value.parse().map_err(|_| bad("not an integer"))?,
        "--confidence" => rule.confidence = value.parse().map_err(|_| bad("not a number"))?,
        "--min-change" => {
            rule.min_relative_change = value.parse().map_err(|_| bad("not a number"))?
        }
        "--min-pairs" => rule.min_pairs = value.parse().map_err(|_| bad("not a count"))?,
        "--scope" => {
            rule.familywise = match value {
                "familywise" => true,
                "per-figure" => false,
                _ => return Err(bad("not familywise or per-figure")),
            }
        }
        "--method" => {
            rule.method = match value {
                "paired" => Method::Paired,
                "paired-log" => Method::PairedLog,
                "pooled" => Method::Pooled,
                _ => return Err(bad("not paired, paired-log or pooled")),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn runs_flags_and_defaults() {
        let a = CompareArgs::parse(
            &args("a1 a2 --resamples 500 --head b1 b2 --min-change 0.2 --out o"),
            "target/compare".into(),
        )
        .unwrap();
        assert_eq!(a.base, vec![PathBuf::from("a1"), PathBuf::from("a2")]);
        assert_eq!(a.head, vec![PathBuf::from("b1"), PathBuf::from("b2")]);
        assert_eq!(a.out, PathBuf::from("o"));
        assert_eq!(a.bootstrap.resamples, 500);
        assert_eq!(a.rule.min_relative_change, 0.2);
        assert_eq!(a.rule.confidence, 0.95);
        assert_eq!(a.rule.min_pairs, crate::compare::DEFAULT_MIN_PAIRS);
        let p = CompareArgs::parse(&args("a --head b --min-pairs 8"), "o".into()).unwrap();
        assert_eq!(p.rule.min_pairs, 8);
        let d = CompareArgs::parse(&args("a --head b"), "dflt".into()).unwrap();
        assert_eq!((d.out, d.bootstrap), ("dflt".into(), Bootstrap::default()));
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        for (line, want) in [
            ("a b", "after --head"),
            ("--head b", "one base run"),
            ("a --head b --resamples 0", "above 0"),
            ("a --head b --confidence 1.5", "between 0 and 1"),
            ("a --head b --min-pairs 1", "at least 2"),
            ("a --head b --min-pairs x", "not a count"),
            ("a --head b --seed", "needs a value"),
            ("a --head b --frobnicate 1", "unknown flag"),
        ] {
            let err = CompareArgs::parse(&args(line), "o".into()).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
    }
}
