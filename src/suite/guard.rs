//! The Guard services as a case sees them (`ctx.guard()`): which one holds a
//! worker's pool, whether every worker is attached, its log read from a
//! point in time, and attempts it should serve once their worker is dead.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::telemetry::guard_log::{
    GuardEvent, GuardLogEntry, GuardLogReader, GuardWaitError, Promotion,
};
use crate::telemetry::{Counter, Scope};
use crate::verdict::guard::{attempt_outcome, guard_source, AttemptOutcome};
use crate::verdict::transfer::PeerTransfer;

use super::readings::guard_transfer;
use super::{CaseCtx, CaseError, CaseResult};

/// How long a case waits for the Guard to log a promotion or a transfer.
const GUARD_DEADLINE: Duration = Duration::from_secs(10);
const GUARD_POLL: Duration = Duration::from_millis(20);
/// The Guard logs a transfer right after serving it; the target has already
/// answered by then, so this wait is short.
const TRANSFER_LOG_DEADLINE: Duration = Duration::from_secs(2);

/// The run's Guard service.
pub struct GuardView {
    log: PathBuf,
}

/// Guard events logged after a point in time.
pub struct GuardFollower {
    reader: GuardLogReader,
    log: PathBuf,
    /// Where the log ended when following began.
    from: u64,
}

/// A Guard log that could not be read: its own failure, never "no event".
fn unreadable(log: &std::path::Path, e: impl std::fmt::Display) -> CaseError {
    CaseError::new(format!(
        "cannot read the Guard log {}: {e}; the Guard's events are unknown, not absent",
        log.display()
    ))
    .with_evidence(log)
}

/// The Guard services of a case's stack (`ctx.guard()`).
pub struct Guards<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> Guards<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// `worker`'s KVCR registering its pool with NIXL as it started, by its
    /// own startup stages (the start of its log).
    pub fn registrations(&self, worker: &Worker) -> Vec<crate::telemetry::guard_costs::Step> {
        let start = worker.process.log_since_spawn(4 << 20);
        crate::telemetry::guard_costs::LoggedCosts::parse(&start).registrations
    }

    /// The Guard service holding `worker`'s pool (the stack's only one, or
    /// the worker's own where each slot has a Guard).
    pub fn of(&self, worker: &Worker) -> Result<GuardView, CaseError> {
        let guard = self
            .ctx
            .stack
            .guard_of(worker)
            .ok_or_else(|| CaseError::new("this stack runs no KVCR Guard service"))?;
        view(&guard)
    }

    /// Every worker in `workers` holds its group in its Guard service.
    pub fn expect_attached(&self, workers: &[&Worker]) -> CaseResult {
        for worker in workers {
            self.of(worker)?.expect_attached(&[worker])?;
        }
        Ok(())
    }

    /// The files in the pool directory of the Guard service holding
    /// `worker`'s pool, by name.
    pub fn pool_files(&self, worker: &Worker) -> Vec<crate::stack::PoolFile> {
        self.ctx.stack.pool_files_of(worker)
    }

    /// How many descriptors the Guard service holding `worker`'s pool has
    /// open (`/proc/<pid>/fd`); `None` where that cannot be read.
    pub fn open_descriptors(&self, worker: &Worker) -> Option<usize> {
        let guard = self.ctx.stack.guard_of(worker)?;
        std::fs::read_dir(format!("/proc/{}/fd", guard.pid()))
            .ok()
            .map(|entries| entries.count())
    }

    /// The Guard service's open descriptors once they are `at_most` or
    /// `within` has passed (a handler closes what a connection gave it a
    /// little after its answer), then as they are; `None` where unreadable.
    pub fn descriptors_settled(
        &self,
        worker: &Worker,
        at_most: usize,
        within: std::time::Duration,
    ) -> Option<usize> {
        let settled = crate::wait::until(
            "the Guard service's descriptors to settle",
            within,
            std::time::Duration::from_millis(50),
            || match self.open_descriptors(worker) {
                Some(n) if n <= at_most => crate::wait::Poll::Ready(n),
                Some(n) => crate::wait::Poll::Pending(format!("{n} open")),
                None => crate::wait::Poll::Abort("unreadable".into()),
            },
        );
        settled.ok().or_else(|| self.open_descriptors(worker))
    }

    /// Whether something listens on `worker`'s control port (after its
    /// death: its Guard service, having taken the port over).
    pub fn control_port_listening(&self, worker: &Worker) -> bool {
        self.ctx.stack.control_port_listening(worker)
    }
}

