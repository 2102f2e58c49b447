//! KVCR components started with a configuration an operator can get wrong,
//! which KVCR 0.1.1 refuses at construction (TC-16's configuration rows).
//!
//! One row per configuration: the component, what is set (a field of the
//! configuration the worker hands KVCR, through the CPU engine's
//! `--kvcr-config-override`, or a flag of a command line), what the harness
//! places beside it first, and KVCR's own words for the refusal. Each row
//! runs as the hostile starts do ([`Stack::run_wrapper`]): alone, in a mount
//! namespace of its own, a worker with a Guard service of its own; then the
//! wrapper checks what was beside it and lists what it left.
//!
//! Values may name the attempt's directories: `{pools}`, `{sockets}`,
//! `{socket}` (the Guard's socket), `{work}`.
//!
//! A worker's Guard is up before anything is placed beside the worker, so
//! a row can tamper with the pool file the Guard made for it; and since a
//! worker's refused start must not hurt its Guard, that Guard must exit 0
//! when the wrapper stops it.

use std::path::Path;

use crate::proc::ProcessSpec;
use crate::telemetry::names::kvcr_log::SERVICE_READY;
use crate::verdict::hostile_start::{traceback_exceptions, StartAttempt};
use crate::verdict::refused_config::{usage_errors, ConfigAttempt, Untouched};

use super::hostile_start::{
    helper_pool_count, hostile, quote, set_or_add_flag, unshare_args, Dirs, Sabotage, Script, MARK,
    WORKER_READY,
};
use super::{Stack, StackError};

/// The KVCR component a row starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// KVCR's Guard service (`python -m kvcr.kvcr_service`).
    Guard,
    /// A worker: the engine with KVCR, claiming from a Guard of its own.
    Worker,
}

/// What a row sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// A field of the configuration the worker hands KVCR:
    /// `SECTION.FIELD=JSON` (the CPU engine's `--kvcr-config-override`).
    Kvcr(&'static str),
    /// A flag of the component's command line, replaced or added.
    Flag(&'static str, &'static str),
}

/// What the harness places beside the component before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    Nothing,
    /// Another Guard service already serves the attempt's socket path; it
    /// must still run and hold its socket afterwards.
    LiveService,
    /// A regular file of the harness's at the socket path; it must be left
    /// as it was.
    FileAtSocket,
    /// A file of this many bytes where the worker's G3 file goes
    /// (`{work}/g3.bin`), left by an earlier configuration; it must be left
    /// as it was.
    G3FileOfSize(u64),
    /// `{work}/g3.bin` and a hard link to it, `{work}/g3-link.bin`.
    G3FileAndHardLink,
    /// The pool file of the worker's Guard, tampered with once that Guard is
    /// up and before the worker claims it; put back as it was after the
    /// worker exited, before the Guard stops. The Guard (which granted the
    /// claim) must still run and hold its socket. Worker rows only.
    TamperedPool(Tamper),
}

/// What the harness does to a Guard's pool file before a worker claims it
/// (`KVCRPoolAttachment.attach`, the worker's side of a granted claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tamper {
    /// Its mode changed from 0600 to 0644.
    Mode0644,
    /// Moved aside (`{work}/pool-aside`) and another file of the same size
    /// and mode put at its path: another inode than the grant names.
    Replaced,
    /// One page shorter than the grant describes. Not more: the Guard keeps
    /// its own mapping of the file, and a page of it that it touched past
    /// the new end would kill it with SIGBUS, which would be the harness's
    /// doing; the last page of the last pool it never touches unclaimed.
    ShrunkByAPage,
}

/// One configuration KVCR must refuse at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigRow {
    /// The row's name, a word (`operation_timeout_zero`): its evidence is
    /// `refused-<name>.json`, its log `hostile-<name>.log`.
    pub name: &'static str,
    pub component: Component,
    pub set: &'static [Setting],
    pub beside: Beside,
    /// KVCR's own words, one of which its exception or usage error must
    /// contain.
    pub words: &'static [&'static str],
}

use Beside::{FileAtSocket, G3FileAndHardLink, G3FileOfSize, LiveService, Nothing, TamperedPool};
use Component::{Guard, Worker};
use Setting::{Flag, Kvcr};

const fn row(
    name: &'static str,
    component: Component,
    set: &'static [Setting],
    beside: Beside,
    words: &'static [&'static str],
) -> ConfigRow {
    ConfigRow {
        name,
        component,
        set,
        beside,
        words,
    }
}

/// A G3 file at `{work}/g3.bin`, on a dense geometry whose block is one
/// page (the CPU engine's G3 needs it).
const G3_FILE: [Setting; 3] = [
    Flag("--geometry", "dense"),
    Flag("--attn-pages", "1"),
    Flag("--g3-file", "{work}/g3.bin"),
];

