//! The CPU engine's log lines about its KVCR: deposit outcomes, KVCR's
//! inventory events, deliveries by source, resilience events, the clean
//! release ([`super::names::engine_kvcr_log`] has the formats). Read from a
//! byte offset of a worker's log, so a case sees only its own window.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use super::names::engine_kvcr_log as names;

/// One parsed line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "line", rename_all = "snake_case")]
pub enum EngineKvcrLine {
    /// KVCR's per-block outcomes of one deposit.
    Deposit {
        success: Vec<u64>,
        failed: Vec<u64>,
        dropped: Vec<u64>,
    },
    /// An inventory event of KVCR's (its `inventory_sink`).
    Inventory {
        removed: bool,
        tier: String,
        hashes: Vec<u64>,
    },
    /// Blocks KVCR delivered into a request, from one source (`local`,
    /// `g3`, or the peer's control endpoint).
    Delivered {
        request_id: String,
        from: String,
        hashes: Vec<u64>,
    },
    /// When one `deliver` call of a request was in flight, on the host's
    /// monotonic clock (ns), the blocks it asked for and those delivered.
    DeliverWindow {
        request_id: String,
        started_ns: u64,
        ended_ns: u64,
        asked: u64,
        delivered: u64,
    },
    /// A resilience event (`source_stalled`: the latch).
    Resilience { kind: String, message: String },
    /// `KVCR.close()` released the Guard group.
    HandedBack { guard_index: u32 },
    /// `KVCR.close()` failed (its release did not reach the Guard).
    CloseFailed { error: String },
}

/// A parsed line with where it was: its 1-based number in the file and its
/// text (for messages).
#[derive(Debug, Clone, Serialize)]
pub struct Located {
    pub line_no: usize,
    pub text: String,
    pub event: EngineKvcrLine,
}

fn hashes(list: &str) -> Option<Vec<u64>> {
    if list == "-" {
        return Some(Vec::new());
    }
    list.split(',').map(|h| h.trim().parse().ok()).collect()
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let start = text.find(&format!("{key}="))? + key.len() + 1;
    let rest = &text[start..];
    Some(rest.split_whitespace().next().unwrap_or(""))
}

/// The event a log line carries, if it is one of the engine's KVCR lines.
pub fn parse(line: &str) -> Option<EngineKvcrLine> {
    if let Some(i) = line.find(names::DEPOSIT_RESULTS) {
        let body = &line[i + names::DEPOSIT_RESULTS.len()..];
        return Some(EngineKvcrLine::Deposit {
            success: hashes(field(body, "success")?)?,
            failed: hashes(field(body, "failed")?)?,
            dropped: hashes(field(body, "dropped")?)?,
        });
    }
    if let Some(i) = line.find(names::INVENTORY) {
        let body = &line[i + names::INVENTORY.len()..];
        let removed = match body.split_whitespace().next()? {
            "stored" => false,
            "removed" => true,
            _ => return None,
        };
        return Some(EngineKvcrLine::Inventory {
            removed,
            tier: field(body, "tier")?.to_string(),
            hashes: hashes(field(body, "hashes")?)?,
        });
    }
    if let Some(i) = line.find(names::DELIVERED) {
        let body = &line[i + names::DELIVERED.len()..];
        let (request_id, rest) = body.split_once(": ")?;
        return Some(EngineKvcrLine::Delivered {
            request_id: request_id.to_string(),
            from: field(rest, "from")?.to_string(),
            hashes: hashes(field(rest, "hashes")?)?,
        });
    }
    if let Some(i) = line.find(names::DELIVER_WINDOW) {
        let body = &line[i + names::DELIVER_WINDOW.len()..];
        let (request_id, rest) = body.split_once(": ")?;
        let number = |key: &str| field(rest, key)?.parse().ok();
        return Some(EngineKvcrLine::DeliverWindow {
            request_id: request_id.to_string(),
            started_ns: number("started_ns")?,
            ended_ns: number("ended_ns")?,
            asked: number("asked")?,
            delivered: number("delivered")?,
        });
    }
    if let Some(i) = line.find(names::RESILIENCE) {
        let body = &line[i + names::RESILIENCE.len()..];
        let (kind, message) = body.split_once(": ")?;
        return Some(EngineKvcrLine::Resilience {
            kind: kind.to_string(),
            message: message.trim().to_string(),
        });
    }
    if let Some(i) = line.find(names::CLOSED_HANDED_BACK) {
        let body = &line[i + names::CLOSED_HANDED_BACK.len()..];
        let guard_index = body.split_whitespace().next()?.parse().ok()?;
        return Some(EngineKvcrLine::HandedBack { guard_index });
    }
    if let Some(i) = line.find(names::CLOSE_FAILED) {
        return Some(EngineKvcrLine::CloseFailed {
            error: line[i + names::CLOSE_FAILED.len()..].trim().to_string(),
        });
    }
    None
}

