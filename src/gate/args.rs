//! `kvcr-e2e gate` arguments: the build under test, its base, the lanes,
//! and what passes through to `compare` and to every child run.

use std::path::PathBuf;

use crate::compare::CompareDriveArgs;
use crate::config::{command_flags, KvcrSpec};
use crate::lanes::Lane;
use crate::pyenv::kvcr_spec;

/// The lanes without `--lanes`: the CPU lanes that need no root and hold
/// every case of the paths a KVCR change touches (the phase 1 cases, the
/// production cases, the disk tier, phase 3), about 5 minutes here.
pub const DEFAULT_LANES: &[&str] = &["phase1", "phase2", "phase2_g3", "phase3"];

/// `compare`'s own flags (each with a value): passed to the comparison
/// only, never to a lane.
pub const COMPARE_FLAGS: &[&str] = &[
    "--target",
    "--rounds",
    "--trials",
    "--cases",
    "--resamples",
    "--seed",
    "--confidence",
    "--min-change",
    "--min-pairs",
    "--scope",
    "--method",
];
/// `compare`'s flags that take no value.
pub const COMPARE_SWITCHES: &[&str] = &["--early-stop"];

/// Whether a lane can run the build under test: not ignored in a plain
/// `cargo test`, and not a lane that sets its own `--kvcr` when it starts
/// (the KVCR source-tree lane).
pub fn takes_a_build(lane: &Lane) -> bool {
    !lane.ignored && lane.flags_at_start.is_none()
}

/// Parsed `kvcr-e2e gate` arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct GateArgs {
    /// The build under test (`--kvcr`).
    pub kvcr: KvcrSpec,
    /// The build it is compared with (`--base`; default the locks' release).
    pub base: KvcrSpec,
    /// The lanes' test targets, in running order.
    pub lanes: Vec<String>,
    /// `--out DIR`; `None`: `target/gate/<timestamp>/`.
    pub out: Option<PathBuf>,
    /// `--keep-going`: compare even when a lane failed.
    pub keep_going: bool,
    /// Harness flags for every lane and every round, in order.
    pub harness: Vec<String>,
    /// The comparison, parsed and checked by `compare`'s own parser.
    pub compare: CompareDriveArgs,
}

impl GateArgs {
    /// Parses the arguments after `gate`. `targets` are every lane's test
    /// target, `gateable` those that can run a build ([`takes_a_build`]).
    pub fn parse(args: &[String], targets: &[&str], gateable: &[&str]) -> Result<Self, String> {
        let (mut kvcr, mut base, mut lanes, mut out) = (None, None, None, None);
        let mut keep_going = false;
        let (mut compare_flags, mut harness) = (Vec::new(), Vec::new());
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (name, inline) = command_flags::split(arg);
            if name == "--keep-going" {
                keep_going = true;
                continue;
            }
            if COMPARE_SWITCHES.contains(&name) {
                compare_flags.push(name.to_string());
                continue;
            }
            let ours = matches!(name, "--kvcr" | "--base" | "--lanes" | "--out");
            if !ours && !COMPARE_FLAGS.contains(&name) {
                harness.push(arg.clone());
                continue;
            }
            let value = command_flags::value(name, inline, &mut it)?;
            let spec = |value: &str| kvcr_spec::parse_flag(name, value);
            match name {
                "--kvcr" => kvcr = Some(spec(&value)?),
                "--base" => base = Some(spec(&value)?),
                "--lanes" => lanes = Some(parse_lanes(&value, targets, gateable)?),
                "--out" => out = Some(PathBuf::from(value)),
                _ => {
                    compare_flags.push(name.to_string());
                    compare_flags.push(value);
                }
            }
        }
        let kvcr = kvcr.ok_or("give the build under test: --kvcr SPEC")?;
        let base = base.unwrap_or_default();
        let mut drive = vec![
            "--base".to_string(),
            base.to_string(),
            "--head".to_string(),
            kvcr.to_string(),
        ];
        drive.extend(compare_flags);
        drive.extend(harness.iter().cloned());
        let compare = CompareDriveArgs::parse(&drive, targets)?;
        Ok(GateArgs {
            kvcr,
            base,
            lanes: lanes.unwrap_or_else(|| DEFAULT_LANES.iter().map(|l| l.to_string()).collect()),
            out,
            keep_going,
            harness,
            compare,
        })
    }
}

