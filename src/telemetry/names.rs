//! The one place where the metric and log names of KVCR, vLLM, Dynamo and
//! the CPU engine live.
//!
//! Cases ask for *meanings* ([`Counter`], [`Gauge`]), never for strings.
//! Each meaning maps to
//! - its Prometheus sample ([`Counter::prometheus`]): vLLM style
//!   `vllm:kvcr_transfer_blocks_total{scope="remote_deliver"}`; parsing
//!   accepts the family name with and without the `_total` suffix, and
//!   ignores extra labels such as `engine` or `model_name`;
//! - its key in vLLM's `KV Transfer metrics:` interval log line
//!   ([`Counter::interval_key`]): `vllm:kvcr_transfer_blocks:('remote_deliver',)`,
//!   `vllm:kvcr_duration_seconds:('remote_deliver', 'success')_count`.
//!
//! Names move between vLLM versions: when one does, change it here only.
//! The `Display` form of a meaning (`transfer_blocks{scope=remote_deliver}`)
//! is engine-neutral and is what evidence files use; it round-trips through
//! `FromStr`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Prefix the vLLM adapter (and the CPU engine) put before KVCR and vLLM metrics.
pub const VLLM_PREFIX: &str = "vllm:";

/// Marker of vLLM's interval line: `... KV Transfer metrics: k=v, k=v`.
pub const INTERVAL_LOG_MARKER: &str = "KV Transfer metrics:";

/// vLLM's own shutdown lines (`v1/utils.py`, vLLM 0.32.0).
pub mod vllm_log {
    /// The process manager SIGKILLs an engine core whose shutdown did not
    /// end within `--shutdown-timeout` (docs/kvcr-findings.md 17).
    pub const FORCE_KILLED_ENGINE: &str = "Process manager: force killing remaining processes";
}

/// Dynamo's file discovery (`DYN_DISCOVERY_BACKEND=file`) as its logs tell it.
pub mod dynamo_discovery_log {
    /// INFO, `dynamo_runtime::storage::kv::file`: a process deleted an entry
    /// (`path=".../instances/<ns>%2F<component>%2F<endpoint>%2F<hex id>"`)
    /// not refreshed for 10 s of wall time.
    pub const EXPIRED: &str = "storage::kv::file: Expired";
    /// ERROR in the entry's owner once it is gone: it is never written again.
    pub const KEEP_ALIVE_FAILED: &str = "FileStore::keep_alive failed opening owned file";
}

/// Log text of the KVCR Guard service and KVCR core (kvcr 0.1.1).
pub mod kvcr_log {
    /// Prefix of every structured KVCR event: `KVCR_EVENT <name> k=v ...`.
    pub const EVENT_MARKER: &str = "KVCR_EVENT";
    /// Warning: a control message of type `start_write` KVCR refuses as
    /// malformed, naming its operation: `KVCR malformed start_write
    /// op=<handle>` (then `: <why>` where a field failed to decode).
    pub const MALFORMED_START_WRITE_OP: &str = "KVCR malformed start_write op=";
    /// The service finished startup: `KVCR service ready: socket=.. guards=N pool_sizes_bytes=(..) journal_bytes=N`.
    pub const SERVICE_READY: &str = "KVCR service ready:";
    /// Warning: the pool is claimable but cold if its primary dies.
    pub const POOL_RECOVERY_DISABLED: &str = "KVCR pool recovery disabled";
    /// `KVCR Guard N failed` (critical).
    pub const GUARD_PREFIX: &str = "KVCR Guard ";
    /// Suffix of `KVCR Guard N failed`.
    pub const GUARD_FAILED_SUFFIX: &str = " failed";
    /// Suffix of `KVCR Guard N promoted after heartbeat timeout`.
    pub const HEARTBEAT_PROMOTED_SUFFIX: &str = " promoted after heartbeat timeout";
    /// Event: the Guard promoted and serves a dead primary's pool.
    pub const EV_GUARD_PROMOTED: &str = "guard_promoted";
    /// Event (DEBUG): one stage of a promotion or handback.
    pub const EV_PROMOTION_STAGE: &str = "guard_promotion_stage";
    /// Event (DEBUG): a worker claimed and holds its Guard group.
    pub const EV_PRIMARY_ATTACHED: &str = "primary_attached";
    /// Event (DEBUG): a source was asked to write blocks to a target.
    pub const EV_SOURCE_TRANSFER_REQUESTED: &str = "source_transfer_requested";
    /// Event (DEBUG): a source finished writing blocks to a target.
    pub const EV_SOURCE_TRANSFER_COMPLETED: &str = "source_transfer_completed";
    /// Event (DEBUG): a source refused a transfer.
    pub const EV_SOURCE_TRANSFER_REFUSED: &str = "source_transfer_refused";
    /// Event (DEBUG, target side): a remote fetch started.
    pub const EV_TARGET_TRANSFER_STARTED: &str = "target_transfer_started";
    /// Event (DEBUG, target side): a remote fetch finished.
    pub const EV_TARGET_TRANSFER_COMPLETED: &str = "target_transfer_completed";
    /// `KVCR.close()` refused while an operation is unresolved (a pull from
    /// a source that never answered, docs/kvcr-findings.md 3).
    pub const CLOSE_UNRESOLVED: &str = "cannot close NIXL with unresolved operations";
}

/// The CPU engine's log lines about its KVCR (fixtures/cpu-engine
/// `cpu_engine/kvcr_events.py`): what KVCR reports only to the engine.
pub mod engine_kvcr_log {
    /// `KVCR deposit results: success=h,h failed=h dropped=-` (decimal hashes, `-` for none).
    pub const DEPOSIT_RESULTS: &str = "KVCR deposit results: ";
    /// `KVCR inventory stored tier=LOCAL_G2 hashes=h,h` (or `removed`, `tier=G3`).
    pub const INVENTORY: &str = "KVCR inventory ";
    /// `KVCR delivered request ID: from=local|g3|tcp://host:port hashes=h,h`.
    pub const DELIVERED: &str = "KVCR delivered request ";
    /// `KVCR deliver window request ID: started_ns=N ended_ns=N asked=N delivered=N`
    /// (one `deliver` call, on the host's monotonic clock).
    pub const DELIVER_WINDOW: &str = "KVCR deliver window request ";
    /// `KVCR resilience event kind=source_stalled: <KVCR's message>`.
    pub const RESILIENCE: &str = "KVCR resilience event kind=";
    /// The kind of the source-stall latch.
    pub const KIND_SOURCE_STALLED: &str = "source_stalled";
    /// `KVCR closed: Guard group N handed back` (a clean release).
    pub const CLOSED_HANDED_BACK: &str = "KVCR closed: Guard group ";
    /// `KVCR close failed: ...` (the release did not reach the Guard).
    pub const CLOSE_FAILED: &str = "KVCR close failed: ";
    /// `KVCR configuration overridden: config.operation_timeout_ms=10, ...`
    /// (WARNING at start: a field of KVCR's configuration replaced with
    /// `--kvcr-config-override`, as JSON).
    pub const CONFIG_OVERRIDDEN: &str = "KVCR configuration overridden: ";
    /// Tiers of KVCR's inventory.
    pub const TIER_LOCAL_G2: &str = "LOCAL_G2";
    pub const TIER_G3: &str = "G3";
}

/// KVCR 0.1.1 log lines a case that does not expect them fails on, and the
/// lines of the Guard service's own lifecycle (kvcr_service.py, guard.py).
pub mod kvcr_bad_lines {
    /// ERROR, logged through KVCR's default resilience handler (or the CPU
    /// engine's `KVCR resilience event kind=source_stalled`).
    pub const SOURCE_STALLED: &str = "source progress stalled";
    /// WARNING: the pool is claimable but cold if its primary dies.
    pub const POOL_RECOVERY_DISABLED: &str = "KVCR pool recovery disabled";
    /// WARNING: a spill to G3 (or another placement) failed and was dropped.
    pub const PLACEMENT_FAILED: &str = "KVCR placement failed";
    /// Python's traceback header.
    pub const TRACEBACK: &str = "Traceback (most recent call last)";
    /// WARNING with a traceback: a source refusing a write it cannot set up
    /// (a promoted Guard, for a target whose metadata it never received).
    pub const START_WRITE_SETUP_FAILED: &str = "KVCR start_write setup failed";
    /// WARNING with a traceback: a claim found a handback region whose
    /// write never finished (or that was cut short) and threw it away.
    pub const HANDBACK_DISCARDED: &str =
        "KVCR discarding a handback region that was never finished";
    /// CRITICAL: `Uncontained KVCR pool failure` (the service stops).
    pub const UNCONTAINED: &str = "Uncontained KVCR pool failure";
    /// `KVCR Guard N failed` is matched with [`super::kvcr_log::GUARD_PREFIX`]
    /// and [`super::kvcr_log::GUARD_FAILED_SUFFIX`].
    pub const GUARD_FAILED_SUFFIX: &str = super::kvcr_log::GUARD_FAILED_SUFFIX;
}

