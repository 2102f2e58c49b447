//! `kvcr-e2e mutants` command line.

use std::path::PathBuf;

use super::plan::RESERVED_KEYS;
use crate::config::command_flags;
use crate::drive;
use crate::engine::{Kind, StackSpec};
use crate::mutants::generated::sequence;

/// Parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantsArgs {
    /// `--only NAME,...`: these mutants, in this order.
    pub only: Option<Vec<String>>,
    /// `--engine cpu|vllm` (default cpu): the engine whose mutants run, on
    /// the lanes of that engine.
    pub engine: Kind,
    /// `--stack ENGINE/TOPOLOGY/GEOMETRY` (`vllm/two-node/dense`): each
    /// mutant runs on that stack's lane instead of its header's (the engine
    /// is the stack's).
    pub stack: Option<StackSpec>,
    /// `--out DIR` (default `target/mutants/<timestamp>/`).
    pub out: Option<PathBuf>,
    /// `--record DIR`: a copy of the batch's score file there too (only a
    /// scored batch that ran every selected mutant is recorded).
    pub record: Option<PathBuf>,
    /// `--generated N [--seed S] [--modules a,b]`: a seeded sample of
    /// generated operator mutants instead of the curated set.
    pub generated: Option<GeneratedArgs>,
    /// Everything else: harness flags for every child, in order.
    pub harness: Vec<String>,
}

/// The generated lane's sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedArgs {
    /// How many mutants (each a valid module that differs at one site).
    pub count: u32,
    /// The draw's seed (default 1).
    pub seed: u64,
    /// KVCR modules to mutate, by name (`local_dram`); default
    /// [`crate::mutants::generated::MODULES`].
    pub modules: Vec<String>,
    /// `--draw-only`: write the sample's diffs and stop (no stack).
    pub draw_only: bool,
    /// `--lanes a,b`: the test targets each mutant runs on, in order, until
    /// one does not pass; default
    /// [`crate::mutants::generated::sequence::default_targets`].
    pub lanes: Vec<&'static str>,
    /// `--coverage RUN_DIR,...`: `--kvcr-coverage` runs of the base build,
    /// at most one per lane of the sequence; a draw skips each lane whose
    /// run never executed its line
    /// ([`crate::mutants::generated::coverage`]). Absolute paths.
    pub coverage: Vec<PathBuf>,
}