fn view(guard: &crate::proc::Supervised) -> Result<GuardView, CaseError> {
    if !guard.is_running() {
        return Err(CaseError::new(format!(
            "the Guard service {} (pid {}) is not running; its log: {}",
            guard.name(),
            guard.pid(),
            guard.log_path().display()
        )));
    }
    Ok(GuardView {
        log: guard.log_path().to_path_buf(),
    })
}

/// One request to a live worker for a prefix only the Guard holds.
#[derive(Debug, Clone, Serialize)]
pub struct GuardAttempt {
    pub prompt: String,
    pub outcome: AttemptOutcome,
    /// Both sides of the transfer in the attempt's window.
    pub transfer: PeerTransfer,
    /// KVCR's own operations on the target in the attempt's window.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kvcr_ops: Vec<crate::evidence::KvcrOps>,
    /// When the request left, after the harness's own bookkeeping (a
    /// telemetry scrape, a Guard-log read) was done.
    #[serde(skip)]
    pub sent_at: std::time::Instant,
    /// When the response arrived, before any bookkeeping after it: timings
    /// (TC-06's t1) are stamped from here, not from when the attempt returns.
    #[serde(skip)]
    pub answered_at: std::time::Instant,
}

impl Guards<'_> {
    /// Sends `prompt` pinned to `target` and judges whether the Guard served
    /// its prefix: the tokens, the target's `remote_deliver`, and the Guard's
    /// `source_transfer_completed` events logged during the attempt.
    pub fn attempt(
        &self,
        target: &Worker,
        prompt: &Prompt,
        guard: &mut GuardFollower,
    ) -> Result<GuardAttempt, CaseError> {
        let ctx = self.ctx;
        guard.poll()?;
        let seen_before = guard.events().len();
        let before = ctx.snapshot(target)?;
        let sent_at = std::time::Instant::now();
        let answer = ctx.complete_on(target, prompt).map_err(|e| e.message);
        let answered_at = std::time::Instant::now();
        let tokens = answer.map(|a| super::ask::compare_to_reference(ctx, prompt, &a.tokens));
        let delta = ctx.delta_since(target, &before)?;
        if matches!(tokens, Ok(Ok(())))
            && delta.count(&Counter::TransferBlocks(Scope::RemoteDeliver)) > 0
        {
            // The target finished; give the Guard's log line a moment to land.
            guard.await_source_transfers_after(seen_before, 1)?;
        }
        guard.poll()?;
        let window = &guard.events()[seen_before..];
        let guard_blocks: Vec<u64> = window
            .iter()
            .filter_map(|e| match &e.event {
                GuardEvent::SourceTransferCompleted(t)
                    if t.result.as_deref() == Some("success") =>
                {
                    Some(t.blocks)
                }
                _ => None,
            })
            .collect();
        let transfer = guard_transfer(window, &delta)?;
        let source = guard_source(transfer.remote_deliver_blocks, &guard_blocks);
        Ok(GuardAttempt {
            prompt: prompt.key(),
            outcome: attempt_outcome(tokens, source),
            transfer,
            kvcr_ops: crate::evidence::KvcrOps::from_delta(target.name(), &delta),
            sent_at,
            answered_at,
        })
    }
}

impl GuardView {
    fn read_all(&self) -> Result<GuardLogReader, CaseError> {
        let mut reader = GuardLogReader::from_offset(&self.log, 0);
        reader.poll().map_err(|e| unreadable(&self.log, e))?;
        Ok(reader)
    }

    /// Every worker holds its Guard group: the Guard logged `primary_attached`
    /// for each worker's index and control endpoint.
    pub fn expect_attached(&self, workers: &[&Worker]) -> CaseResult {
        let reader = self.read_all()?;
        for worker in workers {
            let index = worker.slot.guard_index;
            let attached = reader.events().iter().rev().find_map(|e| match &e.event {
                GuardEvent::PrimaryAttached(p) if p.guard == index => Some(p),
                _ => None,
            });
            let want = format!(":{}", worker.slot.control_port);
            match attached {
                Some(p) if p.control.ends_with(&want) => {}
                Some(p) => {
                    return Err(CaseError::new(format!(
                        "precondition: Guard group {index} is attached to {}, not worker {}'s control port {}",
                        p.control,
                        worker.name(),
                        worker.slot.control_port
                    ))
                    .with_evidence(&self.log))
                }
                None => {
                    return Err(CaseError::new(format!(
                        "precondition: worker {} does not hold Guard group {index} (no `primary_attached guard={index}` in the Guard log)",
                        worker.name()
                    ))
                    .with_evidence(&self.log))
                }
            }
        }
        Ok(())
    }