/// The Guard service's own lifecycle lines (kvcr 0.1.1 `kvcr_service.py`).
pub mod kvcr_service_log {
    /// WARNING at start: a socket left by a dead service was removed.
    pub const STALE_SOCKET_REMOVED: &str = "Removing stale KVCR service socket";
    /// INFO at start: a pool file some live process still maps was left.
    pub const POOL_STILL_IN_USE: &str = "Leaving KVCR pool still in use";
    /// WARNING at start: a pool file nobody held was removed.
    pub const ORPHAN_RECLAIMED: &str = "Reclaimed orphaned KVCR pool from a dead instance";
    /// The refusal a claim of a group some live worker holds gets.
    pub const HELD_BY_ANOTHER: &str = "is held by another worker";
    /// The refusal a claim of an index past the service's groups gets.
    pub const OUT_OF_RANGE: &str = "is out of range";
    /// The refusal a claim with another number of pools gets.
    pub const POOL_COUNT_MISMATCH: &str = "pool layout must match the number of pools in the Guard";
    /// The refusal a claim of another tier configuration gets.
    pub const OTHER_TIER_CONFIG: &str = "claimed with another tier configuration";
    /// The refusal a claim gets whose control port another process listens
    /// on (`KVCR Guard N control listener host:port is unavailable: ...`).
    pub const LISTENER_UNAVAILABLE: &str = "control listener";
    /// What a claim gets while no service listens.
    pub const UNREACHABLE: &str = "KVCR-Service is unreachable";
    /// DEBUG: a clean release wrote the group's handback region.
    pub const SNAPSHOT_WRITTEN: &str = "snapshot_written";
}

/// KVCR's command lines (kvcr 0.1.1). The Guard's flags are checked
/// against the build's own `--help` before a run (`pyenv::guard_cli`).
pub mod kvcr_cli {
    /// `python -m kvcr.kvcr_service`: the Guard service.
    pub const GUARD_MODULE: &str = "kvcr.kvcr_service";
}

/// SGLang's names: its Prometheus cache-hit metrics and the counters of
/// the `kvcr` HiCache backend (SGLang PR #36409, `kvcr_store.py`).
///
/// Every name here is **read from source, not yet seen live**: no SGLang
/// stack with the PR has run under this harness. Confirm each on the first
/// GPU run and drop this note for the ones seen.
pub mod sglang {
    /// Prefix of SGLang's Prometheus metrics (served by Dynamo's system
    /// server, like vLLM's). Read from source, not yet seen live.
    pub const PREFIX: &str = "sglang:";
    /// Counter: prompt tokens served from a cache. Newer SGLang adds a
    /// `cache_source` label (device / host / storage); older ones have none.
    /// Read from source, not yet seen live.
    pub const CACHED_TOKENS_TOTAL: &str = "sglang:cached_tokens_total";
    /// Label of [`CACHED_TOKENS_TOTAL`] naming the tier. Read from source, not yet seen live.
    pub const LABEL_CACHE_SOURCE: &str = "cache_source";
    /// `cache_source` values. Read from source, not yet seen live.
    pub const CACHE_SOURCE_DEVICE: &str = "device";
    pub const CACHE_SOURCE_HOST: &str = "host";
    pub const CACHE_SOURCE_STORAGE: &str = "storage";
    /// Counter: prompt (prefill) tokens processed. Read from source, not yet seen live.
    pub const PROMPT_TOKENS_TOTAL: &str = "sglang:prompt_tokens_total";
    /// Gauge: the prefix-cache hit rate. Read from source, not yet seen live.
    pub const CACHE_HIT_RATE: &str = "sglang:cache_hit_rate";

    /// The `kvcr` backend's INFO line, at most every 30 s and only while
    /// something is counted: `KVCRStore remote path (cumulative): k=v k=v`
    /// (sorted keys, cumulative per process; the newest line may predate the
    /// case). Read from source, not yet seen live.
    pub const KVCR_STORE_COUNTERS_MARKER: &str = "KVCRStore remote path (cumulative):";
    /// Keys of that line. Read from source, not yet seen live.
    pub mod kvcr_store {
        /// `batch_exists_v2` calls.
        pub const EXISTS_CALLS: &str = "exists_calls";
        /// Lookups that carried a router hint (optimistic: proves nothing alone).
        pub const EXISTS_WITH_HINT: &str = "exists_with_hint";
        /// Reads that carried a router hint.
        pub const GET_WITH_HINT: &str = "get_with_hint";
        /// Reads without a hint (the router named no source).
        pub const GET_WITHOUT_HINT: &str = "get_without_hint";
        /// Pages asked for / loaded, every read.
        pub const PAGES_REQUESTED: &str = "pages_requested";
        pub const PAGES_LOADED: &str = "pages_loaded";
        /// Pages asked for / loaded on hinted reads: the remote path's honest
        /// count (the README: "the only honest number").
        pub const HINTED_PAGES_REQUESTED: &str = "hinted_pages_requested";
        pub const HINTED_PAGES_LOADED: &str = "hinted_pages_loaded";
        /// Source side: pages offered to / stored in KVCR's DRAM tier.
        pub const DEPOSIT_PAGES_OFFERED: &str = "deposit_pages_offered";
        pub const DEPOSIT_PAGES_STORED: &str = "deposit_pages_stored";
        /// Prefix of per-entry-point fault counters (`faults_batch_get_v2`).
        pub const FAULTS_PREFIX: &str = "faults_";
    }

    /// Startup warning: offload will never fire (host pool smaller than the
    /// device pool). Worth failing on. Read from source, not yet seen live.
    pub const HOST_POOL_SMALLER_WARNING: &str = "is smaller than the device pool";
}

/// Names of Dynamo's HTTP frontend that the client uses.
pub mod dynamo {
    /// Request header pinning a worker instance (u64 instance id).
    pub const HEADER_WORKER_INSTANCE_ID: &str = "x-dynamo-worker-instance-id";
    /// Request header pinning a data-parallel rank.
    pub const HEADER_DP_RANK: &str = "x-dynamo-dp-rank";
    /// `nvext.extra_fields` entry asking for the serving worker's identity.
    pub const EXTRA_FIELD_WORKER_ID: &str = "worker_id";
    /// `nvext.extra_fields` entry asking for timing (`ttft_ms`, `kv_hit_rate`).
    pub const EXTRA_FIELD_TIMING: &str = "timing";
    /// `nvext.extra_fields` entry (Dynamo 1.6.1) asking for the generated
    /// token ids; they come back in `nvext.completion_token_ids`, per chunk
    /// when streaming.
    pub const EXTRA_FIELD_COMPLETION_TOKEN_IDS: &str = "completion_token_ids";
    /// Health endpoint path.
    pub const PATH_HEALTH: &str = "/health";
    /// Model list path.
    pub const PATH_MODELS: &str = "/v1/models";
    /// Completions path.
    pub const PATH_COMPLETIONS: &str = "/v1/completions";
}

