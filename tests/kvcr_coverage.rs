//! `--kvcr-coverage` for real, without a stack: the default build's KVCR env
//! over the CPU stack's `.venv` (or `PHASE1_PYTHON`), processes that import
//! and call kvcr as a component would, through the interpreter a measured
//! run gives its stack, then coverage.py's combine and JSON report read
//! into the table. `cargo test --test kvcr_coverage` (no stack).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kvcr_e2e::config::KvcrSpec;
use kvcr_e2e::evidence::kvcr_coverage::{self, KvcrCoverage};
use kvcr_e2e::pyenv::coverage::{self, DATA_DIR_ENV, SOURCE_ENV};
use kvcr_e2e::pyenv::coverage_table::CoverageTable;
use kvcr_e2e::pyenv::{self, kvcr};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The default build's KVCR env, over an interpreter with coverage.py.
fn kvcr_env() -> kvcr::KvcrEnv {
    let user = std::env::var_os("PHASE1_PYTHON").map(PathBuf::from);
    let base = pyenv::ensure(root(), user.as_deref()).expect("the CPU stack's Python env");
    coverage::check_installed(&base.python).unwrap_or_else(|e| panic!("{e}"));
    kvcr::resolve(root(), &base.python, &KvcrSpec::default()).expect("the default build")
}

/// A router hint parsed by kvcr: code inside a kvcr function runs.
const PARSE_A_HINT: &str = "from kvcr.hint_parser import _KVFetchHint\n\
    h = _KVFetchHint.from_hint({'protocol_version': '0.1', 'actions': [{'action_type': 'kv.fetch', \
    'action_version': '1.0', 'payload': {'source_control_endpoint': 'tcp://127.0.0.1:1', \
    'block_hashes': [7, 9], 'mode': 'copy'}}]})\n\
    assert h.block_hashes == frozenset({7, 9})\n";

/// Runs `code` with `python` in `cwd`, without the coverage variable of
/// the caller; returns its stderr (the component's log).
fn run(python: &Path, code: &str, cwd: &Path) -> String {
    let out = Command::new(python)
        .args(["-c", code])
        .env_remove(DATA_DIR_ENV)
        .env_remove(SOURCE_ENV)
        .current_dir(cwd)
        .output()
        .expect("the interpreter runs");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{code} failed:\n{log}");
    log
}

/// The pid the import hook reported in `log`.
fn reported_pid(log: &str) -> u32 {
    match pyenv::import_report::parse(log).first() {
        Some((_, pyenv::import_report::Report::Imported { pid, .. })) => *pid,
        other => panic!("no import report in the log ({other:?}):\n{log}"),
    }
}

fn every_coverage_file(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(every_coverage_file(&path));
        } else if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(".coverage"))
        {
            found.push(path);
        }
    }
    found
}

