//! Clean restarts (TC-09) and the heartbeat watchdog (TC-10): what a
//! SIGTERM, a handback and a refused claim must look like.

use serde::Serialize;

use super::findings::{Observed, ENGINE_CORE_NEVER_DRAINS, SERVES_BEFORE_DEATH_SEEN};
use super::{Checks, Violation};

/// The clause of TC-09's clean stop.
pub const CLEAN_STOP: &str = "a clean stop hands the pool back without a promotion";

/// What a clean stop of a worker showed.
#[derive(Debug, Clone, Serialize)]
pub struct CleanStop {
    /// The exit status, as the harness saw it (`exit status: 0`).
    pub exit: Option<String>,
    pub needed_sigkill: bool,
    /// The engine logged `KVCR closed: Guard group N handed back`; `None`
    /// on an engine that does not relay KVCR's close (vLLM: the Guard's
    /// `snapshot_written` is then the only record of the handback).
    pub handed_back: Option<bool>,
    /// The engine's line where its process manager force-killed the process
    /// that holds KVCR (vLLM's engine core), so KVCR never closed.
    pub forced_engine_stop: Option<String>,
    /// Promotions the Guard logged for the worker's group in the window.
    pub promotions: usize,
    /// The Guard logged `snapshot_written` (the handback region) in the window.
    pub snapshot_written: bool,
}

/// SIGTERM → KVCR.close() → the Guard writes the handback; no promotion.
pub fn expect_clean_stop(stop: &CleanStop) -> Result<(), Violation> {
    let mut c = Checks::new(CLEAN_STOP);
    c.check(
        stop.exit.as_deref().is_some_and(|e| e.ends_with(" 0")),
        || format!("the worker exited with {:?}, not 0", stop.exit),
    )
    .check(!stop.needed_sigkill, || {
        "the worker needed SIGKILL after SIGTERM".to_string()
    })
    .check(stop.forced_engine_stop.is_none(), || {
        format!(
            "vLLM force-killed the engine core that holds KVCR before KVCR closed: its shutdown \
             drain never ends because vLLM's KVCR tier always reports pending work \
             (docs/kvcr-findings.md 17): `{}`",
            stop.forced_engine_stop.as_deref().unwrap_or_default().trim()
        )
    })
    .check(stop.handed_back != Some(false), || {
        "the worker logged no `KVCR closed: Guard group N handed back`".to_string()
    })
    .check(stop.promotions == 0, || {
        format!(
            "the Guard promoted {} times for the stopped worker's group: it saw a death, not a release",
            stop.promotions
        )
    })
    .check(stop.snapshot_written, || {
        "the Guard wrote no handback region (`snapshot_written`)".to_string()
    });
    c.verdict()
}

/// Finding 17: vLLM's process manager force-killed the engine core that
/// holds KVCR, so KVCR never closed. Shows when the stopped worker's log has
/// the force-kill line.
pub fn forced_engine_stop(stop: &CleanStop) -> Observed {
    match &stop.forced_engine_stop {
        Some(line) => Observed::shows(
            &ENGINE_CORE_NEVER_DRAINS,
            format!(
                "the engine's process manager force-killed the engine core that holds KVCR \
                 before KVCR closed (its shutdown drain never ends: vLLM's KVCR tier always \
                 reports pending work): `{}`; then {} promotions, handback region written: {}",
                line.trim(),
                stop.promotions,
                stop.snapshot_written
            ),
        ),
        None => Observed::absent(
            &ENGINE_CORE_NEVER_DRAINS,
            format!(
                "no force-kill of the engine core: the worker exited with {:?}, {} promotions, \
                 handback region written: {}",
                stop.exit, stop.promotions, stop.snapshot_written
            ),
        ),
    }
}

/// A stop while finding 17 shows: KVCR cannot close, so the Guard must
/// treat it as the death it is. The worker's own process still exits 0
/// without needing SIGKILL, and its Guard takes the group over (a
/// promotion), so the replacement claims it.
pub fn expect_forced_stop_taken_over(stop: &CleanStop) -> Result<(), Violation> {
    let mut c = Checks::new("a force-killed engine core's pool is taken over by its Guard");
    c.check(
        stop.exit.as_deref().is_some_and(|e| e.ends_with(" 0")),
        || format!("the worker exited with {:?}, not 0", stop.exit),
    )
    .check(!stop.needed_sigkill, || {
        "the worker needed SIGKILL after SIGTERM".to_string()
    })
    .check(stop.promotions > 0, || {
        "the Guard did not promote the group whose holder was force-killed".to_string()
    });
    c.verdict()
}

