//! The packet delayer behind a degraded link's "delay with jitter": this
//! kernel has no `netem`, so an iptables `NFQUEUE` rule hands the link's
//! packets to this program, which holds each packet's verdict for
//! `delay ± jitter` (uniform) and then accepts it.
//!
//! It runs as the hidden command `kvcr-e2e net-delay --queue N --delay-ms D
//! --jitter-ms J --stats FILE` inside the namespace whose rules queue to it
//! (started through the node's launcher). It binds the queue, says so on
//! stdout ([`BOUND_LINE`]), and keeps its counts in the stats file
//! ([`DelayStats`], JSON, replaced atomically at most every
//! [`STATS_EVERY`] and at exit). On SIGTERM it accepts every packet it
//! still holds, writes its stats and exits 0.
//!
//! Only packet metadata is copied to user space; the queue is fail-open (a
//! full queue passes packets rather than dropping them), and the rules use
//! `--queue-bypass`, so a delayer that is gone turns the delay off instead
//! of cutting the link (the harness's checks then see no packet held).

use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::stats::SplitMix64;

/// What the delayer prints once its queue is bound.
pub const BOUND_LINE: &str = "net-delay: queue bound";
/// How often at most the stats file is rewritten while packets flow.
pub const STATS_EVERY: Duration = Duration::from_millis(100);
/// Packets the kernel keeps queued for the delayer before it fails open.
const QUEUE_MAX_LEN: u32 = 8192;
/// The longest the loop sleeps while it holds packets: how late a new
/// packet may be picked up.
const TICK: Duration = Duration::from_millis(1);

/// The delayer's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayArgs {
    pub queue: u16,
    pub delay_ms: u32,
    pub jitter_ms: u32,
    pub stats: PathBuf,
    pub seed: u64,
}

impl DelayArgs {
    /// Parses `--queue N --delay-ms D --jitter-ms J --stats FILE [--seed S]`.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut queue = None;
        let mut delay_ms = None;
        let mut jitter_ms = 0;
        let mut stats = None;
        let mut seed = 14;
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let value = it
                .next()
                .ok_or_else(|| format!("{flag} needs a value"))?
                .as_str();
            let number = |what: &str| -> Result<u64, String> {
                value
                    .parse::<u64>()
                    .map_err(|e| format!("{what} {value:?}: {e}"))
            };
            match flag.as_str() {
                "--queue" => queue = Some(number("--queue")? as u16),
                "--delay-ms" => delay_ms = Some(number("--delay-ms")? as u32),
                "--jitter-ms" => jitter_ms = number("--jitter-ms")? as u32,
                "--stats" => stats = Some(PathBuf::from(value)),
                "--seed" => seed = number("--seed")?,
                other => return Err(format!("unknown flag {other}")),
            }
        }
        let delay_ms = delay_ms.ok_or("--delay-ms is required")?;
        if jitter_ms > delay_ms {
            return Err(format!(
                "--jitter-ms {jitter_ms} exceeds --delay-ms {delay_ms}: a packet cannot be held less than 0 ms"
            ));
        }
        Ok(Self {
            queue: queue.ok_or("--queue is required")?,
            delay_ms,
            jitter_ms,
            stats: stats.ok_or("--stats is required")?,
            seed,
        })
    }

    /// The arguments as the command line takes them (after `net-delay`).
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--queue".into(),
            self.queue.to_string(),
            "--delay-ms".into(),
            self.delay_ms.to_string(),
            "--jitter-ms".into(),
            self.jitter_ms.to_string(),
            "--stats".into(),
            self.stats.display().to_string(),
            "--seed".into(),
            self.seed.to_string(),
        ]
    }
}

/// How long each packet is held: uniform in `delay ± jitter`, from a
/// seeded generator (a run's holds are reproducible from its seed).
pub struct HoldTimes {
    delay: Duration,
    jitter: Duration,
    rng: SplitMix64,
}

impl HoldTimes {
    pub fn new(delay_ms: u32, jitter_ms: u32, seed: u64) -> Self {
        Self {
            delay: Duration::from_millis(u64::from(delay_ms)),
            jitter: Duration::from_millis(u64::from(jitter_ms.min(delay_ms))),
            rng: SplitMix64::new(seed),
        }
    }

    /// The next packet's hold.
    pub fn next_hold(&mut self) -> Duration {
        let low = self.delay - self.jitter;
        let span = (self.jitter * 2).as_micros() as f64;
        low + Duration::from_micros((self.rng.unit_open() * span) as u64)
    }
}

/// Items each due at an instant, released in the order they fall due
/// (not the order they came: with jitter, packets overtake each other, as
/// on a real link with varying delay).
pub struct DelayLine<T> {
    heap: BinaryHeap<Due<T>>,
    next_seq: u64,
}

