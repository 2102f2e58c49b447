//! What a case works with: workers, fresh prompt families, requests checked
//! against the reference, telemetry snapshots, and its own evidence; and,
//! through typed helpers, everything else it may need:
//!
//! | helper | what it does |
//! |---|---|
//! | [`CaseCtx::observe`] | waits on telemetry, peer transfers, host-tier hits, the transport between nodes, the interval log |
//! | [`CaseCtx::faults`] | kills and replacements of workers (the one way a case kills one), Guard service crashes and restarts, stops and engine fault switches, each verified and undone |
//! | [`CaseCtx::guard`] | the Guard service: attach checks, its log, its pool files, its takeover of a dead worker's port, attempts it should serve |
//! | [`CaseCtx::perf`] | measured streams, arm and sweep summaries, TTFT accuracy |
//! | [`CaseCtx::load`] | a bounded streaming load with a fault in its middle |
//! | [`CaseCtx::disagg`] | the prefill and decode workers, the P→D transfer |
//! | [`CaseCtx::shared_prefix`] | concurrent requests for one prompt on one worker, and the deposits they made |
//!
//! Every helper either returns what the case needs or a [`CaseError`] that
//! says what was expected, what was seen, and which file to open.
//!
//! The stack and the settings stay private: a case reads the engine
//! ([`CaseCtx::engine`]) and the settings ([`CaseCtx::settings`]), and
//! reaches the stack's processes only through the helpers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::client::Client;
use crate::config::Settings;
use crate::engine::{Engine, Geometry, Need, Support};
use crate::evidence::RunDir;
use crate::prompts::{Family, Prompt, PromptBook};
use crate::reference::References;
use crate::stack::{Stack, StartupTimings, Worker};
use crate::telemetry::{self, Counter, Delta, Snapshot};
use crate::verdict::Violation;

use super::activity::Activity;
use super::ask::{self, Answer};
use super::at_rest::AtRest;
use super::case_evidence::{CaseEvidence, Closed};
use super::claim::{clause, Claim};
use super::crashes::Crashes;
use super::log_audit::LogAudit;
use super::request_log::RequestLog;
use super::{CaseError, CaseResult};
use super::{Disagg, Faults, Guards, Load, Observe, Perf, Pressure, SharedPrefix};

/// Proof that a device cache was pushed out.
#[derive(Debug, Clone, Serialize)]
pub struct Eviction {
    pub fillers: usize,
    pub evicted_blocks: u64,
    pub device_cache_blocks: u64,
    /// How `evicted_blocks` was known: `counted` (the engine counts its
    /// evictions) or `admitted past capacity` (vLLM counts none: the blocks
    /// the fillers brought in, from prefix-cache queries minus hits, beyond
    /// what the device cache holds; each of those pushed an older one out).
    pub basis: &'static str,
}

pub struct CaseCtx<'a> {
    pub id: &'static str,
    /// The run's settings; a case reads them through [`CaseCtx::settings`].
    pub(super) settings: &'a Settings,
    /// The stack; a case reaches it through the methods here and the typed
    /// helpers, never directly.
    pub(super) stack: &'a Stack,
    pub references: &'a References,
    pub prompts: &'a PromptBook,
    pub client: Client,
    /// What the case wrote and measured.
    pub(super) evidence: CaseEvidence<'a>,
    /// Every request the case sent, with its id.
    pub(super) requests: RequestLog,
    /// What the case is doing now; the suite cancels it past its timeout.
    pub(super) activity: Activity,
    /// Components seen crashed, and the exits the case's fault makes.
    pub(super) crashes: Crashes,
    /// What the case may leave held in KVCR (the at-rest audit after it).
    pub(super) at_rest: AtRest,
    /// Where the stack's logs stood when the case began (the log audit
    /// after it).
    pub(super) log_audit: LogAudit,
}

impl<'a> CaseCtx<'a> {
    /// The context of case `id` on `stack`, its evidence under `cases/<slug>/`.
    pub(super) fn new(
        id: &'static str,
        slug: String,
        settings: &'a Settings,
        stack: &'a Stack,
        references: &'a References,
        prompts: &'a PromptBook,
        run: &'a RunDir,
    ) -> Result<Self, CaseError> {
        let client = Client::new(stack.frontend_url(), settings.request_timeout)
            .map_err(|e| CaseError::new(format!("an HTTP client for the frontend: {e}")))?
            .recording();
        Ok(Self {
            id,
            settings,
            stack,
            references,
            prompts,
            client,
            evidence: CaseEvidence::new(run, slug),
            requests: RequestLog::new(stack.plan.engine.model(), settings.prompts.max_tokens),
            activity: Activity::new(),
            crashes: Crashes::default(),
            at_rest: AtRest::default(),
            log_audit: LogAudit::default(),
        })
    }

