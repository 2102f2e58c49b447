//! The run: flags → settings → trials → libtest-mimic → evidence → teardown.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use libtest_mimic::{Arguments, Completion, Failed};
use once_cell::sync::{Lazy, OnceCell};

use crate::config::{self, Env, Settings};
use crate::engine::Applicability;
use crate::engine::Engine;
use crate::events::{self, RunEvent};
use crate::evidence::{CaseRecord, Outcome, RunDir};
use crate::prompts::PromptBook;
use crate::pyenv::{self, PythonEnv};
use crate::reference::{self, References};
use crate::stack::{self, Stack, StackOptions};

use super::ignore::Skip;
use super::{signals, CaseCtx, CaseError, Trial};

/// The file in a stack's scratch directory that hands out prompt families
/// to every run on that stack.
const PROMPT_CURSOR: &str = "prompt-cursor";

/// The stack the signal handler must tear down, once there is one.
static LIVE_STACK: Lazy<Mutex<Option<Arc<Stack>>>> = Lazy::new(|| Mutex::new(None));

/// A workload trace and the file it was read from.
type TraceFile = (crate::workload::Trace, PathBuf);

/// Shared state of one run of a suite.
pub struct Suite {
    target: &'static str,
    pub settings: Settings,
    repo_root: PathBuf,
    engine: Arc<dyn Engine>,
    run_dir: OnceCell<Result<RunDir, String>>,
    python: OnceCell<Result<PythonEnv, String>>,
    stack: OnceCell<Result<Arc<Stack>, String>>,
    references: OnceCell<Result<Arc<References>, String>>,
    /// What each KVCR process of the stack reported importing (checked
    /// equal to the build under test at startup).
    kvcr_imports: Mutex<Vec<crate::evidence::ComponentImport>>,
    prompts: PromptBook,
    records: Mutex<Vec<CaseRecord>>,
    /// The trial that printed the shared setup failure in full (the stack or
    /// the reference phase); later trials point to it.
    setup_failure_shown_by: Mutex<Option<String>>,
    provisions: AtomicU32,
    started_utc: crate::evidence::UtcTime,
    /// Scrubs secret values of the environment from everything written.
    redactor: crate::config::Redactor,
    /// Where this run's events begin in the process's recorder.
    events_from: events::Mark,
    /// This run in the machine's registry of live runs, once it has a stack.
    live_run: Mutex<Option<super::neighbours::LiveRun>>,
    /// The trials libtest will run, in order (set once the filters are
    /// known): a destructive trial with no later stack user skips the
    /// restore.
    planned: OnceCell<Vec<Trial>>,
    /// WL-01's trace, read once when a planned trial replays one.
    workload_trace: OnceCell<Result<Option<Arc<TraceFile>>, String>>,
    /// Where the next case's log audit begins: the last audit's end; the
    /// logs' start before the first case (none: the next case's start).
    log_audit_from: Mutex<Option<super::pressure::LogMarks>>,
}

impl Suite {
    /// The engine the settings chose.
    pub fn engine(&self) -> Arc<dyn Engine> {
        self.engine.clone()
    }

    /// The whole program of a harness test target: `trials` under the
    /// harness flags `defaults` (they apply unless the command line sets
    /// them too: the command line comes later and wins), e.g.
    /// `["--geometry", "hybrid"]` for the hybrid-geometry lane.
    /// [`crate::lanes`] calls it with each lane's row of the lane table.
    pub fn main(target: &'static str, trials: Vec<Trial>, defaults: &[String]) -> ExitCode {
        Self::main_marked(target, trials, defaults, false)
    }

    /// [`Suite::main`] with every trial marked ignored when `ignored` (as
    /// `#[ignore]`): the target then runs them only under `-- --ignored`
    /// (or `--include-ignored`), and a plain `cargo test` starts no stack.
    pub fn main_marked(
        target: &'static str,
        trials: Vec<Trial>,
        defaults: &[String],
        ignored: bool,
    ) -> ExitCode {
        let (suite, libtest_argv) = match Self::from_argv(target, std::env::args(), defaults) {
            Ok(ready) => ready,
            Err(exit) => return exit,
        };
        let (filters, libtest_argv) = config::take_filters(libtest_argv);
        let mut args = Arguments::from_iter(libtest_argv);
        // Stack trials run one at a time: telemetry deltas must be theirs alone.
        args.test_threads = Some(1);
        if !args.list {
            install_teardown_on_signal();
        }
        let mut planned = Vec::new();
        let trials = trials
            .into_iter()
            .filter(|trial| filters.selects(&trial.trial_name(), args.exact))
            .map(|trial| {
                let runnable = suite.trial(trial).with_ignored_flag(ignored);
                let asked = !ignored || args.ignored || args.include_ignored;
                if asked && !args.is_filtered_out(&runnable) {
                    planned.push(trial);
                }
                runnable
            })
            .collect();
        let _ = suite.planned.set(planned);
        let conclusion = libtest_mimic::run(&args, trials);
        // A run-level check (the Guard services' shutdown on a
        // production-size pool) judged after the trials fails the program.
        if !args.list && !suite.finish() && !conclusion.has_failed() {
            return ExitCode::FAILURE;
        }
        conclusion.exit_code()
    }

