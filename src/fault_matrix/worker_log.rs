//! Reading a worker's log from a mark, for rows that strike when a request
//! reaches the worker.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// What Dynamo's runtime logs in a worker when a request reaches it.
pub(super) const REQUEST_ARRIVED: &str = "request received";

/// What `log` holds past byte `from` (empty when it cannot be read yet).
pub(super) fn since(log: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        if file.seek(SeekFrom::Start(from)).is_ok() {
            let _ = file.read_to_string(&mut text);
        }
    }
    text
}
