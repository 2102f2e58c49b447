//! `kvcr-e2e gpu-check`: NVML telemetry against a PyTorch allocation.

use std::path::PathBuf;
use std::process::ExitCode;

use super::USAGE;

/// `kvcr-e2e gpu-check …`; `args` follow `gpu-check`.
pub fn gpu_check(args: &[String]) -> ExitCode {
    use crate::gpu::check::{self, CheckOptions};
    use std::time::Duration;
    let mut opts = CheckOptions {
        python: PathBuf::from("python3"),
        gpu: 0,
        bytes: 8 << 30,
        timeout: Duration::from_secs(180),
        interval: Duration::from_millis(100),
        out: PathBuf::from("gpu-check.json"),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next();
        let parsed = match (flag.as_str(), value) {
            ("--python", Some(v)) => {
                opts.python = PathBuf::from(v);
                Ok(())
            }
            ("--gpu", Some(v)) => v.parse().map(|n| opts.gpu = n).map_err(|e| e.to_string()),
            ("--gib", Some(v)) => v
                .parse::<f64>()
                .map_err(|e| e.to_string())
                .and_then(|g| match g > 0.0 {
                    true => {
                        opts.bytes = (g * (1u64 << 30) as f64) as u64;
                        Ok(())
                    }
                    false => Err("must be above 0".into()),
                }),
            ("--timeout-s", Some(v)) => v
                .parse()
                .map(|s| opts.timeout = Duration::from_secs(s))
                .map_err(|e| e.to_string()),
            ("--out", Some(v)) => {
                opts.out = PathBuf::from(v);
                Ok(())
            }
            (_, None) if flag.starts_with("--") => Err("needs a value".into()),
            _ => Err("unknown flag".into()),
        };
        if let Err(e) = parsed {
            eprintln!("error: gpu-check {flag}: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let Some(source) = crate::gpu::open() else {
        eprintln!("gpu-check: FAIL: no NVML, nothing to check (run it on a GPU machine)");
        return ExitCode::FAILURE;
    };
    let mut say = |line: &str| println!("gpu-check: {line}");
    let report = match check::run(source, &opts, &mut say) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("gpu-check: FAIL: {e}");
            return ExitCode::FAILURE;
        }
    };
    for claim in &report.claims {
        let word = if claim.ok { "PASS" } else { "FAIL" };
        println!("gpu-check: {word} {}", claim.text);
    }
    match serde_json::to_string_pretty(&report)
        .map_err(|e| e.to_string())
        .and_then(|text| std::fs::write(&opts.out, text).map_err(|e| e.to_string()))
    {
        Ok(()) => println!("gpu-check: figures and timeline in {}", opts.out.display()),
        Err(e) => eprintln!("gpu-check: cannot write {}: {e}", opts.out.display()),
    }
    if report.passed() {
        println!("gpu-check: verdict PASS");
        ExitCode::SUCCESS
    } else {
        println!("gpu-check: verdict FAIL");
        ExitCode::FAILURE
    }
}
