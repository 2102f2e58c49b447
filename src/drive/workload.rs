//! `kvcr-e2e workload --trace FILE [--rate X] [--slo ttft=MS,tpot=MS]
//! [--sweep [F,F,...]] [HARNESS FLAGS]`: the `workload` lane (WL-01) run as
//! a child with the trace and targets as its settings, and its figures
//! printed: hit rate per tier, TTFT, TPOT and goodput, KVCR on and off, and
//! the sweep's highest sustained rate.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{check_harness_flags, test_binary, Phase1Child};
use crate::config::command_flags;
use crate::evidence::workload::{ReplaySummary, WorkloadSummary};

/// The lane the replay runs on.
pub const TARGET: &str = "workload";
/// Sweep factors when `--sweep` has none.
pub const DEFAULT_SWEEP: &str = "1,2,4,8";
/// Settings the command sets itself.
const RESERVED_KEYS: &[&str] = &["workload_trace", "run_dir"];

/// The parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayArgs {
    /// Harness flags for the child: the workload's own first, then the user's.
    pub flags: Vec<String>,
    /// `--out DIR`: the child's run base.
    pub out: Option<PathBuf>,
}

impl ReplayArgs {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut flags: Vec<String> = Vec::new();
        let mut harness: Vec<String> = Vec::new();
        let (mut trace, mut out) = (None, None);
        let mut it = args.iter().peekable();
        while let Some(arg) = it.next() {
            let (name, inline) = command_flags::split(arg);
            let mut value = |name: &str| command_flags::value(name, inline.clone(), &mut it);
            match name {
                "--trace" => trace = Some(value(name)?),
                "--rate" => flags.extend(["--workload-rate".into(), value(name)?]),
                "--block-size" => flags.extend(["--workload-block-size".into(), value(name)?]),
                "--slo" => flags.extend(slo_flags(&value(name)?)?),
                "--out" => out = Some(PathBuf::from(value(name)?)),
                "--sweep" => {
                    // A value is optional: the next argument is one when it
                    // is not a flag.
                    let factors = match (&inline, it.peek()) {
                        (Some(v), _) => v.clone(),
                        (None, Some(next)) if !next.starts_with("--") => {
                            it.next().cloned().unwrap_or_default()
                        }
                        _ => DEFAULT_SWEEP.to_string(),
                    };
                    flags.extend(["--workload-sweep".into(), factors]);
                }
                _ => harness.push(arg.clone()),
            }
        }
        let trace = trace.ok_or("give the trace: --trace FILE (docs/workload.md)")?;
        let mut all = vec!["--workload-trace".to_string(), absolute(&trace)];
        all.extend(flags);
        check_harness_flags(&harness, RESERVED_KEYS).map_err(|e| e.to_string())?;
        all.extend(harness);
        // The whole line, as the child will read it.
        check_harness_flags(&all, &["run_dir"]).map_err(|e| e.to_string())?;
        Ok(ReplayArgs { flags: all, out })
    }
}

/// `ttft=MS,tpot=MS` (either or both) as harness flags.
fn slo_flags(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, ms) = part
            .split_once('=')
            .ok_or_else(|| format!("--slo {text:?}: expected ttft=MS,tpot=MS"))?;
        let flag = match key {
            "ttft" => "--workload-slo-ttft-ms",
            "tpot" => "--workload-slo-tpot-ms",
            other => return Err(format!("--slo: unknown target {other:?} (ttft, tpot)")),
        };
        out.extend([flag.to_string(), ms.to_string()]);
    }
    if out.is_empty() {
        return Err(format!("--slo {text:?}: expected ttft=MS,tpot=MS"));
    }
    Ok(out)
}

/// A path the child (which runs in the repository root) reads as the user meant it.
fn absolute(path: &str) -> String {
    let p = Path::new(path);
    match p.is_absolute() {
        true => path.to_string(),
        false => std::env::current_dir()
            .map(|d| d.join(p).display().to_string())
            .unwrap_or_else(|_| path.to_string()),
    }
}