    /// After this case, allocated pool slots may stay unevictable in KVCR,
    /// `why` (recorded in `at-rest.json`); every other clause of the
    /// at-rest audit still holds.
    pub fn allow_unevictable_at_rest(&self, why: impl Into<String>) {
        self.at_rest.allow_unevictable(why);
    }

    /// Names what the case does from now on (the timeout message quotes
    /// it); fails once the case was cancelled.
    pub fn doing(&self, what: impl Into<String>) -> CaseResult {
        self.activity
            .doing(what)
            .map_err(|e| CaseError::claimed(Claim::CaseDeadline, e, e))
    }

    // ----- the stack and the prompts --------------------------------------

    /// The live worker in slot `name` (`A`, `B`).
    pub fn worker(&self, name: &str) -> Result<Arc<Worker>, CaseError> {
        Ok(self.stack.worker(name)?)
    }

    /// Every live worker, in slot order.
    pub fn workers(&self) -> Vec<Arc<Worker>> {
        self.stack.workers()
    }

    /// The stack's engine: its model, its geometry, what it counts and
    /// reports.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.stack.plan.engine
    }

    /// The run's settings (read only).
    pub fn settings(&self) -> &'a Settings {
        self.settings
    }

    /// How long each part of the stack's startup took.
    pub fn stack_startup(&self) -> StartupTimings {
        self.stack.timings()
    }

    /// The directory of the stack's logs.
    pub fn logs_dir(&self) -> &Path {
        &self.stack.plan.layout.logs_dir
    }

    pub fn geometry(&self) -> Geometry {
        self.stack.plan.engine.geometry()
    }

    /// Unused prompt families for this case.
    pub fn families(&self, n: usize) -> Result<Vec<Family>, CaseError> {
        Ok(self.prompts.take_many(self.id, n)?)
    }

    pub fn family(&self) -> Result<Family, CaseError> {
        Ok(self.prompts.take(self.id)?)
    }

    // ----- requests --------------------------------------------------------

    /// A non-streaming completion pinned to `worker`, which must be the one
    /// that served it.
    pub fn complete_on(&self, worker: &Worker, prompt: &Prompt) -> Result<Answer, CaseError> {
        let answer = ask::complete(self, prompt, Some(worker))?;
        ask::expect_served_by(worker, answer.worker.as_ref(), &prompt.key())?;
        Ok(answer)
    }

    /// A completion pinned to `worker` that has `deadline` to be answered:
    /// `None` when it was not (the request is dropped then). An answer must
    /// come from `worker`.
    pub fn complete_on_within(
        &self,
        worker: &Worker,
        prompt: &Prompt,
        deadline: std::time::Duration,
    ) -> Result<Option<Answer>, CaseError> {
        let answer = ask::complete_within(self, prompt, worker, deadline)?;
        if let Some(answer) = &answer {
            ask::expect_served_by(worker, answer.worker.as_ref(), &prompt.key())?;
        }
        Ok(answer)
    }

    /// A non-streaming completion where the router picks the worker.
    pub fn complete_routed(&self, prompt: &Prompt) -> Result<Answer, CaseError> {
        ask::complete(self, prompt, None)
    }

    /// Every variant of `families` through the router, in family then
    /// variant order. Families go [`Batching`](crate::reference::Batching)'s
    /// concurrency at a time (the reference phase's batch probe decides it;
    /// sequential without one), each family's variants one after another.
    /// Records which mode ran, and why, as the measurement `batching`.
    pub fn complete_routed_families(&self, families: &[Family]) -> Result<Vec<Answer>, CaseError> {
        use futures_util::stream::{self, StreamExt};
        let batching = crate::reference::Batching::of(self.references.batching.as_ref());
        self.measure("batching", &batching);
        let in_flight = (batching.concurrency as usize).max(1);
        if in_flight == 1 {
            return families
                .iter()
                .flat_map(|f| &f.variants)
                .map(|p| self.complete_routed(p))
                .collect();
        }
        self.doing(format!(
            "requesting {} families through the router, {in_flight} at a time",
            families.len()
        ))?;
        let per_family: Vec<Result<Vec<Answer>, CaseError>> = ask::block_on(
            self,
            stream::iter(families.iter().map(|family| async move {
                let mut answers = Vec::new();
                for prompt in &family.variants {
                    let started = Instant::now();
                    let request = self.requests.request(prompt, None);
                    let outcome = self.client.complete(&request).await.map_err(|e| {
                        CaseError::request(&e, format_args!("request {} failed", prompt.key()))
                    })?;
                    answers.push(ask::answer(prompt, request.request_id, outcome, started)?);
                }
                Ok(answers)
            }))
            .buffered(in_flight)
            .collect(),
        )?;
        let mut answers = Vec::new();
        for family in per_family {
            answers.extend(family?);
        }
        Ok(answers)
    }

    /// The answer's tokens equal the reference engine's for `prompt`.
    pub fn expect_reference(&self, prompt: &Prompt, tokens: &[u32]) -> CaseResult {
        ask::compare_to_reference(self, prompt, tokens).map_err(|mut v: Violation| {
            if let Some(id) = self.requests.id_of(&prompt.key()) {
                v.detail = format!("{} (x-request-id {id})", v.detail);
            }
            self.evidence.fail(v, "tokens.json")
        })
    }

    /// Completes `prompt` on `worker`, checks the tokens, and waits until the
    /// worker has deposited the prompt's full blocks into its KVCR pool.
    pub fn commit(&self, worker: &Worker, prompt: &Prompt) -> Result<Answer, CaseError> {
        let before = self.snapshot(worker)?;
        let answer = self.complete_on(worker, prompt)?;
        self.expect_reference(prompt, &answer.tokens)?;
        let blocks = self.geometry().full_blocks(prompt.tokens.len() as u64);
        self.observe().await_count(
            worker,
            &before,
            &Counter::TransferBlocks(telemetry::Scope::LocalFill),
            blocks,
            &format!(
                "worker {} to deposit the {blocks} blocks of {} into its KVCR pool",
                worker.name(),
                prompt.key()
            ),
        )?;
        // KVCR's own byte count of the deposit agrees with its blocks.
        self.observe().expect_fill_bytes(worker, &before)?;
        Ok(answer)
    }

    /// Pushes `worker`'s device prefix cache out with filler prompts
    /// (`perf_evict_filler` of them) and proves it from telemetry: the
    /// device cache evicted at least its whole capacity.
    pub fn evict_device_cache(&self, worker: &Worker) -> Result<Eviction, CaseError> {
        let fillers = self
            .prompts
            .fillers(self.settings.perf_evict_filler as usize);
        let before = self.snapshot(worker)?;
        for (i, filler) in fillers.iter().enumerate() {
            self.doing(format!(
                "evicting worker {}'s device cache (filler {} of {})",
                worker.name(),
                i + 1,
                fillers.len()
            ))?;
            self.complete_on(worker, filler)?;
        }
        let delta = self.delta_since(worker, &before)?;
        let (evicted_blocks, basis) = if self.stack.plan.engine.counts_blocks() {
            (
                delta.required_count(&Counter::DeviceCacheEvictions)?,
                "counted",
            )
        } else {
            (
                super::readings::evicted_past_capacity(
                    &delta,
                    u64::from(self.geometry().block_size_tokens),
                    self.stack.plan.engine.device_cache_blocks(),
                )?,
                "admitted past capacity",
            )
        };
        let eviction = Eviction {
            fillers: fillers.len(),
            evicted_blocks,
            device_cache_blocks: self.stack.plan.engine.device_cache_blocks(),
            basis,
        };
        if eviction.evicted_blocks < eviction.device_cache_blocks {
            let path = self.record(
                "eviction.json",
                &serde_json::json!({"eviction": eviction, "delta": delta}),
            );
            return Err(CaseError::clause(
                clause::EVICTION_NOT_PROVEN,
                format!(
                "worker {} evicted {} blocks ({}) after {} filler prompts, fewer than its device cache holds ({}); raise --perf-evict-filler",
                worker.name(),
                eviction.evicted_blocks,
                eviction.basis,
                eviction.fillers,
                eviction.device_cache_blocks
            ))
            .with_evidence(path));
        }
        Ok(eviction)
    }

    // ----- telemetry -------------------------------------------------------

    pub fn snapshot(&self, worker: &Worker) -> Result<Snapshot, CaseError> {
        ask::block_on(self, telemetry::scrape(&worker.metrics_url()))?
            .map(|s| s.with_worker(worker.name()))
            .map_err(|e| {
                CaseError::new(format!(
                    "telemetry of worker {}: {e}{}",
                    worker.name(),
                    ask::unreachable_node(self.stack, Some(worker))
                ))
            })
    }

    /// `after − before` for `worker`, scraped now.
    pub fn delta_since(&self, worker: &Worker, before: &Snapshot) -> Result<Delta, CaseError> {
        let after = self.snapshot(worker)?;
        after
            .since(before)
            .map_err(|e| CaseError::new(format!("telemetry of worker {}: {e}", worker.name())))
    }

    // ----- evidence --------------------------------------------------------

    /// Writes `value` as `cases/<id>/<name>` and returns its path. A write
    /// that fails is kept and fails the case on its own.
    pub fn record(&self, name: &str, value: &impl Serialize) -> PathBuf {
        self.evidence.record(name, value)
    }

    /// Writes `text` as `cases/<id>/<name>` (a table for people).
    pub fn record_text(&self, name: &str, text: &str) -> PathBuf {
        self.evidence.record_text(name, text)
    }

    /// Adds a measurement to the case's record in results.json.
    pub fn measure(&self, key: &str, value: impl Serialize) {
        self.evidence.measure(key, value)
    }

    /// Records a clause this stack cannot check, and why (the case stays
    /// green; its summary line and the report say "not checked").
    pub fn not_checked(&self, check: &str, why: &str) {
        self.evidence.not_checked(check, why)
    }

    /// Whether this stack gives `need` (one of the case's optional needs,
    /// `Case::optional`), or the engine's reason why not: the reason of the
    /// "not checked" record of a check that needs it.
    pub fn supports(&self, need: Need) -> Support {
        self.settings.engine.supports(need, self.settings.topology)
    }

    /// What the check of a known finding (docs/kvcr-findings.md,
    /// `verdict::findings`) saw in this case. Where the finding is declared
    /// to show (this case, this engine) it is recorded: while it shows, the
    /// case ends as an expected failure; when it does not, the case fails
    /// as an unexpected pass. Elsewhere it is recorded only if it shows (and
    /// fails the case: it is not declared there). Returns whether it shows
    /// where it is declared: the case then checks what the finding leaves
    /// to check.
    pub fn known_finding(&self, observed: &crate::verdict::findings::Observed) -> bool {
        let known = observed.finding;
        let expected = known.shows_in(self.id, self.settings.engine);
        if expected || observed.shows {
            self.evidence
                .known_finding(&crate::evidence::expected::FindingCheck {
                    finding: known.number,
                    title: known.title.to_string(),
                    shows: observed.shows,
                    expected,
                    seen: observed.seen.clone(),
                });
        }
        expected && observed.shows
    }

    /// Checks a verdict after recording `observed` as evidence file `name`.
    pub fn check(
        &self,
        name: &str,
        observed: &impl Serialize,
        verdict: Result<(), Violation>,
    ) -> CaseResult {
        self.evidence.check(name, observed, verdict)
    }

    /// The files written and the measurements taken, for the case record,
    /// and the case's result with its request logs, and any evidence that
    /// could not be written, added to it.
    pub(super) fn into_evidence(self, result: Result<(), String>) -> Closed {
        self.evidence.flush_comparisons();
        let result = self.requests.attach_logs(
            &self.evidence,
            &self.stack.plan.layout.logs_dir,
            &self.client,
            |prompt| self.references.tokens.get(prompt).cloned(),
            result,
        );
        self.evidence.close(result)
    }

    // ----- the typed helpers -----------------------------------------------

    /// Telemetry waits and observations: peer transfers, host-tier hits,
    /// the transport between nodes, the interval log, a request's log lines.
    pub fn observe(&self) -> Observe<'_> {
        Observe::new(self)
    }

    /// Faults, each verified before the case relies on it and undone after.
    pub fn faults(&self) -> Faults<'_> {
        Faults::new(self)
    }

    /// The Guard services of the stack.
    pub fn guard(&self) -> Guards<'_> {
        Guards::new(self)
    }

    /// Measured streams and their summaries (TC-05, TC-06).
    pub fn perf(&self) -> Perf<'_> {
        Perf::new(self)
    }

    /// A KVCR component started alone where it must refuse (TC-16).
    pub fn hostile_start(&self) -> super::HostileStart<'_> {
        super::HostileStart::new(self)
    }

    /// A bounded streaming load through the router with a fault in its middle.
    pub fn load(&self) -> Load<'_> {
        Load::new(self)
    }

    /// A workload trace replayed through the router (WL-01).
    pub fn shared_prefix(&self) -> SharedPrefix<'_> {
        SharedPrefix::new(self)
    }

    pub fn workload(&self) -> super::Workload<'_> {
        super::Workload::new(self)
    }

    /// The prefill and decode workers of a disaggregated stack.
    pub fn disagg(&self) -> Disagg<'_> {
        Disagg::new(self)
    }

    /// KVCR's own reports under production conditions (TC-07..TC-12):
    /// block hashes, where blocks are held, deposits, the stall latch,
    /// the logs' bad lines, claim probes, a stopped worker.
    pub fn pressure(&self) -> Pressure<'_> {
        Pressure::new(self)
    }
}
