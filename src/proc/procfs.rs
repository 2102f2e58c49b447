//! Facts about processes and sockets read from `/proc`, used to verify faults
//! (a pid gone, a process stopped, a port still listening) without touching them.

use std::fs;

/// The scheduler state letter of `pid` (`R`, `S`, `T`, `Z`, ...), or `None`
/// when no such process exists.
pub fn state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: the state is
    // the first field after the last ')'.
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().next()?.chars().next()
}

/// True while `pid` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    matches!(state(pid), Some(s) if s != 'Z' && s != 'X')
}

/// True when some socket of this network namespace is in LISTEN on TCP `port`.
pub fn is_listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        fs::read_to_string(table)
            .map(|text| listening_ports(&text).any(|p| p == port))
            .unwrap_or(false)
    })
}

/// Local ports in state LISTEN (`0A`) in a `/proc/net/tcp` table.
fn listening_ports(table: &str) -> impl Iterator<Item = u16> + '_ {
    table.lines().skip(1).filter_map(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1)?;
        let state = fields.nth(1)?;
        if state != "0A" {
            return None;
        }
        u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()
    })
}

/// TCP ports in LISTEN on sockets that one of `pids` holds open, read from
/// the first pid's network namespace (`/proc/<pid>/net/tcp`), so it also
/// works for a process inside a namespace of its own.
pub fn listening_ports_of(pids: &[u32]) -> Vec<u16> {
    let inodes: Vec<u64> = pids.iter().flat_map(|pid| socket_inodes(*pid)).collect();
    let Some(first) = pids.first() else {
        return Vec::new();
    };
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| fs::read_to_string(format!("/proc/{first}/net/{t}")).ok())
        .flat_map(|table| {
            listen_rows(&table)
                .filter(|(_, inode)| inodes.contains(inode))
                .map(|(port, _)| port)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Inodes of the sockets `pid` holds (`/proc/<pid>/fd/* -> socket:[N]`).
fn socket_inodes(pid: u32) -> Vec<u64> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|fd| fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let text = target.to_str()?;
            text.strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// `(port, inode)` of every LISTEN row of a `/proc/net/tcp` table.
fn listen_rows(table: &str) -> impl Iterator<Item = (u16, u64)> + '_ {
    table.lines().skip(1).filter_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(3) != Some(&"0A") {
            return None;
        }
        let port = u16::from_str_radix(fields.get(1)?.rsplit_once(':')?.1, 16).ok()?;
        Some((port, fields.get(9)?.parse().ok()?))
    })
}

/// Files directly in `/dev/shm` that one of `pids` maps or holds open:
/// what a SIGKILLed engine would leave behind (`psm_*`, `sem.mp-*`,
/// `vllm_offload_*.mmap`). Subdirectories (a run's own scratch, the Guard's
/// pools) are not included.
///
/// A named POSIX semaphore is mapped under the name glibc created it with
/// and then unlinked (`/dev/shm/sem.XXXXXX (deleted)`) and lives on under
/// its linked name (`sem.mp-…`): such files are found by inode.
pub fn shm_files_of(pids: &[u32]) -> Vec<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let shm = std::path::Path::new("/dev/shm");
    let mut found: Vec<std::path::PathBuf> = Vec::new();
    // (device, inode) of deleted mappings: a node's private /dev/shm is
    // another tmpfs, whose inode numbers may repeat the host's.
    let mut deleted: Vec<(u64, u64)> = Vec::new();
    for pid in pids {
        let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let mapped = maps.lines().filter_map(|line| {
            let mut fields = line.split_whitespace().skip(3);
            let device = parse_device(fields.next()?)?;
            let inode = fields.next()?.parse::<u64>().ok()?;
            let path = std::path::PathBuf::from(fields.next()?);
            if fields.next() == Some("(deleted)") {
                deleted.push((device, inode));
                return None;
            }
            Some(path)
        });
        let mapped: Vec<_> = mapped.collect();
        let open = fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| {
                fds.filter_map(|fd| fs::read_link(fd.ok()?.path()).ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for path in mapped.into_iter().chain(open) {
            if path.parent() == Some(shm) && !found.contains(&path) {
                found.push(path);
            }
        }
    }
    if !deleted.is_empty() {
        let linked = fs::read_dir(shm).into_iter().flatten().filter_map(|entry| {
            let entry = entry.ok()?;
            let meta = entry.metadata().ok()?;
            (meta.is_file() && deleted.contains(&(meta.dev(), meta.ino()))).then(|| entry.path())
        });
        for path in linked {
            if !found.contains(&path) {
                found.push(path);
            }
        }
    }
    found
}

/// A `/proc/<pid>/maps` device (`00:1b`, major:minor in hex) as `st_dev`.
fn parse_device(field: &str) -> Option<u64> {
    let (major, minor) = field.split_once(':')?;
    let (major, minor) = (
        u64::from_str_radix(major, 16).ok()?,
        u64::from_str_radix(minor, 16).ok()?,
    );
    Some(nix::libc::makedev(major as u32, minor as u32))
}

/// Where `pid`'s main thread sleeps in the kernel (`/proc/<pid>/wchan`,
/// e.g. `poll_schedule_timeout.constprop.0`, `futex_wait_queue`); `None`
/// when it is gone or the kernel does not say.
pub fn wchan(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/wchan")).ok()?;
    let text = text.trim();
    (!text.is_empty() && text != "0").then(|| text.to_string())
}

/// `pid` and every process below it, parents before children.
pub fn with_descendants(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let below = children(all[i]);
        all.extend(below);
        i += 1;
    }
    all
}

