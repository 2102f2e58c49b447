//! A foreign peer on a worker's KVCR control channel (TC-22): messages no
//! KVCR 0.1.1 peer sends (not msgpack, an unknown type, KVCR's own types
//! with fields missing or of the wrong kind), as from a peer of another
//! KVCR version or a stray client.
//!
//! KVCR must read and drop each of them: none may start a write or pin
//! the engine's memory, and none may stop it from serving its real peers
//! (the next read from it is judged by the fetched-read verdicts).
//!
//! A `target_metadata` that names a real peer's agent with metadata that is
//! not NIXL's makes KVCR 0.1.1 drop its route to that peer (its refresh
//! path unloads the old route before the new one fails to load): that
//! peer's next read may fail, whole and cleanly, but the one after it must
//! be served.

use serde::Serialize;

use super::engine_memory::FetchedRead;
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
    /// The foreign start_writes KVCR must refuse as malformed for which
    /// the worker's log holds no `KVCR malformed start_write op=<handle>`.
    pub not_refused_as_malformed: Vec<&'static str>,
}

/// KVCR handled every typed message (the fault reached it), refused each
/// malformed start_write as malformed in its own words, and none of them
/// made it write or pin anything.
pub fn expect_foreign_messages_dropped(f: &ForeignControl) -> Result<(), Violation> {
    Checks::new(FOREIGN_MESSAGES_DROPPED)
        .check(f.handled >= f.typed_sent, || {
            format!(
                "KVCR handled {} of the {} foreign messages of its own types: it stopped reading its control channel",
                f.handled, f.typed_sent
            )
        })
        .check(f.not_refused_as_malformed.is_empty(), || {
            format!(
                "KVCR did not refuse as malformed, in its own words (`KVCR malformed start_write op=<handle>`): {}",
                f.not_refused_as_malformed.join("; ")
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

/// Claim: a spoofed metadata message costs a real peer at most the read
/// that follows it, and that read fails cleanly.
pub const SPOOFED_ROUTE_CONTAINED: &str =
    "metadata spoofed under a real peer's name costs that peer at most one read, which fails whole";

/// A read by the peer whose name was spoofed, from the source that took
/// the spoofed metadata.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadAfterSpoof {
    pub read: FetchedRead,
    /// Prompt blocks the reader computed in the read's window.
    pub computed_blocks: u64,
}

/// The source's and the reader's side of a spoofed `target_metadata`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpoofedRoute {
    /// The source's KVCR handled the spoofed message (`control_target_metadata`).
    pub metadata_handled: u64,
    /// It tried to set a route up with the spoofed metadata and failed
    /// (`peer_setup` failed; recorded: a KVCR that ignores the spoof
    /// without trying is no worse).
    pub peer_setup_failed: u64,
    /// The reader's next read from the source, then the one after it.
    pub first: ReadAfterSpoof,
    pub second: ReadAfterSpoof,
}

impl ReadAfterSpoof {
    fn whole(&self, blocks: u64) -> bool {
        let r = &self.read;
        r.remote_fetch_success_ops > 0
            && r.remote_fetch_unsuccessful.is_none()
            && r.fetched_blocks == blocks
            && r.fetch_failed_blocks == 0
            && r.pool_blocks_after == blocks
    }

    fn failed_whole(&self, blocks: u64) -> bool {
        let r = &self.read;
        r.remote_fetch_success_ops == 0
            && r.fetched_blocks == 0
            && r.fetch_failed_blocks == blocks
            && r.local_deliver_blocks == 0
            && r.pool_blocks_after == 0
            && self.computed_blocks == blocks
    }

    fn text(&self) -> String {
        let r = &self.read;
        format!(
            "remote_fetch success {}, others {:?}; the engine's fetch staged {} and failed {}; the pool holds {}; {} blocks computed",
            r.remote_fetch_success_ops,
            r.remote_fetch_unsuccessful,
            r.fetched_blocks,
            r.fetch_failed_blocks,
            r.pool_blocks_after,
            self.computed_blocks
        )
    }
}

/// The source read the spoofed message (the fault applied); the
/// read after it was served whole or failed whole (the target then
/// computed the `blocks`), and the read after that was served whole.
pub fn expect_spoofed_route_contained(s: &SpoofedRoute, blocks: u64) -> Result<(), Violation> {
    Checks::new(SPOOFED_ROUTE_CONTAINED)
        .check(s.metadata_handled >= 1, || {
            "the source handled no target_metadata message: the spoofed metadata never reached it"
                .to_string()
        })
        .check(
            s.first.whole(blocks) || s.first.failed_whole(blocks),
            || {
                format!(
                    "the read after the spoof neither succeeded nor failed whole for its {blocks} blocks: {}",
                    s.first.text()
                )
            },
        )
        .check(s.second.whole(blocks), || {
            format!(
                "the second read after the spoof was not served whole: {}",
                s.second.text()
            )
        })
        .verdict()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::transfer::Unsuccessful;

    #[test]
    fn a_malformed_start_write_not_refused_as_such_fails_naming_it() {
        let f = ForeignControl {
            not_refused_as_malformed: vec!["start_write for a block without a destination"],
            ..dropped()
        };
        let v = expect_foreign_messages_dropped(&f).unwrap_err();
        assert!(
            v.detail
                .contains("did not refuse as malformed, in its own words (`KVCR malformed start_write op=<handle>`): start_write for a block without a destination"),
            "{v}"
        );
    }

    fn whole() -> ReadAfterSpoof {
        ReadAfterSpoof {
            read: FetchedRead {
                remote_fetch_success_ops: 1,
                remote_fetch_unsuccessful: Unsuccessful::default(),
                remote_fetch_blocks: 4,
                remote_deliver_ops: 0,
                fetched_blocks: 4,
                fetch_failed_blocks: 0,
                claims_released: 4,
                local_deliver_blocks: 4,
                read_bytes: 4 * 8192,
                pool_blocks_after: 4,
            },
            computed_blocks: 0,
        }
    }

    fn failed() -> ReadAfterSpoof {
        ReadAfterSpoof {
            read: FetchedRead {
                remote_fetch_success_ops: 0,
                remote_fetch_unsuccessful: Unsuccessful::of(&[("failed", 1)]),
                remote_fetch_blocks: 0,
                remote_deliver_ops: 0,
                fetched_blocks: 0,
                fetch_failed_blocks: 4,
                claims_released: 0,
                local_deliver_blocks: 0,
                read_bytes: 0,
                pool_blocks_after: 0,
            },
            computed_blocks: 4,
        }
    }

    fn spoofed(first: ReadAfterSpoof, second: ReadAfterSpoof) -> SpoofedRoute {
        SpoofedRoute {
            metadata_handled: 1,
            peer_setup_failed: 1,
            first,
            second,
        }
    }

    #[test]
    fn one_read_lost_then_served_passes_and_so_does_none_lost() {
        assert_eq!(
            expect_spoofed_route_contained(&spoofed(failed(), whole()), 4),
            Ok(())
        );
        assert_eq!(
            expect_spoofed_route_contained(&spoofed(whole(), whole()), 4),
            Ok(())
        );
    }

    /// A source that keeps the unloaded route: every later read fails.
    #[test]
    fn a_route_lost_for_good_fails() {
        let v = expect_spoofed_route_contained(&spoofed(failed(), failed()), 4).unwrap_err();
        assert_eq!(v.claim, SPOOFED_ROUTE_CONTAINED);
        assert!(
            v.detail
                .contains("second read after the spoof was not served whole"),
            "{v}"
        );
    }

    #[test]
    fn a_partial_read_after_the_spoof_fails() {
        let mut first = failed();
        first.read.fetched_blocks = 2;
        first.read.fetch_failed_blocks = 2;
        first.computed_blocks = 2;
        let v = expect_spoofed_route_contained(&spoofed(first, whole()), 4).unwrap_err();
        assert!(
            v.detail.contains("neither succeeded nor failed whole"),
            "{v}"
        );
    }

    #[test]
    fn a_spoof_that_never_reached_the_routes_fails() {
        let mut s = spoofed(whole(), whole());
        s.metadata_handled = 0;
        let v = expect_spoofed_route_contained(&s, 4).unwrap_err();
        assert!(v.detail.contains("never reached it"), "{v}");
    }

    fn dropped() -> ForeignControl {
        ForeignControl {
            typed_sent: 9,
            handled: 9,
            source_write_ops: 0,
            pinned_blocks: 0,
            not_refused_as_malformed: vec![],
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
