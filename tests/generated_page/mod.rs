//! A docs page with sections a generator writes: the page must be what the
//! generator makes of it, and `UPDATE_DOCS=1` rewrites it (shared by the
//! doc tests of `tests/`).

use std::path::Path;

/// The variable that makes a stale page rewritten instead of failing.
pub const UPDATE_VAR: &str = "UPDATE_DOCS";

/// Passes when `page` (read from `path`) equals `rendered`; with
/// `UPDATE_DOCS` set, writes `rendered` there instead. Otherwise fails with
/// the first line that differs, `source` naming what the page is generated
/// from (`rows`, `needs`), and the command that regenerates it.
pub fn check(path: &Path, page: &str, rendered: &str, source: &str, regenerate: &str) {
    if rendered == page {
        return;
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    if std::env::var_os(UPDATE_VAR).is_some() {
        std::fs::write(path, rendered).unwrap();
        eprintln!("{name} regenerated from the {source}");
        return;
    }
    let (line, (was, is)) = page
        .lines()
        .zip(rendered.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(i, pair)| (i + 1, pair))
        .unwrap_or((
            page.lines().count().min(rendered.lines().count()) + 1,
            ("", ""),
        ));
    panic!(
        "{name} is out of step with the {source} (first difference at line {line}):\n  page: {was}\n  {source}: {is}\nRegenerate it with `{regenerate}` and commit the result."
    );
}
