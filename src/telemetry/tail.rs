//! Tailing a growing log file from a byte offset, whole lines only.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Failure to read a tailed log.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    /// The file could not be opened or read.
    #[error("cannot read log {path}: {source}")]
    Io {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file shrank below the offset already read: it was truncated or
    /// replaced, so events since the offset may be lost.
    #[error("log {path} shrank to {len} bytes below the offset {offset} already read: it was truncated or replaced; restart the reader")]
    Truncated {
        /// The log file.
        path: PathBuf,
        /// Offset already consumed.
        offset: u64,
        /// Current length.
        len: u64,
    },
}

/// One complete line and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailLine {
    /// Byte offset of the line's first byte in the file.
    pub offset: u64,
    /// The line without its newline (invalid UTF-8 replaced).
    pub text: String,
}

/// Reads the lines appended to a file since the last call. A trailing line
/// without its newline is held back until it is complete. A missing file
/// reads as empty (the process may not have written yet).
#[derive(Debug, Clone)]
pub struct LogTail {
    path: PathBuf,
    /// Offset of the first byte not yet consumed as part of a whole line.
    offset: u64,
}

impl LogTail {
    /// Tails `path` from byte `offset`.
    pub fn from_offset(path: impl Into<PathBuf>, offset: u64) -> Self {
        LogTail {
            path: path.into(),
            offset,
        }
    }

    /// Tails `path` from its current end (a missing file: from 0).
    pub fn from_end(path: impl Into<PathBuf>) -> Result<Self, TailError> {
        let path = path.into();
        let len = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => return Err(TailError::Io { path, source }),
        };
        Ok(LogTail { path, offset: len })
    }

    /// The file being tailed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Offset just past the last whole line returned.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The whole lines appended since the last call.
    pub fn read_lines(&mut self) -> Result<Vec<TailLine>, TailError> {
        let io = |source| TailError::Io {
            path: self.path.clone(),
            source,
        };
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(e)),
        };
        let len = file.metadata().map_err(io)?.len();
        if len < self.offset {
            return Err(TailError::Truncated {
                path: self.path.clone(),
                offset: self.offset,
                len,
            });
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut buf = Vec::new();
        file.take(len - self.offset)
            .read_to_end(&mut buf)
            .map_err(io)?;
        let mut lines = Vec::new();
        let mut start = 0usize;
        for (i, b) in buf.iter().enumerate() {
            if *b == b'\n' {
                let raw = &buf[start..i];
                let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
                lines.push(TailLine {
                    offset: self.offset + start as u64,
                    text: String::from_utf8_lossy(raw).into_owned(),
                });
                start = i + 1;
            }
        }
        self.offset += start as u64;
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn holds_back_partial_lines_and_detects_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let mut tail = LogTail::from_offset(&path, 0);
        assert!(
            tail.read_lines().unwrap().is_empty(),
            "missing file reads empty"
        );
        let mut f = File::create(&path).unwrap();
        f.write_all(b"one\ntw").unwrap();
        let l = tail.read_lines().unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].text, "one");
        f.write_all(b"o\r\nthree\n").unwrap();
        let l = tail.read_lines().unwrap();
        assert_eq!(
            l,
            vec![
                TailLine {
                    offset: 4,
                    text: "two".into()
                },
                TailLine {
                    offset: 9,
                    text: "three".into()
                }
            ]
        );
        assert_eq!(tail.offset(), 15);
        let end = LogTail::from_end(&path).unwrap();
        assert_eq!(end.offset(), 15);
        File::create(&path).unwrap();
        assert!(matches!(
            tail.read_lines(),
            Err(TailError::Truncated { .. })
        ));
    }
}