impl MutantsArgs {
    /// Parses the arguments after `mutants`.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut parsed = MutantsArgs {
            only: None,
            engine: Kind::Cpu,
            stack: None,
            out: None,
            record: None,
            generated: None,
            harness: Vec::new(),
        };
        let mut engine_given = false;
        let (mut count, mut seed, mut modules, mut lanes) = (None, None, None, None);
        let mut coverage: Option<Vec<PathBuf>> = None;
        let mut draw_only = false;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (name, inline) = command_flags::split(arg);
            if name == "--draw-only" {
                draw_only = true;
                continue;
            }
            if !matches!(
                name,
                "--only"
                    | "--engine"
                    | "--stack"
                    | "--out"
                    | "--record"
                    | "--generated"
                    | "--seed"
                    | "--modules"
                    | "--lanes"
                    | "--coverage"
            ) {
                parsed.harness.push(arg.clone());
                continue;
            }
            let value = command_flags::value(name, inline, &mut it)?;
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
                    parsed.engine = value.parse().map_err(|e| format!("--engine: {e}"))?;
                    engine_given = true;
                }
                "--stack" => {
                    let stack: StackSpec = value.parse().map_err(|e| format!("--stack: {e}"))?;
                    parsed.stack = Some(stack);
                }
                "--generated" => {
                    count = match value.parse::<u32>() {
                        Ok(n) if n > 0 => Some(n),
                        _ => return Err(format!("--generated {value:?}: expected a count ≥ 1")),
                    }
                }
                "--seed" => {
                    seed = Some(
                        value
                            .parse::<u64>()
                            .map_err(|_| format!("--seed {value:?}: expected an integer ≥ 0"))?,
                    )
                }
                "--modules" => {
                    let names = crate::mutants::generated::parse_modules(&value)?;
                    modules = Some(names);
                }
                "--lanes" => lanes = Some(value),
                "--coverage" => coverage = Some(coverage_dirs(&value)?),
                "--record" => parsed.record = Some(absolute(PathBuf::from(value))),
                _ => parsed.out = Some(PathBuf::from(value)),
            }
        }
        match count {
            Some(count) if parsed.only.is_some() => {
                return Err(format!(
                    "--generated {count} samples generated mutants; --only names curated ones: pick one"
                ))
            }
            Some(count) => {
                let lanes = match &lanes {
                    Some(value) => sequence::parse_targets(value, parsed.engine)?,
                    None => sequence::default_targets(parsed.engine)?,
                };
                parsed.generated = Some(GeneratedArgs {
                    count,
                    seed: seed.unwrap_or(1),
                    draw_only,
                    lanes,
                    coverage: coverage.unwrap_or_default(),
                    modules: modules.unwrap_or_else(|| {
                        crate::mutants::generated::MODULES
                            .iter()
                            .map(|m| m.to_string())
                            .collect()
                    }),
                })
            }
            None if seed.is_some()
                || modules.is_some()
                || lanes.is_some()
                || coverage.is_some()
                || draw_only =>
            {
                return Err(
                    "--seed, --modules, --lanes, --coverage and --draw-only go with --generated N"
                        .into(),
                )
            }
            None => {}
        }
        if let Some(stack) = parsed.stack {
            if engine_given && parsed.engine != stack.engine {
                return Err(format!(
                    "--engine {} and --stack {stack} name two engines: give one",
                    parsed.engine.as_str()
                ));
            }
            if parsed.generated.is_some() {
                return Err(
                    "--stack picks the curated mutants' lane; --generated runs on the lanes of --lanes"
                        .into(),
                );
            }
            parsed.engine = stack.engine;
        }
        drive::check_harness_flags(&parsed.harness, RESERVED_KEYS).map_err(|e| e.to_string())?;
        Ok(parsed)
    }
}

/// `--coverage a,b`: run directories, each once, made absolute (the lane's
/// children run elsewhere, and the batch records them).
fn coverage_dirs(value: &str) -> Result<Vec<PathBuf>, String> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in value.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let dir = absolute(PathBuf::from(dir));
        if dirs.contains(&dir) {
            return Err(format!("--coverage: {} is named twice", dir.display()));
        }
        dirs.push(dir);
    }
    if dirs.is_empty() {
        return Err("--coverage needs at least one run directory".into());
    }
    Ok(dirs)
}