    /// Starts reading Guard events from now on.
    pub fn follow(&self) -> Result<GuardFollower, CaseError> {
        GuardLogReader::from_end(&self.log)
            .map(|reader| GuardFollower {
                from: reader.offset(),
                reader,
                log: self.log.clone(),
            })
            .map_err(|e| unreadable(&self.log, e))
    }

    /// What the Guard's pool cost so far, by its own log: registration at
    /// start, promotions, handbacks (`telemetry::guard_costs`).
    pub fn costs(&self) -> Result<crate::telemetry::guard_costs::LoggedCosts, CaseError> {
        std::fs::read_to_string(&self.log)
            .map(|text| crate::telemetry::guard_costs::LoggedCosts::parse(&text))
            .map_err(|e| unreadable(&self.log, e))
    }

    /// The recovery journal's size each pool group maps, from the
    /// service's `KVCR service ready` line; `None` before it is logged.
    pub fn journal_bytes(&self) -> Result<Option<u64>, CaseError> {
        let reader = self.read_all()?;
        Ok(reader.events().iter().rev().find_map(|e| match &e.event {
            GuardEvent::ServiceReady(ready) => ready.journal_bytes,
            _ => None,
        }))
    }

    /// No `KVCR pool recovery disabled` / `KVCR Guard N failed` in the log.
    pub fn expect_no_failures(&self) -> CaseResult {
        let reader = self.read_all()?;
        let failure = reader.failures().next().map(|entry| {
            CaseError::new(format!(
                "the Guard logged a failure at byte {}: {:?}",
                entry.offset, entry.event
            ))
            .with_evidence(&self.log)
        });
        failure.map_or(Ok(()), Err)
    }
}

impl GuardFollower {
    /// Waits for the Guard of group `guard` to log `handback_done` (its
    /// handback to a replacement that claimed the group); `false` when it
    /// did not within the deadline.
    pub fn await_handback(&mut self, guard: u32) -> Result<bool, CaseError> {
        let what = format!("guard_promotion_stage stage=handback_done guard={guard}");
        let waited = crate::rt::block_on(self.reader.wait_for(
            &what,
            GUARD_DEADLINE,
            GUARD_POLL,
            |e| match e {
                GuardEvent::PromotionStage(s)
                    if s.guard == guard
                        && s.stage == crate::telemetry::guard_costs::HANDBACK_DONE =>
                {
                    Some(())
                }
                _ => None,
            },
        ));
        match waited {
            Ok(()) => Ok(true),
            Err(GuardWaitError::Deadline { .. }) => Ok(false),
            Err(GuardWaitError::Tail(e)) => Err(unreadable(&self.log, e)),
        }
    }

    /// Waits for `guard_promoted` of group `guard`; `Ok(None)` when the
    /// Guard did not promote within the deadline (the verdict then says so),
    /// `Err` when its log could not be read.
    pub fn await_promotion(&mut self, guard: u32) -> Result<Option<Promotion>, CaseError> {
        let what = format!("guard_promoted guard={guard}");
        let waited = crate::rt::block_on(self.reader.wait_for(
            &what,
            GUARD_DEADLINE,
            GUARD_POLL,
            |e| match e {
                GuardEvent::Promoted(p) if p.guard == guard => Some(p.clone()),
                _ => None,
            },
        ));
        match waited {
            Ok(promotion) => Ok(Some(promotion)),
            Err(GuardWaitError::Deadline { .. }) => Ok(None),
            Err(GuardWaitError::Tail(e)) => Err(unreadable(&self.log, e)),
        }
    }

    /// Waits until `n` `source_transfer_completed` events were logged after
    /// event `from`. The deadline passing is not an error here (the verdict
    /// judges what was seen); a log that cannot be read is.
    pub fn await_source_transfers_after(&mut self, from: usize, n: usize) -> CaseResult {
        let mut read_error = None;
        let _ = crate::wait::until(
            "Guard source transfers",
            TRANSFER_LOG_DEADLINE,
            GUARD_POLL,
            || {
                if let Err(e) = self.reader.poll() {
                    read_error = Some(e.to_string());
                    return crate::wait::Poll::Abort(format!("cannot read the Guard log: {e}"));
                }
                let seen = self.completed_transfers(from).count();
                if seen >= n {
                    crate::wait::Poll::Ready(())
                } else {
                    crate::wait::Poll::Pending(format!("{seen} source_transfer_completed"))
                }
            },
        );
        match read_error {
            Some(e) => Err(unreadable(&self.log, e)),
            None => Ok(()),
        }
    }

