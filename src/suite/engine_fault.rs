//! The CPU engine's fault switches as a type (as Dynamo's mocker has its
//! `enum Fault`): what a row turns on, spelled once, serialised to the
//! engine's own words (`PUT /faults` JSON at run time, `--fault NAME[=ARG]`
//! at launch). fixtures/cpu-engine/cpu_engine/faults.py is the engine's
//! side; a unit test keeps the two in step.

use std::fmt;

use serde_json::{json, Value};

/// One CPU-engine fault switch (off by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineFault {
    /// Pages delivered into the device cache (local or remote) are corrupted.
    CorruptDeliveredPages,
    /// The engine reports one block fewer than it delivered.
    UnderreportBlocks,
    /// The target reports one page more than it read.
    WrongTransferBytes,
    /// The worker deposits nothing into its Guard-backed pool.
    NoGuardDeposit,
    /// A replacement does not take its Guard's pool back (launch switch).
    NoReclaim,
    /// A prefill worker exits after its prefill, before the decode pulls.
    ExitAfterPrefill,
    /// The `KV Transfer metrics` line reports one block more than `/metrics`.
    SkewIntervalLog,
    /// The device prefix cache finds nothing.
    NoDeviceHits,
    /// Newly computed blocks do not stay in the device cache.
    NoDeviceEviction,
    /// A hybrid block's SSM part is not read.
    DropSsmPage,
    /// The worker's KVCR progress loop fails (KVCR re-raises it on every
    /// poll): the worker exits with its tier.
    KvcrProgressFails,
    /// Token N (0-based) of every answer is wrong.
    WrongTokenAfter(u32),
    /// A stream stops sending after N tokens (and stays open).
    StallStreamAfter(u32),
    /// A stream ends with an error after N tokens, without a finish.
    CutStreamAfter(u32),
    /// The engine stops exporting one metric family (samples and `# TYPE`).
    DropSeries(&'static str),
    /// The worker never registers with the frontend (launch only).
    NeverRegister,
    /// The worker exits during startup (launch only).
    DieDuringStartup,
    /// Every deposited block is reported a success, whatever KVCR said (TC-07).
    HideFailedDeposits,
    /// The router is never told that a block left KVCR's pool (TC-07).
    DropRemovedInventory,
    /// KVCR's source-stall latch is not reported (TC-11).
    HideSourceStall,
    /// On SIGTERM the engine exits without closing KVCR: no handback (TC-09).
    NoHandback,
    /// Deposited blocks stay pinned, so a full pool has no evictable slot (TC-07).
    PinDeposits,
    /// The answer's `cached_tokens` counts only the first reused block, as
    /// an engine whose repeat hit a short prefix would say (TC-01).
    CachedTokensFirstBlock,
    /// The worker logs no first-token stamp (TC-05's TTFT accuracy).
    NoFirstTokenStamp,
    /// The counters report a prompt's first computed block as a device-cache
    /// hit: reuse the engine did not do (TC-05 cold).
    PhantomDeviceHit,
    /// The router's hint is dropped: no peer (nor a Guard serving a dead
    /// one) is read (TC-04's takeover).
    IgnoreKvHints,
    /// A block a prefill in flight computes is a device hit for other
    /// requests at once, undoing the `hits_after_prefill` knob: concurrent
    /// requests for one prefix never deposit it side by side (TC-17).
    HitsDuringPrefill,
    /// KVCR's framework-pin requests are left unanswered until KVCR cancels
    /// them: a peer's source write from engine memory waits for its pins (TC-19).
    WithholdPins,
    /// The worker's KVCR memory is not page-aligned (launch only).
    UnalignedMemory,
    /// The worker claims with another tier layout (launch only, TC-09).
    ChangedLayout,
    /// The worker claims with one pool more than its Guard service has
    /// (launch only): refused at startup on a group never claimed before.
    ExtraKvcrPool,
    /// Before its own claim, the worker claims its group once with another
    /// layout and hands it back (launch only): its own claim is then refused
    /// as another tier configuration.
    PriorClaimOtherLayout,
    /// The worker claims with the other tier set: with a G3 disk tier when
    /// it has none, without one when it has one (launch only, TC-09).
    ToggledG3Tier,
    /// The framework control the worker hands KVCR cannot adopt a Guard's
    /// listener, so a guarded worker must refuse to start (launch only,
    /// TC-16's configuration row `control_without_adopt_listener`).
    ControlWithoutAdoptListener,
    /// The engine's placement policy (`--placement-policy counting`)
    /// misbehaves in these ways (`raise_ingest,nan_score`, ...): every other
    /// call of a hook they take over (TC-21).
    HostilePolicy(&'static str),
    /// The router's hint is rewritten into one KVCR must refuse
    /// (`no_retain`, `move_mode`, `no_source`, ...), or one it must still
    /// accept (`hash_beyond_63_bits`; the engine's `hint_rewrites.py`),
    /// before the engine submits it (TC-22).
    RewriteKvHint(&'static str),
}

impl EngineFault {
    /// Every switch, one value each (the tests' list).
    #[cfg(test)]
    pub(crate) const EVERY: [EngineFault; 36] = [
        EngineFault::CorruptDeliveredPages,
        EngineFault::UnderreportBlocks,
        EngineFault::WrongTransferBytes,
        EngineFault::NoGuardDeposit,
        EngineFault::NoReclaim,
        EngineFault::ExitAfterPrefill,
        EngineFault::SkewIntervalLog,
        EngineFault::NoDeviceHits,
        EngineFault::NoDeviceEviction,
        EngineFault::DropSsmPage,
        EngineFault::WrongTokenAfter(2),
        EngineFault::StallStreamAfter(2),
        EngineFault::CutStreamAfter(3),
        EngineFault::DropSeries("cpu_engine_computed_blocks"),
        EngineFault::NeverRegister,
        EngineFault::DieDuringStartup,
        EngineFault::KvcrProgressFails,
        EngineFault::HideFailedDeposits,
        EngineFault::DropRemovedInventory,
        EngineFault::HideSourceStall,
        EngineFault::NoHandback,
        EngineFault::PinDeposits,
        EngineFault::CachedTokensFirstBlock,
        EngineFault::NoFirstTokenStamp,
        EngineFault::PhantomDeviceHit,
        EngineFault::IgnoreKvHints,
        EngineFault::HitsDuringPrefill,
        EngineFault::WithholdPins,
        EngineFault::UnalignedMemory,
        EngineFault::ChangedLayout,
        EngineFault::ExtraKvcrPool,
        EngineFault::PriorClaimOtherLayout,
        EngineFault::ToggledG3Tier,
        EngineFault::ControlWithoutAdoptListener,
        EngineFault::HostilePolicy("raise_ingest,nan_score"),
        EngineFault::RewriteKvHint("no_retain"),
    ];

    /// The switch's name in the engine (`wrong_token_after`).
    pub fn name(self) -> &'static str {
        match self {
            EngineFault::CorruptDeliveredPages => "corrupt_delivered_pages",
            EngineFault::UnderreportBlocks => "underreport_blocks",
            EngineFault::WrongTransferBytes => "wrong_transfer_bytes",
            EngineFault::NoGuardDeposit => "no_guard_deposit",
            EngineFault::NoReclaim => "no_reclaim",
            EngineFault::ExitAfterPrefill => "exit_after_prefill",
            EngineFault::SkewIntervalLog => "skew_interval_log",
            EngineFault::NoDeviceHits => "no_device_hits",
            EngineFault::NoDeviceEviction => "no_device_eviction",
            EngineFault::DropSsmPage => "drop_ssm_page",
            EngineFault::KvcrProgressFails => "kvcr_progress_fails",
            EngineFault::WrongTokenAfter(_) => "wrong_token_after",
            EngineFault::StallStreamAfter(_) => "stall_stream_after",
            EngineFault::CutStreamAfter(_) => "cut_stream_after",
            EngineFault::DropSeries(_) => "drop_series",
            EngineFault::NeverRegister => "never_register",
            EngineFault::DieDuringStartup => "die_during_startup",
            EngineFault::HideFailedDeposits => "hide_failed_deposits",
            EngineFault::DropRemovedInventory => "drop_removed_inventory",
            EngineFault::HideSourceStall => "hide_source_stall",
            EngineFault::NoHandback => "no_handback",
            EngineFault::PinDeposits => "pin_deposits",
            EngineFault::CachedTokensFirstBlock => "cached_tokens_first_block",
            EngineFault::NoFirstTokenStamp => "no_first_token_stamp",
            EngineFault::PhantomDeviceHit => "phantom_device_hit",
            EngineFault::IgnoreKvHints => "ignore_kv_hints",
            EngineFault::HitsDuringPrefill => "hits_during_prefill",
            EngineFault::WithholdPins => "withhold_pins",
            EngineFault::UnalignedMemory => "unaligned_memory",
            EngineFault::ChangedLayout => "changed_layout",
            EngineFault::ExtraKvcrPool => "extra_kvcr_pool",
            EngineFault::PriorClaimOtherLayout => "prior_claim_other_layout",
            EngineFault::ToggledG3Tier => "toggled_g3_tier",
            EngineFault::ControlWithoutAdoptListener => "control_without_adopt_listener",
            EngineFault::HostilePolicy(_) => "hostile_policy",
            EngineFault::RewriteKvHint(_) => "rewrite_kv_hint",
        }
    }

    /// Its value in `PUT /faults`: `true`, a token count, or a family name.
    pub fn value(self) -> Value {
        match self {
            EngineFault::WrongTokenAfter(n)
            | EngineFault::StallStreamAfter(n)
            | EngineFault::CutStreamAfter(n) => json!(n),
            EngineFault::DropSeries(family)
            | EngineFault::HostilePolicy(family)
            | EngineFault::RewriteKvHint(family) => json!(family),
            _ => json!(true),
        }
    }

    /// Whether the engine takes it only at launch (`--fault NAME`), not
    /// through `PUT /faults`.
    pub fn launch_only(self) -> bool {
        matches!(
            self,
            EngineFault::NeverRegister
                | EngineFault::DieDuringStartup
                | EngineFault::UnalignedMemory
                | EngineFault::ChangedLayout
                | EngineFault::ExtraKvcrPool
                | EngineFault::PriorClaimOtherLayout
                | EngineFault::ToggledG3Tier
                | EngineFault::ControlWithoutAdoptListener
        )
    }

    /// The `PUT /faults` body that turns this switch (alone) on.
    pub fn switches(self) -> Value {
        json!({ self.name(): self.value() })
    }
}

/// As a launch flag's value: `--fault wrong_token_after=2`, `--fault no_reclaim`.
impl fmt::Display for EngineFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.value() {
            Value::Bool(true) => f.write_str(self.name()),
            Value::String(arg) => write!(f, "{}={arg}", self.name()),
            arg => write!(f, "{}={arg}", self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_are_the_engines_json() {
        assert_eq!(
            EngineFault::WrongTokenAfter(2).switches(),
            json!({"wrong_token_after": 2})
        );
        assert_eq!(
            EngineFault::CorruptDeliveredPages.switches(),
            json!({"corrupt_delivered_pages": true})
        );
        assert_eq!(
            EngineFault::DropSeries("vllm:kvcr_duration_seconds").switches(),
            json!({"drop_series": "vllm:kvcr_duration_seconds"})
        );
        assert_eq!(EngineFault::NoReclaim.to_string(), "no_reclaim");
        assert_eq!(
            EngineFault::CutStreamAfter(3).to_string(),
            "cut_stream_after=3"
        );
        assert_eq!(EngineFault::DropSeries("x").to_string(), "drop_series=x");
        assert_eq!(
            EngineFault::HostilePolicy("raise_ingest,nan_score").switches(),
            json!({"hostile_policy": "raise_ingest,nan_score"})
        );
    }

    /// Every switch is one the CPU engine knows, of the kind it expects
    /// (a flag, a token count, a name, launch only), and every switch the
    /// engine has is here.
    /// TC-16's configuration rows name their faults as text: each must be
    /// a launch switch (a worker that refuses to start takes no `PUT`).
    #[test]
    fn every_fault_a_refused_configuration_sets_is_a_launch_switch() {
        let named: Vec<(&str, &str)> = crate::stack::REFUSED_CONFIGS
            .iter()
            .flat_map(|r| r.faults().map(move |f| (r.name, f)))
            .collect();
        assert!(!named.is_empty(), "no row sets a fault");
        for (row, name) in named {
            let fault = EngineFault::EVERY
                .iter()
                .find(|f| f.name() == name)
                .unwrap_or_else(|| panic!("{row}: no engine switch {name}"));
            assert!(fault.launch_only(), "{row}: {name} is not launch-only");
        }
    }

    #[test]
    fn every_switch_is_the_cpu_engines() {
        let source = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/cpu-engine/cpu_engine/faults.py"),
        )
        .unwrap();
        let set = |name: &str| -> Vec<String> {
            let start = source.find(&format!("{name} = {{")).unwrap();
            let body = &source[start..];
            let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
            body.split(',')
                .map(|w| w.trim().trim_matches('"').to_string())
                .filter(|w| !w.is_empty())
                .collect()
        };
        let (flags, counts, names, launch) = (
            set("FLAG_SWITCHES"),
            set("COUNT_SWITCHES"),
            set("NAME_SWITCHES"),
            set("LAUNCH_ONLY"),
        );
        for fault in EngineFault::EVERY {
            let kind = match fault.value() {
                _ if fault.launch_only() => &launch,
                Value::Bool(_) => &flags,
                Value::Number(_) => &counts,
                _ => &names,
            };
            assert!(
                kind.iter().any(|w| w == fault.name()),
                "{fault:?}: the CPU engine has no such switch of that kind"
            );
        }
        let ours: Vec<&str> = EngineFault::EVERY.iter().map(|f| f.name()).collect();
        for engine_switch in flags.iter().chain(&counts).chain(&names).chain(&launch) {
            assert!(
                ours.contains(&engine_switch.as_str()),
                "the CPU engine's switch {engine_switch} has no EngineFault"
            );
        }
    }
}
