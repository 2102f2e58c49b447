//! The lane matrix: which trials run on which stack (engine × topology ×
//! geometry, with a profile), one row per `cargo test` target, the way
//! wasmtime's `tests/wast.rs` generates its trials from a table. Each
//! target's `main` names its lane in one line:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     kvcr_e2e::lanes::main("phase1_2p1d")
//! }
//! ```
//!
//! A lane's stack is set by harness flags placed before the command line's
//! own, so `cargo test --test phase1_2p1d -- --geometry hybrid` still
//! works, and a flag the user gives wins. A lane is what its flags make
//! of the default stack: `cargo test --test phase1_2p1d` is `cargo test
//! --test phase1 -- --topology 2p1d`.

use std::path::Path;
use std::process::ExitCode;

use crate::cases;
use crate::engine::{GeometryKind, Kind, StackSpec, Topology};
use crate::fault_matrix;
use crate::suite::{Case, FaultRow, Suite, Trial};

/// What a lane runs.
#[derive(Clone, Copy)]
pub enum Trials {
    /// Test-plan cases.
    Cases(&'static [Case]),
    /// The rows of a fault matrix.
    Rows(&'static [FaultRow]),
}

impl Trials {
    pub fn trials(self) -> Vec<Trial> {
        match self {
            Trials::Cases(cases) => cases.iter().copied().map(Trial::Case).collect(),
            Trials::Rows(rows) => rows.iter().map(Trial::Row).collect(),
        }
    }
}

/// Harness flags a lane computes when it starts, from the repository root.
pub type FlagsAtStart = fn(&Path) -> Result<Vec<String>, String>;

/// One `cargo test --test <target>`: its stack and its trials.
pub struct Lane {
    /// The test target, which also names the run directory
    /// (`target/phase1/runs/<target>/`).
    pub target: &'static str,
    /// The stack its flags make.
    pub stack: StackSpec,
    /// A profile of `fixtures/profiles/` layered over the default: it
    /// chooses the engine (and its platform) when one is named.
    pub profile: Option<&'static str>,
    /// Harness flags beyond the stack's own.
    pub flags: &'static [&'static str],
    /// Harness flags known only when the lane starts (from the repository
    /// root), placed after `flags`; `Err` ends the program with the reason.
    pub flags_at_start: Option<FlagsAtStart>,
    pub trials: Trials,
    /// Every trial is marked ignored (`#[ignore]`): a plain `cargo test`
    /// skips the lane, `cargo test --test <target> -- --ignored` runs it.
    pub ignored: bool,
}

/// Every lane. A stack is chosen with flags, not a profile (except the
/// vLLM lanes' platform profile), so a profile the user or CI chooses
/// (`PHASE1_PROFILE=ci`) still applies to every lane.
pub const LANES: &[Lane] = &[
    // The default stack: two CPU engine workers behind the real router.
    Lane {
        target: "phase1",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: None,
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE1),
    },
    // KV blocks of attention pages plus SSM state parts (2 + 3 = 5 pages):
    // TC-03 then checks exact pages per kind.
    Lane {
        target: "phase1_hybrid",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Hybrid),
        profile: None,
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE1),
    },
    // Prefill workers A, B and decode worker C behind the real prefill
    // router; the P→D transfer is KVCR's REMOTE path (TC-01 checks it).
    Lane {
        target: "phase1_2p1d",
        stack: StackSpec::new(Kind::Cpu, Topology::TwoP1D, GeometryKind::Dense),
        profile: None,
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE1),
    },
    // Worker B and its own Guard on a namespace node the run makes (own
    // network, PID and mount namespaces, private /dev/shm, a veth); TC-03
    // checks from UCX's own report that B's reads crossed the veth. Needs
    // root (or CAP_SYS_ADMIN and CAP_NET_ADMIN), else every case is ignored.
    Lane {
        target: "phase1_two_node",
        stack: StackSpec::new(Kind::Cpu, Topology::TwoNode, GeometryKind::Dense),
        profile: None,
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE1),
    },
    // Real `dynamo.vllm` workers (vLLM's CPU build) with vLLM's own KVCR
    // tier, one Guard per worker; the first run builds `.venv-vllm`.
    Lane {
        target: "phase1_vllm",
        stack: StackSpec::new(Kind::Vllm, Topology::Agg, GeometryKind::Dense),
        profile: Some("vllm-cpu"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE1),
    },
    // Real vLLM on two nodes: worker B and its Guard service on a namespace
    // node the run makes, as in phase1_two_node; TC-03 checks from UCX's
    // own report that B's pull crossed the veth. Needs root (or
    // CAP_SYS_ADMIN and CAP_NET_ADMIN), else every case is ignored.
    Lane {
        target: "phase1_vllm_two_node",
        stack: StackSpec::new(Kind::Vllm, Topology::TwoNode, GeometryKind::Dense),
        profile: Some("vllm-cpu"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE1),
    },
    // The KVCR under test is a source tree: kvcr 0.1.1's sdist, unpacked
    // (fetched once with pip into `target/kvcr-envs/sdist/`), so this lane
    // runs what a KVCR developer runs with `cargo test --test phase1 --
    // --kvcr <their checkout>`: the build is installed into a KVCR env
    // over `.venv`, every Guard and worker must report importing it, and
    // the evidence says `source dir`. TC-01 only unless `--cases` says
    // otherwise (docs/kvcr-under-test.md).
    Lane {
        target: "phase1_kvcr_source",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: None,
        flags: &["--cases", "TC-01"],
        flags_at_start: Some(kvcr_sdist_flags),
        ignored: false,
        trials: Trials::Cases(cases::PHASE1),
    },
    // Every row takes fresh prompt families from the one stack's set: two
    // prompts per TC-05 arm (a row is caught on its first), and a set with
    // room for the rows (a full run takes about 256).
    Lane {
        target: "fault_matrix",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: None,
        flags: &["--perf-repeats", "2", "--prompt-families", "320"],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Rows(fault_matrix::agg::ROWS),
    },
    Lane {
        target: "fault_matrix_2p1d",
        stack: StackSpec::new(Kind::Cpu, Topology::TwoP1D, GeometryKind::Dense),
        profile: None,
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Rows(fault_matrix::p2d::ROWS),
    },
    // A request into a node that is cut off the network ends at the
    // client's deadline: keep it short here.
    Lane {
        target: "fault_matrix_two_node",
        stack: StackSpec::new(Kind::Cpu, Topology::TwoNode, GeometryKind::Dense),
        profile: None,
        flags: &["--request-timeout-s", "20"],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Rows(fault_matrix::two_node::ROWS),
    },
    // Node 1 cut off the network during TC-03's transfer, on real vLLM (the
    // shared-memory row needs a second stack: CPU engine only).
    Lane {
        target: "fault_matrix_vllm_two_node",
        stack: StackSpec::new(Kind::Vllm, Topology::TwoNode, GeometryKind::Dense),
        profile: Some("vllm-cpu"),
        flags: &["--request-timeout-s", "20"],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Rows(fault_matrix::two_node::ON_VLLM),
    },
    // Production conditions (TC-07..TC-11, TC-21): Guard pools of 12 blocks that
    // the working set overflows, no host tier, heartbeat promotion, a 2 s
    // KVCR operation timeout (fixtures/profiles/phase2.toml).
    Lane {
        target: "phase2",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("phase2"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE2),
    },
    // KVCR's disk tier (TC-12): a G3 file of 64 blocks per worker beside a
    // Guard pool of 8, so blocks spill from DRAM to disk
    // (fixtures/profiles/phase2-g3.toml).
    Lane {
        target: "phase2_g3",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("phase2-g3"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE2_G3),
    },
    // A workload trace replayed through the router, KVCR on, and on the
    // KVCR-off reference worker (WL-01): a short multi-turn trace at 3×
    // its rate, Guard pools smaller than its working set
    // (fixtures/profiles/workload.toml).
    Lane {
        target: "workload",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("workload"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::WORKLOAD),
    },
    // WL-01's fault rows, on the workload stack.
    Lane {
        target: "fault_matrix_workload",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("workload"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Rows(fault_matrix::workload::ROWS),
    },
    // Phase 3 on the CPU stack: concurrent requests for one new prefix
    // each deposit it, and a third worker pulls a hinted prefix beside a
    // second (TC-17; fixtures/profiles/phase3.toml).
    Lane {
        target: "phase3",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("phase3"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE3),
    },
    // Phase 3 on two nodes: the link between them cut and healed (TC-13;
    // fixtures/profiles/phase3-network.toml: a 2 s KVCR operation timeout,
    // UCX keepalive of 1 s). Needs root, as phase1_two_node.
    Lane {
        target: "phase3_two_node",
        stack: StackSpec::new(Kind::Cpu, Topology::TwoNode, GeometryKind::Dense),
        profile: Some("phase3-network"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE3_TWO_NODE),
    },
    // The phase 3 cases' fault rows, on the phase3 stack.
    Lane {
        target: "fault_matrix_phase3",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("phase3"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Rows(fault_matrix::phase3::ROWS),
    },
    // The KVCR calls a GPU engine makes: framework pins over engine
    // memory, KVCR.fetch, align_sequence, abort (TC-18;
    // fixtures/profiles/phase3-api.toml).
    Lane {
        target: "phase3_api",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("phase3-api"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE3_API),
    },
    // Production-size Guard pools: 1 GiB per worker (scale.toml), the cases
    // whose costs grow with the pool (TC-09, TC-04, TC-06, TC-12, TC-08); the
    // report shows registration, promotion, handback and shutdown against
    // pool size. Ignored unless asked for (`-- --ignored`): 2 GiB of
    // /dev/shm (4 GiB while TC-08's restarted service and the old one both
    // hold pools) and minutes. Exclusive: it waits until no other run is
    // live on the machine, and warns later ones.
    Lane {
        target: "phase3_scale",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("scale"),
        flags: &["--exclusive"],
        flags_at_start: None,
        ignored: true,
        trials: Trials::Cases(cases::PHASE3_SCALE),
    },
    // The same at 4 GiB per worker (scale-4g.toml): 8 GiB of /dev/shm, near
    // 18 GiB of memory at TC-08's peak. Ignored unless asked for.
    Lane {
        target: "phase3_scale_4g",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("scale-4g"),
        flags: &["--exclusive"],
        flags_at_start: None,
        ignored: true,
        trials: Trials::Cases(cases::PHASE3_SCALE),
    },
    // The production cases' fault rows, on the phase2 stack.
    Lane {
        target: "fault_matrix_phase2",
        stack: StackSpec::new(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
        profile: Some("phase2"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Rows(fault_matrix::phase2::ROWS),
    },
    // The production cases that need no CPU-engine report or switch
    // (TC-09, TC-10, TC-11, TC-08) on real vLLM: heartbeat promotion and
    // KVCR's operation timeout set through vLLM's KVCR tier and Guards
    // (fixtures/profiles/vllm-phase2.toml). TC-09 is finding 17's expected
    // failure (docs/kvcr-findings.md).
    Lane {
        target: "phase2_vllm",
        stack: StackSpec::new(Kind::Vllm, Topology::Agg, GeometryKind::Dense),
        profile: Some("vllm-phase2"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Cases(cases::PHASE2_VLLM),
    },
    // Three of the rows that apply on real vLLM (no engine switch): a
    // killed router, a stopped Guard, a replacement with another
    // compatibility digest. Each row's restore restarts a vLLM worker.
    Lane {
        target: "fault_matrix_vllm",
        stack: StackSpec::new(Kind::Vllm, Topology::Agg, GeometryKind::Dense),
        profile: Some("vllm-cpu"),
        flags: &[],
        flags_at_start: None,
        ignored: false,
        trials: Trials::Rows(fault_matrix::agg::ON_VLLM),
    },
    // Prefill workers A, B and decode worker C of real vLLM (CPU build)
    // behind Dynamo's prefill router: the P→D pull is vLLM's NixlConnector
    // with a CPU KV buffer, beside the KVCR tier (prefill↔prefill hints,
    // the Guard). Ignored unless asked for (`-- --ignored`): three vLLM
    // workers and their replacements took 24 minutes on 2 cores.
    Lane {
        target: "phase1_vllm_2p1d",
        stack: StackSpec::new(Kind::Vllm, Topology::TwoP1D, GeometryKind::Dense),
        profile: Some("vllm-cpu"),
        flags: &[],
        flags_at_start: None,
        ignored: true,
        trials: Trials::Cases(cases::PHASE1),
    },
    // The P→D row on that stack: a prefill killed before the decode's NIXL
    // pull. Ignored unless asked for, like its stack.
    Lane {
        target: "fault_matrix_vllm_2p1d",
        stack: StackSpec::new(Kind::Vllm, Topology::TwoP1D, GeometryKind::Dense),
        profile: Some("vllm-cpu"),
        flags: &[],
        flags_at_start: None,
        ignored: true,
        trials: Trials::Rows(fault_matrix::p2d_vllm::ROWS),
    },
];

impl Lane {
    /// The lane of test target `target`.
    pub fn of(target: &str) -> Option<&'static Lane> {
        LANES.iter().find(|lane| lane.target == target)
    }

    /// The cases the lane runs, when it runs cases (not fault rows).
    pub fn cases(&self) -> Option<&'static [Case]> {
        match self.trials {
            Trials::Cases(cases) => Some(cases),
            Trials::Rows(_) => None,
        }
    }

    /// The lane that runs `cases` on `stack` and adds no flags of its own
    /// (as `phase1_kvcr_source`'s `--cases TC-01` would): where a trial of
    /// those cases runs on that stack, e.g. a KVCR mutant's
    /// (`Lane::running(stack, cases::PHASE1)`). `Err` names the lanes that
    /// run `cases`, each with its stack.
    pub fn running(stack: StackSpec, cases: &[Case]) -> Result<&'static Lane, String> {
        let runs_them = |lane: &Lane| lane.cases().is_some_and(|own| same_cases(own, cases));
        LANES
            .iter()
            .find(|lane| {
                lane.stack == stack
                    && runs_them(lane)
                    && lane.flags.is_empty()
                    && lane.flags_at_start.is_none()
            })
            .ok_or_else(|| {
                let mut ids: Vec<&str> = cases.iter().map(|c| c.id).collect();
                ids.sort();
                ids.dedup();
                let lanes: Vec<String> = LANES
                    .iter()
                    .filter(|lane| runs_them(lane))
                    .map(|lane| format!("{} ({})", lane.target, lane.stack))
                    .collect();
                format!(
                    "no lane runs {} on {stack}; the lanes that run them: {}",
                    ids.join(", "),
                    if lanes.is_empty() {
                        "none".to_string()
                    } else {
                        lanes.join(", ")
                    }
                )
            })
    }

    /// The harness flags that make the lane's stack, before the command
    /// line's own: its profile, then whatever differs from the default
    /// stack (an engine its profile does not choose, the topology, the
    /// geometry), then its own flags.
    pub fn default_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        let mut add = |flag: &str, value: &str| {
            flags.push(flag.to_string());
            flags.push(value.to_string());
        };
        match self.profile {
            Some(profile) => add("--profile", profile),
            None if self.stack.engine != Kind::Cpu => add("--engine", self.stack.engine.as_str()),
            None => {}
        }
        if self.stack.topology != Topology::Agg {
            add("--topology", self.stack.topology.as_str());
        }
        if self.stack.geometry != GeometryKind::Dense {
            add("--geometry", self.stack.geometry.as_str());
        }
        flags.extend(self.flags.iter().map(|f| f.to_string()));
        flags
    }

    /// The lane's whole program: its trials on its stack.
    pub fn main(&self) -> ExitCode {
        let mut flags = self.default_flags();
        if let Some(at_start) = self.flags_at_start {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            match at_start(root) {
                Ok(more) => flags.extend(more),
                Err(e) => {
                    eprintln!("error: lane {}: {e}", self.target);
                    return ExitCode::FAILURE;
                }
            }
        }
        Suite::main_marked(self.target, self.trials.trials(), &flags, self.ignored)
    }
}