fn table_of(env: &kvcr::KvcrEnv, data: &Path, out: &Path) -> CoverageTable {
    coverage::combine(
        &env.python,
        &[data.to_path_buf()],
        std::slice::from_ref(&env.build.location),
        out,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn only_a_measured_process_saves_data_and_the_table_names_kvcr_modules() {
    let env = kvcr_env();
    let dir = tempfile::tempdir().expect("tempdir");
    let cov_dir = dir.path().join("kvcr-coverage");
    let measured =
        coverage::measured_python(&env.python, &env.build.location, &cov_dir).expect("wrapper");
    let data = coverage::data_dir(&cov_dir);

    // Off: the env's own interpreter imports and runs kvcr; nothing saved,
    // anywhere under the directory it ran in.
    let log = run(&env.python, PARSE_A_HINT, dir.path());
    reported_pid(&log);
    assert_eq!(every_coverage_file(dir.path()), Vec::<PathBuf>::new());

    // On, a process that never imports kvcr (the frontend): nothing saved.
    run(&measured, "import json", dir.path());
    assert!(coverage::data_files(&data).is_empty());

    // On: one data file, named with the pid the import hook reported.
    let log = run(&measured, PARSE_A_HINT, dir.path());
    let pid = reported_pid(&log);
    let files = coverage::data_files(&data);
    assert_eq!(files.len(), 1, "{files:?}\n{log}");
    assert_eq!(files[0].pid, Some(pid));

    let table = table_of(&env, &data, &cov_dir);
    let parser = table
        .module("kvcr/hint_parser.py")
        .expect("hint_parser's row");
    assert!(parser.counts.statements > 0, "{parser:?}");
    assert!(
        parser.counts.missed < parser.counts.statements,
        "{parser:?}"
    );
    assert!(parser.counts.branches > 0, "{parser:?}");
    assert!(
        table.modules.iter().all(|m| m.module.starts_with("kvcr/")),
        "{:?}",
        table.modules
    );
    // A module no process imported is in the table, at 0 %.
    let service = table
        .module("kvcr/kvcr_service.py")
        .expect("kvcr_service's row");
    assert_eq!(
        service.counts.missed, service.counts.statements,
        "{service:?}"
    );
    assert!(table.totals.statements > table.totals.missed);

    // Calling into kvcr runs more of it than importing it.
    let import_only = dir.path().join("import-only");
    let wrapper =
        coverage::measured_python(&env.python, &env.build.location, &import_only).expect("wrapper");
    run(&wrapper, "import kvcr.hint_parser", dir.path());
    let imported = table_of(&env, &coverage::data_dir(&import_only), &import_only);
    let imported = imported.module("kvcr/hint_parser.py").expect("row");
    assert!(
        imported.counts.missed > parser.counts.missed,
        "import only: {imported:?}; parsing a hint: {parser:?}"
    );
}

#[test]
fn a_process_stopped_with_sigterm_saves_its_data_and_the_run_record_names_it() {
    let env = kvcr_env();
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, logs) = measured_sleeper(&env, dir.path());
    let log_path = logs.join("guard.log");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = child.wait().expect("exits");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15), "ends by the signal: {status:?}");

    let log = std::fs::read_to_string(&log_path).expect("log");
    let imports = pyenv::import_report::scan(&logs);
    assert_eq!(imports.len(), 1, "{log}");
    // A second KVCR process that never saved (as a SIGKILLed worker).
    let killed = pyenv::ComponentImport {
        component: "worker-A".into(),
        pid: u32::MAX,
        ..imports[0].clone()
    };
    let record = KvcrCoverage::collect(
        &env.python,
        dir.path(),
        &env.build,
        &[imports[0].clone(), killed],
        &logs,
    );
    let table = record
        .table
        .as_ref()
        .unwrap_or_else(|| panic!("no table: {:?}", record.error));
    assert!(table
        .module("kvcr/hint_parser.py")
        .is_some_and(|m| m.counts.missed < m.counts.statements));
    assert_eq!(record.processes[0].component, "guard");
    let saved = record.processes[0]
        .data_file
        .as_ref()
        .expect("the guard's data file");
    assert!(saved.starts_with("kvcr-coverage/data"), "{saved:?}");
    assert_eq!(record.processes[1].data_file, None);
    assert!(record.hook_errors.is_empty(), "{:?}", record.hook_errors);
    assert!(
        record
            .summary()
            .contains("data from 1 of 2 KVCR processes; none from worker-A"),
        "{}",
        record.summary()
    );
}

/// A run directory whose KVCR process ran `code`, with its coverage record.
fn measured_run(env: &kvcr::KvcrEnv, root: &Path, name: &str, code: &str) -> PathBuf {
    let dir = root.join(name);
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).expect("logs");
    let measured = coverage::measured_python(
        &env.python,
        &env.build.location,
        &dir.join(kvcr_coverage::DIR),
    )
    .expect("wrapper");
    std::fs::write(logs.join("worker-A.log"), run(&measured, code, &dir)).expect("log");
    let imports = pyenv::import_report::scan(&logs);
    let record = KvcrCoverage::collect(&env.python, &dir, &env.build, &imports, &logs);
    std::fs::write(
        dir.join(kvcr_coverage::FILE),
        serde_json::to_string(&record).expect("json"),
    )
    .expect("record");
    dir
}