macro_rules! label_enum {
    (
        $(#[$doc:meta])*
        $name:ident { $( $(#[$vdoc:meta])* $variant:ident => $label:literal ),* $(,)? }
    ) => {
        $(#[$doc])*
        ///
        /// Compared, ordered and hashed by its label: `Other` holding a
        /// named label is the named value.
        #[derive(Debug, Clone)]
        pub enum $name {
            $( $(#[$vdoc])* $variant, )*
            /// A label value this harness has no name for (kept verbatim).
            Other(String),
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.label() == other.label()
            }
        }

        impl Eq for $name {}

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $name {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.label().cmp(other.label())
            }
        }

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.label().hash(state)
            }
        }

        impl $name {
            /// The label value as the system under test writes it.
            pub fn label(&self) -> &str {
                match self {
                    $( $name::$variant => $label, )*
                    $name::Other(s) => s.as_str(),
                }
            }

            /// The meaning of a label value; unknown values become `Other`.
            pub fn from_label(s: &str) -> Self {
                match s {
                    $( $label => $name::$variant, )*
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.label())
            }
        }
    };
}

label_enum! {
    /// KVCR operation scope (`scope` label of `kvcr_*` metrics).
    Scope {
        /// Filling the local pool from engine memory (deposit).
        LocalFill => "local_fill",
        /// Delivering local pool blocks into engine memory.
        LocalDeliver => "local_deliver",
        /// Target side: blocks delivered from a peer (carries blocks, not bytes).
        RemoteDeliver => "remote_deliver",
        /// Target side: a remote fetch.
        RemoteFetch => "remote_fetch",
        /// Source side: blocks written to a peer (carries bytes).
        SourceWrite => "source_write",
        /// A NIXL transfer.
        Transfer => "transfer",
        /// Posting a NIXL transfer.
        TransferPost => "transfer_post",
        /// Submitting a transfer.
        TransferSubmit => "transfer_submit",
        /// Waiting for a router hint.
        HintWait => "hint_wait",
        /// Connecting to a peer.
        PeerSetup => "peer_setup",
        /// Enqueueing a control message.
        ControlEnqueue => "control_enqueue",
        /// Handling a source's acknowledgement of the target's NIXL
        /// metadata (target side, `handled`).
        ControlTargetMetadataAck => "control_target_metadata_ack",
        /// Waiting for the framework to pin memory.
        FrameworkPinWait => "framework_pin_wait",
        /// Acquiring a source.
        SourceAcquire => "source_acquire",
        /// Storing into the G3 (disk) tier.
        G3Store => "g3_store",
        /// Filling from the G3 tier.
        G3Fill => "g3_fill",
        /// Delivering from the G3 tier.
        G3Deliver => "g3_deliver",
    }
}

label_enum! {
    /// Outcome of a KVCR operation (`result` label of `kvcr_duration_seconds`).
    OpResult {
        /// Fully succeeded.
        Success => "success",
        /// Some blocks delivered, some not.
        Partial => "partial",
        /// Failed.
        Failed => "failed",
        /// Completed (`hint_wait`).
        Complete => "complete",
        /// New connection (`peer_setup`).
        Connected => "connected",
        /// Reused connection (`peer_setup`).
        Reused => "reused",
        /// Control message handled.
        Handled => "handled",
        /// Timed out (`framework_pin_wait`).
        Timeout => "timeout",
        /// Cancelled (`framework_pin_wait`).
        Cancelled => "cancelled",
        /// Waiting for a framework pin (`source_acquire`).
        Pending => "pending",
    }
}

label_enum! {
    /// KVCR state gauge resource (`resource` label of `kvcr_state`).
    Resource {
        /// Block records known.
        BlockRecords => "block_records",
        /// Operations in flight.
        InFlightOps => "in_flight_ops",
        /// Framework pins held.
        FrameworkPins => "framework_pins",
        /// Keys pinned.
        PinnedKeys => "pinned_keys",
        /// Connected remote peers.
        ConnectedRemotes => "connected_remotes",
        /// Completed operations awaiting poll.
        Completed => "completed",
        /// Local pool slots, total.
        LocalG2TotalSlots => "local_g2_total_slots",
        /// Local pool slots, free.
        LocalG2FreeSlots => "local_g2_free_slots",
        /// Local pool slots, allocated.
        LocalG2AllocatedSlots => "local_g2_allocated_slots",
        /// Local pool slots, evictable.
        LocalG2EvictableSlots => "local_g2_evictable_slots",
        /// Disk tier (G3) slots, total.
        G3TotalSlots => "g3_total_slots",
        /// Disk tier slots, free.
        G3FreeSlots => "g3_free_slots",
        /// Disk tier slots, allocated.
        G3AllocatedSlots => "g3_allocated_slots",
        /// Disk tier slots, evictable.
        G3EvictableSlots => "g3_evictable_slots",
        /// Spills to disk in flight.
        G3PendingStores => "g3_pending_stores",
    }
}

/// An offload tier of vLLM's tiering connector (`tier` label, `N:type`).
///
/// The index depends on the configuration; matching uses the type after
/// the colon (`*:kvcr` is [`Tier::Kvcr`], `*:cpu` is [`Tier::Host`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// The engine-owned host tier (`0:primary` in vLLM 0.32, `0:cpu` before).
    Host,
    /// The KVCR tier (`1:kvcr`).
    Kvcr,
    /// Any other tier, label kept verbatim.
    Other(String),
}

impl Tier {
    /// The canonical label value (`0:cpu`, `1:kvcr`).
    pub fn label(&self) -> &str {
        match self {
            Tier::Host => "0:primary",
            Tier::Kvcr => "1:kvcr",
            Tier::Other(s) => s,
        }
    }

    /// The tier of a label value, matched on the type after the colon.
    pub fn from_label(s: &str) -> Self {
        let kind = s.rsplit(':').next().unwrap_or(s);
        match kind {
            "kvcr" => Tier::Kvcr,
            "cpu" | "primary" => Tier::Host,
            _ => Tier::Other(s.to_string()),
        }
    }

    fn short(&self) -> &str {
        match self {
            Tier::Host => "host",
            Tier::Kvcr => "kvcr",
            Tier::Other(s) => s,
        }
    }

    fn from_short(s: &str) -> Self {
        match s {
            "host" => Tier::Host,
            "kvcr" => Tier::Kvcr,
            other => Tier::from_label(other),
        }
    }
}

/// A monotonic counter, by meaning. Deltas of these are what cases gate on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// KVCR blocks moved in a scope (`kvcr_transfer_blocks`).
    TransferBlocks(Scope),
    /// KVCR bytes moved in a scope (`kvcr_transfer_bytes`).
    TransferBytes(Scope),
    /// Number of KVCR operations of a scope with a result (`kvcr_duration_seconds_count`).
    OpCount(Scope, OpResult),
    /// Total seconds of KVCR operations of a scope with a result (`kvcr_duration_seconds_sum`).
    OpSeconds(Scope, OpResult),
    /// Bytes loaded into the device cache from a tier (`kv_offload_tiering_read_bytes`).
    TieringReadBytes(Tier),
    /// Bytes stored into a tier (`kv_offload_tiering_write_bytes`).
    TieringWriteBytes(Tier),
    /// Pages of one kind (`attn`, `ssm`) KVCR delivered into the device
    /// cache, counted page by page as written (the CPU engine's
    /// `cpu_engine_kvcr_read_pages{kind}`).
    KvcrReadPages(String),
    /// Time spent reading from a tier (`kv_offload_tiering_read_time`).
    TieringReadTime(Tier),
    /// Time spent writing to a tier (`kv_offload_tiering_write_time`).
    TieringWriteTime(Tier),
    /// Failed cascade jobs of the tiering connector, all tiers summed. May rise
    /// harmlessly when `secondary_g2_slots` is 0.
    TieringCascadeJobFailures,
    /// Prompt tokens looked up in the device prefix cache.
    PrefixCacheQueries,
    /// Prompt tokens found in the device prefix cache.
    PrefixCacheHits,
    /// Prompt tokens looked up outside the device cache (host tier, KVCR).
    ExternalPrefixCacheQueries,
    /// Prompt tokens found outside the device cache.
    ExternalPrefixCacheHits,
    /// Blocks evicted from the device cache (CPU engine only).
    DeviceCacheEvictions,
    /// Prompt blocks computed by prefill (CPU engine only).
    ComputedBlocks,
    /// Blocks a deposit found KVCR's pool still filling from another
    /// request's deposit (CPU engine only).
    KvcrDepositMetFillingBlocks,
    /// Requests served, by outcome (CPU engine only).
    Requests(String),
    /// Blocks of the engine's KVCR deposits, by KVCR's per-block outcome
    /// (`success`, `failed`, `dropped`; CPU engine only: KVCR itself counts
    /// no failed deposit).
    KvcrDepositBlocks(String),
    /// Blocks of KVCR's inventory events (its `inventory_sink`), by tier
    /// (`LOCAL_G2`, `G3`) and event (`stored`, `removed`); CPU engine only.
    KvcrInventoryBlocks(String, String),
    /// KVCR resilience events (`on_resilience_event`), by kind
    /// (`source_stalled`, `transfer_error`, `other`); CPU engine only.
    KvcrResilienceEvents(String),
    /// Blocks of the engine's own memory KVCR pinned for a peer's read, or
    /// released, by tier (`device`, `host`) and event (`pinned`,
    /// `released`); CPU engine only (`cpu_engine_kvcr_framework_pin_blocks`).
    KvcrFrameworkPinBlocks(String, String),
    /// Blocks the engine staged into KVCR's pool with `KVCR.fetch`, by event
    /// (`fetched`, `failed`, `released`: a fetched block's claim given
    /// back); CPU engine only (`cpu_engine_kvcr_fetch_blocks`).
    KvcrFetchBlocks(String),
    /// Times KVCR asked the engine for capacity (its
    /// `capacity_needed_callback`), by pool; CPU engine only
    /// (`cpu_engine_kvcr_capacity_needed`).
    KvcrCapacityNeeded(String),
    /// Calls KVCR made to the engine's own placement policy
    /// (`--placement-policy counting`), by hook (`decide_ingest`,
    /// `eviction_score`, `decide_eviction`, `decide_recovery`, `on_ingest`,
    /// `on_remove`, `on_align_sequence`) and answer (`answered`, or the
    /// misbehaviour the `hostile_policy` switch made of it); CPU engine only
    /// (`cpu_engine_kvcr_policy_calls`).
    KvcrPolicyCalls(String, String),
    /// Block metas KVCR handed the engine's own placement policy, by hook
    /// (as [`Counter::KvcrPolicyCalls`]; each block of an
    /// `on_align_sequence` list counts) and by the tiers KVCR said the block
    /// is resident in (`tiers`: KVCR's `CacheTier` names, sorted, joined by
    /// `+`, e.g. `LOCAL_G2`, `FW_G2+LOCAL_G2`; `none` for no tier); CPU
    /// engine only (`cpu_engine_kvcr_policy_block_tiers`).
    KvcrPolicyBlockTiers(String, String),
    /// Tokens the engine generated (`vllm:generation_tokens`; vLLM only). A
    /// prefill worker generates one per request, when it answers.
    GenerationTokens,
    /// Successful NIXL reads of vLLM's NixlConnector, counted by the side
    /// that reads (the decode of a P→D pull): `vllm:nixl_bytes_transferred_count`.
    NixlTransfers,
    /// Bytes those reads moved (`vllm:nixl_bytes_transferred_sum`).
    NixlTransferBytes,
    /// Failed NixlConnector transfers, handshakes and notifications
    /// (`vllm:nixl_num_failed_transfers`).
    NixlFailedTransfers,
}

/// A gauge, by meaning: a level, not a count. Never gate on its delta.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Gauge {
    /// KVCR state gauge (`kvcr_state{resource}`).
    State(Resource),
}

