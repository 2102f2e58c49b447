//! Readings: telemetry deltas and Guard events turned into the plain
//! numbers that verdicts judge. Every counter read here is required: one the
//! worker does not report, or reports in a scrape that cannot be trusted, is
//! an [`Unreadable`] error, never a 0.

use crate::telemetry::guard_log::{GuardEvent, GuardLogEntry};
use crate::telemetry::{Counter, Delta, OpResult, Scope, Tier, Unreadable};
use crate::verdict::disagg::NixlPull;
use crate::verdict::engine_memory::{EngineMemorySource, FetchedRead};
use crate::verdict::local::HostTierHit;
use crate::verdict::transfer::{ComputedReading, PeerTransfer, Unsuccessful};

fn ops(delta: &Delta, scope: Scope, result: OpResult) -> Result<u64, Unreadable> {
    delta.required_count(&Counter::OpCount(scope, result))
}

/// Successes of `scope`, and every other result that moved.
fn outcomes(delta: &Delta, scope: Scope) -> Result<(u64, Unsuccessful), Unreadable> {
    let ops = delta.ops_by_result(&scope)?;
    Ok((ops.success, Unsuccessful(ops.unsuccessful)))
}

/// A peer transfer seen from the source's and the target's telemetry.
pub fn peer_transfer(source: &Delta, target: &Delta) -> Result<PeerTransfer, Unreadable> {
    let (source_write_success_ops, source_write_unsuccessful) =
        outcomes(source, Scope::SourceWrite)?;
    Ok(PeerTransfer {
        source_write_success_ops,
        source_write_unsuccessful,
        source_write_blocks: source.required_count(&Counter::TransferBlocks(Scope::SourceWrite))?,
        source_write_bytes: source.required_count(&Counter::TransferBytes(Scope::SourceWrite))?,
        ..target_side(target)?
    })
}

/// A transfer served by the Guard: the source side comes from the Guard's
/// `source_transfer_completed` events (the Guard has no metrics).
pub fn guard_transfer(
    guard_events: &[GuardLogEntry],
    target: &Delta,
) -> Result<PeerTransfer, Unreadable> {
    let (served, failed): (Vec<_>, Vec<_>) = guard_events
        .iter()
        .filter_map(|e| match &e.event {
            GuardEvent::SourceTransferCompleted(t) => Some(t),
            _ => None,
        })
        .partition(|t| t.result.as_deref() == Some("success"));
    let mut unsuccessful = Unsuccessful::default();
    for t in &failed {
        let result = t.result.as_deref().unwrap_or("no result").to_string();
        *unsuccessful.0.entry(result).or_insert(0) += 1;
    }
    Ok(PeerTransfer {
        source_write_success_ops: served.len() as u64,
        source_write_unsuccessful: unsuccessful,
        source_write_blocks: served.iter().map(|t| t.blocks).sum(),
        source_write_bytes: served.iter().map(|t| t.bytes).sum(),
        ..target_side(target)?
    })
}

fn target_side(target: &Delta) -> Result<PeerTransfer, Unreadable> {
    let (remote_deliver_success_ops, remote_deliver_unsuccessful) =
        outcomes(target, Scope::RemoteDeliver)?;
    Ok(PeerTransfer {
        remote_deliver_success_ops,
        remote_deliver_unsuccessful,
        remote_deliver_blocks: target
            .required_count(&Counter::TransferBlocks(Scope::RemoteDeliver))?,
        target_read_bytes: target.required_count(&Counter::TieringReadBytes(Tier::Kvcr))?,
        ..PeerTransfer::default()
    })
}

/// A NixlConnector pull seen from the decode's telemetry, with the prompt
/// tokens the prefill scheduled when its telemetry can be read.
pub fn nixl_pull(prefill: Option<&Delta>, decode: &Delta) -> Result<NixlPull, Unreadable> {
    Ok(NixlPull {
        prefill_prompt_tokens: prefill
            .map(|p| p.required_count(&Counter::PrefixCacheQueries))
            .transpose()?,
        decode_transfers: decode.required_count(&Counter::NixlTransfers)?,
        decode_bytes: decode.required_count(&Counter::NixlTransferBytes)?,
        decode_failed: decode.required_count(&Counter::NixlFailedTransfers)?,
    })
}