/// Every engine KVCR line of `log` past byte `from`, and the file's length
/// (the next window's start).
pub fn read_since(log: &Path, from: u64) -> std::io::Result<(Vec<Located>, u64)> {
    let bytes = std::fs::read(log)?;
    let end = bytes.len() as u64;
    let start = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
    let skipped = bytes[..start].iter().filter(|b| **b == b'\n').count();
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines = text
        .lines()
        .enumerate()
        .filter_map(|(i, text)| {
            parse(text).map(|event| Located {
                line_no: skipped + i + 1,
                text: text.to_string(),
                event,
            })
        })
        .collect();
    Ok((lines, end))
}

/// The blocks of `tier` KVCR holds after these lines, applying each
/// `stored`/`removed` event in order (what was committed to the pool and is
/// still there).
pub fn resident(lines: &[Located], tier: &str) -> BTreeSet<u64> {
    let mut held = BTreeSet::new();
    for l in lines {
        if let EngineKvcrLine::Inventory {
            removed,
            tier: t,
            hashes,
        } = &l.event
        {
            if t == tier {
                for h in hashes {
                    if *removed {
                        held.remove(h);
                    } else {
                        held.insert(*h);
                    }
                }
            }
        }
    }
    held
}

/// The hashes of `tier` named by inventory events that stored (`removed`
/// false) or removed (`removed` true) blocks, in log order.
fn inventory_hashes<'a>(
    lines: &'a [Located],
    tier: &'a str,
    removed: bool,
) -> impl Iterator<Item = u64> + 'a {
    lines
        .iter()
        .filter_map(move |l| match &l.event {
            EngineKvcrLine::Inventory {
                removed: r,
                tier: t,
                hashes,
            } if *r == removed && t == tier => Some(hashes.iter().copied()),
            _ => None,
        })
        .flatten()
}

/// Every block of `tier` a `stored` inventory event of these lines named.
pub fn stored(lines: &[Located], tier: &str) -> BTreeSet<u64> {
    inventory_hashes(lines, tier, false).collect()
}

/// Every block of `tier` an inventory event of these lines removed.
pub fn removed(lines: &[Located], tier: &str) -> Vec<u64> {
    inventory_hashes(lines, tier, true).collect()
}

/// The blocks of `tier` these lines removed without storing them first: in
/// a replacement's log from its start, blocks it reclaimed from its Guard
/// pool (KVCR announces no inventory for those) and later evicted.
pub fn removed_unstored(lines: &[Located], tier: &str) -> BTreeSet<u64> {
    let (mut stored, mut removed) = (BTreeSet::new(), BTreeSet::new());
    for l in lines {
        if let EngineKvcrLine::Inventory {
            removed: r,
            tier: t,
            hashes,
        } = &l.event
        {
            if t != tier {
                continue;
            }
            for h in hashes {
                if !*r {
                    stored.insert(*h);
                } else if !stored.contains(h) {
                    removed.insert(*h);
                }
            }
        }
    }
    removed
}

