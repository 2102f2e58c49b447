//! A worker whose KVCR claim its Guard service refused: read from the
//! worker's own log since its spawn while the stack waits for it, so the
//! start fails at once, quoting KVCR's line and saying what it means,
//! instead of waiting out the startup timeout (an engine that keeps its
//! process up after its KVCR tier failed would never serve) or ending in a
//! bare "exited during startup".
//!
//! The refusals are KVCR 0.1.1's own words (`kvcr_service.py`,
//! `guard.py`), each carried to the worker as a `KVCRServiceError`: the
//! CPU engine's traceback ends in it, vLLM's engine core logs it behind its
//! logger prefix.

use std::path::PathBuf;
use std::time::Duration;

/// The exception every refusal reaches the worker as.
const SERVICE_ERROR: &str = "KVCRServiceError: ";

/// What a refusal says about the stack, one per message KVCR 0.1.1 refuses
/// a claim with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// `KVCR Guard N is held by another worker`.
    HeldByAnother,
    /// `guard_index N is out of range [0, M)`.
    OutOfRange,
    /// `pool layout must match the number of pools in the Guard`.
    PoolCountMismatch,
    /// `KVCR pool was claimed with another tier configuration`.
    OtherTierConfig,
    /// `KVCR compatibility digest does not match the service`.
    DigestMismatch,
    /// `KVCR Guard N answers on H:P and cannot be moved to H:P`.
    ListenerMoved,
    /// `KVCR Guard N control listener H:P is unavailable: ...`.
    ListenerUnavailable,
    /// `KVCR Guard N is busy`.
    Busy,
    /// `KVCR pool registry is closed`.
    RegistryClosed,
    /// `internal KVCR service error`.
    Internal,
}

/// (what the message contains, its kind), in the order they are tried.
const MESSAGES: [(&str, RefusalKind); 10] = [
    ("is held by another worker", RefusalKind::HeldByAnother),
    ("is out of range", RefusalKind::OutOfRange),
    (
        "pool layout must match the number of pools in the Guard",
        RefusalKind::PoolCountMismatch,
    ),
    (
        "claimed with another tier configuration",
        RefusalKind::OtherTierConfig,
    ),
    (
        "compatibility digest does not match the service",
        RefusalKind::DigestMismatch,
    ),
    ("cannot be moved to", RefusalKind::ListenerMoved),
    ("control listener", RefusalKind::ListenerUnavailable),
    ("is busy", RefusalKind::Busy),
    ("KVCR pool registry is closed", RefusalKind::RegistryClosed),
    ("internal KVCR service error", RefusalKind::Internal),
];

impl RefusalKind {
    /// What the refusal means for the stack, for the failure message.
    pub fn meaning(self) -> &'static str {
        match self {
            RefusalKind::HeldByAnother => {
                "another live worker holds this Guard group: two workers were given the same guard_index"
            }
            RefusalKind::OutOfRange => {
                "the worker's guard_index names a group the Guard service was not started with (--guard-count too small)"
            }
            RefusalKind::PoolCountMismatch => {
                "the worker's KV pools are not the ones the Guard service was started with (one --pool-size per pool)"
            }
            RefusalKind::OtherTierConfig => {
                "this group was claimed with another tier configuration (KV layout, G3) since the Guard service started; its first claim fixed it until the service restarts"
            }
            RefusalKind::DigestMismatch => {
                "the worker presents another KVCR compatibility digest than the Guard service was started with (another engine build or config)"
            }
            RefusalKind::ListenerMoved => {
                "the group answers on its first holder's control address for the service's life: the worker claimed with another control host or port"
            }
            RefusalKind::ListenerUnavailable => {
                "the Guard could not listen on the worker's control address (another process holds the port)"
            }
            RefusalKind::Busy => {
                "another claim or a promotion of this group was in progress (two claims of one group at once)"
            }
            RefusalKind::RegistryClosed => "the Guard service is shutting down or has failed",
            RefusalKind::Internal => {
                "the Guard service failed while handling the claim: its log has the traceback"
            }
        }
    }
}

