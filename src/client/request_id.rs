//! The `x-request-id` every harness request carries.
//!
//! Dynamo's frontend (1.6.1) logs it (`x_request_id="…"`) beside its own
//! id for the request, which is what the workers see (`context.id()`) and
//! log; the suite follows one to the other (`suite::requests`), so a
//! failure can be followed from the harness's message to the component log
//! lines of that request. Ids are UUID v4 in form, unique per process (pid,
//! clock, counter, hashed).

use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// The header that carries a request's id.
pub const HEADER_REQUEST_ID: &str = "x-request-id";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh request id: a UUID v4 string, never repeated in this process.
pub fn new_request_id() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(std::process::id().to_le_bytes());
    hasher.update(nanos.to_le_bytes());
    hasher.update(n.to_le_bytes());
    let mut b: [u8; 16] = hasher.finalize()[..16].try_into().expect("16 bytes");
    // The counter in the last 4 bytes keeps ids of one process distinct.
    b[12..16].copy_from_slice(&(n as u32).to_be_bytes());
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_distinct_uuid_v4_strings() {
        let ids: Vec<String> = (0..1000).map(|_| new_request_id()).collect();
        let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        for id in &ids {
            let parts: Vec<&str> = id.split('-').collect();
            assert_eq!(
                parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
                [8, 4, 4, 4, 12],
                "{id}"
            );
            assert!(parts[2].starts_with('4'), "version 4: {id}");
            assert!("89ab".contains(&parts[3][..1]), "variant: {id}");
            assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        }
    }
}