/// How an engine tells how many prompt blocks it computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefillAccounting {
    /// The engine counts them (`cpu_engine_computed_blocks`).
    Counted,
    /// vLLM counts none: the prompt tokens it looked up in the device cache,
    /// minus those found there or loaded from outside it (host tier, KVCR),
    /// were computed; whole blocks of them are computed blocks.
    FromPrefixCache { block_size: u64 },
}

/// Prompt blocks the engine computed in `delta`'s window.
pub fn computed_blocks(delta: &Delta, how: PrefillAccounting) -> Result<u64, Unreadable> {
    match how {
        PrefillAccounting::Counted => delta.required_count(&Counter::ComputedBlocks),
        PrefillAccounting::FromPrefixCache { block_size } => {
            let looked_up = delta.required_count(&Counter::PrefixCacheQueries)?;
            let found = delta.required_count(&Counter::PrefixCacheHits)?
                + delta.required_count(&Counter::ExternalPrefixCacheHits)?;
            Ok(looked_up.saturating_sub(found) / block_size.max(1))
        }
    }
}

/// The prompt blocks computed in `delta`'s window, for a sub-check that may
/// be skipped: an engine that counts them must report the count (absent
/// fails); one whose count is derived from prefix-cache counters (vLLM) and
/// does not report them gives [`ComputedReading::NotChecked`], never a 0.
pub fn computed_reading(
    delta: &Delta,
    how: PrefillAccounting,
) -> Result<ComputedReading, Unreadable> {
    match how {
        PrefillAccounting::Counted => computed_blocks(delta, how).map(ComputedReading::Read),
        PrefillAccounting::FromPrefixCache { .. } => Ok(match computed_blocks(delta, how) {
            Ok(n) => ComputedReading::Read(n),
            Err(absent) => ComputedReading::NotChecked(format!(
                "computed blocks not checked: derived from the prefix-cache counters, and {absent}"
            )),
        }),
    }
}

/// Device-cache evictions in `delta`'s window, for an engine that counts
/// none (vLLM): the prompt tokens looked up and not found in the device
/// cache were admitted into it (computed, or loaded from a lower tier: both
/// take a device block); the first `capacity` admitted blocks may have
/// filled free slots, every one after them pushed an older block out.
pub fn evicted_past_capacity(
    delta: &Delta,
    block_size: u64,
    capacity: u64,
) -> Result<u64, Unreadable> {
    let admitted_tokens = delta
        .required_count(&Counter::PrefixCacheQueries)?
        .saturating_sub(delta.required_count(&Counter::PrefixCacheHits)?);
    Ok((admitted_tokens / block_size.max(1)).saturating_sub(capacity))
}

