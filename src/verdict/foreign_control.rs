//! A foreign peer on a worker's KVCR control channel (TC-22): messages no
//! KVCR 0.1.1 peer sends (not msgpack, an unknown type, KVCR's own types
//! with fields missing or of the wrong kind), as from a peer of another
//! KVCR version or a stray client.
//!
//! KVCR must read and drop each of them: none may start a write or pin
//! the engine's memory, and none may stop it from serving its real peers
//! (the next read from it is judged by the fetched-read verdicts).

use serde::Serialize;

use super::{Checks, Violation};

/// Claim: KVCR read the foreign messages and dropped them.
pub const FOREIGN_MESSAGES_DROPPED: &str =
    "a worker's KVCR drops control messages it cannot use, and starts nothing for them";

/// The worker's counts over the window of the foreign messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForeignControl {
    /// Messages sent with a type KVCR dispatches on.
    pub typed_sent: u64,
    /// Control messages KVCR handled in the window (`control_<type>`
    /// handled, summed over the types sent).
    pub handled: u64,
    /// `source_write` operations in the window, any result.
    pub source_write_ops: u64,
    /// Blocks the engine pinned for KVCR in the window.
    pub pinned_blocks: u64,
}

/// KVCR handled every typed message (the fault reached it), and none of
/// them made it write or pin anything.
pub fn expect_foreign_messages_dropped(f: &ForeignControl) -> Result<(), Violation> {
    Checks::new(FOREIGN_MESSAGES_DROPPED)
        .check(f.handled >= f.typed_sent, || {
            format!(
                "KVCR handled {} of the {} foreign messages of its own types: it stopped reading its control channel",
                f.handled, f.typed_sent
            )
        })
        .check(f.source_write_ops == 0, || {
            format!(
                "{} source_write operations followed the foreign messages",
                f.source_write_ops
            )
        })
        .check(f.pinned_blocks == 0, || {
            format!(
                "the engine pinned {} blocks for the foreign messages",
                f.pinned_blocks
            )
        })
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dropped() -> ForeignControl {
        ForeignControl {
            typed_sent: 9,
            handled: 9,
            source_write_ops: 0,
            pinned_blocks: 0,
        }
    }

    #[test]
    fn messages_read_and_dropped_pass() {
        assert_eq!(expect_foreign_messages_dropped(&dropped()), Ok(()));
    }

    #[test]
    fn a_channel_that_stopped_reading_fails() {
        let f = ForeignControl {
            handled: 1,
            ..dropped()
        };
        let v = expect_foreign_messages_dropped(&f).unwrap_err();
        assert_eq!(v.claim, FOREIGN_MESSAGES_DROPPED);
        assert!(v.detail.contains("handled 1 of the 9"), "{v}");
    }

    #[test]
    fn a_write_or_a_pin_for_a_foreign_message_fails() {
        let f = ForeignControl {
            source_write_ops: 1,
            pinned_blocks: 4,
            ..dropped()
        };
        let v = expect_foreign_messages_dropped(&f).unwrap_err();
        assert!(v.detail.contains("1 source_write operations"), "{v}");
        assert!(v.detail.contains("pinned 4 blocks"), "{v}");
    }
}
