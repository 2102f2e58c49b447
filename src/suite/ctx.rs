//! What a case works with: the stack, the references, fresh prompts, a
//! client, telemetry, and its own evidence directory.
//!
//! Every helper here either returns what the case needs or a [`CaseError`]
//! that says what was expected, what was seen, and which file to open.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::client::{Client, Completion, CompletionOutcome, StreamOutcome};
use crate::config::Settings;
use crate::engine::Geometry;
use crate::evidence::RunDir;
use crate::prompts::{Family, Prompt, PromptBook};
use crate::reference::References;
use crate::stack::{Stack, Worker};
use crate::telemetry::{self, Counter, Delta, Snapshot};
use crate::verdict::{tokens::expect_reference_tokens, Violation};
use crate::wait::{self, Poll};

use super::{CaseError, CaseResult};

/// How often telemetry is polled while a case waits for a count.
const TELEMETRY_POLL: Duration = Duration::from_millis(50);
/// How long a case waits for asynchronous telemetry (deposits, the source
/// side of a transfer) to show up.
const TELEMETRY_DEADLINE: Duration = Duration::from_secs(15);

/// One completed request, as a case sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub prompt: String,
    pub tokens: Vec<u32>,
    pub worker_id: Option<u64>,
    /// Every worker the response names (prefill and decode when disaggregated).
    pub worker: Option<crate::client::WorkerIdentity>,
    pub cached_tokens: Option<u64>,
    pub prompt_tokens: u64,
    pub latency_ms: f64,
    /// The `x-request-id` it was sent with.
    pub request_id: String,
}

/// A peer transfer's numbers and the deltas they came from.
#[derive(Debug, Clone, Serialize)]
pub struct PeerTransferDeltas {
    pub transfer: crate::verdict::transfer::PeerTransfer,
    pub source: Delta,
    pub target: Delta,
}

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
    /// Evidence directory name (`TC-05-cold`): unique per trial.
    slug: String,
    pub settings: &'a Settings,
    pub stack: &'a Stack,
    pub references: &'a References,
    pub prompts: &'a PromptBook,
    pub client: Client,
    run: &'a RunDir,
    evidence: RefCell<Vec<PathBuf>>,
    /// Evidence files that could not be written: the case fails with them.
    unwritten: RefCell<Vec<String>>,
    measurements: RefCell<Map<String, Value>>,
    comparisons: RefCell<Vec<Value>>,
    /// Every request sent through [`CaseCtx::request`], with its id.
    requests: RefCell<Vec<super::requests::SentRequest>>,
    /// What the case is doing now; the suite cancels it past its timeout.
    pub(super) activity: super::activity::Activity,
    /// Processes the case's own fault makes exit (`exit_after_prefill`):
    /// their exit is not a crash.
    expected_exits: RefCell<Vec<String>>,
    /// Components seen crashed during the case (each reported once).
    crashes: RefCell<Vec<crate::stack::Crash>>,
}

impl<'a> CaseCtx<'a> {
    pub fn new(
        case: &super::Case,
        settings: &'a Settings,
        stack: &'a Stack,
        references: &'a References,
        prompts: &'a PromptBook,
        run: &'a RunDir,
    ) -> Self {
        Self {
            id: case.id,
            slug: case.slug(),
            settings,
            stack,
            references,
            prompts,
            client: Client::new(stack.frontend_url())
                .expect("an HTTP client for the frontend")
                .with_request_timeout(Duration::from_secs(settings.request_timeout_s))
                .recording(),
            run,
            evidence: RefCell::new(Vec::new()),
            unwritten: RefCell::new(Vec::new()),
            measurements: RefCell::new(Map::new()),
            comparisons: RefCell::new(Vec::new()),
            requests: RefCell::new(Vec::new()),
            activity: super::activity::Activity::new(),
            expected_exits: RefCell::new(Vec::new()),
            crashes: RefCell::new(Vec::new()),
        }
    }

