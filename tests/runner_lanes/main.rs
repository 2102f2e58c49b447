//! The runner lanes, for real: the suite submitted to a Slurm cluster this
//! test starts, and the suite run inside a podman container. Each lane is
//! ignored, with the reason, where its tools cannot be set up (not root, no
//! apt-get). Evidence goes to `target/phase1/lanes/<lane>/<time>/`.
//!
//! ```sh
//! cargo test --test runner_lanes                 # both lanes
//! cargo test --test runner_lanes -- slurm::      # one lane
//! ```

#[path = "../lanes/mod.rs"]
mod lanes;

mod container;
mod daemon;
mod slurm;
mod stackwatch;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Why a lane cannot run here.
pub enum Unavailable {
    /// Not something a test can fix (not root, no apt-get): ignored, or a
    /// failure under `PHASE1_REQUIRE_ALL`.
    Ignore(String),
    /// The tools are there but broke: a failure.
    Broken(String),
}

/// Checks `programs` are installed; installs `packages` with apt-get when
/// they are not and this process is root.
pub fn ensure_programs(
    lane: &str,
    programs: &[&str],
    packages: &[&str],
) -> Result<(), Unavailable> {
    let missing = |programs: &[&str]| -> Vec<String> {
        programs
            .iter()
            .filter(|p| {
                !Command::new("sh")
                    .args(["-c", &format!("command -v {p}")])
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .map(|p| p.to_string())
            .collect()
    };
    let absent = missing(programs);
    if absent.is_empty() {
        return Ok(());
    }
    if effective_uid() != 0 {
        return Err(Unavailable::Ignore(format!(
            "{lane} lane: {} not installed and not root to install {}",
            absent.join(", "),
            packages.join(" ")
        )));
    }
    if missing(&["apt-get"]).len() == 1 {
        return Err(Unavailable::Ignore(format!(
            "{lane} lane: {} not installed and no apt-get to install {}",
            absent.join(", "),
            packages.join(" ")
        )));
    }
    eprintln!(
        "[lanes] {lane}: installing {} (apt-get)",
        packages.join(" ")
    );
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| e.to_string())
            .and_then(|o| {
                if o.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{}: {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr).trim()
                    ))
                }
            })
    };
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend_from_slice(packages);
    apt(&["update", "-q"])
        .and_then(|()| apt(&install))
        .map_err(|e| {
            Unavailable::Ignore(format!(
                "{lane} lane: apt-get could not install {}: {e}",
                packages.join(" ")
            ))
        })?;
    let still = missing(programs);
    if still.is_empty() {
        Ok(())
    } else {
        Err(Unavailable::Broken(format!(
            "{lane} lane: {} still missing after installing {}",
            still.join(", "),
            packages.join(" ")
        )))
    }
}

/// The user's settings with `flags` added (e.g. `--cases TC-01,TC-03`).
pub fn lane_settings(flags: &[&str]) -> kvcr_e2e::config::Settings {
    let argv = std::iter::once("lanes").chain(flags.iter().copied());
    let args = kvcr_e2e::config::split_args(argv)
        .expect("lane flags parse")
        .0;
    let env = kvcr_e2e::config::Env::from_process().unwrap_or_else(|e| panic!("{e}"));
    kvcr_e2e::config::resolve(&args, &env)
        .unwrap_or_else(|e| panic!("{e}"))
        .settings
}

/// The run under `runs` wrote a JUnit report in which each of `cases`
/// passed (see [`junit_passed`]).
pub fn expect_junit(runs: &Path, cases: &[&str]) -> Result<(), String> {
    let path = runs.join("latest/junit.xml");
    let xml = std::fs::read_to_string(&path)
        .map_err(|e| format!("no JUnit report at {}: {e}", path.display()))?;
    junit_passed(&xml, cases).map_err(|e| format!("{}: {e}", path.display()))
}

/// Each of `cases` has a testcase that is not skipped, and the report has
/// no failure or error.
fn junit_passed(xml: &str, cases: &[&str]) -> Result<(), String> {
    if xml.contains("<failure") || xml.contains("<error") {
        return Err(format!("the report has a failure:\n{xml}"));
    }
    for case in cases {
        let Some(start) = xml.find(&format!("<testcase name=\"{case}::")) else {
            return Err(format!("no testcase for {case}:\n{xml}"));
        };
        let block = &xml[start..];
        let block = &block[..block.find("</testcase>").unwrap_or(block.len())];
        if block.contains("<skipped") {
            return Err(format!("{case} was skipped, not passed:\n{block}"));
        }
    }
    Ok(())
}

