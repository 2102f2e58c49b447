//! The Guard service as a case sees it: its log, read from a point in time.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::prompts::Prompt;
use crate::stack::Worker;
use crate::telemetry::guard_log::{GuardEvent, GuardLogEntry, GuardLogReader, Promotion};
use crate::telemetry::{Counter, Scope};
use crate::verdict::guard::{attempt_outcome, guard_source, AttemptOutcome};
use crate::verdict::transfer::PeerTransfer;

use super::observe::guard_transfer;
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
}

impl CaseCtx<'_> {
    /// The stack's (first) Guard service; an error when the engine runs none.
    pub fn guard(&self) -> Result<GuardView, CaseError> {
        let guard = self
            .stack
            .guard
            .clone()
            .ok_or_else(|| CaseError::new("this stack runs no KVCR Guard service"))?;
        Self::view(&guard)
    }

    /// The Guard service holding `worker`'s pool (the stack's only one, or
    /// the worker's own where each slot has a Guard).
    pub fn guard_of(&self, worker: &Worker) -> Result<GuardView, CaseError> {
        let guard = self
            .stack
            .guard_of(worker)
            .ok_or_else(|| CaseError::new("this stack runs no KVCR Guard service"))?;
        Self::view(&guard)
    }

    /// Every worker in `workers` holds its group in its Guard service.
    pub fn expect_guards_attached(&self, workers: &[&Worker]) -> CaseResult {
        for worker in workers {
            self.guard_of(worker)?.expect_attached(&[worker])?;
        }
        Ok(())
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
}

/// One request to a live worker for a prefix only the Guard holds.
#[derive(Debug, Clone, Serialize)]
pub struct GuardAttempt {
    pub prompt: String,
    pub outcome: AttemptOutcome,
    /// Both sides of the transfer in the attempt's window.
    pub transfer: PeerTransfer,
}

impl CaseCtx<'_> {
    /// Sends `prompt` pinned to `target` and judges whether the Guard served
    /// its prefix: the tokens, the target's `remote_deliver`, and the Guard's
    /// `source_transfer_completed` events logged during the attempt.
    pub fn guard_attempt(
        &self,
        target: &Worker,
        prompt: &Prompt,
        guard: &mut GuardFollower,
    ) -> Result<GuardAttempt, CaseError> {
        guard.poll();
        let seen_before = guard.events().len();
        let before = self.snapshot(target)?;
        let answer = self.complete_on(target, prompt).map_err(|e| e.message);
        let tokens = answer.map(|a| self.compare_to_reference(prompt, &a.tokens));
        let delta = self.delta_since(target, &before)?;
        if matches!(tokens, Ok(Ok(())))
            && delta.count(&Counter::TransferBlocks(Scope::RemoteDeliver)) > 0
        {
            // The target finished; give the Guard's log line a moment to land.
            guard.await_source_transfers_after(seen_before, 1);
        }
        guard.poll();
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
        let transfer = guard_transfer(window, &delta);
        let source = guard_source(transfer.remote_deliver_blocks, &guard_blocks);
        Ok(GuardAttempt {
            prompt: prompt.key(),
            outcome: attempt_outcome(tokens, source),
            transfer,
        })
    }
}

impl GuardView {
    fn read_all(&self) -> Result<GuardLogReader, CaseError> {
        let mut reader = GuardLogReader::from_offset(&self.log, 0);
        reader.poll().map_err(|e| {
            CaseError::new(format!("cannot read the Guard log: {e}")).with_evidence(&self.log)
        })?;
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
            .map(|reader| GuardFollower { reader })
            .map_err(|e| {
                CaseError::new(format!("cannot read the Guard log: {e}")).with_evidence(&self.log)
            })
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
    /// Waits for `guard_promoted` of group `guard`; `None` when the Guard did
    /// not promote within the deadline (the verdict then says so).
    pub fn await_promotion(&mut self, guard: u32) -> Option<Promotion> {
        let what = format!("guard_promoted guard={guard}");
        crate::rt::block_on(
            self.reader
                .wait_for(&what, GUARD_DEADLINE, GUARD_POLL, |e| match e {
                    GuardEvent::Promoted(p) if p.guard == guard => Some(p.clone()),
                    _ => None,
                }),
        )
        .ok()
    }

    /// Waits until `n` `source_transfer_completed` events were logged after
    /// event `from` (or the deadline passes; the verdict judges what was seen).
    pub fn await_source_transfers_after(&mut self, from: usize, n: usize) {
        let _ = crate::wait::until(
            "Guard source transfers",
            TRANSFER_LOG_DEADLINE,
            GUARD_POLL,
            || {
                let _ = self.reader.poll();
                let seen = self.completed_transfers(from).count();
                if seen >= n {
                    crate::wait::Poll::Ready(())
                } else {
                    crate::wait::Poll::Pending(format!("{seen} source_transfer_completed"))
                }
            },
        );
    }

    fn completed_transfers(&self, from: usize) -> impl Iterator<Item = &GuardLogEntry> {
        self.reader.events()[from.min(self.reader.events().len())..]
            .iter()
            .filter(|e| matches!(e.event, GuardEvent::SourceTransferCompleted(_)))
    }

    /// Reads what was appended since the last look.
    pub fn poll(&mut self) {
        let _ = self.reader.poll();
    }

    pub fn events(&self) -> &[GuardLogEntry] {
        self.reader.events()
    }
}
