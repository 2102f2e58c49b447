//! The recovery journal at the head of a Guard pool group, as the harness
//! reaches it: a Guard service started with a journal small enough for a
//! case to fill, and the ring's cursors and frames read and torn in the
//! run's own pool file.
//!
//! KVCR 0.1.1's layout (`recovery_journal.py`, `memory.py`): the pool file
//! maps from offset 0; its first 4096 bytes are the journal header (an
//! 8-byte `invalid` flag at 0, the `published` cursor at 128, the
//! `consumed` cursor at 192, little-endian), then the ring, up to
//! `journal_bytes`. A frame is a 6-byte header (`<HHH`: frame size, record
//! type, key size), the key and the payload, zero-padded to 8 bytes; a
//! cursor counts bytes ever written, so a frame sits at `cursor % capacity`
//! and may wrap.
//!
//! A clean release leaves a handback region past the pool's own bytes, in
//! the same file: from the first page boundary after the grant, a 40-byte
//! header (`<32sQ`: a SHA-256 digest, the body's size) and the body; the
//! next claim replays it, then truncates the file back to where it starts.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde::Serialize;

use crate::proc::ProcessSpec;
use crate::telemetry::names::kvcr_cli::GUARD_MODULE;

/// A launch fault the harness applies itself: the stack's Guard service
/// runs with a recovery journal of [`SMALL_JOURNAL_BYTES`] and without
/// heartbeat promotion.
///
/// KVCR 0.1.1's journal is 100 MiB (`kvcr_service._DEFAULT_JOURNAL_BYTES`,
/// no command-line setting): at 24-32 bytes a frame a worker would have to
/// publish about four million frames before a stalled Guard's ring is
/// full. The service is started through `python -c` with that default
/// replaced (its `KVCR service ready` line logs the size it runs with), and
/// without `--heartbeat-timeout-ms`: a Guard stopped past the timeout would
/// otherwise fence its healthy primary the moment it resumes, before it
/// reads the heartbeats queued while it was stopped.
pub const SMALL_GUARD_JOURNAL: &str = "small_guard_journal";

/// The journal of [`SMALL_GUARD_JOURNAL`]: two pages, KVCR's smallest (it
/// must exceed its 4096-byte header and be page aligned), a ring of 4096
/// bytes.
pub const SMALL_JOURNAL_BYTES: u64 = 8192;

/// The journal header KVCR keeps in front of the ring.
pub const JOURNAL_HEADER_BYTES: u64 = 4096;
const INVALID_OFFSET: u64 = 0;
const PUBLISHED_OFFSET: u64 = 128;
const CONSUMED_OFFSET: u64 = 192;
/// A frame's header: size, record type, key size (`<HHH`).
const FRAME_HEADER_BYTES: usize = 6;
/// What a tear writes over a frame header: every field `0xffff`, so the
/// frame claims a 65535-byte key inside a 65535-byte frame, which KVCR's
/// reader refuses as `journal frame has an invalid key size` whatever its
/// checks' order.
const GARBAGE: [u8; FRAME_HEADER_BYTES] = [0xff; FRAME_HEADER_BYTES];

/// `spec` (the engine's Guard service) with [`SMALL_GUARD_JOURNAL`] applied.
pub fn with_small_journal(mut spec: ProcessSpec) -> ProcessSpec {
    let shim = format!(
        "import kvcr.kvcr_service as s; \
         s._DEFAULT_JOURNAL_BYTES = {SMALL_JOURNAL_BYTES}; \
         d = s._KVCRService.__init__.__defaults__; \
         s._KVCRService.__init__.__defaults__ = ({SMALL_JOURNAL_BYTES},) + d[1:]; \
         s.main()"
    );
    if let Some(i) = spec
        .args
        .windows(2)
        .position(|w| w[0] == "-m" && w[1] == GUARD_MODULE)
    {
        spec.args[i] = "-c".into();
        spec.args[i + 1] = shim;
    }
    if let Some(i) = spec.args.iter().position(|a| a == "--heartbeat-timeout-ms") {
        spec.args.drain(i..(i + 2).min(spec.args.len()));
    }
    spec
}

/// The journal header of a pool file as read now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RingCursors {
    pub invalid: bool,
    pub published: u64,
    pub consumed: u64,
}