/// The JUnit check can fail: a skipped, failed or missing case is no pass.
fn junit_check_can_fail() -> Result<(), String> {
    let case = |name: &str, body: &str| {
        format!("<testcase name=\"{name}::x\" classname=\"phase1\">{body}</testcase>")
    };
    let passed = case("TC-01", "");
    let skipped = case("TC-03", "<skipped message=\"not selected\"/>");
    let failed = case("TC-03", "<failure message=\"wrong tokens\"/>");
    let expect = |xml: String, ok: bool| match (junit_passed(&xml, &["TC-01", "TC-03"]), ok) {
        (Ok(()), true) | (Err(_), false) => Ok(()),
        (got, _) => Err(format!("junit_passed({xml}) = {got:?}")),
    };
    expect(format!("{passed}{}", case("TC-03", "")), true)?;
    expect(format!("{passed}{skipped}"), false)?;
    expect(format!("{passed}{failed}"), false)?;
    expect(passed, false)
}

/// A fresh evidence directory for one trial.
fn evidence_dir(lane: &str, trial: &str) -> PathBuf {
    let stamp = time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second]"
        ))
        .unwrap_or_default();
    let dir = lanes::root().join(format!("target/phase1/lanes/{lane}/{stamp}-{trial}"));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

type Shared<T> = Arc<Mutex<Option<Result<T, String>>>>;

/// The cluster, started by the first trial that needs it.
fn with_cluster(
    cluster: &Shared<slurm::Cluster>,
    trial: impl FnOnce(&slurm::Cluster) -> Result<(), String>,
) -> Result<Completion, Failed> {
    let mut guard = cluster.lock().unwrap_or_else(|p| p.into_inner());
    if guard.is_none() {
        *guard = Some(match slurm::Cluster::start() {
            Ok(c) => Ok(c),
            Err(Unavailable::Ignore(reason)) => {
                return kvcr_e2e::suite::machine_cannot_run_trial(reason)
            }
            Err(Unavailable::Broken(e)) => Err(e),
        });
    }
    match guard.as_ref() {
        Some(Ok(c)) => trial(c)
            .map(|()| Completion::Completed)
            .map_err(Failed::from),
        Some(Err(e)) => Err(Failed::from(format!(
            "the Slurm cluster did not start: {e}"
        ))),
        None => Err(Failed::from("no cluster")),
    }
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // One trial at a time: each runs a whole stack.
    args.test_threads = Some(1);
    let cluster: Shared<slurm::Cluster> = Arc::new(Mutex::new(None));
    let c1 = cluster.clone();
    let c2 = cluster.clone();
    let c3 = cluster.clone();
    let trials = vec![
        Trial::test("junit::a_skipped_failed_or_missing_case_is_no_pass", || {
            junit_check_can_fail().map_err(Failed::from)
        }),
        Trial::ignorable_test(
            "slurm::sbatch_runs_tc01_tc03_and_collects_evidence",
            move || {
                with_cluster(&c1, |c| {
                    slurm::suite_job(c, &evidence_dir("slurm", "suite"))
                })
            },
        ),
        Trial::ignorable_test("slurm::scancel_leaves_no_stack_process", move || {
            with_cluster(&c2, |c| {
                slurm::stopped_job_leaves_nothing(c, &evidence_dir("slurm", "scancel"), |id| {
                    c.scancel(id).map(|()| format!("scancel {id}"))
                })
            })
        }),
        Trial::ignorable_test(
            "slurm::sigkill_of_srun_leaves_no_stack_process",
            move || {
                with_cluster(&c3, |c| {
                    slurm::stopped_job_leaves_nothing(
                        c,
                        &evidence_dir("slurm", "sigkill-srun"),
                        |id| {
                            let pid = slurm::srun_pid(id)?;
                            kill(Pid::from_raw(pid as i32), Signal::SIGKILL)
                                .map_err(|e| e.to_string())?;
                            Ok(format!("SIGKILL of job {id}'s srun (pid {pid})"))
                        },
                    )
                })
            },
        ),
        Trial::ignorable_test(
            "container::podman_build_then_tc01_tc03_in_the_image",
            || {
                match container::available() {
                    Err(Unavailable::Ignore(reason)) => {
                        return kvcr_e2e::suite::machine_cannot_run_trial(reason)
                    }
                    Err(Unavailable::Broken(e)) => return Err(Failed::from(e)),
                    Ok(()) => {}
                }
                container::suite_in_container(&evidence_dir("container", "suite"))
                    .map(|()| Completion::Completed)
                    .map_err(Failed::from)
            },
        ),
    ];
    let conclusion = libtest_mimic::run(&args, trials);
    // Stop every daemon before exiting (exit() runs no destructors).
    drop(cluster.lock().unwrap_or_else(|p| p.into_inner()).take());
    conclusion.exit_code()
}

/// The effective uid, from /proc (no unsafe libc call needed).
fn effective_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}
