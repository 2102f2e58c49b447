//! Dynamo's file discovery as the stack's logs tell it: which process
//! deleted a worker's entry as expired, and when. Every process of a stack
//! keeps the shared discovery directory and deletes any entry not refreshed
//! for 10 s of wall time, so the line is in whichever log ran its sweep
//! first (names in [`super::names::dynamo_discovery_log`]).

use super::names::dynamo_discovery_log::EXPIRED;
use super::strip_ansi;

/// The first line of `log` in which an entry of the instance `instance_id`
/// was deleted as expired, colours stripped. Entries are keyed by the id in
/// hex (`.../instances/<ns>%2F<component>%2F<endpoint>%2F<hex>`).
pub fn expiry_of(instance_id: u64, log: &str) -> Option<String> {
    let key = format!("%2F{instance_id:x}\"");
    // Colours split the target from the message: strip the few candidates.
    log.lines()
        .filter(|line| line.contains(&key) && line.contains("Expired"))
        .map(strip_ansi)
        .find(|line| line.contains(EXPIRED))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\u{1b}[2m2026-12-03T05:51:04.860902Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m \u{1b}[2mdynamo_runtime::storage::kv::file\u{1b}[0m\u{1b}[2m:\u{1b}[0m Expired \u{1b}[3mpath\u{1b}[0m\u{1b}[2m=\u{1b}[0m\"/dev/shm/kvcr-e2e-x/discovery/v1/mdc/kvcr%2De2e%2Fcpu%2Fgenerate%2F3522055922cf1624\" \u{1b}[3mlast_modified\u{1b}[0m\u{1b}[2m=\u{1b}[0mSystemTime { tv_sec: 1796277054, tv_nsec: 855614749 }
2026-12-03T05:51:05Z INFO request received request_id=3522055922cf1624\"
";

    #[test]
    fn the_expiry_of_an_instance_is_found_by_its_hex_key() {
        let line = expiry_of(0x3522055922cf1624, LOG).expect("found");
        assert!(
            line.starts_with("2026-12-03T05:51:04.860902Z  INFO dynamo_runtime::storage::kv::file: Expired path=\"/dev/shm/"),
            "{line}"
        );
        assert_eq!(expiry_of(0x3522055922cf1625, LOG), None);
        // An id with a leading zero nibble is keyed without it.
        assert_eq!(
            expiry_of(0x0abc, "x storage::kv::file: Expired path=\"a%2Fabc\""),
            Some("x storage::kv::file: Expired path=\"a%2Fabc\"".into())
        );
    }
}
