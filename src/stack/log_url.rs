//! Component logs over HTTP, for a run attached to a stack whose files it
//! cannot read (another PID namespace, container or host). The stack's
//! owner serves its logs directory (`GET /logs/<file>?from=<byte>`); the
//! attaching run mirrors each log it reads into a local file, so the log
//! readers (Guard events, interval lines) work unchanged.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a mirror asks for new bytes.
const MIRROR_EVERY: Duration = Duration::from_millis(100);

/// Serves the files of `dir` on `host` (a kernel-chosen port) from a thread
/// of its own for the life of this process; returns the base URL,
/// `http://host:port/logs`.
pub fn serve(dir: PathBuf, host: &str) -> io::Result<String> {
    let listener = TcpListener::bind((host, 0))?;
    let url = format!("http://{host}:{}/logs", listener.local_addr()?.port());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let dir = dir.clone();
            std::thread::spawn(move || {
                if let Err(e) = answer(stream, &dir) {
                    tracing::debug!("log server: {e}");
                }
            });
        }
    });
    Ok(url)
}

/// One request: `GET /logs/<file>?from=<n>` answers the file's bytes from
/// `n` on; anything else, or a name that is not a plain file name, 404.
fn answer(mut stream: TcpStream, dir: &Path) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&request);
    let target = line
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("GET /logs/"))
        .and_then(|l| l.split(' ').next())
        .unwrap_or("");
    let (name, from) = match target.split_once("?from=") {
        Some((name, from)) => (name, from.parse::<u64>().unwrap_or(0)),
        None => (target, 0),
    };
    let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    let body = plain
        .then(|| std::fs::File::open(dir.join(name)))
        .and_then(Result::ok)
        .map(|mut file| {
            file.seek(SeekFrom::Start(from))?;
            let mut body = Vec::new();
            file.read_to_end(&mut body)?;
            Ok::<_, io::Error>(body)
        })
        .transpose()?;
    match body {
        Some(body) => {
            write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )?;
            stream.write_all(&body)
        }
        None => stream.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
    }
}

/// The bytes of `file` under `base` (a [`serve`] URL) from byte `from` on.
pub fn fetch(base: &str, file: &str, from: u64) -> io::Result<Vec<u8>> {
    let rest = base.strip_prefix("http://").unwrap_or(base);
    let (authority, path) = rest.split_once('/').unwrap_or((rest, "logs"));
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET /{path}/{file}?from={from} HTTP/1.0\r\nHost: {authority}\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other(format!("{base}/{file}: no HTTP response")))?;
    let head = String::from_utf8_lossy(&response[..split]);
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        let status = head.lines().next().unwrap_or("").to_string();
        return Err(io::Error::other(format!("{base}/{file}: {status}")));
    }
    Ok(response[split + 4..].to_vec())
}

/// Copies `file` under `base` into `local` once now, then keeps appending
/// what the stack logs from a thread of its own (for the life of this
/// process). The first copy's error is returned; later ones are retried.
pub fn mirror(base: &str, file: &str, local: &Path) -> io::Result<()> {
    // One mirror per local file: two would append the same bytes twice.
    static MIRRORED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut mirrored = MIRRORED.lock().unwrap_or_else(|p| p.into_inner());
    if mirrored.iter().any(|m| m == local) {
        return Ok(());
    }
    if let Some(dir) = local.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(local, b"")?;
    sync(base, file, local)?;
    mirrored.push(local.to_path_buf());
    let (base, file, local) = (base.to_string(), file.to_string(), local.to_path_buf());
    std::thread::spawn(move || loop {
        std::thread::sleep(MIRROR_EVERY);
        let _ = sync(&base, &file, &local);
    });
    Ok(())
}

fn sync(base: &str, file: &str, local: &Path) -> io::Result<()> {
    let have = std::fs::metadata(local)?.len();
    let new = fetch(base, file, have)?;
    if !new.is_empty() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(local)?
            .write_all(&new)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_served_from_an_offset_and_mirrored() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("guard.log"), "one\ntwo\n").expect("write");
        let base = serve(dir.path().to_path_buf(), "127.0.0.1").expect("serves");
        assert_eq!(fetch(&base, "guard.log", 4).expect("fetch"), b"two\n");
        assert!(fetch(&base, "../etc/passwd", 0).is_err());
        assert!(fetch(&base, "missing.log", 0).is_err());
        let local = dir.path().join("mirror/guard.log");
        mirror(&base, "guard.log", &local).expect("mirrors");
        mirror(&base, "guard.log", &local).expect("a second mirror is the first");
        assert_eq!(std::fs::read_to_string(&local).expect("read"), "one\ntwo\n");
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("guard.log"))
            .and_then(|mut f| f.write_all(b"three\n"))
            .expect("append");
        let seen = crate::wait::until(
            "the mirror to take the new line",
            Duration::from_secs(5),
            Duration::from_millis(20),
            || match std::fs::read_to_string(&local) {
                Ok(text) if text.ends_with("three\n") => crate::wait::Poll::Ready(()),
                Ok(text) => crate::wait::Poll::Pending(text),
                Err(e) => crate::wait::Poll::Abort(e.to_string()),
            },
        );
        assert!(seen.is_ok(), "{seen:?}");
    }
}