/// `path` from the current directory, so the copy lands where the user
/// meant whatever directory the lane's children run in.
fn absolute(path: PathBuf) -> PathBuf {
    match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => cwd.join(path),
        _ => path,
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
                engine: Kind::Cpu,
                stack: None,
                out: None,
                record: None,
                generated: None,
                harness: vec![]
            }
        );
        let a = MutantsArgs::parse(&args(
            "--only a,b --log-level debug --engine=vllm --out o --startup-timeout-s 90",
        ))
        .unwrap();
        assert_eq!(a.only, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(a.engine, Kind::Vllm);
        assert_eq!(a.out, Some(PathBuf::from("o")));
        assert_eq!(a.harness, args("--log-level debug --startup-timeout-s 90"));
        let r = MutantsArgs::parse(&args("--record docs/mutation-scores")).unwrap();
        let record = r.record.unwrap();
        assert!(
            record.is_absolute() && record.ends_with("docs/mutation-scores"),
            "{}",
            record.display()
        );
    }

    #[test]
    fn generated_takes_a_count_a_seed_and_modules() {
        let a = MutantsArgs::parse(&args(
            "--generated 40 --seed 7 --modules guard,core --log-level debug",
        ))
        .unwrap();
        assert_eq!(
            a.generated,
            Some(GeneratedArgs {
                count: 40,
                seed: 7,
                modules: vec!["guard".into(), "core".into()],
                draw_only: false,
                lanes: vec!["phase1", "phase2", "phase3_api", "phase3", "phase2_g3"],
                coverage: vec![],
            })
        );
        let l = MutantsArgs::parse(&args("--generated 4 --lanes phase2,phase1")).unwrap();
        assert_eq!(l.generated.unwrap().lanes, ["phase2", "phase1"]);
        let v = MutantsArgs::parse(&args("--generated 4 --engine vllm")).unwrap();
        assert_eq!(
            v.generated.unwrap().lanes,
            ["phase1_vllm"],
            "vLLM: its phase 1 lane"
        );
        assert_eq!(a.harness, args("--log-level debug"));
        let d = MutantsArgs::parse(&args("--generated=3")).unwrap();
        let g = d.generated.unwrap();
        assert_eq!((g.count, g.seed), (3, 1), "the seed defaults to 1");
        assert_eq!(g.modules.len(), crate::mutants::generated::MODULES.len());
        let d = MutantsArgs::parse(&args("--generated 3 --draw-only")).unwrap();
        assert!(d.generated.unwrap().draw_only);
    }

    #[test]
    fn coverage_takes_run_directories_made_absolute() {
        let a = MutantsArgs::parse(&args(
            "--generated 3 --draw-only --coverage runs/p1,/abs/p2 --log-level debug",
        ))
        .unwrap();
        let g = a.generated.unwrap();
        assert!(g.draw_only);
        assert_eq!(g.coverage.len(), 2);
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(g.coverage[0], cwd.join("runs/p1"));
        assert_eq!(g.coverage[1], PathBuf::from("/abs/p2"));
        assert_eq!(a.harness, args("--log-level debug"), "not a harness flag");
        let inline = MutantsArgs::parse(&args("--generated 3 --coverage=/a")).unwrap();
        assert_eq!(inline.generated.unwrap().coverage, [PathBuf::from("/a")]);
        let none = MutantsArgs::parse(&args("--generated 3")).unwrap();
        assert!(none.generated.unwrap().coverage.is_empty());
    }

    #[test]
    fn a_stack_picks_the_engine_and_the_lane() {
        let a = MutantsArgs::parse(&args("--stack vllm/two-node/dense --only m")).unwrap();
        assert_eq!(a.engine, Kind::Vllm);
        assert_eq!(a.stack.unwrap().to_string(), "vllm/two-node/dense");
        let same = MutantsArgs::parse(&args("--engine vllm --stack vllm/agg/dense")).unwrap();
        assert_eq!(same.engine, Kind::Vllm);
        for (line, want) in [
            (
                "--engine cpu --stack vllm/two-node/dense",
                "name two engines",
            ),
            ("--stack vllm/two-node", "--stack"),
            (
                "--stack cpu/agg/dense --generated 3",
                "--generated runs on the lanes of --lanes",
            ),
        ] {
            let err = MutantsArgs::parse(&args(line)).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        for (line, want) in [
            ("--only", "needs a value"),
            ("--only ,", "at least one mutant"),
            (
                "--engine gpu",
                "unknown engine `gpu`: expected one of cpu, vllm",
            ),
            ("--kvcr pypi:0.1.2", "set by the driver"),
            ("--topology 2p1d", "set by the driver"),
            ("TC-01", "not a harness flag"),
            ("--frobnicate 3", "frobnicate"),
            ("--generated 0", "a count ≥ 1"),
            ("--generated x", "a count ≥ 1"),
            ("--generated 3 --seed -1", "an integer ≥ 0"),
            ("--seed 3", "go with --generated"),
            ("--draw-only", "go with --generated"),
            ("--lanes phase1", "go with --generated"),
            ("--coverage /a", "go with --generated"),
            ("--only m --coverage /a", "go with --generated"),
            ("--generated 3 --coverage", "needs a value"),
            ("--generated 3 --coverage ,", "at least one run directory"),
            ("--generated 3 --coverage /a,/b,/a", "/a is named twice"),
            ("--generated 3 --lanes fault_matrix", "cannot run on"),
            (
                "--generated 3 --engine vllm --lanes phase2",
                "cannot run on",
            ),
            ("--generated 3 --only a", "pick one"),
            (
                "--generated 3 --modules api",
                "not a module the suite claims",
            ),
            ("--generated 3 --modules ,", "at least one module"),
        ] {
            let err = MutantsArgs::parse(&args(line)).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
    }
}