/// Either kind of meaning.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Meaning {
    /// A counter.
    Counter(Counter),
    /// A gauge.
    Gauge(Gauge),
}

/// How a meaning is written as a Prometheus sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromName {
    /// The sample name as exposed (with `_total` for counters).
    pub name: String,
    /// Labels that identify the meaning (extra labels are allowed).
    pub labels: Vec<(&'static str, String)>,
}

impl fmt::Display for PromName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.labels.is_empty() {
            f.write_str("{")?;
            for (i, (k, v)) in self.labels.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{k}=\"{v}\"")?;
            }
            f.write_str("}")?;
        }
        Ok(())
    }
}

/// Metric families, their base names (without `_total`) and label names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    TransferBlocks,
    TransferBytes,
    DurationCount,
    DurationSum,
    State,
    TieringReadBytes,
    TieringWriteBytes,
    TieringReadTime,
    TieringWriteTime,
    TieringCascadeJobFailures,
    PrefixCacheQueries,
    PrefixCacheHits,
    ExternalPrefixCacheQueries,
    ExternalPrefixCacheHits,
    DeviceCacheEvictions,
    ComputedBlocks,
    KvcrDepositMetFillingBlocks,
    Requests,
    KvcrReadPages,
    KvcrDepositBlocks,
    KvcrInventoryBlocks,
    KvcrResilienceEvents,
    KvcrFrameworkPinBlocks,
    KvcrFetchBlocks,
    KvcrCapacityNeeded,
    KvcrPolicyCalls,
    KvcrPolicyBlockTiers,
    GenerationTokens,
    NixlTransfers,
    NixlTransferBytes,
    NixlFailedTransfers,
}

const FAMILIES: &[Family] = &[
    Family::TransferBlocks,
    Family::TransferBytes,
    Family::DurationCount,
    Family::DurationSum,
    Family::State,
    Family::TieringReadBytes,
    Family::TieringWriteBytes,
    Family::TieringReadTime,
    Family::TieringWriteTime,
    Family::TieringCascadeJobFailures,
    Family::PrefixCacheQueries,
    Family::PrefixCacheHits,
    Family::ExternalPrefixCacheQueries,
    Family::ExternalPrefixCacheHits,
    Family::DeviceCacheEvictions,
    Family::ComputedBlocks,
    Family::KvcrDepositMetFillingBlocks,
    Family::Requests,
    Family::KvcrReadPages,
    Family::KvcrDepositBlocks,
    Family::KvcrInventoryBlocks,
    Family::KvcrResilienceEvents,
    Family::KvcrFrameworkPinBlocks,
    Family::KvcrFetchBlocks,
    Family::KvcrCapacityNeeded,
    Family::KvcrPolicyCalls,
    Family::KvcrPolicyBlockTiers,
    Family::GenerationTokens,
    Family::NixlTransfers,
    Family::NixlTransferBytes,
    Family::NixlFailedTransfers,
];

