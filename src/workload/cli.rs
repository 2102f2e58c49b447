//! `kvcr-e2e workload generate` and `kvcr-e2e workload stats`: flags to
//! parameters, and a trace's figures as text.

use std::path::PathBuf;
use std::process::ExitCode;

use super::generate::{generate, GeneratorParams};
use super::stats::{lru_hit_rate, HitRate, TraceStats};
use super::trace::Trace;

/// What `workload generate` was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateArgs {
    pub params: GeneratorParams,
    /// Where to write the trace; `None`: standard output.
    pub out: Option<PathBuf>,
}

/// Parses `workload generate`'s flags (each `--flag VALUE`).
pub fn parse_generate(args: &[String]) -> Result<GenerateArgs, String> {
    let mut p = GeneratorParams::default();
    let mut out = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let wrong = |e: String| format!("{flag} {value:?}: {e}");
        match flag.as_str() {
            "--seed" => p.seed = num(value).map_err(wrong)?,
            "--block-size" => p.block_size = num(value).map_err(wrong)?,
            "--sessions" => p.sessions = num(value).map_err(wrong)?,
            "--turns" => p.turns = value.parse().map_err(wrong)?,
            "--active-sessions" => p.active_sessions = num(value).map_err(wrong)?,
            "--system-prompts" => p.system_prompts = num(value).map_err(wrong)?,
            "--system-prompt-blocks" => p.system_prompt_blocks = num(value).map_err(wrong)?,
            "--documents" => p.documents = num(value).map_err(wrong)?,
            "--document-blocks" => p.document_blocks = num(value).map_err(wrong)?,
            "--document-share" => p.document_share = num(value).map_err(wrong)?,
            "--zipf" => p.zipf = num(value).map_err(wrong)?,
            "--user-tokens" => p.user_tokens = value.parse().map_err(wrong)?,
            "--output-tokens" => p.output_tokens = value.parse().map_err(wrong)?,
            "--max-prompt-tokens" => p.max_prompt_tokens = num(value).map_err(wrong)?,
            "--arrival" => p.arrival = value.parse().map_err(wrong)?,
            "--rate" => p.rate = num(value).map_err(wrong)?,
            "--out" => out = Some(PathBuf::from(value)),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    p.check().map_err(|e| e.to_string())?;
    Ok(GenerateArgs { params: p, out })
}

fn num<T: std::str::FromStr>(value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| "not a number of the right kind".to_string())
}

/// What `workload stats` was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsArgs {
    pub trace: PathBuf,
    pub block_size: u32,
    /// LRU capacities in blocks, each reported.
    pub lru_blocks: Vec<u64>,
}

/// Parses `workload stats FILE --block-size N [--lru-blocks C,...]`.
pub fn parse_stats(args: &[String]) -> Result<StatsArgs, String> {
    let mut trace = None;
    let mut block_size = None;
    let mut lru_blocks = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--block-size" | "--lru-blocks" => {
                let value = rest.next().ok_or_else(|| format!("{arg} needs a value"))?;
                let wrong = || format!("{arg} {value:?}: not a count");
                if arg == "--block-size" {
                    block_size = Some(value.parse().map_err(|_| wrong())?);
                } else {
                    for c in value.split(',') {
                        lru_blocks.push(c.trim().parse().map_err(|_| wrong())?);
                    }
                }
            }
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}")),
            file if trace.is_none() => trace = Some(PathBuf::from(file)),
            extra => return Err(format!("one trace at a time ({extra:?} is a second)")),
        }
    }
    Ok(StatsArgs {
        trace: trace.ok_or("stats needs a trace file")?,
        block_size: block_size.ok_or("stats needs --block-size (Mooncake's traces: 512)")?,
        lru_blocks,
    })
}

/// A trace's figures, one per line; an LRU line per capacity.
pub fn summary(trace: &Trace, lru_blocks: &[u64]) -> String {
    let s = TraceStats::of(trace);
    let mean_prompt = s.input_tokens as f64 / s.requests as f64;
    let rate = s
        .mean_rate_per_s
        .map_or("all at once".to_string(), |r| format!("{r:.2}/s"));
    let mut text = format!(
        "requests {}, over {:.1} s, mean rate {rate}\n\
         prompt tokens {} (mean {mean_prompt:.0}), output tokens {}, block size {}\n\
         whole blocks {}, distinct {}\n",
        s.requests,
        s.duration_ms as f64 / 1000.0,
        s.input_tokens,
        s.output_tokens,
        trace.block_size(),
        s.infinite.blocks,
        s.distinct_blocks,
    );
    text.push_str(&hit_line("infinite cache", &s.infinite));
    for &c in lru_blocks {
        text.push_str(&hit_line(
            &format!("LRU of {c} blocks"),
            &lru_hit_rate(trace, c),
        ));
    }
    text
}

fn hit_line(cache: &str, h: &HitRate) -> String {
    format!(
        "ideal hit rate, {cache}: {:.1} % of whole blocks, {:.1} % of prompt tokens\n",
        100.0 * h.block_rate(),
        100.0 * h.token_rate()
    )
}