    /// Runs `case` against `stack` (another stack than the suite's) with
    /// this case's settings, references, prompts and run directory; its
    /// evidence goes to `<this case's directory>-<name>`, and the suite's
    /// timeout cancels it as it cancels this case.
    pub fn on_stack(
        &self,
        stack: &Stack,
        name: &str,
        case: fn(&CaseCtx) -> CaseResult,
    ) -> CaseResult {
        let nested = CaseCtx {
            id: self.id,
            slug: format!("{}-{name}", self.slug),
            settings: self.settings,
            stack,
            references: self.references,
            prompts: self.prompts,
            client: Client::new(stack.frontend_url())
                .map_err(|e| CaseError::new(format!("an HTTP client for {name}: {e}")))?
                .with_request_timeout(Duration::from_secs(self.settings.request_timeout_s))
                .recording(),
            run: self.run,
            evidence: RefCell::new(Vec::new()),
            unwritten: RefCell::new(Vec::new()),
            measurements: RefCell::new(Map::new()),
            comparisons: RefCell::new(Vec::new()),
            requests: RefCell::new(Vec::new()),
            activity: self.activity.clone(),
            expected_exits: RefCell::new(Vec::new()),
            crashes: RefCell::new(Vec::new()),
        };
        let result = case(&nested);
        nested.flush_comparisons();
        result
    }

    /// Names what the case does from now on (the timeout message quotes
    /// it); fails once the case was cancelled.
    /// The case as its trial is named: `TC-05::cold` (from the evidence
    /// directory name `TC-05-cold`).
    pub fn case_name(&self) -> String {
        match self.slug.strip_prefix(self.id) {
            Some(rest) => format!("{}::{}", self.id, rest.trim_start_matches('-')),
            None => self.slug.clone(),
        }
    }

    pub fn doing(&self, what: impl Into<String>) -> CaseResult {
        self.activity.doing(what).map_err(CaseError::new)
    }

    /// Runs `future` unless the case is cancelled first (then it is dropped).
    pub fn block_on<F: std::future::Future>(&self, future: F) -> Result<F::Output, CaseError> {
        self.activity.block_on(future).map_err(CaseError::new)
    }

    // ----- stack ---------------------------------------------------------

    /// The live worker in slot `name` (`A`, `B`).
    pub fn worker(&self, name: &str) -> Result<Arc<Worker>, CaseError> {
        Ok(self.stack.worker(name)?)
    }

    pub fn geometry(&self) -> Geometry {
        self.stack.engine.geometry()
    }

    /// Unused prompt families for this case.
    pub fn families(&self, n: usize) -> Result<Vec<Family>, CaseError> {
        Ok(self.prompts.take_many(self.id, n)?)
    }

    pub fn family(&self) -> Result<Family, CaseError> {
        Ok(self.prompts.take(self.id)?)
    }

    // ----- requests ------------------------------------------------------

    /// The request for `prompt`, pinned to `worker` when given (a prefill
    /// worker through its prefill pin, any other through the instance header).
    pub(super) fn request(&self, prompt: &Prompt, pin: Option<&Worker>) -> Completion {
        let request = crate::reference::request(
            &self.stack.engine.model(),
            prompt,
            self.settings.prompts.max_tokens,
        );
        self.requests
            .borrow_mut()
            .push(super::requests::SentRequest::new(
                request.request_id.clone(),
                prompt.key(),
                pin.map(|w| w.name().to_string()),
            ));
        match pin {
            Some(worker) => worker.pin(request),
            None => request,
        }
    }

    /// The component log lines of one request (its `x-request-id`, and the
    /// Dynamo request id the frontend logged beside it).
    pub fn log_lines_of(&self, request_id: &str) -> Vec<String> {
        super::requests::log_lines(&self.stack.layout.logs_dir, &[request_id])
    }

    /// The id of the last request sent for `prompt` (its key, `f12/v0`).
    pub fn request_id_of(&self, prompt: &str) -> Option<String> {
        self.requests
            .borrow()
            .iter()
            .rev()
            .find(|r| r.prompt == prompt)
            .map(|r| r.request_id.clone())
    }

    /// A non-streaming completion pinned to `worker`, which must be the one
    /// that served it.
    pub fn complete_on(&self, worker: &Worker, prompt: &Prompt) -> Result<Answer, CaseError> {
        let answer = self.complete(prompt, Some(worker))?;
        self.expect_served_by(worker, answer.worker.as_ref(), &prompt.key())?;
        Ok(answer)
    }

    /// A non-streaming completion where the router picks the worker.
    pub fn complete_routed(&self, prompt: &Prompt) -> Result<Answer, CaseError> {
        self.complete(prompt, None)
    }

