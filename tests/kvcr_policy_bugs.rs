//! The KVCR policy bugs are well-formed: every
//! `fixtures/kvcr-policy-bugs/*.diff` has a complete header, applies exactly
//! (no offset, no fuzz) to the kvcr installed in the project's pinned Python
//! env, and is listed in the README with its comparison. Needs no stack.

use std::path::{Path, PathBuf};
use std::process::Command;

use kvcr_e2e::evidence::workload::TierRates;
use kvcr_e2e::pyenv::kvcr_diff;

/// The kvcr version every policy bug is written against.
const KVCR_VERSION: &str = "0.1.1";
const DIR: &str = "fixtures/kvcr-policy-bugs";
/// The trace the comparisons replay (the bugs show on it).
const TRACE: &str = "fixtures/traces/docs-zipf-small.jsonl";
/// Every header field, in the order the files write them.
const FIELDS: [&str; 8] = [
    "policy-bug",
    "models",
    "plausible",
    "moves",
    "expected",
    "functional-cases",
    "lanes",
    "compare",
];
/// A figure of the replay that `moves` may name besides the hit-rate tiers.
const GOODPUT: &str = "goodput";

mod diff_files;

use diff_files::{read, root, stem};

fn bug_files() -> Vec<PathBuf> {
    diff_files::diff_files(DIR)
}

/// The `# field: value` lines before the diff; `#` and two or more spaces
/// continue the field above.
fn fields(text: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in text.lines().take_while(|l| !l.starts_with("--- ")) {
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        match (rest.strip_prefix("  "), fields.last_mut()) {
            (Some(more), Some((_, value))) => {
                value.push(' ');
                value.push_str(more.trim());
            }
            _ => {
                if let Some((name, value)) = rest.trim().split_once(':') {
                    fields.push((name.trim().to_string(), value.trim().to_string()));
                }
            }
        }
    }
    fields
}

/// What is wrong with the header of the policy bug `name` (empty: nothing).
fn header_problems(name: &str, text: &str) -> Vec<String> {
    let fields = fields(text);
    let value = |field: &str| {
        fields
            .iter()
            .find(|(n, _)| n == field)
            .map(|(_, v)| v.as_str())
    };
    let mut problems: Vec<String> = FIELDS
        .iter()
        .filter(|f| !value(f).is_some_and(|v| !v.is_empty()))
        .map(|f| format!("{name}: no `# {f}:`"))
        .collect();
    if let Some(stated) = value("policy-bug").filter(|s| *s != name) {
        problems.push(format!(
            "{name}: `# policy-bug: {stated}` is not the file's name"
        ));
    }
    let tiers: Vec<&str> = TierRates::default()
        .named()
        .iter()
        .map(|(t, _)| *t)
        .collect();
    if let Some(moves) = value("moves") {
        for figure in moves.split(',').map(str::trim) {
            if figure != GOODPUT && !tiers.contains(&figure) {
                problems.push(format!(
                    "{name}: `# moves:` names `{figure}`; a figure is one of {tiers:?} or `{GOODPUT}`"
                ));
            }
        }
    }
    if let Some(lanes) = value("lanes") {
        if lanes
            .split(',')
            .any(|l| !["cpu", "vllm"].contains(&l.trim()))
        {
            problems.push(format!(
                "{name}: `# lanes: {lanes}`; a lane is `cpu` or `vllm`"
            ));
        }
    }
    let compare = compare_command(name);
    if value("compare").is_some_and(|c| c != compare) {
        problems.push(format!("{name}: `# compare:` must be `{compare}`"));
    }
    problems
}

/// How a policy bug is judged: against the release, on the workload lane.
fn compare_command(name: &str) -> String {
    format!(
        "kvcr-e2e compare --base pypi:{KVCR_VERSION} --head {DIR}/{name}.diff --target workload --workload-trace {TRACE}"
    )
}

