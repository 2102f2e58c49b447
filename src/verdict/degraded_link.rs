//! Hinted pulls across a degraded link (TC-14): each either reconciles
//! (the target delivered every shared block, the source wrote as many, both
//! agree on the bytes) or fails cleanly (the target counted a failed
//! remote delivery, nothing came across, no source write landed, and the
//! target computed every block); none waits past the request budget. On
//! the clean link every pull must reconcile ([`super::transfer`]).
//!
//! Remote-hit TTFT per condition against the clean link is recorded with
//! bootstrap intervals ([`summarize`]); timing is evidence, never a
//! verdict.

use serde::Serialize;

use super::transfer::{expect_peer_transfer, PeerTransfer};
use super::Violation;
use crate::stats::{estimate, Bootstrap, Estimate, Statistic};

/// Claim: a pull across a degraded link reconciles or fails cleanly.
pub const DEGRADED_TRANSFER: &str =
    "a hinted pull across a degraded link reconciles or fails cleanly";
/// Claim: no request across a degraded link waits past the request budget.
pub const WITHIN_BUDGET: &str = "no request across a degraded link waits past the request budget";

/// One hinted pull B → A under one condition of the link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DegradedPull {
    /// `clean`, `delay`, `loss`, `rate_cap`.
    pub condition: String,
    pub prompt: String,
    pub request_id: String,
    /// Send → first token, ms (client side).
    pub ttft_ms: f64,
    /// Send → end of the answer, ms.
    pub latency_ms: f64,
    pub transfer: PeerTransfer,
    /// Full blocks of the prefix B holds.
    pub shared_blocks: u64,
    /// Full blocks of the prompt A computed, and of the prompt.
    pub computed_blocks: u64,
    pub prompt_blocks: u64,
}

/// How a pull ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PullOutcome {
    /// Every shared block came across and both sides agree.
    Reconciled,
    /// The pull failed, was counted, and A recomputed.
    FailedCleanly,
}

impl DegradedPull {
    /// Why this pull is not a clean failure; `None` when it is one.
    fn not_clean_failure(&self) -> Option<String> {
        let t = &self.transfer;
        let mut wrong = Vec::new();
        if t.remote_deliver_unsuccessful.is_none() {
            wrong.push("the target counted no failed remote delivery".to_string());
        }
        if t.remote_deliver_blocks > 0 || t.target_read_bytes > 0 {
            wrong.push(format!(
                "{} blocks ({} bytes) came across",
                t.remote_deliver_blocks, t.target_read_bytes
            ));
        }
        if t.source_write_success_ops > 0 {
            wrong.push(format!(
                "the source reports {} successful writes",
                t.source_write_success_ops
            ));
        }
        if self.computed_blocks < self.prompt_blocks {
            wrong.push(format!(
                "the target computed {} of the prompt's {} blocks",
                self.computed_blocks, self.prompt_blocks
            ));
        }
        (!wrong.is_empty()).then(|| wrong.join(", "))
    }
}

/// The pull reconciled, or failed cleanly; `Err` says both why it did not
/// reconcile and why it is no clean failure.
pub fn expect_reconciled_or_failed_cleanly(
    pull: &DegradedPull,
    bytes_per_block: u64,
) -> Result<PullOutcome, Violation> {
    let reconciled = expect_peer_transfer(&pull.transfer, pull.shared_blocks, bytes_per_block);
    let Err(why) = reconciled else {
        return Ok(PullOutcome::Reconciled);
    };
    match pull.not_clean_failure() {
        None => Ok(PullOutcome::FailedCleanly),
        Some(unclean) => Err(Violation {
            claim: DEGRADED_TRANSFER,
            detail: format!(
                "{} under {}: not reconciled ({}), and not a clean failure ({unclean})",
                pull.prompt, pull.condition, why.detail
            ),
        }),
    }
}

/// No pull took longer than `budget_ms`.
pub fn expect_within_budget(pulls: &[DegradedPull], budget_ms: u64) -> Result<(), Violation> {
    let late: Vec<String> = pulls
        .iter()
        .filter(|p| p.latency_ms > budget_ms as f64)
        .map(|p| {
            format!(
                "{} under {} took {:.0} ms (x-request-id {})",
                p.prompt, p.condition, p.latency_ms, p.request_id
            )
        })
        .collect();
    if late.is_empty() {
        return Ok(());
    }
    Err(Violation {
        claim: WITHIN_BUDGET,
        detail: format!("{} past the {budget_ms} ms budget", late.join("; ")),
    })
}

