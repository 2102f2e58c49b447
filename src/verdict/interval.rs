//! A vLLM-style worker's two telemetry sources agree: the `KV Transfer
//! metrics` lines it logs once per stats interval add up to its `/metrics`
//! totals (TC-03).
//!
//! The comparison means something only where the two sources are
//! independent (vLLM: its logging stat logger and its Prometheus exporter
//! each aggregate the connector's stats). The CPU engine writes both from
//! one `IntervalStats`, so there it is a consistency check of one source.
//! Either way a counter `/metrics` does not report, or reports as 0, fails:
//! 0 = 0 (or absent on both sides) compares nothing.

/// One compared counter: the sum of the logged lines and the `/metrics` total.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoggedVsExported {
    pub counter: String,
    /// Sum over the logged lines so far (`None`: no line carried it yet).
    pub logged: Option<u64>,
    /// The `/metrics` total (`None`: not reported).
    pub metrics: Option<u64>,
}

/// Where the comparison stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agreement {
    /// Every counter logged equals its (non-zero) `/metrics` total.
    Agree,
    /// The log has not caught up yet (it is written at an interval's end).
    Pending(String),
    /// A final failure: nothing to compare, or the log is ahead of `/metrics`.
    Disagree(String),
}

/// Judges `worker`'s counters. `/metrics` is read after the transfer the
/// case checked, so a zero or absent total there is final.
pub fn judge(worker: &str, counters: &[LoggedVsExported]) -> Agreement {
    for c in counters {
        match (c.logged, c.metrics) {
            (_, None) => {
                return Agreement::Disagree(format!(
                    "worker {worker}'s /metrics does not report {}: nothing to compare (absent is not 0)",
                    c.counter
                ))
            }
            (_, Some(0)) => {
                return Agreement::Disagree(format!(
                    "worker {worker}'s /metrics reports {} = 0: nothing to compare (0 = 0 proves nothing)",
                    c.counter
                ))
            }
            (Some(got), Some(want)) if got > want => {
                return Agreement::Disagree(format!(
                    "worker {worker} logged {} = {got}, its /metrics says {want}",
                    c.counter
                ))
            }
            _ => {}
        }
    }
    if counters.iter().all(|c| c.logged == c.metrics) {
        Agreement::Agree
    } else {
        Agreement::Pending(format!(
            "logged vs /metrics so far: {}",
            counters
                .iter()
                .map(|c| format!(
                    "{} {} vs {}",
                    c.counter,
                    c.logged.map_or("none".into(), |v| v.to_string()),
                    c.metrics.map_or("none".into(), |v| v.to_string())
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// What the comparison means on an engine, for the evidence and the message.
pub fn meaning(independent_sources: bool, engine: &str) -> String {
    if independent_sources {
        format!(
            "two independent sources ({engine}: its stats log line and its Prometheus exporter)"
        )
    } else {
        format!(
            "a consistency check of one source (the {engine} engine writes the log line and /metrics from the same stats)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(logged: Option<u64>, metrics: Option<u64>) -> LoggedVsExported {
        LoggedVsExported {
            counter: "transfer_blocks{scope=remote_deliver}".into(),
            logged,
            metrics,
        }
    }

    #[test]
    fn equal_non_zero_totals_agree() {
        assert_eq!(judge("B", &[c(Some(4), Some(4))]), Agreement::Agree);
    }

    #[test]
    fn a_log_behind_metrics_is_pending() {
        for logged in [None, Some(3)] {
            assert!(matches!(
                judge("B", &[c(logged, Some(4))]),
                Agreement::Pending(_)
            ));
        }
    }

    #[test]
    fn zero_or_absent_on_the_metrics_side_compares_nothing() {
        // 0 = 0 and absent on both sides used to pass.
        for (pair, words) in [
            (
                c(Some(0), Some(0)),
                "reports transfer_blocks{scope=remote_deliver} = 0: nothing to compare",
            ),
            (c(None, Some(0)), "= 0: nothing to compare"),
            (
                c(None, None),
                "does not report transfer_blocks{scope=remote_deliver}: nothing to compare",
            ),
            (c(Some(4), None), "does not report"),
        ] {
            match judge("B", std::slice::from_ref(&pair)) {
                Agreement::Disagree(why) => assert!(why.contains(words), "{pair:?}: {why}"),
                other => panic!("{pair:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_log_ahead_of_metrics_disagrees() {
        assert_eq!(
            judge("B", &[c(Some(5), Some(4))]),
            Agreement::Disagree(
                "worker B logged transfer_blocks{scope=remote_deliver} = 5, its /metrics says 4"
                    .into()
            )
        );
    }

    #[test]
    fn the_meaning_depends_on_the_sources() {
        assert!(meaning(true, "vllm").starts_with("two independent sources"));
        assert!(meaning(false, "cpu").starts_with("a consistency check of one source"));
    }
}
