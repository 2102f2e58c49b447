//! A target's NIXL metadata crosses to a source once (TC-03).
//!
//! KVCR 0.1.1's target puts its NIXL agent metadata and memory regions into
//! every control message to a source until that source acknowledges them
//! (`target_metadata_ack`, which the source sends for each message that
//! carried them), then leaves them out: they are the largest part of a
//! control message, and a source that has them needs them once. So a
//! target's later pull from a source that has acknowledged it carries no
//! metadata, and the target handles no acknowledgement for it. A target
//! that never records the acknowledgement re-sends its metadata with every
//! pull, and the source acknowledges each one: pulls still work, only the
//! control traffic says so.

use super::{Checks, Violation};

/// Claim: a later pull exchanges no metadata with a source that already
/// acknowledged the target's.
pub const METADATA_ONCE: &str =
    "a target sends a source its NIXL metadata until the source acknowledges it, then no more";

/// `acks`: the `target_metadata_ack` messages the target handled during
/// its pull from a source that had acknowledged its metadata before.
pub fn expect_metadata_acknowledged_once(
    target: &str,
    source: &str,
    acks: u64,
) -> Result<(), Violation> {
    Checks::new(METADATA_ONCE)
        .check(acks == 0, || {
            format!(
                "{target} handled {acks} target_metadata_ack message(s) from {source} during a \
                 pull after {source} had acknowledged its metadata: {target} sent its NIXL \
                 metadata again"
            )
        })
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_acknowledgement_on_a_later_pull_passes() {
        assert_eq!(expect_metadata_acknowledged_once("B", "A", 0), Ok(()));
    }

    #[test]
    fn an_acknowledgement_on_a_later_pull_fails_naming_both_workers() {
        let v = expect_metadata_acknowledged_once("B", "A", 1).unwrap_err();
        assert_eq!(v.claim, METADATA_ONCE);
        assert!(
            v.detail.starts_with("B handled 1 target_metadata_ack"),
            "{v}"
        );
        assert!(v.detail.contains("after A had acknowledged"), "{v}");
    }
}
