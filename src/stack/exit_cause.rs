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

/// The last exception line of `log`: what ended the process, whatever
/// earlier attempts logged to the same file before it.
pub fn final_cause(log: &str) -> Option<&str> {
    log.lines().rev().find_map(exception_in)
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
    fn the_final_cause_is_the_last_exception_logged() {
        let log = "kvcr.control_channels.KVCRServiceError: KVCR pool was claimed with another tier configuration\nINFO again\nkvcr.types.RecoveryMirrorError: G3 recovery requires one local DRAM slot without a part label\nINFO _core: tasks still running\n";
        assert_eq!(
            final_cause(log),
            Some("kvcr.types.RecoveryMirrorError: G3 recovery requires one local DRAM slot without a part label")
        );
        assert_eq!(final_cause("INFO nothing\n"), None);
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
    fn a_chained_failure_names_the_root_cause_first() {
        let log = "kvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service\nThe above exception was the direct cause of the following exception:\nRuntimeError: Engine core initialization failed. See root cause above.\n";
        assert_eq!(
            startup_cause(log).as_deref(),
            Some("kvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service → RuntimeError: Engine core initialization failed. See root cause above.")
        );
    }
}