/// Runs the command; exits with the child's code (0: every request
/// answered with the reference tokens and the tiers reconciled).
/// `default_out` is the output directory without `--out`.
pub fn command(args: &[String], repo_root: &Path, default_out: PathBuf) -> ExitCode {
    let parsed = match ReplayArgs::parse(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: workload: {e}");
            return ExitCode::from(2);
        }
    };
    let out = parsed.out.clone().unwrap_or(default_out);
    let binary = match test_binary(repo_root, TARGET) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: workload: {e}");
            return ExitCode::from(2);
        }
    };
    let child = Phase1Child {
        binary,
        repo_root: repo_root.to_path_buf(),
        flags: parsed.flags,
        filters: vec!["WL-01".into()],
        exact: false,
        run_base: out.join("run"),
    };
    crate::events::emit(crate::events::RunEvent::ChildRun {
        what: "workload".into(),
        command: child.command_line(),
    });
    let exit = match child.run(&out.join("child.log")) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: workload: {e}");
            return ExitCode::from(2);
        }
    };
    let read = super::ReadRun::from_base(&child.run_base);
    let summary = read.as_ref().ok().and_then(|r| {
        let text = std::fs::read_to_string(r.root.join("results.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        serde_json::from_value::<WorkloadSummary>(v.get("perf")?.get("workload")?.clone()).ok()
    });
    match (&summary, &read) {
        (Some(s), Ok(r)) => {
            print!("{}", table(s));
            println!("run: {}", r.root.display());
        }
        _ => crate::events::emit(crate::events::RunEvent::NoReplayRecorded {
            log: exit.log.clone(),
        }),
    }
    match exit.code {
        Some(0) if summary.is_some() => ExitCode::SUCCESS,
        Some(0) => ExitCode::from(3),
        _ => ExitCode::FAILURE,
    }
}

/// The replay's figures as a table, KVCR on beside off.
pub fn table(s: &WorkloadSummary) -> String {
    let mut out = format!(
        "trace {} ({} requests over {:.1} s, sha256 {}), rate ×{}; targets TTFT ≤ {} ms, TPOT ≤ {} ms\n",
        s.trace.name,
        s.trace.requests,
        s.trace.duration_s,
        &s.trace.sha256[..s.trace.sha256.len().min(12)],
        s.on.rate_factor,
        s.slo.ttft_ms,
        s.slo.tpot_ms
    );
    out.push_str(&format!(
        "{:<28} {:>14} {:>14}\n",
        "", "KVCR on", "KVCR off"
    ));
    let off = s.off.as_ref();
    let row = |label: &str, f: &dyn Fn(&ReplaySummary) -> String| {
        format!(
            "{label:<28} {:>14} {:>14}\n",
            f(&s.on),
            off.map_or("-".to_string(), f)
        )
    };
    let pct = |x: f64| format!("{:.1} %", 100.0 * x);
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1} ms"));
    out.push_str(&row("requests ok / failed / wrong", &|r| {
        format!("{}/{}/{}", r.ok, r.failed, r.wrong_tokens)
    }));
    for (name, _) in s.on.hit_rate.named() {
        out.push_str(&row(&format!("hit rate {name}"), &|r| {
            pct(r
                .hit_rate
                .named()
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0.0, |(_, v)| *v))
        }));
    }
    out.push_str(&row("TTFT p50", &|r| ms(r.ttft_ms.p50)));
    out.push_str(&row("TTFT p90", &|r| ms(r.ttft_ms.p90)));
    out.push_str(&row("TPOT p50", &|r| ms(r.tpot_ms.p50)));
    out.push_str(&row("goodput", &|r| {
        format!("{:.2} req/s", r.goodput_per_s)
    }));
    out.push_str(&row("meeting both targets", &|r| pct(r.slo_attainment)));
    if !s.sweep.is_empty() {
        out.push_str(
            "sweep (KVCR on): rate factor, offered req/s, goodput req/s, meeting targets\n",
        );
        for p in &s.sweep {
            out.push_str(&format!(
                "  ×{:<5} {:>7.2} {:>7.2} {:>7}{}\n",
                p.rate_factor,
                p.offered_rate_per_s,
                p.goodput_per_s,
                pct(p.slo_attainment),
                if p.sustained { "  sustained" } else { "" }
            ));
        }
        out.push_str(&format!(
            "highest sustained rate: {}\n",
            s.max_sustained_rate_per_s
                .map_or("none of the swept rates".into(), |r| format!(
                    "{r:.2} req/s"
                ))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_workload_flags_become_harness_settings_before_the_users_own() {
        let a = ReplayArgs::parse(&strings(&[
            "--trace",
            "/t/x.jsonl",
            "--rate",
            "4",
            "--slo",
            "ttft=200,tpot=8",
            "--sweep",
            "--kvcr",
            "pypi:0.1.1",
        ]))
        .unwrap();
        assert_eq!(
            a.flags,
            strings(&[
                "--workload-trace",
                "/t/x.jsonl",
                "--workload-rate",
                "4",
                "--workload-slo-ttft-ms",
                "200",
                "--workload-slo-tpot-ms",
                "8",
                "--workload-sweep",
                DEFAULT_SWEEP,
                "--kvcr",
                "pypi:0.1.1",
            ])
        );
    }

    #[test]
    fn sweep_takes_its_factors_when_given() {
        let a = ReplayArgs::parse(&strings(&["--trace=/t.jsonl", "--sweep", "2,6"])).unwrap();
        assert_eq!(a.flags[2..], strings(&["--workload-sweep", "2,6"]));
    }

    #[test]
    fn errors_name_what_is_missing_or_wrong() {
        let err = |args: &[&str]| ReplayArgs::parse(&strings(args)).unwrap_err();
        assert!(err(&["--rate", "2"]).contains("--trace FILE"));
        assert!(err(&["--trace", "/t", "--slo", "ttft"]).contains("ttft=MS,tpot=MS"));
        assert!(err(&["--trace", "/t", "--slo", "e2e=9"]).contains("unknown target"));
        assert!(err(&["--trace", "/t", "--workload-trace", "/u"]).contains("leave it out"));
        assert!(err(&["--trace", "/t", "--no-such-flag"]).contains("no-such-flag"));
    }
}