/// A worker's KVCR claim, refused by its Guard service during startup.
#[derive(Debug, Clone, serde::Serialize, thiserror::Error)]
#[error(
    "{component}'s KVCR claim was refused by its Guard service {after:.1} s after it started: `{line}` ({kind:?}: {meaning}); its log: {log}",
    after = .after_spawn.as_secs_f64(),
    meaning = .kind.meaning(),
    log = .log.display()
)]
pub struct ClaimRefused {
    pub component: String,
    pub kind: RefusalKind,
    /// KVCR's line as the worker logged it (a logger prefix left out).
    pub line: String,
    pub log: PathBuf,
    /// From the worker's spawn to the refusal being seen.
    #[serde(rename = "after_spawn_ms", serialize_with = "as_ms")]
    pub after_spawn: Duration,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// The first claim refusal in `log` (a worker's log since its spawn), as
/// (kind, KVCR's line).
pub fn find(log: &str) -> Option<(RefusalKind, String)> {
    log.lines().find_map(refusal_in)
}

fn refusal_in(line: &str) -> Option<(RefusalKind, String)> {
    let at = line.find(SERVICE_ERROR)?;
    // Keep the exception's dotted name (`kvcr.control_channels.`), not a
    // logger prefix before it.
    let start = line[..at]
        .rfind(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_'))
        .map_or(0, |i| i + 1);
    let quoted = line[start..].trim();
    let message = &line[at + SERVICE_ERROR.len()..];
    MESSAGES
        .iter()
        .find(|(text, _)| message.contains(text))
        .map(|(_, kind)| (*kind, quoted.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of a CPU-engine worker's log whose claim was refused
    /// (worker-A.2.log of a TC-09 run, shortened).
    const CPU_ENGINE: &str = "2026-12-02 02:53:27,411 A.2 cpu_engine.worker INFO starting\n\
        Traceback (most recent call last):\n\
        \x20 File \"/x/kvcr/guard_protocol.py\", line 349, in claim\n\
        \x20   raise KVCRServiceError(response.message)\n\
        kvcr.control_channels.KVCRServiceError: KVCR pool was claimed with another tier configuration\n\
        2026-12-02T02:53:28.907394Z  INFO _core: tasks still running at interpreter exit; continuing without them\n";

    #[test]
    fn a_cpu_engine_traceback_is_read_as_its_refusal() {
        let (kind, line) = find(CPU_ENGINE).unwrap();
        assert_eq!(kind, RefusalKind::OtherTierConfig);
        assert_eq!(
            line,
            "kvcr.control_channels.KVCRServiceError: KVCR pool was claimed with another tier configuration"
        );
    }

    #[test]
    fn each_kvcr_refusal_has_its_kind() {
        let cases = [
            (
                "KVCR Guard 0 is held by another worker",
                RefusalKind::HeldByAnother,
            ),
            (
                "guard_index 5 is out of range [0, 2)",
                RefusalKind::OutOfRange,
            ),
            (
                "pool layout must match the number of pools in the Guard",
                RefusalKind::PoolCountMismatch,
            ),
            (
                "KVCR compatibility digest does not match the service",
                RefusalKind::DigestMismatch,
            ),
            (
                "KVCR Guard 1 answers on 127.0.0.1:20001 and cannot be moved to 127.0.0.1:20002",
                RefusalKind::ListenerMoved,
            ),
            (
                "KVCR Guard 1 control listener 127.0.0.1:20001 is unavailable: [Errno 98] Address already in use",
                RefusalKind::ListenerUnavailable,
            ),
            ("KVCR Guard 1 is busy", RefusalKind::Busy),
            ("KVCR pool registry is closed", RefusalKind::RegistryClosed),
            ("internal KVCR service error", RefusalKind::Internal),
        ];
        for (message, kind) in cases {
            let log = format!("noise\nkvcr.control_channels.KVCRServiceError: {message}\n");
            assert_eq!(find(&log).map(|(k, _)| k), Some(kind), "{message}");
        }
    }

    #[test]
    fn a_vllm_engine_core_line_is_quoted_without_its_logger_prefix() {
        let log = "(EngineCore pid=18386) ERROR 11-30 07:31:16 [v1/engine/core.py:1510] kvcr.control_channels.KVCRServiceError: KVCR Guard 0 is held by another worker\n";
        let (kind, line) = find(log).unwrap();
        assert_eq!(kind, RefusalKind::HeldByAnother);
        assert_eq!(
            line,
            "kvcr.control_channels.KVCRServiceError: KVCR Guard 0 is held by another worker"
        );
    }

    #[test]
    fn the_same_words_outside_a_kvcr_service_error_are_not_a_refusal() {
        let log = "INFO the pool is busy\n\
            kvcr.control_channels.KVCRSocketError: KVCR-Service is unreachable at /x.sock\n\
            WARNING guard_index 5 is out of range, retrying\n\
            RuntimeError: fault kvcr_progress_fails: KVCR progress loop failed\n";
        assert_eq!(find(log), None);
    }

    #[test]
    fn the_message_names_the_component_quotes_the_line_and_says_what_it_means() {
        let refused = ClaimRefused {
            component: "worker-B".into(),
            kind: RefusalKind::HeldByAnother,
            line: "kvcr.control_channels.KVCRServiceError: KVCR Guard 0 is held by another worker"
                .into(),
            log: "/logs/worker-B.log".into(),
            after_spawn: Duration::from_millis(1400),
        };
        assert_eq!(
            refused.to_string(),
            "worker-B's KVCR claim was refused by its Guard service 1.4 s after it started: `kvcr.control_channels.KVCRServiceError: KVCR Guard 0 is held by another worker` (HeldByAnother: another live worker holds this Guard group: two workers were given the same guard_index); its log: /logs/worker-B.log"
        );
    }
}
