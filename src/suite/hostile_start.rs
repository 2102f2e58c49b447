//! A KVCR component started alone where it must refuse
//! (`ctx.hostile_start()`, TC-16): the stack's own launch of a Guard
//! service or a worker, in a mount namespace of its own with the hostile
//! condition applied and verified there, polled until it exits or the
//! start-up timeout passes.
//!
//! Attempts run two at a time ([`HostileStart::attempts`],
//! [`HostileStart::refused_configs`]): each has its own mount namespace,
//! `/dev/shm`, ports and process group, so they cannot see each other, and
//! most of an attempt is a Python start-up, which takes a core of its own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::stack::{ConfigRow, Hostility, Sabotage};
use crate::verdict::hostile_start::StartAttempt;
use crate::verdict::refused_config::ConfigAttempt;

use super::{CaseCtx, CaseError};

/// How many attempts run at once: the machine's two cores.
const AT_ONCE: usize = 2;

/// Hostile starts (`ctx.hostile_start()`).
pub struct HostileStart<'c> {
    ctx: &'c CaseCtx<'c>,
}

impl<'c> HostileStart<'c> {
    pub(super) fn new(ctx: &'c CaseCtx<'c>) -> Self {
        Self { ctx }
    }

    /// Starts the component each of `hostilities` names into it,
    /// [`AT_ONCE`] at a time, and returns what each did, in the order given,
    /// recorded as `hostile-<word>.json`.
    pub fn attempts(
        &self,
        hostilities: &[Hostility],
        sabotage: Sabotage,
    ) -> Result<Vec<Result<StartAttempt, CaseError>>, CaseError> {
        self.ctx.doing(format!(
            "starting {} components where they must refuse, {AT_ONCE} at a time",
            hostilities.len()
        ))?;
        let stack = self.ctx.stack;
        let ran = in_order_at_once(hostilities, |&h| stack.attempt_hostile_start(h, sabotage));
        Ok(hostilities
            .iter()
            .zip(ran)
            .map(|(h, attempt)| {
                let attempt = attempt?;
                self.ctx
                    .record(&format!("hostile-{}.json", h.word()), &attempt);
                self.ctx
                    .measure(&format!("{}_ms", h.word()), attempt.elapsed_ms);
                Ok(attempt)
            })
            .collect())
    }

    /// Starts each of `rows`' components with the configuration it must
    /// refuse, [`AT_ONCE`] at a time, and returns what each did, in the
    /// order given, recorded as `refused-<name>.json`.
    pub fn refused_configs(
        &self,
        rows: &[ConfigRow],
        sabotage: Sabotage,
    ) -> Result<Vec<Result<ConfigAttempt, CaseError>>, CaseError> {
        self.ctx.doing(format!(
            "starting {} KVCR components with configurations they must refuse, {AT_ONCE} at a time",
            rows.len()
        ))?;
        let stack = self.ctx.stack;
        let ran = in_order_at_once(rows, |row| stack.attempt_refused_config(row, sabotage));
        Ok(rows
            .iter()
            .zip(ran)
            .map(|(row, attempt)| {
                let attempt = attempt?;
                self.ctx
                    .record(&format!("refused-{}.json", row.name), &attempt);
                self.ctx
                    .measure(&format!("{}_ms", row.name), attempt.start.elapsed_ms);
                Ok(attempt)
            })
            .collect())
    }
}

/// `run` over `jobs` on [`AT_ONCE`] threads, each taking the next job when
/// its last one ends; the results in the order of `jobs`.
fn in_order_at_once<J: Sync, R: Send>(jobs: &[J], run: impl Fn(&J) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<R>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..AT_ONCE.min(jobs.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let result = run(job);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            });
        }
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every job ran: the threads end only when none is left")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_the_order_of_the_jobs() {
        let jobs: Vec<u64> = (0..9).collect();
        // Later jobs end first, so the order is not the order of ending.
        let results = in_order_at_once(&jobs, |&j| {
            std::thread::sleep(std::time::Duration::from_millis(9 - j));
            j * 10
        });
        assert_eq!(results, (0..9).map(|j| j * 10).collect::<Vec<_>>());
    }

    #[test]
    fn no_jobs_no_results() {
        let results: Vec<u8> = in_order_at_once(&[] as &[u8], |&j| j);
        assert!(results.is_empty());
    }
}
