//! Why a component died during startup, read from its log: the final lines
//! of its Python tracebacks (`module.SomeError: message`). A failure
//! message that names it saves opening the log for the common causes (a
//! KVCR refusal, a bad engine argument).

/// How far back in the log to look.
pub const LINES_SCANNED: usize = 400;

/// How many distinct exception lines a failure message quotes.
const MAX_CAUSES: usize = 3;

/// The distinct exception lines of `log`, in order, for a failure message:
/// with chained tracebacks, and with vLLM's engine core failing in a child
/// process, the root cause comes first and the last is the one that ended
/// the process. vLLM prefixes its lines (`(EngineCore pid=1) ERROR 11-30
/// 07:31:16 [v1/engine/core.py:1510] ...`): the prefix is skipped.
pub fn startup_cause(log: &str) -> Option<String> {
    let mut causes: Vec<&str> = Vec::new();
    for line in log.lines() {
        let Some(exception) = exception_in(line) else {
            continue;
        };
        if !causes.contains(&exception) {
            causes.push(exception);
        }
    }
    if causes.len() > MAX_CAUSES {
        // Keep the root cause and the last ones.
        causes.drain(1..causes.len() - (MAX_CAUSES - 1));
    }
    (!causes.is_empty()).then(|| causes.join(" → "))
}

/// KVCR's refusals of a worker's claim of its Guard group (kvcr 0.1.1
/// `guard.py`, `kvcr_service.py`): a worker that logs one will never serve
/// with KVCR, whether or not its process exits.
const KVCR_REFUSALS: &[&str] = &[
    crate::telemetry::names::kvcr_service_log::HELD_BY_ANOTHER,
    crate::telemetry::names::kvcr_service_log::POOL_COUNT_MISMATCH,
    crate::telemetry::names::kvcr_service_log::OTHER_TIER_CONFIG,
    crate::telemetry::names::kvcr_service_log::OUT_OF_RANGE,
    "compatibility digest does not match",
];

/// The first exception line of `log` that is KVCR refusing the worker's
/// claim (`... is held by another worker`, `pool layout must match ...`,
/// `... claimed with another tier configuration`), quoted whole.
pub fn kvcr_refusal(log: &str) -> Option<String> {
    log.lines()
        .filter_map(exception_in)
        .find(|line| KVCR_REFUSALS.iter().any(|r| line.contains(r)))
        .map(str::to_string)
}

/// The exception in `line`, read after a logger's `] ` prefix if any.
fn exception_in(line: &str) -> Option<&str> {
    let line = line.trim();
    let unprefixed = line.split_once("] ").map(|(_, rest)| rest.trim());
    [Some(line), unprefixed]
        .into_iter()
        .flatten()
        .find(|candidate| is_exception_line(candidate))
}

fn is_exception_line(line: &str) -> bool {
    let Some((name, _message)) = line.split_once(": ") else {
        return false;
    };
    let class = name.rsplit('.').next().unwrap_or(name);
    let is_dotted_identifier = !name.is_empty()
        && name
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_'));
    is_dotted_identifier && (class.ends_with("Error") || class.ends_with("Exception"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_traceback_line_is_the_cause() {
        let log = "INFO starting\nTraceback (most recent call last):\n  File \"x.py\", line 3, in claim\n    raise KVCRServiceError(response.message)\nkvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service\nINFO _core: tasks still running at interpreter exit\n";
        assert_eq!(
            startup_cause(log).as_deref(),
            Some("kvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service")
        );
    }

    #[test]
    fn log_lines_that_only_look_alike_are_not_causes() {
        let log = "2026-11-30T06:50:06Z INFO _core: tasks still running\nWARNING: retrying\nno error here\n    raise ValueError(x)\n";
        assert_eq!(startup_cause(log), None);
    }

    #[test]
    fn vllm_engine_core_lines_are_read_past_their_prefix() {
        let log = "(EngineCore pid=18386) ERROR 11-30 07:31:16 [v1/engine/core.py:1510] FileNotFoundError: [Errno 2] No such file or directory\n\
                   (EngineCore pid=18386) ERROR 11-30 07:31:16 [v1/engine/core.py:1510] kvcr.control_channels.KVCRSocketError: KVCR-Service is unreachable at /x.sock\n\
                   kvcr.control_channels.KVCRSocketError: KVCR-Service is unreachable at /x.sock\n\
                   RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n";
        assert_eq!(
            startup_cause(log).as_deref(),
            Some("FileNotFoundError: [Errno 2] No such file or directory → kvcr.control_channels.KVCRSocketError: KVCR-Service is unreachable at /x.sock → RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
        );
    }

    #[test]
    fn a_kvcr_refusal_is_quoted_whether_or_not_the_process_exited() {
        let log = "INFO starting\n(EngineCore pid=1) ERROR 12-01 [core.py:1] kvcr.control_channels.KVCRServiceError: KVCR pool layout must match the number of pools in the Guard\nINFO still up\n";
        assert_eq!(
            kvcr_refusal(log).as_deref(),
            Some("kvcr.control_channels.KVCRServiceError: KVCR pool layout must match the number of pools in the Guard")
        );
        let held =
            "kvcr.control_channels.KVCRServiceError: guard_index 0 is held by another worker\n";
        assert!(kvcr_refusal(held)
            .unwrap()
            .ends_with("is held by another worker"));
        let tier = "KVCRServiceError: KVCR pool was claimed with another tier configuration\n";
        assert!(kvcr_refusal(tier).is_some());
        // A refusal named in a log line that is not an exception, or another error: not a refusal.
        assert_eq!(
            kvcr_refusal("INFO a claim is held by another worker?\n"),
            None
        );
        assert_eq!(kvcr_refusal("ValueError: bad argument\n"), None);
    }

    #[test]
    fn a_chained_failure_names_the_root_cause_first() {
        let log = "kvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service\nThe above exception was the direct cause of the following exception:\nRuntimeError: Engine core initialization failed. See root cause above.\n";
        assert_eq!(
            startup_cause(log).as_deref(),
            Some("kvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service → RuntimeError: Engine core initialization failed. See root cause above.")
        );
    }
}