/// One request's host-tier loads on one worker.
pub fn host_tier_hit(
    delta: &Delta,
    cached_tokens: Option<u64>,
    prefill: PrefillAccounting,
) -> Result<HostTierHit, Unreadable> {
    let remote = delta.ops_by_result(&Scope::RemoteDeliver)?;
    let remote_deliver_ops = remote.success + remote.unsuccessful_total();
    Ok(HostTierHit {
        local_deliver_success_ops: ops(delta, Scope::LocalDeliver, OpResult::Success)?,
        local_deliver_blocks: delta
            .required_count(&Counter::TransferBlocks(Scope::LocalDeliver))?,
        local_deliver_bytes: delta.required_count(&Counter::TransferBytes(Scope::LocalDeliver))?,
        host_tier_read_bytes: delta.required_count(&Counter::TieringReadBytes(Tier::Host))?,
        kvcr_read_bytes: delta.required_count(&Counter::TieringReadBytes(Tier::Kvcr))?,
        remote_deliver_ops,
        device_cache_hit_tokens: delta.required_count(&Counter::PrefixCacheHits)?,
        computed_blocks: computed_blocks(delta, prefill)?,
        cached_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{Snapshot, SnapshotSource};

    fn delta(before: &str, after: &str) -> Delta {
        let snap = |text: &str, label: &str| {
            Snapshot::from_prometheus_text(
                text,
                Some("B".into()),
                SnapshotSource::Text {
                    label: label.into(),
                },
            )
        };
        snap(after, "after").since(&snap(before, "before")).unwrap()
    }

    /// vLLM: a hinted request of 5 full blocks and an 8-token suffix, 4
    /// blocks loaded through KVCR: 88 tokens looked up, 0 found in the
    /// device cache, 64 outside it: 24 computed tokens, one full block.
    #[test]
    fn vllm_computed_blocks_are_derived_from_the_prefix_cache() {
        let before = "vllm:prefix_cache_queries_total 100\nvllm:prefix_cache_hits_total 10\nvllm:external_prefix_cache_hits_total 0\n";
        let after = "vllm:prefix_cache_queries_total 188\nvllm:prefix_cache_hits_total 10\nvllm:external_prefix_cache_hits_total 64\n";
        let how = PrefillAccounting::FromPrefixCache { block_size: 16 };
        assert_eq!(
            computed_reading(&delta(before, after), how).unwrap(),
            ComputedReading::Read(1)
        );
    }

    #[test]
    fn vllm_without_prefix_cache_counters_is_not_checked_and_the_cpu_engine_fails() {
        let text = "vllm:kvcr_transfer_blocks_total{operation=\"remote_deliver\"} 4\n";
        let d = delta(text, text);
        let how = PrefillAccounting::FromPrefixCache { block_size: 16 };
        let ComputedReading::NotChecked(why) = computed_reading(&d, how).unwrap() else {
            panic!("an absent prefix-cache counter read as a number");
        };
        assert!(why.starts_with("computed blocks not checked"), "{why}");
        assert!(computed_reading(&d, PrefillAccounting::Counted).is_err());
    }
}

#[cfg(test)]
mod scrape_tests {
    //! A hinted peer transfer read from two workers' scrapes in the form a
    //! vLLM 0.32 worker behind Dynamo 1.6.1 exports KVCR 0.1.1's telemetry
    //! (`operation` on the block and byte counters, Dynamo's labels around
    //! them), then the same scrapes with one line changed the way a KVCR
    //! build that fails differently would change it.
    use super::*;
    use crate::telemetry::{Snapshot, SnapshotSource};
    use crate::verdict::transfer::expect_peer_transfer;

    const DYN: &str = r#"dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",engine="0",model_name="tiny-llama""#;
    const BLOCKS: u64 = 4;
    const BLOCK_BYTES: u64 = 8192;

    fn source_scrape() -> String {
        format!(
            r#"# HELP vllm:kvcr_duration_seconds KVCR operation duration
# TYPE vllm:kvcr_duration_seconds histogram
vllm:kvcr_duration_seconds_bucket{{{DYN},le="0.005",result="success",scope="source_write"}} 1.0
vllm:kvcr_duration_seconds_bucket{{{DYN},le="+Inf",result="success",scope="source_write"}} 1.0
vllm:kvcr_duration_seconds_count{{{DYN},result="success",scope="source_write"}} 1.0
vllm:kvcr_duration_seconds_sum{{{DYN},result="success",scope="source_write"}} 0.0021
vllm:kvcr_duration_seconds_count{{{DYN},result="success",scope="transfer"}} 1.0
vllm:kvcr_duration_seconds_count{{{DYN},result="success",scope="local_fill"}} 2.0
# TYPE vllm:kvcr_transfer_blocks counter
vllm:kvcr_transfer_blocks_total{{{DYN},operation="source_write"}} 4.0
vllm:kvcr_transfer_blocks_total{{{DYN},operation="local_fill"}} 8.0
# TYPE vllm:kvcr_transfer_bytes counter
vllm:kvcr_transfer_bytes_total{{{DYN},operation="source_write"}} 32768.0
vllm:kvcr_transfer_bytes_total{{{DYN},operation="local_fill"}} 65536.0
# TYPE vllm:kvcr_state gauge
vllm:kvcr_state{{{DYN},resource="block_records"}} 8.0
"#
        )
    }

    fn target_scrape() -> String {
        format!(
            r#"# TYPE vllm:kvcr_duration_seconds histogram
vllm:kvcr_duration_seconds_bucket{{{DYN},le="+Inf",result="success",scope="remote_deliver"}} 1.0
vllm:kvcr_duration_seconds_count{{{DYN},result="success",scope="remote_deliver"}} 1.0
vllm:kvcr_duration_seconds_sum{{{DYN},result="success",scope="remote_deliver"}} 0.0034
vllm:kvcr_duration_seconds_count{{{DYN},result="complete",scope="hint_wait"}} 1.0
vllm:kvcr_duration_seconds_count{{{DYN},result="connected",scope="peer_setup"}} 1.0
# TYPE vllm:kvcr_transfer_blocks counter
vllm:kvcr_transfer_blocks_total{{{DYN},operation="remote_deliver"}} 4.0
# TYPE vllm:kvcr_transfer_bytes counter
# TYPE vllm:kv_offload_tiering_read_bytes counter
vllm:kv_offload_tiering_read_bytes_total{{{DYN},tier="1:kvcr"}} 32768.0
"#
        )
    }

    /// The window from an empty start to `text` (every family declared).
    fn window(worker: &str, text: &str) -> Delta {
        let source = || SnapshotSource::Text {
            label: format!("scrape of worker {worker}"),
        };
        let before = Snapshot::new(Some(worker.into()), source());
        let after = Snapshot::from_prometheus_text(text, Some(worker.into()), source());
        after.since(&before).unwrap()
    }

    fn verdict(source: &str, target: &str) -> Result<(), String> {
        let t =
            peer_transfer(&window("A", source), &window("B", target)).map_err(|e| e.to_string())?;
        expect_peer_transfer(&t, BLOCKS, BLOCK_BYTES).map_err(|v| v.to_string())
    }

    /// The verdict's failure when `line` is added to the target's scrape.
    fn failure_with_target_line(line: &str) -> String {
        let target = format!("{}{line}\n", target_scrape());
        verdict(&source_scrape(), &target).unwrap_err()
    }

    #[test]
    fn the_real_scrapes_reconcile() {
        assert_eq!(verdict(&source_scrape(), &target_scrape()), Ok(()));
    }

    /// A remote_deliver counted with `result="timeout"` (a result the
    /// quick start's "no partial or failed" does not name) fails the
    /// transfer, naming the result.
    #[test]
    fn a_timeout_result_turns_the_transfer_red() {
        let err = failure_with_target_line(&format!(
            "vllm:kvcr_duration_seconds_count{{{DYN},result=\"timeout\",scope=\"remote_deliver\"}} 1.0"
        ));
        assert_eq!(
            err,
            "peer transfer reconciles: remote_deliver timeout 1 (every result other than success must be 0)"
        );
    }

    /// The source side is read too: a `source_write` that timed out fails.
    #[test]
    fn a_source_write_that_did_not_succeed_turns_the_transfer_red() {
        let source = format!(
            "{}vllm:kvcr_duration_seconds_count{{{DYN},result=\"timeout\",scope=\"source_write\"}} 1.0\n",
            source_scrape()
        );
        let err = verdict(&source, &target_scrape()).unwrap_err();
        assert!(err.contains("source_write timeout 1"), "{err}");
    }

    /// `failed` renamed `error`: a result label the harness does not map
    /// makes the scrape untrustworthy, naming the series and its line.
    #[test]
    fn an_unmapped_result_label_names_the_series_and_line() {
        let renamed = target_scrape().replace(
            &format!("_count{{{DYN},result=\"success\",scope=\"remote_deliver\"}}"),
            &format!("_count{{{DYN},result=\"error\",scope=\"remote_deliver\"}}"),
        );
        assert_ne!(renamed, target_scrape(), "the label was renamed");
        let target = renamed;
        let err = verdict(&source_scrape(), &target).unwrap_err();
        assert!(
            err.starts_with("op_count{scope=remote_deliver,result=success} of worker B not read: "),
            "{err}"
        );
        assert!(
            err.contains("line 3: series vllm:kvcr_duration_seconds_count (op_count{scope=remote_deliver,result=error}) has the result label \"error\", which the harness does not map"),
            "{err}"
        );
    }

    /// A NaN sample of a KVCR family is never dropped silently: the
    /// transfer cannot be read, and the message names the series and line.
    #[test]
    fn a_nan_sample_names_the_series_and_line() {
        let target = target_scrape().replace(
            r#"operation="remote_deliver"} 4.0"#,
            r#"operation="remote_deliver"} NaN"#,
        );
        assert_ne!(target, target_scrape(), "the NaN was planted");
        let err = verdict(&source_scrape(), &target).unwrap_err();
        assert!(
            err.contains(
                "line 8: series vllm:kvcr_transfer_blocks_total has the non-finite value NaN"
            ),
            "{err}"
        );
        // +Inf is as untrustworthy as NaN (a bucket's `le="+Inf"` bound is a label, not a value).
        let source = source_scrape().replace(
            r#"operation="source_write"} 32768.0"#,
            r#"operation="source_write"} +Inf"#,
        );
        let err = verdict(&source, &target_scrape()).unwrap_err();
        assert!(
            err.contains("series vllm:kvcr_transfer_bytes_total has the non-finite value inf"),
            "{err}"
        );
    }

    /// A line the parser cannot read fails the window too, with its line.
    #[test]
    fn a_malformed_line_names_its_line() {
        let err = failure_with_target_line("vllm:kvcr_transfer_blocks_total{operation=\"x} 1");
        assert!(
            err.contains("line 12: value of label `operation` is not closed"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod vllm_derivation_tests {
    //! vLLM's derived readings: it counts neither the blocks it computed
    //! nor its device-cache evictions, so both come from its prefix-cache
    //! counters.
    use super::*;
    use crate::telemetry::{Snapshot, SnapshotSource};

    /// A delta of vLLM's prefix-cache counters (totals since an empty start).
    fn delta(queries: u64, hits: u64, external_hits: Option<u64>) -> Delta {
        let mut text = format!(
            "# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total {queries}\n\
             # TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {hits}\n"
        );
        if let Some(x) = external_hits {
            text.push_str(&format!(
                "# TYPE vllm:external_prefix_cache_hits counter\nvllm:external_prefix_cache_hits_total {x}\n"
            ));
        }
        let source = || SnapshotSource::Text {
            label: "vllm".into(),
        };
        let after = Snapshot::from_prometheus_text(&text, None, source());
        let before = Snapshot::new(None, SnapshotSource::Empty);
        Delta::between(&before, &after).unwrap()
    }

    const BLOCK: u64 = 32;
    const VLLM: PrefillAccounting = PrefillAccounting::FromPrefixCache { block_size: BLOCK };

    #[test]
    fn computed_blocks_are_the_whole_blocks_looked_up_and_not_found() {
        // Cold 72-token prompt: nothing found, 2 whole blocks computed (the
        // 8-token tail is no block).
        assert_eq!(computed_blocks(&delta(72, 0, Some(0)), VLLM), Ok(2));
        // Device hit on 2 blocks: the tail only, no block computed.
        assert_eq!(computed_blocks(&delta(72, 64, Some(0)), VLLM), Ok(0));
        // 1 block from the device cache, 1 loaded by KVCR: none computed.
        assert_eq!(computed_blocks(&delta(72, 32, Some(32)), VLLM), Ok(0));
        // A 64-token prompt seen before: vLLM recomputes the last block.
        assert_eq!(computed_blocks(&delta(64, 32, Some(0)), VLLM), Ok(1));
        // More found than looked up (inconsistent counters) reads as 0,
        // never as a huge count.
        assert_eq!(computed_blocks(&delta(32, 64, Some(0)), VLLM), Ok(0));
    }

    #[test]
    fn computed_blocks_need_every_counter() {
        let err = computed_blocks(&delta(72, 0, None), VLLM).unwrap_err();
        assert!(
            err.to_string().contains("external_prefix_cache_hits"),
            "{err}"
        );
    }

    #[test]
    fn evictions_are_the_blocks_admitted_past_the_device_capacity() {
        // 32 fillers of 5 blocks each (160 tokens), nothing found, into a
        // device cache of 64 blocks: 160 admitted, 96 pushed an older one out.
        assert_eq!(
            evicted_past_capacity(&delta(32 * 160, 0, None), BLOCK, 64),
            Ok(96)
        );
        // Fewer admitted than the cache holds: nothing proven evicted.
        assert_eq!(
            evicted_past_capacity(&delta(40 * 32, 0, None), BLOCK, 64),
            Ok(0)
        );
        // Hits were not admitted (they were already there).
        assert_eq!(
            evicted_past_capacity(&delta(100 * 32, 50 * 32, None), BLOCK, 64),
            Ok(0)
        );
        assert_eq!(
            evicted_past_capacity(&delta(200 * 32, 50 * 32, None), BLOCK, 64),
            Ok(86)
        );
    }
}

/// The source side of a peer read served from engine memory (TC-18):
/// `pool_blocks_before` is what its KVCR pool held of the prefix before.
pub fn engine_memory_source(
    source: &Delta,
    pool_blocks_before: u64,
) -> Result<EngineMemorySource, Unreadable> {
    let (pin_wait_success_ops, pin_wait_unsuccessful) = outcomes(source, Scope::FrameworkPinWait)?;
    let (source_write_success_ops, source_write_unsuccessful) =
        outcomes(source, Scope::SourceWrite)?;
    let pins = |tier: &str, event: &str| {
        source.required_count(&Counter::KvcrFrameworkPinBlocks(tier.into(), event.into()))
    };
    Ok(EngineMemorySource {
        pool_blocks_before,
        pin_wait_success_ops,
        pin_wait_unsuccessful,
        pinned_device_blocks: pins("device", "pinned")?,
        pinned_host_blocks: pins("host", "pinned")?,
        released_blocks: pins("device", "released")? + pins("host", "released")?,
        source_write_success_ops,
        source_write_unsuccessful,
        source_write_blocks: source.required_count(&Counter::TransferBlocks(Scope::SourceWrite))?,
        source_write_bytes: source.required_count(&Counter::TransferBytes(Scope::SourceWrite))?,
    })
}

/// The target side of a read it staged with `KVCR.fetch` (TC-18):
/// `pool_blocks_after` is what its KVCR pool holds of the prefix after.
pub fn fetched_read(target: &Delta, pool_blocks_after: u64) -> Result<FetchedRead, Unreadable> {
    let (remote_fetch_success_ops, remote_fetch_unsuccessful) =
        outcomes(target, Scope::RemoteFetch)?;
    let (delivered, not_delivered) = outcomes(target, Scope::RemoteDeliver)?;
    let fetch = |event: &str| target.required_count(&Counter::KvcrFetchBlocks(event.into()));
    Ok(FetchedRead {
        remote_fetch_success_ops,
        remote_fetch_unsuccessful,
        remote_fetch_blocks: target.required_count(&Counter::TransferBlocks(Scope::RemoteFetch))?,
        remote_deliver_ops: delivered + not_delivered.0.values().sum::<u64>(),
        fetched_blocks: fetch("fetched")?,
        fetch_failed_blocks: fetch("failed")?,
        claims_released: fetch("released")?,
        local_deliver_blocks: target
            .required_count(&Counter::TransferBlocks(Scope::LocalDeliver))?,
        read_bytes: target.required_count(&Counter::TieringReadBytes(Tier::Kvcr))?,
        pool_blocks_after,
    })
}