/// `kvcr-e2e workload ...`: exit 0 done, 1 failed, 2 usage.
pub fn workload(args: &[String], usage: &str) -> ExitCode {
    let usage_error = |e: &str| {
        eprintln!("error: workload: {e}\n\n{usage}");
        ExitCode::from(2)
    };
    match args.first().map(String::as_str) {
        Some("generate") => {
            let args = match parse_generate(&args[1..]) {
                Ok(a) => a,
                Err(e) => return usage_error(&e),
            };
            let trace = match generate(&args.params) {
                Ok(t) => t,
                Err(e) => return usage_error(&e.to_string()),
            };
            match &args.out {
                Some(path) => {
                    if let Err(e) = trace.write(path) {
                        eprintln!("error: cannot write {}: {e}", path.display());
                        return ExitCode::FAILURE;
                    }
                    eprintln!("wrote {}", path.display());
                }
                None => print!("{}", trace.to_jsonl()),
            }
            eprint!("{}", summary(&trace, &[]));
            ExitCode::SUCCESS
        }
        Some("stats") => {
            let args = match parse_stats(&args[1..]) {
                Ok(a) => a,
                Err(e) => return usage_error(&e),
            };
            match Trace::read(&args.trace, args.block_size) {
                Ok(trace) => {
                    print!("{}", summary(&trace, &args.lru_blocks));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(other) => usage_error(&format!(
            "unknown subcommand {other:?} (generate, stats or side-by-side)"
        )),
        None => usage_error("needs a subcommand (generate, stats or side-by-side)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::generate::{Arrival, Span};

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn generate_flags_set_their_parameters() {
        let a = parse_generate(&args(
            "--sessions 9 --turns 2..4 --seed 7 --arrival fixed --rate 0.5 --zipf 1.3 \
             --documents 5 --document-share 1 --block-size 64 --max-prompt-tokens 4096 \
             --user-tokens 10 --out x.jsonl",
        ))
        .unwrap();
        let p = &a.params;
        assert_eq!((p.sessions, p.turns, p.seed), (9, Span::new(2, 4), 7));
        assert_eq!((p.arrival, p.rate, p.zipf), (Arrival::Fixed, 0.5, 1.3));
        assert_eq!((p.documents, p.document_share, p.block_size), (5, 1.0, 64));
        assert_eq!(p.user_tokens, Span::new(10, 10));
        assert_eq!(a.out, Some(PathBuf::from("x.jsonl")));
        assert_eq!(
            parse_generate(&[]).unwrap().params,
            GeneratorParams::default()
        );
    }

    #[test]
    fn bad_generate_flags_say_which() {
        let err = |t: &str| parse_generate(&args(t)).unwrap_err();
        assert_eq!(err("--sessions"), "--sessions needs a value");
        assert!(err("--sessions many").starts_with("--sessions \"many\""));
        assert!(err("--turns 5..2").contains("low end"));
        assert_eq!(err("--speed 3"), "unknown flag --speed");
        assert_eq!(err("--sessions 0"), "--sessions: must be at least 1");
    }

    #[test]
    fn stats_flags_parse_and_need_a_block_size() {
        let a = parse_stats(&args("t.jsonl --block-size 512 --lru-blocks 64,1024")).unwrap();
        assert_eq!((a.block_size, a.lru_blocks), (512, vec![64, 1024]));
        assert_eq!(a.trace, PathBuf::from("t.jsonl"));
        assert!(parse_stats(&args("t.jsonl"))
            .unwrap_err()
            .contains("--block-size"));
        assert!(parse_stats(&args("--block-size 16"))
            .unwrap_err()
            .contains("trace file"));
        assert!(parse_stats(&args("a b --block-size 16"))
            .unwrap_err()
            .contains("second"));
    }

    #[test]
    fn the_summary_shows_rates_and_hit_rates() {
        let t = Trace::parse(
            "{\"timestamp\":0,\"input_length\":4,\"output_length\":1,\"hash_ids\":[0,1]}\n\
             {\"timestamp\":2000,\"input_length\":4,\"output_length\":1,\"hash_ids\":[0,1]}",
            2,
            "t",
        )
        .unwrap();
        let text = summary(&t, &[1]);
        assert!(
            text.contains("requests 2, over 2.0 s, mean rate 0.50/s"),
            "{text}"
        );
        assert!(
            text.contains("infinite cache: 50.0 % of whole blocks, 50.0 % of prompt tokens"),
            "{text}"
        );
        // LRU of 1 keeps block 0 (the first, most recent): 1 hit of 4.
        assert!(text.contains("LRU of 1 blocks: 25.0 %"), "{text}");
    }

    /// Every `kvcr-e2e workload generate` line of fixtures/traces/README.md,
    /// run again, writes its fixture's bytes exactly.
    #[test]
    fn fixture_traces_regenerate_from_their_recorded_commands() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let readme = std::fs::read_to_string(root.join("fixtures/traces/README.md")).unwrap();
        let mut checked = 0;
        for line in readme.lines() {
            let Some(flags) = line.trim().strip_prefix("kvcr-e2e workload generate ") else {
                continue;
            };
            let a = parse_generate(&args(flags)).unwrap();
            let out = a.out.expect("a fixture command names its --out");
            let want = std::fs::read_to_string(root.join(&out)).unwrap();
            let got = generate(&a.params).unwrap().to_jsonl();
            assert!(
                got == want,
                "{} differs from `{}`",
                out.display(),
                line.trim()
            );
            checked += 1;
        }
        assert!(
            checked >= 2,
            "only {checked} fixture commands in the README"
        );
    }
}