struct Due<T> {
    at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Due<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Due<T> {}
impl<T> PartialOrd for Due<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Due<T> {
    /// Reversed: the heap's top is the earliest due.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

impl<T> Default for DelayLine<T> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<T> DelayLine<T> {
    /// Holds `item` until `at`.
    pub fn push(&mut self, at: Instant, item: T) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Due { at, seq, item });
    }

    /// The items due at `now`, earliest first.
    pub fn pop_due(&mut self, now: Instant) -> Vec<T> {
        let mut due = Vec::new();
        while self.heap.peek().is_some_and(|d| d.at <= now) {
            if let Some(d) = self.heap.pop() {
                due.push(d.item);
            }
        }
        due
    }

    /// Every item still held, earliest first (the delayer's exit).
    pub fn drain(&mut self) -> Vec<T> {
        let mut all = Vec::new();
        while let Some(d) = self.heap.pop() {
            all.push(d.item);
        }
        all
    }

    /// When the earliest held item falls due.
    pub fn next_due(&self) -> Option<Instant> {
        self.heap.peek().map(|d| d.at)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// The delayer's counts, as its stats file holds them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DelayStats {
    pub queue: u16,
    pub delay_ms: u32,
    pub jitter_ms: u32,
    /// Packets received from the queue.
    pub received: u64,
    /// Packets accepted after their hold.
    pub released: u64,
    /// Packets accepted early because the delayer was told to stop.
    pub released_at_exit: u64,
    /// The shortest and longest time a packet was actually held, ms.
    pub min_held_ms: Option<f64>,
    pub max_held_ms: Option<f64>,
    /// The mean time packets were held, ms.
    pub mean_held_ms: Option<f64>,
    /// Whether the delayer has exited (its last write).
    pub exited: bool,
}

impl DelayStats {
    fn held(&mut self, held: Duration) {
        let ms = held.as_secs_f64() * 1000.0;
        let n = self.released as f64;
        self.min_held_ms = Some(self.min_held_ms.map_or(ms, |m| m.min(ms)));
        self.max_held_ms = Some(self.max_held_ms.map_or(ms, |m| m.max(ms)));
        self.mean_held_ms = Some(self.mean_held_ms.map_or(ms, |m| m + (ms - m) / (n + 1.0)));
        self.released += 1;
    }

    /// Reads a stats file; `None` when it is not there (yet) or unreadable.
    pub fn read(path: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(self).unwrap_or_default())?;
        std::fs::rename(&tmp, path)
    }
}

/// The `kvcr-e2e` program that runs the delayer: `KVCR_E2E_BIN` when set;
/// this program when it is `kvcr-e2e`; else the `kvcr-e2e` cargo built
/// beside this test binary (`target/<profile>/deps/<test>` →
/// `target/<profile>/kvcr-e2e`).
pub fn harness_binary() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("KVCR_E2E_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let me = std::env::current_exe().map_err(|e| format!("which program is this: {e}"))?;
    if me.file_name().is_some_and(|n| n == "kvcr-e2e") {
        return Ok(me);
    }
    let beside = me
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("kvcr-e2e"))
        .filter(|p| p.is_file());
    beside.ok_or_else(|| {
        format!(
            "no kvcr-e2e program beside {} (build it with `cargo build`, or set KVCR_E2E_BIN)",
            me.display()
        )
    })
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// `kvcr-e2e net-delay ...`: runs the delayer until SIGTERM.
pub fn main(args: &[String]) -> Result<(), String> {
    let args = DelayArgs::parse(args)?;
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_term),
        // No SA_RESTART: a blocked receive returns EINTR and sees the stop.
        nix::sys::signal::SaFlags::empty(),
        nix::sys::signal::SigSet::empty(),
    );
    for signal in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { nix::sys::signal::sigaction(signal, &action) }
            .map_err(|e| format!("cannot handle {signal}: {e}"))?;
    }
    let mut queue = open_queue(args.queue).map_err(|e| format!("queue {}: {e}", args.queue))?;
    println!("{BOUND_LINE} {}", args.queue);
    run(&mut queue, &args).map_err(|e| format!("queue {}: {e}", args.queue))
}

fn open_queue(number: u16) -> std::io::Result<nfq::Queue> {
    let mut queue = nfq::Queue::open()?;
    queue.bind(number)?;
    // Metadata only: the verdict needs the packet's id, not its bytes.
    queue.set_copy_range(number, 0)?;
    queue.set_recv_gso(number, true)?;
    queue.set_fail_open(number, true)?;
    queue.set_queue_max_len(number, QUEUE_MAX_LEN)?;
    Ok(queue)
}