impl Family {
    /// Base name without `_total`; histogram parts carry `_count` / `_sum`.
    fn base(self) -> &'static str {
        match self {
            Family::TransferBlocks => "vllm:kvcr_transfer_blocks",
            Family::TransferBytes => "vllm:kvcr_transfer_bytes",
            Family::DurationCount => "vllm:kvcr_duration_seconds_count",
            Family::DurationSum => "vllm:kvcr_duration_seconds_sum",
            Family::State => "vllm:kvcr_state",
            Family::TieringReadBytes => "vllm:kv_offload_tiering_read_bytes",
            Family::TieringWriteBytes => "vllm:kv_offload_tiering_write_bytes",
            Family::TieringReadTime => "vllm:kv_offload_tiering_read_time",
            Family::TieringWriteTime => "vllm:kv_offload_tiering_write_time",
            Family::TieringCascadeJobFailures => "vllm:kv_offload_tiering_cascade_job_failures",
            Family::PrefixCacheQueries => "vllm:prefix_cache_queries",
            Family::PrefixCacheHits => "vllm:prefix_cache_hits",
            Family::ExternalPrefixCacheQueries => "vllm:external_prefix_cache_queries",
            Family::ExternalPrefixCacheHits => "vllm:external_prefix_cache_hits",
            Family::DeviceCacheEvictions => "cpu_engine_device_cache_evictions",
            Family::ComputedBlocks => "cpu_engine_computed_blocks",
            Family::KvcrDepositMetFillingBlocks => "cpu_engine_kvcr_deposit_met_filling_blocks",
            Family::Requests => "cpu_engine_requests",
            Family::KvcrReadPages => "cpu_engine_kvcr_read_pages",
            Family::KvcrDepositBlocks => "cpu_engine_kvcr_deposit_blocks",
            Family::KvcrInventoryBlocks => "cpu_engine_kvcr_inventory_blocks",
            Family::KvcrResilienceEvents => "cpu_engine_kvcr_resilience_events",
            Family::KvcrFrameworkPinBlocks => "cpu_engine_kvcr_framework_pin_blocks",
            Family::KvcrFetchBlocks => "cpu_engine_kvcr_fetch_blocks",
            Family::KvcrCapacityNeeded => "cpu_engine_kvcr_capacity_needed",
            Family::KvcrPolicyCalls => "cpu_engine_kvcr_policy_calls",
            Family::KvcrPolicyBlockTiers => "cpu_engine_kvcr_policy_block_tiers",
            Family::GenerationTokens => "vllm:generation_tokens",
            Family::NixlTransfers => "vllm:nixl_bytes_transferred_count",
            Family::NixlTransferBytes => "vllm:nixl_bytes_transferred_sum",
            Family::NixlFailedTransfers => "vllm:nixl_num_failed_transfers",
        }
    }

    /// Whether the exposition adds `_total` (counters do, histogram parts and gauges don't).
    fn has_total_suffix(self) -> bool {
        !matches!(
            self,
            Family::DurationCount
                | Family::DurationSum
                | Family::State
                | Family::NixlTransfers
                | Family::NixlTransferBytes
        )
    }

    /// Identifying label names, in the order of the interval log's tuple.
    fn label_names(self) -> &'static [&'static str] {
        match self {
            // vLLM 0.32's adapter labels these `operation` (not `scope`).
            Family::TransferBlocks | Family::TransferBytes => &["operation"],
            Family::DurationCount | Family::DurationSum => &["scope", "result"],
            Family::State => &["resource"],
            Family::TieringReadBytes
            | Family::TieringWriteBytes
            | Family::TieringReadTime
            | Family::TieringWriteTime => &["tier"],
            Family::Requests => &["outcome"],
            Family::KvcrReadPages => &["kind"],
            Family::KvcrDepositBlocks => &["outcome"],
            Family::KvcrInventoryBlocks => &["tier", "event"],
            Family::KvcrResilienceEvents => &["kind"],
            Family::KvcrFrameworkPinBlocks => &["tier", "event"],
            Family::KvcrFetchBlocks => &["event"],
            Family::KvcrCapacityNeeded => &["pool"],
            Family::KvcrPolicyCalls => &["hook", "answer"],
            Family::KvcrPolicyBlockTiers => &["hook", "tiers"],
            _ => &[],
        }
    }

    /// Histogram families in the interval log: the tuple comes before `_count`.
    fn interval_parts(self) -> (&'static str, &'static str) {
        match self {
            Family::DurationCount => ("vllm:kvcr_duration_seconds", "_count"),
            Family::DurationSum => ("vllm:kvcr_duration_seconds", "_sum"),
            other => (other.base(), ""),
        }
    }

    /// Whether vLLM reports this family in the interval log line.
    fn in_interval_log(self) -> bool {
        self.base().starts_with("vllm:kvcr_") || self.base().starts_with("vllm:kv_offload_")
    }

    /// The meaning of one sample of this family, given a label lookup.
    fn meaning(self, label: &dyn Fn(&str) -> Option<String>) -> Option<Meaning> {
        let scope = || label("scope").map(|s| Scope::from_label(&s));
        // Block and byte counters carry the scope as `operation`; older
        // exporters (and the CPU engine before it matched vLLM) as `scope`.
        let operation = || {
            label("operation")
                .or_else(|| label("scope"))
                .map(|s| Scope::from_label(&s))
        };
        let result = || label("result").map(|s| OpResult::from_label(&s));
        let tier = || label("tier").map(|s| Tier::from_label(&s));
        let c = match self {
            Family::TransferBlocks => Counter::TransferBlocks(operation()?),
            Family::TransferBytes => Counter::TransferBytes(operation()?),
            Family::DurationCount => Counter::OpCount(scope()?, result()?),
            Family::DurationSum => Counter::OpSeconds(scope()?, result()?),
            Family::State => {
                let r = label("resource")?;
                return Some(Meaning::Gauge(Gauge::State(Resource::from_label(&r))));
            }
            Family::TieringReadBytes => Counter::TieringReadBytes(tier()?),
            Family::TieringWriteBytes => Counter::TieringWriteBytes(tier()?),
            Family::TieringReadTime => Counter::TieringReadTime(tier()?),
            Family::TieringWriteTime => Counter::TieringWriteTime(tier()?),
            Family::TieringCascadeJobFailures => Counter::TieringCascadeJobFailures,
            Family::PrefixCacheQueries => Counter::PrefixCacheQueries,
            Family::PrefixCacheHits => Counter::PrefixCacheHits,
            Family::ExternalPrefixCacheQueries => Counter::ExternalPrefixCacheQueries,
            Family::ExternalPrefixCacheHits => Counter::ExternalPrefixCacheHits,
            Family::DeviceCacheEvictions => Counter::DeviceCacheEvictions,
            Family::ComputedBlocks => Counter::ComputedBlocks,
            Family::KvcrDepositMetFillingBlocks => Counter::KvcrDepositMetFillingBlocks,
            Family::Requests => Counter::Requests(label("outcome").unwrap_or_default()),
            Family::KvcrReadPages => Counter::KvcrReadPages(label("kind")?),
            Family::KvcrDepositBlocks => Counter::KvcrDepositBlocks(label("outcome")?),
            Family::KvcrInventoryBlocks => {
                Counter::KvcrInventoryBlocks(label("tier")?, label("event")?)
            }
            Family::KvcrResilienceEvents => Counter::KvcrResilienceEvents(label("kind")?),
            Family::KvcrFrameworkPinBlocks => {
                Counter::KvcrFrameworkPinBlocks(label("tier")?, label("event")?)
            }
            Family::KvcrFetchBlocks => Counter::KvcrFetchBlocks(label("event")?),
            Family::KvcrCapacityNeeded => Counter::KvcrCapacityNeeded(label("pool")?),
            Family::KvcrPolicyCalls => Counter::KvcrPolicyCalls(label("hook")?, label("answer")?),
            Family::KvcrPolicyBlockTiers => {
                Counter::KvcrPolicyBlockTiers(label("hook")?, label("tiers")?)
            }
            Family::GenerationTokens => Counter::GenerationTokens,
            Family::NixlTransfers => Counter::NixlTransfers,
            Family::NixlTransferBytes => Counter::NixlTransferBytes,
            Family::NixlFailedTransfers => Counter::NixlFailedTransfers,
        };
        Some(Meaning::Counter(c))
    }
}

/// What a source's silence about a counter means. Declared per meaning in
/// [`Counter::when_absent`]; a verdict never reads an absent counter as 0
/// unless its meaning says so here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenAbsent {
    /// The source must report it: absent fails the verdict that reads it.
    NotReported,
    /// A labelled series that exists only after its first event (KVCR fills
    /// only the `(scope, result)` pairs an interval saw; the tiering connector
    /// adds a tier's series on its first load or store). Absent while its
    /// family is reported means 0; absent with its whole family means not
    /// reported.
    ZeroBeforeFirstEvent,
}

impl Counter {
    /// Whether absence of this counter can mean 0 (see [`WhenAbsent`]).
    pub fn when_absent(&self) -> WhenAbsent {
        match self {
            Counter::TransferBlocks(_)
            | Counter::TransferBytes(_)
            | Counter::OpCount(..)
            | Counter::OpSeconds(..)
            | Counter::TieringReadBytes(_)
            | Counter::TieringWriteBytes(_)
            | Counter::TieringReadTime(_)
            | Counter::TieringWriteTime(_)
            | Counter::Requests(_)
            | Counter::KvcrReadPages(_)
            | Counter::KvcrDepositBlocks(_)
            | Counter::KvcrInventoryBlocks(..)
            | Counter::KvcrResilienceEvents(_)
            | Counter::KvcrFrameworkPinBlocks(..)
            | Counter::KvcrFetchBlocks(_)
            | Counter::KvcrCapacityNeeded(_)
            | Counter::KvcrPolicyCalls(..)
            | Counter::KvcrPolicyBlockTiers(..) => WhenAbsent::ZeroBeforeFirstEvent,
            Counter::TieringCascadeJobFailures
            | Counter::PrefixCacheQueries
            | Counter::PrefixCacheHits
            | Counter::ExternalPrefixCacheQueries
            | Counter::ExternalPrefixCacheHits
            | Counter::DeviceCacheEvictions
            | Counter::ComputedBlocks
            | Counter::KvcrDepositMetFillingBlocks
            | Counter::GenerationTokens
            | Counter::NixlTransfers
            | Counter::NixlTransferBytes
            | Counter::NixlFailedTransfers => WhenAbsent::NotReported,
        }
    }

    /// The family this counter belongs to, as [`families_named`] returns it.
    pub fn family_name(&self) -> &'static str {
        self.family_and_labels().0.base()
    }
}

/// The known families a sample name or a `# TYPE` name belongs to (a
/// histogram's `# TYPE` name covers its `_count` and `_sum` families).
pub fn families_named(name: &str) -> impl Iterator<Item = &'static str> + '_ {
    FAMILIES.iter().map(|f| f.base()).filter(move |base| {
        name == *base
            || name.strip_suffix("_total") == Some(*base)
            || [name, "_count"].concat() == *base
            || [name, "_sum"].concat() == *base
    })
}

