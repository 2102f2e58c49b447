//! Why a component died during startup, read from its log: the final lines
//! of its Python tracebacks (`module.SomeError: message`). A failure
//! message that names it saves opening the log for the common causes (a
//! KVCR refusal, a bad engine argument).

/// How far back in the log to look.
pub const LINES_SCANNED: usize = 200;

/// The exception lines of `log`, for a failure message: the first (with
/// chained tracebacks, and with vLLM's engine core failing in a child, the
/// root cause comes first) and, when it differs, the last.
pub fn startup_cause(log: &str) -> Option<String> {
    let mut exceptions = log.lines().map(str::trim).filter(|l| is_exception_line(l));
    let first = exceptions.next()?;
    Some(match exceptions.next_back() {
        Some(last) if last != first => format!("{first} (then {last})"),
        _ => first.to_string(),
    })
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
    fn a_chained_failure_names_the_root_cause_first() {
        let log = "kvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service\nThe above exception was the direct cause of the following exception:\nRuntimeError: Engine core initialization failed. See root cause above.\n";
        assert_eq!(
            startup_cause(log).as_deref(),
            Some("kvcr.control_channels.KVCRServiceError: KVCR compatibility digest does not match the service (then RuntimeError: Engine core initialization failed. See root cause above.)")
        );
    }
}