    fn completed_transfers(&self, from: usize) -> impl Iterator<Item = &GuardLogEntry> {
        self.reader.events()[from.min(self.reader.events().len())..]
            .iter()
            .filter(|e| matches!(e.event, GuardEvent::SourceTransferCompleted(_)))
    }

    /// Reads what was appended since the last look.
    pub fn poll(&mut self) -> CaseResult {
        self.reader
            .poll()
            .map(drop)
            .map_err(|e| unreadable(&self.log, e))
    }

    pub fn events(&self) -> &[GuardLogEntry] {
        self.reader.events()
    }

    /// The lines the Guard logged since following began that contain
    /// `needle`, trimmed.
    pub fn lines_with(&self, needle: &str) -> Result<Vec<String>, CaseError> {
        let log = std::fs::read(&self.log).map_err(|e| unreadable(&self.log, e))?;
        Ok(
            String::from_utf8_lossy(log.get(self.from as usize..).unwrap_or_default())
                .lines()
                .filter(|l| l.contains(needle))
                .map(|l| l.trim().to_string())
                .collect(),
        )
    }

    /// KVCR 0.1.1 latches a source off when its progress loop went
    /// `operation_timeout_ms` without a poll (the Guard's core runs with the
    /// default 1000 ms, and `kvcr_service` has no setting for it): "new
    /// source writes disabled until restart". Its log line, once the Guard
    /// wrote it since following began; no later attempt can then be served.
    pub fn source_stall(&self) -> Option<String> {
        let log = std::fs::read(&self.log).ok()?;
        String::from_utf8_lossy(log.get(self.from as usize..)?)
            .lines()
            .rev()
            .find(|l| l.contains("source progress stalled"))
            .map(|l| l.trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A follower of a log that was then truncated below what it had read.
    fn follower_of_a_truncated_log(dir: &std::path::Path) -> GuardFollower {
        let log = dir.join("guard.log");
        std::fs::write(&log, "KVCR service ready: socket=/x guards=2\n".repeat(4)).unwrap();
        let reader = GuardLogReader::from_end(&log).unwrap();
        std::fs::write(&log, "").unwrap();
        GuardFollower {
            reader,
            log,
            from: 0,
        }
    }

    #[test]
    fn an_unreadable_log_is_its_own_error_not_a_missing_promotion() {
        let tmp = tempfile::tempdir().unwrap();
        let mut follower = follower_of_a_truncated_log(tmp.path());
        let err = follower.await_promotion(0).unwrap_err();
        assert!(
            err.message.starts_with("cannot read the Guard log"),
            "{err}"
        );
        assert!(err.message.contains("shrank"), "{err}");
        assert!(follower.poll().is_err());
        let err = follower.await_source_transfers_after(0, 1).unwrap_err();
        assert!(
            err.message.starts_with("cannot read the Guard log"),
            "{err}"
        );
    }

    #[test]
    fn a_readable_log_without_the_event_is_no_promotion() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("guard.log");
        std::fs::write(&log, "").unwrap();
        let mut follower = GuardFollower {
            reader: GuardLogReader::from_end(&log).unwrap(),
            log: log.clone(),
            from: 0,
        };
        assert!(follower.poll().is_ok());
        assert!(follower.await_source_transfers_after(0, 1).is_ok());
        assert_eq!(follower.source_stall(), None);
    }

    #[test]
    fn a_source_stall_counts_only_since_following_began() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("guard.log");
        let stall =
            "KVCR source progress stalled for 1000 ms; new source writes disabled until restart";
        std::fs::write(&log, format!("{stall}\n")).unwrap();
        let view = GuardView { log: log.clone() };
        let follower = view.follow().unwrap();
        assert_eq!(follower.source_stall(), None, "a stall before following");
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut file, format!("x\n  {stall}\n").as_bytes()).unwrap();
        assert_eq!(follower.source_stall().as_deref(), Some(stall));
    }
}