impl Counter {
    fn family_and_labels(&self) -> (Family, Vec<String>) {
        match self {
            Counter::TransferBlocks(s) => (Family::TransferBlocks, vec![s.label().into()]),
            Counter::TransferBytes(s) => (Family::TransferBytes, vec![s.label().into()]),
            Counter::OpCount(s, r) => (
                Family::DurationCount,
                vec![s.label().into(), r.label().into()],
            ),
            Counter::OpSeconds(s, r) => (
                Family::DurationSum,
                vec![s.label().into(), r.label().into()],
            ),
            Counter::TieringReadBytes(t) => (Family::TieringReadBytes, vec![t.label().into()]),
            Counter::TieringWriteBytes(t) => (Family::TieringWriteBytes, vec![t.label().into()]),
            Counter::TieringReadTime(t) => (Family::TieringReadTime, vec![t.label().into()]),
            Counter::TieringWriteTime(t) => (Family::TieringWriteTime, vec![t.label().into()]),
            Counter::TieringCascadeJobFailures => (Family::TieringCascadeJobFailures, vec![]),
            Counter::PrefixCacheQueries => (Family::PrefixCacheQueries, vec![]),
            Counter::PrefixCacheHits => (Family::PrefixCacheHits, vec![]),
            Counter::ExternalPrefixCacheQueries => (Family::ExternalPrefixCacheQueries, vec![]),
            Counter::ExternalPrefixCacheHits => (Family::ExternalPrefixCacheHits, vec![]),
            Counter::DeviceCacheEvictions => (Family::DeviceCacheEvictions, vec![]),
            Counter::ComputedBlocks => (Family::ComputedBlocks, vec![]),
            Counter::KvcrDepositMetFillingBlocks => (Family::KvcrDepositMetFillingBlocks, vec![]),
            Counter::Requests(o) => (Family::Requests, vec![o.clone()]),
            Counter::KvcrReadPages(k) => (Family::KvcrReadPages, vec![k.clone()]),
            Counter::KvcrDepositBlocks(o) => (Family::KvcrDepositBlocks, vec![o.clone()]),
            Counter::KvcrInventoryBlocks(t, e) => {
                (Family::KvcrInventoryBlocks, vec![t.clone(), e.clone()])
            }
            Counter::KvcrResilienceEvents(k) => (Family::KvcrResilienceEvents, vec![k.clone()]),
            Counter::KvcrFrameworkPinBlocks(t, e) => {
                (Family::KvcrFrameworkPinBlocks, vec![t.clone(), e.clone()])
            }
            Counter::KvcrFetchBlocks(e) => (Family::KvcrFetchBlocks, vec![e.clone()]),
            Counter::KvcrCapacityNeeded(p) => (Family::KvcrCapacityNeeded, vec![p.clone()]),
            Counter::KvcrPolicyCalls(h, a) => (Family::KvcrPolicyCalls, vec![h.clone(), a.clone()]),
            Counter::KvcrPolicyBlockTiers(h, t) => {
                (Family::KvcrPolicyBlockTiers, vec![h.clone(), t.clone()])
            }
            Counter::GenerationTokens => (Family::GenerationTokens, vec![]),
            Counter::NixlTransfers => (Family::NixlTransfers, vec![]),
            Counter::NixlTransferBytes => (Family::NixlTransferBytes, vec![]),
            Counter::NixlFailedTransfers => (Family::NixlFailedTransfers, vec![]),
        }
    }

    /// The Prometheus sample this counter is exposed as (canonical form, with `_total`).
    pub fn prometheus(&self) -> PromName {
        let (fam, values) = self.family_and_labels();
        prom_name(fam, values)
    }

    /// The key of this counter in vLLM's interval log line, if vLLM logs it there.
    pub fn interval_key(&self) -> Option<String> {
        let (fam, values) = self.family_and_labels();
        interval_key(fam, &values)
    }
}

impl Gauge {
    /// The Prometheus sample this gauge is exposed as.
    pub fn prometheus(&self) -> PromName {
        let Gauge::State(r) = self;
        prom_name(Family::State, vec![r.label().into()])
    }

    /// The key of this gauge in vLLM's interval log line.
    pub fn interval_key(&self) -> Option<String> {
        let Gauge::State(r) = self;
        interval_key(Family::State, &[r.label().to_string()])
    }
}

fn prom_name(fam: Family, values: Vec<String>) -> PromName {
    let name = if fam.has_total_suffix() {
        format!("{}_total", fam.base())
    } else {
        fam.base().to_string()
    };
    let labels = fam.label_names().iter().copied().zip(values).collect();
    PromName { name, labels }
}

fn interval_key(fam: Family, values: &[String]) -> Option<String> {
    if !fam.in_interval_log() {
        return None;
    }
    let (name, suffix) = fam.interval_parts();
    if values.is_empty() {
        return Some(format!("{name}{suffix}"));
    }
    let mut tuple = String::from("(");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            tuple.push_str(", ");
        }
        tuple.push_str(&python_str_repr(v));
    }
    if values.len() == 1 {
        tuple.push(',');
    }
    tuple.push(')');
    Some(format!("{name}:{tuple}{suffix}"))
}

/// Python's `repr()` of a str (enough for label values).
fn python_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The meaning of a Prometheus sample, or `None` for samples the harness
/// does not use (histogram buckets, `_created`, other metrics).
pub fn meaning_of_sample(name: &str, labels: &[(String, String)]) -> Option<Meaning> {
    let lookup = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    for &fam in FAMILIES {
        let base = fam.base();
        let matches = name == base
            || (fam.has_total_suffix()
                && name.len() == base.len() + 6
                && name.starts_with(base)
                && name.ends_with("_total"));
        if matches {
            return fam.meaning(&lookup);
        }
    }
    None
}

/// The meaning of an interval-log key such as
/// `vllm:kvcr_duration_seconds:('remote_deliver', 'success')_count`.
pub fn meaning_of_interval_key(key: &str) -> Option<Meaning> {
    let key = key.trim();
    let (name, values, suffix) = match key.find(":(") {
        Some(i) => {
            let name = &key[..i];
            let rest = &key[i + 1..];
            let close = super::fields::matching_close(rest)?;
            let values = super::fields::parse_python_tuple(&rest[..=close])?;
            (name, values, &rest[close + 1..])
        }
        None => {
            // No labels: `vllm:name`, `vllm:name_count`.
            (key, Vec::new(), "")
        }
    };
    for &fam in FAMILIES {
        if !fam.in_interval_log() {
            continue;
        }
        let (fname, fsuffix) = fam.interval_parts();
        let hit = if values.is_empty() && suffix.is_empty() {
            name == format!("{fname}{fsuffix}") || (fsuffix.is_empty() && name == fname)
        } else {
            name == fname && suffix == fsuffix
        };
        if hit {
            let names = fam.label_names();
            let lookup = |k: &str| {
                names
                    .iter()
                    .position(|n| *n == k)
                    .and_then(|i| values.get(i).cloned())
            };
            return fam.meaning(&lookup);
        }
    }
    None
}

// ---------------------------------------------------------------------------
// Display / FromStr: the engine-neutral form used in evidence.

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Counter::TransferBlocks(s) => write!(f, "transfer_blocks{{scope={s}}}"),
            Counter::TransferBytes(s) => write!(f, "transfer_bytes{{scope={s}}}"),
            Counter::OpCount(s, r) => write!(f, "op_count{{scope={s},result={r}}}"),
            Counter::OpSeconds(s, r) => write!(f, "op_seconds{{scope={s},result={r}}}"),
            Counter::TieringReadBytes(t) => write!(f, "tiering_read_bytes{{tier={}}}", t.short()),
            Counter::TieringWriteBytes(t) => {
                write!(f, "tiering_write_bytes{{tier={}}}", t.short())
            }
            Counter::TieringReadTime(t) => write!(f, "tiering_read_time{{tier={}}}", t.short()),
            Counter::TieringWriteTime(t) => write!(f, "tiering_write_time{{tier={}}}", t.short()),
            Counter::TieringCascadeJobFailures => f.write_str("tiering_cascade_job_failures"),
            Counter::PrefixCacheQueries => f.write_str("prefix_cache_queries"),
            Counter::PrefixCacheHits => f.write_str("prefix_cache_hits"),
            Counter::ExternalPrefixCacheQueries => f.write_str("external_prefix_cache_queries"),
            Counter::ExternalPrefixCacheHits => f.write_str("external_prefix_cache_hits"),
            Counter::DeviceCacheEvictions => f.write_str("device_cache_evictions"),
            Counter::ComputedBlocks => f.write_str("computed_blocks"),
            Counter::KvcrDepositMetFillingBlocks => f.write_str("kvcr_deposit_met_filling_blocks"),
            Counter::Requests(o) => write!(f, "requests{{outcome={o}}}"),
            Counter::KvcrReadPages(k) => write!(f, "kvcr_read_pages{{kind={k}}}"),
            Counter::KvcrDepositBlocks(o) => write!(f, "kvcr_deposit_blocks{{outcome={o}}}"),
            Counter::KvcrInventoryBlocks(t, e) => {
                write!(f, "kvcr_inventory_blocks{{tier={t},event={e}}}")
            }
            Counter::KvcrResilienceEvents(k) => write!(f, "kvcr_resilience_events{{kind={k}}}"),
            Counter::KvcrFrameworkPinBlocks(t, e) => {
                write!(f, "kvcr_framework_pin_blocks{{tier={t},event={e}}}")
            }
            Counter::KvcrFetchBlocks(e) => write!(f, "kvcr_fetch_blocks{{event={e}}}"),
            Counter::KvcrCapacityNeeded(p) => write!(f, "kvcr_capacity_needed{{pool={p}}}"),
            Counter::KvcrPolicyCalls(h, a) => {
                write!(f, "kvcr_policy_calls{{hook={h},answer={a}}}")
            }
            Counter::KvcrPolicyBlockTiers(h, t) => {
                write!(f, "kvcr_policy_block_tiers{{hook={h},tiers={t}}}")
            }
            Counter::GenerationTokens => f.write_str("generation_tokens"),
            Counter::NixlTransfers => f.write_str("nixl_transfers"),
            Counter::NixlTransferBytes => f.write_str("nixl_transfer_bytes"),
            Counter::NixlFailedTransfers => f.write_str("nixl_failed_transfers"),
        }
    }
}

