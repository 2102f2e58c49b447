//! A run among the machine's other live kvcr-e2e runs
//! ([`live_runs`](crate::proc::live_runs)): it registers when it starts
//! its stack or attaches to one, says whom it starts beside, waits for them
//! first with `--exclusive`, and records them and the load average at its
//! start and end (results.json, the report, the summary).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::Settings;
use crate::events::{self, Moment, RunEvent};
use crate::evidence::Neighbourhood;
use crate::proc::live_runs::{Entry, Registration, Registry, RunInfo, RunKind};

/// This run's registration and what it saw.
pub(super) struct LiveRun {
    registration: Registration,
    record: Neighbourhood,
}

impl LiveRun {
    /// Registers the run of `target` (run directory `run_dir`) in the
    /// registry the settings name: at once, or with `exclusive` once every
    /// other run has ended. `attach` is the `stack.json` of an attached
    /// run, whose owner is the stack, not a neighbour. `Ok(None)`: no
    /// registry here (said in one line); with `exclusive` that is an error.
    pub(super) fn join(
        settings: &Settings,
        repo_root: &Path,
        target: &str,
        run_dir: &Path,
        attach: Option<&Path>,
    ) -> Result<Option<LiveRun>, String> {
        let dir = repo_root.join(&settings.live_runs_dir);
        let kind = match attach {
            Some(_) => RunKind::Attaches,
            None => RunKind::Provisions,
        };
        let me = RunInfo::new(target, run_dir, kind, settings.exclusive)
            .attached_to(attach.and_then(owner_pid));
        let registry = match Registry::open(&dir) {
            Ok(registry) => registry,
            Err(e) if settings.exclusive => {
                return Err(format!("--exclusive needs the live-run registry: {e}"))
            }
            Err(e) => {
                events::emit(RunEvent::Warning {
                    message: format!("{e}; this run's neighbours are not recorded"),
                });
                return Ok(None);
            }
        };
        let timeout = settings.exclusive_timeout;
        let registered = if settings.exclusive {
            registry.register_exclusive(&me, timeout, |waiting| say_waiting(waiting, timeout))
        } else {
            registry.register(&me)
        };
        let registration = match registered {
            Ok(registration) => registration,
            Err(e) if settings.exclusive => return Err(e.to_string()),
            Err(e) => {
                events::emit(RunEvent::Warning {
                    message: format!("{e}; this run's neighbours are not recorded"),
                });
                return Ok(None);
            }
        };
        if settings.exclusive && !registration.waited.is_zero() {
            events::emit(RunEvent::ExclusiveWaited {
                seconds: registration.waited.as_secs_f64(),
            });
        }
        say_beside(&registration, settings.exclusive);
        let record = Neighbourhood {
            registry: dir,
            exclusive: settings.exclusive,
            waited_s: registration.waited.as_secs_f64(),
            at_start: registration.at_start.clone(),
            at_end: None,
        };
        Ok(Some(LiveRun {
            registration,
            record,
        }))
    }

    /// What the run saw so far.
    pub(super) fn record(&self) -> Neighbourhood {
        self.record.clone()
    }

    /// Looks again at the end of the run (before teardown).
    pub(super) fn look_at_end(&mut self) {
        let now = self.registration.surroundings();
        for n in now.others() {
            events::emit(seen(n, Moment::End));
        }
        self.record.at_end = Some(now);
    }

    /// The run is over: its owner file goes.
    pub(super) fn end(self) {
        self.registration.end();
    }
}

fn say_waiting(waiting: &[Entry], timeout: Duration) {
    events::emit(RunEvent::ExclusiveWaiting {
        timeout_s: timeout.as_secs(),
        runs: waiting.iter().map(Entry::describe).collect(),
    });
}

/// A neighbour seen at `when`, as an event.
fn seen(n: &crate::proc::live_runs::Neighbour, when: Moment) -> RunEvent {
    RunEvent::NeighbourSeen {
        when,
        relation: n.relation.words().to_string(),
        pid: n.run.pid,
        target: n.run.target.clone(),
        run: n.run.describe(),
    }
}