/// A replacement the Guard must refuse failed to start, quoting `reason`.
pub fn expect_refused(started: Result<(), String>, reason: &str) -> Result<(), Violation> {
    let claim = "a replacement of another tier configuration is refused";
    match started {
        Ok(()) => Err(Violation {
            claim,
            detail: "the replacement started and serves".to_string(),
        }),
        Err(e) if e.contains(reason) => Ok(()),
        Err(e) => Err(Violation {
            claim,
            detail: format!("the replacement failed, but not with `{reason}`: {e}"),
        }),
    }
}

/// A stop shorter than the heartbeat timeout promotes nothing; a longer one
/// promotes within `[timeout − beat, timeout + slack]`.
pub fn expect_heartbeat_promotion(
    timeout_ms: f64,
    short_stop_promotions: usize,
    stop_to_promotion_ms: Option<f64>,
    slack_ms: f64,
) -> Result<(), Violation> {
    let mut c = Checks::new("a stalled worker is promoted after its heartbeat timeout, not before");
    c.check(short_stop_promotions == 0, || {
        format!("a stop shorter than the {timeout_ms} ms timeout was promoted ({short_stop_promotions} promotions)")
    });
    match stop_to_promotion_ms {
        None => {
            c.check(false, || {
                "no promotion after the worker stopped for good".to_string()
            });
        }
        Some(t) => {
            // KVCR's client beats every 50 ms: the last beat may precede the stop by that much.
            c.check(t >= timeout_ms - 50.0, || {
                format!("promoted {t:.0} ms after the stop, before the {timeout_ms} ms timeout")
            })
            .check(t <= timeout_ms + slack_ms, || {
                format!("promoted {t:.0} ms after the stop, more than {slack_ms} ms past the {timeout_ms} ms timeout")
            });
        }
    }
    c.verdict()
}