/// Not a multiple of any page-aligned block: a G3 file of whole slots
/// cannot have it, whatever the worker's block size.
const G3_CAPACITY_OF_NO_WHOLE_SLOTS: &str = "g3.capacity_bytes_per_file=262145";

/// Every configuration KVCR must refuse at start: adding one is one row.
///
/// A worker claims from its Guard before it builds its KVCR core, and the
/// claim checks its tier configuration (`guard_protocol._TierConfig`,
/// `_G3Config`) before it connects: where the core or the G3 tier has a
/// line of the same words, the row's words end with the claim's location
/// (msgspec's ``- at `$.tier_config` ``), so only the claim's check passes
/// it. A relative G3 path cannot reach the claim's `G3 paths must be
/// absolute`: the client resolves every path (`Path.resolve()`) before it
/// checks, and the CPU engine refuses a relative `--g3-file` itself.
#[rustfmt::skip]
pub const REFUSED_CONFIGS: &[ConfigRow] = &[
    // A worker's KVCR configuration.
    row("operation_timeout_zero", Worker, &[Kvcr("config.operation_timeout_ms=0")], Nothing,
        &["operation_timeout_ms must be positive"]),
    row("abandon_below_twice_operation", Worker, &[Kvcr("config.abandon_timeout_ms=1")], Nothing,
        &["abandon_timeout_ms must be at least twice operation_timeout_ms"]),
    // One millisecond short of twice: the bound itself, not just a far miss.
    row("abandon_just_below_twice_operation", Worker,
        &[Kvcr("config.operation_timeout_ms=1000"), Kvcr("config.abandon_timeout_ms=1999")], Nothing,
        &["abandon_timeout_ms must be at least twice operation_timeout_ms"]),
    row("watermark_above_100", Worker, &[Kvcr("config.capacity_low_watermark_percent=150")], Nothing,
        &["capacity_low_watermark_percent must be between 0 and 100"]),
    row("no_pool_layouts", Worker, &[Kvcr("config.pool_layouts=[]")], Nothing,
        &["pool_layouts must contain at least one pool"]),
    row("pool_name_with_colon", Worker, &[Kvcr(r#"config.pool_layouts=[["attn:0",8192]]"#)], Nothing,
        &["pool_layouts pool names cannot contain a colon"]),
    row("pool_block_size_zero", Worker, &[Kvcr(r#"config.pool_layouts=[["attn",0]]"#)], Nothing,
        &["pool_layouts block size must be a positive integer"]),
    row("pool_names_repeated", Worker, &[Kvcr(r#"config.pool_layouts=[["attn",8192],["attn",8192]]"#)], Nothing,
        &["pool_layouts pool names must be unique"]),
    row("empty_pool_name_among_two", Worker, &[Kvcr(r#"config.pool_layouts=[["",8192],["ssm",8192]]"#)], Nothing,
        &["pool_layouts cannot use an empty name with multiple pools"]),
    row("g3_file_of_another_size", Worker, &G3_FILE, G3FileOfSize(4096),
        &["has incompatible size"]),
    row("g3_paths_alias_one_file", Worker,
        &[G3_FILE[0], G3_FILE[1], G3_FILE[2], Kvcr(r#"g3.paths=["{work}/g3.bin","{work}/g3-link.bin"]"#)],
        G3FileAndHardLink, &["G3 file paths must not alias the same file"]),
    row("g3_path_twice", Worker,
        &[G3_FILE[0], G3_FILE[1], G3_FILE[2], Kvcr(r#"g3.paths=["{work}/g3.bin","{work}/g3.bin"]"#)],
        Nothing, &["G3 file paths must be unique - at `$.tier_config.g3`"]),
    row("g3_with_two_pools", Worker,
        &[G3_FILE[0], G3_FILE[1], G3_FILE[2], Kvcr(r#"config.pool_layouts=[["kv",4096],["extra",4096]]"#)],
        Nothing, &["G3 does not support multiple pools - at `$.tier_config`"]),
    // The block is page-aligned, the capacity is not whole blocks.
    row("g3_capacity_not_whole_slots", Worker,
        &[G3_FILE[0], G3_FILE[1], G3_FILE[2], Kvcr(G3_CAPACITY_OF_NO_WHOLE_SLOTS)],
        Nothing, &["G3 requires page-aligned complete slots"]),
    // The capacity is whole blocks, the block is not page-aligned.
    row("g3_slot_not_page_aligned", Worker,
        &[G3_FILE[0], G3_FILE[1], G3_FILE[2], Kvcr(r#"config.pool_layouts=[["kv",6144]]"#),
          Kvcr("g3.capacity_bytes_per_file=393216")],
        Nothing, &["G3 requires page-aligned complete slots"]),
    // A guarded worker whose framework control can tell its bind address
    // but not adopt the listener a Guard answers on after it dies.
    row("control_without_adopt_listener", Worker,
        &[Flag("--fault", "control_without_adopt_listener")], Nothing,
        &["guard_config needs a framework control that can share its control endpoint"]),
    // KVCR's own G3 policy, plugged by the engine, on a worker with no disk
    // tier (the claim is granted; the core refuses, and gives it back).
    row("g3_policy_without_g3", Worker, &[Flag("--placement-policy", "kvcr-g3")], Nothing,
        &["G3LRUPolicy requires configured G3"]),
    // The pool file its Guard made, tampered with before the worker claims.
    row("pool_file_mode_0644", Worker, &[], TamperedPool(Tamper::Mode0644),
        &["KVCR pool must have mode 0600"]),
    row("pool_file_replaced", Worker, &[], TamperedPool(Tamper::Replaced),
        &["KVCR pool identity does not match the grant"]),
    row("pool_file_shrunk", Worker, &[], TamperedPool(Tamper::ShrunkByAPage),
        &["KVCR pool is smaller than the grant describes"]),
    // The Guard service's command line and paths.
    row("pool_dir_missing", Guard, &[Flag("--pool-dir", "{pools}/missing")], Nothing,
        &["KVCR pool directory does not exist"]),
    row("socket_dir_missing", Guard, &[Flag("--socket-path", "{sockets}/missing/g.sock")], Nothing,
        &["KVCR socket directory does not exist"]),
    row("socket_served_by_another_service", Guard, &[], LiveService,
        &["another KVCR service is listening on"]),
    row("socket_path_a_regular_file", Guard, &[], FileAtSocket,
        &["Address already in use", "EADDRINUSE"]),
    row("pool_size_not_a_number", Guard, &[Flag("--pool-sizes-gb", "0.05GB")], Nothing,
        &["--pool-sizes-gb must contain positive, finite numbers"]),
    row("pool_size_zero", Guard, &[Flag("--pool-sizes-gb", "0.05,0")], Nothing,
        &["--pool-sizes-gb must contain positive, finite numbers"]),
    row("pool_size_beyond_any_machine", Guard, &[Flag("--pool-sizes-gb", "1e30")], Nothing,
        &["--pool-sizes-gb describes an allocation that is too large"]),
    row("pool_bytes_beyond_any_machine", Guard, &[Flag("--pool-sizes-gb", "1e10")], Nothing,
        &["--pool-sizes-gb describes an allocation that is too large"]),
    row("pool_size_below_a_page", Guard, &[Flag("--pool-sizes-gb", "0.000001")], Nothing,
        &["--pool-sizes-gb values must be at least one memory page"]),
    row("guard_count_zero", Guard, &[Flag("--guard-count", "0")], Nothing,
        &["--guard-count must be at least 1"]),
    row("heartbeat_below_one_second", Guard, &[Flag("--heartbeat-timeout-ms", "500")], Nothing,
        &["--heartbeat-timeout-ms must be at least 1000 and finite"]),
];

/// The wrapper's lines about what was beside the component.
const UNTOUCHED: &str = "untouched";

impl ConfigRow {
    /// The CPU engine's fault switches the row sets (`--fault NAME`).
    pub fn faults(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.set.iter().filter_map(|s| match s {
            Flag("--fault", name) => Some(*name),
            _ => None,
        })
    }

    /// What the row sets, as given to the component.
    pub fn settings(&self) -> String {
        let set: Vec<String> = self
            .set
            .iter()
            .map(|s| match s {
                Kvcr(kv) => format!("--kvcr-config-override {kv}"),
                Flag(flag, value) => format!("{flag} {value}"),
            })
            .collect();
        let beside = match self.beside {
            Nothing => None,
            LiveService => Some("another Guard service serving its socket path".to_string()),
            FileAtSocket => Some("a regular file at its socket path".to_string()),
            G3FileOfSize(bytes) => Some(format!("a G3 file of {bytes} bytes left at its path")),
            G3FileAndHardLink => Some("a G3 file and a hard link to it".to_string()),
            TamperedPool(t) => Some(format!(
                "its Guard's pool file, once the Guard is up, {}",
                t.describe()
            )),
        };
        set.into_iter().chain(beside).collect::<Vec<_>>().join(", ")
    }

    fn cause(&self) -> String {
        format!("configuration {}: {}", self.name, self.settings())
    }
}

impl Tamper {
    fn describe(self) -> &'static str {
        match self {
            Tamper::Mode0644 => "changed to mode 0644",
            Tamper::Replaced => "replaced by another file of the same size (another inode)",
            Tamper::ShrunkByAPage => "one page shorter than the grant describes",
        }
    }
}

/// `value` with the attempt's directories in place of their names.
fn fill(value: &str, dirs: &Dirs) -> String {
    let d = |p: &Path| p.display().to_string();
    value
        .replace("{pools}", &d(&dirs.pools))
        .replace("{sockets}", &d(&dirs.sockets))
        .replace("{socket}", &d(&dirs.socket()))
        .replace("{work}", &d(&dirs.work))
}

/// The wrapper's account of what was beside the component, from its log.
fn beside_seen(log: &str) -> Vec<Untouched> {
    let prefix = format!("{MARK} {UNTOUCHED} ");
    log.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|rest| {
            let (verdict, what) = rest.split_once(' ').unwrap_or((rest, ""));
            Untouched {
                what: what.to_string(),
                kept: verdict == "yes",
            }
        })
        .collect()
}

/// A shell line saying whether `condition` still holds of `what`.
fn untouched_check(condition: &str, what: &str) -> String {
    let what = what.replace('"', "'");
    format!(
        "if {condition}; then say \"{UNTOUCHED} yes {what}\"; else say \"{UNTOUCHED} no {what}\"; fi"
    )
}

impl Stack {
    /// Starts `row`'s component with its configuration (none under
    /// [`Sabotage::Benign`]) and returns what it did, what it left and
    /// what became of what was beside it.
    pub fn attempt_refused_config(
        &self,
        row: &ConfigRow,
        sabotage: Sabotage,
    ) -> Result<ConfigAttempt, StackError> {
        let not_applied = |why: String| StackError::FaultNotApplied(format!("{}: {why}", row.name));
        let dirs = Dirs::named(row.name);
        let (ctx, mut guard, group_bytes) = self.attempt_guard(&dirs, not_applied)?;
        let hostile = hostile(sabotage);
        let logs = &self.plan.ctx.logs_dir;
        let mut script = Script::new(&dirs, group_bytes);
        let mut subject = match row.component {
            Guard => guard.clone(),
            Worker => {
                let slot = self.attempt_slot(&ctx.host, &dirs).map_err(not_applied)?;
                self.plan
                    .placement
                    .wrap(0, self.plan.engine.worker(&ctx, &slot))
            }
        };
        let mut beside_expected = 0;
        if hostile {
            for setting in row.set {
                match setting {
                    Kvcr(kv) => {
                        if !subject.args.iter().any(|a| a == "cpu_engine") {
                            return Err(not_applied(
                                "only the CPU engine takes --kvcr-config-override".into(),
                            ));
                        }
                        subject = subject.args(["--kvcr-config-override", &fill(kv, &dirs)]);
                    }
                    Flag(flag, value) => set_or_add_flag(&mut subject, flag, &fill(value, &dirs)),
                }
            }
        }
        if row.component == Worker {
            // A G3 worker claims one pool: its Guard holds one.
            if subject.flag_value("--g3-file").is_some() && helper_pool_count(&guard) > 1 {
                let first = guard.flag_value("--pool-sizes-gb").unwrap_or("");
                let first = first.split(',').next().unwrap_or("").to_string();
                set_or_add_flag(&mut guard, "--pool-sizes-gb", &first);
            }
            guard.log = logs.join(format!("hostile-{}.guard.log", row.name));
            beside_expected += worker_guard(&guard, &mut script);
        }
        if hostile {
            // After a worker's Guard: what is beside may be its pool file.
            beside_expected += arrange_beside(row, &dirs, &guard, logs, &mut script);
        }
        if sabotage == Sabotage::PlantFile {
            script.plant_file();
        }
        let log = logs.join(format!("hostile-{}.log", row.name));
        let wrapper = ProcessSpec::new(format!("hostile-{}", row.name), "unshare", log)
            .args(unshare_args())
            .args(["sh", "-c", &script.script(&subject), "hostile-start"]);
        let (component, ready_line): (&str, &[&str]) = match row.component {
            Guard => ("guard", &[SERVICE_READY]),
            Worker => ("worker", &WORKER_READY),
        };
        let cause = row.cause();
        let ran = self.run_wrapper(
            row.name,
            &wrapper,
            &format!("the {component} to refuse ({cause}) or to start"),
            ready_line,
            |_| {},
        )?;
        let mut messages = traceback_exceptions(&ran.text);
        messages.extend(usage_errors(&ran.text));
        Ok(ConfigAttempt {
            start: StartAttempt {
                attempt: row.name.to_string(),
                component: component.to_string(),
                cause,
                cause_words: row.words.iter().map(|w| w.to_string()).collect(),
                exit_code: ran.exit_code,
                ready: ran.ready,
                hung: ran.hung,
                elapsed_ms: ran.elapsed_ms,
                deadline_ms: ran.deadline_ms,
                exceptions: messages,
                left_files: ran.left_files,
                listed: ran.listed,
                left_processes: ran.left_processes,
                pool_files: Vec::new(),
                leftovers: None,
                log: wrapper.log,
            },
            beside_expected,
            beside: beside_seen(&ran.text),
        })
    }
}

/// Starts the Guard a worker claims from, and checks that it exits 0 when
/// the wrapper stops it after the worker's refused start. Returns how many
/// checks the wrapper runs.
fn worker_guard(guard: &ProcessSpec, script: &mut Script) -> usize {
    script.helper_guard(guard);
    script.after(untouched_check(
        "[ \"$helper_rc\" = 0 ]",
        "its Guard service exited $helper_rc on SIGTERM after the refused start (0 expected)",
    ));
    1
}

/// Places what `row` has beside its component (after a worker's Guard is
/// up), and the checks (and removals of the harness's own files) after it
/// exited. Returns how many checks the wrapper runs.
fn arrange_beside(
    row: &ConfigRow,
    dirs: &Dirs,
    guard: &ProcessSpec,
    logs: &Path,
    script: &mut Script,
) -> usize {
    let socket = dirs.socket().display().to_string();
    let g3 = dirs.work.join("g3.bin").display().to_string();
    let (q_socket, q_g3) = (quote(&socket), quote(&g3));
    match row.beside {
        Nothing => 0,
        LiveService => {
            let mut live = guard.clone();
            live.log = logs.join(format!("hostile-{}.live.log", row.name));
            script.helper_guard(&live);
            // Once the live service holds only its listener (the refused
            // Guard's probe connection closed: a SIGTERM while it still
            // sets one up can be lost, docs/kvcr-findings.md finding 18),
            // polled for at most 5 s, and before it is stopped.
            let settled = format!(
                    "n=0; while [ \"$(awk -v p={q_socket} '$8 == p' /proc/net/unix | wc -l)\" -gt 1 ] && [ $n -lt 100 ]; do n=$((n+1)); sleep 0.05; done"
                );
            let check = untouched_check(
                &format!("kill -0 $helper 2>/dev/null && [ -S {q_socket} ]"),
                &format!("the live Guard service on {socket}"),
            );
            script.after_first(format!("{settled}\n{check}"));
            1
        }
        FileAtSocket => {
            script.before(format!("printf kvcr-e2e > {q_socket}"));
            script.after(untouched_check(
                    &format!("[ -f {q_socket} ] && [ ! -S {q_socket} ] && [ \"$(cat {q_socket})\" = kvcr-e2e ]"),
                    &format!("the harness's regular file at {socket}"),
                ));
            script.after(format!("rm -f {q_socket}"));
            1
        }
        G3FileOfSize(bytes) => {
            script.before(format!("truncate -s {bytes} {q_g3}"));
            script.after(untouched_check(
                &format!("[ \"$(stat -c %s {q_g3})\" = {bytes} ]"),
                &format!("the G3 file of {bytes} bytes at {g3}"),
            ));
            script.after(format!("rm -f {q_g3}"));
            1
        }
        G3FileAndHardLink => {
            let link = quote(&dirs.work.join("g3-link.bin").display().to_string());
            script.before(format!(": > {q_g3} && ln {q_g3} {link}"));
            script.after(format!("rm -f {q_g3} {link}"));
            0
        }
        TamperedPool(tamper) => {
            let aside = quote(&dirs.work.join("pool-aside").display().to_string());
            let (tampered, restored) = tamper_lines(tamper, &aside);
            script.before(pool_file_of_the_guard(&quote(
                &dirs.pools.display().to_string(),
            )));
            script.before(tampered);
            // First once the worker exited, so before its Guard is stopped.
            let alive = untouched_check(
                &format!("kill -0 $helper 2>/dev/null && [ -S {q_socket} ]"),
                &format!("its Guard service, which granted the refused claim, still runs and serves {socket}"),
            );
            script.after_first(format!("{restored}\n{alive}"));
            1
        }
    }
}

/// A wrapper line failing the setup (the worker's Guard stopped first).
fn setup_failed(why: &str) -> String {
    format!(
        "{{ say 'setup failed: {why}'; kill -TERM $helper 2>/dev/null; wait $helper; exit 90; }}"
    )
}

/// The one pool file of the worker's Guard, in `$pool`.
fn pool_file_of_the_guard(pools: &str) -> String {
    format!(
        "pool=; n=0; for f in {pools}/kvcr-*; do [ -f \"$f\" ] || continue; n=$((n+1)); pool=$f; done; [ $n -eq 1 ] || {}",
        setup_failed("not exactly one pool file of the Guard")
    )
}

/// The wrapper's lines doing `tamper` to `$pool` (verified, and said), and
/// putting it back.
fn tamper_lines(tamper: Tamper, aside: &str) -> (String, String) {
    let failed = setup_failed("the pool file could not be tampered with");
    let unrestored = "say 'setup failed: the pool file could not be put back'";
    match tamper {
        Tamper::Mode0644 => (
            format!(
                "chmod 644 \"$pool\" && [ \"$(stat -c %a \"$pool\")\" = 644 ] || {failed}\n\
                 say \"tampered: $pool has mode $(stat -c %a \"$pool\")\""
            ),
            format!("chmod 600 \"$pool\" || {unrestored}"),
        ),
        Tamper::Replaced => (
            format!(
                "pool_size=$(stat -c %s \"$pool\") && pool_inode=$(stat -c %i \"$pool\") && mv \"$pool\" {aside} && truncate -s \"$pool_size\" \"$pool\" && chmod 600 \"$pool\" && [ \"$(stat -c %s \"$pool\")\" = \"$pool_size\" ] && [ \"$(stat -c %i \"$pool\")\" != \"$pool_inode\" ] || {failed}\n\
                 say \"tampered: $pool is another file of $pool_size bytes (inode $(stat -c %i \"$pool\"), the Guard's $pool_inode)\""
            ),
            format!("mv -f {aside} \"$pool\" && [ \"$(stat -c %i \"$pool\")\" = \"$pool_inode\" ] || {unrestored}"),
        ),
        Tamper::ShrunkByAPage => (
            format!(
                "pool_size=$(stat -c %s \"$pool\") && truncate -s $((pool_size - 4096)) \"$pool\" && [ \"$(stat -c %s \"$pool\")\" -lt \"$pool_size\" ] || {failed}\n\
                 say \"tampered: $pool shrunk from $pool_size to $(stat -c %s \"$pool\") bytes\""
            ),
            // Only grown back: the Guard may have written past it since (its
            // hand-back region, after the refused claim).
            format!("[ \"$(stat -c %s \"$pool\")\" -ge \"$pool_size\" ] || truncate -s \"$pool_size\" \"$pool\" || {unrestored}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::Hostility;

    #[test]
    fn every_row_has_a_unique_name_kvcrs_words_and_something_wrong() {
        let mut names: Vec<&str> = REFUSED_CONFIGS.iter().map(|r| r.name).collect();
        names.extend(Hostility::ALL.iter().map(|h| h.word()));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "row names collide");
        for r in REFUSED_CONFIGS {
            assert!(!r.words.is_empty(), "{}", r.name);
            assert!(r.words.iter().all(|w| !w.is_empty()), "{}", r.name);
            assert!(
                !r.set.is_empty() || r.beside != Nothing,
                "{} sets nothing",
                r.name
            );
            assert!(
                r.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                r.name
            );
            // A KVCR setting is for a worker; a Guard's rows are flags. Only
            // a worker has a Guard of its own whose pool file can be spoiled.
            if r.set.iter().any(|s| matches!(s, Kvcr(_))) || matches!(r.beside, TamperedPool(_)) {
                assert_eq!(r.component, Worker, "{}", r.name);
            }
        }
    }

    #[test]
    fn every_kvcr_setting_is_section_field_json() {
        for r in REFUSED_CONFIGS {
            for s in r.set {
                if let Kvcr(kv) = s {
                    let (key, value) = kv.split_once('=').expect("KEY=JSON");
                    let (section, field) = key.split_once('.').expect("SECTION.FIELD");
                    assert!(["config", "g3"].contains(&section), "{kv}");
                    assert!(!field.is_empty(), "{kv}");
                    let filled = value.replace("{work}", "/w");
                    serde_json::from_str::<serde_json::Value>(&filled)
                        .unwrap_or_else(|e| panic!("{}: {kv}: {e}", r.name));
                }
            }
        }
    }

    #[test]
    fn the_cause_says_which_configuration_and_what_was_set() {
        let r = REFUSED_CONFIGS
            .iter()
            .find(|r| r.name == "g3_file_of_another_size")
            .expect("row");
        assert_eq!(
            r.cause(),
            "configuration g3_file_of_another_size: --geometry dense, --attn-pages 1, --g3-file {work}/g3.bin, a G3 file of 4096 bytes left at its path"
        );
    }

    #[test]
    fn values_name_the_attempts_directories() {
        let dirs = Dirs::named("pool_dir_missing");
        assert_eq!(
            fill("{pools}/missing", &dirs),
            "/dev/shm/hostile/pool_dir_missing/pools/missing"
        );
        assert_eq!(
            fill("{sockets}/x {socket} {work}/g3.bin", &dirs),
            "/dev/shm/hostile/pool_dir_missing/sock/x /dev/shm/hostile/pool_dir_missing/sock/g.sock /dev/shm/hostile/pool_dir_missing/work/g3.bin"
        );
    }

    #[test]
    fn what_was_beside_is_read_back_from_the_log() {
        let log = "hostile-start: exit 1\n\
                   hostile-start: untouched yes the live Guard service on /s/g.sock\n\
                   hostile-start: untouched no the G3 file of 4096 bytes at /w/g3.bin\n\
                   hostile-start: listed\n";
        assert_eq!(
            beside_seen(log),
            vec![
                Untouched {
                    what: "the live Guard service on /s/g.sock".into(),
                    kept: true
                },
                Untouched {
                    what: "the G3 file of 4096 bytes at /w/g3.bin".into(),
                    kept: false
                },
            ]
        );
        assert!(beside_seen("hostile-start: listed\n").is_empty());
    }

    /// `row`'s wrapper script as the attempt builds it (a worker's Guard,
    /// then what is beside), and how many checks it runs.
    fn script_of(r: &ConfigRow) -> (String, usize) {
        let guard = ProcessSpec::new("guard", "/venv/bin/python", "/logs/g.log").args([
            "-m",
            "kvcr.kvcr_service",
            "--socket-path",
            "/x/g.sock",
        ]);
        let dirs = Dirs::named(r.name);
        let mut script = Script::new(&dirs, 158_543_872);
        let mut checks = 0;
        if r.component == Worker {
            checks += worker_guard(&guard, &mut script);
        }
        checks += arrange_beside(r, &dirs, &guard, Path::new("/logs"), &mut script);
        (script.script(&guard), checks)
    }

    fn position<'a>(text: &'a str, name: &str) -> impl Fn(&str) -> usize + 'a {
        let name = name.to_string();
        move |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{name}: {needle} in {text}"))
        }
    }

    #[test]
    fn whats_beside_is_placed_before_and_checked_before_any_helper_stops() {
        for r in REFUSED_CONFIGS {
            let (text, checks) = script_of(r);
            let at = position(&text, r.name);
            assert_eq!(text.matches("untouched yes").count(), checks, "{}", r.name);
            if checks > 0 {
                assert!(at("environment ready") < at("untouched yes"), "{}", r.name);
                assert!(at("untouched yes") < at("say listed"), "{}", r.name);
            }
            match r.beside {
                LiveService => {
                    assert!(
                        at("> '/logs/hostile-socket_served_by_another_service.live.log'")
                            < at("environment ready")
                    );
                    assert!(at("/proc/net/unix") < at("untouched yes"));
                    assert!(at("untouched yes") < at("kill -TERM $helper"));
                }
                FileAtSocket => assert!(at("printf kvcr-e2e") < at("environment ready")),
                G3FileOfSize(_) => assert!(at("truncate -s 4096") < at("environment ready")),
                G3FileAndHardLink => assert!(at("ln ") < at("environment ready")),
                TamperedPool(_) => assert_eq!(checks, 2, "{}", r.name),
                Nothing => assert_eq!(checks, usize::from(r.component == Worker), "{}", r.name),
            }
            // The harness's own files go before the listing.
            let places_files =
                matches!(r.beside, FileAtSocket | G3FileOfSize(_) | G3FileAndHardLink);
            assert_eq!(places_files, text.contains("rm -f"), "{}", r.name);
            let checked = std::process::Command::new("sh")
                .args(["-n", "-c", &text])
                .status()
                .expect("sh");
            assert!(checked.success(), "{}: {text}", r.name);
        }
    }

    #[test]
    fn a_workers_guard_must_exit_0_once_stopped_after_the_refused_start() {
        let r = REFUSED_CONFIGS
            .iter()
            .find(|r| r.name == "operation_timeout_zero")
            .expect("row");
        let (text, checks) = script_of(r);
        let at = position(&text, r.name);
        assert_eq!(checks, 1);
        assert!(at("until [ -S") < at("environment ready"));
        assert!(at("kill -TERM $helper") < at("helper_rc=$?"));
        assert!(at("helper_rc=$?") < at("if [ \"$helper_rc\" = 0 ]"));
        assert!(at("if [ \"$helper_rc\" = 0 ]") < at("say listed"));
        assert!(text.contains("untouched no its Guard service exited $helper_rc on SIGTERM"));
        // A Guard row has no Guard of its own to stop.
        let r = REFUSED_CONFIGS
            .iter()
            .find(|r| r.component == Guard && r.beside == Nothing)
            .expect("row");
        assert!(!script_of(r).0.contains("helper_rc"));
    }

    #[test]
    fn a_pool_file_is_tampered_with_once_its_guard_is_up_and_put_back_before_it_stops() {
        let tampers = [
            (Tamper::Mode0644, "chmod 644", "chmod 600"),
            (Tamper::Replaced, "mv \"$pool\"", "mv -f"),
            (
                Tamper::ShrunkByAPage,
                "truncate -s $((pool_size - 4096))",
                "|| truncate -s \"$pool_size\"",
            ),
        ];
        for (tamper, spoil, restore) in tampers {
            let r = REFUSED_CONFIGS
                .iter()
                .find(|r| r.beside == TamperedPool(tamper))
                .unwrap_or_else(|| panic!("a row for {tamper:?}"));
            assert_eq!(r.component, Worker, "{}", r.name);
            let (text, _) = script_of(r);
            let at = position(&text, r.name);
            // The Guard is up (its socket there, so its pool file too).
            assert!(at("until [ -S") < at("/kvcr-*"), "{}", r.name);
            assert!(at("/kvcr-*") < at(spoil), "{}", r.name);
            assert!(at(spoil) < at("say \"tampered: "), "{}", r.name);
            assert!(
                at("say \"tampered: ") < at("environment ready"),
                "{}",
                r.name
            );
            // Put back once the worker exited, then the Guard is seen alive,
            // then stopped, then its exit judged, then the listing.
            assert!(at("say \"exit $rc\"") < at(restore), "{}", r.name);
            let alive = "if kill -0 $helper 2>/dev/null && [ -S";
            assert!(at(restore) < at(alive), "{}", r.name);
            assert!(
                at(alive) < at("kill -TERM $helper 2>/dev/null; wait $helper; helper_rc"),
                "{}",
                r.name
            );
            assert!(at("helper_rc=$?") < at("say listed"), "{}", r.name);
            // Not exactly one pool file, or a tamper that did not hold: the
            // setup fails, and stops the Guard first.
            assert!(text.contains("[ $n -eq 1 ] || { say 'setup failed: not exactly one pool file of the Guard'; kill -TERM $helper"));
            assert!(text.contains(
                "say 'setup failed: the pool file could not be tampered with'; kill -TERM $helper"
            ));
            assert!(text.contains("say 'setup failed: the pool file could not be put back'"));
            assert!(
                r.cause()
                    .contains("its Guard's pool file, once the Guard is up, "),
                "{}",
                r.cause()
            );
        }
    }

    #[test]
    fn a_tampered_pool_files_lines_do_what_they_say() {
        // The wrapper's own lines, run on a file of the test's: the pool is
        // found, spoiled as said, and put back as it was.
        let dir = std::env::temp_dir().join(format!("kvcr-e2e-tamper-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let pools = dir.display().to_string();
        let aside = quote(&dir.join("pool-aside").display().to_string());
        let outcomes = [
            (Tamper::Mode0644, "[ \"$(stat -c %a \"$pool\")\" = 644 ]"),
            (Tamper::Replaced, "[ \"$(stat -c %i \"$pool\")\" != \"$pool_inode\" ] && [ \"$(stat -c %s \"$pool\")\" = 40960 ]"),
            (Tamper::ShrunkByAPage, "[ \"$(stat -c %s \"$pool\")\" = 36864 ]"),
        ];
        for (tamper, spoiled) in outcomes {
            let file = dir.join("kvcr-pool_0-0123");
            std::fs::write(&file, vec![7u8; 40960]).expect("pool");
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .expect("mode");
            let before = std::fs::metadata(&file).expect("stat");
            let (tampered, restored) = tamper_lines(tamper, &aside);
            let text = [
                "say() { echo \"hostile-start: $*\"; }".to_string(),
                "helper=".to_string(),
                pool_file_of_the_guard(&quote(&pools)),
                "pool_inode=$(stat -c %i \"$pool\")".to_string(),
                tampered,
                format!("{spoiled} || exit 3"),
                restored,
            ]
            .join("\n");
            let out = std::process::Command::new("sh")
                .args(["-c", &text])
                .output()
                .expect("sh");
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{tamper:?}: {said} {text}");
            assert!(said.contains("hostile-start: tampered: "), "{said}");
            let after = std::fs::metadata(&file).expect("stat");
            use std::os::unix::fs::MetadataExt;
            assert_eq!(after.ino(), before.ino(), "{tamper:?}");
            assert_eq!(after.mode() & 0o777, 0o600, "{tamper:?}");
            assert!(after.len() >= before.len(), "{tamper:?}");
            assert!(!dir.join("pool-aside").exists(), "{tamper:?}");
        }
        // Two pool files: not exactly one.
        std::fs::write(dir.join("kvcr-pool_1-4567"), b"x").expect("second");
        let text = [
            "say() { echo \"hostile-start: $*\"; }".to_string(),
            "helper=".to_string(),
            pool_file_of_the_guard(&quote(&pools)),
        ]
        .join("\n");
        let out = std::process::Command::new("sh")
            .args(["-c", &text])
            .output()
            .expect("sh");
        assert_eq!(out.status.code(), Some(90));
        assert!(String::from_utf8_lossy(&out.stdout)
            .contains("hostile-start: setup failed: not exactly one pool file of the Guard"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