impl RingCursors {
    /// Bytes published that the Guard has not read yet.
    pub fn pending(&self) -> u64 {
        self.published.saturating_sub(self.consumed)
    }
}

/// A frame header overwritten by [`tear_next_frame`], verified by reading
/// it back.
#[derive(Debug, Clone, Serialize)]
pub struct TornFrame {
    /// The cursors just before the write.
    pub before: RingCursors,
    /// Where in the pool file the frame header starts.
    pub file_offset: u64,
    /// The header's bytes before and after.
    pub was: Vec<u8>,
    pub now: Vec<u8>,
}

/// KVCR's handback region header: a 32-byte digest, then the body's size.
const HANDBACK_HEADER_BYTES: u64 = 40;
const HANDBACK_SIZE_OFFSET: u64 = 32;
/// Where a handback region may start: KVCR rounds the pool's end up to its
/// allocation granularity, a page here.
const PAGE_BYTES: u64 = 4096;

/// A handback region cut one byte short by [`tear_handback`], verified by
/// reading the file back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TornHandback {
    /// Where in the pool file the region starts.
    pub region_offset: u64,
    /// The region's size, as the Guard logged it and as found.
    pub region_bytes: u64,
    /// The body size its header declares (`region_bytes` less the header).
    pub declared_body_bytes: u64,
    /// The pool file's size before and after the cut.
    pub file_bytes_before: u64,
    pub file_bytes_after: u64,
}

/// Cuts the last byte off the handback region of `region_bytes` (the size
/// the Guard logged with `snapshot_written`) at the end of `pool`, so its
/// header declares one byte more than the file holds: what a host that
/// lost the region's tail (a crash before the pages reached the file, a
/// full disk) leaves. Refused unless the file ends in exactly that region:
/// a page-aligned start whose header declares the rest. Only the region's
/// last byte goes; the pool's own bytes are not touched.
pub fn tear_handback(pool: &Path, region_bytes: u64) -> Result<TornHandback, String> {
    let context = |e: std::io::Error| format!("{}: {e}", pool.display());
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(pool)
        .map_err(context)?;
    let file_bytes_before = file.metadata().map_err(context)?.len();
    let region_offset = file_bytes_before
        .checked_sub(region_bytes)
        .filter(|_| region_bytes > HANDBACK_HEADER_BYTES)
        .ok_or_else(|| {
            format!("a file of {file_bytes_before} bytes holds no handback region of {region_bytes} bytes")
        })?;
    if region_offset == 0 || region_offset % PAGE_BYTES != 0 {
        return Err(format!(
            "a region of {region_bytes} bytes at the end of {file_bytes_before} would start at {region_offset}, not past the pool on a page boundary: no handback region there"
        ));
    }
    let declared_body_bytes =
        read_u64(&mut file, region_offset + HANDBACK_SIZE_OFFSET).map_err(context)?;
    if declared_body_bytes + HANDBACK_HEADER_BYTES != region_bytes {
        return Err(format!(
            "the region's header declares a body of {declared_body_bytes} bytes, not the {} the Guard logged",
            region_bytes - HANDBACK_HEADER_BYTES
        ));
    }
    file.set_len(file_bytes_before - 1).map_err(context)?;
    let file_bytes_after = file.metadata().map_err(context)?.len();
    if file_bytes_after != file_bytes_before - 1 {
        return Err(format!(
            "the pool file is {file_bytes_after} bytes after the cut, not {}",
            file_bytes_before - 1
        ));
    }
    Ok(TornHandback {
        region_offset,
        region_bytes,
        declared_body_bytes,
        file_bytes_before,
        file_bytes_after,
    })
}

fn read_u64(file: &mut std::fs::File, offset: u64) -> std::io::Result<u64> {
    let mut bytes = [0u8; 8];
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}

/// The cursors of the journal at the head of `pool`.
pub fn read_cursors(pool: &Path) -> std::io::Result<RingCursors> {
    let mut file = std::fs::File::open(pool)?;
    Ok(RingCursors {
        invalid: read_u64(&mut file, INVALID_OFFSET)? != 0,
        published: read_u64(&mut file, PUBLISHED_OFFSET)?,
        consumed: read_u64(&mut file, CONSUMED_OFFSET)?,
    })
}