impl fmt::Display for Gauge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Gauge::State(r) = self;
        write!(f, "state{{resource={r}}}")
    }
}

impl fmt::Display for Meaning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Meaning::Counter(c) => c.fmt(f),
            Meaning::Gauge(g) => g.fmt(f),
        }
    }
}

/// A string that is not the `Display` form of a meaning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a telemetry meaning (expected e.g. `transfer_blocks{{scope=remote_deliver}}`)"
)]
pub struct UnknownMeaning(pub String);

/// Splits `name{k=v,k=v}` into the name and its label lookup.
/// A display form split into its name and `(label, value)` pairs.
type DisplayParts<'a> = (&'a str, Vec<(&'a str, &'a str)>);

fn split_display(s: &str) -> Result<DisplayParts<'_>, UnknownMeaning> {
    let bad = || UnknownMeaning(s.to_string());
    match s.find('{') {
        None => Ok((s, Vec::new())),
        Some(i) => {
            let inner = s[i + 1..].strip_suffix('}').ok_or_else(bad)?;
            let mut labels = Vec::new();
            for part in inner.split(',') {
                let (k, v) = part.split_once('=').ok_or_else(bad)?;
                labels.push((k, v));
            }
            Ok((&s[..i], labels))
        }
    }
}

impl FromStr for Counter {
    type Err = UnknownMeaning;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || UnknownMeaning(s.to_string());
        let (name, labels) = split_display(s)?;
        let get = |k: &str| {
            labels
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| *v)
                .ok_or_else(bad)
        };
        Ok(match name {
            "transfer_blocks" => Counter::TransferBlocks(Scope::from_label(get("scope")?)),
            "transfer_bytes" => Counter::TransferBytes(Scope::from_label(get("scope")?)),
            "op_count" => Counter::OpCount(
                Scope::from_label(get("scope")?),
                OpResult::from_label(get("result")?),
            ),
            "op_seconds" => Counter::OpSeconds(
                Scope::from_label(get("scope")?),
                OpResult::from_label(get("result")?),
            ),
            "tiering_read_bytes" => Counter::TieringReadBytes(Tier::from_short(get("tier")?)),
            "tiering_write_bytes" => Counter::TieringWriteBytes(Tier::from_short(get("tier")?)),
            "tiering_read_time" => Counter::TieringReadTime(Tier::from_short(get("tier")?)),
            "tiering_write_time" => Counter::TieringWriteTime(Tier::from_short(get("tier")?)),
            "tiering_cascade_job_failures" => Counter::TieringCascadeJobFailures,
            "prefix_cache_queries" => Counter::PrefixCacheQueries,
            "prefix_cache_hits" => Counter::PrefixCacheHits,
            "external_prefix_cache_queries" => Counter::ExternalPrefixCacheQueries,
            "external_prefix_cache_hits" => Counter::ExternalPrefixCacheHits,
            "device_cache_evictions" => Counter::DeviceCacheEvictions,
            "computed_blocks" => Counter::ComputedBlocks,
            "kvcr_deposit_met_filling_blocks" => Counter::KvcrDepositMetFillingBlocks,
            "requests" => Counter::Requests(get("outcome")?.to_string()),
            "kvcr_read_pages" => Counter::KvcrReadPages(get("kind")?.to_string()),
            "kvcr_deposit_blocks" => Counter::KvcrDepositBlocks(get("outcome")?.to_string()),
            "kvcr_inventory_blocks" => {
                Counter::KvcrInventoryBlocks(get("tier")?.to_string(), get("event")?.to_string())
            }
            "kvcr_resilience_events" => Counter::KvcrResilienceEvents(get("kind")?.to_string()),
            "kvcr_framework_pin_blocks" => {
                Counter::KvcrFrameworkPinBlocks(get("tier")?.to_string(), get("event")?.to_string())
            }
            "kvcr_fetch_blocks" => Counter::KvcrFetchBlocks(get("event")?.to_string()),
            "kvcr_capacity_needed" => Counter::KvcrCapacityNeeded(get("pool")?.to_string()),
            "kvcr_policy_calls" => {
                Counter::KvcrPolicyCalls(get("hook")?.to_string(), get("answer")?.to_string())
            }
            "kvcr_policy_block_tiers" => {
                Counter::KvcrPolicyBlockTiers(get("hook")?.to_string(), get("tiers")?.to_string())
            }
            "generation_tokens" => Counter::GenerationTokens,
            "nixl_transfers" => Counter::NixlTransfers,
            "nixl_transfer_bytes" => Counter::NixlTransferBytes,
            "nixl_failed_transfers" => Counter::NixlFailedTransfers,
            _ => return Err(bad()),
        })
    }
}

impl FromStr for Gauge {
    type Err = UnknownMeaning;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, labels) = split_display(s)?;
        match (name, labels.as_slice()) {
            ("state", [("resource", r)]) => Ok(Gauge::State(Resource::from_label(r))),
            _ => Err(UnknownMeaning(s.to_string())),
        }
    }
}