/// `--lanes a,b`: known lanes that can run a build, each once.
fn parse_lanes(value: &str, targets: &[&str], gateable: &[&str]) -> Result<Vec<String>, String> {
    let mut lanes: Vec<String> = Vec::new();
    for lane in value.split(',').map(str::trim).filter(|l| !l.is_empty()) {
        if !targets.contains(&lane) {
            return Err(format!(
                "--lanes: no lane has the test target {lane:?}; the lanes that can run a build \
                 are {}",
                gateable.join(", ")
            ));
        }
        if !gateable.contains(&lane) {
            return Err(format!(
                "--lanes: the lane {lane:?} cannot run the build under test (it is ignored in a \
                 plain cargo test, or sets its own --kvcr); the lanes that can are {}",
                gateable.join(", ")
            ));
        }
        if lanes.iter().any(|l| l == lane) {
            return Err(format!("--lanes: {lane:?} is named twice"));
        }
        lanes.push(lane.to_string());
    }
    if lanes.is_empty() {
        return Err("--lanes needs at least one lane (e.g. phase1)".into());
    }
    Ok(lanes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    const TARGETS: &[&str] = &[
        "phase1",
        "phase2",
        "phase2_g3",
        "phase3",
        "phase1_kvcr_source",
        "workload",
    ];
    const GATEABLE: &[&str] = &["phase1", "phase2", "phase2_g3", "phase3", "workload"];

    fn parse(line: &str) -> Result<GateArgs, String> {
        GateArgs::parse(&args(line), TARGETS, GATEABLE)
    }

    #[test]
    fn defaults_are_the_release_as_base_the_default_lanes_and_compares_defaults() {
        let a = parse("--kvcr pypi:0.1.2").unwrap();
        assert_eq!(a.kvcr.to_string(), "pypi:0.1.2");
        assert!(a.base.is_default(), "the locks' release");
        assert_eq!(a.lanes, DEFAULT_LANES);
        assert_eq!((a.out, a.keep_going), (None, false));
        assert!(a.harness.is_empty());
        assert_eq!(a.compare.base.to_string(), "pypi:0.1.1");
        assert_eq!(a.compare.head.to_string(), "pypi:0.1.2");
        assert_eq!(a.compare.rounds, crate::compare::DEFAULT_ROUNDS);
        assert_eq!(a.compare.trials, crate::compare::DEFAULT_TRIALS);
        assert_eq!(a.compare.target, "phase1");
    }

    #[test]
    fn compare_flags_go_to_compare_and_harness_flags_to_both() {
        let a = parse(
            "--log-level debug --kvcr=pypi:0.1.2 --base pypi:0.1.0 --lanes phase1,phase2 \
             --rounds 8 --cases TC-06 --min-change 0.2 --out o --keep-going --exclusive",
        )
        .unwrap();
        assert_eq!(a.lanes, ["phase1", "phase2"]);
        assert_eq!(a.base.to_string(), "pypi:0.1.0");
        assert_eq!(a.compare.base.to_string(), "pypi:0.1.0");
        assert_eq!(a.compare.rounds, 8);
        assert_eq!(a.compare.trials, ["TC-06"]);
        assert_eq!(a.compare.rule.min_relative_change, 0.2);
        assert_eq!(a.out, Some(PathBuf::from("o")));
        assert!(a.keep_going);
        assert_eq!(a.harness, args("--log-level debug --exclusive"));
        assert_eq!(
            a.compare.harness, a.harness,
            "every round gets the harness flags"
        );
    }

    /// The disk path: the disk tier's lane, then a comparison on it
    /// (TC-12's read-backs), with no profile passed to anything else.
    #[test]
    fn the_disk_path_is_gated_on_its_own_lane() {
        let a = parse("--kvcr pypi:0.1.2 --lanes phase2_g3 --target phase2_g3").unwrap();
        assert_eq!(a.lanes, ["phase2_g3"]);
        assert_eq!(a.compare.target, crate::compare::DISK_TIER_TARGET);
        assert_eq!(a.compare.trials, [crate::evidence::DISK_TIER_CASE]);
        assert!(a.harness.is_empty() && a.compare.harness.is_empty());
        // That lane is the disk tier's: its profile, TC-12 among its cases,
        // and it takes a build.
        let lane = crate::lanes::Lane::of(crate::compare::DISK_TIER_TARGET).unwrap();
        assert_eq!(lane.profile, Some("phase2-g3"));
        assert!(lane
            .cases()
            .unwrap()
            .iter()
            .any(|c| c.id == crate::evidence::DISK_TIER_CASE));
        assert!(takes_a_build(lane));
    }

    #[test]
    fn a_diff_spec_is_the_release_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let diff = dir.path().join("slow.diff");
        std::fs::write(&diff, "--- a/kvcr/x.py\n+++ b/kvcr/x.py\n").unwrap();
        let a = parse(&format!("--kvcr {}", diff.display())).unwrap();
        assert_eq!(a.kvcr.kind(), "patched");
        assert_eq!(
            a.compare.head.to_string(),
            format!("pypi:0.1.1+{}", diff.display())
        );
    }

    #[test]
    fn bad_arguments_fail_before_anything_runs_and_say_what_is_wrong() {
        for (line, want) in [
            ("", "--kvcr SPEC"),
            ("--lanes phase1", "--kvcr SPEC"),
            (
                "--kvcr nonsense",
                "--kvcr \"nonsense\": `nonsense` is not a spec",
            ),
            ("--kvcr ./no/such.diff", "does not exist"),
            ("--kvcr pypi:0.1.2 --base ./nowhere", "--base \"./nowhere\""),
            ("--kvcr", "--kvcr needs a value"),
            (
                "--kvcr pypi:0.1.2 --lanes phase9",
                "no lane has the test target \"phase9\"",
            ),
            (
                "--kvcr pypi:0.1.2 --lanes phase1_kvcr_source",
                "cannot run the build under test",
            ),
            ("--kvcr pypi:0.1.2 --lanes phase1,phase1", "named twice"),
            ("--kvcr pypi:0.1.2 --lanes ,", "at least one lane"),
            ("--kvcr pypi:0.1.2 --rounds 3", "even"),
            ("--kvcr pypi:0.1.2 --target phase9", "--target \"phase9\""),
            ("--kvcr pypi:0.1.2 --run-dir x", "set by the driver"),
            ("--kvcr pypi:0.1.2 TC-01", "not a harness flag"),
            ("--kvcr pypi:0.1.2 --frobnicate 1", "frobnicate"),
        ] {
            let err = parse(line).unwrap_err();
            assert!(err.contains(want), "{line:?}: {err}");
        }
    }

    #[test]
    fn the_lanes_that_take_a_build_are_the_plain_ones_and_include_the_defaults() {
        let gateable: Vec<&str> = crate::lanes::LANES
            .iter()
            .filter(|l| takes_a_build(l))
            .map(|l| l.target)
            .collect();
        for lane in DEFAULT_LANES {
            assert!(gateable.contains(lane), "{lane}");
        }
        assert!(
            !gateable.contains(&"phase1_kvcr_source"),
            "sets its own --kvcr"
        );
        assert!(!gateable.contains(&"phase1_vllm_2p1d"), "ignored");
    }
}
