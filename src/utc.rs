//! A UTC instant as the records and the machine registry write it.

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

/// A UTC instant, serialized as RFC 3339 (`2025-11-29T17:41:00.123Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct UtcTime(pub OffsetDateTime);

impl UtcTime {
    /// Now.
    pub fn now() -> Self {
        UtcTime(OffsetDateTime::now_utc())
    }

    /// RFC 3339 text.
    pub fn rfc3339(&self) -> String {
        self.0
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| self.0.unix_timestamp().to_string())
    }
}

impl Serialize for UtcTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.rfc3339())
    }
}