/// The order of a heartbeat promotion's stages, as the Guard logged them
/// (docs/kvcr-findings.md 8). A user expects the Guard to serve a stalled
/// holder's pool once the holder is gone; KVCR 0.1.1 queues a SIGKILL and
/// serves at once: `serving` is logged with no `death_observed` before it.
/// Finding 8 shows when it served first, not when it observed the death
/// first; a violation when it logged no `serving` stage (its stages are
/// unknown, not in order).
pub fn heartbeat_serving_order(stages: &[String]) -> Result<Observed, Violation> {
    let Some(serving) = stages.iter().position(|s| s == "serving") else {
        return Err(Violation {
            claim: "the Guard logs its heartbeat promotion's stages",
            detail: format!(
                "no `guard_promotion_stage stage=serving` for the stalled worker's group (stages logged: {stages:?})"
            ),
        });
    };
    if stages[..serving].iter().any(|s| s == "death_observed") {
        return Ok(Observed::absent(
            &SERVES_BEFORE_DEATH_SEEN,
            format!(
                "the Guard saw the stalled worker die before it served: stages {}",
                stages.join(" → ")
            ),
        ));
    }
    let after = if stages[serving..].iter().any(|s| s == "death_observed") {
        "`death_observed` comes after it"
    } else {
        "no `death_observed` at all"
    };
    Ok(Observed::shows(&SERVES_BEFORE_DEATH_SEEN, format!(
        "the Guard served the stalled worker's pool before it saw the worker die: stages {} ({after}); \
         its SIGKILL was queued, not seen to take effect",
        stages.join(" → ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_before_the_death_is_seen_is_the_finding() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let finding =
            heartbeat_serving_order(&s(&["records_recovered", "records_adopted", "serving"]))
                .unwrap();
        assert!(finding.shows && finding.finding.number == 8);
        assert!(
            finding.seen.contains("no `death_observed` at all"),
            "{}",
            finding.seen
        );
        let later = heartbeat_serving_order(&s(&["serving", "death_observed"])).unwrap();
        assert!(later.shows && later.seen.contains("comes after it"));
        let fixed =
            heartbeat_serving_order(&s(&["death_observed", "records_recovered", "serving"]))
                .unwrap();
        assert!(!fixed.shows);
        assert!(
            fixed
                .seen
                .contains("death_observed → records_recovered → serving"),
            "{}",
            fixed.seen
        );
        assert!(heartbeat_serving_order(&s(&["records_recovered"]))
            .unwrap_err()
            .detail
            .contains("no `guard_promotion_stage stage=serving`"));
    }

    fn clean() -> CleanStop {
        CleanStop {
            exit: Some("exit status: 0".into()),
            needed_sigkill: false,
            handed_back: Some(true),
            forced_engine_stop: None,
            promotions: 0,
            snapshot_written: true,
        }
    }

    #[test]
    fn a_clean_stop_passes_and_a_death_does_not() {
        assert!(expect_clean_stop(&clean()).is_ok());
        let died = CleanStop {
            handed_back: Some(false),
            promotions: 1,
            snapshot_written: false,
            ..clean()
        };
        let v = expect_clean_stop(&died).unwrap_err();
        assert!(v.detail.contains("promoted 1 times"), "{v}");
        assert!(v.detail.contains("no `KVCR closed"));
        // An engine that does not relay KVCR's close (vLLM): the Guard's
        // side decides, and a death still fails, without the engine line.
        let unrelayed = CleanStop {
            handed_back: None,
            ..clean()
        };
        assert!(expect_clean_stop(&unrelayed).is_ok());
        let v = expect_clean_stop(&CleanStop {
            handed_back: None,
            ..died
        })
        .unwrap_err();
        assert!(v.detail.contains("promoted 1 times") && v.detail.contains("snapshot_written"));
        assert!(!v.detail.contains("no `KVCR closed"), "{v}");
        let killed = CleanStop {
            exit: Some("signal: 9 (SIGKILL)".into()),
            needed_sigkill: true,
            ..clean()
        };
        assert!(expect_clean_stop(&killed).is_err());
        // vLLM's stop: the dynamo process exits 0, but its process manager
        // force-killed the engine core holding KVCR (kvcr-findings 17).
        let line = "WARNING [v1/utils.py:648] [shutdown] Process manager: force killing remaining processes count=1";
        let forced = CleanStop {
            handed_back: None,
            forced_engine_stop: Some(line.into()),
            promotions: 1,
            snapshot_written: false,
            ..clean()
        };
        let v = expect_clean_stop(&forced).unwrap_err();
        assert!(
            v.detail.contains("force-killed the engine core")
                && v.detail.contains("findings.md 17"),
            "{v}"
        );
        // Finding 17 shows on that stop, and its Guard took the group over;
        // not on a clean one.
        let shown = forced_engine_stop(&forced);
        assert!(shown.shows && shown.finding.number == 17);
        assert!(shown.seen.contains("force killing remaining processes"));
        assert!(expect_forced_stop_taken_over(&forced).is_ok());
        let clean_stop = forced_engine_stop(&clean());
        assert!(!clean_stop.shows);
        assert!(
            clean_stop.seen.contains("no force-kill of the engine core"),
            "{}",
            clean_stop.seen
        );
        // A forced stop nothing took over: the pool is left unguarded.
        let untaken = CleanStop {
            promotions: 0,
            ..forced
        };
        assert!(expect_forced_stop_taken_over(&untaken)
            .unwrap_err()
            .detail
            .contains("did not promote"));
    }

    #[test]
    fn a_refusal_must_quote_the_reason() {
        let r = "claimed with another tier configuration";
        assert!(expect_refused(Err(format!("KVCRServiceError: KVCR pool was {r}")), r).is_ok());
        assert!(expect_refused(Ok(()), r)
            .unwrap_err()
            .detail
            .contains("serves"));
        assert!(expect_refused(Err("timed out".into()), r).is_err());
    }

    #[test]
    fn heartbeat_promotion_window() {
        assert!(expect_heartbeat_promotion(5000.0, 0, Some(5020.0), 3000.0).is_ok());
        assert!(expect_heartbeat_promotion(5000.0, 1, Some(5020.0), 3000.0).is_err());
        assert!(expect_heartbeat_promotion(5000.0, 0, Some(600.0), 3000.0)
            .unwrap_err()
            .detail
            .contains("before the 5000 ms timeout"));
        assert!(expect_heartbeat_promotion(5000.0, 0, None, 3000.0).is_err());
        assert!(expect_heartbeat_promotion(5000.0, 0, Some(9000.0), 3000.0).is_err());
    }
}
