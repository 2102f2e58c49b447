//! A single-node Slurm cluster of this test's own (munged, slurmctld and
//! slurmd on loopback, kernel-chosen ports, state in a temporary
//! directory), and the Slurm lane's trials on it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kvcr_e2e::runner::{self, RunnerKind};
use kvcr_e2e::wait::{self, Poll};

use super::daemon::Daemon;
use super::lanes::{poll, root};
use super::stackwatch::{self, StackSeen};

const PACKAGES: &[&str] = &["slurm-wlm", "munge"];
const PROGRAMS: &[&str] = &[
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "scancel",
    "scontrol",
    "sinfo",
];

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub conf: PathBuf,
    // Dropped in reverse start order: slurmd, slurmctld, munged.
    daemons: Vec<Daemon>,
}

impl Cluster {
    /// Starts the cluster, or says why this machine cannot run one (the
    /// trials are then ignored with that reason).
    pub fn start() -> Result<Cluster, super::Unavailable> {
        super::ensure_programs("Slurm", PROGRAMS, PACKAGES)?;
        Self::start_daemons().map_err(super::Unavailable::Broken)
    }

    fn start_daemons() -> Result<Cluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("kvcr-slurm-")
            .tempdir_in("/tmp")
            .map_err(|e| e.to_string())?;
        let d = dir.path();
        for sub in ["state", "spool", "log"] {
            std::fs::create_dir_all(d.join(sub)).map_err(|e| e.to_string())?;
        }
        let key = d.join("munge.key");
        let bytes: Vec<u8> = (0..1024)
            .map(|i| (i * 7 + std::process::id() as usize) as u8)
            .collect();
        std::fs::write(&key, bytes).map_err(|e| e.to_string())?;
        set_mode(&key, 0o400)?;
        let socket = d.join("munge.sock");
        let mut daemons = vec![Daemon::start(
            "munged",
            Command::new("munged")
                .args(["--foreground", "--force"])
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--socket={}", socket.display()))
                .arg(format!("--pid-file={}", d.join("munged.pid").display()))
                .arg(format!("--log-file={}", d.join("log/munged.log").display()))
                .arg(format!("--seed-file={}", d.join("munged.seed").display())),
            &d.join("log/munged.out"),
        )?];
        let node = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .map_err(|e| e.to_string())?;
        let conf = d.join("slurm.conf");
        std::fs::write(&conf, slurm_conf(d, &node, &socket)?).map_err(|e| e.to_string())?;
        poll("munged's socket", Duration::from_secs(30), || {
            socket.exists().then_some(())
        });
        daemons.push(Daemon::start(
            "slurmctld",
            Command::new("slurmctld").arg("-D").arg("-f").arg(&conf),
            &d.join("log/slurmctld.out"),
        )?);
        daemons.push(Daemon::start(
            "slurmd",
            Command::new("slurmd")
                .arg("-D")
                .arg("-f")
                .arg(&conf)
                .args(["-N", &node]),
            &d.join("log/slurmd.out"),
        )?);
        let mut cluster = Cluster { dir, conf, daemons };
        let logs = cluster.dir.path().join("log");
        wait::until(
            format!("the Slurm node to be idle (logs in {})", logs.display()),
            super::lanes::settings().startup_timeout,
            Duration::from_millis(200),
            || {
                for daemon in &mut cluster.daemons {
                    if let Err(e) = daemon.check_running() {
                        return Poll::Abort(e);
                    }
                }
                match cluster.output(Command::new("sinfo").args(["-h", "-N", "-o", "%T"])) {
                    Ok(state) if state.trim() == "idle" => Poll::Ready(()),
                    state => Poll::Pending(format!("sinfo: {state:?}")),
                }
            },
        )
        .map_err(|e| e.to_string())?;
        Ok(cluster)
    }

    /// `command` talking to this cluster.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn output(&self, command: &mut Command) -> Result<String, String> {
        command.env("SLURM_CONF", &self.conf);
        let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{command:?}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Submits `script` with `env` added; returns the job id.
    pub fn sbatch(
        &self,
        script: &Path,
        output: &Path,
        env: &[(String, String)],
    ) -> Result<u32, String> {
        let mut c = self.command("sbatch");
        c.arg("--parsable")
            .arg(format!("--output={}", output.display()))
            .arg(script);
        c.current_dir(root());
        for (k, v) in env {
            c.env(k, v);
        }
        let text = self.output(&mut c)?;
        text.trim()
            .split(';')
            .next()
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| format!("sbatch printed `{}`, expected a job id", text.trim()))
    }

    /// `JobState` and `ExitCode` of job `id`.
    pub fn job_state(&self, id: u32) -> Result<(String, String), String> {
        let text =
            self.output(
                self.command("scontrol")
                    .args(["-o", "show", "job", &id.to_string()]),
            )?;
        let field = |name: &str| {
            text.split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .unwrap_or("?")
                .to_string()
        };
        Ok((field("JobState"), field("ExitCode")))
    }

    /// Waits for job `id` to end; returns its state and exit code.
    pub fn wait_job(&self, id: u32, budget: Duration) -> (String, String) {
        poll(&format!("Slurm job {id} to end"), budget, || {
            let (state, exit) = self.job_state(id).ok()?;
            let running =
                ["PENDING", "RUNNING", "CONFIGURING", "COMPLETING"].contains(&state.as_str());
            (!running).then_some((state, exit))
        })
    }

    pub fn scancel(&self, id: u32) -> Result<(), String> {
        self.output(self.command("scancel").arg(id.to_string()))
            .map(|_| ())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // No job outlives the cluster: cancel, then stop the daemons.
        let _ = self.output(self.command("scancel").args(["--user=root"]));
        while let Some(mut daemon) = self.daemons.pop() {
            daemon.stop();
        }
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

fn slurm_conf(d: &Path, node: &str, munge_socket: &Path) -> Result<String, String> {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mem_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(2048, |kib| kib / 1024 * 8 / 10);
    let d = d.display();
    Ok(format!(
        "ClusterName=kvcre2e\n\
         SlurmctldHost={node}(127.0.0.1)\n\
         SlurmUser=root\nSlurmdUser=root\n\
         AuthType=auth/munge\nCredType=cred/munge\n\
         AuthInfo=socket={sock}\n\
         SlurmctldPort={ctld}\nSlurmdPort={slurmd}\n\
         StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
         SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
         SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
         JobAcctGatherType=jobacct_gather/none\n\
         SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
         ReturnToService=2\nMpiDefault=none\n\
         NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mib} State=UNKNOWN\n\
         PartitionName=lane Nodes={node} Default=YES MaxTime=INFINITE State=UP\n",
        sock = munge_socket.display(),
        ctld = free_port()?,
        slurmd = free_port()?,
    ))
}