/// Whether two case lists are the same trials in the same order.
pub fn same_cases(a: &[Case], b: &[Case]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.id, x.name) == (y.id, y.name))
}

/// `--kvcr <kvcr 0.1.1's sdist, unpacked>` (the CPU stack's Python env
/// fetches it once).
fn kvcr_sdist_flags(root: &Path) -> Result<Vec<String>, String> {
    let base = crate::pyenv::ensure(root, None)
        .map_err(|e| format!("the CPU stack's Python env: {e}"))?
        .python;
    let source = crate::pyenv::kvcr::sdist_source_dir(root, &base, "0.1.1")
        .map_err(|e| format!("kvcr 0.1.1's sdist: {e}"))?;
    Ok(vec!["--kvcr".into(), source.display().to_string()])
}

/// The program of test target `target`: its lane of [`LANES`].
pub fn main(target: &str) -> ExitCode {
    match Lane::of(target) {
        Some(lane) => lane.main(),
        None => {
            eprintln!(
                "error: no lane for test target {target:?} in kvcr_e2e::lanes::LANES (lanes: {})",
                LANES
                    .iter()
                    .map(|l| l.target)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{self, Env};

    /// The flags each target passed before the lanes were a table: the
    /// same stack for the same command.
    #[test]
    fn each_lane_passes_the_flags_its_target_always_passed() {
        let flags = |target: &str| Lane::of(target).unwrap().default_flags();
        let none: Vec<String> = Vec::new();
        assert_eq!(flags("phase1"), none);
        assert_eq!(
            flags("fault_matrix"),
            ["--perf-repeats", "2", "--prompt-families", "320"]
        );
        assert_eq!(flags("phase1_hybrid"), ["--geometry", "hybrid"]);
        assert_eq!(flags("phase1_2p1d"), ["--topology", "2p1d"]);
        assert_eq!(flags("fault_matrix_2p1d"), ["--topology", "2p1d"]);
        assert_eq!(flags("phase1_two_node"), ["--topology", "two-node"]);
        assert_eq!(
            flags("fault_matrix_two_node"),
            ["--topology", "two-node", "--request-timeout-s", "20"]
        );
        assert_eq!(flags("phase1_vllm"), ["--profile", "vllm-cpu"]);
        // and `--kvcr <the sdist>`, known at start.
        assert_eq!(flags("phase1_kvcr_source"), ["--cases", "TC-01"]);
        assert_eq!(flags("fault_matrix_vllm"), ["--profile", "vllm-cpu"]);
        assert_eq!(flags("phase2"), ["--profile", "phase2"]);
        assert_eq!(flags("phase2_g3"), ["--profile", "phase2-g3"]);
        assert_eq!(flags("phase3_scale"), ["--profile", "scale", "--exclusive"]);
        assert_eq!(
            flags("phase3_scale_4g"),
            ["--profile", "scale-4g", "--exclusive"]
        );
        assert_eq!(flags("fault_matrix_phase2"), ["--profile", "phase2"]);
        assert_eq!(flags("phase2_vllm"), ["--profile", "vllm-phase2"]);
        assert_eq!(
            flags("phase1_vllm_two_node"),
            ["--profile", "vllm-cpu", "--topology", "two-node"]
        );
        assert_eq!(
            flags("fault_matrix_vllm_two_node"),
            [
                "--profile",
                "vllm-cpu",
                "--topology",
                "two-node",
                "--request-timeout-s",
                "20"
            ]
        );
        assert_eq!(
            flags("phase1_vllm_2p1d"),
            ["--profile", "vllm-cpu", "--topology", "2p1d"]
        );
        assert_eq!(
            flags("fault_matrix_vllm_2p1d"),
            ["--profile", "vllm-cpu", "--topology", "2p1d"]
        );
    }

    /// Only the production-size pool lanes and the vLLM 2P+1D lanes wait
    /// for `--ignored`; every case the production lane runs applies to vLLM.
    #[test]
    fn only_the_scale_and_vllm_2p1d_lanes_are_ignored_by_default() {
        let ignored: Vec<&str> = LANES
            .iter()
            .filter(|l| l.ignored)
            .map(|l| l.target)
            .collect();
        assert_eq!(
            ignored,
            [
                "phase3_scale",
                "phase3_scale_4g",
                "phase1_vllm_2p1d",
                "fault_matrix_vllm_2p1d"
            ]
        );
        let Trials::Cases(cases) = Lane::of("phase2_vllm").unwrap().trials else {
            panic!("phase2_vllm runs cases");
        };
        for case in cases {
            assert!(
                Trial::Case(*case)
                    .applicability(Kind::Vllm, Topology::Agg)
                    .applies(),
                "{} does not apply to vLLM",
                case.id
            );
        }
    }

    /// A lane's flags resolve (with no `PHASE1_*` environment) to the
    /// engine, topology and geometry its row says.
    #[test]
    fn each_lane_resolves_to_its_stack() {
        for lane in LANES {
            let argv = std::iter::once(lane.target.to_string()).chain(lane.default_flags());
            let (harness, _) = config::split_args(argv).unwrap();
            let env = Env::from_pairs(Vec::<(String, String)>::new());
            let settings = config::resolve(&harness, &env).unwrap().settings;
            assert_eq!(settings.stack(), lane.stack, "lane {}", lane.target);
        }
    }

    /// The production-size lanes resolve to GiB Guard pools (1 and 4 GiB a
    /// worker) sized by `guard_pool_gb`, of the same 256 blocks, with the
    /// disk tier TC-12 needs and room for TC-12's prompts.
    #[test]
    fn the_scale_lanes_resolve_to_gib_pools_of_the_same_blocks() {
        let mut pools = Vec::new();
        for target in ["phase3_scale", "phase3_scale_4g"] {
            let lane = Lane::of(target).unwrap();
            let argv = std::iter::once(lane.target.to_string()).chain(lane.default_flags());
            let (harness, _) = config::split_args(argv).unwrap();
            let env = Env::from_pairs(Vec::<(String, String)>::new());
            let settings = config::resolve(&harness, &env).unwrap().settings;
            let cpu = &settings.cpu_engine;
            assert_eq!(cpu.guard_pool_blocks, None, "{target}: sized in GiB");
            assert_eq!(cpu.attn_pages, 1, "{target}: the disk tier's one page");
            assert!(
                cpu.g3_capacity_blocks.is_some(),
                "{target}: TC-12's disk tier"
            );
            let bytes = (cpu.guard_pool_gb * f64::from(1u32 << 30)) as u64;
            assert_eq!(bytes / cpu.attn_page_bytes, 256, "{target}");
            assert!(settings.prompts.families >= 65 + 35, "{target}");
            assert!(settings.exclusive, "{target}: alone on the machine");
            pools.push(cpu.guard_pool_gb);
        }
        assert_eq!(pools, [1.0, 4.0]);
        assert_eq!(
            Lane::of("phase3_scale").unwrap().cases().unwrap().len(),
            cases::PHASE3_SCALE.len()
        );
    }

    /// The fault matrix's flags give it room for its rows' prompt families
    /// and two prompts per TC-05 arm.
    #[test]
    fn the_fault_matrix_resolves_to_its_own_prompt_set() {
        let lane = Lane::of("fault_matrix").unwrap();
        let argv = std::iter::once(lane.target.to_string()).chain(lane.default_flags());
        let (harness, _) = config::split_args(argv).unwrap();
        let env = Env::from_pairs(Vec::<(String, String)>::new());
        let settings = config::resolve(&harness, &env).unwrap().settings;
        assert_eq!((settings.prompts.families, settings.perf_repeats), (320, 2));
    }

    /// Every lane is a `[[test]]` target whose `main` names it, and every
    /// harness target under `e2e/` is a lane.
    #[test]
    fn every_lane_is_a_cargo_test_target_that_names_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        let mut e2e_targets: Vec<&str> = manifest
            .split("[[test]]")
            .skip(1)
            .filter(|t| t.contains("path = \"e2e/"))
            .filter_map(|t| t.split('"').nth(1))
            .collect();
        let mut lanes: Vec<&str> = LANES.iter().map(|l| l.target).collect();
        e2e_targets.sort();
        lanes.sort();
        assert_eq!(e2e_targets, lanes, "Cargo.toml's e2e targets");
        for lane in LANES {
            let main = std::fs::read_to_string(root.join(format!("e2e/{}.rs", lane.target)))
                .unwrap_or_else(|e| panic!("e2e/{}.rs: {e}", lane.target));
            assert!(
                main.contains(&format!("kvcr_e2e::lanes::main(\"{}\")", lane.target)),
                "e2e/{}.rs does not name its lane",
                lane.target
            );
        }
    }

    /// A fault lane runs only rows whose needs its stack gives (the vLLM
    /// lanes: no CPU-engine switch).
    #[test]
    fn every_row_a_lane_runs_applies_to_its_stack() {
        for lane in LANES {
            for trial in lane.trials.trials() {
                if let Trial::Row(row) = trial {
                    let answer = trial.applicability(lane.stack.engine, lane.stack.topology);
                    assert!(
                        answer.applies(),
                        "{} runs {}: {answer:?}",
                        lane.target,
                        row.name
                    );
                }
            }
        }
        // The failing direction: a row that turns on a CPU-engine switch
        // does not apply on vLLM.
        let switched = fault_matrix::agg::ROWS
            .iter()
            .find(|row| row.fault.switches_the_engine())
            .expect("a row with an engine switch");
        assert!(!Trial::Row(switched)
            .applicability(Kind::Vllm, Topology::Agg)
            .applies());
    }

    /// The vLLM 2P+1D lanes make the stack they say: two prefill workers
    /// and a decode worker of vLLM's CPU platform, whose decode pulls with
    /// NixlConnector from a CPU KV buffer and recomputes when a pull fails,
    /// each worker with the KVCR tier beside it.
    #[test]
    fn the_vllm_2p1d_lanes_make_a_nixl_2p1d_stack_on_cpu() {
        use crate::engine::topology::WorkerRole;
        use crate::engine::PrefillToDecode;
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for target in ["phase1_vllm_2p1d", "fault_matrix_vllm_2p1d"] {
            let lane = Lane::of(target).unwrap();
            let argv = std::iter::once(target.to_string()).chain(lane.default_flags());
            let (harness, _) = config::split_args(argv).unwrap();
            let env = Env::from_pairs(Vec::<(String, String)>::new());
            let settings = config::resolve(&harness, &env).unwrap().settings;
            let engine = settings
                .build_engine(root)
                .unwrap_or_else(|e| panic!("lane {target}: {e}"));
            assert_eq!(engine.prefill_to_decode(), PrefillToDecode::NixlConnector);
            let roles: Vec<WorkerRole> = engine.worker_plans().iter().map(|p| p.role).collect();
            assert_eq!(
                roles,
                [WorkerRole::Prefill, WorkerRole::Prefill, WorkerRole::Decode],
                "lane {target}"
            );
            let ctx = crate::engine::testing::example_context();
            for plan in engine.worker_plans() {
                let slot = crate::engine::testing::example_slot(&plan.slot, 0);
                let spec = engine.worker(&ctx, &slot);
                assert_eq!(
                    spec.env_var("CUDA_VISIBLE_DEVICES"),
                    Some(""),
                    "lane {target}: the CPU platform"
                );
                assert_eq!(
                    spec.flag_value("--disaggregation-mode"),
                    Some(plan.role.disaggregation_mode())
                );
                let config: serde_json::Value =
                    serde_json::from_str(spec.flag_value("--kv-transfer-config").unwrap()).unwrap();
                assert_eq!(config["kv_connector"], "MultiConnector");
                assert_eq!(config["kv_load_failure_policy"], "recompute");
                let connectors = config["kv_connector_extra_config"]["connectors"]
                    .as_array()
                    .unwrap();
                let names: Vec<&str> = connectors
                    .iter()
                    .filter_map(|c| c["kv_connector"].as_str())
                    .collect();
                assert_eq!(names, ["NixlConnector", "OffloadingConnector"]);
                assert_eq!(connectors[0]["kv_buffer_device"], "cpu");
                assert_eq!(
                    config["kv_connector_extra_config"]["secondary_tiers"][0]["type"],
                    "kvcr"
                );
            }
        }
    }

    /// A lane's stack is written and read back in the words of its flags
    /// (`vllm/two-node/dense`).
    #[test]
    fn every_lanes_stack_round_trips_through_its_words() {
        for lane in LANES {
            let words = lane.stack.to_string();
            assert_eq!(
                words.parse::<StackSpec>(),
                Ok(lane.stack),
                "{}",
                lane.target
            );
        }
        let lane = Lane::of("phase1_vllm_two_node").unwrap();
        assert_eq!(lane.stack.to_string(), "vllm/two-node/dense");
    }

    /// Every lane that runs cases with no flags of its own is the one
    /// [`Lane::running`] finds for its stack and cases: no two such lanes
    /// share both, so a stack names its lane.
    #[test]
    fn each_case_lane_is_found_by_its_stack_and_cases() {
        let plain = LANES
            .iter()
            .filter(|l| l.cases().is_some() && l.flags.is_empty() && l.flags_at_start.is_none());
        let mut found = 0;
        for lane in plain {
            let cases = lane.cases().unwrap();
            let hit = Lane::running(lane.stack, cases).unwrap();
            assert_eq!(hit.target, lane.target, "{}", lane.stack);
            found += 1;
        }
        assert!(found >= 10, "{found} case lanes");
        let on = |engine, topology, geometry| {
            Lane::running(StackSpec::new(engine, topology, geometry), cases::PHASE1)
                .map(|l| l.target)
        };
        assert_eq!(
            on(Kind::Cpu, Topology::Agg, GeometryKind::Dense),
            Ok("phase1")
        );
        assert_eq!(
            on(Kind::Vllm, Topology::TwoNode, GeometryKind::Dense),
            Ok("phase1_vllm_two_node")
        );
        assert_eq!(
            on(Kind::Vllm, Topology::TwoP1D, GeometryKind::Dense),
            Ok("phase1_vllm_2p1d")
        );
    }

    /// A stack no lane makes is an error naming the lanes that run the
    /// cases, with their stacks.
    #[test]
    fn a_stack_without_a_lane_is_an_error_listing_the_lanes() {
        let stack = StackSpec::new(Kind::Vllm, Topology::Agg, GeometryKind::Hybrid);
        let err = Lane::running(stack, cases::PHASE1)
            .map(|l| l.target)
            .unwrap_err();
        assert!(
            err.starts_with(
                "no lane runs TC-01, TC-02, TC-03, TC-04, TC-05, TC-06 on vllm/agg/hybrid;"
            ),
            "{err}"
        );
        for lane in [
            "phase1 (cpu/agg/dense)",
            "phase1_hybrid (cpu/agg/hybrid)",
            "phase1_vllm (vllm/agg/dense)",
            "phase1_vllm_two_node (vllm/two-node/dense)",
            "phase1_vllm_2p1d (vllm/2p1d/dense)",
        ] {
            assert!(err.contains(lane), "{lane}: {err}");
        }
        let err = Lane::running(Lane::of("phase2").unwrap().stack, cases::PHASE2_VLLM)
            .map(|l| l.target)
            .unwrap_err();
        assert!(
            err.ends_with("the lanes that run them: phase2_vllm (vllm/agg/dense)"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_target_is_a_usage_error() {
        assert!(Lane::of("phase4").is_none());
    }
}