#[test]
fn two_runs_merge_into_one_table_where_each_line_counts_once() {
    let env = kvcr_env();
    let root = tempfile::tempdir().expect("tempdir");
    let hint = measured_run(&env, root.path(), "hint", PARSE_A_HINT);
    let sizes = measured_run(
        &env,
        root.path(),
        "sizes",
        "from kvcr.kvcr_service import _parse_pool_sizes_gb\n\
         assert _parse_pool_sizes_gb('0.01,0.02')[0] > 0\n",
    );
    let out = root.path().join("merged");
    let merged = kvcr_e2e::evidence::kvcr_coverage_merge::merge(
        &env.python,
        &[hint.clone(), sizes.clone()],
        &out,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let table_of_run = |dir: &Path| -> CoverageTable {
        let text = std::fs::read_to_string(dir.join(kvcr_coverage::FILE)).expect("record");
        let record: KvcrCoverage = serde_json::from_str(&text).expect("json");
        record.table.expect("a table")
    };
    let (a, b) = (table_of_run(&hint), table_of_run(&sizes));
    let missed = |t: &CoverageTable, m: &str| t.module(m).expect(m).counts.missed;
    // Each of these modules runs further in one of the runs only (the other
    // imports it at most): the merge misses what that run misses.
    for m in ["kvcr/hint_parser.py", "kvcr/kvcr_service.py"] {
        assert_eq!(
            missed(&merged.table, m),
            missed(&a, m).min(missed(&b, m)),
            "{m}"
        );
    }
    assert!(missed(&b, "kvcr/kvcr_service.py") < missed(&a, "kvcr/kvcr_service.py"));
    assert!(merged.table.totals.missed <= a.totals.missed.min(b.totals.missed));
    assert_eq!(merged.runs.len(), 2);
    let md = std::fs::read_to_string(out.join("kvcr-coverage-merged.md")).expect("markdown");
    assert!(md.contains("| **merged** |"), "{md}");
    assert!(md.contains("| `kvcr/kvcr_service.py` |"), "{md}");
}

/// A crash the harness delivers (SIGKILL) loses nothing the process ran
/// before it: asked first, the process saves with coverage.py still
/// running, answers, and its data file outlives the SIGKILL.
#[test]
fn a_process_asked_to_save_before_its_sigkill_keeps_what_it_ran() {
    let env = kvcr_env();
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, logs) = measured_sleeper(&env, dir.path());

    let answers = coverage::checkpoint(&[child.id()], std::time::Duration::from_secs(30));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(answers[0].saved(), "{answers:?}");
    assert!(kvcr_e2e::proc::procfs::is_alive(child.id()), "it runs on");
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("exits");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{status:?}");

    let imports = pyenv::import_report::scan(&logs);
    let record = KvcrCoverage::collect(&env.python, dir.path(), &env.build, &imports, &logs);
    let table = record
        .table
        .as_ref()
        .unwrap_or_else(|| panic!("no table: {:?}", record.error));
    assert!(table
        .module("kvcr/hint_parser.py")
        .is_some_and(|m| m.counts.missed < m.counts.statements));
    assert!(record.processes[0].data_file.is_some(), "{record:?}");
    assert!(record.hook_errors.is_empty(), "{:?}", record.hook_errors);
}

/// A measured KVCR process under `root` (its data in the run's coverage
/// directory, its stderr in `logs/guard.log`) that parsed a hint, said
/// `ready` and now sleeps: the child and the logs directory.
fn measured_sleeper(env: &kvcr::KvcrEnv, root: &Path) -> (std::process::Child, PathBuf) {
    let cov_dir = root.join(kvcr_coverage::DIR);
    let measured =
        coverage::measured_python(&env.python, &env.build.location, &cov_dir).expect("wrapper");
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).expect("logs");
    let log_file = std::fs::File::create(logs.join("guard.log")).expect("log");
    let code = format!("{PARSE_A_HINT}import time\nprint('ready', flush=True)\ntime.sleep(120)\n");
    let mut child = Command::new(&measured)
        .args(["-c", &code])
        .env_remove(DATA_DIR_ENV)
        .env_remove(SOURCE_ENV)
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .expect("spawns");
    let mut ready = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("ready");
    assert_eq!(ready.trim(), "ready");
    (child, logs)
}