    /// Resolves harness flags (after `defaults`) and the environment into a
    /// suite; returns the arguments left for libtest. `Err` carries the exit
    /// code after help or a usage error was printed.
    pub fn from_argv(
        target: &'static str,
        argv: impl IntoIterator<Item = String>,
        defaults: &[String],
    ) -> Result<(Arc<Suite>, Vec<String>), ExitCode> {
        let mut argv: Vec<String> = argv.into_iter().collect();
        let program = if argv.is_empty() {
            String::new()
        } else {
            argv.remove(0)
        };
        let argv = std::iter::once(program)
            .chain(defaults.iter().cloned())
            .chain(argv);
        let (harness, libtest_argv) =
            config::split_args(argv).map_err(|e| usage_error(&e.to_string()))?;
        if harness.help || harness.help_harness {
            print!("{}", config::harness_help());
            if harness.help_harness {
                return Err(ExitCode::SUCCESS);
            }
        }
        let env = Env::from_process().map_err(|e| usage_error(&e.to_string()))?;
        let resolved = config::resolve(&harness, &env).map_err(|e| usage_error(&e.to_string()))?;
        let events_from = events::mark();
        for warning in &resolved.warnings {
            events::emit(RunEvent::Warning {
                message: warning.to_string(),
            });
        }
        init_tracing(&resolved.settings);
        let mut suite = Suite::new(target, resolved.settings).map_err(|e| usage_error(&e))?;
        suite.events_from = events_from;
        Ok((Arc::new(suite), libtest_argv))
    }

    fn new(target: &'static str, settings: Settings) -> Result<Self, String> {
        let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let engine = settings.build_engine(&repo_root)?;
        let prompts = PromptBook::new(reference::prompt_shape(&settings, engine.as_ref()));
        crate::proc::clock_watch::start();
        // An attached stack's logs hold its owner's runs: its audit reads
        // from the first case on.
        let log_audit_from = settings.attach.is_none().then(Default::default);
        Ok(Self {
            target,
            settings,
            repo_root,
            engine,
            run_dir: OnceCell::new(),
            python: OnceCell::new(),
            stack: OnceCell::new(),
            references: OnceCell::new(),
            kvcr_imports: Mutex::new(Vec::new()),
            prompts,
            records: Mutex::new(Vec::new()),
            setup_failure_shown_by: Mutex::new(None),
            provisions: AtomicU32::new(0),
            started_utc: crate::evidence::UtcTime::now(),
            redactor: crate::config::Redactor::from_process_env(),
            events_from: events::mark(),
            live_run: Mutex::new(None),
            planned: OnceCell::new(),
            workload_trace: OnceCell::new(),
            log_audit_from: Mutex::new(log_audit_from),
        })
    }

    fn trial(self: &Arc<Self>, trial: Trial) -> libtest_mimic::Trial {
        let suite = self.clone();
        libtest_mimic::Trial::ignorable_test(trial.trial_name(), move || suite.run_trial(&trial))
    }

    /// Why the stack's second node cannot be made here (a topology over
    /// several nodes needs root, or CAP_SYS_ADMIN and CAP_NET_ADMIN).
    fn nodes_unavailable(&self, case_id: &str) -> Option<String> {
        let topology = self.settings.topology;
        topology
            .unavailable_here(self.engine.hosts())
            .map(|e| format!("{case_id} on {topology}: {e}"))
    }

    /// Why `case` does not run on this machine and stack, if it does not.
    fn skip(&self, case: &Trial) -> Option<Skip> {
        if !self.settings.selects(case.id()) {
            Some(Skip::not_selected(format!(
                "{} is not selected by --cases",
                case.id()
            )))
        } else if case.id() == crate::evidence::WORKLOAD_CASE {
            // Engine-neutral: it runs wherever a trace is given, but its
            // tier split counts each worker's hits, and a decode worker's
            // P→D delivery is not a cache hit of the prompt.
            if self.settings.workload.trace.is_none() {
                Some(Skip::not_applicable(format!(
                    "{} replays the trace of workload_trace, which is unset (the `workload` lane and `kvcr-e2e workload` set one; docs/workload.md)",
                    case.id()
                )))
            } else if self.settings.topology == crate::engine::Topology::TwoP1D {
                Some(Skip::not_applicable(format!(
                    "{} on 2p1d: the hit rate per tier sums every worker's hits, and the decode worker's P→D delivery of each prompt would count as hits (docs/workload.md)",
                    case.id()
                )))
            } else {
                None
            }
        } else {
            match case.applicability(self.settings.engine, self.settings.topology) {
                Applicability::Applies => self
                    .nodes_unavailable(case.id())
                    .or_else(|| match case {
                        Trial::Row(row) => row.fault.unavailable_here(),
                        Trial::Case(_) => None,
                    })
                    .map(Skip::machine_cannot),
                Applicability::Ignored(reason) => Some(Skip::not_applicable(reason)),
            }
        }
    }

    /// Whether a trial after `case` in this run will use the stack. A
    /// destructive trial restores the stack only for such a trial, or for
    /// a stack that outlives the run (`keep_stack`): after the run's last
    /// stack user, the restore (a worker restart: minutes on vLLM) would
    /// serve nobody.
    fn later_trial_uses_stack(&self, case: &Trial) -> bool {
        let Some(planned) = self.planned.get() else {
            return true;
        };
        // A kept or attached stack outlives the run: it is left whole.
        if self.settings.keep_stack || self.settings.attach.is_some() {
            return true;
        }
        let name = case.trial_name();
        any_after(
            planned,
            |t| t.trial_name() == name,
            |later| self.skip(later).is_none(),
        )
    }