    /// Every variant of `families` through the router, in family then
    /// variant order. Families go [`Batching`](crate::reference::Batching)'s
    /// concurrency at a time (the reference phase's batch probe decides it;
    /// sequential without one), each family's variants one after another.
    /// Records which mode ran, and why, as the measurement `batching`.
    pub fn complete_routed_families(
        &self,
        families: &[crate::prompts::Family],
    ) -> Result<Vec<Answer>, CaseError> {
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
        let per_family: Vec<Result<Vec<Answer>, CaseError>> = self.block_on(
            stream::iter(families.iter().map(|family| async move {
                let mut answers = Vec::new();
                for prompt in &family.variants {
                    let started = Instant::now();
                    let request = self.request(prompt, None);
                    let outcome = self.client.complete(&request).await.map_err(|e| {
                        CaseError::new(format!("request {} failed: {e}", prompt.key()))
                    })?;
                    answers.push(answer(prompt, request, outcome, started)?);
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

    fn complete(&self, prompt: &Prompt, pin: Option<&Worker>) -> Result<Answer, CaseError> {
        self.doing(format!("requesting {}{}", prompt.key(), on_worker(pin)))?;
        let started = Instant::now();
        let request = self.request(prompt, pin);
        let outcome: CompletionOutcome =
            self.block_on(self.client.complete(&request))?
                .map_err(|e| {
                    CaseError::new(format!(
                        "request {} failed: {e}{}",
                        prompt.key(),
                        self.unreachable_node(pin)
                    ))
                })?;
        answer(prompt, request, outcome, started)
    }

    /// A streaming completion pinned to `worker` (or routed when `None`).
    pub fn stream(
        &self,
        worker: Option<&Worker>,
        prompt: &Prompt,
    ) -> Result<StreamOutcome, CaseError> {
        self.doing(format!("streaming {}{}", prompt.key(), on_worker(worker)))?;
        let outcome = self
            .block_on(self.client.stream(&self.request(prompt, worker)))?
            .map_err(|e| CaseError::new(format!("stream of {} failed: {e}", prompt.key())))?;
        if let Some(w) = worker {
            self.expect_served_by(w, outcome.worker.as_ref(), &prompt.key())?;
        }
        Ok(outcome)
    }

    fn expect_served_by(
        &self,
        worker: &Worker,
        served_by: Option<&crate::client::WorkerIdentity>,
        prompt: &str,
    ) -> CaseResult {
        match served_by {
            Some(identity) if worker.served(identity) => Ok(()),
            Some(identity) => Err(CaseError::new(format!(
                "{prompt} was pinned to {:?} worker {} ({}) but served by {identity:?}",
                worker.role(),
                worker.name(),
                worker.instance_id()
            ))),
            None => Err(CaseError::new(format!(
                "{prompt}: the response does not say which worker served it (nvext.worker_id)"
            ))),
        }
    }

    /// The answer's tokens equal the reference engine's for `prompt`.
    pub fn expect_reference(&self, prompt: &Prompt, tokens: &[u32]) -> CaseResult {
        self.compare_to_reference(prompt, tokens).map_err(|mut v| {
            if let Some(id) = self.request_id_of(&prompt.key()) {
                v.detail = format!("{} (x-request-id {id})", v.detail);
            }
            self.fail(v, "tokens.json")
        })
    }

    /// Compares `tokens` with the reference and records the comparison in
    /// `tokens.json`; the caller decides what a mismatch means.
    pub fn compare_to_reference(&self, prompt: &Prompt, tokens: &[u32]) -> Result<(), Violation> {
        let Some(reference) = self.references.tokens(prompt) else {
            return Err(Violation {
                claim: "reference tokens",
                detail: format!(
                    "no reference tokens for {} (reference digest {})",
                    prompt.key(),
                    self.references.digest
                ),
            });
        };
        let verdict = expect_reference_tokens(reference, tokens);
        self.comparisons.borrow_mut().push(json!({
            "prompt": prompt.key(), "request_id": self.request_id_of(&prompt.key()), "reference": reference, "got": tokens, "equal": verdict.is_ok(),
        }));
        verdict
    }

    /// Completes `prompt` on `worker`, checks the tokens, and waits until the
    /// worker has deposited the prompt's full blocks into its KVCR pool.
    pub fn commit(&self, worker: &Worker, prompt: &Prompt) -> Result<Answer, CaseError> {
        let before = self.snapshot(worker)?;
        let answer = self.complete_on(worker, prompt)?;
        self.expect_reference(prompt, &answer.tokens)?;
        let blocks = self.geometry().full_blocks(prompt.tokens.len() as u64);
        self.await_count(
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
        Ok(answer)
    }

    /// How this stack's engine tells the prompt blocks it computed.
    pub fn prefill_accounting(&self) -> super::observe::PrefillAccounting {
        if self.stack.engine.counts_blocks() {
            super::observe::PrefillAccounting::Counted
        } else {
            super::observe::PrefillAccounting::FromPrefixCache {
                block_size: u64::from(self.geometry().block_size_tokens),
            }
        }
    }

    /// One request's host-tier loads on `delta`'s worker.
    pub fn host_tier_hit(
        &self,
        delta: &Delta,
        cached_tokens: Option<u64>,
    ) -> Result<crate::verdict::local::HostTierHit, crate::telemetry::NotReported> {
        super::observe::host_tier_hit(delta, cached_tokens, self.prefill_accounting())
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
        let (evicted_blocks, basis) = if self.stack.engine.counts_blocks() {
            (
                delta.required_count(&Counter::DeviceCacheEvictions)?,
                "counted",
            )
        } else {
            let block = u64::from(self.geometry().block_size_tokens.max(1));
            let admitted_tokens = delta
                .required_count(&Counter::PrefixCacheQueries)?
                .saturating_sub(delta.required_count(&Counter::PrefixCacheHits)?);
            // The first `capacity` admitted blocks may have filled free
            // slots; every one after them pushed an older block out.
            let capacity = self.stack.engine.device_cache_blocks();
            (
                (admitted_tokens / block).saturating_sub(capacity),
                "admitted past capacity",
            )
        };
        let eviction = Eviction {
            fillers: fillers.len(),
            evicted_blocks,
            device_cache_blocks: self.stack.engine.device_cache_blocks(),
            basis,
        };
        if eviction.evicted_blocks < eviction.device_cache_blocks {
            let path = self.record(
                "eviction.json",
                &serde_json::json!({"eviction": eviction, "delta": delta}),
            );
            return Err(CaseError::new(format!(
                "eviction not proven: worker {} evicted {} blocks ({}) after {} filler prompts, fewer than its device cache holds ({}); raise --perf-evict-filler",
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

    // ----- telemetry -----------------------------------------------------

    pub fn snapshot(&self, worker: &Worker) -> Result<Snapshot, CaseError> {
        self.block_on(telemetry::scrape(&worker.metrics_url()))?
            .map(|s| s.with_worker(worker.name()))
            .map_err(|e| {
                CaseError::new(format!(
                    "telemetry of worker {}: {e}{}",
                    worker.name(),
                    self.unreachable_node(Some(worker))
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

    /// Polls `worker`'s telemetry until `counter` rose by at least `at_least`
    /// since `before`, and returns the delta at that moment.
    pub fn await_count(
        &self,
        worker: &Worker,
        before: &Snapshot,
        counter: &Counter,
        at_least: u64,
        what: &str,
    ) -> Result<Delta, CaseError> {
        self.doing(format!("waiting for {what}"))?;
        wait::until(what, TELEMETRY_DEADLINE, TELEMETRY_POLL, || {
            if let Err(cancelled) = self.activity.check() {
                return Poll::Abort(cancelled.to_string());
            }
            match self.delta_since(worker, before) {
                Ok(delta) => match delta.required_count(counter) {
                    Ok(n) if n >= at_least => Poll::Ready(delta),
                    Ok(n) => Poll::Pending(format!("{counter} rose by {n}")),
                    Err(absent) => Poll::Pending(absent.to_string()),
                },
                Err(e) => Poll::Abort(e.message),
            }
        })
        .map_err(CaseError::from)
    }

    /// Both sides of a peer transfer since `source_before` / `target_before`.
    /// The source reports its `source_write` asynchronously, so when the
    /// target delivered remotely this waits for the source to say so.
    pub fn peer_transfer_since(
        &self,
        source: &Worker,
        source_before: &Snapshot,
        target: &Worker,
        target_before: &Snapshot,
    ) -> Result<PeerTransferDeltas, CaseError> {
        let target_delta = self.delta_since(target, target_before)?;
        let delivered = target_delta.required_count(&Counter::OpCount(
            telemetry::Scope::RemoteDeliver,
            telemetry::OpResult::Success,
        ))?;
        let source_delta = if delivered > 0 {
            self.await_count(
                source,
                source_before,
                &Counter::OpCount(telemetry::Scope::SourceWrite, telemetry::OpResult::Success),
                1,
                &format!(
                    "worker {} to report the source_write of the transfer to {}",
                    source.name(),
                    target.name()
                ),
            )
            // The target delivered, so a source that never says so is its
            // own failure (a lost or unreported write), not a silent 0.
            .map_err(|e| CaseError {
                message: format!(
                    "the target {} delivered remotely, but the source did not report it: {}",
                    target.name(),
                    e.message
                ),
                ..e
            })?
        } else {
            self.delta_since(source, source_before)?
        };
        Ok(PeerTransferDeltas {
            transfer: super::observe::peer_transfer(&source_delta, &target_delta)?,
            source: source_delta,
            target: target_delta,
        })
    }

    /// Proves peers can pull from a replacement: KVCR 0.1.1 peers remember
    /// that an endpoint already has their transfer metadata, so the first
    /// pull from a new process at the same control endpoint is refused
    /// (`missing target agent metadata`) and only the next one succeeds.
    /// Each other worker pulls fresh prefixes from `replacement` until one
    /// transfer succeeds, within a few attempts.
    pub fn relink(&self, replacement: &Worker) -> CaseResult {
        const ATTEMPTS: usize = 3;
        for peer in self
            .stack
            .workers()
            .iter()
            .filter(|w| w.name() != replacement.name())
        {
            let mut tries = Vec::new();
            for family in self.families(ATTEMPTS)? {
                self.doing(format!(
                    "proving worker {} can pull from the replacement {}",
                    peer.name(),
                    replacement.name()
                ))?;
                // Before the commit: a decode peer pulls from a prefill
                // replacement during the commit itself (its P→D transfer).
                let (src_before, dst_before) = (self.snapshot(replacement)?, self.snapshot(peer)?);
                self.commit(replacement, family.variant(0))?;
                let answer = self.complete_on(peer, family.variant(1))?;
                self.expect_reference(family.variant(1), &answer.tokens)?;
                let observed =
                    self.peer_transfer_since(replacement, &src_before, peer, &dst_before)?;
                let linked = observed.transfer.remote_deliver_success_ops > 0;
                tries.push(observed);
                if linked {
                    break;
                }
            }
            let path = self.record(
                &format!("relink-{}-{}.json", replacement.name(), peer.name()),
                &tries,
            );
            if !tries
                .last()
                .is_some_and(|t| t.transfer.remote_deliver_success_ops > 0)
            {
                return Err(CaseError::new(format!(
                    "the stack is not whole: worker {} could not pull from the replacement {} in {ATTEMPTS} attempts",
                    peer.name(),
                    replacement.name()
                ))
                .with_evidence(path));
            }
        }
        Ok(())
    }

    // ----- evidence ------------------------------------------------------

    /// Writes `value` as `cases/<id>/<name>` and returns its path. A write
    /// that fails is kept and fails the case on its own ("evidence not
    /// written: ..."), so a path named in a message that does not exist is
    /// always explained.
    pub fn record(&self, name: &str, value: &impl Serialize) -> PathBuf {
        match self.run.write_json(&self.slug, name, value) {
            Ok(path) => {
                self.evidence.borrow_mut().push(path.clone());
                path
            }
            Err(e) => {
                self.unwritten.borrow_mut().push(e.to_string());
                self.run.case_file(&self.slug, name)
            }
        }
    }

    /// This case's evidence directory.
    pub fn case_dir(&self) -> PathBuf {
        self.run.case_dir(&self.slug)
    }

    /// When `source` and `reader` run on different nodes: the transfer
    /// between them went over TCP through the nodes' veth, as UCX itself
    /// reports (`UCX_PROTO_INFO=y`) in the log of the side that moved the
    /// data; a peer reached over shared memory (`cma`, `posix`, `sysv`)
    /// fails. On one node there is nothing to check.
    pub fn expect_crossed_network(&self, source: &Worker, reader: &Worker) -> CaseResult {
        let Some(crossing) = self.stack.crossing(source, reader) else {
            return Ok(());
        };
        let judge = |side: &crate::stack::Side| {
            let log = std::fs::read_to_string(&side.log).unwrap_or_default();
            crate::proc::ucx::expect_network_transfer(&log, &side.interface)
        };
        // UCX prints a protocol's table when it first selects it: wait (with
        // a deadline) until one side's log shows the transfer.
        let _ = wait::until(
            format!(
                "a UCX remote memory table in {} or {}",
                crossing.source.log.display(),
                crossing.reader.log.display()
            ),
            TELEMETRY_DEADLINE,
            TELEMETRY_POLL,
            || match (judge(&crossing.source), judge(&crossing.reader)) {
                (Err(a), Err(b)) => Poll::Pending(format!("{a}; {b}")),
                _ => Poll::Ready(()),
            },
        );
        let (at_source, at_reader) = (judge(&crossing.source), judge(&crossing.reader));
        let verdict = match (&at_source, &at_reader) {
            (Ok(t), _) | (_, Ok(t)) => {
                self.measure("ucx_transports", t);
                Ok(())
            }
            (Err(s), Err(r)) => Err(Violation {
                claim: "a peer transfer between nodes crossed the network",
                detail: format!(
                    "{} ({}) -> {} ({}): at {}: {s}; at {}: {r} (UCX reports: {}, {})",
                    crossing.source.worker,
                    crossing.source.address,
                    crossing.reader.worker,
                    crossing.reader.address,
                    crossing.source.worker,
                    crossing.reader.worker,
                    crossing.source.log.display(),
                    crossing.reader.log.display()
                ),
            }),
        };
        self.check(
            "transport.json",
            &json!({ "crossing": crossing, "at_source": at_source, "at_reader": at_reader }),
            verdict,
        )
    }

    /// `; <why>` when `worker` runs on a node that is cut off the network
    /// (two nodes only), else empty.
    fn unreachable_node(&self, worker: Option<&Worker>) -> String {
        worker
            .and_then(|w| self.stack.unreachable_node(w))
            .map(|why| format!("; {why}"))
            .unwrap_or_default()
    }

    /// Adds a measurement to the case's record in results.json.
    pub fn measure(&self, key: &str, value: impl Serialize) {
        self.measurements.borrow_mut().insert(
            key.to_string(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
    }

    /// A failed verdict, pointed at the evidence file `name` of this case.
    pub fn fail(&self, violation: Violation, name: &str) -> CaseError {
        self.flush_comparisons();
        CaseError::from(violation).with_evidence(self.run.case_file(&self.slug, name))
    }

    /// Checks a verdict after recording `observed` as evidence file `name`.
    pub fn check(
        &self,
        name: &str,
        observed: &impl Serialize,
        verdict: Result<(), Violation>,
    ) -> CaseResult {
        let path = self.record(name, observed);
        verdict.map_err(|v| CaseError::from(v).with_evidence(path))
    }

    /// `requests.json` (every request: its id, body and headers as sent,
    /// a `curl` line, the reference tokens) and `log-lines.txt` (the
    /// component log lines naming them); a failure names both and the id
    /// of the case's last request.
    fn collect_request_logs(&self, result: Result<(), String>) -> Result<(), String> {
        let built = self.requests.borrow().clone();
        let requests = super::requests::with_wire(
            built.clone(),
            &self.client.sent(),
            self.client.base_url(),
            |prompt| self.references.tokens.get(prompt).cloned(),
        );
        let Some(last) = built.last().or(requests.last()) else {
            return result;
        };
        let ids: Vec<&str> = requests.iter().map(|r| r.request_id.as_str()).collect();
        let lines = super::requests::log_lines(&self.stack.layout.logs_dir, &ids);
        self.record("requests.json", &requests);
        let log_path =
            match self
                .run
                .write_text(&self.slug, "log-lines.txt", &(lines.join("\n") + "\n"))
            {
                Ok(path) => {
                    self.evidence.borrow_mut().push(path.clone());
                    path
                }
                Err(e) => {
                    self.unwritten.borrow_mut().push(e.to_string());
                    self.run.case_file(&self.slug, "log-lines.txt")
                }
            };
        result.map_err(|message| {
            format!(
                "{message} [last request: x-request-id {} ({}); {} log lines of the case's {} requests: {}]",
                last.request_id,
                last.prompt,
                lines.len(),
                requests.len(),
                log_path.display()
            )
        })
    }

    fn flush_comparisons(&self) {
        let comparisons = self.comparisons.borrow().clone();
        if !comparisons.is_empty() {
            self.record("tokens.json", &comparisons);
        }
    }

    /// The files written and the measurements taken, for the case record,
    /// and the case's result with any evidence that could not be written
    /// added as its own failure.
    /// The process `name` may exit during this case: the case's fault makes it.
    pub(super) fn expect_exit(&self, name: &str) {
        self.expected_exits.borrow_mut().push(name.to_string());
    }

    /// `result`, failed first by every component that crashed (exited on
    /// its own, not by this case's fault) since the last look, with the
    /// cause its log gives: the case's own failure most likely follows from
    /// the crash, and a crash must never pass unseen.
    pub(super) fn with_crashes(&self, result: CaseResult) -> CaseResult {
        let new: Vec<crate::stack::Crash> = self
            .stack
            .crashed_components()
            .into_iter()
            .filter(|c| !self.expected_exits.borrow().contains(&c.name))
            .filter(|c| !self.crashes.borrow().iter().any(|seen| seen.name == c.name))
            .collect();
        if new.is_empty() {
            return result;
        }
        self.crashes.borrow_mut().extend(new.iter().cloned());
        let path = self.record("crashes.json", &*self.crashes.borrow());
        let list = new
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let then = match result {
            Ok(()) => String::new(),
            Err(case_failure) => format!("; the case then failed: {case_failure}"),
        };
        Err(CaseError::new(format!("crashed during the case: {list}{then}")).with_evidence(path))
    }

    /// How many components were seen crashed during the case.
    pub(super) fn crash_count(&self) -> usize {
        self.crashes.borrow().len()
    }

    pub fn into_evidence(
        self,
        result: Result<(), String>,
    ) -> (Result<(), String>, Vec<PathBuf>, Map<String, Value>) {
        self.flush_comparisons();
        let result = self.collect_request_logs(result);
        let mut files = self.evidence.into_inner();
        files.sort();
        files.dedup();
        let result = with_unwritten(result, &self.unwritten.into_inner());
        (result, files, self.measurements.into_inner())
    }
}

/// ` on worker A` for a pinned request, ` (routed)` otherwise.
fn on_worker(pin: Option<&Worker>) -> String {
    match pin {
        Some(worker) => format!(" on worker {}", worker.name()),
        None => " (routed)".to_string(),
    }
}

/// A case's result with the evidence writes that failed added to it.
fn with_unwritten(result: Result<(), String>, unwritten: &[String]) -> Result<(), String> {
    if unwritten.is_empty() {
        return result;
    }
    let unwritten = unwritten.join("; ");
    match result {
        Ok(()) => Err(format!("evidence not written: {unwritten}")),
        Err(message) => Err(format!(
            "{message}; also, evidence not written (files named above may be missing): {unwritten}"
        )),
    }
}

/// The [`Answer`] to `request` for `prompt`, sent at `started`.
fn answer(
    prompt: &Prompt,
    request: crate::client::Completion,
    outcome: CompletionOutcome,
    started: Instant,
) -> Result<Answer, CaseError> {
    let tokens = outcome.token_ids.clone().ok_or_else(|| {
        CaseError::new(format!(
            "response to {} carried no token ids (asked for nvext.completion_token_ids); text was {:?}",
            prompt.key(),
            outcome.text
        ))
    })?;
    Ok(Answer {
        prompt: prompt.key(),
        tokens,
        worker_id: outcome.worker_id,
        worker: outcome.worker,
        cached_tokens: outcome
            .usage
            .as_ref()
            .and_then(|u| u.cached_tokens)
            .map(u64::from),
        prompt_tokens: outcome
            .usage
            .as_ref()
            .map_or(0, |u| u64::from(u.prompt_tokens)),
        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
        request_id: request.request_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_evidence_write_fails_the_case_on_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(tmp.path(), crate::config::Redactor::none()).unwrap();
        // A file where the case directory should be: the write must fail.
        std::fs::write(run.case_dir("TC-01-x"), "not a directory").unwrap();
        let err = run
            .write_json("TC-01-x", "tokens.json", &json!({}))
            .unwrap_err()
            .to_string();
        let passed = with_unwritten(Ok(()), std::slice::from_ref(&err)).unwrap_err();
        assert!(
            passed.starts_with("evidence not written: cannot create"),
            "{passed}"
        );
        let failed = with_unwritten(Err("token 2 of 16 differs".into()), &[err]).unwrap_err();
        assert!(
            failed.starts_with("token 2 of 16 differs; also, evidence not written"),
            "{failed}"
        );
        assert_eq!(with_unwritten(Ok(()), &[]), Ok(()));
    }
}