/// Deposit outcomes of these lines, summed: (success, failed, dropped) blocks,
/// and the failed blocks by hash.
pub fn deposits(lines: &[Located]) -> (u64, u64, u64, Vec<u64>) {
    let (mut ok, mut failed, mut dropped, mut which) = (0, 0, 0, Vec::new());
    for l in lines {
        if let EngineKvcrLine::Deposit {
            success,
            failed: f,
            dropped: d,
        } = &l.event
        {
            ok += success.len() as u64;
            failed += f.len() as u64;
            dropped += d.len() as u64;
            which.extend(f.iter().copied());
        }
    }
    (ok, failed, dropped, which)
}

/// The blocks delivered from `source` (a control endpoint, `local`, `g3`).
pub fn delivered_from(lines: &[Located], source: &str) -> BTreeSet<u64> {
    lines
        .iter()
        .filter_map(|l| match &l.event {
            EngineKvcrLine::Delivered { from, hashes, .. } if from == source => Some(hashes),
            _ => None,
        })
        .flatten()
        .copied()
        .collect()
}

/// The blocks delivered into request `request_id`, from every source, in
/// the order logged (a block delivered twice is listed twice).
pub fn delivered_to(lines: &[Located], request_id: &str) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|l| match &l.event {
            EngineKvcrLine::Delivered {
                request_id: r,
                hashes,
                ..
            } if r == request_id => Some(hashes),
            _ => None,
        })
        .flatten()
        .copied()
        .collect()
}