/// Direct children of `pid` (from `/proc/<pid>/task/*/children`).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// `NSpid` of `pid` (seen from this namespace): its pid in each PID
/// namespace it belongs to, outermost first; the last is the pid the
/// process itself sees (`os.getpid()` inside a namespace node).
pub fn ns_pids(pid: u32) -> Option<Vec<u32>> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_ns_pids(&status)
}

fn parse_ns_pids(status: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().map(|p| p.parse().ok()).collect()
}

/// The host pid of the process that calls itself `inner_pid` inside the PID
/// namespace of `member` (any host pid in that namespace, e.g. its first
/// process). A pid a process reports about itself from inside a namespace
/// (a ready file, a log line) means nothing on the host until mapped here.
pub fn host_pid(member: u32, inner_pid: u32) -> Option<u32> {
    let namespace = fs::read_link(format!("/proc/{member}/ns/pid")).ok()?;
    let entries = fs::read_dir("/proc").ok()?;
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            fs::read_link(format!("/proc/{pid}/ns/pid")).ok().as_ref() == Some(&namespace)
                && ns_pids(*pid).and_then(|n| n.last().copied()) == Some(inner_pid)
        })
}

/// Resident set size of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Summed resident set size of every process in group `pgid`: what a
/// component costs when it is more than one process (vLLM's engine core, a
/// worker on a namespace node behind its `nsenter`). Pages the members
/// share are counted once per member.
pub fn group_rss_kib(pgid: u32) -> Option<u64> {
    let members = group_members(pgid);
    if members.is_empty() {
        return None;
    }
    Some(members.into_iter().filter_map(rss_kib).sum())
}

/// Pids of every live process whose process group is `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| process_group(*pid) == Some(pgid) && is_alive(*pid))
        .collect()
}

fn process_group(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command: state, ppid, pgrp, ...
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// When `pid` started, in clock ticks since boot (`/proc/<pid>/stat` field
/// 22): with the pid, it names one process even after the pid is reused.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    // Fields after the command start at field 3 (state): field 22 is the 20th.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// This process's effective capabilities (`CapEff` of `/proc/self/status`,
/// a bit mask of `CAP_*` numbers), `Err` when they cannot be read.
pub fn effective_capabilities() -> Result<u64, String> {
    let status = fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    Ok(status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0))
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
pub fn load_average() -> Option<[f64; 3]> {
    parse_load_average(&fs::read_to_string("/proc/loadavg").ok()?)
}

fn parse_load_average(text: &str) -> Option<[f64; 3]> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// This process's PID namespace (`pid:[4026531836]`): two processes see
/// each other's pids only when it is the same.
pub fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.display().to_string())
}

/// The value of variable `name` in the environment `pid` started with
/// (`/proc/<pid>/environ`), or `None` when it has none or cannot be read.
pub fn environ_var(pid: u32, name: &str) -> Option<String> {
    let bytes = fs::read(format!("/proc/{pid}/environ")).ok()?;
    parse_environ_var(&bytes, name)
}

fn parse_environ_var(environ: &[u8], name: &str) -> Option<String> {
    environ.split(|b| *b == 0).find_map(|entry| {
        let entry = std::str::from_utf8(entry).ok()?;
        let (key, value) = entry.split_once('=')?;
        (key == name).then(|| value.to_string())
    })
}

/// True when `pid` has a handler of its own for signal number `signo`
/// (`SigCgt` of `/proc/<pid>/status`): the signal will not end it.
pub fn catches_signal(pid: u32, signo: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| caught_mask(&status))
        .is_some_and(|mask| (1..=64).contains(&signo) && mask & (1u64 << (signo - 1)) != 0)
}