/// One condition's pulls, summarized for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConditionSummary {
    pub condition: String,
    pub label: String,
    pub pulls: usize,
    pub reconciled: usize,
    pub failed_cleanly: usize,
    /// Median TTFT of the pulls that reconciled (remote hits), ms, with
    /// its 95 % bootstrap interval.
    pub remote_hit_ttft_ms: Option<Estimate>,
    /// That median over the clean link's.
    pub ratio_to_clean: Option<f64>,
}

/// Each condition's summary, in the order given; `clean` must come first
/// (the baseline of the ratios).
pub fn summarize(
    conditions: &[(String, String)],
    pulls: &[(DegradedPull, PullOutcome)],
    bootstrap: &Bootstrap,
) -> Vec<ConditionSummary> {
    let mut out: Vec<ConditionSummary> = Vec::new();
    for (slug, label) in conditions {
        let mine: Vec<&(DegradedPull, PullOutcome)> =
            pulls.iter().filter(|(p, _)| &p.condition == slug).collect();
        let hits: Vec<f64> = mine
            .iter()
            .filter(|(_, o)| *o == PullOutcome::Reconciled)
            .map(|(p, _)| p.ttft_ms)
            .collect();
        let ttft = estimate(&hits, Statistic::P50, 0.95, bootstrap);
        let clean = out.first().and_then(|c| c.remote_hit_ttft_ms);
        let ratio = match (ttft, clean) {
            (Some(t), Some(c)) if c.value > 0.0 => Some(t.value / c.value),
            (Some(_), None) if out.is_empty() => Some(1.0),
            _ => None,
        };
        out.push(ConditionSummary {
            condition: slug.clone(),
            label: label.clone(),
            pulls: mine.len(),
            reconciled: hits.len(),
            failed_cleanly: mine
                .iter()
                .filter(|(_, o)| *o == PullOutcome::FailedCleanly)
                .count(),
            remote_hit_ttft_ms: ttft,
            ratio_to_clean: ratio,
        });
    }
    out
}