/// One line per neighbour, the load, and a warning beside an exclusive run.
fn say_beside(registration: &Registration, exclusive: bool) {
    let start = &registration.at_start;
    if start.neighbours.is_empty() {
        return;
    }
    for n in &start.neighbours {
        events::emit(seen(n, Moment::Start));
    }
    events::emit(RunEvent::MachineLoad {
        load: start.load_words(),
    });
    for n in start.others().filter(|n| n.run.exclusive && !exclusive) {
        events::emit(RunEvent::DisturbsExclusive {
            pid: n.run.pid,
            target: n.run.target.clone(),
        });
    }
    let others = start.others().count();
    if others > 0 && !exclusive {
        events::emit(RunEvent::MachineShared { others });
    }
}

/// The owner pid a `stack.json` names.
fn owner_pid(manifest: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    u32::try_from(value.get("owner_pid")?.as_u64()?).ok()
}

/// The registry directory the settings name (relative paths from the repository).
pub fn registry_dir(settings: &Settings, repo_root: &Path) -> PathBuf {
    repo_root.join(&settings.live_runs_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path, exclusive: bool) -> Settings {
        let mut s = Settings::blank();
        s.live_runs_dir = dir.to_path_buf();
        s.exclusive = exclusive;
        s.exclusive_timeout = Duration::from_secs(1);
        s
    }

    #[test]
    fn a_run_records_its_neighbours_at_start_and_end_and_an_exclusive_one_waits() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("live");
        let root = Path::new("/");
        let mut first = LiveRun::join(
            &settings(&dir, false),
            root,
            "phase1",
            Path::new("runs/1"),
            None,
        )
        .unwrap()
        .expect("a registry");
        assert!(first.record().at_start.neighbours.is_empty());
        // An exclusive run gives up at its deadline, naming the first.
        let err = match LiveRun::join(&settings(&dir, true), root, "ci", Path::new("runs/2"), None)
        {
            Err(e) => e,
            Ok(_) => panic!("an exclusive run started beside another"),
        };
        assert!(err.contains("phase1") && err.contains("runs/1"), "{err}");
        let second = LiveRun::join(
            &settings(&dir, false),
            root,
            "fault_matrix",
            Path::new("runs/3"),
            None,
        )
        .unwrap()
        .unwrap();
        let seen = second.record();
        assert_eq!(seen.at_start.neighbours.len(), 1);
        assert_eq!(seen.at_start.neighbours[0].run.target, "phase1");
        assert!(seen.at_end.is_none());
        first.look_at_end();
        let record = first.record();
        let at_end = record.at_end.as_ref().expect("looked at the end");
        assert_eq!(at_end.neighbours[0].run.target, "fault_matrix");
        assert!(at_end.load_average.is_some());
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["at_end"]["neighbours"][0]["relation"], "other");
        assert_eq!(json["at_end"]["neighbours"][0]["target"], "fault_matrix");
        first.end();
        second.end();
        assert!(Registry::open(&dir).unwrap().live().unwrap().is_empty());
    }

    #[test]
    fn an_attached_run_knows_its_stack_and_no_registry_is_no_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = tmp.path().join("stack.json");
        std::fs::write(&manifest, r#"{"owner_pid": 4242}"#).unwrap();
        assert_eq!(owner_pid(&manifest), Some(4242));
        assert_eq!(owner_pid(&tmp.path().join("none.json")), None);
        // A registry that cannot be made: a warning, or, when exclusive, an error.
        let blocked = tmp.path().join("file");
        std::fs::write(&blocked, "").unwrap();
        let under_a_file = blocked.join("live");
        let root = Path::new("/");
        assert!(matches!(
            LiveRun::join(
                &settings(&under_a_file, false),
                root,
                "phase1",
                Path::new("r"),
                None
            ),
            Ok(None)
        ));
        let err = match LiveRun::join(
            &settings(&under_a_file, true),
            root,
            "phase1",
            Path::new("r"),
            None,
        ) {
            Err(e) => e,
            Ok(_) => panic!("exclusive without a registry"),
        };
        assert!(
            err.starts_with("--exclusive needs the live-run registry"),
            "{err}"
        );
    }
}