macro_rules! serde_via_display {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_via_display!(Counter);
serde_via_display!(Gauge);

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_label_is_one_value_however_it_was_made() {
        use std::collections::BTreeMap;
        let named = Scope::ControlTargetMetadataAck;
        let other = Scope::Other("control_target_metadata_ack".into());
        assert_eq!(named, other);
        assert_eq!(Scope::from_label("control_target_metadata_ack"), named);
        let counts = BTreeMap::from([(Counter::OpCount(named, OpResult::Handled), 1)]);
        assert_eq!(
            counts.get(&Counter::OpCount(other, OpResult::Handled)),
            Some(&1)
        );
        assert_ne!(Scope::Other("control_x".into()), Scope::ControlEnqueue);
    }

    #[test]
    fn prometheus_names_match_the_contract() {
        let c = Counter::TransferBlocks(Scope::RemoteDeliver);
        assert_eq!(
            c.prometheus().to_string(),
            r#"vllm:kvcr_transfer_blocks_total{operation="remote_deliver"}"#
        );
        // As seen live from vLLM 0.32 (with Dynamo's labels around it).
        let live = r#"vllm:kvcr_transfer_blocks_total{dynamo_component="backend",engine="0",operation="local_fill",worker_id="e1eb5a360dda3cf2"} 1.0"#;
        let snap = crate::telemetry::Snapshot::from_prometheus_text(
            live,
            None,
            crate::telemetry::SnapshotSource::Text {
                label: "vllm 0.32".into(),
            },
        );
        assert_eq!(
            snap.counter(&Counter::TransferBlocks(Scope::LocalFill)),
            Some(1.0)
        );
        assert_eq!(Tier::from_label("0:primary"), Tier::Host);
        let c = Counter::OpCount(Scope::RemoteDeliver, OpResult::Partial);
        assert_eq!(
            c.prometheus().to_string(),
            r#"vllm:kvcr_duration_seconds_count{scope="remote_deliver",result="partial"}"#
        );
        assert_eq!(
            Counter::TieringReadBytes(Tier::Kvcr)
                .prometheus()
                .to_string(),
            r#"vllm:kv_offload_tiering_read_bytes_total{tier="1:kvcr"}"#
        );
        assert_eq!(
            Gauge::State(Resource::BlockRecords)
                .prometheus()
                .to_string(),
            r#"vllm:kvcr_state{resource="block_records"}"#
        );
    }

    /// Every `result` KVCR 0.1.1 writes (`_record_duration` and
    /// `_record_progress_duration` in core.py and remote_fw_dram.py) has a
    /// name here: a scrape showing any other is a problem that fails the
    /// reading (`Snapshot::from_exposition`).
    #[test]
    fn every_result_kvcr_writes_is_mapped() {
        for r in [
            "success",
            "partial",
            "failed",
            "complete",
            "connected",
            "reused",
            "handled",
            "timeout",
            "cancelled",
            "pending",
        ] {
            let mapped = OpResult::from_label(r);
            assert!(!matches!(mapped, OpResult::Other(_)), "{r}");
            assert_eq!(mapped.label(), r);
        }
        assert_eq!(
            OpResult::from_label("error"),
            OpResult::Other("error".into())
        );
    }

    #[test]
    fn interval_keys_match_the_contract() {
        assert_eq!(
            Counter::TransferBlocks(Scope::RemoteDeliver)
                .interval_key()
                .as_deref(),
            Some("vllm:kvcr_transfer_blocks:('remote_deliver',)")
        );
        assert_eq!(
            Counter::OpCount(Scope::RemoteDeliver, OpResult::Success)
                .interval_key()
                .as_deref(),
            Some("vllm:kvcr_duration_seconds:('remote_deliver', 'success')_count")
        );
        assert_eq!(
            Counter::TieringReadBytes(Tier::Kvcr)
                .interval_key()
                .as_deref(),
            Some("vllm:kv_offload_tiering_read_bytes:('1:kvcr',)")
        );
        assert_eq!(Counter::PrefixCacheHits.interval_key(), None);
    }

    #[test]
    fn samples_map_with_and_without_total() {
        let l = labels(&[("scope", "source_write"), ("engine", "0")]);
        let want = Some(Meaning::Counter(Counter::TransferBytes(Scope::SourceWrite)));
        assert_eq!(
            meaning_of_sample("vllm:kvcr_transfer_bytes_total", &l),
            want
        );
        assert_eq!(meaning_of_sample("vllm:kvcr_transfer_bytes", &l), want);
        assert_eq!(
            meaning_of_sample("vllm:kvcr_transfer_bytes_created", &l),
            None
        );
        assert_eq!(
            meaning_of_sample("vllm:kvcr_duration_seconds_bucket", &l),
            None
        );
        assert_eq!(
            meaning_of_sample("vllm:kvcr_transfer_bytes_total", &[]),
            None,
            "a scoped family without its scope label is not a meaning"
        );
        assert_eq!(
            meaning_of_sample("vllm:prefix_cache_hits_total", &[]),
            Some(Meaning::Counter(Counter::PrefixCacheHits))
        );
        assert_eq!(
            meaning_of_sample(
                "vllm:kv_offload_tiering_read_bytes_total",
                &labels(&[("tier", "0:cpu")])
            ),
            Some(Meaning::Counter(Counter::TieringReadBytes(Tier::Host)))
        );
        assert_eq!(
            meaning_of_sample(
                "vllm:kvcr_transfer_blocks_total",
                &labels(&[("scope", "g3_weird")])
            ),
            Some(Meaning::Counter(Counter::TransferBlocks(Scope::Other(
                "g3_weird".into()
            ))))
        );
    }

    /// A vLLM decode worker's NixlConnector and generation counters, as
    /// seen live from vLLM 0.32 on the CPU platform behind Dynamo 1.6.1
    /// (`phase1_vllm_2p1d`): histogram parts without `_total`, the failure
    /// counter with it, `_created` ignored.
    #[test]
    fn nixl_and_generation_samples_map_as_seen_live() {
        let live = r#"# TYPE vllm:nixl_bytes_transferred histogram
vllm:nixl_bytes_transferred_bucket{dynamo_component="backend",engine="0",le="2048.0",model_name="tiny-llama"} 0.0
vllm:nixl_bytes_transferred_count{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",engine="0",model="tiny-llama",model_name="tiny-llama",worker_id="fe1e3dd01c941316"} 23.0
vllm:nixl_bytes_transferred_sum{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",engine="0",model="tiny-llama",model_name="tiny-llama",worker_id="fe1e3dd01c941316"} 4.325376e+06
vllm:nixl_num_failed_transfers_total{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",engine="0",model="tiny-llama",model_name="tiny-llama",worker_id="fe1e3dd01c941316"} 0.0
vllm:nixl_num_failed_transfers_created{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",engine="0",model="tiny-llama",model_name="tiny-llama",worker_id="fe1e3dd01c941316"} 1.7962820784383864e+09
vllm:generation_tokens_total{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",engine="0",model="tiny-llama",model_name="tiny-llama",worker_id="fe1e3dd01c941316"} 326.0
"#;
        let snap = crate::telemetry::Snapshot::from_prometheus_text(
            live,
            None,
            crate::telemetry::SnapshotSource::Text {
                label: "vllm 0.32 decode".into(),
            },
        );
        assert_eq!(snap.counter(&Counter::NixlTransfers), Some(23.0));
        assert_eq!(snap.counter(&Counter::NixlTransferBytes), Some(4_325_376.0));
        assert_eq!(snap.counter(&Counter::NixlFailedTransfers), Some(0.0));
        assert_eq!(snap.counter(&Counter::GenerationTokens), Some(326.0));
        assert_eq!(
            Counter::NixlTransferBytes.prometheus().to_string(),
            "vllm:nixl_bytes_transferred_sum"
        );
        assert_eq!(
            Counter::NixlFailedTransfers.prometheus().to_string(),
            "vllm:nixl_num_failed_transfers_total"
        );
        assert_eq!(Counter::NixlTransfers.interval_key(), None);
    }

    #[test]
    fn interval_keys_parse_back() {
        let all = [
            Counter::TransferBlocks(Scope::RemoteDeliver),
            Counter::TransferBytes(Scope::SourceWrite),
            Counter::OpCount(Scope::RemoteDeliver, OpResult::Success),
            Counter::OpSeconds(Scope::HintWait, OpResult::Complete),
            Counter::TieringReadBytes(Tier::Kvcr),
            Counter::TieringWriteBytes(Tier::Host),
            Counter::TieringCascadeJobFailures,
            Counter::TransferBlocks(Scope::Other("control_hint".into())),
        ];
        for c in all {
            let key = c.interval_key().unwrap();
            assert_eq!(
                meaning_of_interval_key(&key),
                Some(Meaning::Counter(c.clone())),
                "{key}"
            );
        }
        assert_eq!(
            meaning_of_interval_key("vllm:kvcr_state:('in_flight_ops',)"),
            Some(Meaning::Gauge(Gauge::State(Resource::InFlightOps)))
        );
        assert_eq!(meaning_of_interval_key("Num successful transfers"), None);
        assert_eq!(meaning_of_interval_key("vllm:kvcr_transfer_blocks:("), None);
    }

    #[test]
    fn display_round_trips() {
        let all = [
            Counter::TransferBlocks(Scope::RemoteDeliver),
            Counter::OpCount(Scope::PeerSetup, OpResult::Reused),
            Counter::TieringReadBytes(Tier::Kvcr),
            Counter::TieringReadBytes(Tier::Other("2:disk".into())),
            Counter::Requests("ok".into()),
            Counter::ComputedBlocks,
            Counter::KvcrDepositMetFillingBlocks,
            Counter::KvcrReadPages("ssm".into()),
            Counter::KvcrDepositBlocks("failed".into()),
            Counter::KvcrInventoryBlocks("LOCAL_G2".into(), "removed".into()),
            Counter::KvcrResilienceEvents("source_stalled".into()),
            Counter::KvcrFrameworkPinBlocks("device".into(), "released".into()),
            Counter::KvcrFetchBlocks("fetched".into()),
            Counter::KvcrCapacityNeeded("kv".into()),
            Counter::KvcrPolicyCalls("decide_ingest".into(), "raise_ingest".into()),
            Counter::KvcrPolicyBlockTiers("on_ingest".into(), "FW_G2+LOCAL_G2".into()),
            Counter::GenerationTokens,
            Counter::NixlTransfers,
            Counter::NixlTransferBytes,
            Counter::NixlFailedTransfers,
        ];
        for c in all {
            let s = c.to_string();
            assert_eq!(s.parse::<Counter>(), Ok(c), "{s}");
        }
        let g = Gauge::State(Resource::LocalG2FreeSlots);
        assert_eq!(g.to_string().parse::<Gauge>(), Ok(g));
        assert!("bogus{".parse::<Counter>().is_err());
    }
}
