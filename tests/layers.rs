//! The crate's rooms stand in layers: a file of `src/` imports only rooms of
//! lower layers (`crate::<room>`), never one of its own layer or above, so
//! no import runs back up and no import cycle spans rooms.
//! docs/architecture.md's "Layers" block lists the same rooms on the same
//! lines.
//!
//! A room is a folder of `src/` or a file at its root (`lanes.rs` is the room
//! `lanes`); `src/main.rs` and `src/lib.rs` stand above every room.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, top first; each line's rooms import only those below it.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["mutants", "gate"],
    &["lanes"],
    &["fault_matrix"],
    &["cases", "compare"],
    &["suite"],
    &["reference", "peer_bench"],
    &["stack", "workload", "drive"],
    &["evidence", "runner", "verdict"],
    &["config"],
    &["engine"],
    &["client", "gpu", "pyenv"],
    &["proc"],
    &["events"],
    &[
        "stats",
        "telemetry",
        "utc",
        "prompts",
        "wait",
        "rt",
        "words",
    ],
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Each room's layer, 0 at the top.
fn layer_of() -> BTreeMap<&'static str, usize> {
    let mut layers = BTreeMap::new();
    for (depth, rooms) in LAYERS.iter().enumerate() {
        for room in *rooms {
            assert!(
                layers.insert(*room, depth).is_none(),
                "{room} is on two lines of LAYERS"
            );
        }
    }
    layers
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The room a file of `src/` belongs to, or `None` for main.rs and lib.rs.
fn room_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("under src/");
    let first = relative.components().next()?.as_os_str().to_str()?;
    match first {
        "main.rs" | "lib.rs" => None,
        _ => Some(first.trim_end_matches(".rs").to_string()),
    }
}

/// The rooms a line of code names as `crate::<room>` (comments left out).
fn rooms_named(line: &str) -> Vec<&str> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return Vec::new();
    }
    let code = code.split(" //").next().unwrap_or(code);
    code.match_indices("crate::")
        .filter(|(at, _)| {
            // `kvcr_e2e::...crate::` is not ours; a word that ends in
            // `crate` (`subcrate::`) is no path either.
            let before = code[..*at].chars().next_back();
            !matches!(before, Some(c) if c.is_alphanumeric() || c == '_')
        })
        .map(|(at, token)| {
            let rest = &code[at + token.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|room| !room.is_empty())
        .collect()
}

/// Every import of `src/` that does not run to a lower layer, as
/// `file:line: room (layer) -> room (layer)`.
fn imports_not_downward(src: &Path) -> Vec<String> {
    let layers = layer_of();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let Some(room) = room_of(src, file) else {
            continue;
        };
        let Some(&from) = layers.get(room.as_str()) else {
            wrong.push(format!(
                "{}: room `{room}` is on no line of LAYERS",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("source file");
        for (n, line) in text.lines().enumerate() {
            for to_room in rooms_named(line) {
                if to_room == room {
                    continue;
                }
                match layers.get(to_room) {
                    Some(&to) if to > from => {}
                    Some(&to) => wrong.push(format!(
                        "{}:{}: {room} (layer {from}) imports {to_room} (layer {to})",
                        file.display(),
                        n + 1
                    )),
                    None => wrong.push(format!(
                        "{}:{}: imports `{to_room}`, which is on no line of LAYERS",
                        file.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    wrong
}

#[test]
fn every_import_runs_to_a_lower_layer() {
    let wrong = imports_not_downward(&root().join("src"));
    assert!(
        wrong.is_empty(),
        "imports that do not run down (move the item to a lower room, or pass it in):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_room_of_src_is_on_a_line() {
    let layers = layer_of();
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let missing: Vec<String> = files
        .iter()
        .filter_map(|f| room_of(&src, f))
        .filter(|room| !layers.contains_key(room.as_str()))
        .collect();
    assert!(missing.is_empty(), "rooms on no line: {missing:?}");
    let absent: Vec<&&str> = layers
        .keys()
        .filter(|room| !src.join(room).is_dir() && !src.join(format!("{room}.rs")).is_file())
        .collect();
    assert!(
        absent.is_empty(),
        "LAYERS names rooms src/ lacks: {absent:?}"
    );
}

/// docs/architecture.md's "Layers" block: the rooms of each line, top first
/// (the line below the program line `e2e/<target>.rs …`).
fn documented_layers() -> Vec<Vec<String>> {
    let path = root().join("docs/architecture.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let section = doc
        .split("## Layers")
        .nth(1)
        .expect("docs/architecture.md has a Layers section");
    let block = section
        .split("```")
        .nth(1)
        .expect("the Layers section holds a code block");
    block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("e2e/"))
        .map(|line| {
            let rooms = line.split("  ").next().unwrap_or(line);
            rooms.split('·').map(|r| r.trim().to_string()).collect()
        })
        .collect()
}

#[test]
fn the_architecture_page_draws_the_same_layers() {
    let expected: Vec<Vec<String>> = LAYERS
        .iter()
        .map(|rooms| rooms.iter().map(|r| r.to_string()).collect())
        .collect();
    assert_eq!(
        documented_layers(),
        expected,
        "docs/architecture.md's Layers block and LAYERS disagree"
    );
}

/// [`imports_not_downward`] over a made-up `src/` of `(path, text)` files.
fn scan(name: &str, files: &[(&str, &str)]) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("kvcr-e2e-layers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("temp src");
        std::fs::write(&path, text).expect("write");
    }
    let wrong = imports_not_downward(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    wrong
}

#[test]
fn an_import_back_up_is_reported() {
    let wrong = scan(
        "up",
        &[
            (
                "wait.rs",
                "//! [`crate::suite`] in a comment is no import.\nuse crate::suite::Suite;\n",
            ),
            ("suite/mod.rs", "use crate::wait::until;\n"),
            ("main.rs", "use kvcr_e2e::cli;\n"),
        ],
    );
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(
        wrong[0].ends_with("wait.rs:2: wait (layer 14) imports suite (layer 5)"),
        "{wrong:?}"
    );
}

#[test]
fn an_import_within_a_layer_or_to_an_unknown_room_is_reported() {
    let wrong = scan(
        "across",
        &[
            ("cases/tc01.rs", "use crate::compare::Gate; // crate::x\n"),
            ("compare/mod.rs", "use crate::stats::quantile;\n"),
            ("stats/mod.rs", "fn f() { crate::attic::g() }\n"),
        ],
    );
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(
        wrong[0].ends_with("tc01.rs:1: cases (layer 4) imports compare (layer 4)"),
        "{wrong:?}"
    );
    assert!(
        wrong[1].ends_with("mod.rs:1: imports `attic`, which is on no line of LAYERS"),
        "{wrong:?}"
    );
}