fn caught_mask(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_variable_and_a_caught_signal_are_read() {
        let environ = b"A=1\0KVCR_E2E_COVERAGE=/run/x=y\0B=\0";
        assert_eq!(
            parse_environ_var(environ, "KVCR_E2E_COVERAGE").as_deref(),
            Some("/run/x=y")
        );
        assert_eq!(parse_environ_var(environ, "B").as_deref(), Some(""));
        assert_eq!(parse_environ_var(environ, "KVCR"), None);
        // SIGUSR2 (12) is bit 11, SIGTERM (15) bit 14.
        let status = "Name:\tpython\nSigCgt:\t0000000000004800\n";
        let mask = caught_mask(status).expect("mask");
        assert_eq!(mask & (1 << 11), 1 << 11);
        assert_eq!(caught_mask("Name:\tx\n"), None);
        // This test process catches no SIGUSR2.
        assert!(!catches_signal(std::process::id(), 12));
        assert!(!catches_signal(std::process::id(), 0));
        assert_eq!(environ_var(u32::MAX, "PATH"), None);
    }

    #[test]
    fn start_time_and_load_average_are_parsed() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(stat), Some(987_654));
        assert_eq!(parse_start_time("4242 (x) S 1"), None);
        let own = start_time(std::process::id()).expect("this process has a start time");
        assert_eq!(start_time(std::process::id()), Some(own), "stable");
        assert_eq!(
            parse_load_average("0.52 1.10 2.00 2/345 6789\n"),
            Some([0.52, 1.10, 2.00])
        );
        assert_eq!(parse_load_average("0.52 x 2.00"), None);
        assert!(load_average().is_some());
    }

    #[test]
    fn ns_pids_are_read_outermost_first() {
        let status = "Name:\tpython\nTgid:\t4242\nNSpid:\t4242\t7\nPPid:\t1\n";
        assert_eq!(parse_ns_pids(status), Some(vec![4242, 7]));
        assert_eq!(parse_ns_pids("Name:\tx\n"), None);
        assert_eq!(
            parse_ns_pids("NSpid:\t12\tx\n"),
            None,
            "a garbled line is no answer"
        );
        let own = ns_pids(std::process::id()).expect("this process has an NSpid line");
        assert_eq!(own.first(), Some(&std::process::id()));
        assert_eq!(
            host_pid(std::process::id(), std::process::id()),
            Some(std::process::id())
        );
    }

    #[test]
    fn reads_own_state_and_rss() {
        let me = std::process::id();
        assert!(is_alive(me));
        assert!(rss_kib(me).unwrap_or(0) > 0);
        let group = nix::unistd::getpgrp().as_raw() as u32;
        assert!(group_rss_kib(group).unwrap_or(0) >= rss_kib(me).unwrap_or(0));
        assert!(!is_alive(u32::MAX - 1));
    }

    #[test]
    fn finds_listeners() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(is_listening(port));
        drop(listener);
        // A child forked by a parallel test may hold the socket until it execs.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while is_listening(port) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!is_listening(port));
    }

    #[test]
    fn finds_the_listeners_a_process_holds() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listening_ports_of(&[std::process::id()]).contains(&port));
        assert!(!listening_ports_of(&[1]).contains(&port));
    }

    #[test]
    fn finds_shared_memory_files_a_process_holds() {
        let path =
            std::path::PathBuf::from(format!("/dev/shm/kvcr-e2e-test-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        assert!(shm_files_of(&[std::process::id()]).contains(&path));
        drop(file);
        std::fs::remove_file(&path).unwrap();
        assert!(!shm_files_of(&[std::process::id()]).contains(&path));
    }

    #[test]
    fn finds_a_named_semaphore_by_the_inode_of_its_unlinked_mapping() {
        // What glibc's sem_open does: map a temporary file, link it under
        // the semaphore's name, unlink the temporary name.
        use std::os::unix::fs::FileExt;
        let pid = std::process::id();
        let temp = std::path::PathBuf::from(format!("/dev/shm/sem.kvcr-e2e-tmp-{pid}"));
        let named = std::path::PathBuf::from(format!("/dev/shm/sem.kvcr-e2e-test-{pid}"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)
            .unwrap();
        file.write_at(&[0; 32], 0).unwrap();
        let map = memmap_shared(&file);
        std::fs::hard_link(&temp, &named).unwrap();
        std::fs::remove_file(&temp).unwrap();
        let found = shm_files_of(&[pid]);
        std::fs::remove_file(&named).unwrap();
        drop(map);
        assert!(found.contains(&named), "{found:?}");
        assert!(!found.contains(&temp));
    }

    /// A shared mapping of `file` (32 bytes), unmapped on drop.
    fn memmap_shared(file: &std::fs::File) -> impl Drop {
        struct Mapping(*mut std::ffi::c_void);
        impl Drop for Mapping {
            fn drop(&mut self) {
                // SAFETY: the pointer came from the mmap below, 32 bytes long.
                unsafe { nix::libc::munmap(self.0, 32) };
            }
        }
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of an open file; nothing aliases it.
        let ptr = unsafe {
            nix::libc::mmap(
                std::ptr::null_mut(),
                32,
                nix::libc::PROT_READ | nix::libc::PROT_WRITE,
                nix::libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, nix::libc::MAP_FAILED);
        Mapping(ptr)
    }

    #[test]
    fn parses_listen_rows_with_their_inodes() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1\n\
             1: 0100007F:1F91 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4243 1\n";
        assert_eq!(listen_rows(table).collect::<Vec<_>>(), vec![(0x1F90, 4242)]);
    }

    #[test]
    fn parses_listen_rows_only() {
        let table = "  sl  local_address rem_address   st\n\
             0: 0100007F:1F90 00000000:0000 0A 0\n\
             1: 0100007F:1F91 0100007F:D431 01 0\n";
        assert_eq!(listening_ports(table).collect::<Vec<_>>(), vec![0x1F90]);
    }
}