/// Writes the generated sbatch script for `cases` into `dir`.
fn sbatch_script(cases: &str, dir: &Path) -> PathBuf {
    let settings = super::lane_settings(&["--cases", cases]);
    let files = runner::artifacts(RunnerKind::Slurm, &settings, root())
        .unwrap_or_else(|e| panic!("slurm runner: {e}"));
    let written = runner::write_all(&files, dir).expect("write the sbatch script");
    written.into_iter().next().expect("one script")
}

fn job_env(runs: &Path) -> Vec<(String, String)> {
    vec![
        ("KVCR_E2E_REPO".into(), root().display().to_string()),
        ("PHASE1_RUN_DIR".into(), runs.display().to_string()),
        // The suite binary cargo built, not a nested `cargo test`.
        (
            "KVCR_E2E_SUITE".into(),
            super::lanes::phase1_binary().display().to_string(),
        ),
    ]
}

/// sbatch the generated script for TC-01 and TC-03; the job passes and its
/// JUnit and run directory are collected.
pub fn suite_job(cluster: &Cluster, evidence: &Path) -> Result<(), String> {
    let script = sbatch_script("TC-01,TC-03", &evidence.join("runner"));
    let runs = evidence.join("runs");
    let out = evidence.join("job-%j.out");
    let id = cluster.sbatch(&script, &out, &job_env(&runs))?;
    let budget = super::lanes::stack_budget() * 2;
    let (state, exit) = cluster.wait_job(id, budget);
    let job_out =
        std::fs::read_to_string(evidence.join(format!("job-{id}.out"))).unwrap_or_default();
    if state != "COMPLETED" || exit != "0:0" {
        return Err(format!(
            "Slurm job {id} ended {state} (exit {exit}), expected COMPLETED 0:0; its output:\n{job_out}"
        ));
    }
    super::expect_junit(&runs, &["TC-01", "TC-03"])
}

/// Submits a long run (TC-05), waits for its stack, applies `stop`, and
/// checks that no process of the stack and no scratch directory is left.
/// A job whose stack never came up is not what this checks: it is
/// resubmitted once, and its output kept in the evidence.
pub fn stopped_job_leaves_nothing(
    cluster: &Cluster,
    evidence: &Path,
    stop: impl FnOnce(u32) -> Result<String, String>,
) -> Result<(), String> {
    let script = sbatch_script("TC-05", &evidence.join("runner"));
    let mut attempt = 1;
    let (id, seen) = loop {
        let runs = evidence.join(format!("runs-{attempt}"));
        let id = cluster.sbatch(&script, &evidence.join("job-%j.out"), &job_env(&runs))?;
        match await_job_stack(cluster, id, &runs, evidence) {
            Ok(seen) => break (id, seen),
            Err(e) if attempt == 1 => {
                eprintln!("[lanes] resubmitting: {e}");
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let how = stop(id)?;
    let (state, _) = cluster.wait_job(id, Duration::from_secs(60));
    stackwatch::expect_gone(&seen, &how)?;
    if state == "COMPLETED" {
        return Err(format!("job {id} completed although {how}"));
    }
    Ok(())
}

fn await_job_stack(
    cluster: &Cluster,
    id: u32,
    runs: &Path,
    evidence: &Path,
) -> Result<StackSeen, String> {
    let job_out = evidence.join(format!("job-{id}.out"));
    stackwatch::await_stack(
        &runs.join("latest/stack.json"),
        super::lanes::stack_budget(),
        || {
            let (state, exit) = cluster.job_state(id).ok()?;
            let running = ["PENDING", "RUNNING", "CONFIGURING"].contains(&state.as_str());
            (!running).then(|| {
                format!(
                    "job {id} is {state} (exit {exit}); its output ({}):\n{}",
                    job_out.display(),
                    std::fs::read_to_string(&job_out).unwrap_or_default()
                )
            })
        },
    )
}

/// The `srun` step launcher of job `id`, found through /proc.
pub fn srun_pid(id: u32) -> Result<u32, String> {
    let wanted = format!("SLURM_JOB_ID={id}");
    for entry in std::fs::read_dir("/proc")
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        if !argv0.ends_with(b"srun") {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if environ.split(|b| *b == 0).any(|kv| kv == wanted.as_bytes()) {
            return Ok(pid);
        }
    }
    Err(format!("no srun process of job {id} in /proc"))
}