    fn run_trial(&self, case: &Trial) -> Result<Completion, Failed> {
        let started = Instant::now();
        let skip = self.skip(case);
        if let Some(skip) = skip {
            let require_all = self.settings.require_all;
            let outcome = skip.outcome(require_all);
            self.record(
                case,
                started,
                outcome,
                Vec::new(),
                Default::default(),
                Vec::new(),
            );
            return skip.completion(require_all);
        }
        crate::gpu::run::mark("case", &case.trial_name());
        events::emit(RunEvent::TrialStarted {
            trial: case.trial_name(),
        });
        let mut retried = Vec::new();
        let (result, evidence, measurements) = loop {
            let attempt_started = Instant::now();
            let (result, evidence, measurements) = match self.run_case(case, retried.len() + 1) {
                Ok(done) => done,
                Err(setup_error) => (
                    Err(self.setup_failure_for(case, setup_error)),
                    Vec::new(),
                    Default::default(),
                ),
            };
            let Err(message) = &result else {
                break (result, evidence, measurements);
            };
            // The machine, not the stack, broke this attempt: run it again.
            let clock = crate::proc::clock_watch::events_since(attempt_started);
            if clock.is_empty() || retried.len() >= self.settings.clock_event_retries as usize {
                break (result, evidence, measurements);
            }
            let attempt = crate::evidence::RetriedAttempt {
                message: self.redactor.scrub(message),
                clock_events: clock.iter().map(ToString::to_string).collect(),
                evidence: self.relative(evidence),
            };
            events::emit(RunEvent::Retry {
                trial: case.trial_name(),
                attempt: retried.len() + 2,
                why: attempt.why(),
            });
            retried.push(attempt);
        };
        // Failure messages quote what the stack said; no secret leaves.
        let result = result.map_err(|message| self.redactor.scrub(&message));
        let outcome = match (case, result) {
            // A case's known findings decide between a pass, an expected
            // failure and an unexpected pass.
            (Trial::Case(_), result) => {
                use crate::evidence::expected::{from_measurement, KVCR_FINDINGS};
                let checks = from_measurement(measurements.get(KVCR_FINDINGS));
                super::expected::outcome(result, &checks)
            }
            (Trial::Row(_), Ok(())) => Outcome::Passed,
            (Trial::Row(_), Err(message)) => Outcome::Failed { message },
        };
        let completion = super::expected::completion(&outcome);
        self.record(case, started, outcome, evidence, measurements, retried);
        completion
    }

    /// The message a trial fails with when the shared setup failed: the
    /// whole error for the first trial, a pointer to it for the others.
    fn setup_failure_for(&self, case: &Trial, error: String) -> String {
        let Ok(mut shown) = self.setup_failure_shown_by.lock() else {
            return error;
        };
        match shown.as_ref() {
            None => {
                *shown = Some(case.trial_name());
                events::emit(RunEvent::SetupFailed {
                    trial: case.trial_name(),
                    error: error.clone(),
                });
                if let Some(Ok(run)) = self.run_dir.get() {
                    let _ = run.write_root_text("setup-error.txt", &error);
                }
                error
            }
            Some(first) => {
                let headline = error.lines().next().unwrap_or_default();
                let headline: String = headline.chars().take(160).collect();
                format!(
                    "setup failed, as for {first} (its failure has the whole error): {headline}…"
                )
            }
        }
    }