/// When request `request_id`'s delivery was in flight, `(started_ns,
/// ended_ns)`: its first `deliver` call's window (the engine makes one per
/// request).
pub fn deliver_window(lines: &[Located], request_id: &str) -> Option<(u64, u64)> {
    lines.iter().find_map(|l| match &l.event {
        EngineKvcrLine::DeliverWindow {
            request_id: r,
            started_ns,
            ended_ns,
            ..
        } if r == request_id => Some((*started_ns, *ended_ns)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "2026-12-01 13:00:00,000 A cpu_engine.engine INFO ";

    #[test]
    fn parses_every_line_the_engine_writes() {
        assert_eq!(
            parse(&format!(
                "{PREFIX}KVCR deposit results: success=1,2 failed=3 dropped=-"
            )),
            Some(EngineKvcrLine::Deposit {
                success: vec![1, 2],
                failed: vec![3],
                dropped: vec![]
            })
        );
        assert_eq!(
            parse(&format!(
                "{PREFIX}KVCR inventory removed tier=LOCAL_G2 hashes=7"
            )),
            Some(EngineKvcrLine::Inventory {
                removed: true,
                tier: "LOCAL_G2".into(),
                hashes: vec![7]
            })
        );
        assert_eq!(
            parse(&format!(
                "{PREFIX}KVCR delivered request 4f2a: from=tcp://127.0.0.1:5 hashes=8,9"
            )),
            Some(EngineKvcrLine::Delivered {
                request_id: "4f2a".into(),
                from: "tcp://127.0.0.1:5".into(),
                hashes: vec![8, 9]
            })
        );
        assert_eq!(
            parse(&format!(
                "{PREFIX}KVCR deliver window request 4f2a: started_ns=100 ended_ns=250 asked=4 delivered=3"
            )),
            Some(EngineKvcrLine::DeliverWindow {
                request_id: "4f2a".into(),
                started_ns: 100,
                ended_ns: 250,
                asked: 4,
                delivered: 3
            })
        );
        assert_eq!(
            parse(&format!(
                "{PREFIX}KVCR deliver window request 4f2a: started_ns=x ended_ns=250 asked=4 delivered=3"
            )),
            None,
            "a window without its numbers is no window"
        );
        assert_eq!(
            parse(&format!("{PREFIX}KVCR resilience event kind=source_stalled: KVCR source progress stalled for 1512.7 ms")),
            Some(EngineKvcrLine::Resilience {
                kind: "source_stalled".into(),
                message: "KVCR source progress stalled for 1512.7 ms".into()
            })
        );
        assert_eq!(
            parse(&format!("{PREFIX}KVCR closed: Guard group 1 handed back")),
            Some(EngineKvcrLine::HandedBack { guard_index: 1 })
        );
        assert_eq!(
            parse(&format!(
                "{PREFIX}KVCR close failed: KVCR-Service release failed: Broken pipe"
            )),
            Some(EngineKvcrLine::CloseFailed {
                error: "KVCR-Service release failed: Broken pipe".into()
            })
        );
        assert_eq!(parse(&format!("{PREFIX}request 1: 4 full blocks")), None);
        assert_eq!(
            parse(&format!(
                "{PREFIX}KVCR inventory stored tier=LOCAL_G2 hashes=x"
            )),
            None
        );
    }

    fn located(lines: &[&str]) -> Vec<Located> {
        lines
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                parse(t).map(|event| Located {
                    line_no: i + 1,
                    text: t.to_string(),
                    event,
                })
            })
            .collect()
    }

    #[test]
    fn a_requests_deliveries_and_window_are_its_own() {
        let lines = located(&[
            "KVCR deliver window request r1: started_ns=10 ended_ns=20 asked=2 delivered=2",
            "KVCR delivered request r1: from=tcp://a:1 hashes=5,6",
            "KVCR delivered request r2: from=tcp://a:1 hashes=5",
            "KVCR delivered request r1: from=local hashes=6",
        ]);
        assert_eq!(delivered_to(&lines, "r1"), [5, 6, 6]);
        assert_eq!(delivered_to(&lines, "r3"), Vec::<u64>::new());
        assert_eq!(deliver_window(&lines, "r1"), Some((10, 20)));
        assert_eq!(deliver_window(&lines, "r2"), None);
    }

    #[test]
    fn removed_unstored_skips_what_the_process_stored_itself() {
        let lines = located(&[
            "KVCR inventory removed tier=LOCAL_G2 hashes=1",
            "KVCR inventory stored tier=LOCAL_G2 hashes=2",
            "KVCR inventory removed tier=LOCAL_G2 hashes=2,3",
            "KVCR inventory removed tier=G3 hashes=4",
        ]);
        assert_eq!(
            removed_unstored(&lines, "LOCAL_G2"),
            [1, 3].into_iter().collect()
        );
    }

    #[test]
    fn residency_applies_events_in_order() {
        let lines = located(&[
            "KVCR inventory stored tier=LOCAL_G2 hashes=1,2,3",
            "KVCR inventory removed tier=LOCAL_G2 hashes=2",
            "KVCR inventory stored tier=G3 hashes=2",
            "KVCR inventory stored tier=LOCAL_G2 hashes=4",
            "KVCR deposit results: success=4 failed=5,6 dropped=-",
            "KVCR delivered request r: from=g3 hashes=2",
        ]);
        assert_eq!(
            resident(&lines, "LOCAL_G2"),
            [1, 3, 4].into_iter().collect()
        );
        assert_eq!(resident(&lines, "G3"), [2].into_iter().collect());
        assert_eq!(removed(&lines, "LOCAL_G2"), vec![2]);
        assert_eq!(deposits(&lines), (1, 2, 0, vec![5, 6]));
        assert_eq!(delivered_from(&lines, "g3"), [2].into_iter().collect());
        assert!(delivered_from(&lines, "local").is_empty());
    }

    #[test]
    fn reads_a_window_of_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker-A.log");
        std::fs::write(
            &path,
            "KVCR inventory stored tier=LOCAL_G2 hashes=1\nnoise\n",
        )
        .unwrap();
        let (first, end) = read_since(&path, 0).unwrap();
        assert_eq!(first.len(), 1);
        let mut more = std::fs::read_to_string(&path).unwrap();
        more.push_str("KVCR inventory removed tier=LOCAL_G2 hashes=1\n");
        std::fs::write(&path, more).unwrap();
        let (second, _) = read_since(&path, end).unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].line_no, 3);
    }
}