#[test]
fn every_policy_bug_has_a_complete_header() {
    let files = bug_files();
    assert!(files.len() >= 2, "only {} policy bugs", files.len());
    let problems: Vec<String> = files
        .iter()
        .flat_map(|f| header_problems(&stem(f), &read(f)))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The pinned env's interpreter and its site-packages (kvcr 0.1.1).
fn pinned_kvcr() -> (PathBuf, PathBuf) {
    diff_files::pinned_kvcr(KVCR_VERSION, "the policy bugs")
}

#[test]
fn every_policy_bug_applies_exactly_to_the_installed_kvcr() {
    let (_, site) = pinned_kvcr();
    let problems: Vec<String> = bug_files()
        .iter()
        .filter_map(|f| kvcr_diff::applies_exactly(&site, f).err())
        .map(|e| e.to_string())
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_lists_every_policy_bug_and_its_comparison() {
    let readme_path = root().join(DIR).join("README.md");
    let readme = read(&readme_path);
    let missing: Vec<String> = bug_files()
        .iter()
        .map(|f| stem(f))
        .filter(|name| {
            !readme.contains(&format!("| `{name}` |")) || !readme.contains(&compare_command(name))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{} does not list {} in its table (`| `NAME` | ...`) with its `{}` line",
        readme_path.display(),
        missing.join(", "),
        compare_command("NAME")
    );
}

/// What `probe.py` reports of a KVCR build: the blocks a 4-block pool
/// evicts after a local hit on its oldest block and after one on its newest,
/// and how many of a hint's 14 block hashes KVCR follows.
#[derive(Debug, PartialEq)]
struct Policies {
    evicted_after_local_hit: Vec<u64>,
    evicted_after_local_hit_on_newest: Vec<u64>,
    hint_of_14_followed: u64,
}

/// The release: a local hit is an access (the untouched block 2 goes; after
/// a hit on the newest, the oldest, block 1), and a hint is followed whole.
fn release_policies() -> Policies {
    Policies {
        evicted_after_local_hit: vec![2],
        evicted_after_local_hit_on_newest: vec![1],
        hint_of_14_followed: 14,
    }
}

/// What each bug must change, and nothing else.
fn bug_policies(name: &str) -> Option<Policies> {
    let release = release_policies();
    match name {
        // First in, first out for what is read back: the oldest goes either way.
        "local-hit-not-an-access" => Some(Policies {
            evicted_after_local_hit: vec![1],
            ..release
        }),
        // The block just read goes first, even the newest.
        "local-hit-evicted-first" => Some(Policies {
            evicted_after_local_hit: vec![1],
            evicted_after_local_hit_on_newest: vec![4],
            ..release
        }),
        "hint-followed-for-8-blocks" => Some(Policies {
            hint_of_14_followed: 8,
            ..release
        }),
        _ => None,
    }
}

/// Runs `probe.py` with `python`, `kvcr` taken from `site` when given.
fn probe(python: &Path, site: Option<&Path>) -> Policies {
    let mut command = Command::new(python);
    command.arg(root().join(DIR).join("probe.py"));
    if let Some(site) = site {
        command.env("PYTHONPATH", site);
    }
    let out = command.output().expect("the probe runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe.py failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // NIXL logs to stdout too: the report is the last line.
    let report: serde_json::Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("probe.py printed no report: {stdout}"));
    let evicted = |field: &str| -> Vec<u64> {
        report[field]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect())
            .unwrap_or_else(|| panic!("no {field} in {report}"))
    };
    Policies {
        evicted_after_local_hit: evicted("evicted_after_local_hit"),
        evicted_after_local_hit_on_newest: evicted("evicted_after_local_hit_on_newest"),
        hint_of_14_followed: report["hint_hashes_followed"]["14"]
            .as_u64()
            .unwrap_or_else(|| panic!("no hint_hashes_followed in {report}")),
    }
}

/// The installed kvcr package copied under a new directory, with `diff`
/// applied to the copy.
fn patched_copy(site: &Path, diff: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(site.join("kvcr"))
        .arg(dir.path())
        .status()
        .expect("cp runs");
    assert!(
        copied.success(),
        "cannot copy {}",
        site.join("kvcr").display()
    );
    let patched = Command::new("patch")
        .args(["-p1", "--batch", "--forward", "--quiet", "-d"])
        .arg(dir.path())
        .arg("-i")
        .arg(diff)
        .status()
        .expect("patch runs");
    assert!(patched.success(), "{} does not apply", diff.display());
    dir
}

/// Each bug changes the one policy its header names, on the real KVCR in
/// one process, and the release keeps both (so the probe can tell).
#[test]
fn each_policy_bug_changes_its_policy_and_only_that() {
    let (python, site) = pinned_kvcr();
    assert_eq!(probe(&python, None), release_policies(), "the release");
    for file in bug_files() {
        let name = stem(&file);
        let want = bug_policies(&name)
            .unwrap_or_else(|| panic!("{name}: say in bug_policies what it must change"));
        let copy = patched_copy(&site, &file);
        assert_eq!(probe(&python, Some(copy.path())), want, "{name}");
    }
}

const GOOD: &str = "# policy-bug: slow-pool\n\
# models: the pool\n\
#   forgets\n\
# plausible: a slip\n\
# moves: dram, total\n\
# expected: 3 points\n\
# functional-cases: none looks\n\
# lanes: cpu\n\
# compare: kvcr-e2e compare --base pypi:0.1.1 --head fixtures/kvcr-policy-bugs/slow-pool.diff --target workload --workload-trace fixtures/traces/docs-zipf-small.jsonl\n\
--- a/kvcr/m.py\n\
+++ b/kvcr/m.py\n";

#[test]
fn a_complete_header_has_no_problems_and_continues_its_fields() {
    assert_eq!(header_problems("slow-pool", GOOD), Vec::<String>::new());
    let models = fields(GOOD)
        .into_iter()
        .find(|(n, _)| n == "models")
        .map(|(_, v)| v);
    assert_eq!(models.as_deref(), Some("the pool forgets"));
}

#[test]
fn a_header_missing_a_field_or_naming_an_unknown_figure_is_reported() {
    let no_plausible = GOOD.replace("# plausible: a slip\n", "");
    assert_eq!(
        header_problems("slow-pool", &no_plausible),
        vec!["slow-pool: no `# plausible:`".to_string()]
    );
    let unknown = GOOD.replace("dram, total", "dram, hbm");
    assert!(header_problems("slow-pool", &unknown)
        .iter()
        .any(|p| p.contains("names `hbm`")));
    assert!(
        header_problems("slow-pool", &GOOD.replace("dram, total", "goodput")).is_empty(),
        "goodput is a figure"
    );
}

#[test]
fn a_header_under_another_name_or_with_another_comparison_is_reported() {
    let problems = header_problems("fast-pool", GOOD);
    assert!(problems
        .iter()
        .any(|p| p.contains("is not the file's name")));
    assert!(problems.iter().any(|p| p.contains("`# compare:` must be")));
    let other_target = GOOD.replace("--target workload", "--target phase1");
    assert!(header_problems("slow-pool", &other_target)
        .iter()
        .any(|p| p.contains("`# compare:` must be")));
    let other_lane = GOOD.replace("# lanes: cpu", "# lanes: gpu");
    assert!(header_problems("slow-pool", &other_lane)
        .iter()
        .any(|p| p.contains("a lane is")));
}