fn run(queue: &mut nfq::Queue, args: &DelayArgs) -> std::io::Result<()> {
    let mut holds = HoldTimes::new(args.delay_ms, args.jitter_ms, args.seed);
    let mut line: DelayLine<(Instant, nfq::Message)> = DelayLine::default();
    let mut stats = DelayStats {
        queue: args.queue,
        delay_ms: args.delay_ms,
        jitter_ms: args.jitter_ms,
        ..DelayStats::default()
    };
    stats.write(&args.stats)?;
    let mut written = Instant::now();
    let mut dirty = false;
    while !STOP.load(Ordering::SeqCst) {
        // Idle: block until a packet comes (or a signal). Holding: take
        // what has come without blocking, then sleep until the next due.
        queue.set_nonblocking(!line.is_empty());
        loop {
            match queue.recv() {
                Ok(mut msg) => {
                    let now = Instant::now();
                    msg.set_verdict(nfq::Verdict::Accept);
                    line.push(now + holds.next_hold(), (now, msg));
                    stats.received += 1;
                    dirty = true;
                    queue.set_nonblocking(true);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    break
                }
                Err(e) => return Err(e),
            }
        }
        let now = Instant::now();
        for (came, msg) in line.pop_due(now) {
            queue.verdict(msg)?;
            stats.held(now - came);
        }
        if dirty && (written.elapsed() >= STATS_EVERY || line.is_empty()) {
            stats.write(&args.stats)?;
            written = Instant::now();
            dirty = false;
        }
        if let Some(next) = line.next_due() {
            std::thread::sleep(next.saturating_duration_since(Instant::now()).min(TICK));
        }
    }
    for (_, msg) in line.drain() {
        queue.verdict(msg)?;
        stats.released_at_exit += 1;
    }
    stats.exited = true;
    stats.write(&args.stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_arguments_round_trip_and_a_bad_one_is_refused() {
        let args = DelayArgs::parse(&strings(
            "--queue 14 --delay-ms 20 --jitter-ms 10 --stats /t/s.json",
        ))
        .unwrap();
        assert_eq!((args.queue, args.delay_ms, args.jitter_ms), (14, 20, 10));
        assert_eq!(DelayArgs::parse(&args.to_args()).unwrap(), args);
        assert!(DelayArgs::parse(&strings("--queue 14 --stats s"))
            .unwrap_err()
            .contains("--delay-ms is required"));
        assert!(
            DelayArgs::parse(&strings("--queue 1 --delay-ms 5 --jitter-ms 9 --stats s"))
                .unwrap_err()
                .contains("exceeds")
        );
        assert!(DelayArgs::parse(&strings("--queue x")).is_err());
        assert!(DelayArgs::parse(&strings("--loss 3")).is_err());
    }

    #[test]
    fn holds_stay_within_delay_plus_or_minus_jitter_and_spread_over_it() {
        let mut holds = HoldTimes::new(20, 10, 7);
        let drawn: Vec<Duration> = (0..2000).map(|_| holds.next_hold()).collect();
        let (lo, hi) = (Duration::from_millis(10), Duration::from_millis(30));
        assert!(drawn.iter().all(|d| *d >= lo && *d <= hi));
        assert!(drawn.iter().any(|d| *d < Duration::from_millis(12)));
        assert!(drawn.iter().any(|d| *d > Duration::from_millis(28)));
        let mean = drawn.iter().sum::<Duration>() / drawn.len() as u32;
        assert!(mean > Duration::from_millis(19) && mean < Duration::from_millis(21));
        // The same seed draws the same holds; no jitter holds exactly.
        let mut again = HoldTimes::new(20, 10, 7);
        assert_eq!(again.next_hold(), drawn[0]);
        let mut fixed = HoldTimes::new(20, 0, 1);
        assert_eq!(fixed.next_hold(), Duration::from_millis(20));
    }

    #[test]
    fn the_line_releases_in_due_order_and_never_early() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut line = DelayLine::default();
        line.push(ms(30), "late");
        line.push(ms(10), "early");
        line.push(ms(10), "early-second");
        line.push(ms(20), "middle");
        assert_eq!(line.next_due(), Some(ms(10)));
        assert!(line.pop_due(ms(9)).is_empty());
        assert_eq!(
            line.pop_due(ms(20)),
            vec!["early", "early-second", "middle"]
        );
        assert_eq!(line.len(), 1);
        assert_eq!(line.drain(), vec!["late"]);
        assert!(line.is_empty() && line.next_due().is_none());
    }

    #[test]
    fn the_stats_keep_the_hold_range_and_mean() {
        let mut stats = DelayStats::default();
        for ms in [10, 30, 20] {
            stats.held(Duration::from_millis(ms));
        }
        assert_eq!(stats.released, 3);
        assert_eq!(stats.min_held_ms, Some(10.0));
        assert_eq!(stats.max_held_ms, Some(30.0));
        assert!((stats.mean_held_ms.unwrap() - 20.0).abs() < 1e-9);
    }
}