/// Where in the pool file each of the `len` bytes from ring position
/// `position` lies (a frame may wrap to the ring's start).
fn ring_offsets(position: u64, len: usize, capacity: u64) -> Vec<u64> {
    (0..len as u64)
        .map(|i| JOURNAL_HEADER_BYTES + (position + i) % capacity)
        .collect()
}

/// Overwrites the header of the next frame the Guard will read (at the
/// `consumed` cursor) with garbage, in the journal of `journal_bytes` at
/// the head of `pool`. Refused unless a frame is pending there (published
/// and not yet consumed: the Guard must be stopped, or it reads the frame
/// first): garbage anywhere else in the ring is free space the reader never
/// looks at, or is overwritten by the worker's next frame. Only the ring's
/// bytes are written.
pub fn tear_next_frame(pool: &Path, journal_bytes: u64) -> Result<TornFrame, String> {
    let capacity = journal_bytes
        .checked_sub(JOURNAL_HEADER_BYTES)
        .filter(|c| *c > 0)
        .ok_or_else(|| format!("a journal of {journal_bytes} bytes has no ring"))?;
    let context = |e: std::io::Error| format!("{}: {e}", pool.display());
    let before = read_cursors(pool).map_err(context)?;
    if before.invalid {
        return Err(format!("the journal is already invalid: {before:?}"));
    }
    if before.pending() < FRAME_HEADER_BYTES as u64 {
        return Err(format!(
            "no frame pending (published {} consumed {}): nothing the Guard will read",
            before.published, before.consumed
        ));
    }
    let offsets = ring_offsets(before.consumed % capacity, FRAME_HEADER_BYTES, capacity);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(pool)
        .map_err(context)?;
    let mut was = Vec::new();
    for (offset, garbage) in offsets.iter().zip(GARBAGE) {
        let mut byte = [0u8];
        file.seek(SeekFrom::Start(*offset)).map_err(context)?;
        file.read_exact(&mut byte).map_err(context)?;
        was.push(byte[0]);
        file.seek(SeekFrom::Start(*offset)).map_err(context)?;
        file.write_all(&[garbage]).map_err(context)?;
    }
    let mut now = Vec::new();
    for offset in &offsets {
        let mut byte = [0u8];
        file.seek(SeekFrom::Start(*offset)).map_err(context)?;
        file.read_exact(&mut byte).map_err(context)?;
        now.push(byte[0]);
    }
    if now != GARBAGE {
        return Err(format!("the frame header reads {now:?} after the write"));
    }
    let after = read_cursors(pool).map_err(context)?;
    if after.consumed != before.consumed {
        return Err(format!(
            "the Guard read on while the frame was torn (consumed {} -> {}): is it stopped?",
            before.consumed, after.consumed
        ));
    }
    Ok(TornFrame {
        before,
        file_offset: offsets[0],
        was,
        now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn pool_file(dir: &Path, journal_bytes: u64, published: u64, consumed: u64) -> PathBuf {
        let path = dir.join("kvcr-pool_0-x");
        let mut bytes = vec![0u8; journal_bytes as usize + 4096];
        bytes[128..136].copy_from_slice(&published.to_le_bytes());
        bytes[192..200].copy_from_slice(&consumed.to_le_bytes());
        // Past the journal: a pool page that must never be touched.
        for b in &mut bytes[journal_bytes as usize..] {
            *b = 0x5a;
        }
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn the_small_journal_replaces_the_module_and_drops_the_heartbeat() {
        let spec = ProcessSpec::new("guard", "/py", "/l")
            .args(["-m", GUARD_MODULE, "--pool-dir", "/p"])
            .args(["--heartbeat-timeout-ms", "5000", "--log-level", "DEBUG"]);
        let spec = with_small_journal(spec);
        assert_eq!(spec.args[0], "-c");
        assert!(spec.args[1].contains("_DEFAULT_JOURNAL_BYTES = 8192"));
        assert!(spec.args[1].ends_with("s.main()"));
        assert_eq!(
            &spec.args[2..],
            ["--pool-dir", "/p", "--log-level", "DEBUG"]
        );
    }

    #[test]
    fn a_pending_frame_is_torn_inside_the_ring_and_verified() {
        let tmp = tempfile::tempdir().unwrap();
        // Ring of 4096 bytes; the Guard consumed 4096 + 4088: the next
        // frame's header is in the ring's last 8 bytes.
        let pool = pool_file(tmp.path(), 8192, 4096 + 4088 + 32, 4096 + 4088);
        let torn = tear_next_frame(&pool, 8192).unwrap();
        assert_eq!(torn.file_offset, 4096 + 4088);
        assert_eq!(torn.now, GARBAGE);
        let bytes = std::fs::read(&pool).unwrap();
        assert_eq!(&bytes[4096 + 4088..4096 + 4094], &[0xff; 6]);
        assert_eq!(&bytes[4096 + 4094..8192], &[0, 0]);
        assert!(
            bytes[8192..].iter().all(|b| *b == 0x5a),
            "nothing past the journal"
        );
        assert!(bytes[..4096].iter().skip(200).all(|b| *b == 0), "header");
    }

    #[test]
    fn a_wrapping_header_continues_at_the_ring_start() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = pool_file(tmp.path(), 8192, 4092 + 32, 4092);
        tear_next_frame(&pool, 8192).unwrap();
        let bytes = std::fs::read(&pool).unwrap();
        assert_eq!(&bytes[4096 + 4092..8192], &[0xff; 4]);
        assert_eq!(&bytes[4096..4098], &[0xff; 2]);
    }

    /// A pool file of `pool_bytes` (0x5a), then a handback region whose
    /// header declares `body` bytes and which holds them.
    fn pool_with_handback(dir: &Path, pool_bytes: usize, body: u64) -> PathBuf {
        pool_with_region(dir, pool_bytes, body, body)
    }

    /// As [`pool_with_handback`], the header declaring `declared` bytes.
    fn pool_with_region(dir: &Path, pool_bytes: usize, declared: u64, body: u64) -> PathBuf {
        let path = dir.join(format!("kvcr-pool_0-{declared}-{body}"));
        let mut bytes = vec![0x5au8; pool_bytes];
        bytes.extend([0x11u8; 32]);
        bytes.extend(declared.to_le_bytes());
        bytes.extend(vec![0x22u8; body as usize]);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn a_handback_region_loses_its_last_byte_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = pool_with_handback(tmp.path(), 3 * 4096, 168);
        let torn = tear_handback(&pool, 208).unwrap();
        assert_eq!(
            torn,
            TornHandback {
                region_offset: 3 * 4096,
                region_bytes: 208,
                declared_body_bytes: 168,
                file_bytes_before: 3 * 4096 + 208,
                file_bytes_after: 3 * 4096 + 207,
            }
        );
        let bytes = std::fs::read(&pool).unwrap();
        assert_eq!(bytes.len(), 3 * 4096 + 207);
        assert!(bytes[..3 * 4096].iter().all(|b| *b == 0x5a), "the pool");
        assert!(
            bytes[3 * 4096 + 40..].iter().all(|b| *b == 0x22),
            "the body"
        );
    }

    #[test]
    fn a_file_without_that_region_is_refused_and_left_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = pool_with_handback(tmp.path(), 2 * 4096, 168);
        let before = std::fs::read(&pool).unwrap();
        // Another size than the Guard logged: the start is off the page.
        let err = tear_handback(&pool, 200).unwrap_err();
        assert!(err.contains("page boundary"), "{err}");
        // A page-aligned region whose header declares another body.
        let other = pool_with_region(tmp.path(), 2 * 4096, 100, 4096 - 40);
        let other_before = std::fs::read(&other).unwrap();
        let err = tear_handback(&other, 4096).unwrap_err();
        assert!(err.contains("declares a body of 100 bytes"), "{err}");
        assert_eq!(std::fs::read(&other).unwrap(), other_before);
        // No region at all (the file is just the pool).
        let bare = tmp.path().join("bare");
        std::fs::write(&bare, vec![0u8; 4096]).unwrap();
        assert!(tear_handback(&bare, 4096).is_err());
        assert!(tear_handback(&bare, 8192).is_err());
        assert_eq!(std::fs::read(&pool).unwrap(), before);
    }

    #[test]
    fn nothing_pending_is_refused_and_nothing_written() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = pool_file(tmp.path(), 8192, 64, 64);
        let before = std::fs::read(&pool).unwrap();
        let err = tear_next_frame(&pool, 8192).unwrap_err();
        assert!(err.contains("no frame pending"), "{err}");
        assert_eq!(std::fs::read(&pool).unwrap(), before);
    }
}
