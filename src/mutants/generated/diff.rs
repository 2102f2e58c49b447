//! A generated mutant as a unified diff against the pristine module, in the
//! layout of the curated ones (`a/kvcr/<module>.py`, `patch -p1` from
//! site-packages), so it goes through the same `--kvcr SPEC+FILE.diff` build.

/// Lines of context around the change, as `diff -u`.
pub const CONTEXT: usize = 3;

/// The diff turning `old` into `new` for `path` (`kvcr/local_dram.py`),
/// one hunk spanning the first to the last changed line (cosmic-ray
/// re-emits the module byte for byte but at its one mutation), below the
/// comment lines `header` (each written as `# <line>`, skipped by `patch`).
/// `None` when the two are the same.
pub fn unified(path: &str, old: &str, new: &str, header: &[String]) -> Option<String> {
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if prefix == a.len() && prefix == b.len() {
        return None;
    }
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let start = prefix.saturating_sub(CONTEXT);
    let a_end = (a.len() - suffix + CONTEXT).min(a.len());
    let b_end = (b.len() - suffix + CONTEXT).min(b.len());
    let mut out = String::new();
    for line in header {
        out.push_str(&format!("# {line}\n"));
    }
    out.push_str(&format!("--- a/{path}\n+++ b/{path}\n"));
    out.push_str(&format!(
        "@@ -{} +{} @@\n",
        range(start, a_end - start),
        range(start, b_end - start)
    ));
    let mut emit = |mark: char, line: &str| {
        out.push(mark);
        out.push_str(line);
        if !line.ends_with('\n') {
            out.push_str("\n\\ No newline at end of file\n");
        }
    };
    for line in &a[start..prefix] {
        emit(' ', line);
    }
    for line in &a[prefix..a.len() - suffix] {
        emit('-', line);
    }
    for line in &b[prefix..b.len() - suffix] {
        emit('+', line);
    }
    for line in &a[a.len() - suffix..a_end] {
        emit(' ', line);
    }
    Some(out)
}

/// `start,count` of a hunk side, 1-based; an empty side names the line
/// before it, as `diff -u` does.
fn range(start: usize, count: usize) -> String {
    match count {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        n => format!("{},{n}", start + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn module(lines: usize) -> String {
        (1..=lines)
            .map(|i| format!("    x{i} = {i} < limit\n"))
            .collect()
    }

    /// Applies `diff` with `patch -p1` to a copy of `old` at `path` and
    /// returns the patched file.
    fn apply(path: &str, old: &str, diff: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, old).unwrap();
        let patch = dir.path().join("m.diff");
        std::fs::write(&patch, diff).unwrap();
        let out = Command::new("patch")
            .args(["-p1", "--no-backup-if-mismatch", "-F0", "-i"])
            .arg(&patch)
            .current_dir(dir.path())
            .output()
            .expect("`patch` is installed (the --kvcr build needs it too)");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{said}");
        assert!(
            !said.contains("offset") && !said.contains("fuzz"),
            "applies exactly: {said}"
        );
        std::fs::read_to_string(file).unwrap()
    }

    #[test]
    fn the_diff_applies_to_a_copy_and_changes_only_the_site() {
        let old = module(40);
        for site in [0usize, 1, 17, 38, 39] {
            let new: String = old
                .split_inclusive('\n')
                .enumerate()
                .map(|(i, l)| match i == site {
                    true => l.replace(" < ", " <= "),
                    false => l.to_string(),
                })
                .collect();
            let diff = unified(
                "kvcr/local_dram.py",
                &old,
                &new,
                &["generated: test".into()],
            )
            .unwrap();
            assert!(diff.starts_with(
                "# generated: test\n--- a/kvcr/local_dram.py\n+++ b/kvcr/local_dram.py\n@@ "
            ));
            assert_eq!(
                diff.lines().filter(|l| l.starts_with('-')).count(),
                2,
                "---, one removed line: {diff}"
            );
            let patched = apply("kvcr/local_dram.py", &old, &diff);
            assert_eq!(patched, new, "site {site}");
            let changed: Vec<usize> = old
                .lines()
                .zip(patched.lines())
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .map(|(i, _)| i)
                .collect();
            assert_eq!(changed, [site], "only the site's line differs");
        }
    }

    #[test]
    fn a_change_of_line_count_and_a_last_line_without_newline_apply() {
        let old = format!("{}    return x\n", module(10));
        let new = format!("{}    pass\n    return x\n", module(10));
        let diff = unified("kvcr/core.py", &old, &new, &[]).unwrap();
        assert!(diff.contains("@@ -8,4 +8,5 @@"), "{diff}");
        assert_eq!(apply("kvcr/core.py", &old, &diff), new);

        let old = "a\nb\nc";
        let new = "a\nb\nd";
        let diff = unified("kvcr/core.py", old, new, &[]).unwrap();
        assert!(diff.contains("\\ No newline at end of file"), "{diff}");
        assert_eq!(apply("kvcr/core.py", old, &diff), new);
    }

    #[test]
    fn no_change_is_no_diff() {
        assert_eq!(unified("kvcr/core.py", "a\n", "a\n", &[]), None);
    }
}