/// The summaries as a Markdown table (the case's `ttft-by-condition.md`).
pub fn table(summaries: &[ConditionSummary]) -> String {
    let mut o = String::from(
        "| condition | pulls | reconciled | failed cleanly | remote-hit TTFT p50 (ms) | 95 % interval | × clean |\n|---|---|---|---|---|---|---|\n",
    );
    for s in summaries {
        let (p50, interval) = match &s.remote_hit_ttft_ms {
            Some(e) => (
                format!("{:.1}", e.value),
                format!("{:.1} – {:.1}", e.interval.lo, e.interval.hi),
            ),
            None => ("–".into(), "–".into()),
        };
        o.push_str(&format!(
            "| {} | {} | {} | {} | {p50} | {interval} | {} |\n",
            s.label,
            s.pulls,
            s.reconciled,
            s.failed_cleanly,
            s.ratio_to_clean
                .map(|r| format!("{r:.2}"))
                .unwrap_or_else(|| "–".into())
        ));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::super::transfer::Unsuccessful;
    use super::*;

    fn delivered() -> DegradedPull {
        DegradedPull {
            condition: "delay".into(),
            prompt: "f003v1".into(),
            request_id: "r-1".into(),
            ttft_ms: 180.0,
            latency_ms: 400.0,
            transfer: PeerTransfer {
                source_write_success_ops: 1,
                source_write_blocks: 4,
                source_write_bytes: 32768,
                remote_deliver_success_ops: 1,
                remote_deliver_blocks: 4,
                target_read_bytes: 32768,
                ..PeerTransfer::default()
            },
            shared_blocks: 4,
            computed_blocks: 1,
            prompt_blocks: 5,
        }
    }

    fn failed() -> DegradedPull {
        DegradedPull {
            transfer: PeerTransfer {
                remote_deliver_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
                source_write_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
                ..PeerTransfer::default()
            },
            computed_blocks: 5,
            ..delivered()
        }
    }

    #[test]
    fn a_reconciled_or_a_cleanly_failed_pull_passes() {
        assert_eq!(
            expect_reconciled_or_failed_cleanly(&delivered(), 8192),
            Ok(PullOutcome::Reconciled)
        );
        assert_eq!(
            expect_reconciled_or_failed_cleanly(&failed(), 8192),
            Ok(PullOutcome::FailedCleanly)
        );
    }

    #[test]
    fn double_counted_bytes_or_a_landed_write_beside_a_failure_fail() {
        // The source counts every byte twice: not reconciled, and blocks
        // came across, so no clean failure either.
        let mut doubled = delivered();
        doubled.transfer.source_write_bytes *= 2;
        let v = expect_reconciled_or_failed_cleanly(&doubled, 8192).unwrap_err();
        assert_eq!(v.claim, DEGRADED_TRANSFER);
        assert!(v.detail.contains("≠ source_write bytes"), "{}", v.detail);
        assert!(
            v.detail.contains("4 blocks (32768 bytes) came across"),
            "{}",
            v.detail
        );
        // A failure the source reports as a successful write.
        let mut landed = failed();
        landed.transfer.source_write_success_ops = 1;
        assert!(expect_reconciled_or_failed_cleanly(&landed, 8192)
            .unwrap_err()
            .detail
            .contains("the source reports 1 successful writes"));
        // Nothing tried, nothing delivered: the hint was ignored.
        let mut untried = failed();
        untried.transfer.remote_deliver_unsuccessful = Unsuccessful::default();
        assert!(expect_reconciled_or_failed_cleanly(&untried, 8192)
            .unwrap_err()
            .detail
            .contains("no failed remote delivery"));
        // A failed pull whose blocks the target did not all compute.
        let partial = DegradedPull {
            computed_blocks: 2,
            ..failed()
        };
        assert!(expect_reconciled_or_failed_cleanly(&partial, 8192).is_err());
    }

    #[test]
    fn a_pull_past_the_budget_fails() {
        assert!(expect_within_budget(&[delivered(), failed()], 60_000).is_ok());
        let slow = DegradedPull {
            latency_ms: 61_000.0,
            ..delivered()
        };
        let v = expect_within_budget(&[delivered(), slow], 60_000).unwrap_err();
        assert_eq!(
            v.to_string(),
            "no request across a degraded link waits past the request budget: f003v1 under delay took 61000 ms (x-request-id r-1) past the 60000 ms budget"
        );
    }

    #[test]
    fn the_summary_compares_remote_hits_with_the_clean_link() {
        let at = |condition: &str, ttft: f64| DegradedPull {
            condition: condition.into(),
            ttft_ms: ttft,
            ..delivered()
        };
        let mut pulls: Vec<(DegradedPull, PullOutcome)> = [100.0, 110.0, 90.0]
            .iter()
            .map(|t| (at("clean", *t), PullOutcome::Reconciled))
            .collect();
        pulls.extend(
            [200.0, 220.0, 180.0]
                .iter()
                .map(|t| (at("delay", *t), PullOutcome::Reconciled)),
        );
        pulls.push((
            DegradedPull {
                condition: "delay".into(),
                ttft_ms: 9000.0,
                ..failed()
            },
            PullOutcome::FailedCleanly,
        ));
        let conditions = vec![
            ("clean".to_string(), "clean link".to_string()),
            ("delay".to_string(), "delay 20 ± 10 ms each way".to_string()),
            ("loss".to_string(), "loss 3 % each way".to_string()),
        ];
        let s = summarize(&conditions, &pulls, &Bootstrap::default());
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].ratio_to_clean, Some(1.0));
        let delay = &s[1];
        assert_eq!(
            (delay.pulls, delay.reconciled, delay.failed_cleanly),
            (4, 3, 1)
        );
        let p50 = delay.remote_hit_ttft_ms.unwrap();
        assert_eq!(p50.value, 200.0, "the failed pull's TTFT is no remote hit");
        assert!(p50.interval.lo <= 200.0 && p50.interval.hi >= 200.0);
        assert_eq!(delay.ratio_to_clean, Some(2.0));
        assert_eq!(s[2].pulls, 0);
        assert_eq!(s[2].ratio_to_clean, None);
        let t = table(&s);
        assert!(
            t.contains("| delay 20 ± 10 ms each way | 4 | 3 | 1 | 200.0 |"),
            "{t}"
        );
        assert!(
            t.contains("| loss 3 % each way | 0 | 0 | 0 | – | – | – |"),
            "{t}"
        );
    }
}