    /// Runs one case against the shared stack. The outer `Err` is a setup
    /// failure (no stack, no references); the inner result is the case's.
    #[allow(clippy::type_complexity)]
    fn run_case(
        &self,
        case: &Trial,
        attempt: usize,
    ) -> Result<
        (
            Result<(), String>,
            Vec<PathBuf>,
            serde_json::Map<String, serde_json::Value>,
        ),
        String,
    > {
        let run_dir = self.run_dir()?;
        let stack = self.stack()?;
        let references = self.references()?;
        // A second attempt keeps the first one's evidence beside its own.
        let slug = match attempt {
            1 => case.slug(),
            n => format!("{}-attempt{n}", case.slug()),
        };
        let ctx = CaseCtx::new(
            case.id(),
            slug,
            &self.settings,
            &stack,
            &references,
            &self.prompts,
            run_dir,
        )
        .map_err(|e| e.to_string())?;
        let found = heal_before(&stack, &ctx, &case.trial_name())?;
        if !found.is_empty() {
            self.note_left_broken(&found, &case.trial_name());
        }
        let pids_before: Vec<u32> = stack.workers().iter().map(|w| w.process.pid()).collect();
        let from = self
            .log_audit_from
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| super::log_audit::marks_now(&stack));
        ctx.log_audit.begin(from);
        let activity = ctx.activity.clone();
        let ((result, ctx), timed_out) = super::deadline::run_bounded(
            &case.trial_name(),
            self.settings.case_timeout,
            &activity,
            move || (case.run(&ctx), ctx),
        );
        let result = match &timed_out {
            None => {
                let judged = ctx.crashes.judge(&stack, &ctx.evidence, result);
                // A case that leaves the stack whole leaves KVCR at rest and
                // no bad line in the stack's logs.
                let whole = !case.destructive() && ctx.crashes.count() == 0;
                let judged = match whole {
                    true => {
                        let at_rest = super::at_rest::judge(&ctx, judged);
                        let (judged, next) = super::log_audit::judge(&ctx, at_rest);
                        *self
                            .log_audit_from
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = Some(next);
                        judged
                    }
                    false => judged,
                };
                judged.map_err(|e| e.to_string())
            }
            Some(timed_out) => {
                // The case's own late error ("cancelled") says less than this.
                activity.resume();
                let path = ctx.record("timeout.json", timed_out);
                Err(format!("{timed_out} (evidence: {})", path.display()))
            }
        };
        // A timed-out case may have left a worker dead or a fault half-done;
        // after a crash the stack is restored, so the next case starts on a
        // whole stack instead of failing on the same dead process.
        let broken = case.destructive() || timed_out.is_some() || ctx.crashes.count() > 0;
        if broken && !self.later_trial_uses_stack(case) {
            events::emit(RunEvent::NoRestore {
                trial: case.trial_name(),
            });
        }
        let result = if broken && self.later_trial_uses_stack(case) {
            events::emit(RunEvent::Restore {
                trial: case.trial_name(),
            });
            let seen = ctx.crashes.count();
            let restored = result.and(super::restore::restore(&stack, &ctx, &pids_before));
            // A crash during the restore is this case's too, and the next
            // case must still start on a whole stack.
            let restored = ctx
                .crashes
                .judge(&stack, &ctx.evidence, restored.map_err(CaseError::new))
                .map_err(|e| e.to_string());
            match ctx.crashes.count() > seen {
                true => restored.and(super::restore::restore(&stack, &ctx, &pids_before)),
                false => restored,
            }
        } else {
            // No restore names a worker latched during the case: it is named
            // here (the next case, if any, replaces it).
            for latched in stack.latched_workers() {
                ctx.evidence.note(
                    crate::evidence::LEFT_BROKEN,
                    &format!("{latched} (latched at the end of the case)"),
                );
            }
            result
        };
        Ok(ctx.into_evidence(result))
    }

    /// Names, in the record of the last case that ran on the stack, what
    /// the next case (`next`) found broken before it began (a worker whose
    /// KVCR source latched off, one that dropped out of discovery) and had
    /// replaced: it happened during that case or its restore, or after it.
    /// That case's verdict stands on its own evidence (the latch cannot
    /// make a failing check pass), so its outcome is kept; its record, the
    /// summary and results.json say what it left.
    fn note_left_broken(&self, found: &[String], next: &str) {
        let Ok(mut records) = self.records.lock() else {
            return;
        };
        let Some(last) = records
            .iter_mut()
            .rev()
            .find(|r| !matches!(r.outcome, Outcome::Ignored { .. }))
        else {
            return;
        };
        // Already named there (by its restore): once is enough.
        let named = last.texts(crate::evidence::LEFT_BROKEN).join("\n");
        let found: Vec<&String> = found
            .iter()
            .filter(|l| !named.contains(l.as_str()))
            .collect();
        let notes: Vec<String> = found
            .iter()
            .map(|line| format!("{line} (found before {next}, which replaced it)"))
            .collect();
        let list = last
            .measurements
            .entry(crate::evidence::LEFT_BROKEN.to_string())
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let serde_json::Value::Array(list) = list {
            list.extend(notes.into_iter().map(serde_json::Value::String));
        }
        drop(records);
        self.write_progress();
    }

    fn record(
        &self,
        case: &Trial,
        started: Instant,
        outcome: Outcome,
        evidence: Vec<PathBuf>,
        measurements: serde_json::Map<String, serde_json::Value>,
        retried: Vec<crate::evidence::RetriedAttempt>,
    ) {
        let mut record = CaseRecord::start(case.id(), case.trial_name());
        record.started_at =
            crate::evidence::UtcTime(time::OffsetDateTime::now_utc() - started.elapsed());
        record.outcome = outcome;
        record.duration = started.elapsed();
        record.evidence = self.relative(evidence);
        record.measurements = measurements.into_iter().collect();
        record.retried = retried;
        events::emit(record.finished_event());
        if let Ok(mut records) = self.records.lock() {
            records.push(record);
        }
        self.write_progress();
    }

    /// `paths` relative to the run directory where they are under it.
    fn relative(&self, paths: Vec<PathBuf>) -> Vec<PathBuf> {
        match self.run_dir.get() {
            Some(Ok(run)) => paths.iter().map(|p| run.relative(p)).collect(),
            _ => paths,
        }
    }

    fn run_dir(&self) -> Result<&RunDir, String> {
        self.run_dir
            .get_or_init(|| {
                let run = RunDir::create_for(
                    &self.repo_root.join(&self.settings.run_dir),
                    self.target,
                    crate::config::Redactor::from_process_env(),
                )
                .map_err(|e| e.to_string())?;
                run.write_config(&self.settings)
                    .map_err(|e| e.to_string())?;
                events::emit(RunEvent::EvidenceDir {
                    path: run.root().to_path_buf(),
                });
                Ok(run)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Registers this run among the machine's live runs (with
    /// `--exclusive`, once the others are gone) and says whom it runs beside.
    fn join_live_runs(&self, run: &RunDir) -> Result<(), String> {
        let live = super::neighbours::LiveRun::join(
            &self.settings,
            &self.repo_root,
            self.target,
            run.root(),
            self.settings.attach.as_deref(),
        )?;
        if let Ok(mut slot) = self.live_run.lock() {
            *slot = live;
        }
        Ok(())
    }

    fn python(&self) -> Result<&PythonEnv, String> {
        self.python
            .get_or_init(|| {
                let base = match (self.engine.python_env(), self.settings.python.as_deref()) {
                    (Some(spec), user) => pyenv::ensure_env(&self.repo_root, spec, user),
                    (None, Some(user)) => pyenv::ensure(&self.repo_root, Some(user)),
                    (None, None) => {
                        return Err(format!(
                            "the {} engine runs the Python of its own image: pass --python PATH (or PHASE1_PYTHON) naming an interpreter with {} installed",
                            self.engine.name(),
                            self.engine.name()
                        ))
                    }
                }
                .map_err(|e| e.to_string())?;
                // The KVCR build under test, over that env (docs/kvcr-under-test.md).
                pyenv::layer(&self.repo_root, base, &self.settings.kvcr)
                    .map_err(|e| format!("the KVCR build under test is not usable: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The shared stack, provisioned on first call; every later call gets
    /// the same stack or the same provisioning error.
    pub fn stack(&self) -> Result<Arc<Stack>, String> {
        self.stack
            .get_or_init(|| {
                let run = self.run_dir()?;
                self.join_live_runs(run)?;
                match &self.settings.attach {
                    Some(path) => self.attach_stack(run, path),
                    None => self.provision_stack(run),
                }
            })
            .clone()
    }

    /// Attaches to the stack `path` describes (another process owns it):
    /// no provisioning, no teardown.
    fn attach_stack(&self, run: &RunDir, path: &Path) -> Result<Arc<Stack>, String> {
        super::kvcr_coverage::refuse_attached(&self.settings)?;
        let mirror = run.logs_dir().join("attached");
        let stack = stack::attach(self.engine.clone(), path, &mirror)
            .map_err(|e| format!("attach failed: {e}"))?
            // This run's budgets, not the owner's.
            .with_run_budgets(self.settings.kill_timeout, self.settings.probe_timeout);
        events::emit(RunEvent::StackAttached {
            manifest: path.to_path_buf(),
            through_urls: !stack.control().sees_processes(),
        });
        // Through URLs, no file of the stack is shared: this
        // run's prompt families are its own.
        if stack.control().sees_processes() {
            self.prompts
                .share_cursor(&stack.plan.layout.scratch_dir.join(PROMPT_CURSOR));
        }
        let _ = run.write_stack(&stack.describe());
        self.check_attached_kvcr(&stack)?;
        Ok(Arc::new(stack))
    }

    /// Provisions the run's own stack: preflights, the stack's options,
    /// the processes, the reference phase first where the cache cannot
    /// serve it, the KVCR import check, then the stack is ready.
    fn provision_stack(&self, run: &RunDir) -> Result<Arc<Stack>, String> {
        let python_env = self.preflight(run)?;
        let options = self.stack_options(run, python_env)?;
        let with_reference = options.with_reference;
        let stack = self.start_stack(options)?;
        if with_reference {
            // The reference engines run alone: their phase first,
            // then they stop and the KVCR workers start.
            let started = self.reference_phase(&stack).and_then(|_| {
                stack
                    .start_workers()
                    .map_err(|e| format!("stack provisioning failed: {e}"))
            });
            if let Err(error) = started {
                return Err(self.abandon(run, &stack, error));
            }
        }
        // The KVCR workers, started after the reference phase.
        for (name, pid) in stack.components() {
            crate::gpu::run::watch(&name, pid);
        }
        // Before any case: every Guard and worker imports the build.
        if let Err(error) = self.check_kvcr_imports(&stack) {
            return Err(self.abandon(run, &stack, error));
        }
        self.stack_ready(run, &stack);
        Ok(stack)
    }

    /// The Python env the stack runs, recorded, and the KVCR and engine
    /// preflights on it.
    fn preflight(&self, run: &RunDir) -> Result<&PythonEnv, String> {
        let python_env = self.python()?;
        // Recorded, not asserted: where the interpreter came from,
        // and the bootstrap's time and size when this run built it.
        let _ = run.write_root_json("python-env.json", python_env);
        let python = &python_env.python;
        if let Some(build) = &python_env.kvcr {
            super::kvcr_checks::preflight_guard(
                self.engine.as_ref(),
                python,
                build,
                &self.repo_root,
            )
            .map_err(|e| format!("KVCR preflight failed: {e}"))?;
        }
        self.engine
            .preflight(python)
            .map_err(|e| format!("engine preflight failed: {e}"))?;
        Ok(python_env)
    }

    /// What this run provisions: with the reference workers first unless
    /// the reference cache serves the run, once the GPUs are known to fit.
    fn stack_options(&self, run: &RunDir, python_env: &PythonEnv) -> Result<StackOptions, String> {
        let trace = self.workload_trace()?;
        let with_reference = !reference::cached(
            &self.settings,
            self.engine.as_ref(),
            &self.reference_cache_dir(),
            python_env,
            trace.as_deref().map(|t| &t.0),
        );
        // GPUs before any process starts: placement, then NVML (off,
        // with one line, on a machine without a driver).
        let gpu_need = crate::engine::placement::preflight_need(
            self.engine.as_ref(),
            "127.0.0.1",
            with_reference,
        )?;
        crate::gpu::run::begin(&gpu_need, self.settings.startup_timeout)?;
        Ok(StackOptions {
            python: super::kvcr_coverage::interpreter(&self.settings, run, python_env)?,
            repo_root: self.repo_root.clone(),
            logs_dir: run.logs_dir(),
            run_id: run.run_id().to_string(),
            host: "127.0.0.1".into(),
            startup_timeout: self.settings.startup_timeout,
            worker_faults: Vec::new(),
            with_reference,
            kill_timeout: self.settings.kill_timeout,
            probe_timeout: self.settings.probe_timeout,
            kvcr: python_env.kvcr.clone(),
        })
    }

    /// Starts the stack's processes, registers it for teardown on a
    /// signal, and has the GPU sampler watch them.
    fn start_stack(&self, options: StackOptions) -> Result<Arc<Stack>, String> {
        self.provisions.fetch_add(1, Ordering::SeqCst);
        events::emit(RunEvent::StackStarting {
            engine: self.engine.name().to_string(),
            logs: options.logs_dir.clone(),
        });
        let stack = stack::provision(self.engine.clone(), options)
            .map(Arc::new)
            .map_err(|e| format!("stack provisioning failed: {e}"))?;
        if let Ok(mut live) = LIVE_STACK.lock() {
            *live = Some(stack.clone());
        }
        for (name, pid) in stack.components() {
            crate::gpu::run::watch(&name, pid);
        }
        Ok(stack)
    }

    /// Tears down a stack whose provisioning failed after it started;
    /// returns `error`.
    fn abandon(&self, run: &RunDir, stack: &Stack, error: String) -> String {
        let stops = stack.teardown();
        let _ = run.write_root_json("teardown.json", &stops);
        if let Ok(mut live) = LIVE_STACK.lock() {
            *live = None;
        }
        error
    }

    /// Says the stack is ready, shares its prompt cursor and keeps its
    /// `stack.json` in the run directory.
    fn stack_ready(&self, run: &RunDir, stack: &Stack) {
        events::emit(super::records::stack_ready(&stack.timings()));
        self.prompts
            .share_cursor(&stack.plan.layout.scratch_dir.join(PROMPT_CURSOR));
        if let Err(e) = stack.set_manifest(&run.root().join("stack.json")) {
            events::emit(RunEvent::EvidenceNotWritten {
                what: events::Unwritten::StackManifest,
                error: e.to_string(),
            });
        }
    }

    /// What ran, for results.json and JUnit properties: the Python env,
    /// every patch applied to a third-party package, and the nice value of
    /// ready workers and Guards where the engine lowers it.
    fn environment(&self) -> std::collections::BTreeMap<String, String> {
        let mut env = std::collections::BTreeMap::new();
        if let Some(Ok(python)) = self.python.get() {
            env.insert("python.env".into(), python.env.to_string());
            env.insert("python.source".into(), python.source.to_string());
            env.insert(
                "python.interpreter".into(),
                python.python.display().to_string(),
            );
            for patch in &python.patches {
                env.insert(
                    format!("patch.{}", patch.file),
                    format!("{} sha256={}", patch.applies_to, patch.sha256),
                );
            }
        }
        if let Some(build) = self.kvcr_build() {
            env.extend(build.properties());
        }
        if let Some(Ok(stack)) = self.stack.get() {
            if let Some(nice) = stack.plan.engine.ready_nice() {
                env.insert("stack.ready_nice".into(), nice.to_string());
            }
        }
        env
    }

    /// The KVCR build of the run: the one this run resolved, or, attached,
    /// the one the stack's owner started it with.
    fn kvcr_build(&self) -> Option<crate::evidence::KvcrBuild> {
        if let Some(Ok(python)) = self.python.get() {
            return python.kvcr.clone();
        }
        let stack = self.stack.get()?.as_ref().ok()?;
        stack.options().kvcr.clone()
    }

    /// Every Guard and worker of a stack this run started imports the build
    /// under test; their reports go into the evidence.
    fn check_kvcr_imports(&self, stack: &Stack) -> Result<(), String> {
        let Some(build) = self.kvcr_build() else {
            return Ok(());
        };
        let imports = super::kvcr_checks::check_imports(stack, &build)
            .map_err(|e| format!("KVCR import check failed: {e}"))?;
        events::emit(RunEvent::KvcrChecked {
            build: build.one_line(),
            processes: imports.len(),
        });
        if let Ok(mut all) = self.kvcr_imports.lock() {
            *all = imports;
        }
        Ok(())
    }

    /// An attached stack runs the build its owner resolved: a run that asks
    /// for another one (`--kvcr`) fails instead of testing the wrong build.
    fn check_attached_kvcr(&self, stack: &Stack) -> Result<(), String> {
        let asked = &self.settings.kvcr;
        match &stack.options().kvcr {
            Some(build) if !asked.is_default() && build.spec != asked.to_string() => Err(format!(
                "the attached stack runs {}, this run asks for --kvcr {asked}: start a stack with that build (`kvcr-e2e stack up --kvcr {asked}`)",
                build.one_line()
            )),
            None if !asked.is_default() => Err(format!(
                "the attached stack does not say which KVCR it runs (its stack.json predates --kvcr), this run asks for --kvcr {asked}"
            )),
            _ => Ok(()),
        }
    }

    /// WL-01's trace (`workload_trace`), when a planned trial replays it:
    /// read and checked once, its error naming the line.
    pub(super) fn workload_trace(&self) -> Result<Option<Arc<TraceFile>>, String> {
        self.workload_trace
            .get_or_init(|| {
                let replays = self
                    .planned
                    .get()
                    .is_some_and(|p| p.iter().any(|t| t.id() == crate::evidence::WORKLOAD_CASE));
                if !replays {
                    return Ok(None);
                }
                reference::workload::trace_of(&self.settings.workload, &self.repo_root)
                    .map(|t| t.map(Arc::new))
                    .map_err(|e| format!("workload trace: {e}"))
            })
            .clone()
    }

    fn reference_cache_dir(&self) -> PathBuf {
        self.repo_root.join(&self.settings.reference_cache)
    }

    pub fn references(&self) -> Result<Arc<References>, String> {
        // Provisioning runs the reference phase when the cache cannot serve.
        let stack = self.stack()?;
        self.reference_phase(&stack)
    }

    /// The one entry point of the reference phase: run once (by
    /// provisioning, before the KVCR workers start, or on the first call
    /// from the cache); every later call gets the same references or error.
    fn reference_phase(&self, stack: &Stack) -> Result<Arc<References>, String> {
        self.references
            .get_or_init(|| self.run_reference_phase(stack))
            .clone()
    }

    /// The reference phase (or its cache entry); the reference engines are
    /// stopped afterwards.
    fn run_reference_phase(&self, stack: &Stack) -> Result<Arc<References>, String> {
        let run = self.run_dir()?;
        let trace = self.workload_trace()?;
        let refs = reference::load_or_run(
            stack,
            &self.settings,
            &self.prompts,
            &self.reference_cache_dir(),
            trace.as_deref().map(|t| (&t.0, t.1.as_path())),
        )
        .map_err(|e| format!("reference phase failed: {e}"));
        stack.stop_references();
        let refs = refs?;
        if !refs.from_cache {
            super::kvcr_checks::check_references(stack.plan.engine.as_ref(), &run.logs_dir())
                .map_err(|e| format!("reference phase failed: {e}"))?;
        }
        let _ = run.write_root_json("reference.json", &refs.summary());
        Ok(Arc::new(refs))
    }

    /// After the trials: teardown (unless kept), then every evidence writer
    /// over the same records. `false` when a check of the whole run failed
    /// (on a production-size Guard pool: the steps' deadlines and the Guard
    /// services' shutdown, `guard-costs.json`).
    pub fn finish(&self) -> bool {
        let Some(Ok(run)) = self.run_dir.get() else {
            return true;
        };
        // Replacements started during the cases report their kvcr too.
        let seen = crate::pyenv::import_report::scan(&run.logs_dir());
        if !seen.is_empty() {
            if let Ok(mut imports) = self.kvcr_imports.lock() {
                *imports = seen;
            }
        }
        let stack = self.stack.get().and_then(|s| s.as_ref().ok()).cloned();
        if let Some(live) = self.live_run.lock().ok().as_mut().and_then(|l| l.as_mut()) {
            live.look_at_end();
        }
        let mut teardown = Vec::new();
        if let Some(stack) = &stack {
            if self.settings.keep_stack {
                events::emit(RunEvent::StackKept {
                    manifest: run.root().join("stack.json"),
                });
            } else {
                let stops = stack.teardown();
                if let Ok(mut live) = LIVE_STACK.lock() {
                    *live = None;
                }
                let _ = run.write_root_json("teardown.json", &stops);
                teardown = stops;
            }
        }
        let operation_timeout_ms = stack
            .as_ref()
            .and_then(|s| s.plan.engine.kvcr_operation_timeout_ms());
        let guard_costs =
            super::guard_costs::collect(operation_timeout_ms, run, self.target, &teardown);
        let coverage = super::kvcr_coverage::collect(
            &self.settings,
            run,
            self.python.get().and_then(|p| p.as_ref().ok()),
            &self
                .kvcr_imports
                .lock()
                .map(|i| i.clone())
                .unwrap_or_default(),
        );
        let results = self
            .results_so_far(run)
            .with_gpu(crate::gpu::run::finish())
            .with_kvcr_coverage(coverage)
            .with_guard_costs(guard_costs.as_ref().map(|(costs, _)| costs.clone()));
        let junit = self.settings.junit_path(run.root());
        let written = self
            .write_results(run, &results)
            .and_then(|_| crate::evidence::write_report(run, &results));
        if let Err(e) = written {
            events::emit(RunEvent::EvidenceNotWritten {
                what: events::Unwritten::Evidence,
                error: e.to_string(),
            });
        }
        eprintln!(
            "{}",
            self.redactor.scrub(&crate::evidence::render_summary(
                &results.run,
                &results.perf
            ))
        );
        if let Some(coverage) = &results.kvcr_coverage {
            eprint!("{}", self.redactor.scrub(&coverage.summary()));
        }
        events::emit(RunEvent::EvidenceWritten {
            path: run.root().to_path_buf(),
            junit,
        });
        let violations = guard_costs.map(|(_, v)| v).unwrap_or_default();
        for violation in &violations {
            eprintln!(
                "{}",
                self.redactor.scrub(&format!(
                    "the run failed after its trials: {violation} (evidence: {})",
                    run.root()
                        .join(crate::evidence::guard_costs::FILE)
                        .display()
                ))
            );
        }
        if let Some(live) = self.live_run.lock().ok().and_then(|mut l| l.take()) {
            live.end();
        }
        crate::proc::reaper::finish();
        violations.is_empty()
    }
}

impl Suite {
    /// Every writer's input: the records of the trials finished so far.
    fn results_so_far(&self, run: &RunDir) -> crate::evidence::Results {
        let stack = self.stack.get().and_then(|s| s.as_ref().ok()).cloned();
        let mut cases = self.records.lock().map(|r| r.clone()).unwrap_or_default();
        let references = self.references.get().and_then(|r| r.as_ref().ok()).cloned();
        let (requests, perf) = super::records::collect_perf(&mut cases, references.as_deref());
        let record = crate::evidence::RunRecord {
            run_id: run.run_id().to_string(),
            run_dir: run.root().to_path_buf(),
            started_at: self.started_utc,
            label: format!(
                "{} {}/{}/{}",
                self.target, self.settings.engine, self.settings.topology, self.settings.geometry
            ),
            settings_digest: crate::evidence::settings_digest(&self.settings),
            stack: stack
                .as_ref()
                .map(|s| super::records::stack_summary(s, self.provisions.load(Ordering::SeqCst))),
            reference: references.as_deref().map(super::records::reference_summary),
            cases,
            neighbours: self
                .live_run
                .lock()
                .ok()
                .and_then(|l| l.as_ref().map(|l| l.record())),
            environment: self.environment(),
            kvcr: self
                .kvcr_build()
                .map(|build| crate::evidence::KvcrProvenance {
                    build,
                    imports: self
                        .kvcr_imports
                        .lock()
                        .map(|i| i.clone())
                        .unwrap_or_default(),
                }),
            clock_events: crate::proc::clock_watch::events(),
            events: events::since(self.events_from),
        };
        crate::evidence::Results::new(record, requests, perf)
    }

    /// The JUnit file, then results.json, both replaced atomically: a
    /// reader that sees a trial in results.json finds it in JUnit too (a run
    /// killed right after a trial still reports it in both).
    fn write_results(
        &self,
        run: &RunDir,
        results: &crate::evidence::Results,
    ) -> Result<(), crate::evidence::EvidenceError> {
        let junit = self.settings.junit_path(run.root());
        crate::evidence::write_junit_with(
            &results.run,
            results.gpu.as_ref(),
            results.perf.workload.as_ref(),
            &junit,
            &self.redactor,
        )?;
        results.write(run).map(drop)
    }

    /// After every trial: results.json and JUnit as they stand, so a run
    /// killed mid-way (a CI timeout) still reports the trials that finished.
    fn write_progress(&self) {
        let Some(Ok(run)) = self.run_dir.get() else {
            return;
        };
        if let Err(e) = self.write_results(run, &self.results_so_far(run)) {
            events::emit(RunEvent::EvidenceNotWritten {
                what: events::Unwritten::ResultsAfterTrial,
                error: e.to_string(),
            });
        }
    }
}

/// Replaces the workers that dropped out of the router's discovery, or
/// whose KVCR source latched off, since the last look (during the last
/// case or its restore, or between cases), so that `trial` starts on a
/// whole stack; recorded as `not-whole-before.json` and the measurement
/// `healed_before` of `trial`. Returns what it found, for the record of
/// the case that ran before.
fn heal_before(stack: &Stack, ctx: &CaseCtx, trial: &str) -> Result<Vec<String>, String> {
    let dropouts = stack.dropped_out_workers().unwrap_or_default();
    let latched = stack.latched_workers();
    if dropouts.is_empty() && latched.is_empty() {
        return Ok(Vec::new());
    }
    let found: Vec<String> = dropouts
        .iter()
        .map(ToString::to_string)
        .chain(latched.iter().map(ToString::to_string))
        .collect();
    for line in &found {
        events::emit(RunEvent::NotWholeBefore {
            trial: trial.to_string(),
            found: line.clone(),
        });
    }
    ctx.record("not-whole-before.json", &found);
    ctx.measure(crate::evidence::HEALED_BEFORE, &found);
    let pids: Vec<u32> = stack.workers().iter().map(|w| w.process.pid()).collect();
    // What this restore replaces is `found`, named above.
    super::restore::restore_whole(stack, ctx, &pids)
        .map_err(|e| format!("the stack was not whole before {trial} and was not restored: {e}"))?;
    Ok(found)
}

/// SIGINT / SIGTERM: tear down the live stack (if any), then exit.
pub fn install_teardown_on_signal() {
    signals::install(|_| {
        // Nothing starts from here on: a worker the main thread would start
        // beside this teardown (a heal before the next case) could write
        // into the scratch directory after the teardown removed it.
        crate::proc::reaper::end_spawns();
        if let Some(stack) = LIVE_STACK.lock().ok().and_then(|s| s.clone()) {
            stack.teardown();
        }
        crate::proc::reaper::finish();
    });
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    eprintln!("(run with `-- --help` to list the harness flags)");
    ExitCode::from(2)
}

fn init_tracing(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PHASE1_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("kvcr_e2e={}", settings.log_level.as_str()))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Whether an item after the first one matching `is_current` satisfies
/// `uses`; `true` when no item matches (unknown position: assume a user).
fn any_after<T>(items: &[T], is_current: impl Fn(&T) -> bool, uses: impl Fn(&T) -> bool) -> bool {
    match items.iter().position(is_current) {
        Some(at) => items[at + 1..].iter().any(uses),
        None => true,
    }
}

#[cfg(test)]
mod restore_plan_tests {
    use super::any_after;

    #[test]
    fn only_a_later_runnable_trial_asks_for_a_restore() {
        let plan = ["a", "b", "c"];
        let runs = |t: &&str| *t != "c";
        assert!(any_after(&plan, |t| *t == "a", runs));
        assert!(!any_after(&plan, |t| *t == "b", runs), "c is skipped");
        assert!(!any_after(&plan, |t| *t == "c", runs), "nothing after c");
        assert!(any_after(&plan, |t| *t == "z", runs), "unknown: restore");
    }
}

#[cfg(test)]
mod gpu_engine_preflight_tests {
    use super::*;

    /// `--engine sglang` with an SGLang that lacks PR #36409 fails before any
    /// process starts, with the preflight's message (a stub interpreter
    /// stands in for the real one).
    #[test]
    fn engine_sglang_without_the_kvcr_backend_fails_at_preflight() {
        let dir = tempfile::tempdir().expect("temp dir");
        let python = dir.path().join("python");
        // Answers the harness's interpreter probes (site-packages, imports,
        // where kvcr is) and the SGLang choices probe, as a Python without
        // PR #36409 would.
        std::fs::create_dir_all(dir.path().join("kvcr")).expect("mkdir");
        std::fs::write(dir.path().join("kvcr/__init__.py"), "").expect("write");
        std::fs::write(
            &python,
            format!(
                "#!/bin/sh\ncase \"$2\" in\n  *hicache-storage-backend*) printf 'VERSION 0.5.23\\nCHOICES file mooncake nixl\\n';;\n  *purelib*) echo {0};;\n  *find_spec*) printf 'locations=1\\nlocation={0}/kvcr\\nversion=0.1.1\\n';;\nesac\nexit 0\n",
                dir.path().display()
            ),
        )
        .expect("write stub");
        let status = std::process::Command::new("chmod")
            .args(["+x", &python.display().to_string()])
            .status()
            .expect("chmod runs");
        assert!(status.success());
        let argv = [
            "phase1",
            "--engine",
            "sglang",
            "--python",
            &python.display().to_string(),
            "--run-dir",
            &dir.path().join("runs").display().to_string(),
        ]
        .map(String::from);
        let (suite, _) = Suite::from_argv("phase1", argv, &[]).expect("the flags resolve");
        let err = match suite.stack() {
            Ok(_) => panic!("a stack started without the kvcr backend"),
            Err(e) => e,
        };
        assert!(
            err.starts_with(
                "engine preflight failed: engine sglang preflight: the SGLang 0.5.23 of"
            ) && err.contains("offers no `kvcr` HiCache storage backend")
                && err.contains("SGLang PR #36409")
                && err.contains("KVCR 0.1.0")
                && err.contains("NIXL 1.3.1"),
            "{err}"
        );
        assert_eq!(
            suite.provisions.load(Ordering::SeqCst),
            0,
            "nothing started"
        );
    }
}
