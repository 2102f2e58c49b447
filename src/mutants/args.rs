//! `kvcr-e2e mutants` command line.

use std::path::PathBuf;

use super::header::Lane;
use super::plan::RESERVED_KEYS;
use crate::drive;

/// Parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantsArgs {
    /// `--only NAME,...`: these mutants, in this order.
    pub only: Option<Vec<String>>,
    /// `--engine cpu|vllm` (default cpu).
    pub engine: Lane,
    /// `--out DIR` (default `target/mutants/<timestamp>/`).
    pub out: Option<PathBuf>,
    /// Everything else: harness flags for every child, in order.
    pub harness: Vec<String>,
}

impl MutantsArgs {
    /// Parses the arguments after `mutants`.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut parsed = MutantsArgs {
            only: None,
            engine: Lane::Cpu,
            out: None,
            harness: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if arg.starts_with("--") => (n, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            if !matches!(name, "--only" | "--engine" | "--out") {
                parsed.harness.push(arg.clone());
                continue;
            }
            let value = match inline {
                Some(v) => v,
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{name} needs a value"))?,
            };
            match name {
                "--only" => {
                    let names: Vec<String> = value
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(String::from)
                        .collect();
                    if names.is_empty() {
                        return Err("--only needs at least one mutant name".into());
                    }
                    parsed.only = Some(names);
                }
                "--engine" => {
                    parsed.engine = match value.as_str() {
                        "cpu" => Lane::Cpu,
                        "vllm" => Lane::Vllm,
                        other => return Err(format!("--engine {other:?}: expected cpu or vllm")),
                    }
                }
                _ => parsed.out = Some(PathBuf::from(value)),
            }
        }
        drive::check_harness_flags(&parsed.harness, RESERVED_KEYS).map_err(|e| e.to_string())?;
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn defaults_and_every_flag() {
        let d = MutantsArgs::parse(&[]).unwrap();
        assert_eq!(
            d,
            MutantsArgs {
                only: None,
                engine: Lane::Cpu,
                out: None,
                harness: vec![]
            }
        );
        let a = MutantsArgs::parse(&args(
            "--only a,b --log-level debug --engine=vllm --out o --startup-timeout-s 90",
        ))
        .unwrap();
        assert_eq!(a.only, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(a.engine, Lane::Vllm);
        assert_eq!(a.out, Some(PathBuf::from("o")));
        assert_eq!(a.harness, args("--log-level debug --startup-timeout-s 90"));
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        for (line, want) in [
            ("--only", "needs a value"),
            ("--only ,", "at least one mutant"),
            ("--engine gpu", "expected cpu or vllm"),
            ("--kvcr pypi:0.1.2", "set by the driver"),
            ("--topology 2p1d", "set by the driver"),
            ("TC-01", "not a harness flag"),
            ("--frobnicate 3", "frobnicate"),
        ] {
            let err = MutantsArgs::parse(&args(line)).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
    }
}
